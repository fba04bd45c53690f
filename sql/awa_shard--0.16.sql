-- awa_shard 0.16: the pre-shard layout. One enqueue head and one claim head per
-- (queue, priority); the enqueue cursor is the head's next_seq column, advanced by an
-- UPDATE. Released before sharding; awa_shard--0.16--1.0.sql (migration v017) reshapes a
-- populated 0.16 install into the sharded 1.0 plane. Plain SQL and PL/pgSQL only.
\echo Use "CREATE EXTENSION awa_shard VERSION '0.16'" to load this file. \quit

CREATE TYPE awa.job_state AS ENUM (
    'scheduled', 'available', 'running', 'completed',
    'retryable', 'failed', 'cancelled', 'waiting_external');

-- Engine state; migration v017 (0.16 -> 1.0) refuses to run while it is 'mixed_transition'.
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

-- Per-queue settings. No row means not paused.
CREATE TABLE awa.queue_meta (
    queue text PRIMARY KEY,
    paused boolean NOT NULL DEFAULT false,
    paused_at timestamptz,
    paused_by text,
    CONSTRAINT queue_meta_queue_length CHECK (length(queue) BETWEEN 1 AND 200));

-- One row per lane (queue, priority); next_seq is the next lane_seq to hand out.
CREATE TABLE awa.queue_enqueue_heads (
    queue text NOT NULL,
    priority smallint NOT NULL,
    next_seq bigint NOT NULL DEFAULT 1,
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (queue, priority))
    WITH (fillfactor = 50);

-- The claim cursor of each lane: the lowest lane_seq not yet claimed or proven absent.
CREATE TABLE awa.queue_claim_heads (
    queue text NOT NULL,
    priority smallint NOT NULL,
    claim_seq bigint NOT NULL DEFAULT 1,
    PRIMARY KEY (queue, priority))
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
    run_at timestamptz NOT NULL DEFAULT clock_timestamp(),
    attempted_at timestamptz,
    created_at timestamptz NOT NULL DEFAULT clock_timestamp(),
    unique_key bytea,
    unique_states bit(8),
    ordering_key bytea,
    metadata jsonb,
    tags text[],
    errors jsonb,
    PRIMARY KEY (ready_slot, queue, priority, lane_seq))
    PARTITION BY LIST (ready_slot);

-- Terminal rows (completed, failed, cancelled), keyed by the ready row's lane identity.
-- Body columns are NULL when the ready row of the same identity holds them.
CREATE TABLE awa.done_entries (
    ready_slot integer NOT NULL,
    ready_generation bigint NOT NULL,
    job_id bigint NOT NULL,
    queue text NOT NULL,
    priority smallint NOT NULL,
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
    PRIMARY KEY (ready_slot, queue, priority, lane_seq))
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
    heartbeat_at timestamptz,
    deadline_at timestamptz,
    attempted_at timestamptz,
    callback_id uuid,
    callback_timeout_at timestamptz,
    PRIMARY KEY (lease_slot, queue, priority, lane_seq))
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

-- Scheduled and retryable jobs.
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
    metadata jsonb,
    tags text[],
    errors jsonb);
CREATE INDEX deferred_jobs_due_idx ON awa.deferred_jobs (run_at, priority, job_id);
CREATE INDEX deferred_jobs_queue_idx ON awa.deferred_jobs (queue, state);

-- Dead-letter queue (job_id is globally unique).
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

-- Partitions and their indexes. Lane indexes lead with (queue, priority, lane_seq).
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
CREATE INDEX ready_entries_lane_idx ON awa.ready_entries (queue, priority, lane_seq);
CREATE INDEX ready_entries_job_idx ON awa.ready_entries (job_id);
CREATE INDEX done_entries_lane_idx ON awa.done_entries (queue, priority, lane_seq);
CREATE INDEX done_entries_job_idx ON awa.done_entries (job_id);
CREATE INDEX leases_lane_idx ON awa.leases (queue, priority, lane_seq);
CREATE INDEX leases_job_idx ON awa.leases (job_id, run_lease);
CREATE INDEX leases_deadline_idx ON awa.leases (deadline_at) WHERE deadline_at IS NOT NULL;
CREATE INDEX lease_claims_job_idx ON awa.lease_claims (job_id, run_lease);
CREATE INDEX lease_claims_deadline_idx ON awa.lease_claims (deadline_at) WHERE deadline_at IS NOT NULL;

-- pg_dump keeps queue settings.
SELECT pg_catalog.pg_extension_config_dump('awa.queue_meta', '');

