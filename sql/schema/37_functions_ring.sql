-- The rings: write slots, rotation and prune (docs/maintenance.md).

-- The write slot of a ring ('queue', 'claim' or 'lease') for this transaction: its
-- partitions are locked so prune cannot free the slot before this transaction ends.
CREATE FUNCTION awa._ring_write_slot(p_ring text, OUT slot integer, OUT generation bigint)
    AS 'MODULE_PATHNAME', 'awa_ring_write_slot'
    LANGUAGE C VOLATILE PARALLEL UNSAFE
    SET search_path = pg_catalog, pg_temp;
REVOKE ALL ON FUNCTION awa._ring_write_slot(text) FROM PUBLIC;
COMMENT ON FUNCTION awa._ring_write_slot(text) IS 'Internal: the write slot of a ring for this transaction, fenced against prune.';

-- The live arc of a ring: the slots that can hold rows, as two inclusive ranges (an empty
-- range has lo > hi). Readers that name it let the executor skip the freed partitions.
CREATE FUNCTION awa._ring_live_arc(p_ring text, OUT lo1 integer, OUT hi1 integer, OUT lo2 integer, OUT hi2 integer)
    AS 'MODULE_PATHNAME', 'awa_ring_live_arc'
    LANGUAGE C VOLATILE PARALLEL UNSAFE
    SET search_path = pg_catalog, pg_temp;
REVOKE ALL ON FUNCTION awa._ring_live_arc(text) FROM PUBLIC;
COMMENT ON FUNCTION awa._ring_live_arc(text) IS 'Internal: the live slots of a ring, as two inclusive ranges.';

-- A prune freed a slot of a ring in this transaction: a write slot this transaction fenced
-- there is forgotten (its own locks never kept its own prune out), so its next write fences
-- the live slot instead of writing into the freed one.
CREATE FUNCTION awa._ring_slot_freed(p_ring text, p_slot integer) RETURNS void
    AS 'MODULE_PATHNAME', 'awa_ring_slot_freed'
    LANGUAGE C VOLATILE PARALLEL UNSAFE
    SET search_path = pg_catalog, pg_temp;
REVOKE ALL ON FUNCTION awa._ring_slot_freed(text, integer) FROM PUBLIC;
COMMENT ON FUNCTION awa._ring_slot_freed(text, integer) IS 'Internal: forget a write slot this transaction fenced in a slot it has just freed.';

-- Take ACCESS EXCLUSIVE on awa.<table> for every table named, without ever queueing for
-- long: the first try does not wait at all (NOWAIT); later tries, while p_budget_ms lasts,
-- wait at most lock_timeout (10 ms) each and then step out of the lock queue and sleep.
-- Producers and workers never wait on a prune's lock request longer than one try.
-- Returns whether the locks are held.
CREATE FUNCTION awa._lock_ring_partitions(p_tables text[], p_budget_ms integer) RETURNS boolean
    LANGUAGE plpgsql VOLATILE
    SET search_path = pg_catalog, pg_temp SET lock_timeout = '10ms'
AS $$
DECLARE
    v_deadline timestamptz := clock_timestamp() + make_interval(secs => p_budget_ms / 1000.0);
    v_sql text := 'LOCK TABLE ' || (SELECT string_agg('awa.' || quote_ident(t), ', ') FROM unnest(p_tables) t)
                  || ' IN ACCESS EXCLUSIVE MODE';
    v_first boolean := true;
BEGIN
    LOOP
        BEGIN
            EXECUTE v_sql || CASE WHEN v_first THEN ' NOWAIT' ELSE '' END;
            RETURN true;
        EXCEPTION WHEN lock_not_available THEN
            v_first := false;
        END;
        PERFORM pg_sleep(0.002);
        IF clock_timestamp() >= v_deadline THEN
            RETURN false;
        END IF;
    END LOOP;
END
$$;
REVOKE ALL ON FUNCTION awa._lock_ring_partitions(text[], integer) FROM PUBLIC;
COMMENT ON FUNCTION awa._lock_ring_partitions(text[], integer) IS 'Internal: take ACCESS EXCLUSIVE on ring partitions in short tries, never queueing for long.';

