/*
 * worker.cpp — a maintenance worker (docs/maintenance.md §1), started by the launcher
 * (launcher.cpp) for a turn in one database: every interval it runs the steps of
 * awa.run_maintenance() (promotion, rescue, ring rotation and prune, retention expiry, the places
 * of unused concurrency keys, the fold of the claim marks), each in its own
 * transaction. Its turn ends when the launcher asks it to yield its slot to a waiting
 * database, when the extension is gone (the database is then marked absent for the
 * launcher) or when the database is wanted for DROP DATABASE and the like. Also the
 * maintenance settings.
 */
#include "claim_cursor.hpp"
#include "launcher.hpp"
#include "module.hpp"
#include "worker.hpp"

#include <algorithm>

extern "C"
{
#include "access/xact.h"
#include "access/genam.h"
#include "access/table.h"
#include "catalog/pg_database.h"
#include "catalog/pg_db_role_setting.h"
#include "catalog/pg_extension.h"
#include "catalog/pg_type.h"
#include "commands/extension.h"
#include "commands/dbcommands.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "postmaster/interrupt.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/lmgr.h"
#include "storage/lock.h"
#include "storage/proc.h"
#include "tcop/tcopprot.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/guc.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"
#include "utils/wait_event.h"

	PGDLLEXPORT void awa_maintenance_main(Datum arg);
}

