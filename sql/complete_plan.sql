-- complete_plan: a completion (and a heartbeat) reads O(batch) receipts, however many attempts the claim ring
-- holds and whatever the planner would otherwise choose. A plan made while the attempt
-- tables looked empty joins the ids with a hash join; if the receipts side of that join has
-- no index condition, every call reads every receipt of the live claim slots (a drain of a
-- fresh backlog slowed down five times as its receipts piled up). Here the session's
-- settings make exactly that join the cheapest, and completions must still read only a
-- handful of buffers.
\set VERBOSITY terse

SELECT awa.create_queue('cplan_q');
-- 20 000 open attempts (receipts) in the claim ring.
SELECT cardinality(awa.insert_jobs('cplan_q', array_fill('k'::text, ARRAY[20000]))) AS enqueued;
CREATE TEMP TABLE open_attempts AS
    SELECT c.job_id, c.run_lease FROM generate_series(1, 20) g,
           LATERAL awa.claim_ready_runtime('cplan_q', 1000 + 0 * g) c;
SELECT count(*) AS claimed, count(DISTINCT job_id) AS distinct_jobs FROM open_attempts;
ANALYZE awa.claim_batches;

\set ECHO none
\i sql/buffers_of.psql
\set ECHO all

-- The counts below are of this session's reads: autovacuum must not read these partitions
-- meanwhile (the 20 000 rows just written would bring it there).
SELECT pg_temp.set_autovacuum('claim\_batches\_%', false) > 0 AND pg_temp.set_autovacuum('done\_entries\_%', false) > 0
       AND pg_temp.set_autovacuum('completion\_batches\_%', false) > 0
       AND pg_temp.set_autovacuum('ready\_entries\_%', false) > 0 AS autovacuum_off;

-- The plan that reads every receipt: ids and receipts hashed, no parameterised probe.
SET enable_nestloop = off;
SET enable_mergejoin = off;
SET enable_hashjoin = on;

SELECT pg_stat_force_next_flush();
SELECT pg_temp.buffers_of('claim\_batches\_%') AS batches_before_, pg_temp.buffers_of('ready\_entries\_%') AS ready_before_ \gset
-- Eight completions of 10 (custom and generic plans both run).
CREATE TEMP TABLE completed AS
    SELECT d.job_id
      FROM generate_series(0, 7) g,
           LATERAL awa.complete_jobs(
               ARRAY(SELECT job_id FROM open_attempts ORDER BY job_id OFFSET 10 * g LIMIT 10),
               ARRAY(SELECT run_lease FROM open_attempts ORDER BY job_id OFFSET 10 * g LIMIT 10)) d;
SELECT count(*) AS completed, count(DISTINCT job_id) AS distinct_jobs FROM completed;
SELECT pg_stat_force_next_flush();
-- 8 completions of 10 among 20 000 receipts: a few index and heap pages per job, never the
-- slot. A receipt is reached through its ready row (the job index) and then its claim batch
-- (the block index of each live claim partition), in the lock statement and again in the
-- completion: some 7 buffers a job in each table, 560 for the 80. A scan of the 20 000 ready
-- rows reads 650 pages a call; one of the slot's 330 claim batches, 80 heap pages and their
-- index (a plan that hashed them all cost 2 900 buffers here).
SELECT pg_temp.buffers_of('claim\_batches\_%') - :batches_before_ < 900 AS batch_reads_bounded_by_batch,
       pg_temp.buffers_of('ready\_entries\_%') - :ready_before_ < 900 AS ready_reads_bounded_by_batch;

-- Heartbeats of open attempts look receipts up the same way.
SELECT pg_stat_force_next_flush();
SELECT pg_temp.buffers_of('claim\_batches\_%') AS batches_before_, pg_temp.buffers_of('ready\_entries\_%') AS ready_before_ \gset
SELECT sum(awa.heartbeat_jobs(
           ARRAY(SELECT job_id FROM open_attempts ORDER BY job_id DESC OFFSET 10 * g LIMIT 10),
           ARRAY(SELECT run_lease FROM open_attempts ORDER BY job_id DESC OFFSET 10 * g LIMIT 10))) AS alive
  FROM generate_series(0, 7) g;