-- Whether a bit(8) unique-state mask holds a state (leftmost bit = scheduled).
CREATE FUNCTION awa.job_state_in_bitmask(p_mask bit(8), p_state awa.job_state) RETURNS boolean
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    SET search_path = pg_catalog, pg_temp
    RETURN get_bit(p_mask, array_position(enum_range(NULL::awa.job_state), p_state) - 1) = 1;

-- Row returned by the 0.16 producer function.
CREATE TYPE awa.job_row AS (
    id bigint,
    kind text,
    queue text,
    args jsonb,
    state awa.job_state,
    priority smallint,
    attempt smallint,
    run_lease bigint,
    max_attempts smallint,
    run_at timestamptz,
    attempted_at timestamptz,
    finalized_at timestamptz,
    created_at timestamptz,
    metadata jsonb,
    tags text[],
    errors jsonb,
    unique_key bytea,
    unique_states bit(8),
    lane_seq bigint);

-- Enqueue one job (11 arguments: 0.16 has no ordering key). 'available' jobs get the next
-- lane_seq of their (queue, priority) lane from the head row; 'scheduled', 'retryable' and
-- 'available' with a future run_at go to deferred_jobs.
CREATE FUNCTION awa.insert_job_compat(
    p_kind text,
    p_queue text DEFAULT 'default',
    p_args jsonb DEFAULT '{}',
    p_state awa.job_state DEFAULT 'available',
    p_priority smallint DEFAULT 2,
    p_max_attempts smallint DEFAULT 25,
    p_run_at timestamptz DEFAULT NULL,
    p_metadata jsonb DEFAULT '{}',
    p_tags text[] DEFAULT '{}',
    p_unique_key bytea DEFAULT NULL,
    p_unique_states bit(8) DEFAULT NULL)
    RETURNS awa.job_row
    LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_now timestamptz := clock_timestamp();
    v_run_at timestamptz := coalesce(p_run_at, v_now);
    v_state awa.job_state := p_state;
    v_id bigint;
    v_seq bigint;
    v_slot integer;
    v_generation bigint;
BEGIN
    IF p_kind IS NULL OR p_queue IS NULL OR p_state IS NULL OR p_priority IS NULL OR p_max_attempts IS NULL THEN
        RAISE EXCEPTION 'p_kind, p_queue, p_state, p_priority and p_max_attempts must not be null'
            USING ERRCODE = '22004';
    END IF;
    IF length(p_kind) NOT BETWEEN 1 AND 200 THEN
        RAISE EXCEPTION 'p_kind must be 1 to 200 characters long' USING ERRCODE = '22023';
    END IF;
    IF length(p_queue) NOT BETWEEN 1 AND 200 THEN
        RAISE EXCEPTION 'p_queue must be 1 to 200 characters long' USING ERRCODE = '22023';
    END IF;
    IF p_priority NOT BETWEEN 1 AND 4 THEN
        RAISE EXCEPTION 'p_priority must be between 1 and 4' USING ERRCODE = '22023';
    END IF;
    IF p_max_attempts NOT BETWEEN 1 AND 1000 THEN
        RAISE EXCEPTION 'p_max_attempts must be between 1 and 1000' USING ERRCODE = '22023';
    END IF;
    IF p_state NOT IN ('available', 'scheduled', 'retryable') THEN
        RAISE EXCEPTION 'p_state must be available, scheduled or retryable' USING ERRCODE = '22023';
    END IF;
    IF v_state = 'available' AND v_run_at > v_now THEN
        v_state := 'scheduled';
    END IF;
    v_id := nextval('awa.job_id_seq');
    IF p_unique_key IS NOT NULL AND p_unique_states IS NOT NULL
       AND awa.job_state_in_bitmask(p_unique_states, v_state) THEN
        INSERT INTO awa.job_unique_claims (unique_key, job_id) VALUES (p_unique_key, v_id);
    END IF;
    IF v_state = 'available' THEN
        INSERT INTO awa.queue_enqueue_heads (queue, priority) VALUES (p_queue, p_priority)
        ON CONFLICT DO NOTHING;
        INSERT INTO awa.queue_claim_heads (queue, priority) VALUES (p_queue, p_priority)
        ON CONFLICT DO NOTHING;
        UPDATE awa.queue_enqueue_heads h SET next_seq = h.next_seq + 1
         WHERE h.queue = p_queue AND h.priority = p_priority
        RETURNING h.next_seq - 1 INTO v_seq;
        SELECT s.current_slot, s.generation INTO v_slot, v_generation FROM awa.queue_ring_state s;
        INSERT INTO awa.ready_entries (ready_slot, ready_generation, job_id, kind, queue, args, priority,
            max_attempts, lane_seq, run_at, created_at, unique_key, unique_states, metadata, tags)
        VALUES (v_slot, v_generation, v_id, p_kind, p_queue, coalesce(p_args, '{}'), p_priority,
            p_max_attempts, v_seq, v_run_at, v_now, p_unique_key, p_unique_states, p_metadata, p_tags);
    ELSE
        INSERT INTO awa.deferred_jobs (job_id, kind, queue, args, state, priority, max_attempts, run_at,
            created_at, unique_key, unique_states, metadata, tags)
        VALUES (v_id, p_kind, p_queue, coalesce(p_args, '{}'), v_state, p_priority, p_max_attempts, v_run_at,
            v_now, p_unique_key, p_unique_states, p_metadata, p_tags);
    END IF;
    RETURN ROW(v_id, p_kind, p_queue, coalesce(p_args, '{}'), v_state, p_priority, 0, 0, p_max_attempts,
               v_run_at, NULL, NULL, v_now, p_metadata, p_tags, NULL, p_unique_key, p_unique_states,
               v_seq)::awa.job_row;
