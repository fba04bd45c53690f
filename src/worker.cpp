/*
 * worker.cpp — the maintenance worker of one database (docs/maintenance.md §1), started by
 * the launcher (launcher.cpp): every interval it runs the steps of awa.run_maintenance()
 * (promotion, rescue, ring rotation and prune), each in its own transaction. It leaves when
 * the extension is gone (the database is then marked absent for the launcher) or when the
 * database is wanted for DROP DATABASE and the like. Also the maintenance settings.
 */
#include "claim_cursor.hpp"
#include "launcher.hpp"
#include "module.hpp"
#include "worker.hpp"

extern "C"
{
#include "access/xact.h"
#include "catalog/pg_database.h"
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
#include "utils/builtins.h"
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
	{"SELECT awa.fold_claim_marks()", true},
};

/*
 * Run one statement of a pass in its own transaction, with the extension locked against
 * DROP EXTENSION; errors are logged, never fatal. Returns whether the extension was there.
 */
bool
run_step(const Step &step)
{
	const char *volatile sql = step.sql;
	MemoryContext outer = CurrentMemoryContext;
	volatile bool installed = true;

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
		}
		SPI_finish();
		PopActiveSnapshot();
		CommitTransactionCommand();
	}
	PG_CATCH();
	{
		MemoryContextSwitchTo(outer);
		EmitErrorReport();
		FlushErrorState();
		AbortCurrentTransaction();
	}
	PG_END_TRY();
	return installed;
}

/*
 * One maintenance pass: promotion and rescue every time, ring rotation and prune every
 * tenth pass (every 10 s by default: each prune truncates files, and turning the ring
 * faster than that buys nothing). Each step first checks that the extension is still there
 * (a DROP EXTENSION meanwhile ends the pass quietly). Returns whether it was there.
 */
bool
maintenance_pass()
{
	constexpr int kRingEvery = 10;
	constexpr int kFirstRingStep = 3;
	static int pass = 0;
	bool installed = true;
	int k = 0;

	for (const Step &step : kSteps)
	{
		if (k++ >= kFirstRingStep && pass % kRingEvery != 0)
			break;
		if (!(installed = run_step(step)))
			break;
	}
	pass++;
	pgstat_report_stat(true);
	pgstat_report_activity(STATE_IDLE, nullptr);
	return installed;
}

} // namespace

/* Whether background maintenance serves this backend's database (claims promote otherwise). */
bool
maintenance_worker_serves_database()
{
	static Oid checked_db = InvalidOid;
	static char *name = nullptr;

	/* Not preloaded: no launcher, whatever awa_shard.maintenance says. */
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
	return name != nullptr && strcmp(name, maintenance_database) == 0;
}

/* Settings of maintenance; all reloadable, none required. */
void
define_maintenance_settings()
{
	DefineCustomBoolVariable("awa_shard.maintenance",
							 "Whether the background launcher runs maintenance in the databases with awa_shard.",
							 "Needs shared_preload_libraries. Off: call awa.run_maintenance() from a scheduler.",
							 &maintenance_enabled, true, PGC_SIGHUP, 0, nullptr, nullptr, nullptr);
	DefineCustomStringVariable("awa_shard.maintenance_database", "Restricts background maintenance to this database.",
							   "Empty (the default): every database that has awa_shard.", &maintenance_database, "",
							   PGC_SIGHUP, 0, nullptr, nullptr, nullptr);
	DefineCustomIntVariable("awa_shard.maintenance_interval", "Milliseconds between maintenance passes.", nullptr,
							&maintenance_interval_ms, 1000, 10, 3600 * 1000, PGC_SIGHUP, GUC_UNIT_MS, nullptr, nullptr,
							nullptr);
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

/* Whether background maintenance still serves this database (settings may have changed). */
bool
still_served()
{
	bool served;

	StartTransactionCommand();
	served = maintenance_worker_serves_database();
	CommitTransactionCommand();
	return served;
}

/* Sleep until the next pass, waking every 100 ms to leave at once when the database is wanted. */
bool
sleep_until_next_pass()
{
	long left = maintenance_interval_ms;

	while (left > 0)
	{
		long step = left < 100 ? left : 100;

		(void)WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH, step, PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
		CHECK_FOR_INTERRUPTS();
		if (database_wanted_elsewhere())
			return false;
		left -= step;
	}
	return true;
}

} // namespace awa

/*
 * Worker entry point: connect to the database the launcher named and run a pass every
 * interval until the extension is gone (the database is then marked absent), maintenance
 * is turned off or restricted to another database, or the database is wanted for DROP,
 * RENAME or as a template (the launcher starts a new worker later if it still exists).
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
	for (;;)
	{
		CHECK_FOR_INTERRUPTS();
		if (ConfigReloadPending)
		{
			ConfigReloadPending = false;
			ProcessConfigFile(PGC_SIGHUP);
		}
		if (!awa::still_served())
			break;
		if (awa::database_wanted_elsewhere())
		{
			awa::mark_database_absent(dbid, true);
			break;
		}
		if (!awa::maintenance_pass())
		{
			awa::mark_database_absent(dbid, false);
			break;
		}
		if (!awa::sleep_until_next_pass())
		{
			awa::mark_database_absent(dbid, true);
			break;
		}
	}
	proc_exit(0);
}
