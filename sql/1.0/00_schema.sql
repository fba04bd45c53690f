-- awa_shard 1.0 — the sharded plane: types, tables, partitions, indexes.
-- (Pieces in sql/1.0/ are concatenated in name order into awa_shard--1.0.sql;
-- pieces whose name starts with 0 hold tables and are not part of the upgrade script.)
\echo Use "CREATE EXTENSION awa_shard" to load this file. \quit

CREATE TYPE awa.job_state AS ENUM (
    'scheduled', 'available', 'running', 'completed',
    'retryable', 'failed', 'cancelled', 'waiting_external');

-- Engine state; migration v017 refuses to run while it is 'mixed_transition'.
CREATE TABLE awa.storage_transition_state (
    singleton boolean PRIMARY KEY DEFAULT true CHECK (singleton),
    state text NOT NULL DEFAULT 'active'
        CHECK (state IN ('canonical', 'prepared', 'mixed_transition', 'active')),
    current_engine text NOT NULL DEFAULT 'queue_storage',
    details jsonb NOT NULL DEFAULT '{}',
    updated_at timestamptz NOT NULL DEFAULT now());
INSERT INTO awa.storage_transition_state (singleton) VALUES (true);

-- Install-wide settings: receipts (default) or leases for running attempts.
CREATE TABLE awa.plane_settings (
    singleton boolean PRIMARY KEY DEFAULT true CHECK (singleton),
    receipts boolean NOT NULL DEFAULT true);
INSERT INTO awa.plane_settings (singleton) VALUES (true);

-- Per-queue settings. No row means one shard and not paused.
CREATE TABLE awa.queue_meta (
    queue text PRIMARY KEY,
    paused boolean NOT NULL DEFAULT false,
    paused_at timestamptz,
    paused_by text,
    enqueue_shards smallint NOT NULL DEFAULT 1,
    CONSTRAINT queue_meta_queue_length CHECK (length(queue) BETWEEN 1 AND 200),
    CONSTRAINT queue_meta_enqueue_shards_range CHECK (enqueue_shards BETWEEN 1 AND 64));

-- One row per lane (queue, priority, enqueue_shard); seq_name is the lane's sequence.
CREATE TABLE awa.queue_enqueue_heads (
    queue text NOT NULL,
    priority smallint NOT NULL,
    enqueue_shard smallint NOT NULL DEFAULT 0,
    seq_name text NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (queue, priority, enqueue_shard))
    WITH (fillfactor = 50);

-- The claim cursor of each lane: the lowest lane_seq not yet claimed or proven absent.
-- head_run_at is a hint written by the claim that moved the cursor: run_at of the ready
-- row at claim_seq when it was visible then (NULL: unknown, the claim walk looks it up).
CREATE TABLE awa.queue_claim_heads (
    queue text NOT NULL,
    priority smallint NOT NULL,
    enqueue_shard smallint NOT NULL DEFAULT 0,
    claim_seq bigint NOT NULL DEFAULT 1,
    head_run_at timestamptz,
    PRIMARY KEY (queue, priority, enqueue_shard))
    WITH (fillfactor = 50, autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_threshold = 200);

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

-- Generation held by each ring slot (-1: empty). Row locks here serialise prune.
CREATE TABLE awa.queue_ring_slots (slot integer PRIMARY KEY, generation bigint NOT NULL DEFAULT -1);
CREATE TABLE awa.lease_ring_slots (LIKE awa.queue_ring_slots INCLUDING ALL);
CREATE TABLE awa.claim_ring_slots (LIKE awa.queue_ring_slots INCLUDING ALL);
INSERT INTO awa.queue_ring_slots SELECT s, CASE WHEN s = 0 THEN 0 ELSE -1 END FROM generate_series(0, 15) s;
INSERT INTO awa.lease_ring_slots SELECT s, CASE WHEN s = 0 THEN 0 ELSE -1 END FROM generate_series(0, 7) s;
INSERT INTO awa.claim_ring_slots SELECT s, CASE WHEN s = 0 THEN 0 ELSE -1 END FROM generate_series(0, 7) s;

