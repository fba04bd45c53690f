-- Attempt exits other than success, heartbeats, rescue and promotion (SQL; D9).
-- Exits and heartbeats look attempts up by (job_id, run_lease) and never by sequential scan
-- (enable_seqscan = off), so a plan cached while the receipt partitions were empty cannot
-- turn into a scan of millions of receipts.

-- Whether a bit(8) unique-state mask holds a state (leftmost bit = scheduled).
CREATE FUNCTION awa.job_state_in_bitmask(p_mask bit(8), p_state awa.job_state) RETURNS boolean
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    SET search_path = pg_catalog, pg_temp
    RETURN get_bit(p_mask, array_position(enum_range(NULL::awa.job_state), p_state) - 1) = 1;

-- Retry backoff: 2^attempt seconds plus up to 25 % jitter, at most 24 hours.
CREATE FUNCTION awa.backoff_duration(p_attempt integer, p_max_attempts integer) RETURNS interval
    LANGUAGE sql VOLATILE PARALLEL SAFE
    SET search_path = pg_catalog, pg_temp
    RETURN least(make_interval(secs => power(2, least(p_attempt, 20)) * (1 + random() * 0.25)), interval '24 hours');

-- Move a job's unique claim with its state: released when the new state leaves the mask,
-- taken when it enters it (a conflicting live claim keeps its key).
CREATE FUNCTION awa._sync_unique_claim(p_job_id bigint, p_key bytea, p_mask bit(8),
                                       p_old awa.job_state, p_new awa.job_state) RETURNS void
    LANGUAGE plpgsql VOLATILE
    SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF p_key IS NULL OR p_mask IS NULL THEN
        RETURN;
    END IF;
    IF awa.job_state_in_bitmask(p_mask, p_old) AND NOT awa.job_state_in_bitmask(p_mask, p_new) THEN
        DELETE FROM awa.job_unique_claims WHERE job_id = p_job_id;
    ELSIF NOT awa.job_state_in_bitmask(p_mask, p_old) AND awa.job_state_in_bitmask(p_mask, p_new) THEN
        INSERT INTO awa.job_unique_claims (unique_key, job_id) VALUES (p_key, p_job_id)
        ON CONFLICT (unique_key) DO NOTHING;
    END IF;
END
$$;

-- A running attempt taken out of the running set, with its ready row's body.
CREATE TYPE awa.taken_attempt AS (
    job_id bigint, kind text, queue text, args jsonb, priority smallint, attempt smallint,
    run_lease bigint, max_attempts smallint, run_at timestamptz, attempted_at timestamptz,
    created_at timestamptz, unique_key bytea, unique_states bit(8), ordering_key bytea,
    metadata jsonb, tags text[], errors jsonb,
    ready_slot integer, ready_generation bigint, enqueue_shard smallint, lane_seq bigint);

-- Take the open attempt (job_id, run_lease): close its receipt with p_outcome (exactly
-- one closer wins) or delete its lease. NULL when the attempt is not open (stale writer).
-- The ready row is joined on the full lane identity, shard included.
CREATE FUNCTION awa._take_attempt(p_job_id bigint, p_run_lease bigint, p_outcome text)
    RETURNS awa.taken_attempt
    LANGUAGE plpgsql VOLATILE
    SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    t awa.taken_attempt;
