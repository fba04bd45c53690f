-- The SQL API as callers see it: signatures, returned columns, volatility, and the
-- security properties every function must have (docs/design.md §12: SECURITY DEFINER where roles without
-- table rights call in, search_path pinned to pg_catalog, pg_temp).
BEGIN;
CREATE EXTENSION IF NOT EXISTS pgtap;
CREATE EXTENSION IF NOT EXISTS awa_shard;
SELECT plan(82);

-- Signatures of the public functions.
SELECT has_function('awa', 'insert_job_compat',
    ARRAY['text', 'text', 'jsonb', 'awa.job_state', 'bigint', 'bigint', 'timestamp with time zone', 'jsonb',
          'text[]', 'bytea', 'bit', 'bytea', 'text'], 'insert_job_compat has the 12-argument signature (bigint priority and attempts), then p_concurrency_key');
SELECT is((SELECT count(*)::int FROM pg_proc WHERE proname = 'insert_job_compat' AND pronamespace = 'awa'::regnamespace), 1,
          'insert_job_compat has exactly one overload (11-argument calls are not ambiguous)');
SELECT has_function('awa', 'insert_jobs',
    ARRAY['text', 'text[]', 'jsonb[]', 'bigint[]', 'timestamp with time zone[]', 'bytea[]', 'bigint[]', 'jsonb[]',
          'bytea[]', 'bit[]', 'boolean', 'text[]'], 'insert_jobs signature');
SELECT has_function('awa', 'reserve_enqueue_seq', ARRAY['text', 'bigint', 'bigint', 'bigint'], 'reserve_enqueue_seq signature');
SELECT has_function('awa', 'shard_for_enqueue', ARRAY['text', 'bigint', 'bytea'], 'shard_for_enqueue signature');
SELECT has_function('awa', 'ordering_key_hash', ARRAY['bytea'], 'ordering_key_hash(bytea)');
SELECT has_function('awa', 'ordering_key_hash', ARRAY['text'], 'ordering_key_hash(text)');
SELECT has_function('awa', 'shard_for_ordering_key', ARRAY['bytea', 'bigint'], 'shard_for_ordering_key(bytea, bigint)');
SELECT has_function('awa', 'shard_for_ordering_key', ARRAY['text', 'bigint'], 'shard_for_ordering_key(text, bigint)');
SELECT has_function('awa', 'claim_ready_runtime', ARRAY['text', 'bigint', 'double precision', 'double precision'],
                    'claim_ready_runtime signature');
