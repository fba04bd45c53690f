/*
 * launcher.cpp — the maintenance launcher (docs/maintenance.md §1).
 *
 * When the library is preloaded, one launcher background worker ("awa_shard launcher")
 * runs with no settings required. Every awa_shard.maintenance_interval it lists the
 * databases that accept connections (only awa_shard.maintenance_database when that is
 * set) and starts, for each one not already being served, a short-lived maintenance
 * worker (worker.cpp) that runs one pass there and exits. A worker that finds no
 * awa_shard in its database marks it absent in shared memory, and the launcher leaves that
 * database alone for a minute (or until CREATE EXTENSION / an update calls
 * awa._maintenance_wake()). Workers hold no connection between passes, so DROP DATABASE
 * and CREATE DATABASE ... TEMPLATE are never blocked for long; the launcher is restarted by
 * the postmaster after a crash and starts the workers again.
 */
#include "awa_shard.hpp"

extern "C"
{
#include "access/htup_details.h"
#include "access/heapam.h"
#include "access/table.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "catalog/pg_database.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "postmaster/interrupt.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/proc.h"
#include "storage/shmem.h"
#include "storage/spin.h"
#include "tcop/tcopprot.h"
#include "utils/guc.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"
#include "utils/timestamp.h"
#include "utils/wait_event.h"

PGDLLEXPORT void awa_launcher_main(Datum arg);
}

