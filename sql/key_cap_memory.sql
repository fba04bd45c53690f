-- key_cap_memory: a backend that passed over a lane because the job at its head has a key at
-- its per-key cap passes it over again without locking and counting that key, for as long as
-- none of the key's running attempts has ended (docs/design.md §4, "Flow control";
-- src/key_caps.cpp). Shown by the key's lock in pg_locks: a count takes it (held to the end
-- of its transaction), the remembered pass does not. Every way the memory must end
-- is shown by a claim that takes the job again: an exit in the same transaction, an exit
-- committed before, a rollback and a savepoint rolled back (the count saw the transaction's
-- own claim), a pending head job cancelled (no attempt ends), a limit raised.
\set ECHO none
\i sql/sqlstate_of.psql
\set ECHO all
\set key_locks 'SELECT count(*) FROM pg_locks WHERE locktype = ''advisory'' AND objsubid = 4 AND pid = pg_backend_pid()'

-- Lane 'hot' (ordering key 'hot'): six jobs of key 'hot'; per-key limit 1.
SELECT awa.create_queue('kcm', 2);
CREATE TEMP TABLE kcm_jobs AS
  SELECT row_number() OVER () AS n, id
    FROM unnest(awa.insert_jobs('kcm', ARRAY['k'], p_ordering_keys => array_fill('hot'::bytea, ARRAY[6]),
                                p_concurrency_keys => array_fill('hot'::text, ARRAY[6]))) id;
SELECT awa.set_concurrency_limit('kcm', 1, p_per_key => true);
CREATE TEMP TABLE kcm_running AS SELECT job_id, run_lease FROM awa.claim_ready_runtime('kcm', 5);
SELECT n AS running FROM kcm_jobs JOIN kcm_running ON job_id = id;

