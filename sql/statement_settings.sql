-- statement_settings: the worker path's C functions carry no SET clause (docs/design.md §9,
-- "Statement settings"); every statement they prepare or run still resolves its operators and
-- functions through search_path = pg_catalog, pg_temp with jit off, whatever the caller's
-- settings, and the caller's settings are back when the call ends, normally or by an error.
\set VERBOSITY terse
\i sql/err.psql

-- The calls carry no SET clause.
SELECT p.oid::regprocedure AS function, p.prosecdef, p.proconfig
  FROM pg_proc p
 WHERE p.pronamespace = 'awa'::regnamespace
   AND p.proname IN ('insert_job_compat', 'insert_jobs', 'claim_ready_runtime', 'complete_jobs',
                     'heartbeat_jobs', 'wait_for_jobs', 'set_progress', 'set_jobs_progress')
 ORDER BY 1::text;

-- A caller's schema whose operators capture every unqualified comparison of text and of
-- bigint when it comes before pg_catalog in the search path.
CREATE SCHEMA settings_trap;
CREATE FUNCTION settings_trap.texteq(text, text) RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN RAISE EXCEPTION 'trapped: text = text through the caller''s search_path'; END $$;
CREATE FUNCTION settings_trap.int8eq(bigint, bigint) RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN RAISE EXCEPTION 'trapped: bigint = bigint through the caller''s search_path'; END $$;
CREATE OPERATOR settings_trap.= (LEFTARG = text, RIGHTARG = text, FUNCTION = settings_trap.texteq);
CREATE OPERATOR settings_trap.= (LEFTARG = bigint, RIGHTARG = bigint, FUNCTION = settings_trap.int8eq);
CREATE ROLE settings_caller;
GRANT awa_producer, awa_worker TO settings_caller;
GRANT USAGE ON SCHEMA settings_trap TO settings_caller;
SELECT awa.create_queue('settings_q') IS NOT NULL AS created;

-- A new session, so that every statement the calls need is prepared under the trap.
\c
\set VERBOSITY terse
\i sql/err.psql
SET ROLE settings_caller;
SET search_path = settings_trap, pg_catalog;
SET jit = on;
-- The trap works: an unqualified comparison in the caller's own statement is captured.
SELECT pg_temp.err($$SELECT 'a'::text = 'a'::text$$) AS caller_statement;

-- Enqueue: a new lane of a new queue (its sequence made), a unique key, an ordering key, a
-- batch, a scheduled job.
SELECT state, queue FROM awa.insert_job_compat('k', 'settings_q', p_unique_key => '\x01'::bytea);
SELECT state FROM awa.insert_job_compat('k', 'settings_new', p_ordering_key => '\x02'::bytea);
SELECT cardinality(awa.insert_jobs('settings_q', ARRAY['k', 'k', 'k'])) AS batch;
SELECT state FROM awa.insert_job_compat('k', 'settings_q', p_run_at => now() + interval '1 hour');
SHOW search_path;
SHOW jit;

-- The worker path: claim, reports, completion, the work check.
CREATE TEMP TABLE claimed AS SELECT job_id, run_lease FROM awa.claim_ready_runtime('settings_q', 10);
SELECT count(*) AS claimed FROM claimed;
SELECT awa.set_progress(min(job_id), min(run_lease), '{"step": 1}') AS progress FROM claimed;
SELECT awa.set_jobs_progress(array_agg(job_id), array_agg(run_lease),
                             array_agg('{"step": 2}'::jsonb)) AS progress FROM claimed;
SELECT awa.heartbeat_jobs(array_agg(job_id), array_agg(run_lease)) AS beats FROM claimed;
SELECT count(*) AS completed
  FROM awa.complete_jobs((SELECT array_agg(job_id) FROM claimed), (SELECT array_agg(run_lease) FROM claimed));
SELECT awa.wait_for_jobs('settings_q', 0) AS work;
SHOW search_path;
SHOW jit;

-- A call that fails after its statements ran: the caller's settings are back after the
-- rollback to the savepoint, and after the failed transaction.
BEGIN;
SAVEPOINT before_duplicate;
SELECT pg_temp.err($$SELECT awa.insert_job_compat('k', 'settings_q', p_unique_key => '\x01'::bytea)$$) AS duplicate;
SHOW search_path;
ROLLBACK TO before_duplicate;
SHOW search_path;
COMMIT;
BEGIN;
SELECT awa.insert_job_compat('k', 'settings_q', p_unique_key => '\x01'::bytea);
ROLLBACK;
SHOW search_path;
SHOW jit;

DROP TABLE claimed;
RESET ROLE;
RESET search_path;
DROP SCHEMA settings_trap CASCADE;
REVOKE awa_producer, awa_worker FROM settings_caller;
DROP ROLE settings_caller;
