/*
 * launcher.hpp — the maintenance launcher (launcher.cpp): a background worker that gives a
 * bounded pool of maintenance workers to the databases with awa_shard in turn, and the
 * per-database marks in shared memory that workers, claims and SQL read and leave it (a
 * database without the extension, a database to wake now, its passes, its last error).
 */
#pragma once

extern "C"
{
#include "postgres.h"
#include "datatype/timestamp.h"
}

namespace awa
{

/* Register the launcher at postmaster start (preloaded only). */
void register_maintenance_launcher();

/* A worker leaves its database (no extension, or wanted_elsewhere by DROP DATABASE and the like). */
void mark_database_absent(Oid dbid, bool wanted_elsewhere);

/* A worker's database has maintenance switched off by its own setting: unserved, look again in a minute. */
void mark_database_switched_off(Oid dbid);

/* The database's worker stops serving it (maintenance off, a restore): its ticks meanwhile are downtime. */
void mark_database_unserved(Oid dbid);

/* Maintenance off server-wide or restricted elsewhere: no database is served any more. */
void mark_all_databases_unserved();

/* CREATE or ALTER EXTENSION in a database: serve it from the launcher's next tick. */
void wake_database(Oid dbid);

/*
 * A worker's turn in its database begins (it is the database's worker until it exits); false
 * when another worker holds the database's turn.
 */
bool begin_worker_turn(Oid dbid);

/* A pass begins; returns how many passes the database has had (the ring steps run every tenth). */
uint64 begin_pass(Oid dbid);

/* A pass ended with the extension there; returns whether the launcher asks the worker to yield. */
bool end_pass(Oid dbid);

/* Whether the launcher asks this database's worker to leave its slot to a waiting database. */
bool yield_requested(Oid dbid);

/* A step of a pass failed: keep its message (and when) for awa.maintenance_status. */
void note_pass_error(Oid dbid, const char *step, const char *message);

/* Whether a maintenance worker is in this backend's database now, its passes recent (claims promote otherwise). */
bool database_has_worker();

/*
 * When the last background pass of this backend's database that has ended began, if it ended
 * less than ten minutes ago; 0 otherwise (periodic jobs: ticks since then waited for a turn).
 */
TimestampTz database_served_since();

/* shmem_request_hook: request the shared memory of the launcher's marks. */
void launcher_shmem_request();

/* shmem_startup_hook: claim them by name ("awa_shard launcher"), initialising them once. */
void launcher_shmem_startup();

} // namespace awa