END
$$;

-- Claim up to p_max_batch jobs from the best-priority lane of a queue that has unclaimed
-- rows, in lane order: a lease_claims receipt each (receipts mode) or a leases row each.
CREATE FUNCTION awa.claim_ready_runtime(p_queue text, p_max_batch integer)
    RETURNS TABLE (job_id bigint, run_lease bigint, receipt_id bigint, priority smallint, lane_seq bigint)
    LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE ROWS 10
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
DECLARE
    v_now timestamptz := clock_timestamp();
    v_priority smallint;
    v_from bigint;
    v_to bigint;
BEGIN
    IF p_queue IS NULL OR p_max_batch IS NULL THEN
        RAISE EXCEPTION 'p_queue and p_max_batch must not be null' USING ERRCODE = '22004';
    END IF;
    IF p_max_batch < 1 THEN
        RAISE EXCEPTION 'p_max_batch must be at least 1' USING ERRCODE = '22023';
    END IF;
    SELECT h.priority, h.claim_seq INTO v_priority, v_from
      FROM awa.queue_claim_heads h
     WHERE h.queue = p_queue
       AND EXISTS (SELECT 1 FROM awa.ready_entries r
                    WHERE r.queue = h.queue AND r.priority = h.priority AND r.lane_seq >= h.claim_seq)
     ORDER BY h.priority
     LIMIT 1
       FOR UPDATE OF h SKIP LOCKED;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    SELECT max(x.lane_seq) INTO v_to
      FROM (SELECT r.lane_seq FROM awa.ready_entries r
             WHERE r.queue = p_queue AND r.priority = v_priority AND r.lane_seq >= v_from
             ORDER BY r.lane_seq LIMIT p_max_batch) x;
    UPDATE awa.queue_claim_heads h SET claim_seq = v_to + 1
     WHERE h.queue = p_queue AND h.priority = v_priority;
    IF (SELECT s.receipts FROM awa.plane_settings s) THEN
        RETURN QUERY
        WITH ins AS (
            INSERT INTO awa.lease_claims (claim_slot, job_id, run_lease, ready_slot, ready_generation, queue,
                priority, effective_priority, attempt, max_attempts, lane_seq, claimed_at)
            SELECT ring.current_slot, r.job_id, r.run_lease + 1, r.ready_slot, r.ready_generation, r.queue,
                   r.priority, r.priority, r.attempt + 1, r.max_attempts, r.lane_seq, v_now
              FROM awa.ready_entries r, awa.claim_ring_state ring
             WHERE r.queue = p_queue AND r.priority = v_priority AND r.lane_seq BETWEEN v_from AND v_to
            RETURNING lease_claims.job_id, lease_claims.run_lease, lease_claims.receipt_id,
                      lease_claims.priority, lease_claims.lane_seq)
        SELECT * FROM ins ORDER BY 5;
    ELSE
        RETURN QUERY
        WITH ins AS (
            INSERT INTO awa.leases (lease_slot, lease_generation, ready_slot, ready_generation, job_id, queue,
                state, priority, effective_priority, attempt, run_lease, max_attempts, lane_seq,
                heartbeat_at, attempted_at)
            SELECT ring.current_slot, ring.generation, r.ready_slot, r.ready_generation, r.job_id, r.queue,
                   'running', r.priority, r.priority, r.attempt + 1, r.run_lease + 1, r.max_attempts,
                   r.lane_seq, v_now, v_now
              FROM awa.ready_entries r, awa.lease_ring_state ring
             WHERE r.queue = p_queue AND r.priority = v_priority AND r.lane_seq BETWEEN v_from AND v_to
            RETURNING leases.job_id, leases.run_lease, NULL::bigint, leases.priority, leases.lane_seq)
        SELECT * FROM ins ORDER BY 5;
    END IF;
