/*
 * progress.cpp — progress reports of running attempts: awa.set_progress (one attempt) and
 * awa.set_jobs_progress (a batch, one progress value per attempt, one call).
 *
 * A report is a heartbeat that also stores the attempt's latest progress in its
 * awa.attempt_state row (both plane modes; a lease row has no column for it), created by the
 * attempt's first report or heartbeat and refreshed in place by later ones (an update that
 * changes no key column: a HOT update while the page has room, fillfactor 80). The row goes
 * with the attempt (completions and the other exits delete it). Both entry points check every
 * argument before anything is written and answer on the latest committed state, whatever the
 * caller's isolation level, as awa.heartbeat_jobs (attempts.cpp) does, and by the same path:
 * in receipts mode (the default) the receipts are found and tested through the direct access
 * routines (direct_complete.cpp, no planned statement), and the attempt_state rows are
 * inserted or updated there too (a small upsert statement takes a row that changed under
 * it); where the direct path steps aside (Citus, a read-only transaction, a trigger, rule or
 * row security, a missing privilege) the receipts statement below does it. The leases
 * statement runs only for the pairs without a receipt. Each input position comes back true
 * when its attempt was open.
 */
#include "pg_boundary.hpp"
#include "citus.hpp"
#include "direct_complete.hpp"
#include "receipt_sql.hpp"
#include "report_commit.hpp"
#include "ring.hpp"
#include "spi_util.hpp"
#include "validate.hpp"

extern "C"
{
#include "catalog/pg_type.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
}

#include <cstdlib>

