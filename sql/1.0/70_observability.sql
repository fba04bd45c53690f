-- Observability of a sharded queue: exact counts, per-shard lag, per-shard counters and
-- the awa.jobs view over every state (ADR-025 "Fairness and observability").
-- Every join between ready rows and a claim cursor, and between ready, done, lease and
-- receipt rows, carries enqueue_shard (reference pitfall P4): a ready row is only ever
-- compared with its own lane's cursor, so no row is counted twice or on the wrong shard.

-- Exact job counts of one queue by state. available = ready rows at or after their own
-- lane's claim cursor; running = open receipts (no closure, not materialised) plus
-- running or waiting leases; the terminal states count done_entries rows.
CREATE FUNCTION awa.queue_counts_exact(p_queue text,
    OUT available bigint, OUT scheduled bigint, OUT retryable bigint, OUT running bigint,
    OUT completed bigint, OUT failed bigint, OUT cancelled bigint, OUT dlq bigint)
    LANGUAGE plpgsql STABLE
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    PERFORM awa._check_queue(p_queue, 'p_queue');
    SELECT count(*) INTO available
      FROM awa.queue_claim_heads h
      JOIN awa.ready_entries r
        ON r.queue = h.queue AND r.priority = h.priority AND r.enqueue_shard = h.enqueue_shard
       AND r.lane_seq >= h.claim_seq
     WHERE h.queue = p_queue;
    SELECT count(*) FILTER (WHERE j.state = 'scheduled'), count(*) FILTER (WHERE j.state = 'retryable')
      INTO scheduled, retryable
      FROM awa.deferred_jobs j WHERE j.queue = p_queue;
    SELECT (SELECT count(*) FROM awa.lease_claims c
             WHERE c.queue = p_queue AND c.materialized_at IS NULL
               AND NOT EXISTS (SELECT 1 FROM awa.lease_claim_closures x
                                WHERE x.claim_slot = c.claim_slot AND x.job_id = c.job_id
                                  AND x.run_lease = c.run_lease))
         + (SELECT count(*) FROM awa.leases l
             WHERE l.queue = p_queue AND l.state IN ('running', 'waiting_external'))
      INTO running;
    SELECT count(*) FILTER (WHERE d.state = 'completed'), count(*) FILTER (WHERE d.state = 'failed'),
           count(*) FILTER (WHERE d.state = 'cancelled')
      INTO completed, failed, cancelled
      FROM awa.done_entries d WHERE d.queue = p_queue;
    SELECT count(*) INTO dlq FROM awa.dlq_entries e WHERE e.queue = p_queue;
END
$$;

-- Next value a lane's enqueue sequence will hand out (1 for a fresh lane). SECURITY
-- DEFINER: reading a sequence needs rights a monitoring role does not have.
CREATE FUNCTION awa._lane_next_seq(p_seq_name text) RETURNS bigint
    LANGUAGE sql STABLE STRICT PARALLEL SAFE
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp
    RETURN coalesce(pg_sequence_last_value(to_regclass('awa.' || quote_ident(p_seq_name))), 0) + 1;

-- One row per lane: enqueue and claim cursors, their distance, the waiting rows and the
-- oldest waiting run_at, and whether the shard is outside the current width (draining).
CREATE FUNCTION awa._shard_lag()
    RETURNS TABLE (queue text, priority smallint, enqueue_shard smallint, next_seq bigint,
                   claim_seq bigint, lag bigint, waiting bigint, oldest_run_at timestamptz,
                   enqueue_shards smallint, draining boolean)
    LANGUAGE sql STABLE
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$
    SELECT e.queue, e.priority, e.enqueue_shard, n.next_seq, h.claim_seq, n.next_seq - h.claim_seq,
           w.waiting, w.oldest_run_at, coalesce(m.enqueue_shards, 1::smallint),
           e.enqueue_shard >= coalesce(m.enqueue_shards, 1::smallint)
      FROM awa.queue_enqueue_heads e
      JOIN awa.queue_claim_heads h
        ON h.queue = e.queue AND h.priority = e.priority AND h.enqueue_shard = e.enqueue_shard
      LEFT JOIN awa.queue_meta m ON m.queue = e.queue
     CROSS JOIN LATERAL (SELECT awa._lane_next_seq(e.seq_name) AS next_seq) n
     CROSS JOIN LATERAL (
        SELECT count(*) AS waiting, min(r.run_at) AS oldest_run_at
          FROM awa.ready_entries r
         WHERE r.queue = e.queue AND r.priority = e.priority AND r.enqueue_shard = e.enqueue_shard
           AND r.lane_seq >= h.claim_seq) w
