-- Maintenance (D9, D15, D23): promotion, folding claim marks, and one entry point that runs
-- every periodic task; the background workers call it.

-- Promote due scheduled/retryable jobs of unpaused queues into the ready plane with the
-- queue's current width (keyed jobs to their key's shard). Returns how many moved.
CREATE FUNCTION awa.promote_due(p_limit bigint DEFAULT 1000)
    RETURNS integer
    LANGUAGE plpgsql VOLATILE
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp SET jit = off
AS $$
DECLARE
    v_rows awa.deferred_jobs[];
    d awa.deferred_jobs;
    v_queue text;
    v_count integer := 0;
    -- The time, read once: compared with clock_timestamp() itself (volatile, so never an
    -- index bound), every pass read every job not yet due (586,000 of them: 0.2-1.3 s).
    v_now timestamptz := clock_timestamp();
BEGIN
    PERFORM awa._require(p_limit IS NULL, 'p_limit');
    PERFORM awa._require_at_least(p_limit, 1, 'p_limit');
    -- On a Citus cluster: this node's queues, one at a time (docs/scale-out.md, "Maintenance").
    IF awa._citus_group() IS NOT NULL THEN
        -- A queue moved here (or split) first gets back any lane sequence missing here.
        FOR v_queue IN SELECT q FROM awa._citus_local_queues() q LOOP
            PERFORM awa._citus_restore_lane_sequences(v_queue);
            EXIT WHEN v_count >= p_limit;
            v_count := v_count + awa._promote_due_queue(v_queue, least(p_limit - v_count, 2147483647)::integer);
        END LOOP;
        RETURN v_count;
    END IF;
    BEGIN
        WITH due AS (
            SELECT j.job_id, j.queue FROM awa.deferred_jobs j
             WHERE j.run_at <= v_now
               AND NOT EXISTS (SELECT 1 FROM awa.queue_meta m WHERE m.queue = j.queue AND m.paused)
             ORDER BY j.run_at, j.priority, j.job_id
             LIMIT p_limit
             FOR UPDATE SKIP LOCKED),
        moved AS (DELETE FROM awa.deferred_jobs j USING due WHERE j.queue = due.queue AND j.job_id = due.job_id RETURNING j.*)
        SELECT array_agg(m ORDER BY m.run_at, m.priority, m.job_id) INTO v_rows FROM moved m;
        IF v_rows IS NULL THEN
            RETURN 0;
        END IF;
        FOREACH d IN ARRAY v_rows LOOP
            PERFORM awa._sync_unique_claim(d.job_id, d.unique_key, d.unique_states, d.state, 'available', d.queue);
        END LOOP;
        RETURN awa._enqueue_ready(v_rows);
    EXCEPTION WHEN lock_not_available THEN
        NULL;
    END;
    -- A lock the batch needs is held and this transaction does not wait for it: a lane (the
    -- maintenance worker never waits for one, so that a producer's open transaction does not
    -- hold it; or awa_shard.lane_lock_wait), or, past lock_timeout, a unique key another
    -- transaction is taking. Queue by queue instead, a queue that meets such a lock left for
    -- the next pass; the queues oldest due job first, as the batch takes jobs, so that a held
    -- queue does not let queues whose jobs became due later go before the others.
    FOR v_queue IN SELECT j.queue COLLATE "C" FROM awa.deferred_jobs j
                    WHERE j.run_at <= v_now
                      AND NOT EXISTS (SELECT 1 FROM awa.queue_meta m WHERE m.queue = j.queue AND m.paused)
                    GROUP BY 1 ORDER BY min(j.run_at), 1 LOOP
        EXIT WHEN v_count >= p_limit;
        BEGIN
            v_count := v_count + awa._promote_due_queue(v_queue, least(p_limit - v_count, 2147483647)::integer);
        EXCEPTION WHEN lock_not_available THEN
            NULL;
        END;
    END LOOP;
    RETURN v_count;
END
$$;
REVOKE ALL ON FUNCTION awa.promote_due(bigint) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION awa.promote_due(bigint) TO awa_admin;
COMMENT ON FUNCTION awa.promote_due(bigint) IS 'Move due scheduled and retryable jobs to the ready plane; returns how many. Role: awa_admin.';

