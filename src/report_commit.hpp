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

/*
 * Called before a heartbeat or progress report writes anything, and after it has written;
 * `direct_only`: it wrote only through the direct access routines, which refuse a table with
 * triggers or rules. A report that ran a statement may have fired a trigger that wrote
 * anything: its transaction commits as synchronous_commit says.
 */
void report_writes_begin();
void report_writes_end(bool direct_only);

/*
 * At PRE_COMMIT: when every WAL record of the transaction came from reports, commit it as
 * SET LOCAL synchronous_commit = off would.
 */
void report_commit_at_pre_commit();

/* At the end of any transaction (commit, abort, prepare): forget its reports. */
void report_commit_at_xact_end();

} // namespace awa
