/*
 * worker.hpp — the background maintenance worker (worker.cpp): its settings, and whether
 * background maintenance serves this backend's database.
 */
#pragma once

extern "C"
{
#include "postgres.h"
}

namespace awa
{

/* awa_shard.maintenance: whether maintenance workers run at all (server-wide, or per database). */
extern bool maintenance_enabled;

/* awa_shard.maintenance_database: the one database to serve (empty: every database). */
extern char *maintenance_database;

/* awa_shard.maintenance_interval: milliseconds between maintenance passes. */
extern int maintenance_interval_ms;

/* awa_shard.max_maintenance_workers: the launcher's pool, shared by all databases in turn. */
extern int max_maintenance_workers;

/* Define the maintenance settings (and awa_shard.stale_heartbeat, which only worker.cpp reads). */
void define_maintenance_settings();

/* Whether the settings give a database background maintenance (preloaded, on, not restricted away). */
bool maintenance_configured_for(const char *datname);

/* Whether the database's own setting (ALTER DATABASE ... SET awa_shard.maintenance = off) turns it off. */
bool maintenance_switched_off_in(Oid dbid);

/* Whether background maintenance passes reach this backend's database (claims promote otherwise). */
bool maintenance_worker_serves_database();

} // namespace awa