SELECT pg_stat_force_next_flush();
-- One statement, some 3.5 buffers a job in each table (260 for the 80).
SELECT pg_temp.buffers_of('claim\_batches\_%') - :batches_before_ < 500 AS heartbeat_batch_reads_bounded,
       pg_temp.buffers_of('ready\_entries\_%') - :ready_before_ < 500 AS heartbeat_ready_reads_bounded;

-- The same with the routing argument (p_queue, the statements' second form, each carrying
-- queue = $n): the queue condition must not turn a probe by job into a scan of the queue's
-- 20 000 rows (the lane-first keys start with queue). Same bounds.
SELECT pg_stat_force_next_flush();
SELECT pg_temp.buffers_of('claim\_batches\_%') AS batches_before_, pg_temp.buffers_of('ready\_entries\_%') AS ready_before_ \gset
INSERT INTO completed
    SELECT d.job_id
      FROM generate_series(0, 7) g,
           LATERAL awa.complete_jobs(
               ARRAY(SELECT job_id FROM open_attempts ORDER BY job_id OFFSET 100 + 10 * g LIMIT 10),
               ARRAY(SELECT run_lease FROM open_attempts ORDER BY job_id OFFSET 100 + 10 * g LIMIT 10),
               p_queue => 'cplan_q') d;
SELECT count(*) AS completed_in_queue FROM completed;
SELECT pg_stat_force_next_flush();
SELECT pg_temp.buffers_of('claim\_batches\_%') - :batches_before_ < 900 AS queue_batch_reads_bounded_by_batch,
       pg_temp.buffers_of('ready\_entries\_%') - :ready_before_ < 900 AS queue_ready_reads_bounded_by_batch;
SELECT pg_stat_force_next_flush();
SELECT pg_temp.buffers_of('claim\_batches\_%') AS batches_before_, pg_temp.buffers_of('ready\_entries\_%') AS ready_before_ \gset
SELECT sum(awa.heartbeat_jobs(
           ARRAY(SELECT job_id FROM open_attempts ORDER BY job_id DESC OFFSET 10 * g LIMIT 10),
           ARRAY(SELECT run_lease FROM open_attempts ORDER BY job_id DESC OFFSET 10 * g LIMIT 10), 'cplan_q')) AS alive_in_queue
  FROM generate_series(0, 7) g;
SELECT pg_stat_force_next_flush();
SELECT pg_temp.buffers_of('claim\_batches\_%') - :batches_before_ < 500 AS queue_heartbeat_batch_reads_bounded,
       pg_temp.buffers_of('ready\_entries\_%') - :ready_before_ < 500 AS queue_heartbeat_ready_reads_bounded;
RESET ALL;

-- The other attempts are still open and complete normally.
SELECT count(*) AS completed_rest FROM awa.complete_jobs(
    ARRAY(SELECT job_id FROM open_attempts WHERE job_id NOT IN (SELECT job_id FROM completed)),
    ARRAY(SELECT run_lease FROM open_attempts WHERE job_id NOT IN (SELECT job_id FROM completed)));
SELECT state, count(*) FROM awa.jobs WHERE queue = 'cplan_q' GROUP BY 1;

-- A completion writes no terminal row: its completion batch names it, and a look-up by id
-- finds it through the ready row's job index, then the batch's block in the lane, never by
-- scanning the terminal rows or the batches.
ANALYZE awa.ready_entries;
ANALYZE awa.done_entries;
ANALYZE awa.completion_batches;
SELECT count(*) AS terminal_rows_of_completions
  FROM awa.done_entries d WHERE d.queue = 'cplan_q' AND d.state = 'completed';
SELECT count(*) AS completion_batches, sum(cardinality(lane_offsets)) AS completions_in_batches
  FROM awa.completion_batches b WHERE b.queue = 'cplan_q';
SELECT pg_stat_force_next_flush();
SELECT pg_temp.buffers_of('done\_entries\_%') + pg_temp.buffers_of('completion\_batches\_%') AS before_ \gset
SELECT count(*) FILTER (WHERE g.state = 'completed') AS found_completed
  FROM (SELECT job_id FROM completed ORDER BY job_id LIMIT 8) c, LATERAL awa.get_job(c.job_id) g;