$$;

-- The incident query of ADR-025 as a view. lag = next_seq - claim_seq counts every lane
-- position handed out and not yet passed by claim: waiting rows plus in-flight
-- reservations and gaps (rolled back or removed rows), so it never under-counts.
CREATE VIEW awa.shard_lag AS
    SELECT queue, priority, enqueue_shard, next_seq, claim_seq, lag, waiting, oldest_run_at,
           enqueue_shards, draining
      FROM awa._shard_lag();

-- Whether this server loaded awa_shard through shared_preload_libraries (so the shared
-- memory counters exist). SECURITY DEFINER: the setting is hidden from ordinary roles.
CREATE FUNCTION awa._stats_preloaded() RETURNS boolean
    LANGUAGE sql STABLE
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp
    RETURN EXISTS (
        SELECT 1 FROM unnest(string_to_array(current_setting('shared_preload_libraries'), ',')) AS l(name)
         WHERE regexp_replace(btrim(l.name, ' "'), '^.*/', '') IN ('awa_shard', 'awa_shard.so'));

-- Counters derived from the tables when the library is not preloaded: enqueued = lane
-- positions handed out (next_seq - 1), claimed = positions passed by claim
-- (claim_seq - 1), both including gaps; completed and failed = retained done rows.
CREATE FUNCTION awa._shard_stats_from_tables()
    RETURNS TABLE (queue text, enqueue_shard smallint, enqueued bigint, claimed bigint,
                   completed bigint, failed bigint)
    LANGUAGE sql STABLE
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$
    WITH lanes AS (
        SELECT e.queue, e.enqueue_shard, sum(awa._lane_next_seq(e.seq_name) - 1)::bigint AS enqueued,
               sum(h.claim_seq - 1)::bigint AS claimed
          FROM awa.queue_enqueue_heads e
          JOIN awa.queue_claim_heads h
            ON h.queue = e.queue AND h.priority = e.priority AND h.enqueue_shard = e.enqueue_shard
         GROUP BY e.queue, e.enqueue_shard),
    finals AS (
        SELECT d.queue, d.enqueue_shard, count(*) FILTER (WHERE d.state = 'completed') AS completed,
               count(*) FILTER (WHERE d.state = 'failed') AS failed
          FROM awa.done_entries d
         WHERE d.lane_seq > 0
         GROUP BY d.queue, d.enqueue_shard)
    SELECT l.queue, l.enqueue_shard, l.enqueued, l.claimed, coalesce(f.completed, 0), coalesce(f.failed, 0)
      FROM lanes l
      LEFT JOIN finals f ON f.queue = l.queue AND f.enqueue_shard = l.enqueue_shard
$$;

-- Per-(queue, enqueue_shard) counters: from shared memory when preloaded (since server
-- start or the last awa.reset_shard_stats(), source 'shared_memory'), otherwise derived
-- from the tables (since the lanes were created, source 'tables', since NULL).
CREATE VIEW awa.shard_stats AS
    SELECT s.queue, s.enqueue_shard, s.enqueued, s.claimed, s.completed, s.failed, s.since,
           'shared_memory'::text AS source
      FROM awa._shard_stats() s
     WHERE awa._stats_preloaded()
    UNION ALL
    SELECT t.queue, t.enqueue_shard, t.enqueued, t.claimed, t.completed, t.failed, NULL::timestamptz,
           'tables'::text
      FROM awa._shard_stats_from_tables() t
     WHERE NOT awa._stats_preloaded();