-- The worker-facing calls end with their routing argument p_queue text DEFAULT NULL (1.1;
-- p_from_queue for move_queue and retry_from_dlq, whose p_queue is the destination).
SELECT has_function('awa', 'complete_jobs', ARRAY['bigint[]', 'bigint[]', 'jsonb[]', 'text'], 'complete_jobs signature (results and p_queue since 1.1)');
SELECT has_function('awa', 'fail_job', ARRAY['bigint', 'bigint', 'text', 'interval', 'text'], 'fail_job signature');
SELECT has_function('awa', 'fail_job_to_dlq', ARRAY['bigint', 'bigint', 'text', 'text', 'text'], 'fail_job_to_dlq signature');
SELECT has_function('awa', 'retry_job_after', ARRAY['bigint', 'bigint', 'interval', 'text'], 'retry_job_after signature');
SELECT has_function('awa', 'snooze_job', ARRAY['bigint', 'bigint', 'interval', 'text'], 'snooze_job signature');
SELECT has_function('awa', 'heartbeat_jobs', ARRAY['bigint[]', 'bigint[]', 'text'], 'heartbeat_jobs signature');
SELECT has_function('awa', 'set_progress', ARRAY['bigint', 'bigint', 'jsonb', 'text'], 'set_progress signature');
SELECT has_function('awa', 'set_jobs_progress', ARRAY['bigint[]', 'bigint[]', 'jsonb[]', 'text'], 'set_jobs_progress signature');
SELECT has_function('awa', 'cancel_job', ARRAY['bigint', 'text'], 'cancel_job signature');
SELECT has_function('awa', 'delete_job', ARRAY['bigint', 'text'], 'delete_job signature');
SELECT has_function('awa', 'move_queue', ARRAY['bigint', 'text', 'bigint', 'text'], 'move_queue signature');
SELECT has_function('awa', 'retry_from_dlq', ARRAY['bigint', 'text', 'bigint', 'timestamp with time zone', 'text'], 'retry_from_dlq signature');
SELECT is((SELECT array_agg(p.oid::regprocedure::text ORDER BY p.oid::regprocedure::text) FROM pg_proc p
            WHERE p.pronamespace = 'awa'::regnamespace
              AND p.proname IN ('complete_jobs', 'heartbeat_jobs', 'set_progress', 'set_jobs_progress', 'fail_job', 'fail_job_to_dlq',
                                'retry_job_after', 'snooze_job', 'cancel_job', 'delete_job', 'move_queue', 'retry_from_dlq',
                                'wait_for_job', 'move_failed_to_dlq')
              AND NOT (p.proargnames[p.pronargs] IN ('p_queue', 'p_from_queue')
                       AND p.proargtypes[p.pronargs - 1] = 'text'::regtype
                       AND pg_get_expr(p.proargdefaults, 0) LIKE '%NULL::text')),
          NULL, 'every worker-facing call ends with its routing argument, text DEFAULT NULL');
SELECT has_function('awa', 'wait_for_job', ARRAY['bigint', 'bigint', 'text'], 'wait_for_job signature');
SELECT has_function('awa', 'cancel_jobs', ARRAY['text', 'text', 'awa.job_state[]', 'bigint'], 'cancel_jobs signature');
SELECT has_function('awa', 'retry_jobs', ARRAY['text', 'text', 'bigint'], 'retry_jobs signature');
SELECT has_function('awa', 'wait_for_jobs', ARRAY['text', 'bigint'], 'wait_for_jobs signature');
SELECT has_function('awa', 'rescue_stale_heartbeats', ARRAY['interval', 'bigint'], 'rescue_stale_heartbeats signature');
SELECT has_function('awa', 'rescue_expired_deadlines', ARRAY['bigint'], 'rescue_expired_deadlines signature');
SELECT has_function('awa', 'promote_due', ARRAY['bigint'], 'promote_due signature');
SELECT has_function('awa', 'create_queue', ARRAY['text', 'bigint', 'boolean'], 'create_queue signature');
SELECT has_function('awa', 'drop_queue', ARRAY['text', 'boolean'], 'drop_queue signature');
SELECT has_function('awa', 'purge_queue', ARRAY['text'], 'purge_queue signature');
SELECT has_function('awa', 'set_queue_dlq', ARRAY['text', 'boolean'], 'set_queue_dlq signature');
SELECT has_function('awa', 'queue_depth', ARRAY['text'], 'queue_depth signature');
SELECT has_function('awa', 'get_job', ARRAY['bigint'], 'get_job(job_id)');
SELECT has_function('awa', 'get_job', ARRAY['text', 'bigint'], 'get_job(queue, job_id)');
SELECT has_function('awa', 'list_jobs', ARRAY['text', 'awa.job_state', 'bigint'], 'list_jobs signature');

-- Return shapes.
SELECT is((SELECT prorettype::regtype::text FROM pg_proc WHERE oid = 'awa.insert_job_compat'::regproc), 'awa.job_row',
          'insert_job_compat returns awa.job_row');
SELECT is((SELECT array_agg(attname::text ORDER BY attnum) FROM pg_attribute
            WHERE attrelid = 'awa.job_row'::regclass AND attnum > 0 AND NOT attisdropped),
          ARRAY['id', 'kind', 'queue', 'args', 'state', 'priority', 'attempt', 'run_lease', 'max_attempts', 'run_at',
                'attempted_at', 'finalized_at', 'created_at', 'metadata', 'tags', 'errors', 'unique_key', 'unique_states',
                'ordering_key', 'enqueue_shard', 'lane_seq', 'progress', 'result', 'concurrency_key'],
          'awa.job_row columns');
