-- ops_counts: exact counts at S = 4 with jobs in every state, the awa.jobs view with no
-- row multiplied across shards, and awa.shard_lag / awa.shard_stats against a direct scan.
-- It calls each queue's functions alone in their statements so that it runs through a Citus
-- coordinator too.
\set VERBOSITY terse
SELECT receipts AS saved_receipts FROM awa.plane_settings \gset
UPDATE awa.plane_settings SET receipts = true;

-- 1. 16 keyless jobs at S = 4, one transaction each (the rotor spreads them).
SELECT awa.set_enqueue_shards('ops_counts_keyless', 4) AS previous_width;
SELECT format('SELECT FROM awa.insert_job_compat(%L, %L, %L)', 'ops', 'ops_counts_keyless', jsonb_build_object('i', i))
  FROM generate_series(1, 16) i \gexec
SELECT count(*) AS ready_rows, count(DISTINCT enqueue_shard) > 1 AS spread
  FROM awa.ready_entries WHERE queue = 'ops_counts_keyless';
-- Claim one job so the shards' cursors differ: a ready row compared with another
-- shard's cursor would be counted wrongly (or several times).
SELECT count(*) AS claimed FROM awa.claim_ready_runtime('ops_counts_keyless', 1);
SELECT available, running FROM awa.queue_counts_exact('ops_counts_keyless');
SELECT state, count(*) AS jobs, count(DISTINCT id) AS distinct_ids
  FROM awa.jobs WHERE queue = 'ops_counts_keyless' GROUP BY state ORDER BY state;