namespace
{

/* Kept plans; [2]: [0] by id alone, [1] in the queue given (the routing argument). */
SPIPlanPtr progress_receipts_plan[2];
SPIPlanPtr progress_leases_plan[2];

/*
 * The distinct pairs of ($1 job_ids, $2 run_leases) with their progress ($P, jsonb[]), in
 * (job_id, run_lease) order; a pair given twice keeps its last progress.
 */
#define PROGRESS_INPUT_SQL(P)                                                                                          \
	"WITH input AS MATERIALIZED (SELECT DISTINCT ON (t.job_id, t.run_lease) t.job_id, t.run_lease, t.progress "        \
	"  FROM unnest($1::bigint[], $2::bigint[], $" P "::jsonb[]) WITH ORDINALITY AS t(job_id, run_lease, progress, o) " \
	"  ORDER BY t.job_id, t.run_lease, t.o DESC), "

/* The queue condition of form [1] on ALIAS (parameter N). */
#define PROGRESS_IN_QUEUE(ALIAS, N) " AND " ALIAS ".queue = $" N " "

/* The receipt of the input pair `i`, through its ready row, on the live arcs ($3..$6, $7..$10). */
#define PROGRESS_RECEIPT_SQL(Q)                                                                                        \
	"(SELECT " AWA_RECEIPT_COLUMNS " FROM " AWA_RECEIPT_FROM_READY_ON(                                                 \
		AWA_CLAIM_ARC_OF_B) " WHERE " AWA_RECEIPT_IS_INPUT Q                                                           \
							" AND (r.ready_slot BETWEEN $7 AND $8 OR r.ready_slot BETWEEN $9 AND $10) OFFSET 0)"

/* The attempt_state rows of the open attempts `open_receipts`, created or refreshed. */
#define PROGRESS_UPSERT_SQL                                                                                            \
	"INSERT INTO awa.attempt_state (job_id, run_lease, heartbeat_at, progress, updated_at, queue) "                    \
	"SELECT job_id, run_lease, clock_timestamp(), progress, clock_timestamp(), queue FROM open_receipts "              \
	"ON CONFLICT (job_id, run_lease, queue) DO UPDATE SET heartbeat_at = EXCLUDED.heartbeat_at, "                      \
	"  progress = coalesce(EXCLUDED.progress, awa.attempt_state.progress), updated_at = EXCLUDED.updated_at "          \
	"RETURNING job_id, run_lease"

/* The open-receipt test of `c` on the live arcs (receipt_sql.hpp). */
#define PROGRESS_OPEN_TEST AWA_READY_RECEIPT_OPEN_LIVE("3", "4", "5", "6", "7", "8", "9", "10")

/*
 * Receipts mode: the open receipts among the pairs get their heartbeat and progress in their
 * attempt_state row (a NULL progress keeps the one stored). Each receipt is probed from the
 * sorted input through its ready row on the live arcs: $3..$6 the claim ring's, $7..$10 the
 * queue ring's; $11 the progress values, $12 the queue of form [1]. Returns the open pairs.
 */
#define PROGRESS_RECEIPTS_SQL(Q)                                                                                       \
	PROGRESS_INPUT_SQL("11")                                                                                           \
	"open_receipts AS (SELECT c.job_id, c.run_lease, c.queue, i.progress FROM input i "                                \
	"  CROSS JOIN LATERAL " PROGRESS_RECEIPT_SQL(Q) " c WHERE " PROGRESS_OPEN_TEST ") " PROGRESS_UPSERT_SQL
const char *const kProgressReceiptsSql[2] = {PROGRESS_RECEIPTS_SQL(""),
											 PROGRESS_RECEIPTS_SQL(PROGRESS_IN_QUEUE("r", "12"))};

/*
 * Leases mode: the running leases among the pairs, locked in (job_id, run_lease) order (the
 * order of the rescues and completions, as awa.heartbeat_jobs), get their heartbeat; their
 * progress (when not NULL) goes to attempt_state with the heartbeat's time, so that the sweep
 * of awa.rescue_stale_heartbeats removes a row left behind by an attempt that ended
 * meanwhile. $3..$6: the lease ring's live arc, $7 the progress values, $8 the queue of form
 * [1]. Returns the open pairs.
 */
#define PROGRESS_LEASES_SQL(Q)                                                                                         \
	PROGRESS_INPUT_SQL("7")                                                                                            \
	"keys AS MATERIALIZED (SELECT l.*, i.progress FROM input i CROSS JOIN LATERAL ("                                   \
	"  SELECT l.lease_slot, l.queue, l.priority, l.enqueue_shard, l.lane_seq, l.job_id, l.run_lease "                  \
	"  FROM awa.leases l WHERE l.job_id = i.job_id AND l.run_lease = i.run_lease " Q                                   \
	"    AND l.state IN ('running', 'waiting_external') "                                                              \
	"    AND (l.lease_slot BETWEEN $3 AND $4 OR l.lease_slot BETWEEN $5 AND $6) FOR UPDATE OF l) l), "                 \
	"progress AS (INSERT INTO awa.attempt_state (job_id, run_lease, heartbeat_at, progress, updated_at, queue) "       \
	"  SELECT k.job_id, k.run_lease, clock_timestamp(), k.progress, clock_timestamp(), k.queue FROM keys k "           \
	"  WHERE k.progress IS NOT NULL "                                                                                  \
	"  ON CONFLICT (job_id, run_lease, queue) DO UPDATE SET heartbeat_at = EXCLUDED.heartbeat_at, "                    \
	"    progress = EXCLUDED.progress, updated_at = EXCLUDED.updated_at) "                                             \
	"UPDATE awa.leases l SET heartbeat_at = clock_timestamp() FROM keys k "                                            \
	" WHERE l.job_id = ANY ($1) " Q " AND l.lease_slot = k.lease_slot AND l.queue = k.queue "                          \
	"   AND l.priority = k.priority AND l.enqueue_shard = k.enqueue_shard AND l.lane_seq = k.lane_seq "                \
	"   AND (l.lease_slot BETWEEN $3 AND $4 OR l.lease_slot BETWEEN $5 AND $6) "                                       \
	"RETURNING l.job_id, l.run_lease"
const char *const kProgressLeasesSql[2] = {PROGRESS_LEASES_SQL(""), PROGRESS_LEASES_SQL(PROGRESS_IN_QUEUE("l", "8"))};

/* One (job_id, run_lease) pair. */
struct Pair
{
	int64 job_id;
	int64 run_lease;
};

/* Order of pairs: by job_id, then run_lease (qsort and bsearch). */
int
compare_pairs(const void *a, const void *b)
{
	const Pair *x = static_cast<const Pair *>(a);
	const Pair *y = static_cast<const Pair *>(b);

	if (x->job_id != y->job_id)
		return x->job_id < y->job_id ? -1 : 1;
	if (x->run_lease != y->run_lease)
		return x->run_lease < y->run_lease ? -1 : 1;
	return 0;
}

/* How many distinct pairs a sorted array holds. */
int
count_distinct(const Pair *sorted, int n)
{
	int distinct = n > 0 ? 1 : 0;

	for (int k = 1; k < n; k++)
		if (compare_pairs(&sorted[k - 1], &sorted[k]) != 0)
			distinct++;
	return distinct;
}

/* Append the (job_id, run_lease) rows the last SPI statement returned to open[*n_open]. */
void
collect_open_pairs(Pair *open, int *n_open)
{
	for (uint64 k = 0; k < SPI_processed; k++)
	{
		bool null_id;
		bool null_lease;
		Datum id = SPI_getbinval(SPI_tuptable->vals[k], SPI_tuptable->tupdesc, 1, &null_id);
		Datum lease = SPI_getbinval(SPI_tuptable->vals[k], SPI_tuptable->tupdesc, 2, &null_lease);

		if (null_id || null_lease)
			elog(ERROR, "awa_shard: a progress statement returned a NULL pair");
		open[*n_open].job_id = DatumGetInt64(id);
		open[*n_open].run_lease = DatumGetInt64(lease);
		(*n_open)++;
	}
}

/* Put a live arc into values[at .. at + 3]. */
void
put_arc(const int arc[4], Datum *values, int at)
{
	for (int k = 0; k < 4; k++)
		values[at + k] = Int32GetDatum(arc[k]);
}

/*
 * The kept plan of statement form q of `sql`: with the queue on a Citus cluster the one that
 * names its shards (citus.cpp), else the generic plan kept in *kept.
 */
SPIPlanPtr
progress_plan(SPIPlanPtr *kept, const char *const sql[2], int q, Datum queue, int nargs, const Oid *types)
{
	SPIPlanPtr plan = q ? awa::keep_shard_plan(sql[1], DatumGetTextPP(queue), nargs, types) : nullptr;

	return plan != nullptr ? plan : awa::keep_generic_plan(kept, sql[q], nargs, types);
}

/* Run the leases statement of form q on the pairs (ids, leases, progress); append the open ones. */
void
record_lease_progress(int q, Datum ids_array, Datum leases_array, Datum progress, Datum queue, const int lease_arc[4],
					  int expected_at_most, Pair *found, int *n_found)
{
	static const Oid lease_types[8] = {INT8ARRAYOID, INT8ARRAYOID, INT4OID,		  INT4OID,
									   INT4OID,		 INT4OID,	   JSONBARRAYOID, TEXTOID};
	Datum args[8];
	char nulls[8];

	memset(nulls, ' ', sizeof(nulls));
	args[0] = ids_array;
	args[1] = leases_array;
	put_arc(lease_arc, args, 2);
	args[6] = progress;
	args[7] = queue;
	nulls[7] = q ? ' ' : 'n';
	awa::exec_plan_latest(progress_plan(&progress_leases_plan[q], kProgressLeasesSql, q, queue, 8, lease_types), args,
						  nulls, false, 0, SPI_OK_UPDATE_RETURNING, "lease progress");
	if (SPI_processed > static_cast<uint64>(expected_at_most))
		elog(ERROR, "awa_shard: lease progress returned more pairs than it was given");
	collect_open_pairs(found, n_found);
}

/*
 * Record the heartbeat and progress of the open attempts among the n pairs (ids[k],
 * leases[k]) with progress values `progress` (a jsonb[] of n elements, NULL elements keep the
 * stored progress), only in `queue` when it is not 0; open[k] says whether pair k was open.
 * The arguments are checked by the caller. Receipts go through the direct access routines
 * (direct_complete.cpp, as awa.heartbeat_jobs) and, where those step aside, through the
 * receipts statement; the leases statement then takes the pairs without a receipt.
 */
void
record_progress(const Datum *ids, const Datum *leases, int n, Datum ids_array, Datum leases_array, Datum progress,
				Datum queue, bool *open)
{
	static const Oid receipt_types[12] = {INT8ARRAYOID, INT8ARRAYOID, INT4OID, INT4OID, INT4OID,	   INT4OID,
										  INT4OID,		INT4OID,	  INT4OID, INT4OID, JSONBARRAYOID, TEXTOID};
	int q = queue != (Datum)0 ? 1 : 0;
	Pair *input = static_cast<Pair *>(palloc(sizeof(Pair) * n));
	Pair *found = static_cast<Pair *>(palloc(sizeof(Pair) * n));
	int n_found = 0;
	int distinct;
	int queue_arc[4];
	int claim_arc[4];
	int lease_arc[4];
	int level;
	awa::DirectHeartbeat direct;
	bool direct_only = false;

	for (int k = 0; k < n; k++)
	{
		input[k].job_id = DatumGetInt64(ids[k]);
		input[k].run_lease = DatumGetInt64(leases[k]);
	}
	qsort(input, n, sizeof(Pair), compare_pairs);
	distinct = count_distinct(input, n);

	/* On a Citus cluster: delegated by p_queue, or refused (0A000) before anything is written. */
	awa::require_queue_local_or_given(q ? DatumGetTextPP(queue) : nullptr);
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "awa_shard: SPI_connect failed");
	awa::report_writes_begin();
	level = awa::push_hot_path_planner();
	/* The three rings' live arcs in one read (the lease ring's for the leases statement). */
	awa::live_slot_ranges_all(queue_arc, claim_arc, lease_arc);
	if (awa::direct_heartbeat_receipts(DatumGetArrayTypeP(ids_array), DatumGetArrayTypeP(leases_array),
									   DatumGetArrayTypeP(progress), q ? DatumGetTextPP(queue) : nullptr, queue_arc,
									   claim_arc, &direct))
	{
		direct_only = !direct.ran_statement && direct.nleft == 0;
		for (uint64 k = 0; k < direct.alive; k++)
			found[n_found++] = {direct.open[k].job_id, direct.open[k].run_lease};
		/* Only the pairs without a receipt (leases, stale pairs), and none on the common path. */
		if (direct.nleft > 0)
			record_lease_progress(q, PointerGetDatum(direct.left_ids), PointerGetDatum(direct.left_leases),
								  PointerGetDatum(direct.left_progress), queue, lease_arc, direct.nleft, found,
								  &n_found);
	}
	else
	{
		Datum args[12];
		char nulls[12];

		memset(nulls, ' ', sizeof(nulls));
		args[0] = ids_array;
		args[1] = leases_array;
		put_arc(claim_arc, args, 2);
		put_arc(queue_arc, args, 6);
		args[10] = progress;
		args[11] = queue;
		nulls[11] = q ? ' ' : 'n';
		awa::exec_plan_latest(
			progress_plan(&progress_receipts_plan[q], kProgressReceiptsSql, q, queue, 12, receipt_types), args, nulls,
			false, 0, SPI_OK_INSERT_RETURNING, "receipt progress");
		/* Each open pair comes back once (a pair is unique in the input): at most n rows. */
		if (SPI_processed > static_cast<uint64>(distinct))
			elog(ERROR, "awa_shard: receipt progress returned more pairs than it was given");
		collect_open_pairs(found, &n_found);
		/* An attempt is a receipt or a lease: when every pair was a receipt, no lease is one. */
		if (n_found < distinct)
			record_lease_progress(q, ids_array, leases_array, progress, queue, lease_arc, distinct - n_found, found,
								  &n_found);
	}
	awa::pop_hot_path_planner(level);
	awa::report_writes_end(direct_only);
	if (SPI_finish() != SPI_OK_FINISH)
		elog(ERROR, "awa_shard: SPI_finish failed");