-- Promotion of one queue, run by claims where no maintenance worker serves the database
-- (maintenance.md §1): up to p_limit due scheduled/retryable jobs of p_queue, oldest
-- first, skipping rows another promoter holds; nothing while the queue is paused
-- (C, src/promote.cpp: the claim runs the same code without entering SQL functions).
CREATE FUNCTION awa._promote_due_queue(p_queue text, p_limit integer) RETURNS integer
    AS 'MODULE_PATHNAME', 'awa_promote_due_queue'
    LANGUAGE C VOLATILE PARALLEL UNSAFE
    SET search_path = pg_catalog, pg_temp;
REVOKE ALL ON FUNCTION awa._promote_due_queue(text, integer) FROM PUBLIC;
COMMENT ON FUNCTION awa._promote_due_queue(text, integer) IS 'Internal: promotion of one queue, run by claims where no maintenance worker serves the database.';

-- Fold claim marks into the heads, in two steps that never hold a head while deleting:
--   1. delete up to p_limit marks that their lane's head has passed (nothing reads a mark
--      below its head's cursor, so no head is locked for this; a mark level with its head
--      stays until a further one exists, so a claim clearing the hint of its lane's latest
--      mark never meets a fold deleting it);
--   2. for every lane whose latest mark is past its head, and whose head no claim holds
--      (SKIP LOCKED: a claim never waits for this, and a lane skipped now is folded next
--      time), move the head to that mark; its marks are deleted by the next call.
-- A head never moves back. Nothing is done (returns -1) while a transaction of this
-- database (a prepared one included) has held an xid or a snapshot for more than
-- p_defer_secs: rows deleted or updated then stay as dead rows that vacuum cannot remove
-- until it ends, so deleting would free nothing, whereas marks left alone are live rows read
-- by a backward index probe. Returns the number of heads moved.
CREATE FUNCTION awa.fold_claim_marks(p_defer_secs bigint DEFAULT 10, p_limit bigint DEFAULT 10000)
    RETURNS integer
    LANGUAGE plpgsql VOLATILE
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp SET jit = off
AS $$
DECLARE
    v_count integer;
    v_queue text;
BEGIN
    PERFORM awa._require(p_defer_secs IS NULL OR p_limit IS NULL, 'p_defer_secs and p_limit');
    PERFORM awa._check_arg(p_defer_secs >= 0 AND p_limit >= 1,
                           'p_defer_secs must not be negative and p_limit must be at least 1');
    p_defer_secs := least(p_defer_secs, 2147483647);  -- longer than any transaction
    PERFORM awa._require_read_committed('fold_claim_marks');
    IF EXISTS (SELECT 1 FROM pg_catalog.pg_stat_activity a
                WHERE a.datid = (SELECT d.oid FROM pg_catalog.pg_database d
                                  WHERE d.datname = pg_catalog.current_database())
                  AND a.pid <> pg_catalog.pg_backend_pid()
                  AND a.backend_type <> 'autovacuum worker'
                  AND (a.backend_xmin IS NOT NULL OR a.backend_xid IS NOT NULL)
                  AND a.xact_start < pg_catalog.clock_timestamp() - pg_catalog.make_interval(secs => p_defer_secs))
       OR EXISTS (SELECT 1 FROM pg_catalog.pg_prepared_xacts p
                   WHERE p.database = pg_catalog.current_database()
                     AND p.prepared < pg_catalog.clock_timestamp() - pg_catalog.make_interval(secs => p_defer_secs)) THEN
        RETURN -1;
    END IF;
    -- On a Citus cluster: this node's queues, one at a time (docs/scale-out.md, "Maintenance").
    IF awa._citus_group() IS NOT NULL THEN
        v_count := 0;
        FOR v_queue IN SELECT q FROM awa._citus_local_queues() q LOOP
            v_count := v_count + awa._fold_claim_marks_queue(v_queue, p_limit);
        END LOOP;
        RETURN v_count;
    END IF;
    DELETE FROM awa.claim_marks k
     WHERE k.ctid = ANY (ARRAY(
         SELECT m.ctid FROM awa.claim_marks m
           JOIN awa.queue_claim_heads h
             ON h.queue = m.queue AND h.priority = m.priority AND h.enqueue_shard = m.enqueue_shard
          WHERE m.claim_seq < h.claim_seq
          LIMIT p_limit));
    WITH lanes AS (
        SELECT h.queue, h.priority, h.enqueue_shard, m.claim_seq, m.head_run_at
          FROM awa.queue_claim_heads h
         CROSS JOIN LATERAL (
             SELECT k.claim_seq, k.head_run_at FROM awa.claim_marks k
              WHERE k.queue = h.queue AND k.priority = h.priority AND k.enqueue_shard = h.enqueue_shard
              ORDER BY k.claim_seq DESC LIMIT 1) m
         WHERE m.claim_seq > h.claim_seq
         ORDER BY h.queue, h.priority, h.enqueue_shard
           FOR UPDATE OF h SKIP LOCKED),
    moved AS (
        UPDATE awa.queue_claim_heads h SET claim_seq = l.claim_seq, head_run_at = l.head_run_at
          FROM lanes l
         WHERE h.queue = l.queue AND h.priority = l.priority AND h.enqueue_shard = l.enqueue_shard
           AND h.claim_seq < l.claim_seq
        RETURNING 1)
    SELECT count(*) INTO v_count FROM moved;
    IF v_count > 0 THEN
        PERFORM awa._heads_locked(NULL);
    END IF;
    RETURN v_count;
