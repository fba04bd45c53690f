/*
 * launcher.hpp — the maintenance launcher (launcher.cpp): a background worker that starts a
 * maintenance pass in each database with awa_shard, and the marks in shared memory that
 * workers and SQL leave it (a database without the extension, a database to wake now).
 */
#pragma once

extern "C"
{
#include "postgres.h"
}

namespace awa
{

/* Register the launcher at postmaster start (preloaded only). */
void register_maintenance_launcher();

/* A worker leaves its database (no extension, or wanted_elsewhere by DROP DATABASE and the like). */
void mark_database_absent(Oid dbid, bool wanted_elsewhere);

/* CREATE or ALTER EXTENSION in a database: serve it from the launcher's next tick. */
void wake_database(Oid dbid);

/* shmem_request_hook: request the shared memory of the launcher's marks. */
void launcher_shmem_request();

/* shmem_startup_hook: claim them by name ("awa_shard launcher"), initialising them once. */
void launcher_shmem_startup();

} // namespace awa
