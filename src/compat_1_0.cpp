/*
 * compat_1_0.cpp — what the library keeps only for a 1.0 catalog: the entry points the frozen
 * awa_shard--1.0.sql names, and the statements they run that differ from 1.1's.
 *
 * A 1.0 catalog meets this library between installing the new package and ALTER EXTENSION
 * awa_shard UPDATE. There a claim moves its lane's cursor by updating the head row (no claim
 * marks, no claim-time promotion), receipts are rows of awa.lease_claims, and a completion
 * closes each receipt with a closure and a terminal row; wait_for_jobs reads the heads'
 * cursors; insert_jobs has no spread_keyless argument. Every other 1.0 function calls a symbol
 * whose behaviour did not change between the versions.
 *
 * End of support: this file goes in the first release after 1.1 that changes the catalog
 * again (1.2); from then on an installation must run ALTER EXTENSION UPDATE to 1.1 before it
 * installs that package (docs/upgrade.md).
 */
#include "catalog_version.hpp"
#include "claim_sql.hpp"
#include "compat_1_0.hpp"
#include "completion_sql.hpp"
#include "pg_boundary.hpp"
#include "receipt_sql.hpp"

namespace
{

/*
 * How a 1.0 drain moves its lane's cursor past the rows it took: the head row is updated,
 * with the run_at of the next visible row as the hint.
 */
#define AWA_ADVANCE_HEAD                                                                                               \
	"advance AS (UPDATE awa.queue_claim_heads h SET claim_seq = m.next, "                                              \
	"  head_run_at = (SELECT w.run_at FROM window_ w WHERE w.lane_seq >= m.next ORDER BY w.lane_seq LIMIT 1) "         \
	"  FROM (SELECT max(lane_seq) + 1 AS next FROM rows_) m "                                                          \
	"  WHERE h.queue = $1 AND h.priority = $2 AND h.enqueue_shard = $3 AND m.next IS NOT NULL "                        \
	"  RETURNING h.head_run_at), "

/*
 * Receipts mode on a 1.0 catalog: one append-only lease_claims row per claimed job. The
 * receipt ids are drawn before the insert, so the result is read from the numbered rows:
 * joining the insert's RETURNING back to them was a nested loop of batch x batch comparisons
 * (the planner sees both as one-row CTEs), 70 % of a 100-job claim.
 */
#define AWA_DRAIN_RECEIPTS_1_0(ADVANCE)                                                                                \
	AWA_DRAIN_PICK(ADVANCE, "")                                                                                        \
	"numbered AS MATERIALIZED (SELECT r.*, nextval('awa.receipt_id_seq') AS receipt_id FROM rows_ r), "                \
	"ins AS (INSERT INTO awa.lease_claims (claim_slot, receipt_id, job_id, run_lease, ready_slot, "                    \
	"  ready_generation, queue, priority, effective_priority, attempt, max_attempts, lane_seq, enqueue_shard, "        \
	"  claimed_at, deadline_at) "                                                                                      \
	"  SELECT ring_slot, receipt_id, job_id, run_lease + 1, ready_slot, ready_generation, queue, priority, "           \
	"    effective_priority, attempt + 1, max_attempts, lane_seq, enqueue_shard, claimed_at, deadline_at "             \
	"  FROM numbered) " AWA_DRAIN_RESULT("NULL::int", "NULL::bigint", "r.ring_slot",                                   \
										 "r.receipt_id") "FROM numbered r ORDER BY r.lane_seq"

/* No closure of a 1.0 receipt (1.0's closures have no queue column). */
#define AWA_RECEIPT_NO_CLOSURE_1_0                                                                                     \
	" NOT EXISTS (SELECT 1 FROM awa.lease_claim_closures x WHERE x.claim_slot = c.claim_slot "                         \
	"   AND x.job_id = c.job_id AND x.run_lease = c.run_lease OFFSET 0) "

/* A 1.0 receipt still has its ready row (its rows store their job id: matched on it too). */
#define AWA_RECEIPT_READY_ROW(ARC)                                                                                     \
	" EXISTS (SELECT 1 FROM awa.ready_entries r WHERE r.queue = c.queue AND r.priority = c.priority "                  \
	"   AND r.enqueue_shard = c.enqueue_shard AND r.lane_seq = c.lane_seq AND r.ready_slot = c.ready_slot "            \
	"   AND r.ready_generation = c.ready_generation AND r.job_id = c.job_id " ARC " OFFSET 0) "

/*
 * The test on a 1.0 catalog (awa.complete_jobs only, between installing this library and
 * ALTER EXTENSION UPDATE), whose receipts are rows of its lease_claims table and which has no
 * completion batches.
 */
#define AWA_OPEN_RECEIPT_TEST_1_0                                                                                      \
	AWA_RECEIPT_NO_TERMINAL_ROW("") " AND " AWA_RECEIPT_NO_CLOSURE_1_0 " AND " AWA_RECEIPT_READY_ROW("")

/* The finished attempts of a completion on a 1.0 catalog: a terminal row each. */
#define COMPLETE_DONE_ROWS_SQL                                                                                         \
	"done AS (INSERT INTO awa.done_entries (ready_slot, ready_generation, job_id, queue, priority, enqueue_shard, "    \
	"  lane_seq, state, attempt, run_lease, attempted_at) "                                                            \
	"  SELECT ready_slot, ready_generation, job_id, queue, priority, enqueue_shard, lane_seq, 'completed', attempt, "  \
	"         run_lease, attempted_at FROM finished), "

/* The receipts among the pairs ($1, $2) on a 1.0 catalog, locked in (job_id, run_lease) order. */
const char *const kLockReceipts10Sql = COMPLETE_INPUT_SQL
	"SELECT c.claim_slot FROM input i CROSS JOIN LATERAL (SELECT c.claim_slot FROM awa.lease_claims c "
	"  WHERE c.job_id = i.job_id AND c.run_lease = i.run_lease AND c.materialized_at IS NULL "
	"    AND (c.claim_slot BETWEEN $3 AND $4 OR c.claim_slot BETWEEN $5 AND $6) FOR UPDATE OF c) c";

/*
 * The completion on a 1.0 catalog, whose readers know only closures and terminal rows: each
 * receipt is closed by appending its closure, ON CONFLICT DO NOTHING being the arbiter there,
 * and gets a completed terminal row. The receipts are locked first, like the 1.1 statement's.
 * A call that waited on those locks for ALTER EXTENSION UPDATE (it locks every table of the
 * plane) fails when the update replaced what it reads (1.0's receipts table): nothing was
 * claimed or completed by it, and the worker's retry runs the 1.1 entry point.
 */
const char *const kCompleteWithClosuresSql = COMPLETE_INPUT_SQL
	", receipts AS MATERIALIZED (SELECT c.* FROM input i CROSS JOIN LATERAL (SELECT c.* FROM awa.lease_claims c "
	"  WHERE c.job_id = i.job_id AND c.run_lease = i.run_lease AND c.materialized_at IS NULL "
	"    AND (c.claim_slot BETWEEN $3 AND $4 OR c.claim_slot BETWEEN $5 AND $6) AND " AWA_OPEN_RECEIPT_TEST_1_0
	" OFFSET 0) c), "
	"closed AS (INSERT INTO awa.lease_claim_closures (claim_slot, job_id, run_lease, outcome) "
	"  SELECT claim_slot, job_id, run_lease, 'completed' FROM receipts ORDER BY job_id, run_lease "
	"  ON CONFLICT DO NOTHING RETURNING claim_slot, job_id, run_lease), " COMPLETE_LEASES_SQL "finished AS ("
	"  SELECT c.ready_slot, c.ready_generation, c.job_id, c.queue, c.priority, c.enqueue_shard, c.lane_seq, "
	"         c.attempt, c.run_lease, c.claimed_at AS attempted_at "
	"  FROM closed k CROSS JOIN LATERAL (SELECT c.* FROM awa.lease_claims c WHERE c.claim_slot = k.claim_slot "
	"    AND c.job_id = k.job_id AND c.run_lease = k.run_lease OFFSET 0) c " COMPLETE_LEASES_FINISHED_SQL
		COMPLETE_DONE_ROWS_SQL COMPLETE_TAIL_SQL;

/* The drains of a 1.0 claim, [receipts]: leases, or lease_claims rows; the head row moves. */
const char *const kDrainSql[2] = {AWA_DRAIN_LEASES(AWA_ADVANCE_HEAD, ""), AWA_DRAIN_RECEIPTS_1_0(AWA_ADVANCE_HEAD)};

/* A locked head whose hint pointed at nothing: forget the hint (claim.cpp, kClearHintSql). */
const char *const kClearHintSql =
	"UPDATE awa.queue_claim_heads SET head_run_at = NULL "
	"WHERE queue = $1 AND priority = $2 AND enqueue_shard = $3 AND head_run_at IS NOT NULL";

} // namespace

