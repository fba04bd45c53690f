-- claim_window_spans: a claim reads its lane's window in spans of lane_seq from the cursor
-- (direct_drain.cpp, read_window): the first twice the rows it wants, each next four times
-- the last, until it has them or reaches the lane's fence. Rows spread over several ring
-- slots and long runs of lane_seq without a row (cancelled jobs) must not change what a
-- claim returns: the first rows of the lane, in lane order.
-- The test turns the queue ring: it runs in a database of its own, so the rings of the other
-- tests' database stay where those tests expect them.
\set VERBOSITY terse
SELECT current_database() AS home \gset
CREATE DATABASE awa_window_spans;
ALTER DATABASE awa_window_spans SET awa_shard.maintenance = off;
\c awa_window_spans
SET client_min_messages = warning;
CREATE EXTENSION awa_shard;
RESET client_min_messages;

SELECT awa.create_queue('cws', 1);
-- 300 jobs in one lane, over three slots of the queue ring.
SELECT count(*) AS enqueued FROM (SELECT awa.insert_job_compat('j' || g, 'cws') FROM generate_series(1, 100) g) x;
SELECT awa.rotate_queue_ring() IS NOT NULL AS rotated;
SELECT count(*) AS enqueued FROM (SELECT awa.insert_job_compat('j' || g, 'cws') FROM generate_series(101, 200) g) x;
SELECT awa.rotate_queue_ring() IS NOT NULL AS rotated;
SELECT count(*) AS enqueued FROM (SELECT awa.insert_job_compat('j' || g, 'cws') FROM generate_series(201, 300) g) x;
SELECT count(DISTINCT tableoid) AS ready_partitions FROM awa.ready_entries WHERE queue = 'cws';
-- Jobs 2..250 cancelled: a run of 249 lane_seq values without a row after the first job.
SELECT count(*) FILTER (WHERE awa.cancel_job(id)) AS cancelled
  FROM awa.jobs WHERE queue = 'cws' AND substr(kind, 2)::int BETWEEN 2 AND 250;
SELECT count(*) AS rows_left FROM awa.ready_entries r WHERE r.queue = 'cws'
   AND NOT EXISTS (SELECT 1 FROM awa.jobs j WHERE j.id = r.job_id AND j.state = 'cancelled');

-- 1. Ten at once: the first job, then the nine after the gap, in lane order.
SELECT string_agg(kind, ' ' ORDER BY lane_seq) AS claimed FROM awa.claim_ready_runtime('cws', 10);
-- 2. One at a time: each the next in lane order.
SELECT kind FROM awa.claim_ready_runtime('cws', 1);
SELECT kind FROM awa.claim_ready_runtime('cws', 1);
-- 3. More than are left: every one left, in lane order, and then none.
SELECT count(*) AS claimed, min(kind) AS first, max(kind) AS last,
       bool_and(lane_seq > coalesce(prev, 0)) AS in_order
  FROM (SELECT kind, lane_seq, lag(lane_seq) OVER (ORDER BY lane_seq) AS prev
          FROM awa.claim_ready_runtime('cws', 100)) c;
SELECT count(*) AS claimed FROM awa.claim_ready_runtime('cws', 10);
-- 4. A window wider than the first span with the gap inside it: 20 jobs, 11..19 cancelled.
SELECT count(*) AS enqueued FROM (SELECT awa.insert_job_compat('k' || lpad(g::text, 2, '0'), 'cws')
                                    FROM generate_series(1, 20) g) x;
SELECT count(*) FILTER (WHERE awa.cancel_job(id)) AS cancelled
  FROM awa.jobs WHERE queue = 'cws' AND kind BETWEEN 'k11' AND 'k19';
SELECT string_agg(kind, ' ' ORDER BY lane_seq) AS claimed FROM awa.claim_ready_runtime('cws', 11);

\c :home
DROP DATABASE awa_window_spans;
