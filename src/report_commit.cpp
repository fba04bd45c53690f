/*
 * report_commit.cpp — a transaction whose only writes are heartbeats and progress reports
 * commits without waiting for its WAL to reach disk (docs/api.md, "Heartbeats and progress
 * commit without waiting for a flush").
 *
 * A report is advisory and superseded by the next one: a crash loses at most the last
 * fraction of a second of them (three times wal_writer_delay, as with synchronous_commit =
 * off), never a job, while a flush per report cost a worker that reports once per claimed
 * batch of 10 about a tenth of its jobs per second (docs/benchmarks.md). The test rests on
 * what PostgreSQL tracks per transaction: its id must have been taken by a report (a data
 * write takes it, so nothing was written before), and its WAL (XactLastRecEnd) must not have
 * grown between or after the reports; and each report must have written through the direct
 * access routines alone (a statement may fire a trigger, which may write anything). Any other
 * write in the transaction (an enqueue, a completion, the caller's own tables) keeps the
 * commit as synchronous_commit says; so do leases mode (its reports are statements) and
 * awa_shard.async_reports = off.
 */
#include "pg_boundary.hpp"
#include "report_commit.hpp"

extern "C"
{
#include "access/xact.h"
#include "access/xlog.h"
#include "utils/guc.h"
}

namespace awa
{

bool async_reports = true;

namespace
{

/* XactLastRecEnd when the transaction's latest report ended (0: no report yet). */
XLogRecPtr report_end = InvalidXLogRecPtr;
/* Whether a report took the transaction's id (its first data write was a report's). */
bool xid_from_report = false;
/* Whether something other than a report may have written data in the transaction. */
bool other_writes = false;
/* Whether the transaction had an id when the current report began. */
bool had_xid = false;

} // namespace

/* Defines awa_shard.async_reports; called once at library load. */
void
define_report_settings()
{
	DefineCustomBoolVariable("awa_shard.async_reports",
							 "Transactions that only record heartbeats or progress commit without waiting for their "
							 "WAL flush.",
							 "Off: they commit as synchronous_commit says, like any other transaction.", &async_reports,
							 true, PGC_USERSET, 0, nullptr, nullptr, nullptr);
}

/*
 * Before a report writes. A data write takes the transaction's id, so an id taken before any
 * report is another writer's. WAL written since the previous report is counted as another
 * writer's too, although it may be only the pruning of a page read meanwhile (WAL without an
 * id): that keeps the commit synchronous, never the other way round.
 */
void
report_writes_begin()
{
	had_xid = TransactionIdIsValid(GetTopTransactionIdIfAny());
	if (had_xid && !xid_from_report)
		other_writes = true;
	if (report_end != InvalidXLogRecPtr && XactLastRecEnd != report_end)
		other_writes = true;
}

/*
 * After a report has written: whether it took the transaction's id, and where its WAL ends. A
 * report that ran a statement counts as another writer (a trigger may have written anything).
 */
void
report_writes_end(bool direct_only)
{
	if (!direct_only)
		other_writes = true;
	if (!had_xid && TransactionIdIsValid(GetTopTransactionIdIfAny()))
		xid_from_report = true;
	report_end = XactLastRecEnd;
}

/* At PRE_COMMIT: a transaction whose WAL is all reports' commits asynchronously. */
void
report_commit_at_pre_commit()
{
	if (!async_reports || !xid_from_report || other_writes || XactLastRecEnd != report_end)
		return;
	if (synchronous_commit <= SYNCHRONOUS_COMMIT_OFF)
		return;
	(void)set_config_option("synchronous_commit", "off", PGC_USERSET, PGC_S_SESSION, GUC_ACTION_LOCAL, true, 0, false);
	ereport(DEBUG1, (errmsg_internal("awa_shard: only reports wrote this transaction; it commits without waiting "
									 "for its WAL flush")));
}

/* At the end of any transaction: forget its reports. */
void
report_commit_at_xact_end()
{
	report_end = InvalidXLogRecPtr;
	xid_from_report = false;
	other_writes = false;
	had_xid = false;
}

} // namespace awa