-- Rotate the queue ring: seal the current slot and make the next one current, when the
-- current slot holds rows and the next slot is free (pruned). Serialised with prune and
-- other rotations by the cursor row lock, never waiting for it.
-- Returns rotated / skipped_idle / skipped_busy / skipped_concurrent.
CREATE FUNCTION awa.rotate_queue_ring() RETURNS text
    LANGUAGE plpgsql VOLATILE
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp SET jit = off
AS $$
DECLARE
    st awa.queue_ring_state;
    v_next integer;
BEGIN
    PERFORM awa._require_read_committed('rotate_queue_ring');
    BEGIN
        SELECT * INTO st FROM awa.queue_ring_state FOR UPDATE NOWAIT;
    EXCEPTION WHEN lock_not_available THEN
        RETURN 'skipped_concurrent';
    END;
    v_next := (st.current_slot + 1) % st.slot_count;
    IF NOT EXISTS (SELECT 1 FROM awa.ready_entries WHERE ready_slot = st.current_slot) THEN
        RETURN 'skipped_idle';
    END IF;
    IF (SELECT s.generation FROM awa.queue_ring_slots s WHERE s.slot = v_next) >= 0
       OR EXISTS (SELECT 1 FROM awa.ready_entries WHERE ready_slot = v_next)
       OR EXISTS (SELECT 1 FROM awa.done_entries WHERE ready_slot = v_next)
       OR EXISTS (SELECT 1 FROM awa.completion_batches WHERE ready_slot = v_next) THEN
        RETURN 'skipped_busy';
    END IF;
    UPDATE awa.queue_ring_state SET current_slot = v_next, generation = st.generation + 1;
    UPDATE awa.queue_ring_slots SET generation = st.generation + 1 WHERE slot = v_next;
    RETURN 'rotated';
END
$$;
REVOKE ALL ON FUNCTION awa.rotate_queue_ring() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION awa.rotate_queue_ring() TO awa_admin;
COMMENT ON FUNCTION awa.rotate_queue_ring() IS 'Seal the queue ring''s current slot and start the next one when possible. Role: awa_admin.';

-- Copy the failed terminal rows of a queue slot, with their body, to the retained partition
-- (ready_slot -1), once; returns the rows copied by this call.
CREATE FUNCTION awa._retain_failed(p_slot integer) RETURNS awa.done_entries[]
    LANGUAGE plpgsql VOLATILE
    SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_copied awa.done_entries[];
BEGIN
    WITH copied AS (
        INSERT INTO awa.done_entries
        SELECT x.*
          FROM awa.done_entries d
          LEFT JOIN awa.ready_entries r
            ON r.ready_slot = d.ready_slot AND r.queue = d.queue AND r.priority = d.priority
           AND r.enqueue_shard = d.enqueue_shard AND r.lane_seq = d.lane_seq
         CROSS JOIN LATERAL awa._job_row(d, awa._done_job(d, r), '{"ready_slot": -1}') x
         WHERE d.ready_slot = p_slot AND d.state = 'failed'
        ON CONFLICT DO NOTHING
        RETURNING *)
    SELECT array_agg(c) INTO v_copied FROM copied c;
    RETURN v_copied;
END
$$;
REVOKE ALL ON FUNCTION awa._retain_failed(integer) FROM PUBLIC;
COMMENT ON FUNCTION awa._retain_failed(integer) IS 'Internal: copy a queue slot''s failed terminal rows, with their body, to the retained partition once.';

