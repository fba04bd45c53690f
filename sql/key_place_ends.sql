-- key_place_ends: a per-key count passes as free, without testing it, a place whose attempt
-- was recorded and then ended by this backend, once that end has committed (preloaded; docs/design.md §4,
-- "Flow control"; src/ended_places.cpp). Shown by the index probes of awa.completion_batches
-- in the claim's transaction, beyond those of a claim whose key has no place: the
-- open-receipt test of a place probes it, a known end does not, so this output shows fewer
-- probes than key_place_ends_1.out, where without the preload every place is tested. Never trusted before the commit:
-- an exit rolled back, or rolled back to a savepoint, leaves the attempt running and the key
-- at its cap; an exit in a savepoint released counts at commit.
\set probes 'SELECT coalesce(sum(idx_scan), 0) FROM pg_stat_xact_all_tables WHERE schemaname = ''awa'' AND relname LIKE ''completion\\_batches%'''
SELECT awa.create_queue('kpe', 1);
SELECT count(*) AS enqueued
  FROM unnest(awa.insert_jobs('kpe', ARRAY['b1', 'a1', 'a2', 'a3', 'a4', 'a5'],
                              p_concurrency_keys => ARRAY['b', 'a', 'a', 'a', 'a', 'a']));
SELECT awa.set_concurrency_limit('kpe', 1, p_per_key => true);
CREATE TEMP TABLE kpe_running (kind text, job_id bigint, run_lease bigint);

-- 1. A key without places: no test (b1 stays running, so each later window starts at key a).
BEGIN;
INSERT INTO kpe_running SELECT kind, job_id, run_lease FROM awa.claim_ready_runtime('kpe', 1);
SELECT (:probes) AS probes_no_place \gset
COMMIT;
-- 2. a1 recorded in a new place, then completed by this backend.
INSERT INTO kpe_running SELECT kind, job_id, run_lease FROM awa.claim_ready_runtime('kpe', 1);
SELECT count(*) AS completed FROM awa.complete_jobs(ARRAY(SELECT job_id FROM kpe_running WHERE kind = 'a1'),
                                                    ARRAY(SELECT run_lease FROM kpe_running WHERE kind = 'a1'));
-- 3. a2's claim finds a1's place: known ended, or tested (one probe more).
BEGIN;
INSERT INTO kpe_running SELECT kind, job_id, run_lease FROM awa.claim_ready_runtime('kpe', 1);
SELECT (:probes) - :probes_no_place AS completion_batch_probes;
COMMIT;
SELECT string_agg(kind, ' ' ORDER BY kind) AS claimed FROM kpe_running;

-- 4. a2's completion rolled back to a savepoint: a2 still runs, so key a stays at its cap.
BEGIN;
SAVEPOINT before_exit;
SELECT count(*) AS completed FROM awa.complete_jobs(ARRAY(SELECT job_id FROM kpe_running WHERE kind = 'a2'),
                                                    ARRAY(SELECT run_lease FROM kpe_running WHERE kind = 'a2'));
ROLLBACK TO SAVEPOINT before_exit;
COMMIT;
SELECT count(*) AS claimed_while_a2_runs FROM awa.claim_ready_runtime('kpe', 1);

-- 5. a2's completion rolled back: the same.
BEGIN;
SELECT count(*) AS completed FROM awa.complete_jobs(ARRAY(SELECT job_id FROM kpe_running WHERE kind = 'a2'),
                                                    ARRAY(SELECT run_lease FROM kpe_running WHERE kind = 'a2'));
ROLLBACK;
SELECT count(*) AS claimed_while_a2_runs FROM awa.claim_ready_runtime('kpe', 1);

-- 6. a2 failed in a savepoint that is released, then committed: its place is free again, known
--    ended; a3 takes it.
BEGIN;
SAVEPOINT exit;
SELECT awa.fail_job(job_id, run_lease, 'boom') IS NOT NULL AS failed FROM kpe_running WHERE kind = 'a2';
RELEASE SAVEPOINT exit;
COMMIT;
BEGIN;
INSERT INTO kpe_running SELECT kind, job_id, run_lease FROM awa.claim_ready_runtime('kpe', 1);
SELECT (:probes) - :probes_no_place AS completion_batch_probes;
COMMIT;
SELECT string_agg(kind, ' ' ORDER BY kind) AS claimed FROM kpe_running;
SELECT kind, state FROM awa.jobs WHERE queue = 'kpe' ORDER BY kind;

SELECT awa.drop_queue('kpe', p_force => true);
DROP TABLE kpe_running;
