-- The views users read (awa_admin and pg_monitor).

-- awa.jobs shows what awa.job_row documents: metadata and tags '{}' and errors '[]' when
-- the job has none (stored as NULL), as insert_job_compat returns them.
CREATE VIEW awa.jobs AS
    SELECT r.job_id AS id, r.kind, r.queue, r.args, 'available'::awa.job_state AS state, r.priority,
           r.attempt, r.run_lease, r.max_attempts, r.run_at, r.attempted_at, NULL::timestamptz AS finalized_at,
           r.created_at, coalesce(r.metadata, '{}'::jsonb) AS metadata, coalesce(r.tags, '{}'::text[]) AS tags,
           coalesce(r.errors, '[]'::jsonb) AS errors, r.unique_key, r.unique_states, r.ordering_key,
           r.enqueue_shard, r.lane_seq, NULL::jsonb AS progress, NULL::jsonb AS result,
           r.concurrency_key
      FROM awa.ready_entries r
      JOIN awa.lane_cursors h
        ON h.queue = r.queue AND h.priority = r.priority AND h.enqueue_shard = r.enqueue_shard
     WHERE r.lane_seq >= h.claim_seq
    UNION ALL
    SELECT j.job_id, j.kind, j.queue, j.args, j.state, j.priority, j.attempt, j.run_lease, j.max_attempts,
           j.run_at, j.attempted_at, j.finalized_at, j.created_at, coalesce(j.metadata, '{}'::jsonb),
           coalesce(j.tags, '{}'::text[]), coalesce(j.errors, '[]'::jsonb), j.unique_key,
           j.unique_states, j.ordering_key, NULL::smallint, NULL::bigint, NULL::jsonb, NULL::jsonb,
           j.concurrency_key
      FROM awa.deferred_jobs j
    UNION ALL
    SELECT c.job_id, (c.ready).kind, c.queue, (c.ready).args, 'running'::awa.job_state, c.priority, c.attempt,
           c.run_lease, c.max_attempts, (c.ready).run_at, c.claimed_at, NULL::timestamptz, (c.ready).created_at,
           coalesce((c.ready).metadata, '{}'::jsonb), coalesce((c.ready).tags, '{}'::text[]),
           coalesce((c.ready).errors, '[]'::jsonb), (c.ready).unique_key, (c.ready).unique_states,
           (c.ready).ordering_key, c.enqueue_shard, c.lane_seq, (SELECT a.progress FROM awa.attempt_state a WHERE a.job_id = c.job_id AND a.run_lease = c.run_lease AND a.queue = c.queue), NULL::jsonb,
           (c.ready).concurrency_key
      FROM awa._open_receipts c
    UNION ALL
    SELECT l.job_id, r.kind, l.queue, r.args, l.state, l.priority, l.attempt, l.run_lease, l.max_attempts,
           r.run_at, l.attempted_at, NULL::timestamptz, r.created_at, coalesce(r.metadata, '{}'::jsonb),
           coalesce(r.tags, '{}'::text[]), coalesce(r.errors, '[]'::jsonb),
           r.unique_key, r.unique_states, r.ordering_key, l.enqueue_shard, l.lane_seq, (SELECT a.progress FROM awa.attempt_state a WHERE a.job_id = l.job_id AND a.run_lease = l.run_lease AND a.queue = l.queue), NULL::jsonb,
           r.concurrency_key
      FROM awa.leases l
      JOIN awa.ready_entries r
        ON r.ready_slot = l.ready_slot AND r.ready_generation = l.ready_generation AND r.queue = l.queue
       AND r.priority = l.priority AND r.enqueue_shard = l.enqueue_shard AND r.lane_seq = l.lane_seq
     WHERE l.state IN ('running', 'waiting_external')
    UNION ALL
    SELECT d.job_id, coalesce(d.kind, r.kind), d.queue, coalesce(d.args, r.args), d.state, d.priority,
           d.attempt, d.run_lease, coalesce(d.max_attempts, r.max_attempts), coalesce(d.run_at, r.run_at),
           d.attempted_at, d.finalized_at, coalesce(d.created_at, r.created_at),
           coalesce(d.metadata, r.metadata, '{}'::jsonb), coalesce(d.tags, r.tags, '{}'::text[]),
           coalesce(d.errors, r.errors, '[]'::jsonb), coalesce(d.unique_key, r.unique_key),
           coalesce(d.unique_states, r.unique_states), coalesce(d.ordering_key, r.ordering_key),
           CASE WHEN d.lane_seq > 0 THEN d.enqueue_shard END, CASE WHEN d.lane_seq > 0 THEN d.lane_seq END, NULL::jsonb, d.result,
           coalesce(d.concurrency_key, r.concurrency_key)
      FROM awa.done_entries d
      LEFT JOIN awa.ready_entries r
        ON r.ready_slot = d.ready_slot AND r.ready_generation = d.ready_generation AND r.queue = d.queue
       AND r.priority = d.priority AND r.enqueue_shard = d.enqueue_shard AND r.lane_seq = d.lane_seq
       AND r.job_id = d.job_id
     WHERE d.state <> 'completed' OR d.kind IS NOT NULL
    UNION ALL
    -- Completions without a body of their own (1.0): found by id through their ready row.
    SELECT r.job_id, r.kind, d.queue, r.args, d.state, d.priority, d.attempt, d.run_lease, r.max_attempts,
           r.run_at, d.attempted_at, d.finalized_at, r.created_at,
           coalesce(d.metadata, r.metadata, '{}'::jsonb), coalesce(d.tags, r.tags, '{}'::text[]),
           coalesce(d.errors, r.errors, '[]'::jsonb), coalesce(d.unique_key, r.unique_key),
           coalesce(d.unique_states, r.unique_states), coalesce(d.ordering_key, r.ordering_key),
           CASE WHEN d.lane_seq > 0 THEN d.enqueue_shard END, CASE WHEN d.lane_seq > 0 THEN d.lane_seq END, NULL::jsonb, NULL::jsonb,
           coalesce(d.concurrency_key, r.concurrency_key)
      FROM awa.ready_entries r
      JOIN awa.done_entries d
        ON d.ready_slot = r.ready_slot AND d.ready_generation = r.ready_generation AND d.queue = r.queue
       AND d.priority = r.priority AND d.enqueue_shard = r.enqueue_shard AND d.lane_seq = r.lane_seq
       AND d.job_id = r.job_id
     WHERE d.state = 'completed' AND d.kind IS NULL
       AND d.ready_slot >= 0  -- in a ring slot: a retained completion carries its body
    UNION ALL
    -- Completions in a batch: found by id through their ready row, then their lane's block
    -- and their offset in the batch (the attempt is the ready row's, plus one).
    SELECT r.job_id, r.kind, b.queue, r.args, 'completed'::awa.job_state, b.priority,
           (r.attempt + 1)::smallint, r.run_lease + 1, r.max_attempts, r.run_at, b.attempted_at[x.k],
           b.finalized_at, r.created_at, coalesce(r.metadata, '{}'::jsonb), coalesce(r.tags, '{}'::text[]),
           coalesce(r.errors, '[]'::jsonb), r.unique_key, r.unique_states, r.ordering_key, b.enqueue_shard,
           r.lane_seq, NULL::jsonb, b.results[x.k],
           r.concurrency_key
      FROM awa.ready_entries r
      JOIN awa.completion_batches b
        ON b.queue = r.queue AND b.priority = r.priority AND b.enqueue_shard = r.enqueue_shard
       AND b.lane_block = r.lane_seq / 64 AND b.ready_slot = r.ready_slot
       AND b.ready_generation = r.ready_generation
     CROSS JOIN LATERAL (SELECT array_position(b.lane_offsets, (r.lane_seq % 64)::smallint) AS k) x
     WHERE x.k IS NOT NULL
    UNION ALL
    SELECT e.job_id, e.kind, e.queue, e.args, e.state, e.priority, e.attempt, e.run_lease, e.max_attempts,
           e.run_at, e.attempted_at, e.finalized_at, e.created_at, coalesce(e.metadata, '{}'::jsonb),
           coalesce(e.tags, '{}'::text[]), coalesce(e.errors, '[]'::jsonb), e.unique_key,
           e.unique_states, e.ordering_key, NULL::smallint, NULL::bigint, NULL::jsonb, NULL::jsonb,
           e.concurrency_key
      FROM awa.dlq_entries e;
COMMENT ON VIEW awa.jobs IS 'Every job once, in its current state, with the columns of awa.job_row. Reads every table: filter it.';
GRANT SELECT ON awa.jobs TO awa_admin, pg_monitor;

-- The incident query of ADR-025 as a view. lag = next_seq - claim_seq counts every lane
-- position handed out and not yet passed by claim: waiting rows plus in-flight
-- reservations and gaps (rolled back or removed rows), so it never under-counts.
CREATE VIEW awa.shard_lag AS
    SELECT queue, priority, enqueue_shard, next_seq, claim_seq, lag, waiting, oldest_run_at,
           enqueue_shards, draining
      FROM awa._shard_lag();
COMMENT ON VIEW awa.shard_lag IS 'One row per lane: enqueue and claim cursors, lag, waiting rows, oldest waiting run_at, draining.';
GRANT SELECT ON awa.shard_lag TO awa_admin, pg_monitor;

-- Per-(queue, enqueue_shard) counters: from shared memory when preloaded (since server
-- start or the last awa.reset_shard_stats(), source 'shared_memory'), otherwise derived
-- from the tables (since the lanes were created, source 'tables', since NULL); on a Citus
-- coordinator, every worker's (awa._shard_stats_rows).
CREATE VIEW awa.shard_stats AS
    SELECT queue, enqueue_shard, enqueued, claimed, completed, failed, since, source
      FROM awa._shard_stats_rows();
COMMENT ON VIEW awa.shard_stats IS 'Per-(queue, shard) counters: shared memory when preloaded, else derived from the tables.';
GRANT SELECT ON awa.shard_stats TO awa_admin, pg_monitor;

-- The queues at a glance (admin and pg_monitor). depth is the cheap signal; the counts scan.
CREATE VIEW awa.queues AS
    SELECT queue, enqueue_shards, paused, dlq_enabled, depth, available, scheduled, retryable, running,
           completed, failed, cancelled, dlq, oldest_waiting_age, rate_per_second, rate_burst, concurrency_limit, completed_retention, failed_retention,
           key_concurrency_limit, key_rate_per_second, key_rate_burst
      FROM awa._queues();
COMMENT ON VIEW awa.queues IS 'One row per known queue: settings, cheap depth, exact counts by state, age of the oldest waiting job, retentions (NULL: the default).';
GRANT SELECT ON awa.queues TO awa_admin, pg_monitor;

-- Background maintenance per database (maintenance.md §1): served_by 'worker' while a
-- worker is in it, 'claims' otherwise (between turns; its claims then promote due jobs).
CREATE VIEW awa.maintenance_status AS
    SELECT database, served_by, worker_pid, last_pass, passes, last_error, last_error_at
      FROM awa._maintenance_status();
COMMENT ON VIEW awa.maintenance_status IS 'Background maintenance per database: who serves it (worker or claims), the worker in it now, last pass, passes, last error.';
GRANT SELECT ON awa.maintenance_status TO awa_admin, pg_monitor;
