-- Queues as objects: create, settings, pause, purge, drop, depth.

-- Queues as objects. A queue is known when it has a settings row (awa.queue_meta), a lane
-- (a producer enqueued into it: implicit creation, as in 1.0), or scheduled, retryable or
-- dead-lettered jobs. Calls that act on a queue by name (pause, resume, purge, drop,
-- set_queue_dlq, list_jobs, queue_depth) raise 42704 for any other name, so a typo is
-- an error instead of a silently created queue.
-- plpgsql, not SQL: Citus cannot plan an SQL function's parameters over distributed tables.
CREATE FUNCTION awa._queue_known(p_queue text) RETURNS boolean
    LANGUAGE plpgsql STABLE
    SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    RETURN EXISTS (SELECT 1 FROM awa.queue_meta m WHERE m.queue = p_queue)
        OR EXISTS (SELECT 1 FROM awa.queue_enqueue_heads h WHERE h.queue = p_queue)
        OR EXISTS (SELECT 1 FROM awa.deferred_jobs j WHERE j.queue = p_queue)
        OR EXISTS (SELECT 1 FROM awa.dlq_entries e WHERE e.queue = p_queue);
END
$$;
REVOKE ALL ON FUNCTION awa._queue_known(text) FROM PUBLIC;
COMMENT ON FUNCTION awa._queue_known(text) IS 'Internal: whether a queue has settings, lanes, scheduled or dead-lettered jobs.';

-- A queue argument that must name a known queue: 22004 / 23514 as awa._check_queue, then
-- 42704 naming the argument when the queue is unknown.
CREATE FUNCTION awa._require_queue(p_queue text, p_name text) RETURNS void
    LANGUAGE plpgsql STABLE
    SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    PERFORM awa._check_queue(p_queue, p_name);
    IF NOT awa._queue_known(p_queue) THEN
        RAISE EXCEPTION 'queue "%" does not exist', p_queue USING ERRCODE = '42704',
            DETAIL = format('%s names no queue: none has settings, lanes, scheduled or dead-lettered jobs under that name.', p_name),
            HINT = format('Create it with awa.create_queue(%L), or enqueue a job into it.', p_queue);
    END IF;
END
$$;
REVOKE ALL ON FUNCTION awa._require_queue(text, text) FROM PUBLIC;
COMMENT ON FUNCTION awa._require_queue(text, text) IS 'Internal: awa._check_queue, then 42704 when the name is no known queue.';

-- Cheap depth of a queue: lane positions handed out and not yet passed by claim, summed
-- over its lanes (next_seq - claim_seq, as awa.shard_lag.lag). No row is scanned: one
-- sequence read per lane. An upper bound: open reservations and gaps left by rollbacks,
-- cancels and deletes count until a claim passes them.
-- plpgsql, not SQL: Citus cannot plan an SQL function's parameters over distributed tables.
CREATE FUNCTION awa._queue_depth(p_queue text) RETURNS bigint
    LANGUAGE plpgsql STABLE
    SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    RETURN (SELECT coalesce(sum(greatest(awa._lane_next_seq(e.seq_name) - h.claim_seq, 0)), 0)::bigint
              FROM awa.queue_enqueue_heads e
              JOIN awa.lane_cursors h
                ON h.queue = e.queue AND h.priority = e.priority AND h.enqueue_shard = e.enqueue_shard
             WHERE e.queue = p_queue AND h.queue = p_queue);
END
$$;
REVOKE ALL ON FUNCTION awa._queue_depth(text) FROM PUBLIC;
COMMENT ON FUNCTION awa._queue_depth(text) IS 'Internal: sum over a queue''s lanes of next_seq - claim_seq (no scan).';

-- What a worker pool autoscaler polls: the cheap depth of one known queue (42704 otherwise).
CREATE FUNCTION awa.queue_depth(p_queue text) RETURNS bigint
    LANGUAGE plpgsql STABLE
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    PERFORM awa._require_queue(p_queue, 'p_queue');
    RETURN awa._queue_depth(p_queue);
