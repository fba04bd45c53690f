-- Views over the plane that the functions read (internal, and awa.lease_claims, the receipts).

-- One row per completed attempt of awa.completion_batches, with the attempt's identity read
-- from its ready row (internal; what readers of many attempts join with). Each ready row is
-- matched with the batch of its block (lane_seq / 64, the block's range spelled out, as in
-- awa._open_receipts), never with every batch of its lane: a join on the lane alone paired
-- every ready row of a slot with every completion batch of its lane. A reader of one job
-- starts from the ready rows' job index; a reader of a slot from its batches.
CREATE VIEW awa._batch_completions AS
    SELECT b.ready_slot, b.ready_generation, b.queue, b.priority, b.enqueue_shard, b.lane_block,
           r.lane_seq, r.job_id, r.run_lease + 1 AS run_lease, (r.attempt + 1)::smallint AS attempt,
           b.attempted_at[x.k] AS attempted_at, b.finalized_at
      FROM awa.completion_batches b
      JOIN awa.ready_entries r
        ON r.queue = b.queue AND r.priority = b.priority AND r.enqueue_shard = b.enqueue_shard
       AND r.ready_slot = b.ready_slot AND r.ready_generation = b.ready_generation
       AND r.lane_seq / 64 = b.lane_block AND r.lane_seq BETWEEN b.lane_block * 64 AND b.lane_block * 64 + 63
     CROSS JOIN LATERAL (SELECT array_position(b.lane_offsets, (r.lane_seq % 64)::smallint) AS k) x
     WHERE x.k IS NOT NULL;
COMMENT ON VIEW awa._batch_completions IS 'Internal: one row per completed attempt of awa.completion_batches.';
GRANT SELECT ON awa._batch_completions TO awa_admin;

-- Every attempt that ended in a terminal state, one row each: the terminal rows (failed,
-- cancelled, and completions of 1.0) and the completions in batches (internal; for readers
-- of many attempts and for checks).
CREATE VIEW awa._terminal_attempts AS
    SELECT d.ready_slot, d.ready_generation, d.job_id, d.queue, d.priority, d.enqueue_shard, d.lane_seq, d.state,
           d.attempt, d.run_lease, d.attempted_at, d.finalized_at
      FROM awa.done_entries d
    UNION ALL
    SELECT b.ready_slot, b.ready_generation, b.job_id, b.queue, b.priority, b.enqueue_shard, b.lane_seq,
           'completed'::awa.job_state, b.attempt, b.run_lease, b.attempted_at, b.finalized_at
      FROM awa._batch_completions b;
COMMENT ON VIEW awa._terminal_attempts IS 'Internal: every attempt that ended in a terminal state (terminal rows and batch completions).';
GRANT SELECT ON awa._terminal_attempts TO awa_admin;

-- Every receipt whose ready row is still stored, one row per claimed attempt (the claim
-- batches unnested, each attempt's identity read from its ready row): what the receipts
-- table of 1.0 held, minus materialized_at, plus the block and the batch's receipt_base (its
-- identity, and the order in which closers of several attempts lock). A receipt whose ready
-- row has gone (its queue-ring slot pruned after it closed, its completed job deleted) is
-- not listed. Each ready row is matched with the batch of its block, as in awa._open_receipts
-- (a join on the lane alone paired every ready row of a slot with every batch of its lane).
CREATE VIEW awa.lease_claims AS
    SELECT b.claim_slot, b.receipt_base + u.k - 1 AS receipt_id, r.job_id, r.run_lease + 1 AS run_lease,
           b.ready_slot, b.ready_generation, b.queue, b.priority, b.effective_priorities[u.k] AS effective_priority,
           (r.attempt + 1)::smallint AS attempt, r.max_attempts, r.lane_seq, b.enqueue_shard, b.claimed_at,
           b.deadline_at, b.lane_block, b.receipt_base
      FROM awa.claim_batches b
      JOIN awa.ready_entries r
        ON r.queue = b.queue AND r.priority = b.priority AND r.enqueue_shard = b.enqueue_shard
       AND r.ready_slot = b.ready_slot AND r.ready_generation = b.ready_generation
       AND r.lane_seq / 64 = b.lane_block AND r.lane_seq BETWEEN b.lane_block * 64 AND b.lane_block * 64 + 63
     CROSS JOIN LATERAL (SELECT array_position(b.lane_offsets, (r.lane_seq % 64)::smallint) AS k) u
     WHERE u.k IS NOT NULL;
