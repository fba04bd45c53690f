/*
 * worker.cpp — the maintenance background worker (D9). When the library is preloaded
 * and awa_shard.maintenance_database names a database, one worker connects to it and
 * every awa_shard.maintenance_interval milliseconds runs the steps of awa.run_maintenance()
 * (promotion, rescue, ring rotation and prune), each in its own transaction. A database
 * without the extension is skipped quietly.
 */
#include "awa_shard.hpp"

extern "C"
{
#include "access/xact.h"
#include "catalog/pg_type.h"
#include "commands/dbcommands.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "postmaster/interrupt.h"
#include "storage/ipc.h"
#include "storage/latch.h"
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
const char *const kSteps[] = {
	"SELECT awa.promote_due(1000)",
	"SELECT awa.rescue_expired_deadlines(1000)",
	"SELECT awa.rescue_stale_heartbeats(pg_catalog.make_interval(secs => $1), 1000)",
	"SELECT awa.rotate_queue_ring()",
	"SELECT awa.prune_queue_ring(200)",
	"SELECT awa.rotate_attempt_ring('claim')",
	"SELECT awa.prune_attempt_ring('claim', 200)",
	"SELECT awa.rotate_attempt_ring('lease')",
	"SELECT awa.prune_attempt_ring('lease', 200)",
};

/* Run one statement of a pass in its own transaction; errors are logged, never fatal. */
bool
run_step(const char *sql, bool check_installed)
{
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
		if (check_installed)
		{
			if (SPI_execute("SELECT 1 FROM pg_catalog.pg_extension "
							"WHERE extname OPERATOR(pg_catalog.=) 'awa_shard'",
							true, 1) != SPI_OK_SELECT)
				elog(ERROR, "awa_shard: extension look-up failed");
			installed = SPI_processed == 1;
		}
		if (installed)
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

/* One maintenance pass: every step once, skipped quietly where the extension is absent. */
void
maintenance_pass()
{
	if (!run_step("SELECT 1", true))
	{
		pgstat_report_activity(STATE_IDLE, nullptr);
		return;
	}
	for (const char *step : kSteps)
		run_step(step, false);
	pgstat_report_stat(true);
	pgstat_report_activity(STATE_IDLE, nullptr);
}

} // namespace

/* Whether the maintenance worker runs in this backend's database (cached per backend). */
bool
maintenance_worker_serves_database()
{
	static Oid checked_db = InvalidOid;
	static bool serves = false;

	if (checked_db != MyDatabaseId)
	{
		const char *name = get_database_name(MyDatabaseId);

		serves = process_shared_preload_libraries_done && maintenance_database != nullptr &&
				 maintenance_database[0] != '\0' && name != nullptr && strcmp(name, maintenance_database) == 0;
		checked_db = MyDatabaseId;
	}
	return serves;
}

/* Register the worker at postmaster start when a maintenance database is configured. */
void
register_maintenance_worker()
{
	BackgroundWorker worker;

	if (maintenance_database == nullptr || maintenance_database[0] == '\0')
		return;
	std::memset(&worker, 0, sizeof(worker));
	worker.bgw_flags = BGWORKER_SHMEM_ACCESS | BGWORKER_BACKEND_DATABASE_CONNECTION;
	worker.bgw_start_time = BgWorkerStart_RecoveryFinished;
	worker.bgw_restart_time = 10;
	snprintf(worker.bgw_library_name, BGW_MAXLEN, "awa_shard");
	snprintf(worker.bgw_function_name, BGW_MAXLEN, "awa_maintenance_main");
	snprintf(worker.bgw_name, BGW_MAXLEN, "awa_shard maintenance");
	snprintf(worker.bgw_type, BGW_MAXLEN, "awa_shard maintenance");
	RegisterBackgroundWorker(&worker);
}

/* Settings of the maintenance worker. */
void
define_maintenance_settings()
{
	/* A PGC_POSTMASTER setting can only be defined while preloading (FATAL otherwise). */
	if (process_shared_preload_libraries_in_progress)
		DefineCustomStringVariable("awa_shard.maintenance_database",
								   "Database in which the maintenance worker runs awa.run_maintenance().",
								   "Empty disables the worker. Needs shared_preload_libraries.",
								   &maintenance_database, "", PGC_POSTMASTER, 0, nullptr, nullptr, nullptr);
	DefineCustomIntVariable("awa_shard.maintenance_interval", "Milliseconds between maintenance passes.",
							nullptr, &maintenance_interval_ms, 1000, 10, 3600 * 1000, PGC_SIGHUP, GUC_UNIT_MS,
							nullptr, nullptr, nullptr);
	DefineCustomIntVariable("awa_shard.stale_heartbeat", "Seconds without heartbeat after which an attempt is rescued.",
							nullptr, &stale_heartbeat_secs, 300, 1, 7 * 24 * 3600, PGC_SIGHUP, GUC_UNIT_S,
							nullptr, nullptr, nullptr);
}

} // namespace awa

/* Worker entry point: connect, then loop maintenance passes until asked to stop. */
void
awa_maintenance_main(Datum arg)
{
	pqsignal(SIGHUP, SignalHandlerForConfigReload);
	pqsignal(SIGTERM, die);
	BackgroundWorkerUnblockSignals();
	BackgroundWorkerInitializeConnection(awa::maintenance_database, nullptr, 0);
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
		awa::maintenance_pass();
		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH, awa::maintenance_interval_ms,
						 PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
	}
}