END
$$;
REVOKE ALL ON FUNCTION awa.queue_depth(text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION awa.queue_depth(text) TO awa_worker, awa_admin, pg_monitor;
COMMENT ON FUNCTION awa.queue_depth(text)
    IS 'Cheap depth of a known queue for autoscalers: lane positions handed out and not yet claimed (an upper bound of waiting jobs; no scan). Role: awa_worker, awa_admin, pg_monitor.';

-- Create a queue explicitly: its settings row with the width and the DLQ override. True
-- when this call created the row (also for a queue producers had created implicitly);
-- false when the queue already has these settings; 42710 when it has other ones
-- (a NULL p_dlq_enabled is not compared).
CREATE FUNCTION awa.create_queue(p_queue text, p_enqueue_shards bigint DEFAULT 1,
                                 p_dlq_enabled boolean DEFAULT NULL)
    RETURNS boolean
    LANGUAGE plpgsql VOLATILE
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    m awa.queue_meta;
BEGIN
    PERFORM awa._check_queue(p_queue, 'p_queue');
    PERFORM awa._require(p_enqueue_shards IS NULL, 'p_enqueue_shards');
    PERFORM awa._check_between(p_enqueue_shards, 1, awa._limit('max_enqueue_shards'), 'p_enqueue_shards');
    LOOP
        INSERT INTO awa.queue_meta (queue, enqueue_shards, dlq_enabled)
        VALUES (p_queue, p_enqueue_shards, p_dlq_enabled)
        ON CONFLICT (queue) DO NOTHING;
        IF FOUND THEN
            RETURN true;
        END IF;
        SELECT * INTO m FROM awa.queue_meta q WHERE q.queue = p_queue FOR UPDATE;
        EXIT WHEN FOUND;   -- otherwise a concurrent drop removed it: insert again
    END LOOP;
    IF m.enqueue_shards <> p_enqueue_shards OR (p_dlq_enabled IS NOT NULL AND m.dlq_enabled IS DISTINCT FROM p_dlq_enabled) THEN
        RAISE EXCEPTION 'queue "%" already exists with other settings', p_queue USING ERRCODE = '42710',
            DETAIL = format('It has enqueue_shards = %s and dlq_enabled = %s.', m.enqueue_shards,
                            coalesce(m.dlq_enabled::text, 'NULL (the install default)')),
            HINT = 'Change them with awa.set_enqueue_shards or awa.set_queue_dlq.';
    END IF;
    RETURN false;
END
$$;
REVOKE ALL ON FUNCTION awa.create_queue(text, bigint, boolean) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION awa.create_queue(text, bigint, boolean) TO awa_admin;
COMMENT ON FUNCTION awa.create_queue(text, bigint, boolean)
    IS 'Create a queue with its width and DLQ override; true when created, false when it exists with these settings. Role: awa_admin.';

-- Set or clear (NULL: the install default) a known queue's DLQ override for exhausted jobs.
-- Returns the previous override.
CREATE FUNCTION awa.set_queue_dlq(p_queue text, p_dlq_enabled boolean) RETURNS boolean
    LANGUAGE plpgsql VOLATILE
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_old boolean;
BEGIN
    PERFORM awa._require_queue(p_queue, 'p_queue');
    SELECT m.dlq_enabled INTO v_old FROM awa.queue_meta m WHERE m.queue = p_queue FOR UPDATE;
    INSERT INTO awa.queue_meta (queue, dlq_enabled) VALUES (p_queue, p_dlq_enabled)
    ON CONFLICT (queue) DO UPDATE SET dlq_enabled = EXCLUDED.dlq_enabled;
    RETURN v_old;
END
$$;
REVOKE ALL ON FUNCTION awa.set_queue_dlq(text, boolean) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION awa.set_queue_dlq(text, boolean) TO awa_admin;
COMMENT ON FUNCTION awa.set_queue_dlq(text, boolean)
    IS 'Set a known queue''s override for dead-lettering exhausted jobs (NULL: the install default); returns the previous override. Role: awa_admin.';

-- How long a known queue's finished jobs stay visible at least (docs/operations.md,
-- "Retention"): p_completed for completed jobs, p_failed for failed and cancelled ones; NULL
-- is the default (completed and cancelled jobs until their ring slot is pruned, failed ones
-- until retried or deleted). Applies to jobs whose ring slot is pruned from now on.
CREATE FUNCTION awa.set_queue_retention(p_queue text, p_completed interval, p_failed interval) RETURNS void
    LANGUAGE plpgsql VOLATILE
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    PERFORM awa._require_queue(p_queue, 'p_queue');
    PERFORM awa._check_arg(p_completed >= interval '0', 'p_completed must not be negative');
    PERFORM awa._check_interval(p_completed, 'p_completed');
    PERFORM awa._check_arg(p_failed >= interval '0', 'p_failed must not be negative');
    PERFORM awa._check_interval(p_failed, 'p_failed');
    -- Not negative as a whole, yet a part of the other sign ('1 month -30 days'): 22023 too.
    PERFORM awa._check_arg(awa._interval_in_range(p_completed), 'p_completed must have no negative part');
    PERFORM awa._check_arg(awa._interval_in_range(p_failed), 'p_failed must have no negative part');
    PERFORM 1 FROM awa.queue_meta m WHERE m.queue = p_queue FOR UPDATE;
    INSERT INTO awa.queue_meta (queue, completed_retention, failed_retention) VALUES (p_queue, p_completed, p_failed)
    ON CONFLICT (queue) DO UPDATE
        SET completed_retention = EXCLUDED.completed_retention, failed_retention = EXCLUDED.failed_retention;
END
$$;
REVOKE ALL ON FUNCTION awa.set_queue_retention(text, interval, interval) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION awa.set_queue_retention(text, interval, interval) TO awa_admin;
COMMENT ON FUNCTION awa.set_queue_retention(text, interval, interval)
    IS 'Set how long a known queue''s completed, and failed or cancelled, jobs stay visible at least (NULL: the default). Role: awa_admin.';

-- Pause a known queue: claims skip it (promotion too); enqueue still works. True when this
-- call paused it, false when it was paused already.
CREATE FUNCTION awa.pause_queue(p_queue text) RETURNS boolean
    LANGUAGE plpgsql VOLATILE
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    PERFORM awa._require_queue(p_queue, 'p_queue');
    INSERT INTO awa.queue_meta AS m (queue, paused, paused_at, paused_by)
    VALUES (p_queue, true, clock_timestamp(), session_user)
    ON CONFLICT (queue) DO UPDATE
       SET paused = true, paused_at = EXCLUDED.paused_at, paused_by = EXCLUDED.paused_by
     WHERE NOT m.paused;
    RETURN FOUND;