COMMENT ON VIEW awa.lease_claims IS
    'Receipts mode: one row per recorded attempt (receipt) whose ready row is still stored (awa.claim_batches unnested).';
GRANT SELECT ON awa.lease_claims TO awa_admin;

-- Every lane's claim cursor and run_at hint: the head's, or the lane's latest claim mark
-- when it is further. A claim commits its receipts and its mark together, so one snapshot
-- sees both or neither. Deciding under a head lock at any isolation level: awa._lane_cursor.
-- On a Citus cluster awa.citus_setup() replaces it by the same rows in a form Citus routes by
-- queue (the latest marks from a DISTINCT ON subquery, not a lateral one per lane).
CREATE VIEW awa.lane_cursors AS
    SELECT h.queue, h.priority, h.enqueue_shard, greatest(h.claim_seq, m.claim_seq) AS claim_seq,
           CASE WHEN m.claim_seq > h.claim_seq THEN m.head_run_at ELSE h.head_run_at END AS head_run_at
      FROM awa.queue_claim_heads h
      LEFT JOIN LATERAL (
          SELECT k.claim_seq, k.head_run_at FROM awa.claim_marks k
           WHERE k.queue = h.queue AND k.priority = h.priority AND k.enqueue_shard = h.enqueue_shard
           ORDER BY k.claim_seq DESC LIMIT 1) m ON true;
COMMENT ON VIEW awa.lane_cursors IS
    'Claim cursor (claim_seq) and run_at hint of every lane: its head, or its latest claim mark when further.';
GRANT SELECT ON awa.lane_cursors TO awa_admin, pg_monitor;

-- The open receipts: running attempts of receipts mode. A receipt (awa.lease_claims, one
-- attempt of a claim batch) ends with a closure (fail, retry, snooze, dead letter, cancel,
-- rescue, drop), or, for a success, with its entry in a completion batch alone
-- (awa.completion_batches): complete_jobs writes no closure. (A 1.0 completion ended it
-- with a completed terminal row.) Every closer locks the claim batch of the receipt (FOR
-- UPDATE; closers of several attempts lock their batches in key order) and decides on the
-- latest committed state after the lock, so exactly one wins (docs/design.md §5). A receipt
-- whose ready row is gone (its queue slot pruned, which needs every receipt of the slot
-- ended first; its job deleted) is not open either. A ready row is claimed once, so its
-- attempt (job id, attempt + 1, run_lease + 1) is read from it. A queue dropped and created
-- again numbers its lanes from 1: awa.drop_queue deletes the old queue's claim and
-- completion batches, so that none of them takes a new job's row for its own.
-- Every reader of "running" goes through this view. It starts from the ready rows and finds
-- each one's attempt in the claim batch of its block by position (as the C++ statements do,
-- AWA_RECEIPT_FROM_READY in src/receipt_sql.hpp), so a reader of one job starts from the
-- ready rows' job index; the block's lane_seq range is spelled out too, so a reader of a
-- claim slot starts from its batches and reads each block's ready rows by key. The other
-- tests are plain NOT EXISTS, so a reader of many receipts may join them by hash. `ready`
-- is the whole ready row, for awa.jobs.
CREATE VIEW awa._open_receipts AS
    SELECT b.claim_slot, b.receipt_base + x.k - 1 AS receipt_id, r.job_id, r.run_lease + 1 AS run_lease,
           b.ready_slot, b.ready_generation, b.queue, b.priority, b.effective_priorities[x.k] AS effective_priority,
           (r.attempt + 1)::smallint AS attempt, r.max_attempts, r.lane_seq, b.enqueue_shard,
           b.claimed_at, b.deadline_at, b.lane_block, b.receipt_base, r AS ready
      FROM awa.claim_batches b
      JOIN awa.ready_entries r
        ON r.queue = b.queue AND r.priority = b.priority AND r.enqueue_shard = b.enqueue_shard
       AND r.ready_slot = b.ready_slot AND r.ready_generation = b.ready_generation
       AND r.lane_seq / 64 = b.lane_block AND r.lane_seq BETWEEN b.lane_block * 64 AND b.lane_block * 64 + 63
     CROSS JOIN LATERAL (SELECT array_position(b.lane_offsets, (r.lane_seq % 64)::smallint) AS k) x
     WHERE x.k IS NOT NULL
       AND NOT EXISTS (SELECT 1 FROM awa.done_entries d
                        WHERE d.queue = r.queue AND d.priority = r.priority AND d.enqueue_shard = r.enqueue_shard
                          AND d.lane_seq = r.lane_seq AND d.ready_slot = r.ready_slot AND d.job_id = r.job_id
                          AND d.run_lease = r.run_lease + 1)
       AND NOT EXISTS (SELECT 1 FROM awa.completion_batches f
                        WHERE f.queue = r.queue AND f.priority = r.priority AND f.enqueue_shard = r.enqueue_shard
                          AND f.lane_block = r.lane_seq / 64 AND f.ready_slot = r.ready_slot
                          AND f.ready_generation = r.ready_generation
                          AND (r.lane_seq % 64)::smallint = ANY (f.lane_offsets))
       AND NOT EXISTS (SELECT 1 FROM awa.lease_claim_closures z
                        WHERE z.claim_slot = b.claim_slot AND z.job_id = r.job_id AND z.run_lease = r.run_lease + 1
                          AND z.queue = r.queue);