namespace awa
{

bool maintenance_enabled = true;
char *maintenance_database = nullptr;
int maintenance_interval_ms = 1000;
int max_maintenance_workers = 3;
int stale_heartbeat_secs = 300;

namespace
{

/*
 * The steps of one pass, each run in its own short transaction (docs/maintenance.md §1):
 * a prune's exclusive locks are held only from its truncate to that commit, and no step
 * holds lane locks while another waits. Every name is schema-qualified and the worker's
 * search_path is pinned, so nothing a database owner plants in another schema is called.
 */
struct Step
{
	const char *sql;
	bool needs_claim_marks; /* a 1.0 catalog lacks it: the step waits for the update */
	const char *sql_1_0;	/* run instead on a 1.0 catalog (nullptr: nothing) */
};

const Step kSteps[] = {
	{"SELECT awa.run_schedules(1000)", true}, /* periodic jobs: 1.1, like the claim marks */
	{"SELECT awa.promote_due(1000)", false},
	{"SELECT awa.rescue_expired_deadlines(1000)", false},
	{"SELECT awa.rescue_stale_heartbeats(pg_catalog.make_interval(secs => $1), 1000)", false},
	{"SELECT awa.rotate_queue_ring()", false},
	/* Amortised (1.1): a slot is freed only when that is worth what it copies. */
	{"SELECT awa.prune_queue_ring(200, true)", true, "SELECT awa.prune_queue_ring(200)"},
	{"SELECT awa.rotate_attempt_ring('claim')", false},
	{"SELECT awa.prune_attempt_ring('claim', 200)", false},
	{"SELECT awa.rotate_attempt_ring('lease')", false},
	{"SELECT awa.prune_attempt_ring('lease', 200)", false},
	/* Retention buckets past their expiry (1.1): one truncate a pass. */
	{"SELECT awa.expire_retention(200)", true},
	/* Places of concurrency keys no longer in use (1.1): a range of blocks a pass. */
	{"SELECT awa.prune_key_places()", true},
	{"SELECT awa.fold_claim_marks()", true},
};

/* The step of periodic jobs alone, run again between passes when a tick comes. */
const Step &kScheduleStep = kSteps[0];
/* The next tick of a schedule of this database (1.1), read after each run of the schedules. */
const Step kNextTickStep = {"SELECT awa._next_schedule_tick()", true};

/*
 * Run one statement of a pass in its own transaction, with the extension locked against
 * DROP EXTENSION; errors are logged and kept for awa.maintenance_status, never fatal.
 * With `tick`, the statement's one timestamptz value goes there (0: NULL, none, or not run).
 * Returns whether the extension was there.
 */
bool
run_step(const Step &step, Oid dbid, TimestampTz *tick = nullptr)
{
	const char *volatile sql = step.sql;
	MemoryContext outer = CurrentMemoryContext;
	volatile bool installed = true;

	if (tick != nullptr)
		*tick = 0;
	SetCurrentStatementStartTimestamp();
	StartTransactionCommand();
	PushActiveSnapshot(GetTransactionSnapshot());
	pgstat_report_activity(STATE_RUNNING, sql);
	PG_TRY();
	{
		if (SPI_connect() != SPI_OK_CONNECT)
			elog(ERROR, "awa_shard: SPI_connect failed");
		{
			/* Lock the extension against DROP EXTENSION for this step, then look again. */
			Oid ext = get_extension_oid("awa_shard", true);

			installed = false;
			if (OidIsValid(ext))
			{
				LockDatabaseObject(ExtensionRelationId, ext, 0, AccessShareLock);
				installed = get_extension_oid("awa_shard", true) == ext;
			}
		}
		if (installed && step.needs_claim_marks && step.sql_1_0 != nullptr && !claim_marks_installed())
			sql = step.sql_1_0;
		if (installed && (!step.needs_claim_marks || sql == step.sql_1_0 || claim_marks_installed()))
		{
			Oid argtypes[1] = {INT4OID};
			Datum values[1] = {Int32GetDatum(stale_heartbeat_secs)};
			int nargs = strstr(sql, "$1") != nullptr ? 1 : 0;

			if (SPI_execute_with_args(sql, nargs, argtypes, values, nullptr, false, 0) != SPI_OK_SELECT)
				elog(ERROR, "awa_shard: maintenance step failed: %s", sql);
			if (tick != nullptr && SPI_processed == 1)
			{
				bool isnull;
				Datum v = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull);

				if (!isnull && TupleDescAttr(SPI_tuptable->tupdesc, 0)->atttypid == TIMESTAMPTZOID)
					*tick = DatumGetTimestampTz(v);
			}
		}
		if (SPI_finish() != SPI_OK_FINISH)
			elog(ERROR, "awa_shard: SPI_finish failed");
		PopActiveSnapshot();
		CommitTransactionCommand();
	}
	PG_CATCH();
	{
		ErrorData *edata;

		MemoryContextSwitchTo(outer);
		edata = CopyErrorData();
		EmitErrorReport();
		FlushErrorState();
		AbortCurrentTransaction();
		note_pass_error(dbid, sql, edata->message);
		FreeErrorData(edata);
	}
	PG_END_TRY();
	return installed;
}

/* The next tick of a schedule of this database, or 0 (none, or a 1.0 catalog). */
TimestampTz
next_schedule_tick(Oid dbid)
{
	TimestampTz tick = 0;

	(void)run_step(kNextTickStep, dbid, &tick);
	return tick;
}

/*
 * Run the periodic-jobs step alone when *tick has come, then read the next tick into *tick;
 * one still due after that run (its enqueue failed, or the clock went back) is left to the
 * next pass (0). Returns whether the extension was there.
 */
bool
run_due_ticks(Oid dbid, TimestampTz *tick)
{
	TimestampTz now = GetCurrentTimestamp();

	if (*tick == 0 || now < *tick)
		return true;
	if (!run_step(kScheduleStep, dbid))
		return false;
	*tick = next_schedule_tick(dbid);
	if (*tick <= now)
		*tick = 0;
	return true;
}

/*
 * One maintenance pass: periodic jobs, promotion and rescue every time, ring rotation and prune every
 * tenth pass of the database (every 10 s by default: each prune truncates files, and
 * turning the ring faster than that buys nothing; the count is the database's, kept by the
 * launcher, so workers taking turns keep the cadence). Each step first checks that the
 * extension is still there (a DROP EXTENSION meanwhile ends the pass quietly). A schedule's
 * tick that comes during the pass is run between two steps; *tick is then the next one, for
 * the sleep after the pass (0: none). Returns whether the extension was there.
 */
bool
maintenance_pass(Oid dbid, TimestampTz *tick)
{
	constexpr int kRingEvery = 10;
	constexpr int kFirstRingStep = 4;
	uint64 pass = begin_pass(dbid);
	bool installed = true;
	int k = 0;

	*tick = 0;
	for (const Step &step : kSteps)
	{
		TimestampTz started = GetCurrentTimestamp();

		if (k >= kFirstRingStep && pass % kRingEvery != 0)
			break;
		/* A tick that comes during the pass waits for the step in progress, not the pass. */
		if (k > 0 && !(installed = run_due_ticks(dbid, tick)))
			break;
		if (!(installed = run_step(step, dbid)))
			break;
		/* After the periodic-jobs step: the next tick; one it left due waits for the next pass. */
		if (k++ == 0 && (*tick = next_schedule_tick(dbid)) <= started)
			*tick = 0;
	}
	pgstat_report_stat(true);
	pgstat_report_activity(STATE_IDLE, nullptr);
	return installed;
}

} // namespace

