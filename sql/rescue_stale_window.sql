-- rescue_stale_window: a heartbeat rescue pass reads at most 500 claim batches claimed before
-- its cutoff, from a cursor in awa.rescue_progress on, so its cost does not grow with the
-- completed history the claim ring holds (docs/maintenance.md, "Heartbeat rescue reads a
-- window of batches"). Before, every pass tested every batch claimed before the cutoff: once
-- a dead worker's attempt had pinned the claim ring for the stale interval, one pass over
-- 34,000 completed batches took minutes, and the rings never turned again. Here 1,200
-- completed batches come before a dead attempt: the first two passes read 500 batches each
-- and rescue nothing, the third reaches the dead attempt, rescues it once, and sends the
-- cursor back to the start; nothing is lost on the way.
-- Rescue is database-wide: run in a database of our own so other tests' attempts stay open.
SELECT current_database() AS home \gset
CREATE DATABASE awa_rescue_stale_window;
ALTER DATABASE awa_rescue_stale_window SET awa_shard.maintenance = off;
\c awa_rescue_stale_window
SET client_min_messages = warning;
CREATE EXTENSION awa_shard;
RESET client_min_messages;

SELECT awa.create_queue('busy', 1);
SELECT cardinality(awa.insert_jobs('busy', ARRAY['k'], p_args => array_fill('{}'::jsonb, ARRAY[1200]))) AS enqueued;
-- 1,200 claim batches of one job each, all completed.
DO $$
DECLARE
    c record;
BEGIN
    FOR i IN 1..1200 LOOP
        SELECT job_id, run_lease INTO c FROM awa.claim_ready_runtime('busy', 1);
        PERFORM awa.complete_jobs(ARRAY[c.job_id], ARRAY[c.run_lease]);
    END LOOP;
END $$;
-- Then a worker that dies holding its job.
SELECT awa.insert_job_compat('k', 'other') IS NOT NULL AS enqueued;
CREATE TABLE dead AS SELECT job_id, run_lease FROM awa.claim_ready_runtime('other', 1);
SELECT count(*) AS batches, count(*) FILTER (WHERE queue = 'busy') AS completed FROM awa.claim_batches;
SELECT pg_sleep(0.01);

-- Three passes: 500 batches, 500 batches, the last 201 (with the dead attempt).
SELECT awa.rescue_stale_heartbeats('1 millisecond', 1000) AS rescued;
SELECT stale_cursor_base IS NOT NULL AS cursor_goes_on FROM awa.rescue_progress;
SELECT awa.rescue_stale_heartbeats('1 millisecond', 1000) AS rescued;
SELECT stale_cursor_base IS NOT NULL AS cursor_goes_on FROM awa.rescue_progress;
SELECT awa.rescue_stale_heartbeats('1 millisecond', 1000) AS rescued;
SELECT stale_cursor_base IS NOT NULL AS cursor_goes_on FROM awa.rescue_progress;
SELECT j.state, j.attempt FROM awa.jobs j JOIN dead d ON d.job_id = j.id;
-- Once rescued, it is not rescued again on the next cycle.
SELECT sum(awa.rescue_stale_heartbeats('1 millisecond', 1000)) AS rescued_again FROM generate_series(1, 3);

\c :home
DROP DATABASE awa_rescue_stale_window;
