-- The rings (docs/maintenance.md): cursors, slots, and the ready plane partitioned by
-- queue-ring slot. Space is reclaimed by truncating a whole slot, never by per-job DELETE.

-- Ring cursors: writers append into the current slot; rotation seals it.
CREATE TABLE awa.queue_ring_state (
    singleton boolean PRIMARY KEY DEFAULT true CHECK (singleton),
    slot_count integer NOT NULL,
    current_slot integer NOT NULL DEFAULT 0,
    generation bigint NOT NULL DEFAULT 0)
    WITH (fillfactor = 50);
CREATE TABLE awa.lease_ring_state (LIKE awa.queue_ring_state INCLUDING ALL) WITH (fillfactor = 50);
CREATE TABLE awa.claim_ring_state (LIKE awa.queue_ring_state INCLUDING ALL) WITH (fillfactor = 50);
INSERT INTO awa.queue_ring_state (slot_count) VALUES (16);
INSERT INTO awa.lease_ring_state (slot_count) VALUES (8);
INSERT INTO awa.claim_ring_state (slot_count) VALUES (8);
SELECT pg_catalog.pg_extension_config_dump('awa.queue_ring_state', '');
SELECT pg_catalog.pg_extension_config_dump('awa.lease_ring_state', '');
SELECT pg_catalog.pg_extension_config_dump('awa.claim_ring_state', '');
GRANT SELECT ON awa.queue_ring_state, awa.lease_ring_state, awa.claim_ring_state TO awa_admin;
COMMENT ON TABLE awa.queue_ring_state IS 'Queue ring cursor: slot count, current write slot and its generation.';
COMMENT ON TABLE awa.lease_ring_state IS 'Lease ring cursor: slot count, current write slot and its generation.';
COMMENT ON TABLE awa.claim_ring_state IS 'Claim (receipt) ring cursor: slot count, current write slot and its generation.';

-- Generation held by each ring slot (-1: empty). Row locks here serialise prune.
CREATE TABLE awa.queue_ring_slots (slot integer PRIMARY KEY, generation bigint NOT NULL DEFAULT -1);
CREATE TABLE awa.lease_ring_slots (LIKE awa.queue_ring_slots INCLUDING ALL);
CREATE TABLE awa.claim_ring_slots (LIKE awa.queue_ring_slots INCLUDING ALL);
INSERT INTO awa.queue_ring_slots SELECT s, CASE WHEN s = 0 THEN 0 ELSE -1 END FROM generate_series(0, 15) s;
INSERT INTO awa.lease_ring_slots SELECT s, CASE WHEN s = 0 THEN 0 ELSE -1 END FROM generate_series(0, 7) s;
INSERT INTO awa.claim_ring_slots SELECT s, CASE WHEN s = 0 THEN 0 ELSE -1 END FROM generate_series(0, 7) s;
SELECT pg_catalog.pg_extension_config_dump('awa.queue_ring_slots', '');
SELECT pg_catalog.pg_extension_config_dump('awa.lease_ring_slots', '');
SELECT pg_catalog.pg_extension_config_dump('awa.claim_ring_slots', '');
GRANT SELECT ON awa.queue_ring_slots, awa.lease_ring_slots, awa.claim_ring_slots TO awa_admin;
COMMENT ON TABLE awa.queue_ring_slots IS 'Generation held by each queue-ring slot (-1: free).';
COMMENT ON TABLE awa.lease_ring_slots IS 'Generation held by each lease-ring slot (-1: free).';
COMMENT ON TABLE awa.claim_ring_slots IS 'Generation held by each claim-ring slot (-1: free).';
-- A slot whose pending (and retained failed) rows a prune has moved out keeps them, deleted,
-- for the snapshots that do not see the move yet: moved_xid names the moving transaction, and
-- the slot is truncated and freed once every snapshot sees it ended (awa.prune_queue_ring).
ALTER TABLE awa.queue_ring_slots ADD COLUMN moved_xid xid8;
COMMENT ON COLUMN awa.queue_ring_slots.moved_xid IS 'Transaction that moved the slot''s pending rows forward; the slot is truncated once every snapshot sees it ended (NULL: not moved).';
-- On a Citus cluster the move runs on the workers: once it has committed, the coordinator's
-- prune reads each worker's next transaction id into moved_horizons, and truncates once
-- every worker's snapshots have passed it (awa._citus_prune_queue_slot).
ALTER TABLE awa.queue_ring_slots ADD COLUMN moved_horizons jsonb;
COMMENT ON COLUMN awa.queue_ring_slots.moved_horizons IS 'Citus: per worker group, its next transaction id read after the slot''s move committed; NULL until read (or not moved).';
-- On a Citus cluster each worker frees its own shards of a sealed slot, in a transaction of
-- its own (awa._citus_free_local_ring_slot), and notes it here; the coordinator marks the slot
-- free once every worker has. Meanwhile a writer on this node that read the slot as current
-- before it was sealed finds it closed and reads the ring again (src/ring.cpp). Node-local,
-- never distributed; a row of an older generation of its slot means nothing.
CREATE TABLE awa.ring_slot_closures (
    ring text NOT NULL CHECK (ring IN ('queue', 'claim', 'lease')),
    slot integer NOT NULL,
    generation bigint NOT NULL,
    PRIMARY KEY (ring, slot));