	qsort(found, n_found, sizeof(Pair), compare_pairs);
	for (int k = 0; k < n; k++)
	{
		Pair key = {DatumGetInt64(ids[k]), DatumGetInt64(leases[k])};

		open[k] = n_found > 0 && bsearch(&key, found, n_found, sizeof(Pair), compare_pairs) != nullptr;
	}
	pfree(input);
	pfree(found);
}

} // namespace

/*
 * awa.set_progress(job_id, run_lease, progress[, queue]) -> boolean: record the progress of
 * one attempt (also a heartbeat); true when it is open. Every argument but the queue must
 * not be NULL (22004); the progress at most kMaxResultBytes (22023).
 */
AWA_SQL_FUNCTION(awa_set_progress)
{
	Datum ids[1];
	Datum leases[1];
	Datum progress[1];
	bool open[1];

	awa::require_not_null(PG_ARGISNULL(0), "p_job_id");
	awa::require_not_null(PG_ARGISNULL(1), "p_run_lease");
	awa::require_not_null(PG_ARGISNULL(2), "p_progress");
	awa::check_json_size(PG_GETARG_DATUM(2), "p_progress");
	ids[0] = PG_GETARG_DATUM(0);
	leases[0] = PG_GETARG_DATUM(1);
	progress[0] = PG_GETARG_DATUM(2);
	record_progress(ids, leases, 1,
					PointerGetDatum(construct_array(ids, 1, INT8OID, 8, FLOAT8PASSBYVAL, TYPALIGN_DOUBLE)),
					PointerGetDatum(construct_array(leases, 1, INT8OID, 8, FLOAT8PASSBYVAL, TYPALIGN_DOUBLE)),
					PointerGetDatum(construct_array(progress, 1, JSONBOID, -1, false, TYPALIGN_INT)),
					awa::optional_queue_arg(fcinfo, 3, "p_queue"), open);
	PG_RETURN_BOOL(open[0]);
}

