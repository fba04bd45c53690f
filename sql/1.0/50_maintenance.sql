-- Maintenance (D4, D9): ring rotation and prune, and one entry point that runs every
-- periodic task. Space is reclaimed by TRUNCATE of a whole sealed slot, never by
-- per-job DELETE + VACUUM. The background worker (src/worker.cpp) calls
-- awa.run_maintenance() when awa_shard.maintenance_database is set.

-- Rotate the queue ring: seal the current slot and make the next one current, when the
-- next slot is empty and the current one holds rows. Returns rotated/skipped_busy/skipped_idle.
CREATE FUNCTION awa.rotate_queue_ring() RETURNS text
    LANGUAGE plpgsql VOLATILE
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp SET jit = off
AS $$
DECLARE
    st awa.queue_ring_state;
    v_next integer;
BEGIN
    SELECT * INTO st FROM awa.queue_ring_state FOR UPDATE;
    v_next := (st.current_slot + 1) % st.slot_count;
    IF NOT EXISTS (SELECT 1 FROM awa.ready_entries WHERE ready_slot = st.current_slot) THEN
        RETURN 'skipped_idle';
    END IF;
    IF EXISTS (SELECT 1 FROM awa.ready_entries WHERE ready_slot = v_next)
       OR EXISTS (SELECT 1 FROM awa.done_entries WHERE ready_slot = v_next) THEN
        RETURN 'skipped_busy';
    END IF;
    UPDATE awa.queue_ring_state SET current_slot = v_next, generation = st.generation + 1;
    UPDATE awa.queue_ring_slots SET generation = st.generation + 1 WHERE slot = v_next;
    RETURN 'rotated';
END
$$;

-- Prune the oldest sealed queue slot when nothing in it is pending: no ready row at or
-- after its own lane's cursor (matched on queue, priority AND enqueue_shard), no open
-- receipt and no lease referencing it. Retained failed rows move to the current slot
-- with their body; everything else of the slot is truncated. Returns pruned/skipped_*.
CREATE FUNCTION awa.prune_queue_ring(p_lock_timeout_ms integer DEFAULT 1000) RETURNS text
    LANGUAGE plpgsql VOLATILE
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp SET jit = off
AS $$
DECLARE
    st awa.queue_ring_state;
    v_slot integer;
    v_gen bigint;
BEGIN
    PERFORM awa._require(p_lock_timeout_ms IS NULL, 'p_lock_timeout_ms');
    PERFORM awa._require_at_least(p_lock_timeout_ms, 1, 'p_lock_timeout_ms');
    SELECT * INTO st FROM awa.queue_ring_state;
    SELECT s.slot, s.generation INTO v_slot, v_gen FROM awa.queue_ring_slots s
     WHERE s.generation >= 0 AND s.slot <> st.current_slot
     ORDER BY s.generation LIMIT 1;
    IF v_slot IS NULL THEN
        RETURN 'skipped_none_sealed';
    END IF;
    -- Writers read queue_ring_state in their insert statement and hold that lock to commit:
    -- taking it exclusively waits out every writer that may still target the sealed slot.
    PERFORM set_config('lock_timeout', p_lock_timeout_ms || 'ms', true);
    BEGIN
        LOCK TABLE awa.queue_ring_state IN ACCESS EXCLUSIVE MODE;
        EXECUTE format('LOCK TABLE awa.%I, awa.%I IN ACCESS EXCLUSIVE MODE',
                       'ready_entries_' || v_slot, 'done_entries_' || v_slot);
    EXCEPTION WHEN lock_not_available THEN
        RETURN 'skipped_locked';
    END;
    IF EXISTS (SELECT 1 FROM awa.ready_entries r
                 JOIN awa.queue_claim_heads h
                   ON h.queue = r.queue AND h.priority = r.priority AND h.enqueue_shard = r.enqueue_shard
                WHERE r.ready_slot = v_slot AND r.lane_seq >= h.claim_seq) THEN
        RETURN 'skipped_pending_ready';
    END IF;
    IF EXISTS (SELECT 1 FROM awa.lease_claims c
                WHERE c.ready_slot = v_slot
                  AND NOT EXISTS (SELECT 1 FROM awa.lease_claim_closures x
                                   WHERE x.claim_slot = c.claim_slot AND x.job_id = c.job_id
                                     AND x.run_lease = c.run_lease))
       OR EXISTS (SELECT 1 FROM awa.leases l WHERE l.ready_slot = v_slot) THEN
        RETURN 'skipped_running';
    END IF;
    INSERT INTO awa.done_entries (ready_slot, ready_generation, job_id, queue, priority, enqueue_shard,
        lane_seq, state, attempt, run_lease, attempted_at, finalized_at, kind, args, max_attempts, run_at,
        created_at, unique_key, unique_states, ordering_key, metadata, tags, errors)
    SELECT st.current_slot, st.generation, d.job_id, d.queue, d.priority, d.enqueue_shard, d.lane_seq,
           d.state, d.attempt, d.run_lease, d.attempted_at, d.finalized_at,
           coalesce(d.kind, r.kind), coalesce(d.args, r.args), coalesce(d.max_attempts, r.max_attempts),
           coalesce(d.run_at, r.run_at), coalesce(d.created_at, r.created_at),
           coalesce(d.unique_key, r.unique_key), coalesce(d.unique_states, r.unique_states),
           coalesce(d.ordering_key, r.ordering_key), coalesce(d.metadata, r.metadata),
           coalesce(d.tags, r.tags), d.errors
      FROM awa.done_entries d
      LEFT JOIN awa.ready_entries r
        ON r.ready_slot = d.ready_slot AND r.queue = d.queue AND r.priority = d.priority
       AND r.enqueue_shard = d.enqueue_shard AND r.lane_seq = d.lane_seq
     WHERE d.ready_slot = v_slot AND d.state = 'failed';
    EXECUTE format('TRUNCATE awa.%I, awa.%I', 'ready_entries_' || v_slot, 'done_entries_' || v_slot);
    UPDATE awa.queue_ring_slots SET generation = -1 WHERE slot = v_slot;
    RETURN 'pruned';
