-- Observability: exact counts, per-lane lag, per-shard counters (C++: src/stats.cpp).

-- Raw counters since server start (or the last reset); empty when not preloaded.
CREATE FUNCTION awa._shard_stats(
    OUT queue text, OUT enqueue_shard smallint, OUT enqueued bigint, OUT claimed bigint,
    OUT completed bigint, OUT failed bigint, OUT since timestamptz)
    RETURNS SETOF record
    AS 'MODULE_PATHNAME', 'awa_shard_stats'
    LANGUAGE C VOLATILE STRICT PARALLEL SAFE
    SET search_path = pg_catalog, pg_temp;
REVOKE ALL ON FUNCTION awa._shard_stats() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION awa._shard_stats() TO awa_admin, pg_monitor;
COMMENT ON FUNCTION awa._shard_stats() IS 'Internal: the shared-memory per-shard counters; empty when not preloaded.';

-- Forget every counter; false when the library is not preloaded.
CREATE FUNCTION awa.reset_shard_stats() RETURNS boolean
    AS 'MODULE_PATHNAME', 'awa_reset_shard_stats'
    LANGUAGE C VOLATILE PARALLEL UNSAFE
    SET search_path = pg_catalog, pg_temp;
REVOKE ALL ON FUNCTION awa.reset_shard_stats() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION awa.reset_shard_stats() TO awa_admin;
COMMENT ON FUNCTION awa.reset_shard_stats() IS 'Forget the shared-memory per-shard counters of this database; false when not preloaded. Role: awa_admin.';

-- Count one terminal failure of a (queue, shard).
CREATE FUNCTION awa._count_failed(p_queue text, p_enqueue_shard smallint) RETURNS void
    AS 'MODULE_PATHNAME', 'awa_count_failed'
    LANGUAGE C VOLATILE PARALLEL UNSAFE
    SET search_path = pg_catalog, pg_temp;
REVOKE ALL ON FUNCTION awa._count_failed(text, smallint) FROM PUBLIC;
COMMENT ON FUNCTION awa._count_failed(text, smallint) IS 'Internal: count one terminal failure of a (queue, shard) in shared memory.';

-- Whether this server loaded awa_shard through shared_preload_libraries (so the shared
-- memory counters exist). SECURITY DEFINER: the setting is hidden from ordinary roles.
CREATE FUNCTION awa._stats_preloaded() RETURNS boolean
    LANGUAGE sql STABLE
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp
    RETURN EXISTS (
        SELECT 1 FROM unnest(string_to_array(current_setting('shared_preload_libraries'), ',')) AS l(name)
         WHERE regexp_replace(btrim(l.name, ' "'), '^.*/', '') IN ('awa_shard', 'awa_shard.so'));
REVOKE ALL ON FUNCTION awa._stats_preloaded() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION awa._stats_preloaded() TO awa_admin, pg_monitor;
COMMENT ON FUNCTION awa._stats_preloaded() IS 'Internal: whether the library is in shared_preload_libraries.';

-- Counters derived from the tables of one queue: enqueued = lane positions handed out
-- (next_seq - 1), claimed = positions passed by claim (claim_seq - 1), both including gaps;
-- completed and failed = retained done rows and completion batches. queue = $n on every
-- table, so on a Citus worker the queue's own shards answer it.
CREATE FUNCTION awa._shard_stats_of(p_queue text)
    RETURNS TABLE (queue text, enqueue_shard smallint, enqueued bigint, claimed bigint,
                   completed bigint, failed bigint)
    LANGUAGE plpgsql STABLE
    SET search_path = pg_catalog, pg_temp SET plan_cache_mode = force_custom_plan
AS $$
BEGIN
    RETURN QUERY
    SELECT p_queue, l.enqueue_shard, l.enqueued, l.claimed, coalesce(f.completed, 0)::bigint,
           coalesce(f.failed, 0)::bigint
      FROM (SELECT e.enqueue_shard, sum(awa._lane_next_seq(e.seq_name) - 1)::bigint AS enqueued,
                   sum(h.claim_seq - 1)::bigint AS claimed
              FROM awa.queue_enqueue_heads e
              JOIN awa.lane_cursors h
                ON h.queue = e.queue AND h.priority = e.priority AND h.enqueue_shard = e.enqueue_shard
               AND h.queue = p_queue
             WHERE e.queue = p_queue
             GROUP BY e.enqueue_shard) l
      LEFT JOIN (
            SELECT t.enqueue_shard, sum(t.completed) AS completed, sum(t.failed) AS failed
              FROM (SELECT d.enqueue_shard, count(*) FILTER (WHERE d.state = 'completed') AS completed,
                           count(*) FILTER (WHERE d.state = 'failed') AS failed
                      FROM awa.done_entries d
                     WHERE d.queue = p_queue AND d.lane_seq > 0
                     GROUP BY d.enqueue_shard
                    UNION ALL
                    SELECT b.enqueue_shard, sum(cardinality(b.lane_offsets)), 0
                      FROM awa.completion_batches b
                     WHERE b.queue = p_queue
                     GROUP BY b.enqueue_shard) t
             GROUP BY t.enqueue_shard) f
        ON f.enqueue_shard = l.enqueue_shard;
