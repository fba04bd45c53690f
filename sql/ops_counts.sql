-- ops_counts: exact counts at S = 4 with jobs in every state, the awa.jobs view with no
-- row multiplied across shards, and awa.shard_lag / awa.shard_stats against a direct scan.
\set VERBOSITY terse
CREATE TEMP TABLE ops_counts_saved AS SELECT receipts FROM awa.plane_settings;
UPDATE awa.plane_settings SET receipts = true;

-- 1. 16 keyless jobs at S = 4, one transaction each (the rotor spreads them).
SELECT awa.set_enqueue_shards('ops_counts_keyless', 4) AS previous_width;
DO $$
BEGIN
    FOR i IN 1..16 LOOP
        PERFORM awa.insert_job_compat('ops', 'ops_counts_keyless', jsonb_build_object('i', i));
        COMMIT;
    END LOOP;
END
$$;
SELECT count(*) AS ready_rows, count(DISTINCT enqueue_shard) > 1 AS spread
  FROM awa.ready_entries WHERE queue = 'ops_counts_keyless';
-- Claim one job so the shards' cursors differ: a ready row compared with another
-- shard's cursor would be counted wrongly (or several times).
SELECT count(*) AS claimed FROM awa.claim_ready_runtime('ops_counts_keyless', 1);
SELECT available, running FROM awa.queue_counts_exact('ops_counts_keyless');
SELECT state, count(*) AS jobs, count(DISTINCT id) AS distinct_ids
  FROM awa.jobs WHERE queue = 'ops_counts_keyless' GROUP BY state ORDER BY state;

-- 2. Every state at S = 4: 16 keyed jobs (4 per shard, max_attempts 1) and 2 scheduled.
SELECT awa.set_enqueue_shards('ops_counts', 4) AS previous_width;
SELECT cardinality(awa.insert_jobs('ops_counts', array_fill('ops'::text, ARRAY[16]),
           p_ordering_keys => (SELECT array_agg(convert_to('shard-fixture-' || (i % 4), 'UTF8') ORDER BY i)
                                 FROM generate_series(0, 15) i),
           p_max_attempts => array_fill(1::smallint, ARRAY[16]))) AS enqueued;
SELECT enqueue_shard, count(*) AS jobs FROM awa.ready_entries WHERE queue = 'ops_counts'
 GROUP BY enqueue_shard ORDER BY enqueue_shard;
SELECT count(*) AS scheduled
  FROM generate_series(1, 2) i, LATERAL awa.insert_job_compat('ops', 'ops_counts', jsonb_build_object('i', i), p_run_at => now() + interval '1 hour') j;

-- Seven single-job claims; the fifth in leases mode.
CREATE TEMP TABLE ops_claims (n int, job_id bigint, run_lease bigint, enqueue_shard smallint);
INSERT INTO ops_claims SELECT 1, job_id, run_lease, enqueue_shard FROM awa.claim_ready_runtime('ops_counts', 1);
INSERT INTO ops_claims SELECT 2, job_id, run_lease, enqueue_shard FROM awa.claim_ready_runtime('ops_counts', 1);
INSERT INTO ops_claims SELECT 3, job_id, run_lease, enqueue_shard FROM awa.claim_ready_runtime('ops_counts', 1);
INSERT INTO ops_claims SELECT 4, job_id, run_lease, enqueue_shard FROM awa.claim_ready_runtime('ops_counts', 1);
UPDATE awa.plane_settings SET receipts = false;
INSERT INTO ops_claims SELECT 5, job_id, run_lease, enqueue_shard FROM awa.claim_ready_runtime('ops_counts', 1);
UPDATE awa.plane_settings SET receipts = true;
INSERT INTO ops_claims SELECT 6, job_id, run_lease, enqueue_shard FROM awa.claim_ready_runtime('ops_counts', 1);
INSERT INTO ops_claims SELECT 7, job_id, run_lease, enqueue_shard FROM awa.claim_ready_runtime('ops_counts', 1);
SELECT count(*) AS claims, count(DISTINCT job_id) AS jobs FROM ops_claims;
SELECT count(*) AS leases FROM awa.leases l JOIN ops_claims c USING (job_id) WHERE c.n = 5;

SELECT count(*) AS completed FROM ops_claims c, LATERAL awa.complete_jobs(ARRAY[c.job_id], ARRAY[c.run_lease]) WHERE c.n = 1;
SELECT awa.fail_job(job_id, run_lease, 'boom') AS failed FROM ops_claims WHERE n = 2;
SELECT awa.fail_job_to_dlq(job_id, run_lease, 'poison') AS dead_lettered FROM ops_claims WHERE n = 3;
SELECT awa.retry_job_after(job_id, run_lease, interval '1 hour') AS retrying FROM ops_claims WHERE n = 4;
-- Cancel a running receipt, one unclaimed ready row and one scheduled job.
SELECT awa.cancel_job(job_id) AS cancelled_running FROM ops_claims WHERE n = 7;
SELECT awa.cancel_job(min(id)) AS cancelled_ready
  FROM awa.jobs WHERE queue = 'ops_counts' AND state = 'available';
SELECT awa.cancel_job(min(id)) AS cancelled_scheduled
  FROM awa.jobs WHERE queue = 'ops_counts' AND state = 'scheduled';
-- The running receipt's worker lost: its completion finds nothing to close.
SELECT count(*) AS late_completion FROM ops_claims c, LATERAL awa.complete_jobs(ARRAY[c.job_id], ARRAY[c.run_lease]) WHERE c.n = 7;