CREATE SEQUENCE awa.job_id_seq AS bigint;
CREATE SEQUENCE awa.receipt_id_seq AS bigint;

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
    PRIMARY KEY (ready_slot, queue, priority, enqueue_shard, lane_seq))
    PARTITION BY LIST (ready_slot);

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
    PRIMARY KEY (ready_slot, queue, priority, enqueue_shard, lane_seq))
    PARTITION BY LIST (ready_slot);

-- Running attempts in leases mode (and attempts materialised for long jobs).
CREATE TABLE awa.leases (
    lease_slot integer NOT NULL,
    lease_generation bigint NOT NULL,
    ready_slot integer NOT NULL,
    ready_generation bigint NOT NULL,
    job_id bigint NOT NULL,
    queue text NOT NULL,
    state awa.job_state NOT NULL DEFAULT 'running',
    priority smallint NOT NULL,
    effective_priority smallint NOT NULL,
    attempt smallint NOT NULL DEFAULT 1,
    run_lease bigint NOT NULL DEFAULT 1,
    max_attempts smallint NOT NULL DEFAULT 25,
    lane_seq bigint NOT NULL,
    enqueue_shard smallint NOT NULL DEFAULT 0,
    heartbeat_at timestamptz,
    deadline_at timestamptz,
    attempted_at timestamptz,
    callback_id uuid,
    callback_timeout_at timestamptz,
    PRIMARY KEY (lease_slot, queue, priority, enqueue_shard, lane_seq))
    PARTITION BY LIST (lease_slot);

-- Receipts: append-only claim records (receipts mode). Open until a closure exists.
CREATE TABLE awa.lease_claims (
    claim_slot integer NOT NULL,
    receipt_id bigint NOT NULL DEFAULT nextval('awa.receipt_id_seq'),
    job_id bigint NOT NULL,
    run_lease bigint NOT NULL,
    ready_slot integer NOT NULL,
    ready_generation bigint NOT NULL,
    queue text NOT NULL,
    priority smallint NOT NULL,
    effective_priority smallint NOT NULL,
    attempt smallint NOT NULL,
    max_attempts smallint NOT NULL,
    lane_seq bigint NOT NULL,
    enqueue_shard smallint NOT NULL DEFAULT 0,
    claimed_at timestamptz NOT NULL,
    deadline_at timestamptz,
    materialized_at timestamptz,
    PRIMARY KEY (claim_slot, job_id, run_lease))
    PARTITION BY LIST (claim_slot);

-- Closure evidence of a receipt: completed, rescued, deadline_expired, retryable, ...
CREATE TABLE awa.lease_claim_closures (
    claim_slot integer NOT NULL,
    job_id bigint NOT NULL,
    run_lease bigint NOT NULL,
    outcome text NOT NULL,
    closed_at timestamptz NOT NULL DEFAULT clock_timestamp(),
    PRIMARY KEY (claim_slot, job_id, run_lease))
    PARTITION BY LIST (claim_slot);

-- Heartbeats and progress of running attempts (receipts mode writes here, not to leases).
CREATE TABLE awa.attempt_state (
    job_id bigint NOT NULL,
    run_lease bigint NOT NULL,
    heartbeat_at timestamptz,
    progress jsonb,
    updated_at timestamptz NOT NULL DEFAULT clock_timestamp(),
    PRIMARY KEY (job_id, run_lease))
    WITH (fillfactor = 80);

-- Scheduled and retryable jobs. Unsharded; the ordering key is kept so a keyed job
-- returns to its key's shard when promoted.
CREATE TABLE awa.deferred_jobs (
    job_id bigint PRIMARY KEY,
    kind text NOT NULL,
    queue text NOT NULL,
    args jsonb NOT NULL DEFAULT '{}',
    state awa.job_state NOT NULL CHECK (state IN ('scheduled', 'retryable')),
    priority smallint NOT NULL,
    attempt smallint NOT NULL DEFAULT 0,
    run_lease bigint NOT NULL DEFAULT 0,
    max_attempts smallint NOT NULL DEFAULT 25,
    run_at timestamptz NOT NULL,
    attempted_at timestamptz,
    finalized_at timestamptz,
    created_at timestamptz NOT NULL DEFAULT clock_timestamp(),
    unique_key bytea,
    unique_states bit(8),
    ordering_key bytea,
    metadata jsonb,
    tags text[],
    errors jsonb);