END
$$;
REVOKE ALL ON FUNCTION awa.fold_claim_marks(bigint, bigint) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION awa.fold_claim_marks(bigint, bigint) TO awa_admin;
COMMENT ON FUNCTION awa.fold_claim_marks(bigint, bigint) IS
    'Delete up to p_limit claim marks their head has passed, then move each head no claim holds to its lane''s latest mark; -1 while a long transaction holds back vacuum. Role: awa_admin.';

-- Remove the places of concurrency keys no longer in use (docs/design.md §4, "Flow control"):
-- a place whose attempt's claim slot (or lease slot) has been pruned has not been used since
-- the ring turned past it (a key in use reuses its places within a turn, and a slot is pruned
-- only when every attempt in it has ended), so a key that stops appearing leaves no rows
-- behind. Each call reads the next p_blocks blocks of awa.key_attempts -- on a Citus node, of
-- the shards of it placed there, one after another (none on the coordinator) -- a TID range
-- from where the previous call of this session stopped (at a random block of a random table
-- in a new session), on past the end of a table into the next one (the same on one server)
-- and at most once round. A claim that reuses such a place meanwhile keeps it (the delete
-- rechecks the slot on the updated row), and the rings cannot turn while it runs (their
-- states are share-locked: a rotation meanwhile would put new attempts in a slot outside the
-- live arc read here; while a rotation or prune holds them, the call removes nothing).
-- READ COMMITTED only. Returns how many places it removed.
CREATE FUNCTION awa.prune_key_places(p_blocks bigint DEFAULT 128) RETURNS bigint
    LANGUAGE plpgsql VOLATILE
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp SET jit = off
AS $$
DECLARE
    c record;
    l record;
    v_tables text[];
    v_at text := current_setting('awa_maintenance.key_places_block', true);
    v_i integer;
    v_start_table integer;
    v_start_block bigint;
    v_around boolean := false;
    v_blocks bigint;
    v_end bigint;
    v_from bigint;
    v_to bigint;
    v_left bigint := p_blocks;
    v_count bigint := 0;
    v_deleted bigint;