/*
 * Whether `ALTER DATABASE ... SET awa_shard.maintenance = off` turned background maintenance
 * off for one database: its database-wide setting (role 0) in pg_db_role_setting, a shared
 * catalog the launcher can read without a database. Caller is in a transaction.
 */
bool
maintenance_switched_off_in(Oid dbid)
{
	bool off = false;
	ScanKeyData keys[2];
	Relation rel = table_open(DbRoleSettingRelationId, AccessShareLock);
	SysScanDesc scan;
	HeapTuple tup;

	ScanKeyInit(&keys[0], Anum_pg_db_role_setting_setdatabase, BTEqualStrategyNumber, F_OIDEQ, ObjectIdGetDatum(dbid));
	ScanKeyInit(&keys[1], Anum_pg_db_role_setting_setrole, BTEqualStrategyNumber, F_OIDEQ,
				ObjectIdGetDatum(InvalidOid));
	scan = systable_beginscan(rel, DbRoleSettingDatidRolidIndexId, true, nullptr, 2, keys);
	while ((tup = systable_getnext(scan)) != nullptr)
	{
		bool isnull;
		Datum config = heap_getattr(tup, Anum_pg_db_role_setting_setconfig, RelationGetDescr(rel), &isnull);
		Datum *items;
		int n;

		if (isnull)
			continue;
		deconstruct_array(DatumGetArrayTypeP(config), TEXTOID, -1, false, TYPALIGN_INT, &items, nullptr, &n);
		for (int i = 0; i < n; i++)
		{
			char *item = TextDatumGetCString(items[i]);
			char *eq = strchr(item, '=');
			bool value;

			if (eq == nullptr)
				continue;
			*eq = '\0';
			if (pg_strcasecmp(item, "awa_shard.maintenance") == 0 && parse_bool(eq + 1, &value))
				off = !value;
		}
	}
	systable_endscan(scan);
	table_close(rel, AccessShareLock);
	return off;
}

/* Whether the settings give a database background maintenance (by its name). */
bool
maintenance_configured_for(const char *datname)
{
	/* Not preloaded: no launcher, whatever awa_shard.maintenance says. */
	if (!shared_state_available() || !maintenance_enabled)
		return false;
	if (maintenance_database == nullptr || maintenance_database[0] == '\0')
		return true;
	return datname != nullptr && strcmp(datname, maintenance_database) == 0;
}

/* Whether the settings give this backend's database background maintenance. */
bool
maintenance_configured_here()
{
	static Oid checked_db = InvalidOid;
	static char *name = nullptr;

	if (!shared_state_available() || !maintenance_enabled)
		return false;
	if (maintenance_database == nullptr || maintenance_database[0] == '\0')
		return true;
	if (checked_db != MyDatabaseId)
	{
		name = get_database_name(MyDatabaseId);
		if (name != nullptr)
			name = MemoryContextStrdup(TopMemoryContext, name);
		checked_db = MyDatabaseId;
	}
	return maintenance_configured_for(name);
}

