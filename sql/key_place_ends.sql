-- key_place_ends: a per-key count passes as free, without testing it, a place whose attempt
-- was recorded and then ended, by this backend or another one, once both have committed (preloaded; docs/design.md §4,
-- "Flow control"; src/ended_places.cpp). Shown by the index probes of awa.completion_batches
-- in the claim's transaction, beyond those of a claim whose key has no place: the
-- open-receipt test of a place probes it, a known end does not, so this output shows fewer
-- probes than key_place_ends_1.out, where without the preload every place is tested. Never trusted before the commit:
-- an exit rolled back, or rolled back to a savepoint, leaves the attempt running and the key
-- at its cap; an exit in a savepoint released counts at commit. Nor is a place taken for
-- ended because another attempt had its row's tid and xmin (a second TRUNCATE in one
-- transaction) or its job id (in another queue).
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

-- 7. A job id that repeats in another queue (the id sequence set back): this backend claims
--    job X in kpe1 (per-key limit 1) and job X in kpe2, and completes kpe2's: kpe1's place is
--    not taken for ended, and key k stays at its cap.
SELECT last_value AS kpe_seq FROM awa.job_id_seq \gset
SELECT awa.create_queue(q, 1) FROM unnest(ARRAY['kpe1', 'kpe2']) q;
SELECT awa.set_concurrency_limit('kpe1', 1, p_per_key => true);
SELECT unnest(awa.insert_jobs('kpe1', ARRAY['x'], p_concurrency_keys => ARRAY['k'])) AS kpe_x \gset
SELECT setval('awa.job_id_seq', :kpe_x, false) > 0 AS set_back;
SELECT unnest(awa.insert_jobs('kpe2', ARRAY['x_again'])) = :kpe_x AS same_id;
SELECT setval('awa.job_id_seq', :kpe_seq + 1000) > 0 AS set_forward;
SELECT count(*) AS enqueued FROM unnest(awa.insert_jobs('kpe1', ARRAY['y', 'z'], p_concurrency_keys => ARRAY['k', 'k']));
SELECT kind FROM awa.claim_ready_runtime('kpe1', 1);
SELECT kind FROM awa.claim_ready_runtime('kpe2', 1);
SELECT count(*) AS completed FROM awa.complete_jobs(ARRAY[:kpe_x]::bigint[], ARRAY[1]::bigint[], p_queue => 'kpe2');
SELECT count(*) AS claimed_while_x_runs FROM awa.claim_ready_runtime('kpe1', 1);
SELECT kind, state FROM awa.jobs WHERE queue IN ('kpe1', 'kpe2') ORDER BY queue, kind;
SELECT awa.drop_queue(q, p_force => true) FROM unnest(ARRAY['kpe1', 'kpe2']) q;

-- 8. TRUNCATE twice in one transaction keeps the table's file, so a second place can take the
--    first one's tid with the same xmin: the first attempt's end does not free the second.
SELECT awa.create_queue('kpe3', 1);
SELECT awa.set_concurrency_limit('kpe3', 1, p_per_key => true);
SELECT count(*) AS enqueued FROM unnest(awa.insert_jobs('kpe3', ARRAY['t1', 't2', 't3'], p_concurrency_keys => ARRAY['k', 'k', 'k']));
BEGIN;
TRUNCATE awa.key_attempts;
SELECT job_id AS kpe_t1, run_lease AS kpe_t1_lease FROM awa.claim_ready_runtime('kpe3', 1) \gset
SELECT ctid AS kpe_t1_place FROM awa.key_attempts WHERE queue = 'kpe3' \gset
SELECT count(*) AS completed FROM awa.complete_jobs(ARRAY[:kpe_t1]::bigint[], ARRAY[:kpe_t1_lease]::bigint[]);
TRUNCATE awa.key_attempts;
SELECT kind FROM awa.claim_ready_runtime('kpe3', 1);
SELECT ctid = :'kpe_t1_place' AS same_place_tid FROM awa.key_attempts WHERE queue = 'kpe3';
COMMIT;
SELECT count(*) AS claimed_while_t2_runs FROM awa.claim_ready_runtime('kpe3', 1);
SELECT kind, state FROM awa.jobs WHERE queue = 'kpe3' ORDER BY kind;
SELECT awa.drop_queue('kpe3', p_force => true);

-- 9. A place recorded by one backend and ended by another (a worker behind a connection pool):
--    known ended too, once the record and the end have committed. Each \c is a new backend;
--    the third one measures a claim of a key without places (b) after a first claim (c).
SELECT awa.create_queue('kpe4', 1);
SELECT awa.set_concurrency_limit('kpe4', 1, p_per_key => true);
SELECT count(*) AS enqueued
  FROM unnest(awa.insert_jobs('kpe4', ARRAY['p1', 'c1', 'b1', 'p2'], p_concurrency_keys => ARRAY['p', 'c', 'b', 'p']));
CREATE TABLE public.kpe4_running (kind text, job_id bigint, run_lease bigint);
INSERT INTO public.kpe4_running SELECT kind, job_id, run_lease FROM awa.claim_ready_runtime('kpe4', 1);
\c
SELECT count(*) AS completed FROM awa.complete_jobs(ARRAY(SELECT job_id FROM public.kpe4_running WHERE kind = 'p1'),
                                                    ARRAY(SELECT run_lease FROM public.kpe4_running WHERE kind = 'p1'));
\c
INSERT INTO public.kpe4_running SELECT kind, job_id, run_lease FROM awa.claim_ready_runtime('kpe4', 1);
BEGIN;
INSERT INTO public.kpe4_running SELECT kind, job_id, run_lease FROM awa.claim_ready_runtime('kpe4', 1);
SELECT (:probes) AS probes_no_place \gset
COMMIT;
BEGIN;
INSERT INTO public.kpe4_running SELECT kind, job_id, run_lease FROM awa.claim_ready_runtime('kpe4', 1);
SELECT (:probes) - :probes_no_place AS completion_batch_probes;
COMMIT;
SELECT string_agg(kind, ' ' ORDER BY kind) AS claimed FROM public.kpe4_running;
SELECT awa.drop_queue('kpe4', p_force => true);
DROP TABLE public.kpe4_running;