SELECT pg_stat_force_next_flush();
-- A look-up probes the index of each of the 17 terminal and 16 batch partitions from two
-- branches of awa.jobs (the running attempts' test and the terminal states), two pages a
-- probe: some 140 buffers, 1 100 for the 8. A scan of the terminal rows of 20 000 jobs
-- read some 250 pages per look-up.
SELECT pg_temp.buffers_of('done\_entries\_%') + pg_temp.buffers_of('completion\_batches\_%') - :before_ < 1600
       AS terminal_reads_bounded;
-- The plan of a look-up by id (get_job's settings) scans no terminal, batch or ready partition.
SET enable_seqscan = off;
CREATE FUNCTION pg_temp.plan_of(p_sql text) RETURNS SETOF text LANGUAGE plpgsql AS $$
BEGIN RETURN QUERY EXECUTE 'EXPLAIN (COSTS OFF) ' || p_sql; END $$;
SELECT count(*) FILTER (WHERE p ~ 'Seq Scan on (done_entries|ready_entries|completion_batches|claim_batches)') AS scans_of_ring_tables,
       count(*) FILTER (WHERE p ~ 'Index Scan using completion_batches_\d+_queue_priority_enqueue_shard_lane_\w+_idx') > 0
         AS uses_batch_block_index
  FROM pg_temp.plan_of(format('SELECT * FROM awa.jobs WHERE id = %s', (SELECT min(job_id) FROM completed))) p;
-- Every scan of the batches (completions and claims), in the generic plan too, is bounded
-- by its lane's block (at most 64 attempts, however many the lane holds): the line after the
-- scan is its index condition on lane_block.
SET plan_cache_mode = force_generic_plan;
PREPARE job_by_id(bigint) AS SELECT * FROM awa.jobs WHERE id = $1;
SELECT count(*) FILTER (WHERE p ~ 'Scan .*on completion_batches_') AS batch_scans,
       count(*) FILTER (WHERE p ~ 'Scan .*on completion_batches_' AND next_line !~ 'lane_block = ') AS batch_scans_without_block,
       count(*) FILTER (WHERE p ~ 'Scan .*on claim_batches_') AS claim_batch_scans,
       count(*) FILTER (WHERE p ~ 'Scan .*on claim_batches_' AND next_line !~ 'lane_block = ') AS claim_batch_scans_without_block
  FROM (SELECT p, lead(p) OVER (ORDER BY n) AS next_line
          FROM pg_temp.plan_of(format('EXECUTE job_by_id(%s)', (SELECT min(job_id) FROM completed))) WITH ORDINALITY AS t(p, n)) x;
RESET plan_cache_mode;
RESET enable_seqscan;
-- delete_job removes a completed job (found through its ready row) and a cancelled one.
SELECT awa.delete_job((SELECT min(job_id) FROM completed)) AS deleted_completed;
SELECT count(*) AS still_visible FROM awa.jobs WHERE id = (SELECT min(job_id) FROM completed);
SELECT count(*) AS done_rows_left FROM awa._terminal_attempts WHERE job_id = (SELECT min(job_id) FROM completed);
SELECT cardinality(awa.insert_jobs('cplan_q', ARRAY['c'])) AS enqueued_to_cancel;
SELECT awa.cancel_job((SELECT id FROM awa.jobs WHERE queue = 'cplan_q' AND kind = 'c')) AS cancelled;
SELECT state FROM awa.jobs WHERE queue = 'cplan_q' AND kind = 'c';
SELECT awa.delete_job((SELECT id FROM awa.jobs WHERE queue = 'cplan_q' AND kind = 'c')) AS deleted_cancelled;
SELECT count(*) AS cancelled_left FROM awa.jobs WHERE queue = 'cplan_q' AND kind = 'c';
SELECT pg_temp.set_autovacuum('claim\_batches\_%', true) > 0 AND pg_temp.set_autovacuum('done\_entries\_%', true) > 0
       AND pg_temp.set_autovacuum('completion\_batches\_%', true) > 0
       AND pg_temp.set_autovacuum('ready\_entries\_%', true) > 0 AS autovacuum_back;