END
$$;
REVOKE ALL ON FUNCTION awa._shard_stats_of(text) FROM PUBLIC;
COMMENT ON FUNCTION awa._shard_stats_of(text) IS 'Internal: per-shard counters of one queue derived from its tables (no preload).';

-- Counters derived from the tables when the library is not preloaded, every queue with a
-- lane, each read by awa._shard_stats_of.
CREATE FUNCTION awa._shard_stats_from_tables()
    RETURNS TABLE (queue text, enqueue_shard smallint, enqueued bigint, claimed bigint,
                   completed bigint, failed bigint)
    LANGUAGE sql STABLE
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$
    SELECT s.* FROM (SELECT DISTINCT e.queue FROM awa.queue_enqueue_heads e) q
     CROSS JOIN LATERAL awa._shard_stats_of(q.queue) s
$$;
REVOKE ALL ON FUNCTION awa._shard_stats_from_tables() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION awa._shard_stats_from_tables() TO awa_admin, pg_monitor;
COMMENT ON FUNCTION awa._shard_stats_from_tables() IS 'Internal: per-shard counters derived from the tables (no preload).';

-- The rows of the awa.shard_stats view: this server's shared-memory counters when preloaded,
-- else derived from the tables. On a Citus coordinator, every worker's rows, gathered as
-- awa.queues gathers its rows (the calls of a queue run, delegated, on its worker, and count
-- there); on a worker, its own. A worker that does not answer fails the view (58000).
CREATE FUNCTION awa._shard_stats_rows()
    RETURNS TABLE (queue text, enqueue_shard smallint, enqueued bigint, claimed bigint,
                   completed bigint, failed bigint, since timestamptz, source text)
    LANGUAGE plpgsql STABLE
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF awa._citus_group() IS NOT NULL THEN
        RETURN QUERY
        SELECT t.* FROM jsonb_to_recordset(awa._citus_gathered_rows('awa.shard_stats', '_citus_local_shard_stats_rows')) AS t(
            queue text, enqueue_shard smallint, enqueued bigint, claimed bigint,
            completed bigint, failed bigint, since timestamptz, source text);
    ELSIF awa._stats_preloaded() THEN
        RETURN QUERY
        SELECT s.queue, s.enqueue_shard, s.enqueued, s.claimed, s.completed, s.failed, s.since, 'shared_memory'::text
          FROM awa._shard_stats() s;
    ELSE
        RETURN QUERY
        SELECT t.queue, t.enqueue_shard, t.enqueued, t.claimed, t.completed, t.failed, NULL::timestamptz, 'tables'::text
          FROM awa._shard_stats_from_tables() t;
    END IF;
END
$$;
REVOKE ALL ON FUNCTION awa._shard_stats_rows() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION awa._shard_stats_rows() TO awa_admin, pg_monitor;
COMMENT ON FUNCTION awa._shard_stats_rows() IS 'Internal: the rows of the awa.shard_stats view (security definer; gathered from the workers on a Citus coordinator).';

