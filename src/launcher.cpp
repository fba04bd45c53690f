/*
 * launcher.cpp — the maintenance launcher (docs/maintenance.md §1).
 *
 * When the library is preloaded, one launcher background worker ("awa_shard launcher")
 * runs with no settings required. It gives a pool of at most
 * awa_shard.max_maintenance_workers maintenance workers (worker.cpp) to the databases that
 * accept connections (only awa_shard.maintenance_database when that is set), in turn:
 * every tick (each awa_shard.maintenance_interval, and whenever one of its workers starts
 * or exits) it starts a worker for each database due for a pass, least recently passed
 * first, while the pool has room. A worker stays in its database while no other database
 * waits; when one waits, the launcher asks the workers that have made a turn of ten passes
 * (one of them turns the rings) and served longest to leave, so with more databases than
 * workers each database gets its turn and none is left out, and a worker's start (a
 * backend with cold caches, about ten passes' worth) is paid once per ten passes. Claims
 * promote their queue's due jobs themselves whenever no worker is in their database
 * (claim.cpp asks database_has_worker), between turns as without background maintenance.
 * A database that waits much longer than its turn (no free background-worker slot, a pass
 * held up elsewhere) is logged once, and awa.maintenance_status shows every database.
 *
 * A worker that finds no awa_shard in its database marks it absent in shared memory and
 * exits, and the launcher leaves that database alone for a minute (or until CREATE
 * EXTENSION / an update calls awa._maintenance_wake()). A worker also leaves within 100 ms
 * when its database is wanted by DROP DATABASE, ALTER DATABASE RENAME or CREATE DATABASE
 * ... TEMPLATE, which would otherwise wait for it. The launcher is restarted by the
 * postmaster after a crash and starts the workers again; it starts at most one worker per
 * database per interval.
 */
#include "launcher.hpp"
#include "module.hpp"
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
#include "commands/dbcommands.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "port/atomics.h"
#include "postmaster/bgworker.h"
#include "postmaster/interrupt.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/lwlock.h"
#include "storage/proc.h"
#include "storage/shmem.h"
#include "storage/spin.h"
#include "tcop/tcopprot.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"
#include "utils/timestamp.h"
#include "utils/wait_event.h"

	PGDLLEXPORT void awa_launcher_main(Datum arg);
}

#include <algorithm>