COMMENT ON VIEW awa._open_receipts IS
    'Internal: receipts of running attempts (no closure, ready row present, no terminal row or completion for the attempt).';
GRANT SELECT ON awa._open_receipts TO awa_admin;

-- Claim batches that hold at least one open receipt (awa._open_receipts). A batch every
-- lane offset of which a completion batch of its block names holds none, and costs one
-- probe; only the others are tested receipt by receipt (OFFSET 0 keeps that test a probe
-- per such batch: joined, it read every receipt of the ring). Asked of a claim slot or a
-- ready slot by prune, it reads the slot's batches, not their receipts: a claim-ring slot
-- of 339 completed batches (10 s of 1,000 jobs/s) took 116 ms through awa._open_receipts,
-- 5 ms here, and the maintenance pass that asked it held back jobs enqueued meanwhile.
-- The probe names its block's lane_seq range on the outer batch: the view's own bound is on
-- its inner batch, so the planner read every ready row of the lane in the slot for each
-- batch tested (37-170 ms a batch, 14-101 s a prune's check of a slot of 500,000 rows; a
-- 64-row range of the primary key now, 0.17 ms).
CREATE VIEW awa._open_claim_batches AS
    SELECT b.* FROM awa.claim_batches b
     WHERE NOT b.lane_offsets <@ ARRAY(
               SELECT o FROM awa.completion_batches f CROSS JOIN LATERAL pg_catalog.unnest(f.lane_offsets) o
                WHERE f.queue = b.queue AND f.priority = b.priority AND f.enqueue_shard = b.enqueue_shard
                  AND f.lane_block = b.lane_block AND f.ready_slot = b.ready_slot
                  AND f.ready_generation = b.ready_generation)
       AND EXISTS (SELECT 1 FROM awa._open_receipts c
                    WHERE c.claim_slot = b.claim_slot AND c.receipt_base = b.receipt_base
                      AND c.queue = b.queue AND c.priority = b.priority AND c.enqueue_shard = b.enqueue_shard
                      AND c.lane_block = b.lane_block AND c.ready_slot = b.ready_slot
                      AND c.lane_seq BETWEEN b.lane_block * 64 AND b.lane_block * 64 + 63
                    OFFSET 0);
COMMENT ON VIEW awa._open_claim_batches IS
    'Internal: claim batches holding at least one open receipt, found batch by batch.';
GRANT SELECT ON awa._open_claim_batches TO awa_admin;