-- 2. Every state at S = 4: 16 keyed jobs (4 per shard, max_attempts 1) and 2 scheduled.
-- The shared-memory counters of a queue outlive its drop: those of an earlier run of the suite
-- in the same database (a Citus cluster's) are kept here and taken off in 4.
CREATE TEMP TABLE ops_stats_before AS SELECT * FROM awa.shard_stats WHERE queue = 'ops_counts';
SELECT awa.set_enqueue_shards('ops_counts', 4) AS previous_width;
SELECT array_agg(convert_to('shard-fixture-' || (i % 4), 'UTF8') ORDER BY i) AS fixture_keys
  FROM generate_series(0, 15) i \gset
SELECT coalesce(cardinality(ids), 0) AS enqueued
  FROM awa.insert_jobs('ops_counts', array_fill('ops'::text, ARRAY[16]),
                       p_ordering_keys => :'fixture_keys'::bytea[],
                       p_max_attempts => array_fill(1::smallint, ARRAY[16])) AS ids;
SELECT enqueue_shard, count(*) AS jobs FROM awa.ready_entries WHERE queue = 'ops_counts'
 GROUP BY enqueue_shard ORDER BY enqueue_shard;
SELECT format('SELECT FROM awa.insert_job_compat(%L, %L, %L, p_run_at => now() + interval %L)',
              'ops', 'ops_counts', jsonb_build_object('i', i), '1 hour')
  FROM generate_series(1, 2) i \gexec
SELECT count(*) AS scheduled FROM awa.jobs WHERE queue = 'ops_counts' AND state = 'scheduled';

-- Seven single-job claims; the fifth in leases mode.
CREATE TEMP TABLE ops_claims (n int, job_id bigint, run_lease bigint, enqueue_shard smallint);
SELECT job_id, run_lease, enqueue_shard FROM awa.claim_ready_runtime('ops_counts', 1) \gset c1_
INSERT INTO ops_claims VALUES (1, :c1_job_id, :c1_run_lease, :c1_enqueue_shard);
SELECT job_id, run_lease, enqueue_shard FROM awa.claim_ready_runtime('ops_counts', 1) \gset c2_
INSERT INTO ops_claims VALUES (2, :c2_job_id, :c2_run_lease, :c2_enqueue_shard);
SELECT job_id, run_lease, enqueue_shard FROM awa.claim_ready_runtime('ops_counts', 1) \gset c3_
INSERT INTO ops_claims VALUES (3, :c3_job_id, :c3_run_lease, :c3_enqueue_shard);
SELECT job_id, run_lease, enqueue_shard FROM awa.claim_ready_runtime('ops_counts', 1) \gset c4_
INSERT INTO ops_claims VALUES (4, :c4_job_id, :c4_run_lease, :c4_enqueue_shard);
UPDATE awa.plane_settings SET receipts = false;
SELECT job_id, run_lease, enqueue_shard FROM awa.claim_ready_runtime('ops_counts', 1) \gset c5_
INSERT INTO ops_claims VALUES (5, :c5_job_id, :c5_run_lease, :c5_enqueue_shard);
UPDATE awa.plane_settings SET receipts = true;
SELECT job_id, run_lease, enqueue_shard FROM awa.claim_ready_runtime('ops_counts', 1) \gset c6_
INSERT INTO ops_claims VALUES (6, :c6_job_id, :c6_run_lease, :c6_enqueue_shard);
SELECT job_id, run_lease, enqueue_shard FROM awa.claim_ready_runtime('ops_counts', 1) \gset c7_
INSERT INTO ops_claims VALUES (7, :c7_job_id, :c7_run_lease, :c7_enqueue_shard);
SELECT count(*) AS claims, count(DISTINCT job_id) AS jobs FROM ops_claims;
SELECT count(*) AS leases FROM awa.leases l WHERE l.queue = 'ops_counts' AND l.job_id = :c5_job_id;

SELECT count(*) AS completed FROM awa.complete_jobs(ARRAY[:c1_job_id]::bigint[], ARRAY[:c1_run_lease]::bigint[], p_queue => 'ops_counts');
SELECT awa.fail_job(:c2_job_id, :c2_run_lease, 'boom', p_queue => 'ops_counts') AS failed;
SELECT awa.fail_job_to_dlq(:c3_job_id, :c3_run_lease, 'poison', p_queue => 'ops_counts') AS dead_lettered;
SELECT awa.retry_job_after(:c4_job_id, :c4_run_lease, interval '1 hour', p_queue => 'ops_counts') AS retrying;
-- Cancel a running receipt, one unclaimed ready row and one scheduled job.
SELECT awa.cancel_job(:c7_job_id, p_queue => 'ops_counts') AS cancelled_running;
SELECT min(id) AS ready_id FROM awa.jobs WHERE queue = 'ops_counts' AND state = 'available' \gset
SELECT awa.cancel_job(:ready_id, p_queue => 'ops_counts') AS cancelled_ready;
SELECT min(id) AS scheduled_id FROM awa.jobs WHERE queue = 'ops_counts' AND state = 'scheduled' \gset
SELECT awa.cancel_job(:scheduled_id, p_queue => 'ops_counts') AS cancelled_scheduled;
-- The running receipt's worker lost: its completion finds nothing to close.
SELECT count(*) AS late_completion FROM awa.complete_jobs(ARRAY[:c7_job_id]::bigint[], ARRAY[:c7_run_lease]::bigint[], p_queue => 'ops_counts');

-- Expected: available 8, scheduled 1, retryable 1, running 2, completed 1, failed 1, cancelled 3, dlq 1.
SELECT * FROM awa.queue_counts_exact('ops_counts');
SELECT state, count(*) AS jobs FROM awa.jobs WHERE queue = 'ops_counts' GROUP BY state ORDER BY state;
SELECT count(*) AS rows, count(DISTINCT id) AS ids FROM awa.jobs WHERE queue = 'ops_counts';
-- The cancelled running job's terminal row is on the shard its ready row was claimed from.
SELECT d.enqueue_shard = :c7_enqueue_shard AS same_shard, d.state
  FROM awa._terminal_attempts d WHERE d.queue = 'ops_counts' AND d.job_id = :c7_job_id;
-- awa.jobs hydrates terminal rows from their ready row (kind is not on narrow done rows).
SELECT state, bool_and(kind = 'ops') AS kind_hydrated, bool_and(args IS NOT NULL) AS args_hydrated
  FROM awa.jobs WHERE queue = 'ops_counts' GROUP BY state ORDER BY state;

-- 3. awa.shard_lag against a direct scan of each lane (the view's rows read first: on a Citus
-- coordinator it gathers them from the workers).
CREATE TEMP TABLE ops_lag AS SELECT * FROM awa.shard_lag WHERE queue = 'ops_counts';
SELECT count(*) AS lanes,
       bool_and(l.waiting = (SELECT count(*) FROM awa.ready_entries r
                              WHERE r.queue = 'ops_counts' AND r.priority = l.priority
                                AND r.enqueue_shard = l.enqueue_shard AND r.lane_seq >= h.claim_seq)) AS waiting_agrees,
       bool_and(l.claim_seq = h.claim_seq) AS claim_agrees,
       bool_and(l.next_seq = 1 + greatest(
           (SELECT max(r.lane_seq) FROM awa.ready_entries r WHERE r.queue = 'ops_counts' AND r.priority = l.priority
               AND r.enqueue_shard = l.enqueue_shard),
           (SELECT max(d.lane_seq) FROM awa._terminal_attempts d WHERE d.queue = 'ops_counts' AND d.priority = l.priority
               AND d.enqueue_shard = l.enqueue_shard))) AS next_agrees,
       bool_and(l.lag = l.next_seq - l.claim_seq AND l.lag >= l.waiting) AS lag_consistent,
       bool_and(l.oldest_run_at IS NOT DISTINCT FROM (SELECT min(r.run_at) FROM awa.ready_entries r
                              WHERE r.queue = 'ops_counts' AND r.priority = l.priority
                                AND r.enqueue_shard = l.enqueue_shard AND r.lane_seq >= h.claim_seq)) AS oldest_agrees,
       bool_and(NOT l.draining) AS none_draining, sum(l.waiting) AS waiting
  FROM ops_lag l
  JOIN awa.lane_cursors h ON h.queue = 'ops_counts' AND h.priority = l.priority AND h.enqueue_shard = l.enqueue_shard
 WHERE l.queue = 'ops_counts';

-- 4. awa.shard_stats against a direct scan per shard: enqueued = lane positions written
-- (ready rows and the terminal rows of removed ready rows), claimed = receipts + leases,
-- completed = done completed, failed = done failed, plus the attempts closed into the DLQ
-- when the counters are in shared memory (preloaded). Without preload they are derived
-- from the tables, where failed counts only the retained failed rows (ops_counts_1.out). The
-- view's rows are read first, as above, less the counts an earlier run left.
CREATE TEMP TABLE ops_stats AS
SELECT st.queue, st.enqueue_shard, st.enqueued - coalesce(b.enqueued, 0) AS enqueued,
       st.claimed - coalesce(b.claimed, 0) AS claimed, st.completed - coalesce(b.completed, 0) AS completed,
       st.failed - coalesce(b.failed, 0) AS failed, st.source
  FROM awa.shard_stats st LEFT JOIN ops_stats_before b USING (queue, enqueue_shard)
 WHERE st.queue = 'ops_counts';
WITH direct AS (
    SELECT s.shard,
           (SELECT count(*) FROM (SELECT r.lane_seq FROM awa.ready_entries r WHERE r.queue = 'ops_counts' AND r.enqueue_shard = s.shard
                                  UNION SELECT d.lane_seq FROM awa._terminal_attempts d WHERE d.queue = 'ops_counts' AND d.enqueue_shard = s.shard AND d.lane_seq > 0) p) AS enqueued,
           (SELECT count(*) FROM awa.lease_claims c WHERE c.queue = 'ops_counts' AND c.enqueue_shard = s.shard)
           + (SELECT count(*) FROM awa.leases l WHERE l.queue = 'ops_counts' AND l.enqueue_shard = s.shard) AS claimed,
           (SELECT count(*) FROM awa._terminal_attempts d WHERE d.queue = 'ops_counts' AND d.enqueue_shard = s.shard AND d.state = 'completed') AS completed,
           (SELECT count(*) FROM awa._terminal_attempts d WHERE d.queue = 'ops_counts' AND d.enqueue_shard = s.shard AND d.state = 'failed') AS failed_done,
           (SELECT count(*) FROM awa.lease_claims c JOIN awa.lease_claim_closures x USING (queue, claim_slot, job_id, run_lease)
             WHERE c.queue = 'ops_counts' AND c.enqueue_shard = s.shard AND x.outcome = 'dlq') AS failed_dlq
      FROM generate_series(0, 3) AS s(shard))
SELECT count(*) AS shards, bool_and(st.source = 'shared_memory') AS shared_memory,
       bool_and(st.enqueued = d.enqueued AND st.claimed = d.claimed AND st.completed = d.completed
                AND st.failed = d.failed_done + CASE st.source WHEN 'shared_memory' THEN d.failed_dlq ELSE 0 END) AS agrees,
       sum(st.enqueued) AS enqueued, sum(st.claimed) AS claimed, sum(st.completed) AS completed, sum(st.failed) AS failed
  FROM ops_stats st JOIN direct d ON d.shard = st.enqueue_shard
 WHERE st.queue = 'ops_counts';

-- 5. Bad input.
SELECT * FROM awa.queue_counts_exact(NULL);
SELECT * FROM awa.queue_counts_exact('');

UPDATE awa.plane_settings SET receipts = :'saved_receipts';

SELECT awa.drop_queue('ops_counts_keyless', p_force => true) AS dropped;
SELECT awa.drop_queue('ops_counts', p_force => true) AS dropped;