/*
 * Whether a maintenance worker serves this backend's database now (claims promote
 * otherwise): the settings give it maintenance and a worker is in it, its passes recent.
 * Between the turns of a pool shared by more databases than workers, claims promote.
 */
bool
maintenance_worker_serves_database()
{
	return maintenance_configured_here() && database_has_worker();
}

/* Settings of maintenance; all reloadable, none required. */
void
define_maintenance_settings()
{
	DefineCustomBoolVariable("awa_shard.maintenance",
							 "Whether the background launcher runs maintenance in the databases with awa_shard.",
							 "Needs shared_preload_libraries. Off: call awa.run_maintenance() from a scheduler.",
							 &maintenance_enabled, true, PGC_SUSET, 0, nullptr, nullptr, nullptr);
	DefineCustomStringVariable("awa_shard.maintenance_database", "Restricts background maintenance to this database.",
							   "Empty (the default): every database that has awa_shard.", &maintenance_database, "",
							   PGC_SIGHUP, 0, nullptr, nullptr, nullptr);
	DefineCustomIntVariable("awa_shard.maintenance_interval", "Milliseconds between maintenance passes.", nullptr,
							&maintenance_interval_ms, 1000, 10, 3600 * 1000, PGC_SIGHUP, GUC_UNIT_MS, nullptr, nullptr,
							nullptr);
	DefineCustomIntVariable("awa_shard.max_maintenance_workers",
							"Maintenance workers the launcher runs at once, shared by all databases in turn.",
							"Each takes a background-worker slot (max_worker_processes). With more databases than "
							"workers, the databases get turns of ten passes.",
							&max_maintenance_workers, 3, 1, 256, PGC_SIGHUP, 0, nullptr, nullptr, nullptr);
	DefineCustomIntVariable("awa_shard.stale_heartbeat", "Seconds without heartbeat after which an attempt is rescued.",
							nullptr, &stale_heartbeat_secs, 300, 1, 7 * 24 * 3600, PGC_SIGHUP, GUC_UNIT_S, nullptr,
							nullptr, nullptr);
}

/*
 * Whether someone needs this database to themselves: DROP DATABASE, ALTER DATABASE RENAME
 * and CREATE DATABASE ... TEMPLATE lock the database object and then wait for the other
 * sessions to leave. A conditional lock that conflicts with theirs tells the worker to go.
 */
bool
database_wanted_elsewhere()
{
	LOCKTAG tag;

	SET_LOCKTAG_OBJECT(tag, InvalidOid, DatabaseRelationId, MyDatabaseId, 0);
	if (LockAcquire(&tag, RowExclusiveLock, true, true) == LOCKACQUIRE_NOT_AVAIL)
		return true;
	LockRelease(&tag, RowExclusiveLock, true);
	return false;
}

/* What the settings say of this database's maintenance now. */
enum class Served
{
	Yes,
	No,			/* off server-wide, not preloaded, or restricted to another database */
	SwitchedOff /* the database's own setting turns it off */
};

/*
 * Whether the settings still give this database background maintenance: they may have been
 * reloaded, or the database's own setting changed after this worker connected.
 */
Served
still_served()
{
	Served served = Served::Yes;

	StartTransactionCommand();
	if (maintenance_switched_off_in(MyDatabaseId))
		served = Served::SwitchedOff;
	else if (!maintenance_configured_here())
		served = Served::No;
	CommitTransactionCommand();
	return served;
}

/* How a worker's sleep between passes ended. */
enum class Wake
{
	NextPass,
	Wanted, /* DROP DATABASE and the like wait for this database */
	Yield	/* the launcher gives the slot to a waiting database */
};

/*
 * Sleep until the next pass, one interval after the start of the last (at once if that pass
 * took longer), waking every 100 ms to leave at once when the database is wanted or the slot
 * asked for. A schedule's tick (`tick`, read by the pass) that comes meanwhile is run at
 * once, by the periodic-jobs step alone: a tick waits for no pass (docs/api.md, "Periodic
 * jobs").
 */
