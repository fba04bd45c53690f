-- What maintenance promises about single jobs (docs/maintenance.md §3):
--   * rescue honours max_attempts: an attempt rescued at its last attempt ends failed;
--   * priority aging moves a lane prefix in lane order, so the jobs of one key keep
--     their order, whatever their run_at stamps say;
--   * a run_at must be finite: 'infinity' and '-infinity' are refused with 22023, and a
--     stored non-finite run_at (written by 1.0) cannot make a claim with aging fail.
-- Rescue is database-wide: run in a database of our own so other tests' attempts stay open.
SELECT current_database() AS home \gset
CREATE DATABASE awa_maintenance_guarantees;
ALTER DATABASE awa_maintenance_guarantees SET awa_shard.maintenance = off;
\c awa_maintenance_guarantees
SET client_min_messages = warning;
CREATE EXTENSION awa_shard;
\set ECHO none
\i sql/sqlstate_of.psql
\set ECHO all
RESET client_min_messages;

-- 1. Rescue at the last attempt ends failed (heartbeat and deadline), earlier attempts retry.
SELECT (awa.insert_job_compat('last', 'g_rescue', p_max_attempts => 1::smallint)).id AS last_id \gset
SELECT (awa.insert_job_compat('more', 'g_rescue', p_max_attempts => 3::smallint)).id AS more_id \gset
SELECT count(*) AS claimed FROM awa.claim_ready_runtime('g_rescue', 10, 0, 0);
SELECT pg_sleep(0.02);
SELECT awa.rescue_stale_heartbeats(interval '10 milliseconds') AS heartbeat_rescued;
SELECT id = :last_id AS is_last, state, attempt, max_attempts, errors -> -1 ->> 'error' AS error,
       (errors -> -1 ->> 'terminal')::boolean AS terminal
  FROM awa.jobs WHERE queue = 'g_rescue' ORDER BY id;
SELECT (awa.insert_job_compat('deadline', 'g_deadline', p_max_attempts => 1::smallint)).id AS dl_id \gset
SELECT count(*) AS claimed FROM awa.claim_ready_runtime('g_deadline', 10, 0.001, 0);
SELECT pg_sleep(0.02);
SELECT awa.rescue_expired_deadlines() AS deadline_rescued;
SELECT state, attempt, errors -> -1 ->> 'error' AS error FROM awa.jobs WHERE id = :dl_id;

-- 2. Aging keeps per-key order. Two jobs of key K whose run_at stamps run backwards
--    along the lane (they are stamped before the lane lock) come back in lane order.
SELECT (awa.insert_job_compat('first', 'g_aging', p_ordering_key => 'K'::bytea)).id AS a_id \gset
SELECT (awa.insert_job_compat('second', 'g_aging', p_ordering_key => 'K'::bytea)).id AS b_id \gset
UPDATE awa.ready_entries SET run_at = now() - interval '1 hour' WHERE job_id = :a_id;
UPDATE awa.ready_entries SET run_at = now() - interval '2 hours' WHERE job_id = :b_id;
SELECT awa.age_waiting_priorities(interval '1 minute', 100, 'g_aging') AS aged;
SELECT kind, lane_priority, priority FROM awa.claim_ready_runtime('g_aging', 10, 0, 0) ORDER BY lane_seq;
--    Only a prefix of a lane moves: an old job behind a young one of the same key stays
--    behind it (it would otherwise overtake it at the higher priority).
SELECT (awa.insert_job_compat('old_1', 'g_prefix', p_ordering_key => 'K'::bytea)).id AS p1 \gset
SELECT (awa.insert_job_compat('young', 'g_prefix', p_ordering_key => 'K'::bytea)).id AS p2 \gset
SELECT (awa.insert_job_compat('old_2', 'g_prefix', p_ordering_key => 'K'::bytea)).id AS p3 \gset
UPDATE awa.ready_entries SET run_at = now() - interval '1 hour' WHERE job_id IN (:p1, :p3);
SELECT awa.age_waiting_priorities(interval '1 minute', 100, 'g_prefix') AS aged;
SELECT kind, priority FROM awa.jobs WHERE queue = 'g_prefix' ORDER BY id;
CREATE TEMP TABLE prefix_order (n serial, kind text);
INSERT INTO prefix_order (kind) SELECT kind FROM awa.claim_ready_runtime('g_prefix', 1, 0, 0);
INSERT INTO prefix_order (kind) SELECT kind FROM awa.claim_ready_runtime('g_prefix', 1, 0, 0);
INSERT INTO prefix_order (kind) SELECT kind FROM awa.claim_ready_runtime('g_prefix', 1, 0, 0);
SELECT string_agg(kind, ' < ' ORDER BY n) AS claim_order FROM prefix_order;

-- 3. Non-finite run_at values are refused before anything is written.
SELECT pg_temp.sqlstate_of($$SELECT awa.insert_job_compat('k', 'g_inf', p_run_at => '-infinity')$$);
SELECT pg_temp.sqlstate_of($$SELECT awa.insert_job_compat('k', 'g_inf', p_run_at => 'infinity')$$);
SELECT pg_temp.sqlstate_of($$SELECT awa.insert_jobs('g_inf', ARRAY['a', 'b'], p_run_ats => ARRAY[now(), 'infinity']::timestamptz[])$$);
SELECT count(*) AS rows_left FROM awa.jobs WHERE queue = 'g_inf';
--    A stored non-finite run_at (possible in 1.0) does not break claims with aging.
SELECT (awa.insert_job_compat('minus', 'g_stored', p_priority => 3::smallint)).id AS m_id \gset
SELECT (awa.insert_job_compat('plus', 'g_stored', p_priority => 3::smallint)).id AS pl_id \gset
UPDATE awa.ready_entries SET run_at = '-infinity' WHERE job_id = :m_id;
UPDATE awa.ready_entries SET run_at = 'infinity' WHERE job_id = :pl_id;
SELECT kind, lane_priority, priority FROM awa.claim_ready_runtime('g_stored', 10, 0, 60) ORDER BY lane_seq;

-- 4. No maintenance worker serves this database (awa_shard.maintenance_database is not
--    set): claims promote the due scheduled and retryable jobs of their own queue, so a
--    retry comes back with no scheduler; a job due later stays scheduled.
SELECT (awa.insert_job_compat('due', 'g_promote', p_state => 'scheduled', p_run_at => now() - interval '1 second')).id AS due_id \gset
SELECT (awa.insert_job_compat('later', 'g_promote', p_run_at => now() + interval '1 day')).id AS later_id \gset
CREATE TEMP TABLE promoted_claim AS SELECT job_id, run_lease, kind, attempt FROM awa.claim_ready_runtime('g_promote', 10, 0, 0);
SELECT kind, attempt FROM promoted_claim;
SELECT awa.fail_job(job_id, run_lease, 'again', interval '0') AS after_failure FROM promoted_claim;
SELECT pg_sleep(0.15);
SELECT kind, attempt FROM awa.claim_ready_runtime('g_promote', 10, 0, 0);
SELECT state FROM awa.jobs WHERE id = :later_id;

-- 5. The rescues' search keeps one generic plan: a custom plan of it, made on every call,
--    was 95 % of an idle maintenance pass (10-17 ms per rescue with nothing to rescue).
SELECT p.proconfig @> ARRAY['plan_cache_mode=force_generic_plan'] AS rescue_keeps_generic_plan
  FROM pg_proc p WHERE p.oid = 'awa._rescue(interval, boolean, integer)'::regprocedure;

\c :home
DROP DATABASE awa_maintenance_guarantees;
