-- Privileges of the operations API (docs/design.md §12): only awa_admin may cancel, delete, move, age,
-- retry from the DLQ, pause/resume, set flow-control limits or change queue_meta; the views (awa.maintenance_status
-- included) and counts are readable by awa_admin and pg_monitor; PUBLIC gets nothing.
CREATE EXTENSION IF NOT EXISTS pgtap;
CREATE EXTENSION IF NOT EXISTS awa_shard;
BEGIN;
SELECT plan(86);

CREATE TEMP TABLE ops_admin_fns (sig text);
INSERT INTO ops_admin_fns VALUES
    ('awa.cancel_job(bigint, text)'), ('awa.delete_job(bigint, text)'),
    ('awa.age_waiting_priorities(interval, bigint, text)'),
    ('awa.move_queue(bigint, text, bigint, text)'),
    ('awa.retry_from_dlq(bigint, text, bigint, timestamptz, text)'),
    ('awa.move_failed_to_dlq(bigint, text, text)'), ('awa.list_dlq(text, bigint)'),
    ('awa.pause_queue(text)'), ('awa.resume_queue(text)'), ('awa.set_enqueue_shards(text, bigint)'),
    ('awa.reset_shard_stats()'), ('awa.create_queue(text, bigint, boolean)'), ('awa.create_lanes(text, bigint[])'), ('awa.drop_queue(text, boolean)'),
    ('awa.purge_queue(text)'), ('awa.set_queue_dlq(text, boolean)'), ('awa.list_jobs(text, awa.job_state, bigint)'),
    ('awa.set_rate_limit(text, double precision, bigint, boolean)'),
    ('awa.set_concurrency_limit(text, bigint, boolean)');

-- Admin functions: awa_admin yes; producers, workers, monitors and PUBLIC no.
SELECT ok(bool_and(has_function_privilege('awa_admin', sig, 'EXECUTE')), 'awa_admin may run every admin function')
  FROM ops_admin_fns;
SELECT ok(NOT bool_or(has_function_privilege('awa_producer', sig, 'EXECUTE')), 'awa_producer may run no admin function')
  FROM ops_admin_fns;
SELECT ok(NOT bool_or(has_function_privilege('awa_worker', sig, 'EXECUTE')), 'awa_worker may run no admin function')
  FROM ops_admin_fns;
SELECT ok(NOT bool_or(has_function_privilege('pg_monitor', sig, 'EXECUTE')), 'pg_monitor may run no admin function')
  FROM ops_admin_fns;
SELECT ok(NOT bool_or(has_function_privilege('public', sig, 'EXECUTE')), 'PUBLIC may run no admin function')
  FROM ops_admin_fns;

-- Reads.
SELECT ok(has_table_privilege(r, v, 'SELECT'), r || ' may read ' || v)
  FROM unnest(ARRAY['awa_admin', 'pg_monitor']) r, unnest(ARRAY['awa.shard_lag', 'awa.shard_stats', 'awa.jobs', 'awa.queues', 'awa.maintenance_status']) v;
SELECT ok(NOT has_table_privilege(r, v, 'SELECT'), r || ' may not read ' || v)
  FROM unnest(ARRAY['awa_producer', 'awa_worker', 'public']) r, unnest(ARRAY['awa.shard_lag', 'awa.shard_stats', 'awa.jobs', 'awa.queues', 'awa.maintenance_status']) v;
-- What pg_monitor reads in awa, all of it (docs/api.md, "Roles"): the views, and of what is
-- behind them the lanes' cursors and the schedules only, no job data.
SELECT is(array_agg(c.relname::text ORDER BY c.relname),
          ARRAY['cron_schedules', 'jobs', 'lane_cursors', 'maintenance_status', 'queues', 'schedules', 'shard_lag',
                'shard_stats'],
          'pg_monitor reads the views, awa.lane_cursors and awa.cron_schedules, nothing else')
  FROM pg_class c
 WHERE c.relnamespace = 'awa'::regnamespace AND c.relkind IN ('r', 'p', 'v', 'm', 'f')
   AND has_table_privilege('pg_monitor', c.oid, 'SELECT');
SELECT ok(has_function_privilege(r, 'awa.queue_depth(text)', 'EXECUTE'), r || ' may poll queue_depth')
  FROM unnest(ARRAY['awa_admin', 'awa_worker', 'pg_monitor']) r;
SELECT ok(NOT has_function_privilege(r, 'awa.queue_depth(text)', 'EXECUTE'), r || ' may not poll queue_depth')
  FROM unnest(ARRAY['awa_producer', 'public']) r;
SELECT ok(has_function_privilege(r, f, 'EXECUTE'), r || ' may call ' || f)
  FROM unnest(ARRAY['awa_producer', 'awa_worker', 'awa_admin']) r, unnest(ARRAY['awa.get_job(bigint)', 'awa.get_job(text, bigint)']) f;
SELECT ok(NOT has_function_privilege(r, f, 'EXECUTE'), r || ' may not call ' || f)
  FROM unnest(ARRAY['pg_monitor', 'public']) r, unnest(ARRAY['awa.get_job(bigint)', 'awa.get_job(text, bigint)']) f;
SELECT ok(has_function_privilege(r, 'awa.queue_counts_exact(text)', 'EXECUTE'), r || ' may count')
  FROM unnest(ARRAY['awa_admin', 'pg_monitor']) r;