-- Exact counts of one queue by state (available = ready rows at or after their lane's cursor).
CREATE FUNCTION awa.queue_counts_exact(p_queue text,
    OUT available bigint, OUT scheduled bigint, OUT retryable bigint, OUT running bigint,
    OUT completed bigint, OUT failed bigint, OUT cancelled bigint, OUT dlq bigint)
    LANGUAGE plpgsql STABLE
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp SET jit = off
AS $$
BEGIN
    PERFORM awa._check_queue(p_queue, 'p_queue');
    -- Each lane's cursor read once (MATERIALIZED): inlined, the planner read it again for
    -- every waiting row (four buffers a row, more while the lane's claim marks are many).
    WITH cursors AS MATERIALIZED (
        SELECT h.priority, h.enqueue_shard, h.claim_seq FROM awa.lane_cursors h WHERE h.queue = p_queue)
    SELECT count(*) INTO available
      FROM cursors h
      JOIN awa.ready_entries r
        ON r.queue = p_queue AND r.priority = h.priority AND r.enqueue_shard = h.enqueue_shard
       AND r.lane_seq >= h.claim_seq;
    SELECT count(*) FILTER (WHERE j.state = 'scheduled'), count(*) FILTER (WHERE j.state = 'retryable')
      INTO scheduled, retryable
      FROM awa.deferred_jobs j WHERE j.queue = p_queue;
    SELECT (SELECT count(*) FROM awa._open_receipts c WHERE c.queue = p_queue)
         + (SELECT count(*) FROM awa.leases l
             WHERE l.queue = p_queue AND l.state IN ('running', 'waiting_external'))
      INTO running;
    SELECT count(*) FILTER (WHERE d.state = 'completed'), count(*) FILTER (WHERE d.state = 'failed'),
           count(*) FILTER (WHERE d.state = 'cancelled')
      INTO completed, failed, cancelled
      FROM awa.done_entries d WHERE d.queue = p_queue;
    completed := completed + (SELECT coalesce(sum(cardinality(b.lane_offsets)), 0)
                                FROM awa.completion_batches b WHERE b.queue = p_queue);
    SELECT count(*) INTO dlq FROM awa.dlq_entries e WHERE e.queue = p_queue;
END
$$;
REVOKE ALL ON FUNCTION awa.queue_counts_exact(text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION awa.queue_counts_exact(text) TO awa_admin, pg_monitor;
COMMENT ON FUNCTION awa.queue_counts_exact(text) IS 'Exact job counts of one queue by state (scans the queue''s rows). Role: awa_admin, pg_monitor.';

-- One row per lane: enqueue and claim cursors, their distance, the waiting rows and the
-- oldest waiting run_at, and whether the shard is outside the current width (draining).
-- One server (and a Citus install before awa.citus_setup()): every lane, in one statement.
-- On a Citus cluster, once distributed: the lanes of every worker's queues, each worker's
-- rows read queue by queue on its own shards (awa._citus_local_shard_lag_rows) and gathered
-- on the coordinator as awa.queues gathers its rows; on a worker, its own queues' lanes
-- (docs/scale-out.md). A worker that does not answer fails the call (58000): a view that
-- silently left out a worker's lanes would under-report the lag.
CREATE FUNCTION awa._shard_lag()
    RETURNS TABLE (queue text, priority smallint, enqueue_shard smallint, next_seq bigint,
                   claim_seq bigint, lag bigint, waiting bigint, oldest_run_at timestamptz,
                   enqueue_shards smallint, draining boolean)
    LANGUAGE plpgsql STABLE
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_group integer := awa._citus_group();
BEGIN
    IF v_group IS NULL THEN
        RETURN QUERY
        SELECT e.queue, e.priority, e.enqueue_shard, n.next_seq, h.claim_seq, n.next_seq - h.claim_seq,
               w.waiting, w.oldest_run_at, coalesce(m.enqueue_shards, 1::smallint),
               e.enqueue_shard >= coalesce(m.enqueue_shards, 1::smallint)
          FROM awa.queue_enqueue_heads e
          JOIN awa.lane_cursors h
            ON h.queue = e.queue AND h.priority = e.priority AND h.enqueue_shard = e.enqueue_shard
          LEFT JOIN awa.queue_meta m ON m.queue = e.queue
         CROSS JOIN LATERAL (SELECT awa._lane_next_seq(e.seq_name) AS next_seq) n
         CROSS JOIN LATERAL (
            SELECT count(*) AS waiting, min(r.run_at) AS oldest_run_at
              FROM awa.ready_entries r
             WHERE r.queue = e.queue AND r.priority = e.priority AND r.enqueue_shard = e.enqueue_shard
               AND r.lane_seq >= h.claim_seq) w;
        RETURN;
    END IF;
    RETURN QUERY
    SELECT t.* FROM jsonb_to_recordset(awa._citus_gathered_rows('awa.shard_lag', '_citus_local_shard_lag_rows')) AS t(
        queue text, priority smallint, enqueue_shard smallint, next_seq bigint,
        claim_seq bigint, lag bigint, waiting bigint, oldest_run_at timestamptz,
        enqueue_shards smallint, draining boolean)
     ORDER BY t.queue, t.priority, t.enqueue_shard;
END
$$;
REVOKE ALL ON FUNCTION awa._shard_lag() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION awa._shard_lag() TO awa_admin, pg_monitor;
COMMENT ON FUNCTION awa._shard_lag() IS 'Internal: the rows of the awa.shard_lag view (security definer).';
