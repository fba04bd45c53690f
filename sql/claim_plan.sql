-- claim_plan: a claim reads O(batch) rows of its lane, whatever the backlog and whatever the
-- planner would otherwise choose. The hot path pins its planner settings (docs/design.md §4):
-- a bitmap or sequential scan of the lane reads every remaining row and sorts it to keep a
-- batch, so one claim would cost O(backlog). Here the session's settings make exactly that
-- plan the cheapest, and the claim must still read only a handful of buffers.
\set VERBOSITY terse

SELECT awa.create_queue('plan_q');
-- 20 000 jobs on the queue's one lane (about 700 heap pages).
SELECT cardinality(awa.insert_jobs('plan_q', array_fill('k'::text, ARRAY[20000]))) AS enqueued;
ANALYZE awa.ready_entries;

\set ECHO none
\i sql/buffers_of.psql
\set ECHO all

-- The counts below are of this session's reads: autovacuum must not read the lane's partitions
-- meanwhile (the 20 000 rows just written would bring it there).
SELECT pg_temp.set_autovacuum('ready\_entries\_%', false) > 0 AS autovacuum_off;

-- The plan a whole-lane read would take: no ordered index scan allowed.
SET enable_indexscan = off;
SET enable_indexonlyscan = off;
SET enable_bitmapscan = on;
SET enable_seqscan = on;
SET enable_sort = on;

SELECT pg_stat_force_next_flush();
SELECT pg_temp.buffers_of('ready\_entries\_%') AS before_ \gset
-- Several calls, so that custom and generic plans both run.
SELECT count(*) AS claimed, count(DISTINCT c.job_id) AS distinct_jobs
  FROM generate_series(1, 8) g, LATERAL awa.claim_ready_runtime('plan_q', 10 + 0 * g) c;
SELECT pg_stat_force_next_flush();
-- 8 claims of 10 over a 20 000-row lane: a few index and heap pages each, never the lane.
SELECT pg_temp.buffers_of('ready\_entries\_%') - :before_ < 200 AS reads_bounded_by_batch;

-- The session's settings are the session's again after the claim.
SELECT current_setting('enable_indexscan') AS indexscan, current_setting('enable_bitmapscan') AS bitmapscan,
       current_setting('enable_seqscan') AS seqscan, current_setting('enable_sort') AS sort;
-- Also after a claim that failed.
SELECT count(*) FROM awa.claim_ready_runtime('plan_q', 0);
SELECT current_setting('enable_indexscan') AS indexscan, current_setting('enable_bitmapscan') AS bitmapscan;
RESET ALL;

-- The lane drained in order: 80 claimed, the cursor right behind them.
SELECT claim_seq FROM awa.lane_cursors WHERE queue = 'plan_q';

-- The walk remembers, per backend, the row a probe found on a lane without a hint, until the
-- lane's cursor, sequence or fence moves. A remembered row that is gone (cancelled) must not
-- hide the lane's later rows nor make a claim fail.
SELECT awa.create_queue('probe_q', 2);
-- Two keys that land on different shards.
SELECT k AS key_a FROM unnest(ARRAY['a', 'b', 'c', 'd', 'e']) k
 WHERE awa.shard_for_enqueue('probe_q', 2, convert_to(k, 'UTF8')) = 0 LIMIT 1 \gset
SELECT k AS key_b FROM unnest(ARRAY['a', 'b', 'c', 'd', 'e']) k
 WHERE awa.shard_for_enqueue('probe_q', 2, convert_to(k, 'UTF8')) = 1 LIMIT 1 \gset
SELECT (awa.insert_job_compat('a1', 'probe_q', p_ordering_key => convert_to(:'key_a', 'UTF8'))).id AS a1 \gset
SELECT (awa.insert_job_compat('a2', 'probe_q', p_ordering_key => convert_to(:'key_a', 'UTF8'))).id AS a2 \gset
SELECT (awa.insert_job_compat('b1', 'probe_q', p_ordering_key => convert_to(:'key_b', 'UTF8'))).id AS b1 \gset
-- First claim: both lanes probed (no hints yet); the oldest row, a1, wins.
SELECT kind FROM awa.claim_ready_runtime('probe_q', 1);
-- b1 goes away while this backend remembers it as lane 1's first row.
SELECT awa.cancel_job(:b1);
-- The cancel left lane 1's cursor and sequence where they were: the remembered row still
-- looks valid to the walk, which must find out by draining nothing.
SELECT enqueue_shard, claim_seq FROM awa.lane_cursors WHERE queue = 'probe_q' ORDER BY enqueue_shard;
-- a2 comes from lane 0's hint; then lane 1's remembered row is gone: nothing, no error.
SELECT kind FROM awa.claim_ready_runtime('probe_q', 1);
SELECT count(*) AS after_cancel FROM awa.claim_ready_runtime('probe_q', 1);
-- A new row on lane 1 is found.
SELECT (awa.insert_job_compat('b2', 'probe_q', p_ordering_key => convert_to(:'key_b', 'UTF8'))).id AS b2 \gset
SELECT kind FROM awa.claim_ready_runtime('probe_q', 1);
SELECT pg_temp.set_autovacuum('ready\_entries\_%', true) > 0 AS autovacuum_back;
