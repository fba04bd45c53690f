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
ANALYZE awa.lease_claims;

\set ECHO none
\i sql/buffers_of.psql
\set ECHO all

-- The plan that reads every receipt: ids and receipts hashed, no parameterised probe.
SET enable_nestloop = off;
SET enable_mergejoin = off;
SET enable_hashjoin = on;

SELECT pg_stat_force_next_flush();
SELECT pg_temp.buffers_of('lease\_claims\_%') AS before_ \gset
-- Eight completions of 10 (custom and generic plans both run).
CREATE TEMP TABLE completed AS
    SELECT d.job_id
      FROM generate_series(0, 7) g,
           LATERAL awa.complete_jobs(
               ARRAY(SELECT job_id FROM open_attempts ORDER BY job_id OFFSET 10 * g LIMIT 10),
               ARRAY(SELECT run_lease FROM open_attempts ORDER BY job_id OFFSET 10 * g LIMIT 10)) d;
SELECT count(*) AS completed, count(DISTINCT job_id) AS distinct_jobs FROM completed;
SELECT pg_stat_force_next_flush();
-- 8 completions of 10 among 20 000 receipts: a few index and heap pages per job, never the slot.
SELECT pg_temp.buffers_of('lease\_claims\_%') - :before_ < 1000 AS reads_bounded_by_batch;

-- Heartbeats of open attempts look receipts up the same way.
SELECT pg_stat_force_next_flush();
SELECT pg_temp.buffers_of('lease\_claims\_%') AS before_ \gset
SELECT sum(awa.heartbeat_jobs(
           ARRAY(SELECT job_id FROM open_attempts ORDER BY job_id DESC OFFSET 10 * g LIMIT 10),
           ARRAY(SELECT run_lease FROM open_attempts ORDER BY job_id DESC OFFSET 10 * g LIMIT 10))) AS alive
  FROM generate_series(0, 7) g;
SELECT pg_stat_force_next_flush();
SELECT pg_temp.buffers_of('lease\_claims\_%') - :before_ < 1000 AS heartbeat_reads_bounded_by_batch;
RESET ALL;

-- The other attempts are still open and complete normally.
SELECT count(*) AS completed_rest FROM awa.complete_jobs(
    ARRAY(SELECT job_id FROM open_attempts WHERE job_id NOT IN (SELECT job_id FROM completed)),
    ARRAY(SELECT run_lease FROM open_attempts WHERE job_id NOT IN (SELECT job_id FROM completed)));
SELECT state, count(*) FROM awa.jobs WHERE queue = 'cplan_q' GROUP BY 1;
