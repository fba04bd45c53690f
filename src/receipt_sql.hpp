/*
 * receipt_sql.hpp — SQL text shared by the statements that find, test and lock receipts
 * (lifecycle.cpp, attempts.cpp): macros that expand to fragments of those statements, so
 * that every statement tests a receipt the same way as the view awa._open_receipts.
 */
#pragma once

/*
 * SQL: the parts of the test of the view awa._open_receipts, as subqueries on a receipt `c`
 * (a row with the columns of awa.lease_claims) probed per receipt, each with the receipt's
 * slot as a parameter so that run-time pruning leaves one partition (as joins, the planner
 * probed every partition of the tables per receipt): no terminal row for its attempt, no
 * completion batch naming it (found by its lane's block of 64 lane_seqs and ready generation,
 * then by its offset in the block in the batch's array), no closure, its ready row still there
 * (a test only the 1.0 receipts need, whose rows store their job id: matched on it too, since
 * lane numbers restart when a queue is dropped and created again). ARC is an extra condition
 * ("" for none) that restricts the look-up to its ring's live arc, so that a statement run
 * with the arcs also prepares only the live partitions.
 */
#define AWA_RECEIPT_NO_TERMINAL_ROW(ARC)                                                                               \
	" NOT EXISTS (SELECT 1 FROM awa.done_entries d WHERE d.queue = c.queue AND d.priority = c.priority "               \
	"   AND d.enqueue_shard = c.enqueue_shard AND d.lane_seq = c.lane_seq AND d.ready_slot = c.ready_slot "            \
	"   AND d.job_id = c.job_id AND d.run_lease = c.run_lease " ARC " OFFSET 0) "
#define AWA_RECEIPT_NOT_IN_BATCH(ARC)                                                                                  \
	" NOT EXISTS (SELECT 1 FROM awa.completion_batches b WHERE b.queue = c.queue AND b.priority = c.priority "         \
	"   AND b.enqueue_shard = c.enqueue_shard AND b.lane_block = c.lane_seq / 64 AND b.ready_slot = c.ready_slot "     \
	"   AND b.ready_generation = c.ready_generation AND (c.lane_seq % 64)::int2 = ANY (b.lane_offsets) " ARC           \
	" OFFSET 0) "
#define AWA_RECEIPT_NO_CLOSURE(ARC)                                                                                    \
	" NOT EXISTS (SELECT 1 FROM awa.lease_claim_closures x WHERE x.claim_slot = c.claim_slot "                         \
	"   AND x.job_id = c.job_id AND x.run_lease = c.run_lease AND x.queue = c.queue " ARC " OFFSET 0) "
/*
 * SQL (1.1 catalogs): receipts reached through their ready rows. A receipt is one attempt of
 * a claim batch (awa.claim_batches); its ready row, found by the ready rows' job index, gives
 * the lane, the lane_seq and the ready slot, hence the batch's block key, and the attempt is
 * then found by its position in the batch's arrays. The batches are probed by that key from
 * each ready row (a lateral subquery the planner cannot turn into a join: a plan made while
 * the batches looked empty hashed every batch of the slot on every call). AWA_RECEIPT_COLUMNS is the receipt as a
 * row with the columns of the view awa.lease_claims (plus receipt_base, the batch's identity
 * and the order in which closers lock batches); AWA_RECEIPT_FROM_READY the FROM clause that
 * makes it (ready row `r`, batch `b`, position `x.k`; AWA_RECEIPT_FROM_READY_ON(ARC) with
 * a condition on `b` that restricts the batch probe to the claim ring's live arc, so that
 * only those partitions are probed); AWA_RECEIPT_IS(JOB, LEASE) the
 * condition selecting the receipt of one attempt (for the newest receipt of a job, the same
 * without the run_lease condition). A ready row is claimed once: the attempt's job id,
 * attempt, run_lease and max_attempts are the ready row's (attempt and run_lease plus one).
 * Joined on the ready generation as well (a slot truncated and used again); awa.drop_queue
 * deletes a queue's batches, whose lane numbers a queue created again would reuse.
 */
#define AWA_RECEIPT_COLUMNS                                                                                            \
	" b.claim_slot, b.receipt_base + x.k - 1 AS receipt_id, r.job_id, r.run_lease + 1 AS run_lease, b.ready_slot, "    \
	" b.ready_generation, b.queue, b.priority, b.effective_priorities[x.k] AS effective_priority, "                    \
	" (r.attempt + 1)::int2 AS attempt, r.max_attempts, r.lane_seq, b.enqueue_shard, b.claimed_at, "                   \
	" b.deadline_at, b.lane_block, b.receipt_base "