END
$$;

-- Rotate the claim ring (receipts) or the lease ring when the next slot is empty.
CREATE FUNCTION awa.rotate_attempt_ring(p_ring text) RETURNS text
    LANGUAGE plpgsql VOLATILE
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp SET jit = off
AS $$
DECLARE
    v_slot integer;
    v_count integer;
    v_gen bigint;
    v_next integer;
    v_busy boolean;
BEGIN
    PERFORM awa._require(p_ring IS NULL, 'p_ring');
    IF p_ring = 'claim' THEN
        SELECT current_slot, slot_count, generation INTO v_slot, v_count, v_gen FROM awa.claim_ring_state FOR UPDATE;
        v_next := (v_slot + 1) % v_count;
        IF NOT EXISTS (SELECT 1 FROM awa.lease_claims WHERE claim_slot = v_slot) THEN
            RETURN 'skipped_idle';
        END IF;
        v_busy := EXISTS (SELECT 1 FROM awa.lease_claims WHERE claim_slot = v_next)
               OR EXISTS (SELECT 1 FROM awa.lease_claim_closures WHERE claim_slot = v_next);
        IF v_busy THEN RETURN 'skipped_busy'; END IF;
        UPDATE awa.claim_ring_state SET current_slot = v_next, generation = v_gen + 1;
        UPDATE awa.claim_ring_slots SET generation = v_gen + 1 WHERE slot = v_next;
    ELSIF p_ring = 'lease' THEN
        SELECT current_slot, slot_count, generation INTO v_slot, v_count, v_gen FROM awa.lease_ring_state FOR UPDATE;
        v_next := (v_slot + 1) % v_count;
        IF NOT EXISTS (SELECT 1 FROM awa.leases WHERE lease_slot = v_slot) THEN
            RETURN 'skipped_idle';
        END IF;
        IF EXISTS (SELECT 1 FROM awa.leases WHERE lease_slot = v_next) THEN
            RETURN 'skipped_busy';
        END IF;
        UPDATE awa.lease_ring_state SET current_slot = v_next, generation = v_gen + 1;
        UPDATE awa.lease_ring_slots SET generation = v_gen + 1 WHERE slot = v_next;
    ELSE
        RAISE EXCEPTION 'p_ring must be claim or lease' USING ERRCODE = '22023';
    END IF;
    RETURN 'rotated';
END
$$;

-- Prune the oldest sealed claim slot whose receipts are all closed, or the oldest sealed
-- lease slot that is empty (TRUNCATE reclaims its dead tuples).
CREATE FUNCTION awa.prune_attempt_ring(p_ring text, p_lock_timeout_ms integer DEFAULT 1000) RETURNS text
    LANGUAGE plpgsql VOLATILE
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp SET jit = off
AS $$
DECLARE
    v_current integer;
    v_slot integer;