namespace awa
{

namespace
{

constexpr int kMaxDatabases = 256;
constexpr long kAbsentRecheckMs = 60 * 1000;

/* Databases found without the extension, and when (shared: workers write, the launcher reads). */
struct AbsentMark
{
	Oid dbid;
	TimestampTz at;
};

struct LauncherShared
{
	slock_t mutex;
	AbsentMark absent[kMaxDatabases];
};

LauncherShared *launcher_shared = nullptr;

/* A database the launcher serves, and the worker of its current pass (NULL: none started). */
struct Served
{
	Oid dbid;
	char name[NAMEDATALEN];
	BackgroundWorkerHandle *handle;
};

Served served[kMaxDatabases];
int nserved = 0;

/* Whether a worker found no awa_shard in the database less than a minute ago. */
bool
recently_absent(Oid dbid, TimestampTz now)
{
	bool absent = false;

	SpinLockAcquire(&launcher_shared->mutex);
	for (auto &m : launcher_shared->absent)
		if (m.dbid == dbid)
		{
			absent = !TimestampDifferenceExceeds(m.at, now, kAbsentRecheckMs);
			break;
		}
	SpinLockRelease(&launcher_shared->mutex);
	return absent;
}

/* The connectable, non-template databases (restricted to maintenance_database when set). */
int
list_databases(Oid *ids, char (*names)[NAMEDATALEN])
{
	int n = 0;
	Relation rel;
	TableScanDesc scan;
	HeapTuple tup;

	StartTransactionCommand();
	(void) GetTransactionSnapshot();
	rel = table_open(DatabaseRelationId, AccessShareLock);
	scan = table_beginscan_catalog(rel, 0, nullptr);
	while ((tup = heap_getnext(scan, ForwardScanDirection)) != nullptr && n < kMaxDatabases)
	{
		Form_pg_database db = reinterpret_cast<Form_pg_database>(GETSTRUCT(tup));

		if (!db->datallowconn || db->datistemplate)
			continue;
		if (maintenance_database != nullptr && maintenance_database[0] != '\0' &&
			strcmp(NameStr(db->datname), maintenance_database) != 0)
			continue;
		ids[n] = db->oid;
		strlcpy(names[n], NameStr(db->datname), NAMEDATALEN);
		n++;
	}
	table_endscan(scan);
	table_close(rel, AccessShareLock);
	CommitTransactionCommand();
	return n;
}

/* Whether the worker of a served database's last pass is still starting or running. */
bool
pass_running(Served *s)
{
	pid_t pid;

	if (s->handle == nullptr)
		return false;
	switch (GetBackgroundWorkerPid(s->handle, &pid))
	{
		case BGWH_STARTED:
		case BGWH_NOT_YET_STARTED:
			return true;
		default:
			pfree(s->handle);
			s->handle = nullptr;
			return false;
	}
}

/* Start one maintenance pass in a database; false when no worker slot is free. */
bool
start_pass(Served *s)
{
	BackgroundWorker worker;
	MemoryContext old = MemoryContextSwitchTo(TopMemoryContext);
	bool started;

	std::memset(&worker, 0, sizeof(worker));
	worker.bgw_flags = BGWORKER_SHMEM_ACCESS | BGWORKER_BACKEND_DATABASE_CONNECTION;
	worker.bgw_start_time = BgWorkerStart_RecoveryFinished;
	worker.bgw_restart_time = BGW_NEVER_RESTART;
	snprintf(worker.bgw_library_name, BGW_MAXLEN, "awa_shard");
	snprintf(worker.bgw_function_name, BGW_MAXLEN, "awa_maintenance_main");
	snprintf(worker.bgw_name, BGW_MAXLEN, "awa_shard maintenance %s", s->name);
	snprintf(worker.bgw_type, BGW_MAXLEN, "awa_shard maintenance");
	worker.bgw_main_arg = ObjectIdGetDatum(s->dbid);
	worker.bgw_notify_pid = MyProcPid;
	started = RegisterDynamicBackgroundWorker(&worker, &s->handle);
	MemoryContextSwitchTo(old);
	if (!started)
		s->handle = nullptr;
	return started;
}

/* One launcher tick: a pass for every served database whose last pass has ended. */
void
launch_passes()
{
	Oid ids[kMaxDatabases];
	char names[kMaxDatabases][NAMEDATALEN];
	int n = list_databases(ids, names);
	TimestampTz now = GetCurrentTimestamp();
	Served next[kMaxDatabases];
	int nnext = 0;

	/* Keep the handles of databases that still exist; forget dropped ones. */
	for (int i = 0; i < n; i++)
	{
		Served *s = &next[nnext++];

		s->dbid = ids[i];
		strlcpy(s->name, names[i], NAMEDATALEN);
		s->handle = nullptr;
		for (int k = 0; k < nserved; k++)
			if (served[k].dbid == ids[i])
			{
				s->handle = served[k].handle;
				served[k].handle = nullptr;
			}
	}
	for (int k = 0; k < nserved; k++)
		if (served[k].handle != nullptr)
			pfree(served[k].handle);
	std::memcpy(served, next, sizeof(Served) * nnext);
	nserved = nnext;

	for (int k = 0; k < nserved; k++)
	{
		if (pass_running(&served[k]) || recently_absent(served[k].dbid, now))
			continue;
		if (!start_pass(&served[k]))
		{
			ereport(DEBUG1, (errmsg("awa_shard launcher: no background worker slot free, retrying later")));
			break;
		}
	}
}

} // namespace

/* Remember (or forget) that a database has no awa_shard; called by the maintenance worker. */
void
mark_database_absent(Oid dbid, bool absent)
{
	AbsentMark *free_mark = nullptr;

	if (launcher_shared == nullptr)
		return;
	SpinLockAcquire(&launcher_shared->mutex);
	for (auto &m : launcher_shared->absent)
	{
		if (m.dbid == dbid)
		{
			m.dbid = absent ? dbid : InvalidOid;
			m.at = GetCurrentTimestamp();
			SpinLockRelease(&launcher_shared->mutex);
			return;
		}
		if (m.dbid == InvalidOid && free_mark == nullptr)
			free_mark = &m;
	}
	if (absent && free_mark != nullptr)
	{
		free_mark->dbid = dbid;
		free_mark->at = GetCurrentTimestamp();
	}
	SpinLockRelease(&launcher_shared->mutex);
}

Size
launcher_shmem_size()
{
	return MAXALIGN(sizeof(LauncherShared));
}

/* Attach the launcher's shared state (called under AddinShmemInitLock). */
void
launcher_shmem_init(void *base, bool found)
{
	launcher_shared = static_cast<LauncherShared *>(base);
	if (!found)
	{
		SpinLockInit(&launcher_shared->mutex);
		for (auto &m : launcher_shared->absent)
			m.dbid = InvalidOid;
	}
}

/* Register the launcher at postmaster start (preloaded only); it needs no setting. */
void
register_maintenance_launcher()
{
	BackgroundWorker worker;

	std::memset(&worker, 0, sizeof(worker));
	worker.bgw_flags = BGWORKER_SHMEM_ACCESS | BGWORKER_BACKEND_DATABASE_CONNECTION;
	worker.bgw_start_time = BgWorkerStart_RecoveryFinished;
	worker.bgw_restart_time = 10;
	snprintf(worker.bgw_library_name, BGW_MAXLEN, "awa_shard");
	snprintf(worker.bgw_function_name, BGW_MAXLEN, "awa_launcher_main");
	snprintf(worker.bgw_name, BGW_MAXLEN, "awa_shard launcher");
	snprintf(worker.bgw_type, BGW_MAXLEN, "awa_shard launcher");
	RegisterBackgroundWorker(&worker);
}

} // namespace awa

/* Launcher entry point: connect to no database, then start passes every interval. */
void
awa_launcher_main(Datum arg)
{
	pqsignal(SIGHUP, SignalHandlerForConfigReload);
	pqsignal(SIGTERM, die);
	BackgroundWorkerUnblockSignals();
	BackgroundWorkerInitializeConnection(nullptr, nullptr, 0);

	for (;;)
	{
		CHECK_FOR_INTERRUPTS();
		if (ConfigReloadPending)
		{
			ConfigReloadPending = false;
			ProcessConfigFile(PGC_SIGHUP);
		}
		if (awa::maintenance_enabled)
			awa::launch_passes();
		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH, awa::maintenance_interval_ms,
						 PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
	}
}

/* awa._maintenance_wake(): this database has awa_shard now; let the launcher serve it at once. */
AWA_SQL_FUNCTION(awa_maintenance_wake)
{
	awa::mark_database_absent(MyDatabaseId, false);
	PG_RETURN_VOID();
}
