/*
 * completion_sql.hpp — SQL text shared by the completion statements (lifecycle.cpp, and the
 * 1.0 catalog's in compat_1_0.cpp): the input pairs, the leases they end, and what every
 * completion does besides recording its finished attempts. Parameters: $1, $2 the pairs,
 * $3..$6 the claim ring's live arc, $7..$10 the lease ring's, $11..$14 the queue ring's
 * ($16, 1.1: the queue of a completion in one queue, whose statements carry `queue = $16`).
 */
#pragma once

/* The (job_id, run_lease) pairs of a completion, distinct and sorted. */
#define COMPLETE_INPUT_SQL                                                                                             \
	"WITH input AS MATERIALIZED (SELECT DISTINCT t.job_id, t.run_lease "                                               \
	"  FROM unnest($1::bigint[], $2::bigint[]) AS t(job_id, run_lease) ORDER BY t.job_id, t.run_lease) "

/*
 * The running leases among the pairs, locked in pair order, then deleted; KEPT names input
 * columns (", i.result") each deleted lease carries on as a column of the same name.
 */
#define COMPLETE_LEASES_SQL COMPLETE_LEASES_CARRYING_SQL("", "", "")
/* Q: "" or a condition on the lease `l` (" AND l.queue = $16 "). */
#define COMPLETE_LEASES_CARRYING_SQL(KEPT, KEPT_OF_K, Q)                                                               \
	"lease_keys AS MATERIALIZED (SELECT l.*" KEPT " FROM input i CROSS JOIN LATERAL ("                                 \
	"  SELECT l.lease_slot, l.queue, l.priority, l.enqueue_shard, l.lane_seq, l.job_id FROM awa.leases l "             \
	"  WHERE l.job_id = i.job_id AND l.run_lease = i.run_lease " Q " AND l.state IN ('running', 'waiting_external') "  \
	"    AND (l.lease_slot BETWEEN $7 AND $8 OR l.lease_slot BETWEEN $9 AND $10) FOR UPDATE OF l) l), "                \
	"leased AS (DELETE FROM awa.leases l USING lease_keys k "                                                          \
	"  WHERE l.job_id = ANY (ARRAY(SELECT x.job_id FROM lease_keys x)) " Q " AND l.queue = k.queue AND l.priority = "  \
	"k.priority "                                                                                                      \
	"  AND l.enqueue_shard = k.enqueue_shard AND l.lane_seq = k.lane_seq AND l.lease_slot = k.lease_slot "             \
	"  AND (l.lease_slot BETWEEN $7 AND $8 OR l.lease_slot BETWEEN $9 AND $10) "                                       \
	"  AND l.state IN ('running', 'waiting_external') RETURNING l.*" KEPT_OF_K "), "

/* The end of the finished attempts: the deleted leases (with the columns KEPT of them). */
#define COMPLETE_LEASES_FINISHED_SQL COMPLETE_LEASES_FINISHED_CARRYING_SQL("")
#define COMPLETE_LEASES_FINISHED_CARRYING_SQL(KEPT)                                                                    \
	"  UNION ALL "                                                                                                     \
	"  SELECT l.ready_slot, l.ready_generation, l.job_id, l.queue, l.priority, l.enqueue_shard, l.lane_seq, "          \
	"         l.attempt, l.run_lease, l.attempted_at" KEPT " FROM leased l), "

/*
 * What every completion does with its finished attempts besides recording them: heartbeats
 * and unique claims go. The ready rows are read on the queue ring's live arc ($11..$14), where
 * the finished attempts' rows are, so that only those partitions are prepared.
 */
#define COMPLETE_TAIL_SQL                                                                                              \
	"heartbeats AS (DELETE FROM awa.attempt_state a USING finished f "                                                 \
	"  WHERE a.job_id = ANY (ARRAY(SELECT x.job_id FROM finished x)) AND a.job_id = f.job_id AND a.run_lease = "       \
	"f.run_lease), "                                                                                                   \
	"unique_release AS (DELETE FROM awa.job_unique_claims u USING finished f "                                         \
	"  WHERE u.job_id = ANY (ARRAY(SELECT x.job_id FROM finished x)) AND u.job_id = f.job_id "                         \
	"  AND EXISTS (SELECT 1 FROM awa.ready_entries r WHERE r.ready_slot = f.ready_slot AND r.queue = f.queue "         \
	"    AND r.priority = f.priority AND r.enqueue_shard = f.enqueue_shard AND r.lane_seq = f.lane_seq "               \
	"    AND (r.ready_slot BETWEEN $11 AND $12 OR r.ready_slot BETWEEN $13 AND $14) "                                  \
	"    AND r.unique_key IS NOT NULL AND NOT awa.job_state_in_bitmask(r.unique_states, 'completed'))) "               \
	"SELECT job_id, run_lease, queue, enqueue_shard FROM finished ORDER BY queue, enqueue_shard, job_id"

/*
 * The same on a 1.1 catalog, whose heartbeats and unique claims carry the queue: each row is
 * joined on it too, and Q is "" or a condition on the queue ("$16") that every table probe
 * carries.
 */
#define COMPLETE_TAIL_1_1_SQL(Q)                                                                                       \
	"heartbeats AS (DELETE FROM awa.attempt_state a USING finished f "                                                 \
	"  WHERE a.job_id = ANY (ARRAY(SELECT x.job_id FROM finished x)) AND a.job_id = f.job_id AND a.run_lease = "       \
	"f.run_lease AND a.queue = f.queue " Q(                                                                            \
		"a") "), "                                                                                                     \
			 "unique_release AS (DELETE FROM awa.job_unique_claims u USING finished f "                                \
			 "  WHERE u.job_id = ANY (ARRAY(SELECT x.job_id FROM finished x)) AND u.job_id = f.job_id AND u.queue = "  \
			 "f.queue " Q(                                                                                             \
				 "u") "  AND EXISTS (SELECT 1 FROM awa.ready_entries r WHERE r.ready_slot = f.ready_slot AND r.queue " \
					  "= f.queue "                                                                                     \
					  "    AND r.priority = f.priority AND r.enqueue_shard = f.enqueue_shard AND r.lane_seq = "        \
					  "f.lane_seq " Q(                                                                                 \
						  "r") "    AND (r.ready_slot BETWEEN $11 AND $12 OR r.ready_slot BETWEEN $13 AND $14) "       \
							   "    AND r.unique_key IS NOT NULL AND NOT awa.job_state_in_bitmask(r.unique_states, "   \
							   "'completed'))) "                                                                       \
							   "SELECT job_id, run_lease, queue, enqueue_shard FROM finished ORDER BY queue, "         \
							   "enqueue_shard, job_id"
/* The queue conditions of the two forms of a 1.1 completion: none, or `queue = $16`. */
#define COMPLETE_BY_ID(ALIAS) ""
#define COMPLETE_IN_QUEUE(ALIAS) " AND " ALIAS ".queue = $16 "