-- Every job once, in its current state, with the columns of awa.job_row:
-- available = ready rows at or after their own lane's cursor; scheduled/retryable =
-- deferred rows; running = open receipts and leases, each joined to its ready row on
-- the full lane identity (shard included); terminal = done rows hydrated from the ready
-- row of the same identity (a job cancelled while deferred never had a lane: NULL shard
-- and lane_seq); failed dead letters from the DLQ.
CREATE VIEW awa.jobs AS
    SELECT r.job_id AS id, r.kind, r.queue, r.args, 'available'::awa.job_state AS state, r.priority,
           r.attempt, r.run_lease, r.max_attempts, r.run_at, r.attempted_at, NULL::timestamptz AS finalized_at,
           r.created_at, r.metadata, r.tags, r.errors, r.unique_key, r.unique_states, r.ordering_key,
           r.enqueue_shard, r.lane_seq
      FROM awa.ready_entries r
      JOIN awa.queue_claim_heads h
        ON h.queue = r.queue AND h.priority = r.priority AND h.enqueue_shard = r.enqueue_shard
     WHERE r.lane_seq >= h.claim_seq
    UNION ALL
    SELECT j.job_id, j.kind, j.queue, j.args, j.state, j.priority, j.attempt, j.run_lease, j.max_attempts,
           j.run_at, j.attempted_at, j.finalized_at, j.created_at, j.metadata, j.tags, j.errors, j.unique_key,
           j.unique_states, j.ordering_key, NULL::smallint, NULL::bigint
      FROM awa.deferred_jobs j
    UNION ALL
    SELECT c.job_id, r.kind, c.queue, r.args, 'running'::awa.job_state, c.priority, c.attempt, c.run_lease,
           c.max_attempts, r.run_at, c.claimed_at, NULL::timestamptz, r.created_at, r.metadata, r.tags, r.errors,
           r.unique_key, r.unique_states, r.ordering_key, c.enqueue_shard, c.lane_seq
      FROM awa.lease_claims c
      JOIN awa.ready_entries r
        ON r.ready_slot = c.ready_slot AND r.ready_generation = c.ready_generation AND r.queue = c.queue
       AND r.priority = c.priority AND r.enqueue_shard = c.enqueue_shard AND r.lane_seq = c.lane_seq
     WHERE c.materialized_at IS NULL
       AND NOT EXISTS (SELECT 1 FROM awa.lease_claim_closures x
                        WHERE x.claim_slot = c.claim_slot AND x.job_id = c.job_id AND x.run_lease = c.run_lease)
    UNION ALL
    SELECT l.job_id, r.kind, l.queue, r.args, l.state, l.priority, l.attempt, l.run_lease, l.max_attempts,
           r.run_at, l.attempted_at, NULL::timestamptz, r.created_at, r.metadata, r.tags, r.errors,
           r.unique_key, r.unique_states, r.ordering_key, l.enqueue_shard, l.lane_seq
      FROM awa.leases l
      JOIN awa.ready_entries r
        ON r.ready_slot = l.ready_slot AND r.ready_generation = l.ready_generation AND r.queue = l.queue
       AND r.priority = l.priority AND r.enqueue_shard = l.enqueue_shard AND r.lane_seq = l.lane_seq
     WHERE l.state IN ('running', 'waiting_external')
    UNION ALL
    SELECT d.job_id, coalesce(d.kind, r.kind), d.queue, coalesce(d.args, r.args), d.state, d.priority,
           d.attempt, d.run_lease, coalesce(d.max_attempts, r.max_attempts), coalesce(d.run_at, r.run_at),
           d.attempted_at, d.finalized_at, coalesce(d.created_at, r.created_at), coalesce(d.metadata, r.metadata),
           coalesce(d.tags, r.tags), coalesce(d.errors, r.errors), coalesce(d.unique_key, r.unique_key),
           coalesce(d.unique_states, r.unique_states), coalesce(d.ordering_key, r.ordering_key),
           CASE WHEN d.lane_seq > 0 THEN d.enqueue_shard END, CASE WHEN d.lane_seq > 0 THEN d.lane_seq END
      FROM awa.done_entries d
      LEFT JOIN awa.ready_entries r
        ON r.ready_slot = d.ready_slot AND r.ready_generation = d.ready_generation AND r.queue = d.queue
       AND r.priority = d.priority AND r.enqueue_shard = d.enqueue_shard AND r.lane_seq = d.lane_seq
    UNION ALL
    SELECT e.job_id, e.kind, e.queue, e.args, e.state, e.priority, e.attempt, e.run_lease, e.max_attempts,
           e.run_at, e.attempted_at, e.finalized_at, e.created_at, e.metadata, e.tags, e.errors, e.unique_key,
           e.unique_states, e.ordering_key, NULL::smallint, NULL::bigint
      FROM awa.dlq_entries e;