-- Expected: available 8, scheduled 1, retryable 1, running 2, completed 1, failed 1, cancelled 3, dlq 1.
SELECT * FROM awa.queue_counts_exact('ops_counts');
SELECT state, count(*) AS jobs FROM awa.jobs WHERE queue = 'ops_counts' GROUP BY state ORDER BY state;
SELECT count(*) AS rows, count(DISTINCT id) AS ids FROM awa.jobs WHERE queue = 'ops_counts';
-- The cancelled running job's terminal row is on the shard its ready row was claimed from.
SELECT d.enqueue_shard = c.enqueue_shard AS same_shard, d.state
  FROM awa._terminal_attempts d JOIN ops_claims c USING (job_id) WHERE c.n = 7;
-- awa.jobs hydrates terminal rows from their ready row (kind is not on narrow done rows).
SELECT state, bool_and(kind = 'ops') AS kind_hydrated, bool_and(args IS NOT NULL) AS args_hydrated
  FROM awa.jobs WHERE queue = 'ops_counts' GROUP BY state ORDER BY state;

-- 3. awa.shard_lag against a direct scan of each lane.
SELECT count(*) AS lanes,
       bool_and(l.waiting = (SELECT count(*) FROM awa.ready_entries r
                              WHERE r.queue = l.queue AND r.priority = l.priority
                                AND r.enqueue_shard = l.enqueue_shard AND r.lane_seq >= h.claim_seq)) AS waiting_agrees,
       bool_and(l.claim_seq = h.claim_seq) AS claim_agrees,
       bool_and(l.next_seq = 1 + greatest(
           (SELECT max(r.lane_seq) FROM awa.ready_entries r WHERE r.queue = l.queue AND r.priority = l.priority
               AND r.enqueue_shard = l.enqueue_shard),
           (SELECT max(d.lane_seq) FROM awa._terminal_attempts d WHERE d.queue = l.queue AND d.priority = l.priority
               AND d.enqueue_shard = l.enqueue_shard))) AS next_agrees,
       bool_and(l.lag = l.next_seq - l.claim_seq AND l.lag >= l.waiting) AS lag_consistent,
       bool_and(l.oldest_run_at IS NOT DISTINCT FROM (SELECT min(r.run_at) FROM awa.ready_entries r
                              WHERE r.queue = l.queue AND r.priority = l.priority
                                AND r.enqueue_shard = l.enqueue_shard AND r.lane_seq >= h.claim_seq)) AS oldest_agrees,
       bool_and(NOT l.draining) AS none_draining, sum(l.waiting) AS waiting
  FROM awa.shard_lag l
  JOIN awa.lane_cursors h USING (queue, priority, enqueue_shard)
 WHERE l.queue = 'ops_counts';

-- 4. awa.shard_stats against a direct scan per shard: enqueued = lane positions written
-- (ready rows and the terminal rows of removed ready rows), claimed = receipts + leases,
-- completed = done completed, failed = done failed, plus the attempts closed into the DLQ
-- when the counters are in shared memory (preloaded). Without preload they are derived
-- from the tables, where failed counts only the retained failed rows (ops_counts_1.out).
WITH direct AS (
    SELECT s.shard,
           (SELECT count(*) FROM (SELECT r.lane_seq FROM awa.ready_entries r WHERE r.queue = 'ops_counts' AND r.enqueue_shard = s.shard
                                  UNION SELECT d.lane_seq FROM awa._terminal_attempts d WHERE d.queue = 'ops_counts' AND d.enqueue_shard = s.shard AND d.lane_seq > 0) p) AS enqueued,
           (SELECT count(*) FROM awa.lease_claims c WHERE c.queue = 'ops_counts' AND c.enqueue_shard = s.shard)
           + (SELECT count(*) FROM awa.leases l WHERE l.queue = 'ops_counts' AND l.enqueue_shard = s.shard) AS claimed,
           (SELECT count(*) FROM awa._terminal_attempts d WHERE d.queue = 'ops_counts' AND d.enqueue_shard = s.shard AND d.state = 'completed') AS completed,
           (SELECT count(*) FROM awa._terminal_attempts d WHERE d.queue = 'ops_counts' AND d.enqueue_shard = s.shard AND d.state = 'failed') AS failed_done,
           (SELECT count(*) FROM awa.lease_claims c JOIN awa.lease_claim_closures x USING (claim_slot, job_id, run_lease)
             WHERE c.queue = 'ops_counts' AND c.enqueue_shard = s.shard AND x.outcome = 'dlq') AS failed_dlq
      FROM generate_series(0, 3) AS s(shard))
SELECT count(*) AS shards, bool_and(st.source = 'shared_memory') AS shared_memory,
       bool_and(st.enqueued = d.enqueued AND st.claimed = d.claimed AND st.completed = d.completed
                AND st.failed = d.failed_done + CASE st.source WHEN 'shared_memory' THEN d.failed_dlq ELSE 0 END) AS agrees,
       sum(st.enqueued) AS enqueued, sum(st.claimed) AS claimed, sum(st.completed) AS completed, sum(st.failed) AS failed
  FROM awa.shard_stats st JOIN direct d ON d.shard = st.enqueue_shard
 WHERE st.queue = 'ops_counts';

-- 5. Bad input.
SELECT * FROM awa.queue_counts_exact(NULL);
SELECT * FROM awa.queue_counts_exact('');

UPDATE awa.plane_settings SET receipts = (SELECT receipts FROM ops_counts_saved);