-- 1. The first pass counts (under its key's lock); the next passes, in a later transaction, take
--    no lock of the key (key_cap_memory_1.out: without the preload each pass counts).
BEGIN;
SELECT count(*) AS claimed FROM awa.claim_ready_runtime('kcm', 5);
SELECT (:key_locks) AS key_locks_of_first_pass;
COMMIT;
BEGIN;
SELECT count(*) AS claimed FROM awa.claim_ready_runtime('kcm', 5);
SELECT count(*) AS claimed FROM awa.claim_ready_runtime('kcm', 5);
SELECT (:key_locks) AS key_locks_of_remembered_passes;
COMMIT;

-- 2. An exit earlier in the same transaction (not stamped before its commit) ends the memory.
BEGIN;
SELECT count(*) AS claimed FROM awa.claim_ready_runtime('kcm', 5);
SELECT count(*) AS completed FROM awa.complete_jobs(ARRAY(SELECT job_id FROM kcm_running), ARRAY(SELECT run_lease FROM kcm_running));
TRUNCATE kcm_running;
INSERT INTO kcm_running SELECT job_id, run_lease FROM awa.claim_ready_runtime('kcm', 5);
SELECT n AS taken_after_own_exit FROM kcm_jobs JOIN kcm_running ON job_id = id;
COMMIT;

-- 3. An exit committed by an earlier transaction (stamped at its commit) ends it.
SELECT count(*) AS claimed FROM awa.claim_ready_runtime('kcm', 5);
SELECT awa.fail_job(job_id, run_lease, 'boom') IS NOT NULL AS failed FROM kcm_running;
TRUNCATE kcm_running;
INSERT INTO kcm_running SELECT job_id, run_lease FROM awa.claim_ready_runtime('kcm', 5);
SELECT n AS taken_after_exit FROM kcm_jobs JOIN kcm_running ON job_id = id;

-- 4. A rollback ends it: the count saw the transaction's own claim, which the rollback undoes.
--    Queue kcm2: one 'hot' job on each of its two lanes, per-key limit 1. The transaction
--    takes one (X), passes over the other lane (its 'hot' head at the cap X makes), and rolls
--    back; X, pending again, is cancelled: the other lane's job is the one left to take.
SELECT count(*) AS completed FROM awa.complete_jobs(ARRAY(SELECT job_id FROM kcm_running), ARRAY(SELECT run_lease FROM kcm_running));
TRUNCATE kcm_running;
SELECT awa.create_queue('kcm2', 2);
SELECT count(*) AS enqueued
  FROM awa.insert_jobs('kcm2', ARRAY['k'], p_spread_keyless => true, p_concurrency_keys => ARRAY['hot', 'hot']);
SELECT awa.set_concurrency_limit('kcm2', 1, p_per_key => true);
SELECT count(DISTINCT enqueue_shard) AS lanes FROM awa.jobs WHERE queue = 'kcm2';
BEGIN;
SELECT job_id AS x FROM awa.claim_ready_runtime('kcm2', 1) \gset
SELECT count(*) AS passed_at_own_cap FROM awa.claim_ready_runtime('kcm2', 5);
ROLLBACK;
SELECT awa.cancel_job(:x) AS x_cancelled;
SELECT count(*) AS taken_after_rollback FROM awa.claim_ready_runtime('kcm2', 5) c WHERE c.job_id <> :x;
SELECT awa.drop_queue('kcm2', true) > 0 AS dropped;
-- The same with a savepoint rolled back.
SELECT awa.create_queue('kcm2', 2);
SELECT count(*) AS enqueued
  FROM awa.insert_jobs('kcm2', ARRAY['k'], p_spread_keyless => true, p_concurrency_keys => ARRAY['hot', 'hot']);
SELECT awa.set_concurrency_limit('kcm2', 1, p_per_key => true);
BEGIN;
SAVEPOINT s;
SELECT job_id AS x FROM awa.claim_ready_runtime('kcm2', 1) \gset
SELECT count(*) AS passed_at_own_cap FROM awa.claim_ready_runtime('kcm2', 5);
ROLLBACK TO SAVEPOINT s;
SELECT awa.cancel_job(:x) AS x_cancelled;
SELECT count(*) AS taken_after_savepoint_rollback FROM awa.claim_ready_runtime('kcm2', 5) c WHERE c.job_id <> :x;
COMMIT;
SELECT awa.drop_queue('kcm2', true) > 0 AS dropped;
INSERT INTO kcm_running SELECT job_id, run_lease FROM awa.claim_ready_runtime('kcm', 5);
SELECT n AS taken_next FROM kcm_jobs JOIN kcm_running ON job_id = id;

-- 5. The pending job at the head cancelled (no attempt ends): the next claim reads the new
--    head. A job of another key joins the lane behind the two 'hot' jobs left, then both go.
SELECT count(*) AS enqueued
  FROM awa.insert_jobs('kcm', ARRAY['k'], p_ordering_keys => ARRAY['hot'::bytea], p_concurrency_keys => ARRAY['other']);
SELECT count(*) AS claimed FROM awa.claim_ready_runtime('kcm', 5);
SELECT bool_and(awa.cancel_job(id)) AS cancelled FROM kcm_jobs WHERE n IN (5, 6);
SELECT j.concurrency_key AS taken_after_head_cancelled
  FROM awa.claim_ready_runtime('kcm', 5) c JOIN awa.jobs j ON j.id = c.job_id;

-- 6. A raised limit ends it.
SELECT count(*) AS enqueued
  FROM awa.insert_jobs('kcm', ARRAY['k'], p_ordering_keys => ARRAY['hot'::bytea], p_concurrency_keys => ARRAY['hot']);
SELECT count(*) AS claimed FROM awa.claim_ready_runtime('kcm', 5);
SELECT awa.set_concurrency_limit('kcm', 2, p_per_key => true);
SELECT count(*) AS taken_after_limit_raised FROM awa.claim_ready_runtime('kcm', 5);

SELECT awa.drop_queue('kcm', true) > 0 AS dropped;