-- Prune the oldest sealed queue slot (docs/maintenance.md §2):
--   1. lock the ring's cursor row (NOWAIT: a concurrent rotation or prune wins);
--   2. remember every lane's claim cursor, then refuse when an open attempt (receipt or
--      lease) still reads a ready row of the slot -- these checks hold no lock;
--   3. copy failed terminal rows, with their body, to the retained partition once. Still
--      without a lock: no attempt of the slot is open, so no failed row can be added to it
--      (a claim since step 2 makes step 4 refuse, which undoes the copies). Not when a
--      transaction older than the lock budget holds the slot's partitions: then the copy
--      waits for step 4's lock, so a prune that steps back has copied nothing;
--   4. lock the slot's partitions (awa._lock_ring_partitions: never queued for long), so no
--      writer can add to the slot, and refuse when a claim since step 2 took rows of the
--      slot (their attempts may be open); drop the copies of failed rows that were dead-
--      lettered or deleted between step 3 and the lock;
--   5. lock the claim heads of the lanes that still have pending rows in the slot (NOWAIT)
--      and copy those rows (and any row whose lane has no claim head, which nothing proves
--      finished) into the current slot with their lane identity and lane_seq:
--      claims drain them in the same order, and a claim holding one of those heads makes
--      this prune step back instead. The lanes of the slot are found by skipping along the
--      lane index, and each lane is read from its cursor on, so the work done under the
--      lock grows with the lanes and the pending rows, not with the rows of the slot;
--   6. truncate the slot's partitions and mark it free.
-- Any refusal after step 1 rolls back a subtransaction, which releases every lock taken.
-- Returns pruned / skipped_none_sealed / skipped_running / skipped_locked / skipped_concurrent.
CREATE FUNCTION awa.prune_queue_ring(p_lock_timeout_ms bigint DEFAULT 1000) RETURNS text
    LANGUAGE plpgsql VOLATILE
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp SET jit = off
AS $$
DECLARE
    st awa.queue_ring_state;
    v_slot integer;
    v_cursors awa.lane_cursors[];
    v_failed awa.done_entries[];
    v_copy_early boolean;
    v_reason text;
