-- complete_bounded: a completion reads the rows of its own batch in the tables that grow with
-- the running jobs (heartbeats in attempt_state, leases), however many other jobs run and
-- whatever join methods the session allows. Left to the planner, the heartbeat and lease
-- deletes became hash joins reading the whole table on every call when the plan was made
-- while the table looked small, or when the session had nested loops off.
\set VERBOSITY terse

\set ECHO none
\i sql/buffers_of.psql
\set ECHO all

SELECT awa.create_queue('cb_q');
SELECT cardinality(awa.insert_jobs('cb_q', array_fill('k'::text, ARRAY[80000]))) AS enqueued;

-- 40 000 running attempts with a heartbeat (receipts mode).
CREATE TEMP TABLE beating AS
    SELECT c.job_id, c.run_lease FROM generate_series(1, 4) g, LATERAL awa.claim_ready_runtime('cb_q', 10000 + 0 * g) c;
SELECT awa.heartbeat_jobs(ARRAY(SELECT job_id FROM beating), ARRAY(SELECT run_lease FROM beating)) AS heartbeats;
-- 40 000 running attempts as leases.
UPDATE awa.plane_settings SET receipts = false;
CREATE TEMP TABLE leased AS
    SELECT c.job_id, c.run_lease FROM generate_series(1, 4) g, LATERAL awa.claim_ready_runtime('cb_q', 10000 + 0 * g) c;
UPDATE awa.plane_settings SET receipts = true;
SELECT (SELECT count(*) FROM awa.attempt_state) AS heartbeat_rows, (SELECT count(*) FROM awa.leases) AS leases;

-- The counts below are of this session's reads: autovacuum must not read these tables
-- meanwhile (the rows just written bring it there; on a busy machine it did, mid-count).
SELECT pg_temp.set_autovacuum('leases\_%', false) > 0 AND pg_temp.set_autovacuum('attempt\_state', false) > 0
       AS autovacuum_off;

-- Hash joins only: the plan that reads whole tables.
SET enable_nestloop = off;
SET enable_mergejoin = off;

-- Eight completions of 10 attempts of a table (custom and generic plans both run).
CREATE FUNCTION pg_temp.complete_eight(p_attempts regclass) RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE n bigint := 0; k bigint;
BEGIN
    FOR g IN 0..7 LOOP
        EXECUTE format('SELECT count(*) FROM awa.complete_jobs(
                            ARRAY(SELECT job_id FROM %1$s ORDER BY job_id OFFSET %2$s LIMIT 10),
                            ARRAY(SELECT run_lease FROM %1$s ORDER BY job_id OFFSET %2$s LIMIT 10))', p_attempts, 10 * g)
            INTO k;
        n := n + k;
    END LOOP;
    RETURN n;
END $$;

SELECT pg_stat_force_next_flush();
SELECT pg_temp.buffers_of('attempt\_state') AS before_ \gset
SELECT pg_temp.complete_eight('beating') AS completed_beating;
SELECT pg_stat_force_next_flush();
-- 8 completions of 10: a few index and heap pages per job, never the 40 000 heartbeat rows.
SELECT pg_temp.buffers_of('attempt\_state') - :before_ < 1000 AS heartbeat_reads_bounded_by_batch;

SELECT pg_stat_force_next_flush();
SELECT pg_temp.buffers_of('leases\_%') AS before_ \gset
SELECT pg_temp.complete_eight('leased') AS completed_leased;
SELECT pg_stat_force_next_flush();
-- The same for the 40 000 leases.
SELECT pg_temp.buffers_of('leases\_%') - :before_ < 1000 AS lease_reads_bounded_by_batch;
-- The session's join settings are its own again after the calls.
SELECT current_setting('enable_nestloop') AS nestloop, current_setting('enable_mergejoin') AS mergejoin;
RESET ALL;

-- The completed jobs left nothing behind.
SELECT count(*) AS heartbeats_of_completed FROM awa.attempt_state a
  WHERE a.job_id IN (SELECT job_id FROM beating ORDER BY job_id LIMIT 80);
SELECT count(*) AS leases_of_completed FROM awa.leases l
  WHERE l.job_id IN (SELECT job_id FROM leased ORDER BY job_id LIMIT 80);
SELECT state, count(*) FROM awa.jobs WHERE queue = 'cb_q' GROUP BY 1 ORDER BY 1;

SELECT pg_temp.set_autovacuum('leases\_%', true) > 0 AND pg_temp.set_autovacuum('attempt\_state', true) > 0
       AS autovacuum_back;
SELECT awa.drop_queue('cb_q', true) > 0 AS dropped;