GRANT SELECT ON awa.ring_slot_closures TO awa_admin;
COMMENT ON TABLE awa.ring_slot_closures IS 'Citus: the ring slots whose shards on this node are freed, by generation, until the coordinator frees the slot.';

-- Job ids, and receipt ids: each claim batch takes one value and the 63 after it.
CREATE SEQUENCE awa.job_id_seq AS bigint;
REVOKE ALL ON SEQUENCE awa.job_id_seq FROM PUBLIC;
SELECT pg_catalog.pg_extension_config_dump('awa.job_id_seq', '');
COMMENT ON SEQUENCE awa.job_id_seq IS 'Job ids.';
CREATE SEQUENCE awa.receipt_id_seq AS bigint INCREMENT BY 64;
REVOKE ALL ON SEQUENCE awa.receipt_id_seq FROM PUBLIC;
SELECT pg_catalog.pg_extension_config_dump('awa.receipt_id_seq', '');
COMMENT ON SEQUENCE awa.receipt_id_seq IS 'Receipt ids: each claim batch takes one value and the 63 after it.';

-- Ready jobs. Written once; completion never touches them (terminal rows go to done_entries).
CREATE TABLE awa.ready_entries (
    ready_slot integer NOT NULL,
    ready_generation bigint NOT NULL,
    job_id bigint NOT NULL,
    kind text NOT NULL,
    queue text NOT NULL,
    args jsonb NOT NULL DEFAULT '{}',
    priority smallint NOT NULL,
    attempt smallint NOT NULL DEFAULT 0,
    run_lease bigint NOT NULL DEFAULT 0,
    max_attempts smallint NOT NULL DEFAULT 25,
    lane_seq bigint NOT NULL,
    enqueue_shard smallint NOT NULL DEFAULT 0,
    run_at timestamptz NOT NULL DEFAULT clock_timestamp(),
    attempted_at timestamptz,
    created_at timestamptz NOT NULL DEFAULT clock_timestamp(),
    unique_key bytea,
    unique_states bit(8),
    ordering_key bytea,
    metadata jsonb,
    tags text[],
    errors jsonb,
    concurrency_key text,
    PRIMARY KEY (queue, priority, enqueue_shard, lane_seq, ready_slot))
    PARTITION BY LIST (ready_slot);
CREATE INDEX ready_entries_job_idx ON awa.ready_entries (job_id);
GRANT SELECT ON awa.ready_entries TO awa_admin;
COMMENT ON TABLE awa.ready_entries IS 'Jobs put on the ready plane, written once, keyed by lane identity; partitioned by queue-ring slot.';

