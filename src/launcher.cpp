/*
 * launcher.cpp — the maintenance launcher (docs/maintenance.md §1).
 *
 * When the library is preloaded, one launcher background worker ("awa_shard launcher")
 * runs with no settings required. Every awa_shard.maintenance_interval it lists the
 * databases that accept connections (only awa_shard.maintenance_database when that is
 * set) and starts a maintenance worker (worker.cpp) for each one that has none. A worker
 * that finds no awa_shard in its database marks it absent in shared memory and exits, and
 * the launcher leaves that database alone for a minute (or until CREATE EXTENSION / an
 * update calls awa._maintenance_wake()). A worker also leaves within 100 ms when its
 * database is wanted by DROP DATABASE, ALTER DATABASE RENAME or CREATE DATABASE ... TEMPLATE,
 * which would otherwise wait for it. The launcher is restarted by the postmaster after a
 * crash and starts the workers again; it starts at most one worker per database per interval.
 */
#include "launcher.hpp"
#include "pg_boundary.hpp"
#include "worker.hpp"

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
#include "storage/lwlock.h"
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

/* Per database: when a worker last found no extension (or left it to DROP DATABASE and the
 * like), and when CREATE/ALTER EXTENSION last woke it. Workers and SQL write, the launcher reads. */
struct AbsentMark
{
	Oid dbid;
	TimestampTz absent_at;
	TimestampTz woken_at;
};

struct LauncherShared
{
	slock_t mutex;
	AbsentMark absent[kMaxDatabases];
};

LauncherShared *launcher_shared = nullptr;

/* A database the launcher serves, the worker of its current pass (NULL: none) and when it started. */
struct Served
{
	Oid dbid;
	char name[NAMEDATALEN];
	BackgroundWorkerHandle *handle;
	TimestampTz started_at;
};

Served served[kMaxDatabases];
int nserved = 0;

/* Whether a worker found no awa_shard in the database (or left it) less than a minute ago. */
bool
recently_absent(Oid dbid, TimestampTz now)
{
	bool absent = false;

	SpinLockAcquire(&launcher_shared->mutex);
	for (auto &m : launcher_shared->absent)
		if (m.dbid == dbid)
		{
			absent = m.absent_at != 0 && !TimestampDifferenceExceeds(m.absent_at, now, kAbsentRecheckMs);
			break;
		}
	SpinLockRelease(&launcher_shared->mutex);
	return absent;
}

/* The mark of a database, created if missing (mutex held); NULL when the table is full. */
AbsentMark *
mark_of(Oid dbid)
{
	AbsentMark *free_mark = nullptr;

	for (auto &m : launcher_shared->absent)
	{
		if (m.dbid == dbid)
			return &m;
		if (m.dbid == InvalidOid && free_mark == nullptr)
			free_mark = &m;
	}
	if (free_mark != nullptr)
	{
		free_mark->dbid = dbid;
		free_mark->absent_at = 0;
		free_mark->woken_at = 0;
	}
	return free_mark;
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
	(void)GetTransactionSnapshot();
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

/* Whether the maintenance worker of a served database is starting or running. */
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

/* Start the maintenance worker of a database; false when no worker slot is free. */
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

/* One launcher tick: a worker for every served database that has none. */
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
		s->started_at = 0;
		for (int k = 0; k < nserved; k++)
			if (served[k].dbid == ids[i])
			{
				s->handle = served[k].handle;
				s->started_at = served[k].started_at;
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
		/* Worker exits wake the launcher early: at most one start per database per interval. */
		if (pass_running(&served[k]) || recently_absent(served[k].dbid, now) ||
			!TimestampDifferenceExceeds(served[k].started_at, now, maintenance_interval_ms - 5))
			continue;
		served[k].started_at = now;
		if (!start_pass(&served[k]))
		{
			ereport(DEBUG1, (errmsg("awa_shard launcher: no background worker slot free, retrying later")));
			break;
		}
	}
}

} // namespace

/*
 * A worker leaves its database: leave it alone for a minute (no extension, or wanted by
 * DROP DATABASE and the like). A database without the extension that was woken in the last
 * 10 s is not marked: its CREATE EXTENSION may simply not have committed when the worker looked.
 */
void
mark_database_absent(Oid dbid, bool wanted_elsewhere)
{
	TimestampTz now = GetCurrentTimestamp();
	AbsentMark *m;

	if (launcher_shared == nullptr)
		return;
	SpinLockAcquire(&launcher_shared->mutex);
	m = mark_of(dbid);
	if (m != nullptr && (wanted_elsewhere || m->woken_at == 0 || TimestampDifferenceExceeds(m->woken_at, now, 10000)))
		m->absent_at = now;
	SpinLockRelease(&launcher_shared->mutex);
}

/* CREATE or ALTER EXTENSION in a database: serve it from the launcher's next tick. */
void
wake_database(Oid dbid)
{
	AbsentMark *m;

	if (launcher_shared == nullptr)
		return;
	SpinLockAcquire(&launcher_shared->mutex);
	m = mark_of(dbid);
	if (m != nullptr)
	{
		m->absent_at = 0;
		m->woken_at = GetCurrentTimestamp();
	}
	SpinLockRelease(&launcher_shared->mutex);
}

/* shmem_request_hook: room for the launcher's marks. */
void
launcher_shmem_request()
{
	RequestAddinShmemSpace(sizeof(LauncherShared));
}

/* shmem_startup_hook: claim the launcher's marks by name (initialised once, by the postmaster). */
void
launcher_shmem_startup()
{
	bool found;

	LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
	launcher_shared =
		static_cast<LauncherShared *>(ShmemInitStruct("awa_shard launcher", sizeof(LauncherShared), &found));
	if (!found)
	{
		SpinLockInit(&launcher_shared->mutex);
		for (auto &m : launcher_shared->absent)
			m.dbid = InvalidOid;
	}
	LWLockRelease(AddinShmemInitLock);
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
		(void)WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH, awa::maintenance_interval_ms,
						PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
	}
}

/* awa._maintenance_wake(): this database has awa_shard now; let the launcher serve it at once. */
AWA_SQL_FUNCTION(awa_maintenance_wake)
{
	awa::wake_database(MyDatabaseId);
	PG_RETURN_VOID();
}