#define AWA_RECEIPT_FROM_READY_ON(ARC)                                                                                 \
	" awa.ready_entries r CROSS JOIN LATERAL (SELECT b.* FROM awa.claim_batches b WHERE b.queue = r.queue "            \
	"   AND b.priority = r.priority AND b.enqueue_shard = r.enqueue_shard AND b.lane_block = r.lane_seq / 64 "         \
	"   AND b.ready_slot = r.ready_slot AND b.ready_generation = r.ready_generation " ARC " OFFSET 0) b "              \
	" CROSS JOIN LATERAL (SELECT array_position(b.lane_offsets, (r.lane_seq % 64)::int2) AS k) x "
#define AWA_RECEIPT_FROM_READY AWA_RECEIPT_FROM_READY_ON("")
/* The live arc of the claim ring as a condition on `b`, when it is parameters $3..$6. */
#define AWA_CLAIM_ARC_OF_B "AND (b.claim_slot BETWEEN $3 AND $4 OR b.claim_slot BETWEEN $5 AND $6)"
#define AWA_RECEIPT_OF_JOB(JOB) " r.job_id = " JOB " AND x.k IS NOT NULL "
/* The ready row's run lease plus one, as the receipt's run_lease above: `LEASE - 1` overflowed
 * (22003) for the smallest bigint, which names no attempt. */
#define AWA_RECEIPT_IS(JOB, LEASE) AWA_RECEIPT_OF_JOB(JOB) " AND r.run_lease + 1 = " LEASE " "
/*
 * Lock the claim batch whose key and receipt_base a row `k` names (FOR UPDATE, WAIT "" or
 * "SKIP LOCKED"), as a lateral subquery `b`. A batch is always found first and locked by its
 * identity here: a lock taken in the probe of a block would lock every batch of the block.
 * ARC ("" for none, or AWA_CLAIM_ARC_OF_B) restricts the probe to the claim ring's live arc,
 * so that the executor prepares only those partitions.
 */
#define AWA_LOCK_BATCH_OF_KEY(WAIT, ARC)                                                                               \
	" CROSS JOIN LATERAL (SELECT 1 FROM awa.claim_batches b WHERE b.claim_slot = k.claim_slot AND b.queue = k.queue "  \
	"   AND b.priority = k.priority AND b.enqueue_shard = k.enqueue_shard AND b.lane_block = k.lane_block "            \
	"   AND b.ready_slot = k.ready_slot AND b.receipt_base = k.receipt_base " ARC " FOR UPDATE OF b " WAIT ") b "

/* The receipt of the pair `i` (job_id, run_lease) of a statement's input. */
#define AWA_RECEIPT_IS_INPUT AWA_RECEIPT_IS("i.job_id", "i.run_lease")

/*
 * The open-receipt test of a receipt `c` reached through its ready row (AWA_RECEIPT_FROM_READY:
 * the ready-row part of the test holds by construction), each probe restricted to its ring's
 * live arc: the claim ring's in parameters $C1..$C4, the queue ring's in $Q1..$Q4.
 */
#define AWA_READY_RECEIPT_OPEN_LIVE(C1, C2, C3, C4, Q1, Q2, Q3, Q4)                                                    \
	AWA_RECEIPT_NO_TERMINAL_ROW("AND (d.ready_slot BETWEEN $" Q1 " AND $" Q2 " OR d.ready_slot BETWEEN $" Q3           \
								" AND $" Q4 ")")                                                                       \
	" AND " AWA_RECEIPT_NOT_IN_BATCH(                                                                                  \
		"AND (b.ready_slot BETWEEN $" Q1 " AND $" Q2 " OR b.ready_slot BETWEEN $" Q3 " AND $" Q4                       \
		")") " AND " AWA_RECEIPT_NO_CLOSURE("AND (x.claim_slot BETWEEN $" C1 " AND $" C2                               \
											" OR x.claim_slot BETWEEN $" C3 " AND $" C4 ")")

/* The same on every partition (a statement about one job). */
#define AWA_READY_RECEIPT_OPEN                                                                                         \
	AWA_RECEIPT_NO_TERMINAL_ROW("") " AND " AWA_RECEIPT_NOT_IN_BATCH("") " AND " AWA_RECEIPT_NO_CLOSURE("")
