/*
 * claim_sql.hpp — SQL text shared by the claim's drain statements (claim.cpp, and the 1.0
 * catalog's in compat_1_0.cpp): the picked window of one lane with its attempt values, the
 * result columns, and the leases-mode drain. Each drain is completed by ADVANCE, the CTE
 * named `advance` that moves the lane's cursor past the rows it took and returns the run_at
 * hint it left (a claim mark in 1.1, the head update in 1.0).
 */
#pragma once

/*
 * Shared head of the drain statements: the picked rows with their attempt values. UQ: ""
 * (a 1.0 catalog, whose unique claims have no queue) or AWA_UNIQUE_IN_QUEUE.
 */
#define AWA_UNIQUE_IN_QUEUE " AND u.queue = $1 "
#define AWA_DRAIN_PICK(ADVANCE, UQ)                                                                                    \
	"WITH window_ AS MATERIALIZED ("                                                                                   \
	"  SELECT r.* FROM awa.ready_entries r "                                                                           \
	"  WHERE r.queue = $1 AND r.priority = $2 AND r.enqueue_shard = $3 AND r.lane_seq >= $4 "                          \
	"    AND r.lane_seq < $14 "                                                                                        \
	"    AND (r.ready_slot BETWEEN $8 AND $9 OR r.ready_slot BETWEEN $10 AND $11) "                                    \
	"  ORDER BY r.lane_seq LIMIT $5 + 1), "                                                                            \
	"picked AS MATERIALIZED (SELECT * FROM window_ ORDER BY lane_seq LIMIT $5), "                                      \
	"claim_time AS MATERIALIZED (SELECT clock_timestamp() AS t), "                                                     \
	"rows_ AS MATERIALIZED ("                                                                                          \
	"  SELECT p.*, c.slot AS ring_slot, c.generation AS ring_generation, c.t AS claimed_at, "                          \
	"    CASE WHEN $6 > 0 THEN c.t + make_interval(secs => $6) END AS deadline_at, "                                   \
	"    (CASE WHEN $7 > 0 THEN least(p.priority, greatest(1, p.priority - floor("                                     \
	"      (extract(epoch FROM c.t) - extract(epoch FROM p.run_at)) / $7))) "                                          \
	"          ELSE p.priority END)::int2 AS effective_priority "                                                      \
	"  FROM picked p, (SELECT $12::int AS slot, $13::bigint AS generation, t.t FROM claim_time t) c), " ADVANCE        \
	"unique_release AS (DELETE FROM awa.job_unique_claims u USING rows_ r "                                            \
	"  WHERE u.job_id = ANY (ARRAY(SELECT x.job_id FROM rows_ x WHERE x.unique_key IS NOT NULL)) " UQ                  \
	"    AND r.unique_key IS NOT NULL AND u.job_id = r.job_id "                                                        \
	"    AND NOT awa.job_state_in_bitmask(r.unique_states, 'running')), "

/*
 * Result columns, in the order of the function's RETURNS TABLE, and one more: the hint the
 * drain left for the lane (for the cursor board; not returned to the caller).
 */
#define AWA_DRAIN_RESULT(LEASE_SLOT, LEASE_GEN, CLAIM_SLOT, RECEIPT)                                                   \
	"SELECT r.ready_slot, r.ready_generation, r.lane_seq, r.enqueue_shard, " LEASE_SLOT ", " LEASE_GEN ", " CLAIM_SLOT \
	", " RECEIPT ", r.job_id, r.kind, r.queue, r.args, r.priority AS lane_priority, "                                  \
	"r.effective_priority AS priority, (r.attempt + 1)::int2 AS attempt, r.run_lease + 1 AS run_lease, "               \
	"r.max_attempts, r.run_at, r.claimed_at AS heartbeat_at, r.deadline_at, r.claimed_at AS attempted_at, "            \
	"r.created_at, r.unique_key, r.unique_states, r.ordering_key, "                                                    \
	"jsonb_build_object('metadata', coalesce(r.metadata, '{}'), 'tags', to_jsonb(coalesce(r.tags, '{}')), "            \
	"'errors', coalesce(r.errors, '[]')) AS payload, (SELECT a.head_run_at FROM advance a) AS next_run_at "

/* Columns (1-based) of AWA_DRAIN_RESULT that the claim reads back from a drain's rows. */
enum DrainResultColumn
{
	DC_READY_SLOT = 1,
	DC_READY_GENERATION = 2,
	DC_LANE_SEQ = 3,
	DC_LEASE_SLOT = 5,
	DC_CLAIM_SLOT = 7,
	DC_JOB_ID = 9,
	DC_RUN_LEASE = 16
};

/* Leases mode: one mutable leases row per claimed job. */
#define AWA_DRAIN_LEASES(ADVANCE, UQ)                                                                                  \
	AWA_DRAIN_PICK(ADVANCE, UQ)                                                                                        \
	"ins AS (INSERT INTO awa.leases (lease_slot, lease_generation, ready_slot, ready_generation, job_id, queue, "      \
	"  state, priority, effective_priority, attempt, run_lease, max_attempts, lane_seq, enqueue_shard, "               \
	"  heartbeat_at, deadline_at, attempted_at) "                                                                      \
	"  SELECT ring_slot, ring_generation, ready_slot, ready_generation, job_id, queue, 'running', priority, "          \
	"    effective_priority, attempt + 1, run_lease + 1, max_attempts, lane_seq, enqueue_shard, claimed_at, "          \
	"    deadline_at, claimed_at FROM rows_) " AWA_DRAIN_RESULT("r.ring_slot", "r.ring_generation", "NULL::int",       \
																"NULL::bigint") "FROM rows_ r ORDER BY r.lane_seq"