namespace awa
{

namespace
{

/* Databases the launcher keeps a mark for; beyond that it says so once and serves no more. */
constexpr int kMaxDatabases = 1024;
constexpr long kAbsentRecheckMs = 60 * 1000;
constexpr int kErrorLength = 256;
constexpr int kTurnPasses = 10; /* passes of a turn before a worker yields to a waiting database */
/* A database whose last pass ended this recently is served: the wait since is for its turn, not downtime. */
constexpr long kServedWithinMs = 10 * 60 * 1000;

/*
 * Per database, in shared memory (under the launcher lock): when a worker last found no
 * extension (or left it to DROP DATABASE and the like), when CREATE/ALTER EXTENSION last
 * woke it, its worker and passes, the last error of a pass. Claims read the two pass times
 * without the lock (atomics), after finding their database's mark once.
 */
struct DatabaseMark
{
	Oid dbid;
	TimestampTz absent_at;
	TimestampTz woken_at;
	bool has_extension;	 /* the last pass found awa_shard there */
	bool yield;			 /* the launcher asks its worker to leave after the pass */
	int worker_pid;		 /* 0: no worker in it now */
	Latch *worker_latch; /* set when the launcher asks it to yield */
	TimestampTz turn_started_at;
	int turn_passes; /* passes of the current turn */
	pg_atomic_uint64 pass_started_at;
	pg_atomic_uint64 last_pass_at;
	pg_atomic_uint64 completed_pass_started_at; /* when the last pass that ended began */
	uint64 passes;
	TimestampTz last_error_at;
	char last_error[kErrorLength];
};

struct LauncherShared
{
	LWLock *lock;
	Latch *launcher_latch; /* the running launcher's; a worker sets it after a pass while databases wait */
	int waiting;		   /* databases due for a pass that the last tick could not give a worker */
	DatabaseMark marks[kMaxDatabases];
};

LauncherShared *launcher_shared = nullptr;

/* A database the launcher lists, the worker of its current turn (NULL: none) and when it started. */
struct Served
{
	Oid dbid;
	char name[NAMEDATALEN];
	BackgroundWorkerHandle *handle;
	TimestampTz started_at;
	bool unserved;				 /* it has had no pass lately (since the launcher saw so) */
	bool unserved_logged;		 /* and the log said so for this episode */
	TimestampTz unserved_log_at; /* when the log last said so: at most once an hour */
};

/* What the launcher reads of a database's mark at the start of a tick. */
struct MarkView
{
	TimestampTz last_pass_at;
	TimestampTz pass_started_at;
	bool absent;
	bool has_extension;
	bool worker_in_it; /* a worker holds its turn, started by this launcher or an earlier one */
};

Served *served = nullptr; /* kMaxDatabases each, allocated once by the launcher */
Served *listed = nullptr;
int nserved = 0;
bool overflow_logged = false;

/* How long after its last pass a database counts as maintained: five intervals and a second. */
long
stale_after_ms()
{
	return 5L * maintenance_interval_ms + 1000;
}

/* Whether a pass ended within bound_ms (default: recently), or one is running and started within it. */
bool
recent_pass(TimestampTz last_pass_at, TimestampTz pass_started_at, TimestampTz now, long bound_ms = 0)
{
	long bound = bound_ms > 0 ? bound_ms : stale_after_ms();

	if (last_pass_at != 0 && !TimestampDifferenceExceeds(last_pass_at, now, bound))
		return true;
	return pass_started_at > last_pass_at && !TimestampDifferenceExceeds(pass_started_at, now, bound);
}

/* The mark of a database (lock held); NULL when it has none. */
DatabaseMark *
mark_find(Oid dbid)
{
	for (auto &m : launcher_shared->marks)
		if (m.dbid == dbid)
			return &m;
	return nullptr;
}

/* The mark of a database, created if missing (lock held exclusively); NULL when the table is full. */
DatabaseMark *
mark_of(Oid dbid)
{
	DatabaseMark *free_mark = nullptr;

	for (auto &m : launcher_shared->marks)
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
		free_mark->has_extension = false;
		free_mark->yield = false;
		free_mark->worker_pid = 0;
		free_mark->worker_latch = nullptr;
		free_mark->turn_started_at = 0;
		free_mark->turn_passes = 0;
		pg_atomic_write_u64(&free_mark->pass_started_at, 0);
		pg_atomic_write_u64(&free_mark->last_pass_at, 0);
		pg_atomic_write_u64(&free_mark->completed_pass_started_at, 0);
		free_mark->passes = 0;
		free_mark->last_error_at = 0;
		free_mark->last_error[0] = '\0';
	}
	return free_mark;
}

/* Order of Oids for bsearch. */
int
oid_order(const void *a, const void *b)
{
	Oid x = *static_cast<const Oid *>(a);
	Oid y = *static_cast<const Oid *>(b);

	return x < y ? -1 : (x > y ? 1 : 0);
}

/* The connectable, non-template databases (restricted to maintenance_database when set), into listed. */
int
list_databases()
{
	int n = 0;
	int beyond = 0;
	Relation rel;
	TableScanDesc scan;
	HeapTuple tup;

	StartTransactionCommand();
	(void)GetTransactionSnapshot();
	rel = table_open(DatabaseRelationId, AccessShareLock);
	scan = table_beginscan_catalog(rel, 0, nullptr);
	while ((tup = heap_getnext(scan, ForwardScanDirection)) != nullptr)
	{
		Form_pg_database db = reinterpret_cast<Form_pg_database>(GETSTRUCT(tup));

		if (!db->datallowconn || db->datistemplate)
			continue;
		if (maintenance_database != nullptr && maintenance_database[0] != '\0' &&
			strcmp(NameStr(db->datname), maintenance_database) != 0)
			continue;
		if (n == kMaxDatabases)
		{
			beyond++;
			continue;
		}
		listed[n].dbid = db->oid;
		strlcpy(listed[n].name, NameStr(db->datname), NAMEDATALEN);
		listed[n].handle = nullptr;
		listed[n].started_at = 0;
		listed[n].unserved = false;
		listed[n].unserved_logged = false;
		listed[n].unserved_log_at = 0;
		n++;
	}
	table_endscan(scan);
	table_close(rel, AccessShareLock);
	CommitTransactionCommand();
	if (beyond > 0 && !overflow_logged)
		ereport(LOG, (errmsg("awa_shard launcher: %d databases beyond the first %d get no background maintenance",
							 beyond, kMaxDatabases),
					  errdetail("Claims in them promote due jobs themselves; run awa.run_maintenance() there "
								"from a scheduler, or restrict awa_shard.maintenance_database.")));
	overflow_logged = beyond > 0;
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

/*
 * Keep the launcher's state of databases still listed (handles, start times, log marks),
 * forget dropped ones; then, under the lock, give every listed database a mark, free the
 * marks of databases no longer listed, and read each listed database's pass times.
 */
void
sync_marks(int n, MarkView *views, TimestampTz now)
{
	Oid *ids = static_cast<Oid *>(palloc(sizeof(Oid) * (n + 1)));

	for (int i = 0; i < n; i++)
	{
		for (int k = 0; k < nserved; k++)
			if (served[k].dbid == listed[i].dbid)
			{
				listed[i].handle = served[k].handle;
				listed[i].started_at = served[k].started_at;
				listed[i].unserved = served[k].unserved;
				listed[i].unserved_logged = served[k].unserved_logged;
				listed[i].unserved_log_at = served[k].unserved_log_at;
				served[k].handle = nullptr;
				break;
			}
		ids[i] = listed[i].dbid;
	}
	for (int k = 0; k < nserved; k++)
		if (served[k].handle != nullptr)
			pfree(served[k].handle);
	std::swap(served, listed);
	nserved = n;
	qsort(ids, n, sizeof(Oid), oid_order);

	LWLockAcquire(launcher_shared->lock, LW_EXCLUSIVE);
	for (auto &m : launcher_shared->marks)
		if (m.dbid != InvalidOid && m.worker_pid == 0 && bsearch(&m.dbid, ids, n, sizeof(Oid), oid_order) == nullptr)
			m.dbid = InvalidOid;
	for (int k = 0; k < nserved; k++)
	{
		DatabaseMark *m = mark_of(served[k].dbid);

		views[k].absent = m == nullptr;
		views[k].worker_in_it = m != nullptr && m->worker_pid != 0;
		views[k].has_extension = false;
		views[k].last_pass_at = 0;
		views[k].pass_started_at = 0;
		if (m == nullptr)
			continue;
		views[k].absent = m->absent_at != 0 && !TimestampDifferenceExceeds(m->absent_at, now, kAbsentRecheckMs);
		views[k].has_extension = m->has_extension;
		views[k].last_pass_at = static_cast<TimestampTz>(pg_atomic_read_u64(&m->last_pass_at));
		views[k].pass_started_at = static_cast<TimestampTz>(pg_atomic_read_u64(&m->pass_started_at));
	}
	LWLockRelease(launcher_shared->lock);
	pfree(ids);
}

/*
 * `waiting` databases are due and have no worker: have as many workers leave after their
 * pass, counting those already asked, asking among those whose turn has had its ten passes
 * the ones whose turn began first, and waking them if they sleep. Workers read `waiting`
 * after a pass.
 */
void
ask_workers_to_yield(int waiting)
{
	LWLockAcquire(launcher_shared->lock, LW_EXCLUSIVE);
	launcher_shared->waiting = waiting;
	/* Workers already asked are leaving: ask only for the rest. */
	for (auto &m : launcher_shared->marks)
		if (m.dbid != InvalidOid && m.worker_pid != 0 && m.yield)
			waiting--;
	while (waiting-- > 0)
	{
		DatabaseMark *oldest = nullptr;

		for (auto &m : launcher_shared->marks)
			if (m.dbid != InvalidOid && m.worker_pid != 0 && !m.yield && m.turn_passes >= kTurnPasses &&
				(oldest == nullptr || m.turn_started_at < oldest->turn_started_at))
				oldest = &m;
		if (oldest == nullptr)
			break;
		oldest->yield = true;
		if (oldest->worker_latch != nullptr)
			SetLatch(oldest->worker_latch);
	}
	LWLockRelease(launcher_shared->lock);
}

/*
 * Whether a maintenance worker could be registered. No free background-worker slot
 * (max_worker_processes is shared with parallel query and logical replication) is said
 * once, and again only after a start has succeeded more than ten minutes after that; the
 * databases meanwhile take turns with the workers that run.
 */
void
note_start(bool started, int running, TimestampTz now)
{
	static bool logged = false;
	static TimestampTz logged_at = 0;

	if (started)
	{
		logged = logged && !TimestampDifferenceExceeds(logged_at, now, 10 * 60 * 1000);
		return;
	}
	if (logged)
		return;
	logged = true;
	logged_at = now;
	ereport(LOG, (errmsg("awa_shard launcher: no background worker slot is free for a maintenance worker "
						 "(%d of awa_shard.max_maintenance_workers = %d running)",
						 running, max_maintenance_workers),
				  errdetail("The databases take turns with the workers that run; a database whose passes fall "
							"behind is logged, and its claims promote due jobs themselves."),
				  errhint("Raise max_worker_processes (now %d), which parallel query and logical replication "
						  "share, or lower awa_shard.max_maintenance_workers; docs/maintenance.md §1 has the sizing.",
						  max_worker_processes)));
}

/*
 * A database with the extension has waited much longer than its turn: say so once, and
 * not again for an hour however often it falls behind and catches up (a pool that barely
 * keeps up would otherwise fill the log); the return of its passes is said only for an
 * episode that was said.
 */
void
note_served(Served *s, bool recent, TimestampTz last_pass_at, TimestampTz now)
{
	long secs = 0;
	int usecs = 0;

	if (recent)
	{
		if (s->unserved && s->unserved_logged)
			ereport(LOG, (errmsg("awa_shard launcher: database \"%s\" has maintenance passes again", s->name)));
		s->unserved = false;
		s->unserved_logged = false;
		return;
	}
	if (s->unserved)
		return;
	s->unserved = true;
	if (s->unserved_log_at != 0 && !TimestampDifferenceExceeds(s->unserved_log_at, now, 3600 * 1000))
		return;
	s->unserved_logged = true;
	s->unserved_log_at = now;
	TimestampDifference(last_pass_at, now, &secs, &usecs);
	ereport(LOG, (errmsg("awa_shard launcher: database \"%s\" has had no maintenance pass for %ld s", s->name, secs),
				  errdetail("Claims in it promote their queue's due jobs themselves; rescue and the rings wait "
							"for a pass. Said at most once an hour per database."),
				  errhint("Raise awa_shard.max_maintenance_workers (now %d) or max_worker_processes (now %d); "
						  "docs/maintenance.md §1 has the sizing.",
						  max_maintenance_workers, max_worker_processes)));
}

/*
 * One launcher tick: the databases due for a pass (none running, not found absent lately,
 * none started within the interval), least recently passed first, get a worker while the
 * pool (max_maintenance_workers) has room and a background-worker slot is free; the ones
 * left waiting make the longest-serving workers yield after their pass.
 */
void
launch_passes()
{
	int n = list_databases();
	TimestampTz now = GetCurrentTimestamp();
	MarkView *views = static_cast<MarkView *>(palloc(sizeof(MarkView) * (n + 1)));
	int *due = static_cast<int *>(palloc(sizeof(int) * (n + 1)));
	int ndue = 0;
	int running = 0;
	int active = 0;
	long round_ms = maintenance_interval_ms;
	int k;

	sync_marks(n, views, now);
	for (k = 0; k < nserved; k++)
	{
		/* A worker an earlier launcher started (it restarted since) runs there too: no second one. */
		if (pass_running(&served[k]) || views[k].worker_in_it)
			running++;
		else if (!views[k].absent && TimestampDifferenceExceeds(served[k].started_at, now, maintenance_interval_ms - 5))
			due[ndue++] = k;
	}
	std::sort(due, due + ndue,
			  [views](int a, int b)
			  {
				  if (views[a].last_pass_at != views[b].last_pass_at)
					  return views[a].last_pass_at < views[b].last_pass_at;
				  return served[a].started_at < served[b].started_at;
			  });
	for (k = 0; k < ndue && running < max_maintenance_workers; k++)
	{
		Served *s = &served[due[k]];
		TimestampTz before = s->started_at;

		s->started_at = now;
		if (!start_pass(s))
		{
			s->started_at = before; /* first in line again at the next tick */
			note_start(false, running, now);
			break;
		}
		note_start(true, running, now);
		running++;
	}
	ask_workers_to_yield(ndue - k);

	/*
	 * Say once when a database with the extension waits much longer than its turn (twice a
	 * round of turns over the databases, and five intervals and a second), and when it is back.
	 */
	for (k = 0; k < nserved; k++)
		active += views[k].absent ? 0 : 1;
	if (active > max_maintenance_workers)
		round_ms = static_cast<long>((active + max_maintenance_workers - 1) / max_maintenance_workers) * kTurnPasses *
				   maintenance_interval_ms;
	for (k = 0; k < nserved; k++)
	{
		bool recent =
			recent_pass(views[k].last_pass_at, views[k].pass_started_at, now, 2 * round_ms + stale_after_ms());

		if (recent || (views[k].has_extension && views[k].last_pass_at != 0))
			note_served(&served[k], recent, views[k].last_pass_at, now);
	}
	pfree(views);
	pfree(due);
}

/* before_shmem_exit of a worker: its database has no worker any more. */
void
end_worker_turn(int code, Datum arg)
{
	DatabaseMark *m;

	if (launcher_shared == nullptr)
		return;
	LWLockAcquire(launcher_shared->lock, LW_EXCLUSIVE);
	m = mark_find(DatumGetObjectId(arg));
	if (m != nullptr && m->worker_pid == MyProcPid)
	{
		m->worker_pid = 0;
		m->worker_latch = nullptr;
		m->yield = false;
	}
	LWLockRelease(launcher_shared->lock);
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
	DatabaseMark *m;

	if (launcher_shared == nullptr)
		return;
	LWLockAcquire(launcher_shared->lock, LW_EXCLUSIVE);
	m = mark_of(dbid);
	if (m != nullptr && (wanted_elsewhere || m->woken_at == 0 || TimestampDifferenceExceeds(m->woken_at, now, 10000)))
		m->absent_at = now;
	if (m != nullptr && !wanted_elsewhere)
		m->has_extension = false;
	LWLockRelease(launcher_shared->lock);
}

/*
 * A worker found its database's own setting turning maintenance off (ALTER DATABASE ... SET
 * awa_shard.maintenance = off): leave the database alone for a minute, like one without the
 * extension, and look again then (the launcher cannot read database settings itself). The
 * database is no longer served (mark_database_unserved).
 */
void
mark_database_switched_off(Oid dbid)
{
	DatabaseMark *m;

	if (launcher_shared == nullptr)
		return;
	LWLockAcquire(launcher_shared->lock, LW_EXCLUSIVE);
	m = mark_of(dbid);
	if (m != nullptr)
	{
		m->absent_at = GetCurrentTimestamp();
		pg_atomic_write_u64(&m->completed_pass_started_at, 0);
	}
	LWLockRelease(launcher_shared->lock);
}

/*
 * The worker of a database stops serving it (maintenance turned off for it or everywhere, or
 * a pg_restore connected): forget when its last pass began, so that the periodic-jobs step
 * takes the ticks that come meanwhile for downtime, not for a turn waited (database_served_since).
 */
void
mark_database_unserved(Oid dbid)
{
	DatabaseMark *m;

	if (launcher_shared == nullptr)
		return;
	LWLockAcquire(launcher_shared->lock, LW_EXCLUSIVE);
	m = mark_find(dbid);
	if (m != nullptr)
		pg_atomic_write_u64(&m->completed_pass_started_at, 0);
	LWLockRelease(launcher_shared->lock);
}

/*
 * Maintenance turned off server-wide, or restricted to another database: every database
 * stops being served, those waiting for a worker's turn too (see mark_database_unserved).
 */
void
mark_all_databases_unserved()
{
	if (launcher_shared == nullptr)
		return;
	LWLockAcquire(launcher_shared->lock, LW_EXCLUSIVE);
	for (DatabaseMark &m : launcher_shared->marks)
		pg_atomic_write_u64(&m.completed_pass_started_at, 0);
	LWLockRelease(launcher_shared->lock);
}

/* CREATE or ALTER EXTENSION in a database: serve it from the launcher's next tick. */
void
wake_database(Oid dbid)
{
	DatabaseMark *m;

	if (launcher_shared == nullptr)
		return;
	LWLockAcquire(launcher_shared->lock, LW_EXCLUSIVE);
	m = mark_of(dbid);
	if (m != nullptr)
	{
		m->absent_at = 0;
		m->woken_at = GetCurrentTimestamp();
	}
	LWLockRelease(launcher_shared->lock);
}

/*
 * A worker's turn in its database begins; its exit (however it happens) ends the turn. False,
 * taking nothing, when another worker holds the database's turn (the worker then exits).
 */
bool
begin_worker_turn(Oid dbid)
{
	DatabaseMark *m;

	if (launcher_shared == nullptr)
		return true;
	LWLockAcquire(launcher_shared->lock, LW_EXCLUSIVE);
	m = mark_of(dbid);
	if (m != nullptr && m->worker_pid != 0 && m->worker_pid != MyProcPid)
	{
		LWLockRelease(launcher_shared->lock);
		return false;
	}
	if (m != nullptr)
	{
		m->worker_pid = MyProcPid;
		m->worker_latch = MyLatch;
		m->yield = false;
		m->turn_passes = 0;
		m->turn_started_at = GetCurrentTimestamp();
	}
	LWLockRelease(launcher_shared->lock);
	before_shmem_exit(end_worker_turn, ObjectIdGetDatum(dbid));
	return true;
}

/* A pass begins; returns the passes the database had before (a local count without a mark). */
uint64
begin_pass(Oid dbid)
{
	static uint64 local_passes = 0;
	DatabaseMark *m;
	uint64 passes = local_passes++;

	if (launcher_shared == nullptr)
		return passes;
	LWLockAcquire(launcher_shared->lock, LW_EXCLUSIVE);
	m = mark_find(dbid);
	if (m != nullptr)
	{
		pg_atomic_write_u64(&m->pass_started_at, static_cast<uint64>(GetCurrentTimestamp()));
		passes = m->passes;
	}
	LWLockRelease(launcher_shared->lock);
	return passes;
}

/*
 * A pass ended with the extension there: count it; returns whether the worker should yield.
 * Once the turn has had its passes while databases wait, wake the launcher to ask for the slot.
 */
bool
end_pass(Oid dbid)
{
	DatabaseMark *m;
	bool yield = false;
	Latch *launcher = nullptr;

	if (launcher_shared == nullptr)
		return false;
	LWLockAcquire(launcher_shared->lock, LW_EXCLUSIVE);
	m = mark_find(dbid);
	if (m != nullptr)
	{
		pg_atomic_write_u64(&m->completed_pass_started_at, pg_atomic_read_u64(&m->pass_started_at));
		pg_atomic_write_u64(&m->last_pass_at, static_cast<uint64>(GetCurrentTimestamp()));
		m->passes++;
		m->turn_passes++;
		m->has_extension = true;
		yield = m->yield;
		if (!yield && m->turn_passes >= kTurnPasses && launcher_shared->waiting > 0)
			launcher = launcher_shared->launcher_latch;
	}
	LWLockRelease(launcher_shared->lock);
	if (launcher != nullptr)
		SetLatch(launcher);
	return yield;
}

/* Whether the launcher asks this database's worker to leave its slot to a waiting database. */
bool
yield_requested(Oid dbid)
{
	DatabaseMark *m;
	bool yield = false;

	if (launcher_shared == nullptr)
		return false;
	LWLockAcquire(launcher_shared->lock, LW_SHARED);
	m = mark_find(dbid);
	if (m != nullptr)
		yield = m->yield;
	LWLockRelease(launcher_shared->lock);
	return yield;
}

/* A step of a pass failed: keep "step: message" (truncated) and when, for awa.maintenance_status. */
void
note_pass_error(Oid dbid, const char *step, const char *message)
{
	DatabaseMark *m;

	if (launcher_shared == nullptr)
		return;
	LWLockAcquire(launcher_shared->lock, LW_EXCLUSIVE);
	m = mark_find(dbid);
	if (m != nullptr)
	{
		snprintf(m->last_error, kErrorLength, "%s: %s", step, message != nullptr ? message : "");
		m->last_error_at = GetCurrentTimestamp();
	}
	LWLockRelease(launcher_shared->lock);
}

/*
 * Whether a maintenance worker is in this backend's database now (and its passes are
 * recent: a worker held up for five intervals and a second no longer counts). On every
 * claim, so lock-free once the database's mark is known (looked up at most once a second
 * while it has none).
 */
bool
database_has_worker()
{
	static int cached = -1;
	static TimestampTz missed_at = 0;
	TimestampTz now = GetCurrentTimestamp();
	DatabaseMark *m;

	if (launcher_shared == nullptr)
		return false;
	if (cached < 0 || *static_cast<volatile Oid *>(&launcher_shared->marks[cached].dbid) != MyDatabaseId)
	{
		cached = -1;
		if (missed_at != 0 && !TimestampDifferenceExceeds(missed_at, now, 1000))
			return false;
		LWLockAcquire(launcher_shared->lock, LW_SHARED);
		m = mark_find(MyDatabaseId);
		if (m != nullptr)
			cached = static_cast<int>(m - launcher_shared->marks);
		LWLockRelease(launcher_shared->lock);
		if (cached < 0)
		{
			missed_at = now;
			return false;
		}
	}
	m = &launcher_shared->marks[cached];
	return *static_cast<volatile int *>(&m->worker_pid) != 0 &&
		   recent_pass(static_cast<TimestampTz>(pg_atomic_read_u64(&m->last_pass_at)),
					   static_cast<TimestampTz>(pg_atomic_read_u64(&m->pass_started_at)), now);
}

/*
 * When the last background pass of this backend's database that has ended began, if that pass
 * ended less than kServedWithinMs ago and the database has been served since; 0 otherwise (not
 * preloaded, no pass since the server started, none lately, or its worker stopped serving it:
 * mark_database_unserved). The periodic-jobs step enqueues every tick that came after it.
 */
TimestampTz
database_served_since()
{
	TimestampTz since = 0;
	DatabaseMark *m;

	if (launcher_shared == nullptr)
		return 0;
	LWLockAcquire(launcher_shared->lock, LW_SHARED);
	m = mark_find(MyDatabaseId);
	if (m != nullptr)
	{
		TimestampTz ended = static_cast<TimestampTz>(pg_atomic_read_u64(&m->last_pass_at));

		if (ended != 0 && !TimestampDifferenceExceeds(ended, GetCurrentTimestamp(), kServedWithinMs))
			since = static_cast<TimestampTz>(pg_atomic_read_u64(&m->completed_pass_started_at));
	}
	LWLockRelease(launcher_shared->lock);
	return since;
}

/* shmem_request_hook: room for the launcher's marks, and their lock. */
void
launcher_shmem_request()
{
	RequestAddinShmemSpace(sizeof(LauncherShared));
	RequestNamedLWLockTranche("awa_shard_launcher", 1);
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
		launcher_shared->lock = &(GetNamedLWLockTranche("awa_shard_launcher"))->lock;
		launcher_shared->launcher_latch = nullptr;
		launcher_shared->waiting = 0;
		for (auto &m : launcher_shared->marks)
		{
			m.dbid = InvalidOid;
			pg_atomic_init_u64(&m.pass_started_at, 0);
			pg_atomic_init_u64(&m.last_pass_at, 0);
			pg_atomic_init_u64(&m.completed_pass_started_at, 0);
		}
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
	awa::served =
		static_cast<awa::Served *>(MemoryContextAllocZero(TopMemoryContext, sizeof(awa::Served) * awa::kMaxDatabases));
	awa::listed =
		static_cast<awa::Served *>(MemoryContextAllocZero(TopMemoryContext, sizeof(awa::Served) * awa::kMaxDatabases));
	LWLockAcquire(awa::launcher_shared->lock, LW_EXCLUSIVE);
	awa::launcher_shared->launcher_latch = MyLatch;
	LWLockRelease(awa::launcher_shared->lock);

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

/*
 * awa._maintenance_wake(): this database has awa_shard now; let the launcher serve it at once
 * (unless the database's own setting switches maintenance off).
 */
AWA_SQL_FUNCTION(awa_maintenance_wake)
{
	if (awa::launcher_shared == nullptr)
		PG_RETURN_VOID();
	/* Switched off by the database's own setting: no worker needs to come and find that out. */
	if (awa::maintenance_switched_off_in(MyDatabaseId))
		awa::mark_database_switched_off(MyDatabaseId);
	else
		awa::wake_database(MyDatabaseId);
	PG_RETURN_VOID();
}

/*
 * awa._maintenance_status(): one row per database known to have awa_shard (a pass found it
 * there) and always this one: who serves it ('worker': a worker is in it, its passes
 * recent; 'claims': none, so its claims promote due jobs themselves), the worker in it now,
 * its last pass, how many passes since server start, and the last error of a pass.
 */
AWA_SQL_FUNCTION(awa_maintenance_status)
{
	struct Row
	{
		Oid dbid;
		int worker_pid;
		TimestampTz last_pass_at;
		TimestampTz pass_started_at;
		uint64 passes;
		TimestampTz last_error_at;
		char last_error[awa::kErrorLength];
	};
	ReturnSetInfo *rsinfo = reinterpret_cast<ReturnSetInfo *>(fcinfo->resultinfo);
	Row *rows = static_cast<Row *>(palloc0(sizeof(Row) * (awa::kMaxDatabases + 1)));
	int nrows = 0;
	bool self_seen = false;
	TimestampTz now = GetCurrentTimestamp();

	InitMaterializedSRF(fcinfo, 0);
	if (awa::launcher_shared != nullptr)
	{
		LWLockAcquire(awa::launcher_shared->lock, LW_SHARED);
		for (auto &m : awa::launcher_shared->marks)
		{
			if (m.dbid == InvalidOid || !(m.has_extension || m.dbid == MyDatabaseId))
				continue;
			Row &r = rows[nrows++];
			r.dbid = m.dbid;
			r.worker_pid = m.worker_pid;
			r.last_pass_at = static_cast<TimestampTz>(pg_atomic_read_u64(&m.last_pass_at));
			r.pass_started_at = static_cast<TimestampTz>(pg_atomic_read_u64(&m.pass_started_at));
			r.passes = m.passes;
			r.last_error_at = m.last_error_at;
			strlcpy(r.last_error, m.last_error, awa::kErrorLength);
			self_seen = self_seen || m.dbid == MyDatabaseId;
		}
		LWLockRelease(awa::launcher_shared->lock);
	}
	if (!self_seen)
		rows[nrows++].dbid = MyDatabaseId;
	for (int i = 0; i < nrows; i++)
	{
		Row &r = rows[i];
		char *name = get_database_name(r.dbid);
		Datum values[7];
		bool nulls[7] = {false, false, false, false, false, false, false};
		bool worker;

		if (name == nullptr)
			continue; /* dropped meanwhile */
		worker = awa::maintenance_configured_for(name) && r.worker_pid != 0 &&
				 awa::recent_pass(r.last_pass_at, r.pass_started_at, now);
		{
			NameData *n = static_cast<NameData *>(palloc0(NAMEDATALEN));

			namestrcpy(n, name);
			values[0] = NameGetDatum(n);
		}
		values[1] = CStringGetTextDatum(worker ? "worker" : "claims");
		values[2] = Int32GetDatum(r.worker_pid);
		nulls[2] = r.worker_pid == 0;
		values[3] = TimestampTzGetDatum(r.last_pass_at);
		nulls[3] = r.last_pass_at == 0;
		values[4] = Int64GetDatum(static_cast<int64>(r.passes));
		values[5] = CStringGetTextDatum(r.last_error);
		nulls[5] = r.last_error[0] == '\0';
		values[6] = TimestampTzGetDatum(r.last_error_at);
		nulls[6] = r.last_error_at == 0;
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	return (Datum)0;
}

/*
 * awa._maintenance_served_since(): when the last background pass of this database that has
 * ended began, if it ended less than ten minutes ago; NULL otherwise (not preloaded, no pass
 * since the server started, none lately). Ticks of periodic jobs that came since were
 * waiting for the database's turn, not lost to downtime (awa.run_schedules).
 */
AWA_SQL_FUNCTION(awa_maintenance_served_since)
{
	TimestampTz since = awa::database_served_since();

	if (since == 0)
		PG_RETURN_NULL();
	PG_RETURN_TIMESTAMPTZ(since);
}