END
$$;

-- Take the open attempt (job_id, run_lease) out of the running set: close its receipt
-- with p_outcome or delete its lease. No row when the attempt is not open.
CREATE FUNCTION awa._take_attempt(p_job_id bigint, p_run_lease bigint, p_outcome text)
    RETURNS TABLE (ready_slot integer, ready_generation bigint, queue text, priority smallint,
                   lane_seq bigint, attempt smallint, attempted_at timestamptz)
    LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
    SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
BEGIN
    RETURN QUERY
    WITH c AS (
        SELECT * FROM awa.lease_claims lc
         WHERE lc.job_id = p_job_id AND lc.run_lease = p_run_lease AND lc.materialized_at IS NULL),
    closed AS (
        INSERT INTO awa.lease_claim_closures (claim_slot, job_id, run_lease, outcome)
        SELECT c.claim_slot, c.job_id, c.run_lease, p_outcome FROM c
        ON CONFLICT DO NOTHING RETURNING lease_claim_closures.claim_slot)
    SELECT c.ready_slot, c.ready_generation, c.queue, c.priority, c.lane_seq, c.attempt, c.claimed_at
      FROM c JOIN closed ON closed.claim_slot = c.claim_slot;
    IF NOT FOUND THEN
        RETURN QUERY
        DELETE FROM awa.leases l
         WHERE l.job_id = p_job_id AND l.run_lease = p_run_lease AND l.state = 'running'
        RETURNING l.ready_slot, l.ready_generation, l.queue, l.priority, l.lane_seq, l.attempt, l.attempted_at;
    END IF;
END
$$;

-- Complete running attempts into done_entries; returns the pairs this call completed.
CREATE FUNCTION awa.complete_jobs(p_job_ids bigint[], p_run_leases bigint[])
    RETURNS TABLE (job_id bigint, run_lease bigint)
    LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE ROWS 10
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
DECLARE
    i integer;
    t record;
BEGIN
    IF p_job_ids IS NULL OR p_run_leases IS NULL THEN
        RAISE EXCEPTION 'p_job_ids and p_run_leases must not be null' USING ERRCODE = '22004';
    END IF;
    IF cardinality(p_job_ids) <> cardinality(p_run_leases) THEN
        RAISE EXCEPTION 'p_job_ids and p_run_leases must have the same number of elements'
            USING ERRCODE = '22023';
    END IF;
    FOR i IN 1 .. cardinality(p_job_ids) LOOP
        SELECT * INTO t FROM awa._take_attempt(p_job_ids[i], p_run_leases[i], 'completed');
        CONTINUE WHEN NOT FOUND;
        INSERT INTO awa.done_entries (ready_slot, ready_generation, job_id, queue, priority, lane_seq, state,
            attempt, run_lease, attempted_at)
        VALUES (t.ready_slot, t.ready_generation, p_job_ids[i], t.queue, t.priority, t.lane_seq, 'completed',
            t.attempt, p_run_leases[i], t.attempted_at);
        job_id := p_job_ids[i];
        run_lease := p_run_leases[i];
        RETURN NEXT;
    END LOOP;
END
$$;

-- Fail an attempt: retryable (due at once) while attempts remain, else failed.
-- Returns the new state, or NULL when the attempt was not open.
CREATE FUNCTION awa.fail_job(p_job_id bigint, p_run_lease bigint, p_error text DEFAULT NULL)
    RETURNS awa.job_state
    LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    t record;
    r awa.ready_entries;
    v_errors jsonb;