/*
 * awa.set_jobs_progress(job_ids[], run_leases[], progress[][, queue]) -> boolean[]: record
 * the progress of a batch of attempts in one call, progress[k] for attempt k (a NULL element
 * keeps the stored progress and is a heartbeat alone); element k of the result is true when
 * attempt k was open. The arrays: not NULL (22004), one-dimensional and equally long (22023),
 * no NULL id or lease (22004), every progress at most kMaxResultBytes (22023), all checked
 * before anything is written.
 */
AWA_SQL_FUNCTION(awa_set_jobs_progress)
{
	ArrayType *id_array = awa::checked_id_array(fcinfo, 0, "p_job_ids");
	ArrayType *lease_array = awa::checked_id_array(fcinfo, 1, "p_run_leases");
	ArrayType *progress_array;
	Datum *ids;
	Datum *leases;
	Datum *progress;
	bool *progress_nulls;
	bool *open;
	Datum *out;
	int n_ids;
	int n_leases;
	int n_progress;

	awa::require_not_null(PG_ARGISNULL(2), "p_progress");
	progress_array = PG_GETARG_ARRAYTYPE_P(2);
	awa::check_one_dimensional(progress_array, "p_progress");
	deconstruct_array(id_array, INT8OID, 8, FLOAT8PASSBYVAL, TYPALIGN_DOUBLE, &ids, nullptr, &n_ids);
	deconstruct_array(lease_array, INT8OID, 8, FLOAT8PASSBYVAL, TYPALIGN_DOUBLE, &leases, nullptr, &n_leases);
	deconstruct_array(progress_array, JSONBOID, -1, false, TYPALIGN_INT, &progress, &progress_nulls, &n_progress);
	awa::check_same_length(n_ids, n_leases, "p_job_ids", "p_run_leases");
	awa::check_same_length(n_ids, n_progress, "p_job_ids", "p_progress");
	for (int k = 0; k < n_progress; k++)
	{
		char name[32];

		if (progress_nulls[k])
			continue;
		snprintf(name, sizeof(name), "p_progress[%d]", k + 1);
		awa::check_json_size(progress[k], name);
	}
	if (n_ids == 0)
		PG_RETURN_ARRAYTYPE_P(construct_empty_array(BOOLOID));
	open = static_cast<bool *>(palloc(sizeof(bool) * n_ids));
	record_progress(ids, leases, n_ids, PointerGetDatum(id_array), PointerGetDatum(lease_array),
					PointerGetDatum(progress_array), awa::optional_queue_arg(fcinfo, 3, "p_queue"), open);
	out = static_cast<Datum *>(palloc(sizeof(Datum) * n_ids));
	for (int k = 0; k < n_ids; k++)
		out[k] = BoolGetDatum(open[k]);
	PG_RETURN_ARRAYTYPE_P(construct_array(out, n_ids, BOOLOID, 1, true, TYPALIGN_CHAR));
}