SELECT is((SELECT prorettype::regtype::text FROM pg_proc WHERE oid = 'awa.insert_jobs'::regproc), 'bigint[]', 'insert_jobs returns bigint[]');
SELECT is((SELECT array_agg(n ORDER BY o) FROM pg_proc p,
                  unnest(p.proargnames, p.proargmodes::text[]) WITH ORDINALITY AS a(n, m, o)
            WHERE p.oid = 'awa.claim_ready_runtime'::regproc AND a.m = 't'),
          ARRAY['ready_slot', 'ready_generation', 'lane_seq', 'enqueue_shard', 'lease_slot', 'lease_generation', 'claim_slot',
                'receipt_id', 'job_id', 'kind', 'queue', 'args', 'lane_priority', 'priority', 'attempt', 'run_lease',
                'max_attempts', 'run_at', 'heartbeat_at', 'deadline_at', 'attempted_at', 'created_at', 'unique_key',
                'unique_states', 'ordering_key', 'payload'],
          'claim_ready_runtime returns the reference''s columns, lane_priority and the aged priority apart');
SELECT is((SELECT array_agg(n ORDER BY o) FROM pg_proc p,
                  unnest(p.proargnames, p.proargmodes::text[]) WITH ORDINALITY AS a(n, m, o)
            WHERE p.oid = 'awa.complete_jobs'::regproc AND a.m = 't'),
          ARRAY['job_id', 'run_lease'], 'complete_jobs returns (job_id, run_lease)');
SELECT is((SELECT prorettype::regtype::text FROM pg_proc WHERE oid = 'awa.fail_job'::regproc), 'awa.job_state', 'fail_job returns the new state');
SELECT is((SELECT prorettype::regtype::text FROM pg_proc WHERE oid = 'awa.wait_for_jobs'::regproc), 'boolean', 'wait_for_jobs returns boolean');
SELECT is((SELECT array_agg(ROW(prorettype::regtype, proretset)::text ORDER BY oid::regprocedure::text) FROM pg_proc
            WHERE pronamespace = 'awa'::regnamespace AND proname IN ('get_job', 'list_jobs')),
          ARRAY['(awa.job_row,t)', '(awa.job_row,t)', '(awa.job_row,t)'],
          'get_job and list_jobs return awa.job_row rows (none when nothing matches)');
SELECT is((SELECT array_agg(prorettype::regtype::text ORDER BY proname) FROM pg_proc
            WHERE pronamespace = 'awa'::regnamespace AND proname IN ('pause_queue', 'resume_queue')),
          ARRAY['boolean', 'boolean'], 'pause_queue and resume_queue return whether they changed the queue');
SELECT is((SELECT array_agg(attname::text ORDER BY attnum) FROM pg_attribute
            WHERE attrelid = 'awa.queues'::regclass AND attnum > 0),
          ARRAY['queue', 'enqueue_shards', 'paused', 'dlq_enabled', 'depth', 'available', 'scheduled', 'retryable', 'running',
                'completed', 'failed', 'cancelled', 'dlq', 'oldest_waiting_age', 'rate_per_second', 'rate_burst',
                'concurrency_limit', 'completed_retention', 'failed_retention', 'key_concurrency_limit',
                'key_rate_per_second', 'key_rate_burst'],
          'awa.queues columns');
SELECT enum_has_labels('awa', 'job_state',
    ARRAY['scheduled', 'available', 'running', 'completed', 'retryable', 'failed', 'cancelled', 'waiting_external'],
    'awa.job_state labels in order');

-- Calls as the reference's callers write them.
SELECT lives_ok($$SELECT awa.insert_job_compat('k', 'tap_api_q', '{}', 'available', 2::smallint, 25::smallint, NULL, '{}', '{}', NULL, NULL)$$,
                'an 11-argument positional call resolves');