BEGIN
    PERFORM awa._require(p_blocks IS NULL, 'p_blocks');
    PERFORM awa._require_at_least(p_blocks, 1, 'p_blocks');
    PERFORM awa._require_read_committed('prune_key_places');
    IF awa._citus_group() IS NULL THEN
        v_tables := ARRAY['awa.key_attempts'];
    ELSE
        v_tables := awa._citus_local_shard_names(ARRAY['awa.key_attempts'::regclass]);
        IF v_tables IS NULL THEN
            RETURN 0;
        END IF;
    END IF;
    -- Where this session's previous call stopped ('table:block'; a worker serving several
    -- databases in turns starts a new session each turn), else a random place.
    IF v_at ~ '^[0-9]{1,9}:[0-9]{1,15}$' AND split_part(v_at, ':', 1)::integer BETWEEN 1 AND cardinality(v_tables) THEN
        v_i := split_part(v_at, ':', 1)::integer;
        v_from := split_part(v_at, ':', 2)::bigint;
    ELSE
        v_i := 1 + floor(random() * cardinality(v_tables))::integer;
        v_from := floor(random() * (pg_relation_size(v_tables[v_i]) / current_setting('block_size')::bigint))::bigint;
    END IF;
    v_start_table := v_i;
    v_start_block := v_from;
    -- Tried, never waited for: a prune of a ring holds its state and may wait for a lock
    -- this transaction holds (run_maintenance); the next call removes what this one leaves.
    BEGIN
        PERFORM 1 FROM awa.claim_ring_state FOR KEY SHARE NOWAIT;
        PERFORM 1 FROM awa.lease_ring_state FOR KEY SHARE NOWAIT;
    EXCEPTION WHEN lock_not_available THEN
        RETURN 0;
    END;
    SELECT * INTO c FROM awa._ring_live_arc('claim');
    SELECT * INTO l FROM awa._ring_live_arc('lease');
    LOOP
        v_blocks := pg_relation_size(v_tables[v_i]) / current_setting('block_size')::bigint;
        -- Back at the first table after a round: up to where this call began.
        v_end := CASE WHEN v_around AND v_i = v_start_table THEN least(v_start_block, v_blocks) ELSE v_blocks END;
        v_to := CASE WHEN v_from >= v_end OR v_left >= v_end - v_from THEN greatest(v_end, v_from) ELSE v_from + v_left END;
        IF v_to > v_from THEN
            EXECUTE format($q$
                DELETE FROM %s k
                 WHERE k.ctid >= $1 AND k.ctid < $2
                   AND NOT coalesce(k.claim_slot BETWEEN $3 AND $4 OR k.claim_slot BETWEEN $5 AND $6, false)
                   AND NOT coalesce(k.lease_slot BETWEEN $7 AND $8 OR k.lease_slot BETWEEN $9 AND $10, false)$q$,
                v_tables[v_i])
              USING format('(%s,0)', v_from)::tid, format('(%s,0)', v_to)::tid,
                    c.lo1, c.hi1, c.lo2, c.hi2, l.lo1, l.hi1, l.lo2, l.hi2;
            GET DIAGNOSTICS v_deleted = ROW_COUNT;
            v_count := v_count + v_deleted;
            v_left := v_left - (v_to - v_from);
        END IF;
        IF v_around AND v_i = v_start_table THEN
            v_from := v_to;
            EXIT;
        END IF;
        IF v_to >= v_blocks THEN
            v_i := v_i % cardinality(v_tables) + 1;
            v_from := 0;
            v_around := v_around OR v_i = v_start_table;
        ELSE
            v_from := v_to;
        END IF;
        EXIT WHEN v_left <= 0;
    END LOOP;
    PERFORM set_config('awa_maintenance.key_places_block', v_i || ':' || v_from, false);
    RETURN v_count;
END
$$;
REVOKE ALL ON FUNCTION awa.prune_key_places(bigint) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION awa.prune_key_places(bigint) TO awa_admin;
COMMENT ON FUNCTION awa.prune_key_places(bigint) IS 'Remove the places of concurrency keys whose last attempt''s ring slot was pruned, p_blocks blocks of awa.key_attempts a call; returns how many. Role: awa_admin.';

-- Every periodic task once, in one transaction: the ticks of periodic jobs
-- (awa.run_schedules), promotion, deadline and heartbeat rescue, ring rotations, then at most
-- one prune (queue ring first) or, when none ran, one expired retention bucket, so the exclusive
-- locks of a prune are held only from its truncate to this transaction's commit, then the
-- fold of the claim marks (awa.fold_claim_marks). A prune not run in this pass reports
-- 'deferred'. The background worker runs each step in
-- its own transaction instead.
CREATE FUNCTION awa.run_maintenance(p_stale_heartbeat interval DEFAULT '5 minutes',
                                               p_batch bigint DEFAULT 1000)
    RETURNS jsonb
    LANGUAGE plpgsql VOLATILE
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp SET jit = off
AS $$
DECLARE
    v_result jsonb;
    v_prune text;
    v_pruned boolean := false;
    v_rescued boolean;
