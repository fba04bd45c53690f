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
#include "reserve.hpp"
#include "worker.hpp"

#include <algorithm>

extern "C"
{
#include "access/xact.h"
#include "access/genam.h"
#include "access/table.h"
#include "catalog/pg_authid.h"
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
#include "utils/backend_status.h"
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
	bool needs_claim_marks;			/* a 1.0 catalog lacks it: the step waits for the update */
	const char *sql_1_0;			/* run instead on a 1.0 catalog (nullptr: nothing) */
	const char *lock_timeout = "0"; /* for this step's transaction */
};

const Step kSteps[] = {
	{"SELECT awa.run_schedules(1000)", true}, /* periodic jobs: 1.1, like the claim marks */
	/*
	 * A producer's open transaction may hold a unique key a due job takes: the step waits for
	 * it 100 ms at most, and promotion then goes queue by queue, leaving that queue for later.
	 */
	{"SELECT awa.promote_due(1000)", false, nullptr, "100ms"},
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
/* Schedules one run of kScheduleStep takes at most: a run that enqueued as many jobs is run again. */
constexpr int kSchedulesPerRun = 1000;
/* Runs of kScheduleStep at one tick, at most (then the passes take the rest). */
constexpr int kRunsPerTick = 10;
/* The next tick of a schedule of this database after $1 (1.1). */
const Step kNextTickStep = {"SELECT awa._next_schedule_tick($1)", true};
/* How often a sleeping worker reads the next tick again (a schedule made or resumed meanwhile). */
constexpr long kTickReadMs = 1000;
/* How often a worker waiting out a pg_restore looks again, at most (milliseconds). */
constexpr int kRestoreLookMs = 1000;
/* How long after a run a tick it left due (its row held, its lane locked, its enqueue failed) is tried again. */
constexpr long kDueRetryMs = 1000;

/* A statement's one value: the argument $1 (when set) and the value of its one row. */
struct StepValue
{
	Oid arg_type = InvalidOid; /* InvalidOid: $1 is awa_shard.stale_heartbeat */
	Datum arg = 0;
	Oid type = InvalidOid; /* the value expected; another type or NULL leaves `found` false */
	Datum value = 0;
	bool found = false;
};

/*
 * Run one statement of a pass in its own transaction, with the extension locked against
 * DROP EXTENSION; errors are logged and kept for awa.maintenance_status, never fatal.
 * With `io`, its $1 and the value of its one row (io->found: a value of io->type was read).
 * Returns whether the extension was there.
 */
bool
run_step(const Step &step, Oid dbid, StepValue *io = nullptr)
{
	const char *volatile sql = step.sql;
	MemoryContext outer = CurrentMemoryContext;
	volatile bool installed = true;

	if (io != nullptr)
		io->found = false;
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
			bool own_arg = io != nullptr && OidIsValid(io->arg_type);
			Oid argtypes[1] = {own_arg ? io->arg_type : INT4OID};
			Datum values[1] = {own_arg ? io->arg : Int32GetDatum(stale_heartbeat_secs)};
			int nargs = strstr(sql, "$1") != nullptr ? 1 : 0;

			(void)set_config_option("lock_timeout", step.lock_timeout, PGC_SUSET, PGC_S_OVERRIDE, GUC_ACTION_LOCAL,
									true, 0, false);
			if (SPI_execute_with_args(sql, nargs, argtypes, values, nullptr, false, 0) != SPI_OK_SELECT)
				elog(ERROR, "awa_shard: maintenance step failed: %s", sql);
			if (io != nullptr && SPI_processed == 1)
			{
				bool isnull;
				Datum v = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull);

				/* Both types the worker reads are passed by value. */
				if (!isnull && TupleDescAttr(SPI_tuptable->tupdesc, 0)->atttypid == io->type)
				{
					io->value = v;
					io->found = true;
				}
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

/*
 * What a worker knows of its database's schedules: the next tick it wakes for (0: none), when
 * its last run of the periodic-jobs step began, and when it last read the next tick.
 */
struct TickWatch
{
	TimestampTz tick = 0;
	TimestampTz ran_from = DT_NOBEGIN;
	TimestampTz read_at = 0;
};

/*
 * Read the next tick after the start of the last run of the schedules (awa._next_schedule_tick),
 * and whether a tick at or before it is due: one the run left due (its row held by another
 * transaction, its lane locked, its enqueue failed) or one committed after the run began (a
 * schedule made or resumed meanwhile). Such a tick is tried again kDueRetryMs after the run
 * began, not at once (so a tick that stays due does not keep the worker running) and not only
 * at the next pass (which may be minutes away: a tick more than 10 seconds late counts as a
 * downtime, and the ticks before the latest would be lost).
 */
void
read_next_tick(Oid dbid, TickWatch *w)
{
	StepValue after;
	StepValue any;

	after.arg_type = TIMESTAMPTZOID;
	after.arg = TimestampTzGetDatum(w->ran_from);
	after.type = TIMESTAMPTZOID;
	(void)run_step(kNextTickStep, dbid, &after);
	w->tick = after.found ? DatumGetTimestampTz(after.value) : 0;
	any.arg_type = TIMESTAMPTZOID;
	any.arg = TimestampTzGetDatum(DT_NOBEGIN);
	any.type = TIMESTAMPTZOID;
	(void)run_step(kNextTickStep, dbid, &any);
	if (any.found && w->ran_from != DT_NOBEGIN && DatumGetTimestampTz(any.value) <= w->ran_from)
	{
		TimestampTz retry = TimestampTzPlusMilliseconds(w->ran_from, kDueRetryMs);

		if (w->tick == 0 || retry < w->tick)
			w->tick = retry;
	}
	w->read_at = GetCurrentTimestamp();
}

/*
 * Run the periodic-jobs step, again while a run enqueued a full batch (more schedules were
 * due than one run takes; at most kRunsPerTick runs), then read the next tick. Returns
 * whether the extension was there.
 */
bool
run_schedules_now(Oid dbid, TickWatch *w)
{
	TimestampTz started = GetCurrentTimestamp();
	StepValue io;

	io.type = INT4OID;
	for (int run = 0; run < kRunsPerTick; run++)
	{
		if (!run_step(kScheduleStep, dbid, &io))
			return false;
		if (!io.found || DatumGetInt32(io.value) < kSchedulesPerRun)
			break;
	}
	w->ran_from = started;
	read_next_tick(dbid, w);
	return true;
}

/* Run the schedules if the next tick has come (run_schedules_now); true otherwise. */
bool
run_due_ticks(Oid dbid, TickWatch *w)
{
	if (w->tick == 0 || GetCurrentTimestamp() < w->tick)
		return true;
	return run_schedules_now(dbid, w);
}

/*
 * One maintenance pass: periodic jobs, promotion and rescue every time, ring rotation and prune every
 * tenth pass of the database (every 10 s by default: each prune truncates files, and
 * turning the ring faster than that buys nothing; the count is the database's, kept by the
 * launcher, so workers taking turns keep the cadence). Each step first checks that the
 * extension is still there (a DROP EXTENSION meanwhile ends the pass quietly). A schedule's
 * tick that comes during the pass is run between two steps; *w then holds the next one, for
 * the sleep after the pass. Returns whether the extension was there.
 */
bool
maintenance_pass(Oid dbid, TickWatch *w)
{
	constexpr int kRingEvery = 10;
	constexpr int kFirstRingStep = 4;
	uint64 pass = begin_pass(dbid);
	bool installed = true;
	int k = 0;

	for (const Step &step : kSteps)
	{
		if (k >= kFirstRingStep && pass % kRingEvery != 0)
			break;
		if (k++ == 0)
			installed = run_schedules_now(dbid, w);
		/* A tick that comes during the pass waits for the step in progress, not the pass. */
		else
			installed = run_due_ticks(dbid, w) && run_step(step, dbid);
		if (!installed)
			break;
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
 * Sleep on the latch for up to `ms` (at most 100): Wanted or Yield when the database is wanted
 * elsewhere or the slot asked for meanwhile, NextPass otherwise.
 */
Wake
nap(Oid dbid, long ms)
{
	(void)WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH, std::min(ms, 100L), PG_WAIT_EXTENSION);
	ResetLatch(MyLatch);
	CHECK_FOR_INTERRUPTS();
	if (database_wanted_elsewhere())
		return Wake::Wanted;
	if (yield_requested(dbid))
		return Wake::Yield;
	return Wake::NextPass;
}

/*
 * Whether a pg_restore session (application_name 'pg_restore', which pg_restore sets) is
 * connected to the database. A restore not made in one transaction (pg_restore -j cannot
 * be) shows a pass the database in parts: its claim batches not yet restored, a pass would
 * take their attempts for ended and lose them. Read from the backends' status, fresh.
 */
bool
restore_connected(Oid dbid)
{
	bool connected = false;
	int n;

	pgstat_clear_backend_activity_snapshot();
	n = pgstat_fetch_stat_numbackends();
	for (int i = 1; i <= n && !connected; i++)
	{
		LocalPgBackendStatus *local = pgstat_fetch_stat_local_beentry(i);

		connected = local != nullptr && local->backendStatus.st_databaseid == dbid &&
					local->backendStatus.st_procpid != MyProcPid && local->backendStatus.st_appname != nullptr &&
					strcmp(local->backendStatus.st_appname, "pg_restore") == 0;
	}
	pgstat_clear_backend_activity_snapshot();
	return connected;
}

/*
 * Sleep until the next pass, one interval after the start of the last (at once if that pass
 * took longer), waking every 100 ms to leave at once when the database is wanted or the slot
 * asked for. A schedule's tick (w, read by the pass) that comes meanwhile is run at once, by
 * the periodic-jobs step alone: a tick waits for no pass (docs/api.md, "Periodic jobs"). The
 * next tick is read again every kTickReadMs, for a schedule made or resumed meanwhile.
 */
Wake
sleep_until_next_pass(Oid dbid, TimestampTz pass_started, TickWatch *w)
{
	TimestampTz next_pass = TimestampTzPlusMilliseconds(pass_started, maintenance_interval_ms);

	for (;;)
	{
		TimestampTz now = GetCurrentTimestamp();
		long left;

		if (w->tick != 0 && now >= w->tick)
		{
			/* Not while a pg_restore is connected (one may have come since the pass): waited out first. */
			if (restore_connected(dbid))
				return Wake::NextPass;
			if (!run_schedules_now(dbid, w))
				return Wake::NextPass; /* the extension is gone: the pass finds it so */
			pgstat_report_stat(true);
			pgstat_report_activity(STATE_IDLE, nullptr);
			continue;
		}
		if (now >= next_pass)
			return Wake::NextPass;
		if (TimestampDifferenceExceeds(w->read_at, now, static_cast<int>(kTickReadMs)))
		{
			read_next_tick(dbid, w);
			pgstat_report_activity(STATE_IDLE, nullptr);
			continue;
		}
		left = std::min(TimestampDifferenceMilliseconds(now, next_pass),
						kTickReadMs - TimestampDifferenceMilliseconds(w->read_at, now));
		if (w->tick != 0)
			left = std::min(left, TimestampDifferenceMilliseconds(now, w->tick));
		Wake wake = nap(dbid, std::max(1L, left));

		if (wake != Wake::NextPass)
			return wake;
	}
}

/*
 * While a pg_restore session is connected to the database, run no step (periodic jobs
 * included): look again every interval, or every second if that is sooner (a schedule's
 * tick waits for the restore, not for a long interval after it), leaving at once when the
 * database is wanted or the slot asked for. Logged once a wait.
 */
Wake
wait_out_restore(Oid dbid)
{
	ereport(LOG, (errmsg("awa_shard: background maintenance of database %u waits while pg_restore is connected to it",
						 dbid)));
	mark_database_unserved(dbid); /* the restore's schedules: their ticks meanwhile are downtime */
	for (;;)
	{
		TimestampTz next_look =
			TimestampTzPlusMilliseconds(GetCurrentTimestamp(), std::min(maintenance_interval_ms, kRestoreLookMs));

		while (GetCurrentTimestamp() < next_look)
		{
			Wake wake = nap(dbid, 100L);

			if (wake != Wake::NextPass)
				return wake;
		}
		if (!restore_connected(dbid))
			return Wake::NextPass;
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
	/*
	 * It runs as the bootstrap superuser, whatever the database's settings name (ALTER DATABASE
	 * ... SET role or session_authorization, which its owner may do, would make every step fail), and no lock
	 * timeout of the database's applies. It never waits for a lane lock: a producer's open
	 * transaction must not hold a worker of the shared pool (a locked lane waits for the next pass).
	 */
	StartTransactionCommand(); /* the names are looked up in the catalog */
	SetConfigOption("session_authorization", GetUserNameFromId(BOOTSTRAP_SUPERUSERID, false), PGC_SUSET,
					PGC_S_OVERRIDE);
	SetConfigOption("role", "none", PGC_SUSET, PGC_S_OVERRIDE);
	CommitTransactionCommand();
	SetConfigOption("lock_timeout", "0", PGC_SUSET, PGC_S_OVERRIDE);
	awa::never_wait_for_lane_locks();
	if (awa::still_served() == awa::Served::SwitchedOff)
	{
		awa::mark_database_switched_off(dbid);
		proc_exit(0);
	}
	awa::TickWatch ticks;

	if (!awa::begin_worker_turn(dbid))
		proc_exit(0); /* another worker serves the database (one an earlier launcher started) */
	for (;;)
	{
		awa::Served served;
		TimestampTz pass_started;

		CHECK_FOR_INTERRUPTS();
		if (ConfigReloadPending)
		{
			ConfigReloadPending = false;
			ProcessConfigFile(PGC_SIGHUP);
		}
		served = awa::still_served();
		if (served == awa::Served::SwitchedOff)
			awa::mark_database_switched_off(dbid);
		else if (served == awa::Served::No)
			awa::mark_all_databases_unserved();
		if (served != awa::Served::Yes)
			break;
		if (awa::database_wanted_elsewhere())
		{
			awa::mark_database_absent(dbid, true);
			break;
		}
		if (awa::restore_connected(dbid))
		{
			awa::Wake wake = awa::wait_out_restore(dbid);

			if (wake == awa::Wake::NextPass)
				continue;
			if (wake == awa::Wake::Wanted)
				awa::mark_database_absent(dbid, true);
			break;
		}
		pass_started = GetCurrentTimestamp();
		if (!awa::maintenance_pass(dbid, &ticks))
		{
			awa::mark_database_absent(dbid, false);
			break;
		}
		if (awa::end_pass(dbid))
			break;
		switch (awa::sleep_until_next_pass(dbid, pass_started, &ticks))
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