BEGIN
    PERFORM awa._require(p_ring IS NULL, 'p_ring');
    IF p_ring NOT IN ('claim', 'lease') THEN
        RAISE EXCEPTION 'p_ring must be claim or lease' USING ERRCODE = '22023';
    END IF;
    PERFORM awa._require(p_lock_timeout_ms IS NULL, 'p_lock_timeout_ms');
    PERFORM awa._require_at_least(p_lock_timeout_ms, 1, 'p_lock_timeout_ms');
    PERFORM set_config('lock_timeout', p_lock_timeout_ms || 'ms', true);
    IF p_ring = 'claim' THEN
        SELECT current_slot INTO v_current FROM awa.claim_ring_state;
        SELECT slot INTO v_slot FROM awa.claim_ring_slots
         WHERE generation >= 0 AND slot <> v_current ORDER BY generation LIMIT 1;
        IF v_slot IS NULL THEN RETURN 'skipped_none_sealed'; END IF;
        BEGIN
            LOCK TABLE awa.claim_ring_state IN ACCESS EXCLUSIVE MODE;
            EXECUTE format('LOCK TABLE awa.%I, awa.%I IN ACCESS EXCLUSIVE MODE',
                           'lease_claims_' || v_slot, 'lease_claim_closures_' || v_slot);
        EXCEPTION WHEN lock_not_available THEN
            RETURN 'skipped_locked';
        END;
        IF EXISTS (SELECT 1 FROM awa.lease_claims c
                    WHERE c.claim_slot = v_slot
                      AND NOT EXISTS (SELECT 1 FROM awa.lease_claim_closures x
                                       WHERE x.claim_slot = c.claim_slot AND x.job_id = c.job_id
                                         AND x.run_lease = c.run_lease)) THEN
            RETURN 'skipped_open_receipts';
        END IF;
        EXECUTE format('TRUNCATE awa.%I, awa.%I', 'lease_claims_' || v_slot, 'lease_claim_closures_' || v_slot);
        UPDATE awa.claim_ring_slots SET generation = -1 WHERE slot = v_slot;
    ELSE
        SELECT current_slot INTO v_current FROM awa.lease_ring_state;
        SELECT slot INTO v_slot FROM awa.lease_ring_slots
         WHERE generation >= 0 AND slot <> v_current ORDER BY generation LIMIT 1;
        IF v_slot IS NULL THEN RETURN 'skipped_none_sealed'; END IF;
        BEGIN
            LOCK TABLE awa.lease_ring_state IN ACCESS EXCLUSIVE MODE;
            EXECUTE format('LOCK TABLE awa.%I IN ACCESS EXCLUSIVE MODE', 'leases_' || v_slot);
        EXCEPTION WHEN lock_not_available THEN
            RETURN 'skipped_locked';
        END;
        IF EXISTS (SELECT 1 FROM awa.leases WHERE lease_slot = v_slot) THEN
            RETURN 'skipped_open_leases';
        END IF;
        EXECUTE format('TRUNCATE awa.%I', 'leases_' || v_slot);
        UPDATE awa.lease_ring_slots SET generation = -1 WHERE slot = v_slot;
    END IF;
    RETURN 'pruned';
END
$$;

-- Every periodic task once: promotion, deadline and heartbeat rescue, ring rotation and
-- prune. Returns what each step did.
CREATE FUNCTION awa.run_maintenance(p_stale_heartbeat interval DEFAULT '5 minutes',
                                    p_batch integer DEFAULT 1000)
    RETURNS jsonb
    LANGUAGE plpgsql VOLATILE
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp SET jit = off
AS $$
BEGIN
    IF p_stale_heartbeat IS NULL OR p_batch IS NULL THEN
        RAISE EXCEPTION 'p_stale_heartbeat and p_batch must not be null' USING ERRCODE = '22004';
    END IF;
    IF p_batch < 1 OR p_stale_heartbeat <= interval '0' THEN
        RAISE EXCEPTION 'p_batch must be at least 1 and p_stale_heartbeat positive' USING ERRCODE = '22023';
    END IF;
    RETURN jsonb_build_object(
        'promoted', awa.promote_due(p_batch),
        'deadline_rescued', awa.rescue_expired_deadlines(p_batch),
        'heartbeat_rescued', awa.rescue_stale_heartbeats(p_stale_heartbeat, p_batch),
        'queue_ring', awa.rotate_queue_ring(),
        'queue_prune', awa.prune_queue_ring(),
        'claim_ring', awa.rotate_attempt_ring('claim'),
        'claim_prune', awa.prune_attempt_ring('claim'),
        'lease_ring', awa.rotate_attempt_ring('lease'),
        'lease_prune', awa.prune_attempt_ring('lease'));
END
$$;