BEGIN
    PERFORM awa._require(p_stale_heartbeat IS NULL OR p_batch IS NULL, 'p_stale_heartbeat and p_batch');
    PERFORM awa._check_arg(p_batch >= 1 AND p_stale_heartbeat > interval '0',
                           'p_batch must be at least 1 and p_stale_heartbeat positive');
    PERFORM awa._check_interval(p_stale_heartbeat, 'p_stale_heartbeat');
    PERFORM awa._check_arg(awa._interval_in_range(p_stale_heartbeat), 'p_stale_heartbeat must have no negative part');
    PERFORM awa._require_read_committed('run_maintenance');
    -- Promotion first, then the schedules: promotion waits for lanes (in lane order) holding
    -- none, and the schedules step waits only for lanes after those (docs/maintenance.md §2).
    v_result := jsonb_build_object('promoted', awa.promote_due(p_batch));
    v_result := v_result || jsonb_build_object('schedules', awa.run_schedules(p_batch));
    -- Both rescues in one pass, in one attempt order (awa._rescue: two passes could deadlock
    -- a worker's completion).
    SELECT v_result || jsonb_build_object('deadline_rescued', r.deadline_rescued, 'heartbeat_rescued', r.heartbeat_rescued),
           r.deadline_rescued + r.heartbeat_rescued > 0
      INTO v_result, v_rescued FROM awa._rescue(p_stale_heartbeat, true, least(p_batch, 2147483647)::integer) r;
    v_result := v_result || jsonb_build_object(
        'queue_ring', awa.rotate_queue_ring(),
        'claim_ring', awa.rotate_attempt_ring('claim'),
        'lease_ring', awa.rotate_attempt_ring('lease'));
    -- No prune in a transaction that rescued: a worker closing one of the rescued attempts
    -- waits for this transaction's closure while holding its ring partitions, which a prune
    -- would then wait for (a deadlock the worker can lose). The next call prunes.
    IF v_rescued THEN
        RETURN v_result || jsonb_build_object('queue_prune', 'deferred', 'claim_prune', 'deferred',
                                              'lease_prune', 'deferred', 'retention', 'deferred',
                                              'key_places', awa.prune_key_places(),
                                              'claim_marks', awa.fold_claim_marks());
    END IF;
    v_prune := awa.prune_queue_ring(50, true);
    v_pruned := v_prune IN ('pruned', 'moved');
    v_result := v_result || jsonb_build_object('queue_prune', v_prune);
    IF v_pruned THEN
        v_prune := 'deferred';
    ELSE
        v_prune := awa.prune_attempt_ring('claim', 50);
        v_pruned := v_prune = 'pruned';
    END IF;
    v_result := v_result || jsonb_build_object('claim_prune', v_prune);
    IF v_pruned THEN
        v_prune := 'deferred';
    ELSE
        v_prune := awa.prune_attempt_ring('lease', 50);
        v_pruned := v_prune = 'pruned';
    END IF;
    v_result := v_result || jsonb_build_object('lease_prune', v_prune);
    -- Expired retention buckets: one truncate, unless a prune above took its locks already.
    IF v_pruned THEN
        v_prune := 'deferred';
    ELSE
        v_prune := awa.expire_retention(50);
    END IF;
    -- Last: the heads it locks stay locked only until this transaction commits.
    RETURN v_result || jsonb_build_object('retention', v_prune, 'key_places', awa.prune_key_places(),
                                          'claim_marks', awa.fold_claim_marks());
END
$$;
REVOKE ALL ON FUNCTION awa.run_maintenance(interval, bigint) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION awa.run_maintenance(interval, bigint) TO awa_admin;
COMMENT ON FUNCTION awa.run_maintenance(interval, bigint) IS 'Every periodic task once (periodic jobs, promotion, rescue, rotation, one prune); returns what each did. Role: awa_admin.';

-- Background maintenance needs no setting when preloaded: a launcher serves every database
-- with awa_shard (maintenance.md §1). Installing or updating tells it at once.
CREATE FUNCTION awa._maintenance_wake() RETURNS void
    AS 'MODULE_PATHNAME', 'awa_maintenance_wake'
    LANGUAGE C VOLATILE PARALLEL UNSAFE
    SET search_path = pg_catalog, pg_temp;
REVOKE ALL ON FUNCTION awa._maintenance_wake() FROM PUBLIC;
COMMENT ON FUNCTION awa._maintenance_wake() IS 'Internal: tell the maintenance launcher that this database has awa_shard.';

-- Background maintenance as the launcher sees it (maintenance.md §1), from shared memory:
-- every database known to have awa_shard, and always this one.
CREATE FUNCTION awa._maintenance_status(
    OUT database name, OUT served_by text, OUT worker_pid integer, OUT last_pass timestamptz,
    OUT passes bigint, OUT last_error text, OUT last_error_at timestamptz)
    RETURNS SETOF record
    AS 'MODULE_PATHNAME', 'awa_maintenance_status'
    LANGUAGE C VOLATILE STRICT PARALLEL SAFE
    SET search_path = pg_catalog, pg_temp;
REVOKE ALL ON FUNCTION awa._maintenance_status() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION awa._maintenance_status() TO awa_admin, pg_monitor;
COMMENT ON FUNCTION awa._maintenance_status() IS 'Internal: the rows of the awa.maintenance_status view (shared memory).';