END
$$;
REVOKE ALL ON FUNCTION awa.pause_queue(text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION awa.pause_queue(text) TO awa_admin;
COMMENT ON FUNCTION awa.pause_queue(text) IS 'Pause a known queue (claims and promotion skip it); true when this call paused it. Role: awa_admin.';

-- Resume a known queue. True when this call resumed it, false when it was not paused.
CREATE FUNCTION awa.resume_queue(p_queue text) RETURNS boolean
    LANGUAGE plpgsql VOLATILE
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    PERFORM awa._require_queue(p_queue, 'p_queue');
    UPDATE awa.queue_meta SET paused = false, paused_at = NULL, paused_by = NULL
     WHERE queue = p_queue AND paused;
    RETURN FOUND;
END
$$;
REVOKE ALL ON FUNCTION awa.resume_queue(text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION awa.resume_queue(text) TO awa_admin;
COMMENT ON FUNCTION awa.resume_queue(text) IS 'Resume a known queue; true when this call resumed it. Role: awa_admin.';

-- Set a queue's enqueue width (1..64; the UPSERT of the ADR). Every backend routes with
-- it from its next transaction; rows on shards >= the new width keep draining.
-- Returns the previous width.
CREATE FUNCTION awa.set_enqueue_shards(p_queue text, p_shards bigint) RETURNS smallint
    LANGUAGE plpgsql VOLATILE
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_old smallint;
BEGIN
    PERFORM awa._check_queue(p_queue, 'p_queue');
    PERFORM awa._require(p_shards IS NULL, 'p_shards');
    IF p_shards NOT BETWEEN 1 AND 64 THEN
        RAISE EXCEPTION 'p_shards must be between 1 and 64' USING ERRCODE = '22023',
            DETAIL = format('The value is %s.', p_shards);
    END IF;
    SELECT m.enqueue_shards INTO v_old FROM awa.queue_meta m WHERE m.queue = p_queue FOR UPDATE;
    INSERT INTO awa.queue_meta (queue, enqueue_shards) VALUES (p_queue, p_shards)
    ON CONFLICT (queue) DO UPDATE SET enqueue_shards = EXCLUDED.enqueue_shards;
    RETURN coalesce(v_old, 1);
END
$$;
REVOKE ALL ON FUNCTION awa.set_enqueue_shards(text, bigint) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION awa.set_enqueue_shards(text, bigint) TO awa_admin;
COMMENT ON FUNCTION awa.set_enqueue_shards(text, bigint) IS 'Set (creating the queue if needed) a queue''s width 1..64; returns the previous width. Role: awa_admin.';

-- Make a known queue's lanes up front: for each given priority (NULL: all four) and each of
-- the queue's current shards, the lane's heads and sequence, under the lane's lock, in lane
-- order. Returns how many lanes this call created (0 when all existed). The lock of each lane
-- it makes is held until the transaction ends, as a producer's first enqueue into the lane
-- holds it; lanes that exist are not locked.
CREATE FUNCTION awa.create_lanes(p_queue text, p_priorities bigint[] DEFAULT NULL) RETURNS integer
    LANGUAGE plpgsql VOLATILE
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_priority bigint;
    v_shard integer;
    v_new boolean;
    v_created integer := 0;
BEGIN
    PERFORM awa._require_queue(p_queue, 'p_queue');
    IF p_priorities IS NOT NULL THEN
        IF cardinality(p_priorities) = 0 THEN
            RAISE EXCEPTION 'p_priorities must not be empty' USING ERRCODE = '22023',
                HINT = 'Pass NULL to make the lanes of every priority.';
        END IF;
        PERFORM awa._require(array_position(p_priorities, NULL) IS NOT NULL, 'p_priorities element');
        FOREACH v_priority IN ARRAY p_priorities LOOP
            PERFORM awa._check_priority(v_priority, 'p_priorities element');
        END LOOP;
    END IF;
    -- Lanes that exist with their sequence are left alone: no lock is taken on them.
    FOR v_priority, v_shard IN
        SELECT DISTINCT p.priority, s.shard
          FROM unnest(coalesce(p_priorities,
                  ARRAY(SELECT generate_series(awa._limit('min_priority'), awa._limit('max_priority'))::bigint))) p(priority),
               generate_series(0, awa.queue_enqueue_shards(p_queue) - 1) s(shard)
         WHERE NOT EXISTS (SELECT 1 FROM awa.queue_enqueue_heads e
                            WHERE e.queue = p_queue AND e.priority = p.priority AND e.enqueue_shard = s.shard
                              AND to_regclass('awa.' || quote_ident(e.seq_name)) IS NOT NULL)
         ORDER BY 1, 2
    LOOP
        SELECT l.created INTO v_new FROM awa._ensure_lane(p_queue, v_priority::smallint, v_shard::smallint) l;
        v_created := v_created + v_new::integer;
    END LOOP;
    RETURN v_created;
END
$$;
REVOKE ALL ON FUNCTION awa.create_lanes(text, bigint[]) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION awa.create_lanes(text, bigint[]) TO awa_admin;
COMMENT ON FUNCTION awa.create_lanes(text, bigint[])
    IS 'Make a known queue''s lanes (its current shards at the given priorities, NULL: all) before its first jobs; returns how many this call created. Role: awa_admin.';

-- Remove every waiting, scheduled and retryable job of a known queue; returns how many.
-- Running attempts are left to finish (a later failure can bring one back as retryable),
-- dead letters stay. Waiting rows are removed under their lanes' claim heads, locked in
-- lane order, and only at or after the cursor read under the lock (docs/design.md §4), so a job is either
-- claimed or purged, never both. Each lane's cursor then moves past the removed rows, as a
-- claim of them would, but never past a reservation still in flight (its claim bound): the
-- cheap depth drops to what is left.
CREATE FUNCTION awa.purge_queue(p_queue text) RETURNS bigint
    LANGUAGE plpgsql VOLATILE
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp SET jit = off
AS $$
DECLARE
    v_priorities smallint[];
    v_shards smallint[];
    v_next bigint[];
    v_bounds bigint[];
    v_deferred bigint;
    v_ready bigint;
BEGIN
    PERFORM awa._require_queue(p_queue, 'p_queue');
    PERFORM awa._require_read_committed('purge_queue');
    SELECT array_agg(h.priority), array_agg(h.enqueue_shard) INTO v_priorities, v_shards
      FROM (SELECT c.priority, c.enqueue_shard FROM awa.queue_claim_heads c WHERE c.queue = p_queue
             ORDER BY c.priority, c.enqueue_shard FOR UPDATE) h;
    PERFORM awa._heads_locked(p_queue);
    -- Each lane's claim bound, read before the snapshot of the DELETE below: the cursor never
    -- moves past a reservation still in flight (registry mode, docs/design.md §3).
    SELECT array_agg(awa._lane_claim_bound(to_regclass('awa.' || quote_ident(e.seq_name))::oid)
                     ORDER BY l.ord)
      INTO v_bounds
      FROM unnest(v_priorities, v_shards) WITH ORDINALITY AS l(priority, enqueue_shard, ord)
      LEFT JOIN awa.queue_enqueue_heads e
        ON e.queue = p_queue AND e.priority = l.priority AND e.enqueue_shard = l.enqueue_shard;
    -- Deferred rows first: a promotion holding some finishes, and its rows are then waiting rows.
    WITH gone AS (DELETE FROM awa.deferred_jobs j WHERE j.queue = p_queue RETURNING j.job_id),
    released AS (DELETE FROM awa.job_unique_claims u USING gone g WHERE u.queue = p_queue AND u.job_id = g.job_id)
    SELECT count(*) INTO v_deferred FROM gone;
    WITH lanes AS (
        SELECT l.priority, l.enqueue_shard, h.claim_seq, l.bound
          FROM unnest(v_priorities, v_shards, v_bounds) AS l(priority, enqueue_shard, bound)
          JOIN awa.lane_cursors h
            ON h.queue = p_queue AND h.priority = l.priority AND h.enqueue_shard = l.enqueue_shard),
    gone AS (
        DELETE FROM awa.ready_entries r USING lanes l
         WHERE r.queue = p_queue AND r.priority = l.priority AND r.enqueue_shard = l.enqueue_shard
           AND r.lane_seq >= l.claim_seq
        RETURNING r.job_id, r.priority, r.enqueue_shard, r.lane_seq),
    released AS (DELETE FROM awa.job_unique_claims u USING gone g WHERE u.queue = p_queue AND u.job_id = g.job_id),
    per_lane AS (
        SELECT g.priority, g.enqueue_shard,
               least(max(g.lane_seq) + 1, min(l.bound)) AS next_seq, count(*) AS removed
          FROM gone g
          JOIN lanes l ON l.priority = g.priority AND l.enqueue_shard = g.enqueue_shard
         GROUP BY g.priority, g.enqueue_shard)
    SELECT coalesce(sum(p.removed), 0), array_agg(p.priority), array_agg(p.enqueue_shard), array_agg(p.next_seq)
      INTO v_ready, v_priorities, v_shards, v_next
      FROM per_lane p;
    UPDATE awa.queue_claim_heads h SET claim_seq = p.next_seq, head_run_at = NULL
      FROM unnest(v_priorities, v_shards, v_next) AS p(priority, enqueue_shard, next_seq)
     WHERE h.queue = p_queue AND h.priority = p.priority AND h.enqueue_shard = p.enqueue_shard
       AND h.claim_seq < p.next_seq;
    PERFORM awa._job_finished(NULL);
    RETURN v_deferred + v_ready;
END
$$;
REVOKE ALL ON FUNCTION awa.purge_queue(text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION awa.purge_queue(text) TO awa_admin;
COMMENT ON FUNCTION awa.purge_queue(text)
    IS 'Remove every waiting, scheduled and retryable job of a known queue (running attempts finish); returns how many. Role: awa_admin.';

-- Drop a known queue: its settings, lanes (head rows and sequences) and every row that
-- names it. Refuses (55000) while it holds live jobs (waiting, scheduled, retryable,
-- running or dead-lettered) unless p_force, which removes them too: running attempts are
-- closed as cancelled, so their workers' completions find nothing. Returns how many live
-- jobs were removed. Lock order: the settings row, then each lane's enqueue lock in lane
-- order (an enqueue in flight finishes first, docs/design.md §3), then the claim heads in lane order. A
-- lane created by a producer while the drop runs is not touched (the queue lives on with
-- it). Lanes are dropped, not left empty, so that the name stops being a known queue.
-- The drop gives way to workers and producers (awa.drop_queue below).
CREATE FUNCTION awa._drop_queue_once(p_queue text, p_force boolean) RETURNS bigint
    LANGUAGE plpgsql VOLATILE
    SET search_path = pg_catalog, pg_temp SET jit = off
AS $$
DECLARE
    v_lane record;
    v_priorities smallint[] := '{}';
    v_shards smallint[] := '{}';
    v_waiting bigint;
    v_deferred bigint;
    v_running bigint;
    v_dlq bigint;
    v_seqs text[];
    v_seq text;
    v_batches bigint[];
BEGIN
    PERFORM awa._require_queue(p_queue, 'p_queue');
    PERFORM awa._require(p_force IS NULL, 'p_force');
    PERFORM awa._require_read_committed('drop_queue');
    -- The queue's periodic jobs go with it, or their next tick would create it again. First,
    -- before any lock a pass's enqueue could wait for: a pass running one of them holds its
    -- row until it commits, and its job is then removed with the queue's others.
    DELETE FROM awa.cron_schedules c WHERE c.queue = p_queue;
    PERFORM 1 FROM awa.queue_meta m WHERE m.queue = p_queue FOR UPDATE;
    FOR v_lane IN SELECT e.priority, e.enqueue_shard FROM awa.queue_enqueue_heads e
                   WHERE e.queue = p_queue ORDER BY e.priority, e.enqueue_shard LOOP
        PERFORM pg_advisory_xact_lock(awa.lane_lock_key(p_queue, v_lane.priority, v_lane.enqueue_shard));
        v_priorities := v_priorities || v_lane.priority;
        v_shards := v_shards || v_lane.enqueue_shard;
    END LOOP;
    PERFORM 1 FROM awa.queue_claim_heads h
      JOIN unnest(v_priorities, v_shards) AS l(priority, enqueue_shard)
        ON h.priority = l.priority AND h.enqueue_shard = l.enqueue_shard
     WHERE h.queue = p_queue
     ORDER BY h.priority, h.enqueue_shard
       FOR UPDATE OF h;
    PERFORM awa._heads_locked(p_queue);

    SELECT count(*) INTO v_waiting
      FROM awa.lane_cursors h
      JOIN unnest(v_priorities, v_shards) AS l(priority, enqueue_shard)
        ON h.priority = l.priority AND h.enqueue_shard = l.enqueue_shard
      JOIN awa.ready_entries r
        ON r.queue = p_queue AND r.priority = h.priority AND r.enqueue_shard = h.enqueue_shard
       AND r.lane_seq >= h.claim_seq
     WHERE h.queue = p_queue;
    SELECT count(*) INTO v_deferred FROM awa.deferred_jobs j WHERE j.queue = p_queue;
    SELECT (SELECT count(*) FROM awa._open_receipts c WHERE c.queue = p_queue)
         + (SELECT count(*) FROM awa.leases l WHERE l.queue = p_queue)
      INTO v_running;
    SELECT count(*) INTO v_dlq FROM awa.dlq_entries e WHERE e.queue = p_queue;
    IF NOT p_force AND v_waiting + v_deferred + v_running + v_dlq > 0 THEN
        RAISE EXCEPTION 'queue "%" is not empty', p_queue USING ERRCODE = '55000',
            DETAIL = format('It holds %s waiting, %s scheduled or retryable, %s running and %s dead-lettered jobs.',
                            v_waiting, v_deferred, v_running, v_dlq),
            HINT = format('Empty it first (awa.purge_queue), or call awa.drop_queue(%L, p_force => true).', p_queue);
    END IF;

    -- The lanes' sequences go first, before anything a worker could wait for is written: a
    -- worker's transaction that read them (every claim walk reads its queue's sequences)
    -- holds them until it ends, and may meanwhile complete jobs of this queue, which would
    -- wait for the cancellations below. Held from here to commit, they make claims and
    -- monitoring pass over the lanes instead of waiting (docs/design.md §4).
    SELECT array_agg(e.seq_name ORDER BY e.priority, e.enqueue_shard) INTO v_seqs
      FROM awa.queue_enqueue_heads e
      JOIN unnest(v_priorities, v_shards) AS l(priority, enqueue_shard)
        ON e.priority = l.priority AND e.enqueue_shard = l.enqueue_shard
     WHERE e.queue = p_queue;
    FOREACH v_seq IN ARRAY coalesce(v_seqs, '{}') LOOP
        EXECUTE format('DROP SEQUENCE IF EXISTS awa.%I', v_seq);
    END LOOP;

    -- Running attempts end as cancelled: a closure for each open receipt, the leases go.
    -- Claim batches in receipt_base order, then leases in (job_id, run_lease) order, like
    -- every exit that closes several attempts (docs/design.md §5), so a completion racing
    -- the drop cannot deadlock with it. The batches are locked first and their receipts
    -- closed by the next statement, whose snapshot sees what a closer that held one of
    -- them committed (awa._open_receipts).
    SELECT array_agg(b.receipt_base ORDER BY b.receipt_base) INTO v_batches
      FROM (SELECT b.receipt_base FROM awa.claim_batches b
             WHERE b.queue = p_queue
               AND b.receipt_base IN (SELECT c.receipt_base FROM awa._open_receipts c WHERE c.queue = p_queue)
             ORDER BY b.receipt_base FOR UPDATE OF b) b;
    WITH closed AS (
        INSERT INTO awa.lease_claim_closures (claim_slot, job_id, run_lease, outcome, queue)
        SELECT c.claim_slot, c.job_id, c.run_lease, 'cancelled', p_queue FROM awa._open_receipts c
         WHERE c.queue = p_queue AND c.receipt_base = ANY (v_batches)
         ORDER BY c.receipt_base, c.job_id, c.run_lease
        ON CONFLICT DO NOTHING
        RETURNING job_id, run_lease),
    lease_keys AS MATERIALIZED (
        SELECT l.lease_slot, l.priority, l.enqueue_shard, l.lane_seq FROM awa.leases l
         WHERE l.queue = p_queue ORDER BY l.job_id, l.run_lease FOR UPDATE OF l),
    leased AS (DELETE FROM awa.leases l USING lease_keys k
                WHERE l.queue = p_queue AND l.priority = k.priority AND l.enqueue_shard = k.enqueue_shard
                  AND l.lane_seq = k.lane_seq AND l.lease_slot = k.lease_slot
               RETURNING l.job_id, l.run_lease),
    ended AS (SELECT job_id, run_lease FROM closed UNION ALL SELECT job_id, run_lease FROM leased),
    heartbeats AS (DELETE FROM awa.attempt_state a USING ended o
                    WHERE a.queue = p_queue AND a.job_id = o.job_id AND a.run_lease = o.run_lease)
    SELECT count(*) INTO v_running FROM ended;

    -- Every row that names the queue, history included (a ready row without its lane would
    -- look pending to prune forever; a claim or completion batch would take the rows of a
    -- queue created again under this name, whose lanes number from 1 again, for its own),
    -- and the unique claims of those jobs. What is returned is what this removed (the counts
    -- above were read before the waits for the heads and the sequences, during which workers
    -- may have completed jobs).
    WITH r AS (
        DELETE FROM awa.ready_entries r
         USING unnest(v_priorities, v_shards) AS l(priority, enqueue_shard)
         WHERE r.queue = p_queue AND r.priority = l.priority AND r.enqueue_shard = l.enqueue_shard
        RETURNING r.job_id, r.priority, r.enqueue_shard, r.lane_seq),
    d AS (
        DELETE FROM awa.done_entries d
         WHERE d.queue = p_queue
           AND (d.lane_seq < 0 OR EXISTS (SELECT 1 FROM unnest(v_priorities, v_shards) AS l(priority, enqueue_shard)
                                          WHERE l.priority = d.priority AND l.enqueue_shard = d.enqueue_shard))
        RETURNING d.job_id),
    b AS (
        DELETE FROM awa.completion_batches b
         USING unnest(v_priorities, v_shards) AS l(priority, enqueue_shard)
         WHERE b.queue = p_queue AND b.priority = l.priority AND b.enqueue_shard = l.enqueue_shard),
    c AS (
        DELETE FROM awa.claim_batches b
         USING unnest(v_priorities, v_shards) AS l(priority, enqueue_shard)
         WHERE b.queue = p_queue AND b.priority = l.priority AND b.enqueue_shard = l.enqueue_shard),
    j AS (DELETE FROM awa.deferred_jobs j WHERE j.queue = p_queue RETURNING j.job_id),
    e AS (DELETE FROM awa.dlq_entries e WHERE e.queue = p_queue RETURNING e.job_id),
    k AS (DELETE FROM awa.key_attempts k WHERE k.queue = p_queue),
    u AS (DELETE FROM awa.job_unique_claims u
           USING (SELECT job_id FROM r UNION SELECT job_id FROM d UNION SELECT job_id FROM j
                  UNION SELECT job_id FROM e) g
           WHERE u.queue = p_queue AND u.job_id = g.job_id)
    SELECT (SELECT count(*) FROM r JOIN awa.lane_cursors h
              ON h.queue = p_queue AND h.priority = r.priority AND h.enqueue_shard = r.enqueue_shard
             WHERE r.lane_seq >= h.claim_seq),
           (SELECT count(*) FROM j), (SELECT count(*) FROM e)
      INTO v_waiting, v_deferred, v_dlq;

    -- The lanes, then the settings row. Dropping a lane's sequence (above) also makes every
    -- backend forget the lane (relcache invalidation), so the next enqueue creates it afresh.
    DELETE FROM awa.queue_claim_heads h
     USING unnest(v_priorities, v_shards) AS l(priority, enqueue_shard)
     WHERE h.queue = p_queue AND h.priority = l.priority AND h.enqueue_shard = l.enqueue_shard;
    DELETE FROM awa.queue_enqueue_heads e
     USING unnest(v_priorities, v_shards) AS l(priority, enqueue_shard)
     WHERE e.queue = p_queue AND e.priority = l.priority AND e.enqueue_shard = l.enqueue_shard;
    DELETE FROM awa.queue_meta m WHERE m.queue = p_queue;
    PERFORM awa._job_finished(NULL);
    RETURN v_waiting + v_deferred + v_running + v_dlq;
END
$$;
REVOKE ALL ON FUNCTION awa._drop_queue_once(text, boolean) FROM PUBLIC;
COMMENT ON FUNCTION awa._drop_queue_once(text, boolean) IS
    'Internal: one try of awa.drop_queue (which retries it after a deadlock or a lock timeout).';

-- awa._drop_queue_once, giving way to the queue's workers and producers. The drop waits for
-- locks they hold (a claim's head, a lane sequence a claim or an enqueue has read, a lane
-- lock, a closure being written), and they may in turn wait for the drop: a worker's
-- transaction that claimed and then enqueues a follow-up job into the queue, a producer's
-- second enqueue, a claim whose head lock follows an update chain to the version the drop
-- has locked (PostgreSQL waits there even under SKIP LOCKED). PostgreSQL checks a waiter for
-- a deadlock once, deadlock_timeout (1 s by default) after it starts waiting, and aborts
-- the waiter that finds the cycle. The drop therefore never waits long: every lock wait of a
-- try is cut at 200 ms (lock_timeout) and a cycle it is part of is detected by itself at
-- 50 ms; either way the try rolls back to its savepoint, releasing everything it took, and
-- the drop tries again after a pause. A worker or producer is thus not aborted, and waits
-- for at most one try of the drop (its lock waits, each under 200 ms, and its deletes).
-- While jobs keep being enqueued into the queue the drop may never hold every lane at once:
-- after 15 s of tries it gives up with 55P03, leaving the queue whole (docs/api.md).
CREATE FUNCTION awa.drop_queue(p_queue text, p_force boolean DEFAULT false) RETURNS bigint
    LANGUAGE plpgsql VOLATILE
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp SET jit = off
    SET deadlock_timeout = '50ms' SET lock_timeout = '200ms'
AS $$
DECLARE
    v_start timestamptz := clock_timestamp();
    v_try integer := 0;
BEGIN
    LOOP
        v_try := v_try + 1;
        BEGIN
            RETURN awa._drop_queue_once(p_queue, p_force);
        EXCEPTION WHEN deadlock_detected OR lock_not_available THEN
            IF clock_timestamp() - v_start > interval '15 seconds' THEN
                RAISE EXCEPTION 'queue "%" could not be dropped: its workers or producers kept its lanes busy', p_queue
                    USING ERRCODE = '55P03',
                          DETAIL = format('The drop gave way to them %s times in %s s; nothing was dropped.',
                                          v_try, round(extract(epoch FROM clock_timestamp() - v_start)::numeric, 1)),
                          HINT = 'Pause the queue (awa.pause_queue) and stop its producers, end any open transaction that changes one of its schedules (the drop removes them), then retry.';
            END IF;
            PERFORM pg_sleep(least(0.02 * v_try, 0.25));
        END;
    END LOOP;
END
$$;
REVOKE ALL ON FUNCTION awa.drop_queue(text, boolean) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION awa.drop_queue(text, boolean) TO awa_admin;
COMMENT ON FUNCTION awa.drop_queue(text, boolean)
    IS 'Drop a known queue with its lanes and settings; refuses a queue with live jobs unless p_force. Returns the live jobs removed. Role: awa_admin.';

-- One row per known queue: its settings (width, paused, effective DLQ setting, flow-control
-- limits), the cheap depth, exact counts by state (awa.queue_counts_exact: a scan of the
-- queue's rows), the age of its oldest waiting job and its retentions (NULL: the default).
CREATE FUNCTION awa._queues()
    RETURNS TABLE (queue text, enqueue_shards smallint, paused boolean, dlq_enabled boolean, depth bigint,
                   available bigint, scheduled bigint, retryable bigint, running bigint, completed bigint,
                   failed bigint, cancelled bigint, dlq bigint, oldest_waiting_age interval,
                   rate_per_second double precision, rate_burst integer, concurrency_limit integer,
                   completed_retention interval, failed_retention interval, key_concurrency_limit integer,
                   key_rate_per_second double precision, key_rate_burst integer)
    LANGUAGE plpgsql STABLE
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp SET jit = off
AS $$
BEGIN
    -- On a Citus cluster: every worker's rows of its own queues (awa._citus_local_queue_rows),
    -- gathered here; a worker answers for its queues only (docs/scale-out.md).
    -- A worker that does not answer fails the view (58000; awa._citus_gathered_rows).
    IF awa._citus_group() IS NOT NULL THEN
        RETURN QUERY
            SELECT t.* FROM jsonb_to_recordset(awa._citus_gathered_rows('awa.queues', '_citus_local_queue_rows')) AS t(
                queue text, enqueue_shards smallint, paused boolean, dlq_enabled boolean, depth bigint,
                available bigint, scheduled bigint, retryable bigint, running bigint, completed bigint,
                failed bigint, cancelled bigint, dlq bigint, oldest_waiting_age interval,
                rate_per_second double precision, rate_burst integer, concurrency_limit integer,
                completed_retention interval, failed_retention interval, key_concurrency_limit integer,
                   key_rate_per_second double precision, key_rate_burst integer)
             ORDER BY t.queue;
        RETURN;
    END IF;
    RETURN QUERY
    WITH names AS (
        SELECT m.queue FROM awa.queue_meta m
        UNION SELECT h.queue FROM awa.queue_enqueue_heads h
        UNION SELECT j.queue FROM awa.deferred_jobs j
        UNION SELECT e.queue FROM awa.dlq_entries e)
    SELECT n.queue, coalesce(m.enqueue_shards, 1::smallint), coalesce(m.paused, false),
           coalesce(m.dlq_enabled, s.dlq_enabled_by_default), awa._queue_depth(n.queue),
           c.available, c.scheduled, c.retryable, c.running, c.completed, c.failed, c.cancelled, c.dlq,
           (SELECT CASE WHEN min(r.run_at) IS NOT NULL THEN greatest(now() - min(r.run_at), interval '0') END
              FROM awa.lane_cursors h
              JOIN awa.ready_entries r
                ON r.queue = h.queue AND r.priority = h.priority AND r.enqueue_shard = h.enqueue_shard
               AND r.lane_seq >= h.claim_seq
             WHERE h.queue = n.queue AND r.queue = n.queue),
           m.rate_per_second, m.rate_burst, m.concurrency_limit, m.completed_retention, m.failed_retention,
           m.key_concurrency_limit, m.key_rate_per_second, m.key_rate_burst
      FROM names n
      LEFT JOIN awa.queue_meta m ON m.queue = n.queue
     CROSS JOIN awa.plane_settings s
     CROSS JOIN LATERAL awa.queue_counts_exact(n.queue) c;
END
$$;
REVOKE ALL ON FUNCTION awa._queues() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION awa._queues() TO awa_admin, pg_monitor;
COMMENT ON FUNCTION awa._queues() IS 'Internal: the rows of the awa.queues view (security definer).';

-- Flow control (docs/api.md, "Flow control"). Whether claims can keep rate limits: their
-- token buckets live in shared memory, so only when the library is preloaded.
CREATE FUNCTION awa._rate_limits_available() RETURNS boolean
    AS 'MODULE_PATHNAME', 'awa_rate_limits_available'
    LANGUAGE C VOLATILE PARALLEL SAFE
    SET search_path = pg_catalog, pg_temp;
REVOKE ALL ON FUNCTION awa._rate_limits_available() FROM PUBLIC;
COMMENT ON FUNCTION awa._rate_limits_available() IS 'Internal: whether the token buckets of rate limits exist (library preloaded).';

-- The locks claims try for a queue's concurrency keys, taken by set_concurrency_limit in the
-- order given (sorted: two such calls never wait for each other crosswise), each waited for: the claims of those keys in progress end first, and the
-- claims that follow pass those keys over (they never wait) until it commits.
CREATE FUNCTION awa._lock_concurrency_keys(p_queue text, p_keys text[]) RETURNS void
    AS 'MODULE_PATHNAME', 'awa_lock_concurrency_keys'
    LANGUAGE C VOLATILE PARALLEL UNSAFE
    SET search_path = pg_catalog, pg_temp;
REVOKE ALL ON FUNCTION awa._lock_concurrency_keys(text, text[]) FROM PUBLIC;
COMMENT ON FUNCTION awa._lock_concurrency_keys(text, text[]) IS 'Internal: wait for and take the locks claims try for a queue''s concurrency keys.';

-- The running attempts of a queue's keyed jobs, in both modes: open receipts and running leases.
CREATE FUNCTION awa._running_keyed_attempts(p_queue text)
    RETURNS TABLE (concurrency_key text, job_id bigint, run_lease bigint, priority smallint, enqueue_shard smallint,
                   lane_seq bigint, ready_slot integer, ready_generation bigint, claim_slot integer,
                   lease_slot integer)
    LANGUAGE plpgsql STABLE
    SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    RETURN QUERY
    SELECT (c.ready).concurrency_key, c.job_id, c.run_lease, c.priority, c.enqueue_shard, c.lane_seq,
           c.ready_slot, c.ready_generation, c.claim_slot, NULL::integer
      FROM awa._open_receipts c
     WHERE c.queue = p_queue AND (c.ready).concurrency_key IS NOT NULL
    UNION ALL
    SELECT r.concurrency_key, l.job_id, l.run_lease, l.priority, l.enqueue_shard, l.lane_seq,
           l.ready_slot, l.ready_generation, NULL::integer, l.lease_slot
      FROM awa.leases l
      JOIN awa.ready_entries r
        ON r.ready_slot = l.ready_slot AND r.ready_generation = l.ready_generation AND r.queue = l.queue
       AND r.priority = l.priority AND r.enqueue_shard = l.enqueue_shard AND r.lane_seq = l.lane_seq
     WHERE l.queue = p_queue AND l.state IN ('running', 'waiting_external') AND r.concurrency_key IS NOT NULL;
END
$$;
REVOKE ALL ON FUNCTION awa._running_keyed_attempts(text) FROM PUBLIC;
COMMENT ON FUNCTION awa._running_keyed_attempts(text) IS 'Internal: the running attempts of a queue''s keyed jobs (open receipts and running leases).';

-- Set (or remove, p_per_second NULL) a known queue's rate limit: its claims, all backends
-- together, hand out at most p_burst + p_per_second x t jobs over any t seconds; a claim
-- past it returns fewer jobs or none, never waits. With p_per_key, the queue's per-key rate
-- limit instead: that many jobs of each concurrency key (the two limits are independent).
-- Kept in awa.queue_meta (pg_dump keeps it); the token buckets are in shared memory, so
-- setting one needs the library preloaded.
CREATE FUNCTION awa.set_rate_limit(p_queue text, p_per_second double precision, p_burst bigint DEFAULT 1,
                                   p_per_key boolean DEFAULT false) RETURNS void
    LANGUAGE plpgsql VOLATILE
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    PERFORM awa._require_queue(p_queue, 'p_queue');
    PERFORM awa._require(p_per_key IS NULL, 'p_per_key');
    IF p_per_second IS NULL THEN
        IF p_per_key THEN
            UPDATE awa.queue_meta SET key_rate_per_second = NULL, key_rate_burst = NULL
             WHERE queue = p_queue AND key_rate_per_second IS NOT NULL;
        ELSE
            UPDATE awa.queue_meta SET rate_per_second = NULL, rate_burst = NULL
             WHERE queue = p_queue AND rate_per_second IS NOT NULL;
        END IF;
        RETURN;
    END IF;
    IF NOT (p_per_second > 0 AND p_per_second <= 1e9) THEN
        RAISE EXCEPTION 'p_per_second must be greater than 0 and at most 1e9' USING ERRCODE = '22023',
            DETAIL = format('The value is %s.', p_per_second),
            HINT = 'Pass NULL to remove the rate limit; pause the queue to stop its claims.';
    END IF;
    PERFORM awa._require(p_burst IS NULL, 'p_burst');
    IF p_burst NOT BETWEEN 1 AND 1000000 THEN
        RAISE EXCEPTION 'p_burst must be between 1 and 1000000' USING ERRCODE = '22023',
            DETAIL = format('The value is %s.', p_burst);
    END IF;
    IF NOT awa._rate_limits_available() THEN
        RAISE EXCEPTION 'rate limits need awa_shard in shared_preload_libraries' USING ERRCODE = '55000',
            DETAIL = 'The token buckets that all claims of the server share live in shared memory.',
            HINT = 'Add awa_shard to shared_preload_libraries and restart the server.';
    END IF;
    IF p_per_key THEN
        INSERT INTO awa.queue_meta (queue, key_rate_per_second, key_rate_burst) VALUES (p_queue, p_per_second, p_burst)
        ON CONFLICT (queue) DO UPDATE
            SET key_rate_per_second = EXCLUDED.key_rate_per_second, key_rate_burst = EXCLUDED.key_rate_burst;
    ELSE
        INSERT INTO awa.queue_meta (queue, rate_per_second, rate_burst) VALUES (p_queue, p_per_second, p_burst)
        ON CONFLICT (queue) DO UPDATE SET rate_per_second = EXCLUDED.rate_per_second, rate_burst = EXCLUDED.rate_burst;
    END IF;
END
$$;
REVOKE ALL ON FUNCTION awa.set_rate_limit(text, double precision, bigint, boolean) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION awa.set_rate_limit(text, double precision, bigint, boolean) TO awa_admin;
COMMENT ON FUNCTION awa.set_rate_limit(text, double precision, bigint, boolean)
    IS 'Set (NULL p_per_second: remove) a known queue''s rate limit, or with p_per_key each concurrency key''s: at most p_burst + p_per_second x t jobs claimed over t seconds, server-wide. Role: awa_admin.';

-- Set (or remove, p_limit NULL) a known queue's concurrency limit: at most p_limit running
-- attempts, whatever the number and isolation level of the claimers; with p_per_key, at
-- most p_limit running attempts of each concurrency key (the two limits are independent).
-- Claims of a limited queue serialise on a lock of the queue held until they commit and
-- count its running attempts on the latest committed state (docs/design.md §4, "Flow control").
CREATE FUNCTION awa.set_concurrency_limit(p_queue text, p_limit bigint, p_per_key boolean DEFAULT false) RETURNS void
    LANGUAGE plpgsql VOLATILE
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    PERFORM awa._require_queue(p_queue, 'p_queue');
    PERFORM awa._require(p_per_key IS NULL, 'p_per_key');
    -- Each statement must see what the claims it waited for committed.
    PERFORM awa._require_read_committed('set_concurrency_limit');
    IF p_limit IS NULL THEN
        IF p_per_key THEN
            UPDATE awa.queue_meta SET key_concurrency_limit = NULL
             WHERE queue = p_queue AND key_concurrency_limit IS NOT NULL;
            -- After the claims of the keys in progress (they update and delete places too).
            PERFORM awa._lock_concurrency_keys(p_queue, ARRAY(SELECT DISTINCT k.concurrency_key FROM awa.key_attempts k
                                                               WHERE k.queue = p_queue ORDER BY 1));
            DELETE FROM awa.key_attempts WHERE queue = p_queue;
        ELSE
            UPDATE awa.queue_meta SET concurrency_limit = NULL WHERE queue = p_queue AND concurrency_limit IS NOT NULL;
        END IF;
        RETURN;
    END IF;
    IF p_limit NOT BETWEEN 1 AND 1000000 THEN
        RAISE EXCEPTION 'p_limit must be between 1 and 1000000' USING ERRCODE = '22023',
            DETAIL = format('The value is %s.', p_limit),
            HINT = 'Pass NULL to remove the limit; pause the queue to stop its claims.';
    END IF;
    IF p_per_key THEN
        INSERT INTO awa.queue_meta (queue, key_concurrency_limit) VALUES (p_queue, p_limit)
        ON CONFLICT (queue) DO UPDATE SET key_concurrency_limit = EXCLUDED.key_concurrency_limit;
        -- The keyed attempts already running count from now on (claims record the others): each
        -- one not recorded yet takes a new place of its key, after the key's last one, once the
        -- claims of its key in progress have ended (their places are then seen: READ COMMITTED).
        PERFORM awa._lock_concurrency_keys(p_queue, ARRAY(SELECT DISTINCT r.concurrency_key
                                                           FROM awa._running_keyed_attempts(p_queue) r ORDER BY 1));
        INSERT INTO awa.key_attempts (queue, concurrency_key, place, job_id, run_lease, priority, enqueue_shard,
                                      lane_seq, ready_slot, ready_generation, claim_slot, lease_slot)
        SELECT p_queue, x.concurrency_key,
               coalesce((SELECT max(k.place) FROM awa.key_attempts k
                          WHERE k.queue = p_queue AND k.concurrency_key = x.concurrency_key), -1)
                 + row_number() OVER (PARTITION BY x.concurrency_key ORDER BY x.job_id, x.run_lease),
               x.job_id, x.run_lease, x.priority, x.enqueue_shard, x.lane_seq, x.ready_slot, x.ready_generation,
               x.claim_slot, x.lease_slot
          FROM awa._running_keyed_attempts(p_queue) x
         WHERE NOT EXISTS (SELECT 1 FROM awa.key_attempts k
                            WHERE k.queue = p_queue AND k.concurrency_key = x.concurrency_key
                              AND k.job_id = x.job_id AND k.run_lease = x.run_lease);
    ELSE
        INSERT INTO awa.queue_meta (queue, concurrency_limit) VALUES (p_queue, p_limit)
        ON CONFLICT (queue) DO UPDATE SET concurrency_limit = EXCLUDED.concurrency_limit;
    END IF;
END
$$;
REVOKE ALL ON FUNCTION awa.set_concurrency_limit(text, bigint, boolean) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION awa.set_concurrency_limit(text, bigint, boolean) TO awa_admin;
COMMENT ON FUNCTION awa.set_concurrency_limit(text, bigint, boolean)
    IS 'Set (NULL: remove) a known queue''s cap on running attempts (p_per_key: on the running attempts of each concurrency key), exact for any number of claimers. Role: awa_admin.';