Wake
sleep_until_next_pass(Oid dbid, TimestampTz pass_started, TimestampTz tick)
{
	TimestampTz next_pass = TimestampTzPlusMilliseconds(pass_started, maintenance_interval_ms);

	for (;;)
	{
		TimestampTz now = GetCurrentTimestamp();
		long left;

		if (tick != 0 && now >= tick)
		{
			if (!run_due_ticks(dbid, &tick))
				return Wake::NextPass; /* the extension is gone: the pass finds it so */
			pgstat_report_stat(true);
			pgstat_report_activity(STATE_IDLE, nullptr);
			continue;
		}
		if (now >= next_pass)
			return Wake::NextPass;
		left = TimestampDifferenceMilliseconds(now, next_pass);
		if (tick != 0)
			left = std::min(left, std::max(1L, TimestampDifferenceMilliseconds(now, tick)));
		(void)WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH, std::min(left, 100L),
						PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
		CHECK_FOR_INTERRUPTS();
		if (database_wanted_elsewhere())
			return Wake::Wanted;
		if (yield_requested(dbid))
			return Wake::Yield;
	}
}

} // namespace awa

/*
 * Worker entry point: connect to the database the launcher named and run a pass every
 * interval until the launcher asks for the slot (another database waits), the extension
 * is gone (the database is then marked absent), maintenance is turned off (server-wide, or
 * by the database's own setting: the launcher looks again in a minute) or restricted to
 * another database, or the database is wanted for DROP, RENAME or as a template (the
 * launcher starts a new worker later if it still exists).
 */
void
awa_maintenance_main(Datum arg)
{
	Oid dbid = DatumGetObjectId(arg);

	pqsignal(SIGHUP, SignalHandlerForConfigReload);
	pqsignal(SIGTERM, die);
	BackgroundWorkerUnblockSignals();
	BackgroundWorkerInitializeConnectionByOid(dbid, InvalidOid, 0);
	/* Nothing the database's owner puts in another schema may be resolved by this worker. */
	SetConfigOption("search_path", "pg_catalog, pg_temp", PGC_SUSET, PGC_S_OVERRIDE);
	/*
	 * Every step runs in a transaction of its own at READ COMMITTED, read-write, whatever
	 * the database's or a role's defaults say (ALTER DATABASE ... SET
	 * default_transaction_isolation would make the steps that need it refuse every pass).
	 */
	SetConfigOption("default_transaction_isolation", "read committed", PGC_SUSET, PGC_S_OVERRIDE);
	SetConfigOption("default_transaction_read_only", "off", PGC_SUSET, PGC_S_OVERRIDE);
	SetConfigOption("default_transaction_deferrable", "off", PGC_SUSET, PGC_S_OVERRIDE);
	if (awa::still_served() == awa::Served::SwitchedOff)
	{
		awa::mark_database_switched_off(dbid);
		proc_exit(0);
	}
	awa::begin_worker_turn(dbid);
	for (;;)
	{
		awa::Served served;
		TimestampTz pass_started;
		TimestampTz tick;

		CHECK_FOR_INTERRUPTS();
		if (ConfigReloadPending)
		{
			ConfigReloadPending = false;
			ProcessConfigFile(PGC_SIGHUP);
		}
		served = awa::still_served();
		if (served == awa::Served::SwitchedOff)
			awa::mark_database_switched_off(dbid);
		if (served != awa::Served::Yes)
			break;
		if (awa::database_wanted_elsewhere())
		{
			awa::mark_database_absent(dbid, true);
			break;
		}
		pass_started = GetCurrentTimestamp();
		if (!awa::maintenance_pass(dbid, &tick))
		{
			awa::mark_database_absent(dbid, false);
			break;
		}
		if (awa::end_pass(dbid))
			break;
		switch (awa::sleep_until_next_pass(dbid, pass_started, tick))
		{
		case awa::Wake::NextPass:
			continue;
		case awa::Wake::Wanted:
			awa::mark_database_absent(dbid, true);
			break;
		case awa::Wake::Yield:
			break;
		}
		break;
	}
	proc_exit(0);
}