BEGIN
    PERFORM awa._require(p_lock_timeout_ms IS NULL, 'p_lock_timeout_ms');
    PERFORM awa._require_at_least(p_lock_timeout_ms, 1, 'p_lock_timeout_ms');
    p_lock_timeout_ms := least(p_lock_timeout_ms, 2147483647);  -- lock_timeout's largest value
    PERFORM awa._require_read_committed('prune_queue_ring');
    BEGIN
        SELECT * INTO st FROM awa.queue_ring_state FOR UPDATE NOWAIT;
    EXCEPTION WHEN lock_not_available THEN
        RETURN 'skipped_concurrent';
    END;
    SELECT s.slot INTO v_slot FROM awa.queue_ring_slots s
     WHERE s.generation >= 0 AND s.slot <> st.current_slot
     ORDER BY s.generation LIMIT 1;
    IF v_slot IS NULL THEN
        RETURN 'skipped_none_sealed';
    END IF;
    SELECT array_agg(h) INTO v_cursors FROM awa.lane_cursors h;
    IF EXISTS (SELECT 1 FROM awa._open_receipts c WHERE c.ready_slot = v_slot)
       OR EXISTS (SELECT 1 FROM awa.leases l WHERE l.ready_slot = v_slot) THEN
        RETURN 'skipped_running';
    END IF;
    BEGIN
        -- Copy early unless a transaction that has already run longer than the lock budget
        -- holds the slot's partitions (or one whose start is not visible, or a prepared
        -- one): the lock would likely not come in time, and a prune that steps back
        -- (skipped_locked) would have copied and rolled back for nothing. Short holders,
        -- such as claims, end long before the budget does.
        v_copy_early := NOT EXISTS (
            SELECT 1 FROM pg_catalog.pg_locks k
              LEFT JOIN pg_catalog.pg_stat_activity a ON a.pid = k.pid
             WHERE k.locktype = 'relation' AND k.database = (SELECT oid FROM pg_catalog.pg_database
                                                            WHERE datname = pg_catalog.current_database())
               AND k.relation IN (format('awa.%I', 'ready_entries_' || v_slot)::regclass,
                                  format('awa.%I', 'done_entries_' || v_slot)::regclass,
                                  format('awa.%I', 'completion_batches_' || v_slot)::regclass)
               AND k.pid IS DISTINCT FROM pg_catalog.pg_backend_pid()
               AND (a.xact_start IS NULL
                    OR a.xact_start < pg_catalog.clock_timestamp()
                                      - pg_catalog.make_interval(secs => p_lock_timeout_ms / 1000.0)));
        IF v_copy_early THEN
            v_failed := awa._retain_failed(v_slot);
        END IF;
        IF NOT awa._lock_ring_partitions(ARRAY['ready_entries_' || v_slot, 'done_entries_' || v_slot,
                                               'completion_batches_' || v_slot],
                                         p_lock_timeout_ms::integer) THEN
            RAISE EXCEPTION USING ERRCODE = 'AWA01', MESSAGE = 'skipped_locked';
        END IF;
        IF NOT v_copy_early THEN
            PERFORM awa._retain_failed(v_slot);
        END IF;
        -- Rows of the slot claimed after the cursors were remembered: attempts may be open.
        IF EXISTS (SELECT 1 FROM awa.lane_cursors h
                     LEFT JOIN unnest(v_cursors) o
                       ON o.queue = h.queue AND o.priority = h.priority AND o.enqueue_shard = h.enqueue_shard
                    WHERE h.claim_seq > coalesce(o.claim_seq, 1)
                      AND EXISTS (SELECT 1 FROM awa.ready_entries r
                                   WHERE r.ready_slot = v_slot AND r.queue = h.queue
                                     AND r.priority = h.priority AND r.enqueue_shard = h.enqueue_shard
                                     AND r.lane_seq >= coalesce(o.claim_seq, 1) AND r.lane_seq < h.claim_seq)) THEN
            RAISE EXCEPTION USING ERRCODE = 'AWA01', MESSAGE = 'skipped_running';
        END IF;
        -- Failed rows dead-lettered or deleted since they were copied: drop their copies.
        IF v_failed IS NOT NULL THEN
            DELETE FROM awa.done_entries k
             USING unnest(v_failed) f
             WHERE k.ready_slot = -1 AND k.queue = f.queue AND k.priority = f.priority
               AND k.enqueue_shard = f.enqueue_shard AND k.lane_seq = f.lane_seq
               AND NOT EXISTS (SELECT 1 FROM awa.done_entries d
                                WHERE d.ready_slot = v_slot AND d.queue = f.queue AND d.priority = f.priority
                                  AND d.enqueue_shard = f.enqueue_shard AND d.lane_seq = f.lane_seq
                                  AND d.state = 'failed');
        END IF;
        BEGIN
            PERFORM 1 FROM awa.queue_claim_heads h
             WHERE EXISTS (SELECT 1 FROM awa.lane_cursors c
                             JOIN awa.ready_entries r
                               ON r.queue = c.queue AND r.priority = c.priority
                              AND r.enqueue_shard = c.enqueue_shard AND r.lane_seq >= c.claim_seq
                            WHERE c.queue = h.queue AND c.priority = h.priority
                              AND c.enqueue_shard = h.enqueue_shard AND r.ready_slot = v_slot)
             ORDER BY h.queue, h.priority, h.enqueue_shard
               FOR UPDATE NOWAIT;
        EXCEPTION WHEN lock_not_available THEN
            RAISE EXCEPTION USING ERRCODE = 'AWA01', MESSAGE = 'skipped_locked';
        END;
        -- Whole rows move: only the slot changes (no column is named).
        WITH RECURSIVE lanes AS (
            (SELECT r.queue, r.priority, r.enqueue_shard FROM awa.ready_entries r
              WHERE r.ready_slot = v_slot
              ORDER BY r.queue, r.priority, r.enqueue_shard LIMIT 1)
            UNION ALL
            SELECT n.queue, n.priority, n.enqueue_shard
              FROM lanes l
             CROSS JOIN LATERAL (
                 SELECT r.queue, r.priority, r.enqueue_shard FROM awa.ready_entries r
                  WHERE r.ready_slot = v_slot
                    AND (r.queue, r.priority, r.enqueue_shard) > (l.queue, l.priority, l.enqueue_shard)
                  ORDER BY r.queue, r.priority, r.enqueue_shard LIMIT 1) n)
        INSERT INTO awa.ready_entries
        SELECT m.*
          FROM lanes l
          LEFT JOIN awa.lane_cursors h
            ON h.queue = l.queue AND h.priority = l.priority AND h.enqueue_shard = l.enqueue_shard
         CROSS JOIN LATERAL (
             SELECT r AS pending FROM awa.ready_entries r
              WHERE r.ready_slot = v_slot AND r.queue = l.queue AND r.priority = l.priority
                AND r.enqueue_shard = l.enqueue_shard AND r.lane_seq >= coalesce(h.claim_seq, 0)
             OFFSET 0) p
         CROSS JOIN LATERAL jsonb_populate_record(p.pending, jsonb_build_object('ready_slot', st.current_slot,
                                                                              'ready_generation', st.generation)) m;
        -- The unique claims of the jobs whose last rows go with the slot: completed and
        -- cancelled ones (failed rows were retained above, and keep theirs). Without this a
        -- key held in `completed` (the default mask) could never be enqueued again. A claim
        -- row another transaction has locked (a delete of the job) is skipped: the slot's
        -- partitions are locked, and a prune must not wait with them.
        DELETE FROM awa.job_unique_claims u
         WHERE u.ctid = ANY (ARRAY(
             SELECT c.ctid FROM awa.job_unique_claims c
              WHERE c.job_id IN (SELECT d.job_id FROM awa.done_entries d
                                  WHERE d.ready_slot = v_slot AND d.state IN ('completed', 'cancelled')
                                 UNION ALL
                                 SELECT b.job_id FROM awa._batch_completions b WHERE b.ready_slot = v_slot)
                FOR UPDATE SKIP LOCKED));
        EXECUTE format('TRUNCATE awa.%I, awa.%I, awa.%I', 'ready_entries_' || v_slot, 'done_entries_' || v_slot,
                       'completion_batches_' || v_slot);
        UPDATE awa.queue_ring_slots SET generation = -1 WHERE slot = v_slot;
        PERFORM awa._ring_slot_freed('queue', v_slot);
    EXCEPTION WHEN SQLSTATE 'AWA01' THEN
        GET STACKED DIAGNOSTICS v_reason = MESSAGE_TEXT;
        RETURN v_reason;
    END;
    RETURN 'pruned';
