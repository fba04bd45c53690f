/*
 * worker.hpp — the background maintenance worker (worker.cpp): its settings, and whether
 * one serves this backend's database.
 */
#pragma once

namespace awa
{

/* awa_shard.maintenance: whether maintenance workers run at all. */
extern bool maintenance_enabled;

/* awa_shard.maintenance_database: the one database to serve (empty: every database). */
extern char *maintenance_database;

/* awa_shard.maintenance_interval: milliseconds between maintenance passes. */
extern int maintenance_interval_ms;

/* Define the maintenance settings (and awa_shard.stale_heartbeat, which only worker.cpp reads). */
void define_maintenance_settings();

/* Whether a maintenance worker runs in this backend's database (claims promote otherwise). */
bool maintenance_worker_serves_database();

} // namespace awa
