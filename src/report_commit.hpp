/*
 * report_commit.hpp — how a transaction that only recorded heartbeats or progress commits
 * (report_commit.cpp): without waiting for its WAL flush, unless awa_shard.async_reports is off.
 */
#pragma once

namespace awa
{

/* awa_shard.async_reports (default on). */
extern bool async_reports;

/* Defines awa_shard.async_reports; called once at library load. */
void define_report_settings();

/* Called before a heartbeat or progress report writes anything, and after it has written. */
void report_writes_begin();
void report_writes_end();

/*
 * At PRE_COMMIT: when every WAL record of the transaction came from reports, commit it as
 * SET LOCAL synchronous_commit = off would.
 */
void report_commit_at_pre_commit();

/* At the end of any transaction (commit, abort, prepare): forget its reports. */
void report_commit_at_xact_end();

} // namespace awa
