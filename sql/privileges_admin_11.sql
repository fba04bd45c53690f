-- privileges_admin_11: who may call the administration and flow-control functions 1.1 added
-- (docs/api.md "Roles and privileges"): awa_admin each of them, awa_producer, awa_worker and
-- a role with no grant (what PUBLIC may) none; every security definer function pins its
-- search_path; the extension installs as a superuser only (superuser = true, not trusted).
\set VERBOSITY terse
\i sql/err.psql
SET client_min_messages = warning;
DROP ROLE IF EXISTS priv11_nobody;
DROP ROLE IF EXISTS priv11_owner;
RESET client_min_messages;
CREATE ROLE priv11_nobody;
CREATE ROLE priv11_owner CREATEDB;

SELECT awa.create_queue('priv11_q');
SELECT (awa.insert_job_compat('priv11', 'priv11_q')).id AS job \gset

-- Run p_sql as p_role: 'ok', or the SQLSTATE of its error; 42501 is the refusal.
CREATE FUNCTION pg_temp.as_role(p_role text, p_sql text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    v_result text;
BEGIN
    EXECUTE format('SET LOCAL ROLE %I', p_role);
    BEGIN
        EXECUTE p_sql;
        v_result := 'ok';
    EXCEPTION WHEN OTHERS THEN
        v_result := SQLSTATE;
    END;
    RESET ROLE;
    RETURN v_result;
END
$$;

-- Each call once per role, in a subtransaction rolled back (its outcome carried out by the
-- error), so the admin's calls change nothing the next role sees.
CREATE TEMP TABLE calls (n int, call text);
INSERT INTO calls VALUES
    (1, $$SELECT awa.set_queue_retention('priv11_q', '1 day', '1 day')$$),
    (2, $$SELECT awa.expire_retention()$$),
    (3, $$SELECT awa.set_rate_limit('priv11_q', NULL)$$),
    (4, $$SELECT awa.set_concurrency_limit('priv11_q', 5)$$),
    (5, $$SELECT awa.schedule('priv11_s', '@hourly', 'priv11', 'priv11_q')$$),
    (6, $$SELECT awa.pause_schedule('priv11_s')$$),
    (7, $$SELECT awa.resume_schedule('priv11_s')$$),
    (8, $$SELECT awa.unschedule('priv11_s')$$),
    (9, $$SELECT awa.run_schedules()$$),
    (10, format($$SELECT awa.move_queue(%s, 'priv11_other')$$, :job)),
    (11, format($$SELECT awa.retry_from_dlq(%s)$$, :job)),
    (12, $$SELECT awa.cancel_jobs('priv11_q')$$),
    (13, $$SELECT awa.retry_jobs('priv11_q')$$),
    (14, $$SELECT awa.list_jobs('priv11_q')$$),
    (15, $$SELECT awa.pause_queue('priv11_q')$$),
    (16, $$SELECT awa.resume_queue('priv11_q')$$),
    (17, $$UPDATE awa.queue_meta SET completed_retention = '1 hour' WHERE queue = 'priv11_q'$$),
    (18, $$SELECT * FROM awa.citus_setup()$$);
CREATE TEMP TABLE outcomes (n int, role text, outcome text);
DO $$
DECLARE
    c record;
    r text;
    v text;
BEGIN
    FOR c IN SELECT * FROM calls ORDER BY n LOOP
        FOREACH r IN ARRAY ARRAY['awa_admin', 'awa_producer', 'awa_worker', 'priv11_nobody'] LOOP
            BEGIN
                v := pg_temp.as_role(r, c.call);
                RAISE EXCEPTION '%', v USING ERRCODE = 'P0001';
            EXCEPTION WHEN raise_exception THEN
                INSERT INTO outcomes VALUES (c.n, r, SQLERRM);
            END;
        END LOOP;
    END LOOP;
END
$$;
SELECT c.n, split_part(c.call, '(', 1) AS call,
       max(o.outcome) FILTER (WHERE o.role = 'awa_admin') AS admin,
       max(o.outcome) FILTER (WHERE o.role = 'awa_producer') AS producer,
       max(o.outcome) FILTER (WHERE o.role = 'awa_worker') AS worker,
       max(o.outcome) FILTER (WHERE o.role = 'priv11_nobody') AS nobody
  FROM calls c JOIN outcomes o ON o.n = c.n GROUP BY c.n, c.call ORDER BY c.n;
-- Nothing the admin calls did is left behind.
SELECT count(*) AS schedules FROM awa.cron_schedules WHERE name = 'priv11_s';
SELECT completed_retention, concurrency_limit, paused FROM awa.queue_meta WHERE queue = 'priv11_q';

-- Every security definer function of the extension pins search_path to pg_catalog, pg_temp
-- with a SET clause, but the worker path's C functions, which pin it on first need (regress
-- test statement_settings); no function of the extension is executable by PUBLIC.
SELECT count(*) AS definer_without_pinned_path
  FROM pg_proc p
 WHERE p.pronamespace = 'awa'::regnamespace AND p.prosecdef
   AND NOT coalesce('search_path=pg_catalog, pg_temp' = ANY (p.proconfig), false)
   AND NOT (p.prolang = (SELECT oid FROM pg_language WHERE lanname = 'c')
            AND p.proname IN ('insert_job_compat', 'insert_jobs', 'claim_ready_runtime', 'complete_jobs',
                              'heartbeat_jobs', 'wait_for_jobs', 'set_progress', 'set_jobs_progress'));
SELECT count(*) AS public_executable
  FROM pg_proc p, aclexplode(coalesce(p.proacl, acldefault('f', p.proowner))) a
 WHERE p.pronamespace = 'awa'::regnamespace AND a.grantee = 0 AND a.privilege_type = 'EXECUTE';

-- A non-superuser database owner cannot install the extension (superuser = true in the
-- control file): 42501, in a database of its own.
SELECT current_database() AS home \gset
SET ROLE priv11_owner;
CREATE DATABASE awa_priv11_owned;
RESET ROLE;
\c awa_priv11_owned
SET ROLE priv11_owner;
\set ON_ERROR_STOP 0
CREATE EXTENSION awa_shard;
\set ON_ERROR_STOP 1
RESET ROLE;
SELECT count(*) AS installed FROM pg_extension WHERE extname = 'awa_shard';
\c :home
DROP DATABASE awa_priv11_owned;
SELECT awa.drop_queue('priv11_q', true) >= 0 AS dropped;
DROP ROLE priv11_nobody;
DROP ROLE priv11_owner;
