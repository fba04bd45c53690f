/*
 * direct_complete.hpp — the receipts part of awa.complete_jobs (and of the heartbeats)
 * through PostgreSQL's direct access routines (direct_complete.cpp; docs/design.md §5, "Direct completion"): index
 * probes on known partitions of the live arcs, row locks on the claim batches, completion
 * batches inserted into their partition with its indexes, no planned statement on the
 * common path.
 */
#pragma once

extern "C"
{
#include "postgres.h"
#include "utils/array.h"
#include "utils/snapshot.h"
}

namespace awa
{

/* One attempt a direct completion completed: its pair and its lane's (queue, shard). */
struct DirectCompleted
{
	int64 job_id;
	int64 run_lease;
	text *queue;
	int16 enqueue_shard;
};

/*
 * What a direct completion did. `done[0..ndone)` are the attempts it completed, sorted by
 * (queue, enqueue_shard, job_id). `left_*` are the pairs (with their results, or NULL) whose
 * receipt it did not find on the live arcs: a lease, a stale pair, another queue's attempt;
 * the planned statements take them (nleft == 0: none).
 */
struct DirectCompletion
{
	DirectCompleted *done;
	int ndone;
	ArrayType *left_ids;
	ArrayType *left_leases;
	ArrayType *left_results;
	int nleft;
};

/*
 * Complete the open receipts among the pairs (ids, leases; results or nullptr; queue or
 * nullptr: p_queue) on the live arcs of the queue ring and the claim ring. Returns false,
 * having read and written nothing, when the planned statements must do all of it (Citus,
 * a read-only transaction, missing privileges, a trigger, rule or row security on a table
 * it writes or reads, a column it does not know). SPI must be connected (the tail's rare
 * deletes are statements).
 */
bool direct_complete_receipts(ArrayType *ids, ArrayType *leases, ArrayType *results, text *queue,
							  const int queue_arc[4], const int claim_arc[4], DirectCompletion *out);

/* One attempt a direct heartbeat found open. */
struct DirectAttempt
{
	int64 job_id;
	int64 run_lease;
};

/*
 * What a direct heartbeat did: the open receipts that got their heartbeat (`open[0..alive)`,
 * each pair once, in (job_id, run_lease) order), the pairs whose receipt it did not find
 * (leases, stale pairs) with their progress (NULL when none was given), for the lease
 * statement, and whether it ran the upsert statement (whose triggers may have written).
 */
struct DirectHeartbeat
{
	uint64 alive;
	DirectAttempt *open;
	ArrayType *left_ids;
	ArrayType *left_leases;
	ArrayType *left_progress;
	int nleft;
	bool ran_statement;
};

/*
 * Record a heartbeat of the open receipts among the pairs, and the progress given for each
 * (`progress`: a jsonb[] aligned with the pairs, a NULL element keeping the stored progress;
 * nullptr: none; a pair given twice takes its last value), on one copy of the latest
 * snapshot, the receipts found and tested as a completion finds and tests them but without
 * locks; an attempt's attempt_state row is inserted (speculatively, as the upsert's INSERT)
 * or updated in place directly, and by the upsert statement only when it changed or raced
 * meanwhile. False, having read
 * and written nothing, as direct_complete_receipts. SPI must be connected.
 */
bool direct_heartbeat_receipts(ArrayType *ids, ArrayType *leases, ArrayType *progress, text *queue,
							   const int queue_arc[4], const int claim_arc[4], DirectHeartbeat *out);

/*
 * An attempt named by its identity where it was recorded (awa.key_attempts): its job and run
 * lease, its ready row's lane, lane_seq, slot and generation, and the claim ring slot of its
 * claim batch (none: no receipt).
 */
struct NamedAttempt
{
	text *queue;
	int16 priority;
	int16 enqueue_shard;
	int64 lane_seq;
	int32 ready_slot;
	int64 ready_generation;
	bool has_claim_slot;
	int32 claim_slot;
	int64 job_id;
	int64 run_lease;
};

/*
 * Whether each named attempt holds an open receipt on `snapshot`, as the per-key count's
 * statement tests it (flow_control.cpp, kKeyCountSql): its ready row in its ready slot and a
 * claim batch naming it in its claim slot, both on the live arcs, then the open-receipt test
 * of awa._open_receipts (no terminal row, completion batch entry or closure), each probe on
 * the one partition that can hold the row; no lock is taken. open[i] for attempts[i]. False,
 * having read nothing, when the statement must run instead (as direct_heartbeat_receipts).
 */
bool direct_named_receipts_open(const NamedAttempt *attempts, int n, const int queue_arc[4], const int claim_arc[4],
								Snapshot snapshot, bool *open);

} // namespace awa
