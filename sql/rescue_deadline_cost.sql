-- rescue_deadline_cost: a deadline rescue pass costs O(expired open attempts), not
-- O(completed history). Every claim batch that carried a deadline stays in the claim ring
-- until its slot is pruned; a pass that visited every batch whose deadline had passed, and
-- tested each of its attempts for being open, cost time in proportion to the completed
-- claims of the ring (0.2 s at 1 000 batches, 0.45 s at 4 000). A pass reads the batches
-- whose deadline passed since the passes before it (docs/maintenance.md, "Deadline rescue
-- reads each batch once"). The cost is counted, not timed: the blocks of the extension's
-- tables and indexes a pass reads, from the backend's own per-relation counters of the
-- transaction. Catalog reads are left out, and autovacuum is off for the extension's tables
-- of this database: an ANALYZE between two passes makes the next one plan its statements
-- again, which reads catalogs and index ends (a few hundred blocks, the same at any history)
-- and says nothing of the history. With 1 000 and then 4 000 completed batches past their
-- deadline, a pass once the history has been read reads about the same number of blocks; an
-- attempt that is past its deadline and still open is rescued, once.
-- Rescue is database-wide: run in a database of our own so other tests' attempts stay open.
SELECT current_database() AS home \gset
CREATE DATABASE awa_rescue_deadline_cost;
ALTER DATABASE awa_rescue_deadline_cost SET awa_shard.maintenance = off;
\c awa_rescue_deadline_cost
SET client_min_messages = warning;
CREATE EXTENSION awa_shard;
RESET client_min_messages;
\set VERBOSITY terse
DO $$
DECLARE
    t regclass;
BEGIN
    FOR t IN SELECT c.oid FROM pg_class c WHERE c.relnamespace = 'awa'::regnamespace AND c.relkind = 'r' LOOP
        EXECUTE format('ALTER TABLE %s SET (autovacuum_enabled = off)', t);
    END LOOP;
END $$;

SELECT awa.create_queue('rdc');
CREATE TEMP TABLE passes (pass int, history int, blocks bigint);

-- n completed claim batches whose deadline (1 ms) has passed: n claims of one job each,
-- each completed at once.
CREATE FUNCTION pg_temp.completed_history(n int) RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    c record;
BEGIN
    PERFORM awa.insert_jobs('rdc', array_fill('done'::text, ARRAY[n]));
    FOR i IN 1..n LOOP
        SELECT job_id, run_lease INTO c FROM awa.claim_ready_runtime('rdc', 1, 0.001, 0);
        PERFORM awa.complete_jobs(ARRAY[c.job_id], ARRAY[c.run_lease]);
    END LOOP;
    PERFORM pg_sleep(0.01);
END $$;

-- A pass moves the watermark once every transaction that was running at an earlier pass's
-- snapshot has ended; on a busy server (autovacuum's analyze, other databases' maintenance)
-- one may still run, and the pass then reads what it would read on a server that is still
-- busy. The passes measure a settled server: each waits (at most 10 s) until every
-- transaction running when it starts has ended.
CREATE FUNCTION pg_temp.wait_for_running_transactions() RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    s pg_snapshot := pg_current_snapshot();
BEGIN
    FOR i IN 1..200 LOOP
        EXIT WHEN NOT EXISTS (SELECT 1 FROM pg_snapshot_xip(s) x WHERE NOT pg_visible_in_snapshot(x, pg_current_snapshot()));
        PERFORM pg_sleep(0.05);
    END LOOP;
END $$;

-- Blocks of the extension's relations this transaction has read so far (hits and reads).
CREATE FUNCTION pg_temp.awa_blocks() RETURNS bigint LANGUAGE sql AS $$
    SELECT sum(pg_stat_get_xact_blocks_fetched(c.oid))::bigint FROM pg_class c
     WHERE c.relnamespace = 'awa'::regnamespace
$$;

-- One deadline rescue pass: the blocks of the extension's relations it read.
CREATE FUNCTION pg_temp.rescue_pass(p_pass int, p_history int) RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    before bigint;
BEGIN
    PERFORM pg_temp.wait_for_running_transactions();
    before := pg_temp.awa_blocks();
    PERFORM awa.rescue_expired_deadlines();
    INSERT INTO passes VALUES (p_pass, p_history, pg_temp.awa_blocks() - before);
END $$;

-- A running attempt whose deadline is an hour away: open, and not expired.
SELECT (awa.insert_job_compat('running', 'rdc')).id AS running_id \gset
SELECT count(*) AS claimed FROM awa.claim_ready_runtime('rdc', 1, 3600, 0);

-- 1 000 completed batches past their deadline; three passes, each in its own transaction.
SELECT pg_temp.completed_history(1000);
SELECT pg_temp.rescue_pass(1, 1000);
SELECT pg_temp.rescue_pass(2, 1000);
SELECT pg_temp.rescue_pass(3, 1000);
-- 3 000 more (4 000 in all); three passes again.
SELECT pg_temp.completed_history(3000);
SELECT pg_temp.rescue_pass(4, 4000);
SELECT pg_temp.rescue_pass(5, 4000);
SELECT pg_temp.rescue_pass(6, 4000);

SELECT count(*) AS batches_past_deadline FROM awa.claim_batches WHERE deadline_at < clock_timestamp();
-- The first pass after new history reads it (about a block per batch or more: the measure
-- sees the history); the third pass of each round reads none of it: with four times the
-- history it uses at most a few blocks more than with 1 000 batches (every pass before
-- this change read them all, so the third pass at 4 000 used about four times as many).
SELECT (SELECT blocks FROM passes WHERE pass = 4) >= 3000 AS first_pass_reads_new_history,
       (SELECT blocks FROM passes WHERE pass = 6) - (SELECT blocks FROM passes WHERE pass = 3) < 100
           AS settled_pass_independent_of_history,
       (SELECT blocks FROM passes WHERE pass = 6) < 1000 AS settled_pass_reads_no_history;

-- An attempt past its deadline and still open is rescued, once, however far the history
-- has been read; the attempt whose deadline is an hour away is left running.
SELECT (awa.insert_job_compat('late', 'rdc', p_max_attempts => 3::smallint)).id AS late_id \gset
SELECT kind FROM awa.claim_ready_runtime('rdc', 1, 0.001, 0);
SELECT pg_sleep(0.01);
SELECT awa.rescue_expired_deadlines() AS deadline_rescued;
SELECT awa.rescue_expired_deadlines() AS deadline_rescued_again;
SELECT awa.rescue_expired_deadlines() AS deadline_rescued_again;
SELECT state, attempt, errors -> -1 ->> 'error' AS error FROM awa.jobs WHERE id = :late_id;
SELECT count(*) AS closures FROM awa.lease_claim_closures WHERE job_id = :late_id;
SELECT state FROM awa.jobs WHERE id = :running_id;
SELECT state, count(*) FROM awa.jobs WHERE queue = 'rdc' GROUP BY 1 ORDER BY 1;

\c :home
DROP DATABASE awa_rescue_deadline_cost;