BEGIN
    WITH c AS (
        SELECT * FROM awa.lease_claims
         WHERE job_id = p_job_id AND run_lease = p_run_lease AND materialized_at IS NULL),
    closed AS (
        INSERT INTO awa.lease_claim_closures (claim_slot, job_id, run_lease, outcome)
        SELECT claim_slot, job_id, run_lease, p_outcome FROM c
        ON CONFLICT DO NOTHING RETURNING claim_slot)
    SELECT r.job_id, r.kind, r.queue, r.args, c.priority, c.attempt, c.run_lease, r.max_attempts,
           r.run_at, c.claimed_at, r.created_at, r.unique_key, r.unique_states, r.ordering_key,
           r.metadata, r.tags, r.errors, c.ready_slot, c.ready_generation, c.enqueue_shard, c.lane_seq
      INTO t
      FROM c JOIN closed USING (claim_slot)
      JOIN awa.ready_entries r
        ON r.ready_slot = c.ready_slot AND r.queue = c.queue AND r.priority = c.priority
       AND r.enqueue_shard = c.enqueue_shard AND r.lane_seq = c.lane_seq;
    IF t.job_id IS NULL THEN
        WITH l AS (
            DELETE FROM awa.leases
             WHERE job_id = p_job_id AND run_lease = p_run_lease
               AND state IN ('running', 'waiting_external')
            RETURNING *)
        SELECT r.job_id, r.kind, r.queue, r.args, l.priority, l.attempt, l.run_lease, r.max_attempts,
               r.run_at, l.attempted_at, r.created_at, r.unique_key, r.unique_states, r.ordering_key,
               r.metadata, r.tags, r.errors, l.ready_slot, l.ready_generation, l.enqueue_shard, l.lane_seq
          INTO t
          FROM l JOIN awa.ready_entries r
            ON r.ready_slot = l.ready_slot AND r.queue = l.queue AND r.priority = l.priority
           AND r.enqueue_shard = l.enqueue_shard AND r.lane_seq = l.lane_seq;
    END IF;
    IF t.job_id IS NULL THEN
        RETURN NULL;
    END IF;
    DELETE FROM awa.attempt_state WHERE job_id = p_job_id AND run_lease = p_run_lease;
    RETURN t;
END
$$;

-- Errors array with one more entry {error, attempt, at[, terminal]}.
CREATE FUNCTION awa._append_error(p_errors jsonb, p_error text, p_attempt integer, p_terminal boolean)
    RETURNS jsonb
    LANGUAGE sql STABLE PARALLEL SAFE
    SET search_path = pg_catalog, pg_temp
    RETURN coalesce(p_errors, '[]'::jsonb) || jsonb_build_array(
        jsonb_build_object('error', p_error, 'attempt', p_attempt, 'at', clock_timestamp())
        || CASE WHEN p_terminal THEN '{"terminal": true}'::jsonb ELSE '{}'::jsonb END);

-- A taken attempt to deferred_jobs (retryable or scheduled) at p_run_at.
CREATE FUNCTION awa._defer_attempt(t awa.taken_attempt, p_state awa.job_state, p_run_at timestamptz,
                                   p_attempt smallint, p_errors jsonb) RETURNS void
    LANGUAGE plpgsql VOLATILE
    SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    INSERT INTO awa.deferred_jobs (job_id, kind, queue, args, state, priority, attempt, run_lease,
        max_attempts, run_at, attempted_at, finalized_at, created_at, unique_key, unique_states,
        ordering_key, metadata, tags, errors)
    VALUES (t.job_id, t.kind, t.queue, t.args, p_state, t.priority, p_attempt, t.run_lease,
        t.max_attempts, p_run_at, t.attempted_at,
        CASE WHEN p_state = 'retryable' THEN clock_timestamp() END, t.created_at, t.unique_key,
        t.unique_states, t.ordering_key, t.metadata, t.tags, p_errors);
    PERFORM awa._sync_unique_claim(t.job_id, t.unique_key, t.unique_states, 'running', p_state);
END
$$;

-- A taken attempt to done_entries on its own lane identity (failed or cancelled).
CREATE FUNCTION awa._finish_attempt(t awa.taken_attempt, p_state awa.job_state, p_errors jsonb) RETURNS void
    LANGUAGE plpgsql VOLATILE
    SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    INSERT INTO awa.done_entries (ready_slot, ready_generation, job_id, queue, priority, enqueue_shard,
        lane_seq, state, attempt, run_lease, attempted_at, errors)
    VALUES (t.ready_slot, t.ready_generation, t.job_id, t.queue, t.priority, t.enqueue_shard,
        t.lane_seq, p_state, t.attempt, t.run_lease, t.attempted_at, p_errors);
    PERFORM awa._sync_unique_claim(t.job_id, t.unique_key, t.unique_states, 'running', p_state);
END
$$;

-- Fail an attempt: retryable with backoff while attempts remain, else failed.
-- Returns the new state, or NULL when the attempt was not open (stale writer).
CREATE FUNCTION awa.fail_job(p_job_id bigint, p_run_lease bigint, p_error text DEFAULT NULL,
                             p_retry_in interval DEFAULT NULL)
    RETURNS awa.job_state
    LANGUAGE plpgsql VOLATILE
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp SET jit = off SET enable_seqscan = off
AS $$
DECLARE
    t awa.taken_attempt;
