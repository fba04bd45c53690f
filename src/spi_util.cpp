/* spi_util.cpp — checked SPI: plans prepared once per backend, exact result codes. */
#include "spi_util.hpp"
#include "citus.hpp"
#include "statement_settings.hpp"

extern "C"
{
#include "access/xact.h"
#include "utils/guc.h"
#include "utils/resowner.h"
#include "utils/snapmgr.h"
}

namespace awa
{

/* Prepare `sql` into *slot on first use and keep it for the backend's lifetime. */
SPIPlanPtr
keep_plan(SPIPlanPtr *slot, const char *sql, int nargs, const Oid *argtypes)
{
	if (*slot == nullptr)
	{
		SPIPlanPtr plan;

		pin_statement_settings();
		plan = SPI_prepare(sql, nargs, const_cast<Oid *>(argtypes));

		if (plan == nullptr)
			elog(ERROR, "awa_shard: SPI_prepare failed (%s) for: %s", SPI_result_code_string(SPI_result), sql);
		if (SPI_keepplan(plan) != 0)
			elog(ERROR, "awa_shard: SPI_keepplan failed");
		*slot = plan;
	}
	return *slot;
}

/*
 * Like keep_plan, but the plan is always the generic one. A statement run once per job on
 * the partitioned ring tables, with the live slots as parameters, would otherwise get a
 * custom plan (its estimate prunes partitions, so the plan cache never prefers the generic
 * plan) and be planned again on every call, several times the cost of running it; the
 * generic plan prunes the same partitions at executor start-up.
 */
SPIPlanPtr
keep_generic_plan(SPIPlanPtr *slot, const char *sql, int nargs, const Oid *argtypes)
{
	if (*slot == nullptr)
	{
		/* Under Citus a statement is routed by its queue value: custom plans there. */
		int options = citus_present() ? CURSOR_OPT_CUSTOM_PLAN : CURSOR_OPT_GENERIC_PLAN;
		SPIPlanPtr plan;

		pin_statement_settings();
		plan = SPI_prepare_cursor(sql, nargs, const_cast<Oid *>(argtypes), options);

		if (plan == nullptr)
			elog(ERROR, "awa_shard: SPI_prepare_cursor failed (%s) for: %s", SPI_result_code_string(SPI_result), sql);
		if (SPI_keepplan(plan) != 0)
			elog(ERROR, "awa_shard: SPI_keepplan failed");
		*slot = plan;
	}
	return *slot;
}

/* The first column of the one row the last SPI statement returned; false when it returned no
 * row or a NULL there. */
bool
spi_single_value(Datum *value)
{
	bool isnull;

	if (SPI_processed != 1)
		return false;
	*value = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull);
	return !isnull;
}

/* Run a kept plan; anything but the expected SPI code is a "cannot happen" error. */
void
exec_plan(SPIPlanPtr plan, const Datum *values, const char *nulls, bool read_only, long count, int expected,
		  const char *what)
{
	int rc;

	pin_statement_settings();
	rc = SPI_execute_plan(plan, const_cast<Datum *>(values), nulls, read_only, count);

	if (rc != expected)
		elog(ERROR, "awa_shard: %s returned %s, expected %s", what, SPI_result_code_string(rc),
			 SPI_result_code_string(expected));
}

/*
 * Run a kept plan with a fresh snapshot of the latest committed state. The hot
 * path reads ring cursors, lanes and widths this way, so a REPEATABLE READ or SERIALIZABLE
 * caller behaves like a READ COMMITTED one (docs/design.md, isolation levels). The statement
 * is a query of its own for AFTER triggers, as in SPI_execute_plan: a user's trigger on a
 * table it writes fires at its end (without that, a claim called from a plain SELECT, which
 * opens no trigger context, failed with "AfterTriggerSaveEvent() called outside of query").
 */
void
exec_plan_latest(SPIPlanPtr plan, const Datum *values, const char *nulls, bool read_only, long count, int expected,
				 const char *what)
{
	exec_plan_snapshot(plan, values, nulls, read_only, count, expected, what, GetLatestSnapshot());
}

/* A planned statement under the caller's snapshot, as exec_plan_latest (spi_util.hpp). */
void
exec_plan_snapshot(SPIPlanPtr plan, const Datum *values, const char *nulls, bool read_only, long count, int expected,
				   const char *what, Snapshot snapshot)
{
	int rc;

	pin_statement_settings();
	rc = SPI_execute_snapshot(plan, const_cast<Datum *>(values), nulls, snapshot, InvalidSnapshot, read_only, true,
							  count);

	if (rc != expected)
		elog(ERROR, "awa_shard: %s returned %s, expected %s", what, SPI_result_code_string(rc),
			 SPI_result_code_string(expected));
}