BEGIN
    IF p_job_id IS NULL OR p_run_lease IS NULL THEN
        RAISE EXCEPTION 'p_job_id and p_run_lease must not be null' USING ERRCODE = '22004';
    END IF;
    SELECT * INTO t FROM awa._take_attempt(p_job_id, p_run_lease, 'retryable');
    IF NOT FOUND THEN
        RETURN NULL;
    END IF;
    SELECT * INTO r FROM awa.ready_entries e
     WHERE e.ready_slot = t.ready_slot AND e.queue = t.queue AND e.priority = t.priority
       AND e.lane_seq = t.lane_seq;
    v_errors := coalesce(r.errors, '[]') || jsonb_build_array(jsonb_build_object(
        'error', coalesce(p_error, 'failed'), 'attempt', t.attempt, 'at', clock_timestamp()));
    IF t.attempt >= r.max_attempts THEN
        INSERT INTO awa.done_entries (ready_slot, ready_generation, job_id, queue, priority, lane_seq, state,
            attempt, run_lease, attempted_at, errors)
        VALUES (t.ready_slot, t.ready_generation, p_job_id, t.queue, t.priority, t.lane_seq, 'failed',
            t.attempt, p_run_lease, t.attempted_at, v_errors);
        RETURN 'failed';
    END IF;
    INSERT INTO awa.deferred_jobs (job_id, kind, queue, args, state, priority, attempt, run_lease, max_attempts,
        run_at, attempted_at, finalized_at, created_at, unique_key, unique_states, metadata, tags, errors)
    VALUES (p_job_id, r.kind, r.queue, r.args, 'retryable', t.priority, t.attempt, p_run_lease, r.max_attempts,
        clock_timestamp(), t.attempted_at, clock_timestamp(), r.created_at, r.unique_key, r.unique_states,
        r.metadata, r.tags, v_errors);
    RETURN 'retryable';
END
$$;

-- Fail an attempt straight into the dead-letter queue.
CREATE FUNCTION awa.fail_job_to_dlq(p_job_id bigint, p_run_lease bigint, p_reason text DEFAULT 'failed')
    RETURNS boolean
    LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    t record;
    r awa.ready_entries;
BEGIN
    IF p_job_id IS NULL OR p_run_lease IS NULL OR p_reason IS NULL THEN
        RAISE EXCEPTION 'p_job_id, p_run_lease and p_reason must not be null' USING ERRCODE = '22004';
    END IF;
    SELECT * INTO t FROM awa._take_attempt(p_job_id, p_run_lease, 'dlq');
    IF NOT FOUND THEN
        RETURN false;
    END IF;
    SELECT * INTO r FROM awa.ready_entries e
     WHERE e.ready_slot = t.ready_slot AND e.queue = t.queue AND e.priority = t.priority
       AND e.lane_seq = t.lane_seq;
    INSERT INTO awa.dlq_entries (job_id, kind, queue, args, state, priority, attempt, run_lease, max_attempts,
        run_at, attempted_at, created_at, unique_key, unique_states, metadata, tags, errors, dlq_reason,
        original_run_lease)
    VALUES (p_job_id, r.kind, r.queue, r.args, 'failed', t.priority, t.attempt, p_run_lease, r.max_attempts,
        r.run_at, t.attempted_at, r.created_at, r.unique_key, r.unique_states, r.metadata, r.tags,
        coalesce(r.errors, '[]') || jsonb_build_array(jsonb_build_object(
            'error', p_reason, 'attempt', t.attempt, 'at', clock_timestamp(), 'terminal', true)),
        p_reason, p_run_lease);
    RETURN true;
END
$$;

-- Roles and privileges, as in 1.0: nothing callable by PUBLIC.
DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_roles WHERE rolname = 'awa_producer') THEN
        CREATE ROLE awa_producer NOLOGIN;
    END IF;
    IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_roles WHERE rolname = 'awa_worker') THEN
        CREATE ROLE awa_worker NOLOGIN;
    END IF;
    IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_roles WHERE rolname = 'awa_admin') THEN
        CREATE ROLE awa_admin NOLOGIN;
    END IF;
END
$$;
REVOKE ALL ON ALL FUNCTIONS IN SCHEMA awa FROM PUBLIC;
REVOKE ALL ON ALL TABLES IN SCHEMA awa FROM PUBLIC;
REVOKE ALL ON ALL SEQUENCES IN SCHEMA awa FROM PUBLIC;
GRANT USAGE ON SCHEMA awa TO awa_producer, awa_worker, awa_admin;
GRANT EXECUTE ON FUNCTION awa.job_state_in_bitmask(bit, awa.job_state) TO awa_producer, awa_worker, awa_admin;
GRANT EXECUTE ON FUNCTION
    awa.insert_job_compat(text, text, jsonb, awa.job_state, smallint, smallint, timestamptz, jsonb, text[], bytea, bit)
    TO awa_producer, awa_admin;
GRANT EXECUTE ON FUNCTION
    awa.claim_ready_runtime(text, integer),
    awa.complete_jobs(bigint[], bigint[]),
    awa.fail_job(bigint, bigint, text),
    awa.fail_job_to_dlq(bigint, bigint, text)
    TO awa_worker, awa_admin;
GRANT SELECT ON ALL TABLES IN SCHEMA awa TO awa_admin;
GRANT INSERT, UPDATE, DELETE ON awa.queue_meta TO awa_admin;