-- Terminal rows (completed, failed, cancelled), keyed by the ready row's lane identity.
-- Body columns are NULL when the ready row of the same identity holds them.
CREATE TABLE awa.done_entries (
    ready_slot integer NOT NULL,
    ready_generation bigint NOT NULL,
    job_id bigint NOT NULL,
    queue text NOT NULL,
    priority smallint NOT NULL,
    enqueue_shard smallint NOT NULL DEFAULT 0,
    lane_seq bigint NOT NULL,
    state awa.job_state NOT NULL DEFAULT 'completed',
    attempt smallint NOT NULL,
    run_lease bigint NOT NULL,
    attempted_at timestamptz,
    finalized_at timestamptz NOT NULL DEFAULT clock_timestamp(),
    kind text,
    args jsonb,
    max_attempts smallint,
    run_at timestamptz,
    created_at timestamptz,
    unique_key bytea,
    unique_states bit(8),
    ordering_key bytea,
    metadata jsonb,
    tags text[],
    errors jsonb,
    result jsonb,
    concurrency_key text,
    PRIMARY KEY (queue, priority, enqueue_shard, lane_seq, ready_slot))
    PARTITION BY LIST (ready_slot);
CREATE INDEX done_entries_job_idx ON awa.done_entries (job_id);
GRANT SELECT ON awa.done_entries TO awa_admin;
COMMENT ON TABLE awa.done_entries IS 'Terminal rows (completed, failed, cancelled) on the lane identity of their ready row; partitioned by queue-ring slot.';

-- Retained failed terminal rows live in their own partition (ready_slot -1, not a ring
-- slot): prune copies a failed row here once, with its body, and never again.
CREATE TABLE awa.done_entries_retained PARTITION OF awa.done_entries FOR VALUES IN (-1);
SELECT pg_catalog.pg_extension_config_dump('awa.done_entries_retained', '');
GRANT SELECT ON awa.done_entries_retained TO awa_admin;
COMMENT ON TABLE awa.done_entries_retained IS 'Failed terminal rows kept across prune, with their body (ready_slot -1).';
COMMENT ON COLUMN awa.done_entries.result IS 'The result of a completed job kept past its ring slot (retention buckets); NULL otherwise (a completion''s result is in its completion batch).';

-- Retention buckets (docs/maintenance.md, "Retention"): finished jobs of a queue with a
-- retention (awa.set_queue_retention) that outlive their ring slot are copied by prune, once
-- and with their body and result, into the bucket of done_entries that expires after them
-- (ready_slot -2 - bucket); a bucket is truncated whole once its expiry has passed
-- (awa.expire_retention), never a row at a time. expires_at NULL: the bucket is free.
CREATE TABLE awa.retention_buckets (
    bucket integer PRIMARY KEY CHECK (bucket BETWEEN 0 AND 15),
    expires_at timestamptz);
INSERT INTO awa.retention_buckets (bucket) SELECT b FROM generate_series(0, 15) b;
SELECT pg_catalog.pg_extension_config_dump('awa.retention_buckets', '');
GRANT SELECT ON awa.retention_buckets TO awa_admin;
COMMENT ON TABLE awa.retention_buckets IS 'Retention buckets of done_entries (ready_slot -2 - bucket): when each expires (NULL: free).';
DO $$
BEGIN
    FOR b IN 0..15 LOOP
        EXECUTE format('CREATE TABLE awa.%I PARTITION OF awa.done_entries FOR VALUES IN (%s)',
                       'done_entries_expiring_' || b, -2 - b);
        EXECUTE format('GRANT SELECT ON awa.%I TO awa_admin', 'done_entries_expiring_' || b);
        PERFORM pg_catalog.pg_extension_config_dump(format('awa.%I', 'done_entries_expiring_' || b)::regclass, '');
        EXECUTE format('COMMENT ON TABLE awa.%I IS %L', 'done_entries_expiring_' || b,
                       format('Retention bucket %s of awa.done_entries (ready_slot %s): finished jobs kept past their ring slot.', b, -2 - b));
    END LOOP;