BEGIN
    IF p_job_id IS NULL OR p_run_lease IS NULL THEN
        RAISE EXCEPTION 'p_job_id and p_run_lease must not be null' USING ERRCODE = '22004';
    END IF;
    IF p_retry_in < interval '0' THEN
        RAISE EXCEPTION 'p_retry_in must not be negative' USING ERRCODE = '22023';
    END IF;
    t := awa._take_attempt(p_job_id, p_run_lease, 'retryable');
    IF t.job_id IS NULL THEN
        RETURN NULL;
    END IF;
    IF t.attempt >= t.max_attempts THEN
        PERFORM awa._finish_attempt(t, 'failed', awa._append_error(t.errors, coalesce(p_error, 'failed'), t.attempt, true));
        PERFORM awa._count_failed(t.queue, t.enqueue_shard);
        RETURN 'failed';
    END IF;
    PERFORM awa._defer_attempt(t, 'retryable',
        clock_timestamp() + coalesce(p_retry_in, awa.backoff_duration(t.attempt, t.max_attempts)),
        t.attempt, awa._append_error(t.errors, coalesce(p_error, 'failed'), t.attempt, false));
    RETURN 'retryable';
END
$$;

-- Fail an attempt straight into the dead-letter queue (ordering key kept).
CREATE FUNCTION awa.fail_job_to_dlq(p_job_id bigint, p_run_lease bigint, p_error text DEFAULT NULL,
                                    p_reason text DEFAULT 'failed')
    RETURNS boolean
    LANGUAGE plpgsql VOLATILE
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp SET jit = off SET enable_seqscan = off
AS $$
DECLARE
    t awa.taken_attempt;
BEGIN
    IF p_job_id IS NULL OR p_run_lease IS NULL OR p_reason IS NULL THEN
        RAISE EXCEPTION 'p_job_id, p_run_lease and p_reason must not be null' USING ERRCODE = '22004';
    END IF;
    t := awa._take_attempt(p_job_id, p_run_lease, 'dlq');
    IF t.job_id IS NULL THEN
        RETURN false;
    END IF;
    INSERT INTO awa.dlq_entries (job_id, kind, queue, args, state, priority, attempt, run_lease,
        max_attempts, run_at, attempted_at, created_at, unique_key, unique_states, ordering_key,
        metadata, tags, errors, dlq_reason, original_run_lease)
    VALUES (t.job_id, t.kind, t.queue, t.args, 'failed', t.priority, t.attempt, t.run_lease,
        t.max_attempts, t.run_at, t.attempted_at, t.created_at, t.unique_key, t.unique_states,
        t.ordering_key, t.metadata, t.tags,
        awa._append_error(t.errors, coalesce(p_error, p_reason), t.attempt, true), p_reason, t.run_lease);
    PERFORM awa._sync_unique_claim(t.job_id, t.unique_key, t.unique_states, 'running', 'failed');
    PERFORM awa._count_failed(t.queue, t.enqueue_shard);
    RETURN true;
END
$$;

-- Retry an attempt after p_delay without recording an error (attempt is consumed).
CREATE FUNCTION awa.retry_job_after(p_job_id bigint, p_run_lease bigint, p_delay interval)
    RETURNS boolean
    LANGUAGE plpgsql VOLATILE
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp SET jit = off SET enable_seqscan = off
AS $$
DECLARE
    t awa.taken_attempt;
BEGIN
    IF p_job_id IS NULL OR p_run_lease IS NULL OR p_delay IS NULL THEN
        RAISE EXCEPTION 'p_job_id, p_run_lease and p_delay must not be null' USING ERRCODE = '22004';
    END IF;
    IF p_delay < interval '0' THEN
        RAISE EXCEPTION 'p_delay must not be negative' USING ERRCODE = '22023';
    END IF;
    t := awa._take_attempt(p_job_id, p_run_lease, 'retryable');
    IF t.job_id IS NULL THEN
        RETURN false;
    END IF;
    PERFORM awa._defer_attempt(t, 'retryable', clock_timestamp() + p_delay, t.attempt, t.errors);
    RETURN true;
END
$$;

-- Snooze an attempt: scheduled again after p_delay; the attempt is not consumed.
CREATE FUNCTION awa.snooze_job(p_job_id bigint, p_run_lease bigint, p_delay interval)
    RETURNS boolean
    LANGUAGE plpgsql VOLATILE
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp SET jit = off SET enable_seqscan = off
AS $$
DECLARE
    t awa.taken_attempt;
