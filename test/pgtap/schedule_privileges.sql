-- Privileges of periodic jobs (docs/api.md, "Periodic jobs"): only awa_admin creates,
-- replaces, pauses, resumes, removes and runs schedules; awa.schedules is readable by
-- awa_admin and pg_monitor (as awa.queues); the table is written only through the
-- functions; the cron helpers are internal; PUBLIC gets nothing.
CREATE EXTENSION IF NOT EXISTS pgtap;
CREATE EXTENSION IF NOT EXISTS awa_shard;
BEGIN;
SELECT plan(54);

CREATE TEMP TABLE sched_admin_fns (sig text);
INSERT INTO sched_admin_fns VALUES
    ('awa.schedule(text, text, text, text, jsonb, text, bigint, bigint, jsonb, text[])'),
    ('awa.unschedule(text)'), ('awa.pause_schedule(text)'), ('awa.resume_schedule(text)'),
    ('awa.run_schedules(bigint)');

SELECT ok(bool_and(has_function_privilege('awa_admin', sig, 'EXECUTE')), 'awa_admin may manage and run schedules')
  FROM sched_admin_fns;
SELECT ok(NOT bool_or(has_function_privilege(r, sig, 'EXECUTE')), r || ' may not manage or run schedules')
  FROM sched_admin_fns, unnest(ARRAY['awa_producer', 'awa_worker', 'pg_monitor', 'public']) r GROUP BY r;
SELECT ok(NOT has_function_privilege(r, f, 'EXECUTE'), r || ' may not call ' || f)
  FROM unnest(ARRAY['awa_producer', 'awa_worker', 'awa_admin', 'pg_monitor', 'public']) r,
       unnest(ARRAY['awa._cron_next(text, text, timestamptz)',
                    'awa._cron_latest(text, text, timestamptz, timestamptz)']) f;

-- The view: awa_admin and pg_monitor, like awa.queues.
SELECT ok(has_table_privilege(r, 'awa.schedules', 'SELECT'), r || ' may read awa.schedules')
  FROM unnest(ARRAY['awa_admin', 'pg_monitor']) r;
SELECT ok(NOT has_table_privilege(r, 'awa.schedules', 'SELECT'), r || ' may not read awa.schedules')
  FROM unnest(ARRAY['awa_producer', 'awa_worker', 'public']) r;
-- The table: awa_admin and pg_monitor read it (as they read the view), nobody but the owner
-- writes it directly.
SELECT ok(has_table_privilege(r, 'awa.cron_schedules', 'SELECT'), r || ' may read cron_schedules')
  FROM unnest(ARRAY['awa_admin', 'pg_monitor']) r;
SELECT ok(NOT has_table_privilege(r, 'awa.cron_schedules', 'SELECT'), r || ' may not read cron_schedules')
  FROM unnest(ARRAY['awa_producer', 'awa_worker', 'public']) r;
-- Nobody but the owner writes it directly.
SELECT ok(NOT has_table_privilege(r, 'awa.cron_schedules', p), r || ' may not ' || p || ' cron_schedules')
  FROM unnest(ARRAY['awa_admin', 'awa_producer', 'awa_worker', 'pg_monitor']) r, unnest(ARRAY['INSERT', 'UPDATE', 'DELETE']) p;

-- The functions are security definers with a pinned search_path.
SELECT ok(p.prosecdef AND p.proconfig @> ARRAY['search_path=pg_catalog, pg_temp'], p.oid::regprocedure::text || ' is a security definer with a pinned search_path')
  FROM pg_proc p WHERE p.oid IN (SELECT sig::regprocedure FROM sched_admin_fns);

-- Enforced: the calls fail with 42501 under the other roles.
SELECT throws_ok($$SET LOCAL ROLE awa_producer; SELECT awa.schedule('x', '@daily', 'k')$$, '42501', NULL,
                 'a producer cannot schedule');
SELECT throws_ok($$SET LOCAL ROLE awa_worker; SELECT awa.unschedule('x')$$, '42501', NULL, 'a worker cannot unschedule');
SELECT throws_ok($$SET LOCAL ROLE pg_monitor; SELECT awa.pause_schedule('x')$$, '42501', NULL, 'a monitor cannot pause a schedule');
SELECT throws_ok($$SET LOCAL ROLE awa_worker; SELECT awa.run_schedules()$$, '42501', NULL, 'a worker cannot run the step');
SELECT throws_ok($$SET LOCAL ROLE awa_worker; SELECT * FROM awa.schedules$$, '42501', NULL, 'a worker cannot read awa.schedules');
SELECT throws_ok($$SET LOCAL ROLE awa_admin; INSERT INTO awa.cron_schedules (name, cron, timezone, kind, queue, args, priority,
                  max_attempts, metadata, tags) VALUES ('x', '@daily', 'UTC', 'k', 'q', '{}', 2, 25, '{}', '{}')$$, '42501', NULL,
                 'awa_admin writes schedules only through the functions');

-- awa_admin and pg_monitor really can (the grants reach through the functions and the view).
SELECT lives_ok($$SET LOCAL ROLE awa_admin; SELECT awa.schedule('tap_sched', '*/5 * * * *', 'k', 'tap_sched_q', p_timezone => 'Europe/Berlin');
                  SELECT awa.pause_schedule('tap_sched'); SELECT awa.resume_schedule('tap_sched'); SELECT awa.run_schedules();
                  SELECT count(*) FROM awa.schedules; RESET ROLE$$,
                'awa_admin can schedule, pause, resume, run the step and read the view');
SELECT is((SELECT count(*)::int FROM awa.schedules WHERE name = 'tap_sched' AND NOT paused), 1, 'the schedule is there, resumed');
SELECT lives_ok($$SET LOCAL ROLE pg_monitor; SELECT count(*) FROM awa.schedules; RESET ROLE$$, 'pg_monitor can read awa.schedules');
SELECT lives_ok($$SET LOCAL ROLE awa_admin; SELECT awa.unschedule('tap_sched'); RESET ROLE$$, 'awa_admin can unschedule');
SELECT is((SELECT count(*)::int FROM awa.schedules WHERE name = 'tap_sched'), 0, 'the schedule is gone');
SELECT is(current_user::text, session_user::text, 'back to the session role');

SELECT * FROM finish();
ROLLBACK;