END
$$;
REVOKE ALL ON FUNCTION awa.prune_queue_ring(bigint) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION awa.prune_queue_ring(bigint) TO awa_admin;
COMMENT ON FUNCTION awa.prune_queue_ring(bigint) IS 'Reclaim the oldest sealed queue-ring slot (pending rows move forward). Role: awa_admin.';

-- Rotate the claim ring (receipts) or the lease ring when the current slot holds rows
-- and the next slot is free; same serialisation as the queue ring.
CREATE FUNCTION awa.rotate_attempt_ring(p_ring text) RETURNS text
    LANGUAGE plpgsql VOLATILE
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp SET jit = off
AS $$
DECLARE
    v_slot integer;
    v_count integer;
    v_gen bigint;
    v_next integer;
BEGIN
    PERFORM awa._require(p_ring IS NULL, 'p_ring');
    PERFORM awa._check_arg(p_ring IN ('claim', 'lease'), 'p_ring must be claim or lease');
    PERFORM awa._require_read_committed('rotate_attempt_ring');
    BEGIN
        IF p_ring = 'claim' THEN
            SELECT current_slot, slot_count, generation INTO v_slot, v_count, v_gen
              FROM awa.claim_ring_state FOR UPDATE NOWAIT;
        ELSE
            SELECT current_slot, slot_count, generation INTO v_slot, v_count, v_gen
              FROM awa.lease_ring_state FOR UPDATE NOWAIT;
        END IF;
    EXCEPTION WHEN lock_not_available THEN
        RETURN 'skipped_concurrent';
    END;
    v_next := (v_slot + 1) % v_count;
    IF p_ring = 'claim' THEN
        IF NOT EXISTS (SELECT 1 FROM awa.claim_batches WHERE claim_slot = v_slot) THEN
            RETURN 'skipped_idle';
        END IF;
        IF (SELECT generation FROM awa.claim_ring_slots WHERE slot = v_next) >= 0
           OR EXISTS (SELECT 1 FROM awa.claim_batches WHERE claim_slot = v_next)
           OR EXISTS (SELECT 1 FROM awa.lease_claim_closures WHERE claim_slot = v_next) THEN
            RETURN 'skipped_busy';
        END IF;
        UPDATE awa.claim_ring_state SET current_slot = v_next, generation = v_gen + 1;
        UPDATE awa.claim_ring_slots SET generation = v_gen + 1 WHERE slot = v_next;
    ELSE
        IF NOT EXISTS (SELECT 1 FROM awa.leases WHERE lease_slot = v_slot) THEN
            RETURN 'skipped_idle';
        END IF;
        IF (SELECT generation FROM awa.lease_ring_slots WHERE slot = v_next) >= 0
           OR EXISTS (SELECT 1 FROM awa.leases WHERE lease_slot = v_next) THEN
            RETURN 'skipped_busy';
        END IF;
        UPDATE awa.lease_ring_state SET current_slot = v_next, generation = v_gen + 1;
        UPDATE awa.lease_ring_slots SET generation = v_gen + 1 WHERE slot = v_next;
    END IF;
    RETURN 'rotated';