BEGIN
    IF p_job_id IS NULL OR p_run_lease IS NULL OR p_delay IS NULL THEN
        RAISE EXCEPTION 'p_job_id, p_run_lease and p_delay must not be null' USING ERRCODE = '22004';
    END IF;
    IF p_delay < interval '0' THEN
        RAISE EXCEPTION 'p_delay must not be negative' USING ERRCODE = '22023';
    END IF;
    t := awa._take_attempt(p_job_id, p_run_lease, 'snoozed');
    IF t.job_id IS NULL THEN
        RETURN false;
    END IF;
    PERFORM awa._defer_attempt(t, 'scheduled', clock_timestamp() + p_delay,
                               greatest(t.attempt - 1, 0)::smallint, t.errors);
    RETURN true;
END
$$;

-- Record heartbeats (and optional progress) of open attempts; returns how many are alive.
CREATE FUNCTION awa.heartbeat_jobs(p_job_ids bigint[], p_run_leases bigint[]) RETURNS integer
    LANGUAGE plpgsql VOLATILE
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp SET jit = off SET enable_seqscan = off
AS $$
DECLARE
    v_alive integer := 0;
    v_leased integer := 0;
BEGIN
    IF p_job_ids IS NULL OR p_run_leases IS NULL THEN
        RAISE EXCEPTION 'p_job_ids and p_run_leases must not be null' USING ERRCODE = '22004';
    END IF;
    IF cardinality(p_job_ids) <> cardinality(p_run_leases) THEN
        RAISE EXCEPTION 'p_job_ids and p_run_leases must have the same number of elements'
            USING ERRCODE = '22023';
    END IF;
    WITH input AS (SELECT DISTINCT * FROM unnest(p_job_ids, p_run_leases) AS t(job_id, run_lease)),
    open_receipts AS (
        SELECT i.job_id, i.run_lease FROM input i
         WHERE EXISTS (SELECT 1 FROM awa.lease_claims c
                        WHERE c.job_id = i.job_id AND c.run_lease = i.run_lease AND c.materialized_at IS NULL
                          AND NOT EXISTS (SELECT 1 FROM awa.lease_claim_closures x
                                           WHERE x.claim_slot = c.claim_slot AND x.job_id = c.job_id
                                             AND x.run_lease = c.run_lease))),
    up AS (
        INSERT INTO awa.attempt_state (job_id, run_lease, heartbeat_at, updated_at)
        SELECT job_id, run_lease, clock_timestamp(), clock_timestamp() FROM open_receipts
        ON CONFLICT (job_id, run_lease) DO UPDATE SET heartbeat_at = EXCLUDED.heartbeat_at,
                                                     updated_at = EXCLUDED.updated_at
        RETURNING 1)
    SELECT count(*) INTO v_alive FROM up;
    UPDATE awa.leases l SET heartbeat_at = clock_timestamp()
      FROM unnest(p_job_ids, p_run_leases) AS i(job_id, run_lease)
     WHERE l.job_id = i.job_id AND l.run_lease = i.run_lease AND l.state IN ('running', 'waiting_external');
    GET DIAGNOSTICS v_leased = ROW_COUNT;
    RETURN v_alive + v_leased;
END
$$;

-- Rescue attempts whose last heartbeat (or claim) is older than p_stale: back to
-- deferred_jobs as retryable with backoff. Returns how many were rescued.
CREATE FUNCTION awa.rescue_stale_heartbeats(p_stale interval, p_limit integer DEFAULT 500)
    RETURNS integer
    LANGUAGE plpgsql VOLATILE
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp SET jit = off
AS $$
DECLARE
    v_cutoff timestamptz;
    v_count integer := 0;
    r record;
    t awa.taken_attempt;