/*
 * The hot path's planner settings, pushed on a GUC nest level until pop_hot_path_planner
 * (or the end of the (sub)transaction on error) restores the session's. A lane is read by
 * an ordered index scan that stops after the batch; a bitmap or sequential scan, or an
 * unordered scan plus a sort, would read every remaining row of the lane; per-job rows are
 * found by nested loops of index probes, which a session without nested loops would turn
 * into hash joins reading whole tables. Which plan a statement gets would otherwise depend
 * on the statistics when it was planned and on the caller's settings (docs/design.md §4,
 * "Claim cost"). JIT is off: the disabled scan types add their penalty to a plan's cost
 * estimate, which then crosses the JIT thresholds, and compiling a statement that reads a
 * few rows took seconds (a cancel_job of one running job: 2.6-3.7 s).
 */
int
push_hot_path_planner()
{
	static const char *const kPinned[][2] = {{"enable_indexscan", "on"}, {"enable_bitmapscan", "off"},
											 {"enable_seqscan", "off"},	 {"enable_sort", "off"},
											 {"enable_nestloop", "on"},	 {"jit", "off"}};
	int level;

	/* Below this level, so that popping it keeps the statements' search path. */
	pin_statement_settings();
	level = NewGUCNestLevel();
	for (const auto &setting : kPinned)
		(void)set_config_option(setting[0], setting[1], PGC_USERSET, PGC_S_SESSION, GUC_ACTION_SAVE, true, 0, false);
	return level;
}

/* Restore the settings push_hot_path_planner replaced. */
void
pop_hot_path_planner(int level)
{
	AtEOXact_GUC(true, level);
}

/*
 * Run fn(arg) in an internal subtransaction. At REPEATABLE READ and SERIALIZABLE a statement
 * that meets a row changed after the transaction's snapshot raises 40001 even under SKIP
 * LOCKED; a caller that can do without what fn does (walk again, promote later) rolls that
 * back here instead of failing the whole call. Any other error is raised again.
 */
bool
run_unless_serialization_failure(void (*fn)(void *), void *arg)
{
	MemoryContext cxt = CurrentMemoryContext;
	ResourceOwner owner = CurrentResourceOwner;
	volatile bool done = false;

	/* Outside the subtransaction, whose release would undo it. */
	pin_statement_settings();
	BeginInternalSubTransaction(nullptr);
	MemoryContextSwitchTo(cxt);
	PG_TRY();
	{
		fn(arg);
		ReleaseCurrentSubTransaction();
		MemoryContextSwitchTo(cxt);
		CurrentResourceOwner = owner;
		done = true;
	}
	PG_CATCH();
	{
		ErrorData *edata;

		MemoryContextSwitchTo(cxt);
		edata = CopyErrorData();
		FlushErrorState();
		RollbackAndReleaseCurrentSubTransaction();
		MemoryContextSwitchTo(cxt);
		CurrentResourceOwner = owner;
		if (edata->sqlerrcode != ERRCODE_T_R_SERIALIZATION_FAILURE)
			ReThrowError(edata);
		FreeErrorData(edata);
	}
	PG_END_TRY();
	return done;
}

/* Whether `name` is `index` followed by _ and a Citus shard id. */
static bool
is_shard_of(const char *name, const char *index)
{
	size_t len = strlen(index);

	if (strncmp(name, index, len) != 0 || name[len] != '_' || name[len + 1] == '\0')
		return false;
	for (const char *c = name + len + 1; *c != '\0'; c++)
		if (*c < '0' || *c > '9')
			return false;
	return true;
}

/* `text` with its first `"from"` replaced by `"to"` (quotes included), or `text` itself. */
static char *
replace_quoted(const char *text, const char *from, const char *to)
{
	char *quoted = psprintf("\"%s\"", from);
	const char *at = strstr(text, quoted);

	if (at == nullptr)
		return pstrdup(text);
	return psprintf("%.*s\"%s\"%s", static_cast<int>(at - text), text, to, at + strlen(quoted));
}

/* Run fn(arg), naming a shard's unique violation by its index (spi_util.hpp). */
void
run_naming_shard_index(void (*fn)(void *), void *arg, const char *index, const char *table)
{
	MemoryContext cxt = CurrentMemoryContext;

	PG_TRY();
	{
		fn(arg);
	}
	PG_CATCH();
	{
		ErrorData *edata;

		MemoryContextSwitchTo(cxt);
		edata = CopyErrorData();
		if (edata->sqlerrcode != ERRCODE_UNIQUE_VIOLATION || edata->constraint_name == nullptr ||
			!is_shard_of(edata->constraint_name, index))
		{
			FreeErrorData(edata);
			PG_RE_THROW();
		}
		FlushErrorState();
		edata->message = replace_quoted(edata->message, edata->constraint_name, index);
		edata->constraint_name = pstrdup(index);
		edata->table_name = pstrdup(table);
		ReThrowError(edata);
	}
	PG_END_TRY();
}

} // namespace awa