SELECT ok(NOT has_function_privilege(r, 'awa.queue_counts_exact(text)', 'EXECUTE'), r || ' may not count')
  FROM unnest(ARRAY['awa_producer', 'awa_worker', 'public']) r;

-- queue_meta (pause, shard count): only awa_admin writes it, every column but the per-key
-- concurrency limit (set_concurrency_limit records the attempts already running; by hand they
-- would escape it).
SELECT ok(has_column_privilege('awa_admin', 'awa.queue_meta', c, p), 'awa_admin may ' || p || ' queue_meta.' || c)
  FROM unnest(ARRAY['INSERT', 'UPDATE']) p, unnest(ARRAY['queue', 'paused', 'enqueue_shards', 'concurrency_limit']) c;
SELECT ok(has_table_privilege('awa_admin', 'awa.queue_meta', 'DELETE'), 'awa_admin may DELETE queue_meta');
SELECT ok(NOT has_column_privilege('awa_admin', 'awa.queue_meta', 'key_concurrency_limit', p),
          'awa_admin may not ' || p || ' queue_meta.key_concurrency_limit')
  FROM unnest(ARRAY['INSERT', 'UPDATE']) p;
SELECT throws_ok($$SET LOCAL ROLE awa_admin; UPDATE awa.queue_meta SET key_concurrency_limit = 1$$, '42501', NULL,
                 'awa_admin cannot set a per-key limit by hand');
SELECT throws_ok($$SET LOCAL ROLE awa_admin; INSERT INTO awa.queue_meta (queue, key_concurrency_limit) VALUES ('x', 1)$$,
                 '42501', NULL, 'awa_admin cannot insert a per-key limit by hand');
SELECT ok(NOT has_table_privilege(r, 'awa.queue_meta', p), r || ' may not ' || p || ' queue_meta')
  FROM unnest(ARRAY['awa_producer', 'awa_worker', 'pg_monitor']) r, unnest(ARRAY['INSERT', 'UPDATE', 'DELETE']) p;

-- The same, enforced: the calls fail with 42501 under the other roles.
SELECT throws_ok($$SET LOCAL ROLE awa_worker; SELECT awa.cancel_job(1)$$, '42501', NULL, 'a worker cannot cancel');
SELECT throws_ok($$SET LOCAL ROLE awa_producer; SELECT awa.move_queue(1, 'x')$$, '42501', NULL, 'a producer cannot move');
SELECT throws_ok($$SET LOCAL ROLE awa_worker; SELECT awa.retry_from_dlq(1)$$, '42501', NULL, 'a worker cannot retry from the DLQ');
SELECT throws_ok($$SET LOCAL ROLE pg_monitor; SELECT awa.pause_queue('x')$$, '42501', NULL, 'a monitor cannot pause');
SELECT throws_ok($$SET LOCAL ROLE awa_worker; UPDATE awa.queue_meta SET enqueue_shards = 2$$, '42501', NULL,
                 'a worker cannot change queue_meta');
SELECT throws_ok($$SET LOCAL ROLE awa_producer; INSERT INTO awa.queue_meta (queue, enqueue_shards) VALUES ('x', 2)$$,
                 '42501', NULL, 'a producer cannot change queue_meta');
SELECT throws_ok($$SET LOCAL ROLE awa_worker; SELECT * FROM awa.jobs$$, '42501', NULL, 'a worker cannot read awa.jobs');

-- awa_admin and pg_monitor really can (the roles' grants reach through the views).
SELECT lives_ok($$SET LOCAL ROLE awa_admin; SELECT awa.create_queue('ops_tap_priv'); SELECT awa.pause_queue('ops_tap_priv');
                  SELECT awa.resume_queue('ops_tap_priv'); SELECT awa.cancel_job(-1); SELECT awa.set_enqueue_shards('ops_tap_priv', 2);
                  SELECT awa.set_queue_dlq('ops_tap_priv', true); SELECT awa.purge_queue('ops_tap_priv');
                  SELECT * FROM awa.list_jobs('ops_tap_priv'); RESET ROLE$$,
                'awa_admin can create, pause, resume, cancel, set the width and the DLQ setting, purge and list');
SELECT lives_ok($$SET LOCAL ROLE pg_monitor; SELECT count(*) FROM awa.shard_lag; SELECT count(*) FROM awa.shard_stats;
                  SELECT count(*) FROM awa.jobs; SELECT * FROM awa.queue_counts_exact('ops_tap_priv');
                  SELECT count(*) FROM awa.queues; SELECT awa.queue_depth('ops_tap_priv');
                  SELECT count(*) FROM awa.maintenance_status; RESET ROLE$$,
                'pg_monitor can read the views, counts and depth');
SELECT lives_ok($$SET LOCAL ROLE awa_admin; SELECT awa.drop_queue('ops_tap_priv'); RESET ROLE$$, 'awa_admin can drop a queue');
SELECT throws_ok($$SET LOCAL ROLE awa_producer; SELECT awa.drop_queue('x')$$, '42501', NULL, 'a producer cannot drop a queue');
SELECT throws_ok($$SET LOCAL ROLE awa_worker; SELECT awa.create_queue('x')$$, '42501', NULL, 'a worker cannot create a queue');
SELECT is(current_user::text, session_user::text, 'back to the session role');

SELECT * FROM finish();
ROLLBACK;