END
$$;

-- Completions, one row per (completion call, lane, block of 64 lane_seqs): the completed
-- attempts of the block by their offsets in it (lane_seq - 64 * lane_block, 0..63), in lane
-- order, and their claim times. A success writes no row of its own: a completion of ten
-- jobs of one lane appends one row, not ten.
-- A ready row is claimed once, so the attempt that ran it is named by the row itself: job
-- id, attempt (ready attempt + 1) and run_lease (ready run_lease + 1) are read from the
-- ready row (awa._batch_completions), not stored again. The block (lane_seq / 64) bounds
-- every look-up of one attempt to the few rows of its block, found by the key; the arrays
-- are read only there. Partitioned by queue-ring slot like the ready rows they name, and
-- pruned with them; awa.drop_queue deletes a queue's batches, whose lane numbers a queue
-- created again would reuse. Failed and cancelled attempts keep their per-job done_entries
-- rows (the rare exits). `results` holds the attempts' results (complete_jobs' p_results),
-- parallel to lane_offsets, or is NULL when none of them has one: a result lives as long as
-- its completion.
CREATE TABLE awa.completion_batches (
    ready_slot integer NOT NULL,
    ready_generation bigint NOT NULL,
    queue text NOT NULL,
    priority smallint NOT NULL,
    enqueue_shard smallint NOT NULL,
    lane_block bigint NOT NULL,
    lane_offsets smallint[] NOT NULL,
    attempted_at timestamptz[] NOT NULL,
    finalized_at timestamptz NOT NULL DEFAULT clock_timestamp(),
    results jsonb[])
    PARTITION BY LIST (ready_slot);
CREATE INDEX completion_batches_block_idx ON awa.completion_batches (queue, priority, enqueue_shard, lane_block, ready_slot);
GRANT SELECT ON awa.completion_batches TO awa_admin;
COMMENT ON TABLE awa.completion_batches IS 'Completed attempts, one row per (completion call, lane, block of 64 lane_seqs), as parallel arrays; partitioned by queue-ring slot.';

-- The queue-ring partitions: 16 slots of ready rows, terminal rows and completions.
DO $$
BEGIN
    FOR s IN 0..15 LOOP
        EXECUTE format('CREATE TABLE awa.%I PARTITION OF awa.ready_entries FOR VALUES IN (%s)', 'ready_entries_' || s, s);
        EXECUTE format('CREATE TABLE awa.%I PARTITION OF awa.done_entries FOR VALUES IN (%s)', 'done_entries_' || s, s);
        EXECUTE format('CREATE TABLE awa.%I PARTITION OF awa.completion_batches FOR VALUES IN (%s)', 'completion_batches_' || s, s);
        EXECUTE format('GRANT SELECT ON awa.%I, awa.%I, awa.%I TO awa_admin',
                       'ready_entries_' || s, 'done_entries_' || s, 'completion_batches_' || s);
        PERFORM pg_catalog.pg_extension_config_dump(format('awa.%I', 'ready_entries_' || s)::regclass, '');
        PERFORM pg_catalog.pg_extension_config_dump(format('awa.%I', 'done_entries_' || s)::regclass, '');
        PERFORM pg_catalog.pg_extension_config_dump(format('awa.%I', 'completion_batches_' || s)::regclass, '');
        EXECUTE format('COMMENT ON TABLE awa.%I IS %L', 'ready_entries_' || s,
                       format('Partition of awa.ready_entries for queue-ring slot %s.', s));
        EXECUTE format('COMMENT ON TABLE awa.%I IS %L', 'done_entries_' || s,
                       format('Partition of awa.done_entries for queue-ring slot %s.', s));
        EXECUTE format('COMMENT ON TABLE awa.%I IS %L', 'completion_batches_' || s,
                       format('Partition of awa.completion_batches for queue-ring slot %s.', s));
    END LOOP;
END
$$;