SELECT lives_ok($$SELECT awa.insert_job_compat('k')$$, 'a one-argument call uses the defaults');
SELECT is((SELECT count(*)::int FROM awa.claim_ready_runtime('tap_api_q', 10)), 1, 'claim_ready_runtime(queue, batch) uses its defaults');

-- Volatility, strictness and parallel safety.
SELECT volatility_is('awa', 'ordering_key_hash', ARRAY['bytea'], 'immutable', 'ordering_key_hash(bytea) is immutable');
SELECT volatility_is('awa', 'ordering_key_hash', ARRAY['text'], 'immutable', 'ordering_key_hash(text) is immutable');
SELECT volatility_is('awa', 'shard_for_ordering_key', ARRAY['bytea', 'bigint'], 'immutable', 'shard_for_ordering_key is immutable');
SELECT is_strict('awa', 'ordering_key_hash', ARRAY['bytea'], 'ordering_key_hash is strict (NULL key -> NULL)');
SELECT isnt_strict('awa', 'shard_for_ordering_key', ARRAY['bytea', 'bigint'],
                   'shard_for_ordering_key is not strict (a NULL shard count must raise)');
SELECT is((SELECT array_agg(DISTINCT proparallel::text) FROM pg_proc
            WHERE pronamespace = 'awa'::regnamespace AND proname IN ('ordering_key_hash', 'shard_for_ordering_key')),
          ARRAY['s'], 'the hash functions are parallel safe');
SELECT volatility_is('awa', 'insert_job_compat',
    ARRAY['text', 'text', 'jsonb', 'awa.job_state', 'bigint', 'bigint', 'timestamp with time zone', 'jsonb',
          'text[]', 'bytea', 'bit', 'bytea', 'text'], 'volatile', 'insert_job_compat is volatile');
SELECT volatility_is('awa', 'claim_ready_runtime', ARRAY['text', 'bigint', 'double precision', 'double precision'], 'volatile',
                     'claim_ready_runtime is volatile');
SELECT volatility_is('awa', 'shard_for_enqueue', ARRAY['text', 'bigint', 'bytea'], 'volatile',
                     'shard_for_enqueue is volatile (rotor, current width)');

-- Security: what producer and worker roles call runs as the owner, with a pinned search_path.
SELECT is((SELECT array_agg(p.oid::regprocedure::text ORDER BY p.oid::regprocedure::text) FROM pg_proc p
            WHERE p.oid IN ('awa.insert_job_compat'::regproc, 'awa.insert_jobs'::regproc, 'awa.reserve_enqueue_seq'::regproc,
                            'awa.shard_for_enqueue'::regproc, 'awa.claim_ready_runtime'::regproc, 'awa.complete_jobs'::regproc,
                            'awa.fail_job'::regproc, 'awa.fail_job_to_dlq'::regproc, 'awa.retry_job_after'::regproc,
                            'awa.snooze_job'::regproc, 'awa.heartbeat_jobs'::regproc, 'awa.wait_for_jobs'::regproc,
                            'awa.set_progress'::regproc, 'awa.set_jobs_progress'::regproc, 'awa.wait_for_job'::regproc,
                            'awa.rescue_stale_heartbeats'::regproc, 'awa.rescue_expired_deadlines'::regproc,
                            'awa.promote_due'::regproc, 'awa.queue_enqueue_shards'::regproc,
                            'awa.get_job(bigint)'::regprocedure, 'awa.get_job(text, bigint)'::regprocedure,
                            'awa.queue_depth'::regproc, 'awa.list_jobs'::regproc, 'awa.create_queue'::regproc,
                            'awa.drop_queue'::regproc, 'awa.purge_queue'::regproc, 'awa.set_queue_dlq'::regproc,
                            'awa.pause_queue'::regproc, 'awa.resume_queue'::regproc)
              AND NOT p.prosecdef),
          NULL, 'every role-facing function is SECURITY DEFINER');