BEGIN
    IF p_stale IS NULL OR p_limit IS NULL THEN
        RAISE EXCEPTION 'p_stale and p_limit must not be null' USING ERRCODE = '22004';
    END IF;
    IF p_stale <= interval '0' OR p_limit < 1 THEN
        RAISE EXCEPTION 'p_stale must be positive and p_limit at least 1' USING ERRCODE = '22023';
    END IF;
    v_cutoff := clock_timestamp() - p_stale;
    FOR r IN
        SELECT c.job_id, c.run_lease FROM awa.lease_claims c
          LEFT JOIN awa.attempt_state a ON a.job_id = c.job_id AND a.run_lease = c.run_lease
         WHERE c.materialized_at IS NULL
           AND coalesce(a.heartbeat_at, c.claimed_at) < v_cutoff
           AND NOT EXISTS (SELECT 1 FROM awa.lease_claim_closures x
                            WHERE x.claim_slot = c.claim_slot AND x.job_id = c.job_id AND x.run_lease = c.run_lease)
        UNION ALL
        SELECT l.job_id, l.run_lease FROM awa.leases l
         WHERE l.state = 'running' AND l.heartbeat_at < v_cutoff
        LIMIT p_limit
    LOOP
        t := awa._take_attempt(r.job_id, r.run_lease, 'rescued');
        CONTINUE WHEN t.job_id IS NULL;
        PERFORM awa._defer_attempt(t, 'retryable',
            clock_timestamp() + awa.backoff_duration(t.attempt, t.max_attempts), t.attempt,
            awa._append_error(t.errors, 'heartbeat stale: worker presumed dead', t.attempt, false));
        v_count := v_count + 1;
    END LOOP;
    RETURN v_count;
END
$$;

-- Rescue attempts past their hard deadline: back to deferred_jobs as retryable.
CREATE FUNCTION awa.rescue_expired_deadlines(p_limit integer DEFAULT 500)
    RETURNS integer
    LANGUAGE plpgsql VOLATILE
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp SET jit = off
AS $$
DECLARE
    v_now timestamptz := clock_timestamp();
    v_count integer := 0;
    r record;
    t awa.taken_attempt;
BEGIN
    PERFORM awa._require(p_limit IS NULL, 'p_limit');
    PERFORM awa._require_at_least(p_limit, 1, 'p_limit');
    FOR r IN
        SELECT c.job_id, c.run_lease FROM awa.lease_claims c
         WHERE c.deadline_at IS NOT NULL AND c.deadline_at < v_now AND c.materialized_at IS NULL
           AND NOT EXISTS (SELECT 1 FROM awa.lease_claim_closures x
                            WHERE x.claim_slot = c.claim_slot AND x.job_id = c.job_id AND x.run_lease = c.run_lease)
        UNION ALL
        SELECT l.job_id, l.run_lease FROM awa.leases l
         WHERE l.deadline_at IS NOT NULL AND l.deadline_at < v_now AND l.state = 'running'
        LIMIT p_limit
    LOOP
        t := awa._take_attempt(r.job_id, r.run_lease, 'deadline_expired');
        CONTINUE WHEN t.job_id IS NULL;
        PERFORM awa._defer_attempt(t, 'retryable',
            clock_timestamp() + awa.backoff_duration(t.attempt, t.max_attempts), t.attempt,
            awa._append_error(t.errors, 'hard deadline exceeded', t.attempt, false));
        v_count := v_count + 1;
    END LOOP;
    RETURN v_count;
END
$$;

-- Promote due scheduled/retryable jobs of unpaused queues into the ready plane with the
-- queue's current width (keyed jobs to their key's shard). Returns how many moved.
CREATE FUNCTION awa.promote_due(p_limit integer DEFAULT 1000)
    RETURNS integer
    LANGUAGE plpgsql VOLATILE
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp SET jit = off
AS $$
DECLARE
    v_rows awa.deferred_jobs[];
    d awa.deferred_jobs;
BEGIN
    PERFORM awa._require(p_limit IS NULL, 'p_limit');
    PERFORM awa._require_at_least(p_limit, 1, 'p_limit');
    WITH due AS (
        SELECT j.job_id FROM awa.deferred_jobs j
         WHERE j.run_at <= clock_timestamp()
           AND NOT EXISTS (SELECT 1 FROM awa.queue_meta m WHERE m.queue = j.queue AND m.paused)
         ORDER BY j.run_at, j.priority, j.job_id
         LIMIT p_limit
         FOR UPDATE SKIP LOCKED),
    moved AS (DELETE FROM awa.deferred_jobs j USING due WHERE j.job_id = due.job_id RETURNING j.*)
    SELECT array_agg(m ORDER BY m.run_at, m.priority, m.job_id) INTO v_rows FROM moved m;
    IF v_rows IS NULL THEN
        RETURN 0;
    END IF;
    FOREACH d IN ARRAY v_rows LOOP
        PERFORM awa._sync_unique_claim(d.job_id, d.unique_key, d.unique_states, d.state, 'available');
    END LOOP;
    RETURN awa._enqueue_ready(v_rows);
END
$$;