END
$$;
REVOKE ALL ON FUNCTION awa.rotate_attempt_ring(text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION awa.rotate_attempt_ring(text) TO awa_admin;
COMMENT ON FUNCTION awa.rotate_attempt_ring(text) IS 'Seal the claim or lease ring''s current slot and start the next one when possible. Role: awa_admin.';

-- Whether a claim slot holds an open receipt (awa._open_receipts). A completed receipt has
-- no closure, so counting receipts against closures no longer tells.
CREATE FUNCTION awa._claim_slot_has_open_receipts(p_slot integer) RETURNS boolean
    LANGUAGE sql VOLATILE
    SET search_path = pg_catalog, pg_temp
    RETURN EXISTS (SELECT 1 FROM awa._open_receipts c WHERE c.claim_slot = p_slot);
REVOKE ALL ON FUNCTION awa._claim_slot_has_open_receipts(integer) FROM PUBLIC;
COMMENT ON FUNCTION awa._claim_slot_has_open_receipts(integer) IS 'Internal: whether a claim-ring slot holds an open receipt.';

-- Prune the oldest sealed claim slot whose receipts are all closed, or the oldest sealed
-- lease slot that is empty. The check runs first without locks (a slot that is still in
-- use costs nothing), then again under the partition locks, which no writer can pass.
-- Returns pruned / skipped_none_sealed / skipped_open_receipts / skipped_open_leases /
-- skipped_locked / skipped_concurrent.
CREATE FUNCTION awa.prune_attempt_ring(p_ring text, p_lock_timeout_ms bigint DEFAULT 1000) RETURNS text
    LANGUAGE plpgsql VOLATILE
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp SET jit = off
AS $$
DECLARE
    v_current integer;
    v_slot integer;
    v_reason text;
    v_receipts bigint;
BEGIN
    PERFORM awa._require(p_ring IS NULL, 'p_ring');
    PERFORM awa._check_arg(p_ring IN ('claim', 'lease'), 'p_ring must be claim or lease');
    PERFORM awa._require(p_lock_timeout_ms IS NULL, 'p_lock_timeout_ms');
    PERFORM awa._require_at_least(p_lock_timeout_ms, 1, 'p_lock_timeout_ms');
    p_lock_timeout_ms := least(p_lock_timeout_ms, 2147483647);  -- lock_timeout's largest value
    PERFORM awa._require_read_committed('prune_attempt_ring');
    BEGIN
        IF p_ring = 'claim' THEN
            SELECT current_slot INTO v_current FROM awa.claim_ring_state FOR UPDATE NOWAIT;
            SELECT slot INTO v_slot FROM awa.claim_ring_slots
             WHERE generation >= 0 AND slot <> v_current ORDER BY generation LIMIT 1;
        ELSE
            SELECT current_slot INTO v_current FROM awa.lease_ring_state FOR UPDATE NOWAIT;
            SELECT slot INTO v_slot FROM awa.lease_ring_slots
             WHERE generation >= 0 AND slot <> v_current ORDER BY generation LIMIT 1;
        END IF;
    EXCEPTION WHEN lock_not_available THEN
        RETURN 'skipped_concurrent';
    END;
    IF v_slot IS NULL THEN
        RETURN 'skipped_none_sealed';
    END IF;
    IF p_ring = 'claim' THEN
        -- The receipts of a sealed slot only grow (a claim that took the slot before the
        -- rotation may still commit), and an ended receipt never opens again. So under the
        -- partition locks, which every worker statement on the claim ring waits for, the
        -- prune only compares the slot's count of claim batches with the one it counted
        -- before its test, and steps back if it grew: a receipt that committed since is one
        -- just claimed (a claim appends at least one batch), open in all
        -- likelihood, and testing the slot again there (a probe per receipt, 0.4 s at
        -- 100 000 receipts) would hold every worker for that long.
        v_receipts := (SELECT count(*) FROM awa.claim_batches WHERE claim_slot = v_slot);
        IF awa._claim_slot_has_open_receipts(v_slot) THEN
            RETURN 'skipped_open_receipts';
        END IF;
        BEGIN
            IF NOT awa._lock_ring_partitions(
                    ARRAY['claim_batches_' || v_slot, 'lease_claim_closures_' || v_slot], p_lock_timeout_ms::integer) THEN
                RAISE EXCEPTION USING ERRCODE = 'AWA01', MESSAGE = 'skipped_locked';
            END IF;
            IF (SELECT count(*) FROM awa.claim_batches WHERE claim_slot = v_slot) <> v_receipts THEN
                RAISE EXCEPTION USING ERRCODE = 'AWA01', MESSAGE = 'skipped_open_receipts';
            END IF;
            EXECUTE format('TRUNCATE awa.%I, awa.%I', 'claim_batches_' || v_slot, 'lease_claim_closures_' || v_slot);
            UPDATE awa.claim_ring_slots SET generation = -1 WHERE slot = v_slot;
            PERFORM awa._ring_slot_freed('claim', v_slot);
        EXCEPTION WHEN SQLSTATE 'AWA01' THEN
            GET STACKED DIAGNOSTICS v_reason = MESSAGE_TEXT;
            RETURN v_reason;
        END;
    ELSE
        IF EXISTS (SELECT 1 FROM awa.leases WHERE lease_slot = v_slot) THEN
            RETURN 'skipped_open_leases';
        END IF;
        BEGIN
            IF NOT awa._lock_ring_partitions(ARRAY['leases_' || v_slot], p_lock_timeout_ms::integer) THEN
                RAISE EXCEPTION USING ERRCODE = 'AWA01', MESSAGE = 'skipped_locked';
            END IF;
            IF EXISTS (SELECT 1 FROM awa.leases WHERE lease_slot = v_slot) THEN
                RAISE EXCEPTION USING ERRCODE = 'AWA01', MESSAGE = 'skipped_open_leases';
            END IF;
            EXECUTE format('TRUNCATE awa.%I', 'leases_' || v_slot);
            UPDATE awa.lease_ring_slots SET generation = -1 WHERE slot = v_slot;
            PERFORM awa._ring_slot_freed('lease', v_slot);
        EXCEPTION WHEN SQLSTATE 'AWA01' THEN
            GET STACKED DIAGNOSTICS v_reason = MESSAGE_TEXT;
            RETURN v_reason;
        END;
    END IF;
    RETURN 'pruned';
END
$$;
REVOKE ALL ON FUNCTION awa.prune_attempt_ring(text, bigint) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION awa.prune_attempt_ring(text, bigint) TO awa_admin;
COMMENT ON FUNCTION awa.prune_attempt_ring(text, bigint) IS 'Reclaim the oldest sealed claim or lease slot when nothing in it is open. Role: awa_admin.';