CREATE INDEX deferred_jobs_due_idx ON awa.deferred_jobs (run_at, priority, job_id);
CREATE INDEX deferred_jobs_queue_idx ON awa.deferred_jobs (queue, state);

-- Dead-letter queue. Unsharded (job_id is globally unique); keeps the ordering key.
CREATE TABLE awa.dlq_entries (
    job_id bigint PRIMARY KEY,
    kind text NOT NULL,
    queue text NOT NULL,
    args jsonb NOT NULL DEFAULT '{}',
    state awa.job_state NOT NULL DEFAULT 'failed',
    priority smallint NOT NULL,
    attempt smallint NOT NULL,
    run_lease bigint NOT NULL,
    max_attempts smallint NOT NULL,
    run_at timestamptz,
    attempted_at timestamptz,
    finalized_at timestamptz NOT NULL DEFAULT clock_timestamp(),
    created_at timestamptz NOT NULL,
    unique_key bytea,
    unique_states bit(8),
    ordering_key bytea,
    metadata jsonb,
    tags text[],
    errors jsonb,
    dlq_reason text NOT NULL,
    dlq_at timestamptz NOT NULL DEFAULT clock_timestamp(),
    original_run_lease bigint NOT NULL);
CREATE INDEX dlq_entries_queue_idx ON awa.dlq_entries (queue, dlq_at DESC);

-- One live claim per unique key.
CREATE TABLE awa.job_unique_claims (
    unique_key bytea NOT NULL,
    job_id bigint NOT NULL);
CREATE UNIQUE INDEX idx_awa_jobs_unique ON awa.job_unique_claims (unique_key);
CREATE INDEX job_unique_claims_job_idx ON awa.job_unique_claims (job_id);

-- Partitions and their indexes. Lane indexes lead with (queue, priority, enqueue_shard, lane_seq).
DO $$
BEGIN
    FOR s IN 0..15 LOOP
        EXECUTE format('CREATE TABLE awa.%I PARTITION OF awa.ready_entries FOR VALUES IN (%s)', 'ready_entries_' || s, s);
        EXECUTE format('CREATE TABLE awa.%I PARTITION OF awa.done_entries FOR VALUES IN (%s)', 'done_entries_' || s, s);
    END LOOP;
    FOR s IN 0..7 LOOP
        EXECUTE format('CREATE TABLE awa.%I PARTITION OF awa.leases FOR VALUES IN (%s) WITH (fillfactor = 50)', 'leases_' || s, s);
        EXECUTE format('CREATE TABLE awa.%I PARTITION OF awa.lease_claims FOR VALUES IN (%s)', 'lease_claims_' || s, s);
        EXECUTE format('CREATE TABLE awa.%I PARTITION OF awa.lease_claim_closures FOR VALUES IN (%s)', 'lease_claim_closures_' || s, s);
    END LOOP;
END
$$;
CREATE INDEX ready_entries_lane_shard_idx ON awa.ready_entries (queue, priority, enqueue_shard, lane_seq);
CREATE INDEX ready_entries_job_idx ON awa.ready_entries (job_id);
CREATE INDEX done_entries_lane_shard_idx ON awa.done_entries (queue, priority, enqueue_shard, lane_seq);
CREATE INDEX done_entries_job_idx ON awa.done_entries (job_id);
CREATE INDEX leases_lane_shard_idx ON awa.leases (queue, priority, enqueue_shard, lane_seq);
CREATE INDEX leases_job_idx ON awa.leases (job_id, run_lease);
CREATE INDEX leases_deadline_idx ON awa.leases (deadline_at) WHERE deadline_at IS NOT NULL;
CREATE INDEX lease_claims_job_idx ON awa.lease_claims (job_id, run_lease);
CREATE INDEX lease_claims_deadline_idx ON awa.lease_claims (deadline_at) WHERE deadline_at IS NOT NULL;

-- pg_dump keeps queue settings.
SELECT pg_catalog.pg_extension_config_dump('awa.queue_meta', '');