-- The worker path's C functions pin their statements' search_path on first need instead of
-- with a SET clause (docs/design.md §2, "Statement settings"; regress test statement_settings).
SELECT is((SELECT array_agg(p.proname::text ORDER BY 1) FROM pg_proc p
            WHERE p.pronamespace = 'awa'::regnamespace AND p.prosecdef
              AND NOT coalesce(p.proconfig @> ARRAY['search_path=pg_catalog, pg_temp'], false)),
          ARRAY['claim_ready_runtime', 'complete_jobs', 'heartbeat_jobs', 'insert_job_compat', 'insert_jobs',
                'set_jobs_progress', 'set_progress', 'wait_for_jobs'],
          'every other SECURITY DEFINER function pins search_path = pg_catalog, pg_temp with a SET clause');
SELECT is((SELECT array_agg(p.proname::text ORDER BY 1) FROM pg_proc p
            WHERE p.pronamespace = 'awa'::regnamespace AND p.prosecdef
              AND NOT coalesce(p.proconfig @> ARRAY['search_path=pg_catalog, pg_temp'], false)
              AND p.prolang <> (SELECT oid FROM pg_language WHERE lanname = 'c')),
          NULL, 'a SECURITY DEFINER function without the SET clause is a C function');
SELECT is((SELECT array_agg(p.oid::regprocedure::text ORDER BY 1) FROM pg_proc p
            WHERE p.pronamespace = 'awa'::regnamespace AND p.prolang <> (SELECT oid FROM pg_language WHERE lanname = 'c')
              AND NOT coalesce(p.proconfig @> ARRAY['search_path=pg_catalog, pg_temp'], false)),
          NULL, 'every SQL and PL/pgSQL function pins search_path = pg_catalog, pg_temp');
SELECT is((SELECT array_agg(p.oid::regprocedure::text ORDER BY 1) FROM pg_proc p
            WHERE p.pronamespace = 'awa'::regnamespace AND p.prosecdef
              AND p.oid NOT IN (SELECT d.objid FROM pg_depend d JOIN pg_extension e ON e.oid = d.refobjid
                                 WHERE e.extname = 'awa_shard' AND d.classid = 'pg_proc'::regclass AND d.deptype = 'e')),
          NULL, 'every SECURITY DEFINER function in awa belongs to the extension');
SELECT is((SELECT count(*)::int FROM pg_proc p
            WHERE p.pronamespace = 'awa'::regnamespace
              AND p.oid NOT IN (SELECT d.objid FROM pg_depend d JOIN pg_extension e ON e.oid = d.refobjid
                                 WHERE e.extname = 'awa_shard' AND d.classid = 'pg_proc'::regclass AND d.deptype = 'e')),
          0, 'every function in awa belongs to the extension');

-- Tables and settings callers rely on.
SELECT has_table('awa', t, 'table awa.' || t) FROM unnest(ARRAY['queue_meta', 'ready_entries', 'done_entries', 'deferred_jobs',
    'dlq_entries', 'claim_batches', 'leases', 'queue_enqueue_heads', 'queue_claim_heads', 'completion_batches']) AS t;
SELECT has_view('awa', 'lease_claims', 'view awa.lease_claims (one row per receipt)');
SELECT col_default_is('awa', 'queue_meta', 'enqueue_shards', '1', 'queue_meta.enqueue_shards defaults to 1');
SELECT col_type_is('awa', 'queue_meta', 'enqueue_shards', 'smallint', 'queue_meta.enqueue_shards is smallint');
SELECT col_is_null('awa', 'queue_meta', 'dlq_enabled', 'queue_meta.dlq_enabled is nullable (NULL: the install default)');
SELECT col_default_is('awa', 'plane_settings', 'dlq_enabled_by_default', 'false', 'exhausted jobs are not dead-lettered by default');

SELECT * FROM finish();
ROLLBACK;