namespace awa::compat_1_0
{

const char *const kCursorRelation = "awa.queue_claim_heads";

/* The drain statement of a 1.0 claim. */
const char *
claim_drain_sql(bool receipts)
{
	return kDrainSql[receipts ? 1 : 0];
}

/* The statement that forgets a 1.0 head's stale hint. */
const char *
claim_clear_hint_sql()
{
	return kClearHintSql;
}

/* The statement that locks a 1.0 completion's receipts. */
const char *
completion_lock_sql()
{
	return kLockReceipts10Sql;
}

/* The statement of a 1.0 completion. */
const char *
completion_sql()
{
	return kCompleteWithClosuresSql;
}

/* A 1.0 unique claim is global: its table has no queue column. */
const char *
unique_claims_insert_sql()
{
	return "INSERT INTO awa.job_unique_claims (unique_key, job_id) SELECT * FROM unnest($1::bytea[], $2::bigint[])";
}

} // namespace awa::compat_1_0

/* awa.claim_ready_runtime of the 1.0 catalog. */
AWA_SQL_FUNCTION(awa_claim_ready_runtime)
{
	return awa::claim_ready_runtime(fcinfo, awa::Catalog::V1_0);
}

/* awa.complete_jobs of the 1.0 catalog. */
AWA_SQL_FUNCTION(awa_complete_jobs)
{
	return awa::complete_jobs(fcinfo, awa::Catalog::V1_0);
}

/* awa.wait_for_jobs of the 1.0 catalog. */
AWA_SQL_FUNCTION(awa_wait_for_jobs)
{
	return awa::wait_for_jobs(fcinfo, awa::Catalog::V1_0);
}

/* awa.insert_jobs of the 1.0 catalog (ten arguments, smallint[] priorities and attempts). */
AWA_SQL_FUNCTION(awa_insert_jobs)
{
	return awa::insert_jobs(fcinfo, awa::Catalog::V1_0);
}

/* awa.insert_job_compat of the 1.0 catalog (global unique claims). */
AWA_SQL_FUNCTION(awa_insert_job_compat)
{
	return awa::insert_job_compat(fcinfo, awa::Catalog::V1_0);
}
