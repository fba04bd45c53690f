-- Integer arguments (1.1): every public function of schema awa accepts `1`, not only
-- `1::smallint`; a value of any integer type a driver sends (smallint, integer, bigint, an
-- untyped literal) resolves to the one function of each name, as do the typed calls of 1.0
-- callers (smallint, smallint[], the reference's 11-argument positional call); and values
-- beyond the ranges are refused by the range checks, never wrapped.
BEGIN;
CREATE EXTENSION IF NOT EXISTS pgtap;
CREATE EXTENSION IF NOT EXISTS awa_shard;
SELECT plan(95);

-- No public function takes a smallint or smallint[] argument any more (a new one would fail here).
SELECT is((SELECT array_agg(p.oid::regprocedure::text ORDER BY 1) FROM pg_proc p
            WHERE p.pronamespace = 'awa'::regnamespace AND p.proname !~ '^_'
              AND p.proargtypes::oid[] && ARRAY['smallint'::regtype, 'smallint[]'::regtype]::oid[]),
          NULL, 'no public function in awa has a smallint or smallint[] argument');
-- Nor an integer or integer[] one: integer arguments are bigint, which every integer type converts to.
SELECT is((SELECT array_agg(p.oid::regprocedure::text ORDER BY 1) FROM pg_proc p
            WHERE p.pronamespace = 'awa'::regnamespace AND p.proname !~ '^_'
              AND p.proargtypes::oid[] && ARRAY['integer'::regtype, 'integer[]'::regtype]::oid[]),
          NULL, 'no public function in awa has an integer or integer[] argument (they are bigint)');
-- One function per name (two for the documented overloads): a plain call is never ambiguous.
SELECT is((SELECT array_agg(proname::text ORDER BY proname) FROM (
             SELECT proname FROM pg_proc WHERE pronamespace = 'awa'::regnamespace AND proname !~ '^_'
              GROUP BY proname HAVING count(*) > 1) d),
          ARRAY['get_job', 'ordering_key_hash', 'shard_for_ordering_key'],
          'only get_job, ordering_key_hash and shard_for_ordering_key are overloaded');

-- Producing and routing with plain literals.
SELECT is((SELECT priority FROM awa.insert_job_compat('k', 'tap_int_q', '{}', p_priority => 1)), 1::smallint,
          'insert_job_compat(p_priority => 1)');
SELECT is((SELECT max_attempts FROM awa.insert_job_compat('k', 'tap_int_q', p_max_attempts => 3)), 3::smallint,
          'insert_job_compat(p_max_attempts => 3)');
SELECT is((SELECT ROW(priority, max_attempts)::text
             FROM awa.insert_job_compat('k', 'tap_int_q', '{}', 'available', 3, 7, NULL, '{}', '{}', NULL, NULL)),
          '(3,7)', 'the 11-argument positional call with plain integers');
SELECT is((SELECT ROW(priority, max_attempts)::text
             FROM awa.insert_job_compat('k', 'tap_int_q', '{}', 'available', 2::smallint, 25::smallint, NULL, '{}', '{}', NULL, NULL)),
          '(2,25)', 'the 11-argument positional call with smallint casts (the reference''s callers) still resolves');
SELECT is((SELECT ROW(priority, max_attempts)::text FROM awa.insert_job_compat('k', 'tap_int_q', p_priority => 4::smallint,
                                                                                 p_max_attempts => 9::smallint)),
          '(4,9)', 'named smallint arguments still resolve');
SELECT is((SELECT ROW(priority, max_attempts)::text FROM awa.insert_job_compat('k', 'tap_int_q', p_priority => 2::bigint::int)),
          '(2,25)', 'an integer expression');
SELECT is(cardinality(awa.insert_jobs('tap_int_q', ARRAY['a', 'b'], p_priorities => ARRAY[1, 4], p_max_attempts => ARRAY[2, 3])), 2,
          'insert_jobs with integer[] priorities and attempts');
SELECT is((SELECT array_agg(ROW(priority, max_attempts)::text ORDER BY job_id) FROM awa.ready_entries
            WHERE queue = 'tap_int_q' AND kind IN ('a', 'b')), ARRAY['(1,2)', '(4,3)'], 'their values are stored');
SELECT is(cardinality(awa.insert_jobs('tap_int_q', ARRAY['c', 'd'], p_priorities => ARRAY[1, 2]::smallint[],
                                      p_max_attempts => ARRAY[5, 6]::smallint[])), 2,
          'insert_jobs with smallint[] arrays (1.0 callers) still resolves');
SELECT is(cardinality(awa.insert_jobs('tap_int_q', ARRAY['e', 'f'], p_priorities => '{3,3}', p_max_attempts => '{8,8}')), 2,
          'insert_jobs with untyped array literals');
SELECT is((SELECT array_agg(ROW(priority, max_attempts)::text ORDER BY job_id) FROM awa.ready_entries
            WHERE queue = 'tap_int_q' AND kind IN ('c', 'd', 'e', 'f')), ARRAY['(1,5)', '(2,6)', '(3,8)', '(3,8)'],
          'typed and untyped arrays are read right');
SELECT is(cardinality(awa.insert_jobs('tap_int_q', ARRAY['g'], NULL, ARRAY[2], NULL, NULL, ARRAY[4], NULL, NULL, NULL)), 1,
          'insert_jobs: the 10-argument positional call of 1.0 with plain integers');
SELECT is(awa.shard_for_enqueue('tap_int_q', 2), 0::smallint, 'shard_for_enqueue(queue, 2)');
SELECT is(awa.shard_for_enqueue('tap_int_q', 2::smallint, 'k'), 0::smallint, 'shard_for_enqueue(queue, 2::smallint, key)');
SELECT is(awa.reserve_enqueue_seq('tap_int_q', 2, 0, 0), awa.reserve_enqueue_seq('tap_int_q', 2::smallint, 0::smallint, 0),
          'reserve_enqueue_seq with plain and smallint literals');
SELECT ok(awa.reserve_enqueue_seq('tap_int_q', 3, 1, 1) = 1, 'reserve_enqueue_seq(queue, 3, 1, 1) creates and reserves a lane');
SELECT is(awa.lane_sequence_name('tap_int_q', 2, 0), 'queue_enqueue_seq_' || left(md5('tap_int_q:2:0'), 32),
          'lane_sequence_name with plain integers keeps the 1.0 name');
SELECT is(awa.lane_sequence_name('tap_int_q', 2::smallint, 0::smallint), awa.lane_sequence_name('tap_int_q', 2, 0),
          'lane_sequence_name with smallint literals');
SELECT is(awa.lane_lock_key('tap_int_q', 2, 0), hashtextextended('awa.' || quote_ident(awa.lane_sequence_name('tap_int_q', 2, 0)), 0),
          'lane_lock_key with plain integers');
SELECT ok(awa.lane_lock_key('tap_int_q', 2::smallint, 0::smallint) = awa.lane_lock_key('tap_int_q', 2, 0),
          'lane_lock_key with smallint literals');
SELECT is(awa.shard_for_ordering_key('k'::text, 4), awa.shard_for_ordering_key('k'::bytea, 4), 'shard_for_ordering_key(key, 4)');
SELECT is(awa.queue_enqueue_shards('tap_int_q'), 1::smallint, 'queue_enqueue_shards');

-- Working, with plain literals.
SELECT is((SELECT count(*)::int FROM awa.claim_ready_runtime('tap_int_q', 1, 0, 0)), 1, 'claim_ready_runtime(queue, 1, 0, 0)');
SELECT is(awa.wait_for_jobs('tap_int_q', 0), true, 'wait_for_jobs(queue, 0)');
SELECT ok(awa.backoff_duration(1, 5) BETWEEN interval '2 seconds' AND interval '2.5 seconds', 'backoff_duration(1, 5)');
SELECT is(awa.promote_due(10), 0, 'promote_due(10)');
SELECT is(awa.rescue_expired_deadlines(10), 0, 'rescue_expired_deadlines(10)');
SELECT is(awa.rescue_stale_heartbeats(interval '1 hour', 10), 0, 'rescue_stale_heartbeats(interval, 10)');
SELECT ok(awa.run_maintenance(interval '1 hour', 10) ? 'promoted', 'run_maintenance(interval, 10)');
SELECT ok(awa.prune_queue_ring(10) ~ '^(skipped_|pruned$|moved$)', 'prune_queue_ring(10)');
SELECT ok(awa.prune_attempt_ring('claim', 10) IS NOT NULL, 'prune_attempt_ring(ring, 10)');

-- Administration, with plain literals.
SELECT is(awa.create_queue('tap_int_new', 4), true, 'create_queue(queue, 4)');
SELECT is(awa.set_enqueue_shards('tap_int_new', 2), 4::smallint, 'set_enqueue_shards(queue, 2)');
SELECT is(awa.age_waiting_priorities(interval '1 hour', 10, 'tap_int_q'), 0, 'age_waiting_priorities(interval, 10, queue)');
SELECT ok(awa.move_queue((SELECT min(job_id) FROM awa.ready_entries WHERE queue = 'tap_int_q' AND kind = 'b'), 'tap_int_q', 1),
          'move_queue(job, queue, 1)');
SELECT ok(awa.move_queue((SELECT min(job_id) FROM awa.ready_entries WHERE queue = 'tap_int_q' AND kind = 'c'), 'tap_int_q', 2::smallint),
          'move_queue(job, queue, 2::smallint)');
SELECT is((SELECT array_agg(priority ORDER BY kind) FROM awa.jobs WHERE queue = 'tap_int_q' AND kind IN ('b', 'c')),
          ARRAY[1, 2]::smallint[], 'the moved jobs took their new priorities');
SELECT ok(awa.fail_job_to_dlq(job_id, run_lease, 'x') , 'a job to the DLQ') FROM awa.claim_ready_runtime('tap_int_q', 1, 0, 0);
SELECT ok(awa.retry_from_dlq((SELECT job_id FROM awa.dlq_entries WHERE queue = 'tap_int_q'), 'tap_int_q', 3), 'retry_from_dlq(job, queue, 3)');
SELECT is((SELECT count(*)::int FROM awa.list_dlq(NULL, 10) WHERE queue = 'tap_int_q'), 0, 'list_dlq(NULL, 10)');
SELECT is((SELECT count(*)::int FROM awa.list_jobs('tap_int_q', 'available', 3)), 3, 'list_jobs(queue, state, 3)');
SELECT ok(awa.queue_depth('tap_int_q') > 0, 'queue_depth(queue)');

-- Every integer type a driver may send, and untyped literals (a driver sending text).
SELECT is((SELECT priority FROM awa.insert_job_compat('k', 'tap_int_q', '{}', p_priority => v)), 1::smallint,
          'insert_job_compat(p_priority => 1::' || pg_typeof(v) || ')')
  FROM (VALUES (1::bigint)) t(v);
SELECT is((SELECT ROW(priority, max_attempts)::text FROM awa.insert_job_compat('k', 'tap_int_q', '{}', 'available', 3::bigint, 7::bigint)),
          '(3,7)', 'insert_job_compat: bigint priority and max_attempts, positionally');
SELECT is((SELECT ROW(priority, max_attempts)::text FROM awa.insert_job_compat('k', 'tap_int_q', '{}', 'available', '4', '8')),
          '(4,8)', 'insert_job_compat: untyped literals');
SELECT is((SELECT ROW(priority, max_attempts)::text FROM awa.insert_job_compat('k', 'tap_int_q', p_priority => 2::int, p_max_attempts => 5::smallint)),
          '(2,5)', 'insert_job_compat: integer and smallint');
SELECT is(cardinality(awa.insert_jobs('tap_int_q', ARRAY['h', 'i'], p_priorities => ARRAY[1, 3]::bigint[],
                                      p_max_attempts => ARRAY[2, 4]::bigint[])), 2, 'insert_jobs with bigint[] arrays');
SELECT is((SELECT array_agg(ROW(priority, max_attempts)::text ORDER BY job_id) FROM awa.ready_entries
            WHERE queue = 'tap_int_q' AND kind IN ('h', 'i')), ARRAY['(1,2)', '(3,4)'], 'bigint[] elements are read right');
SELECT is(awa.shard_for_enqueue('tap_int_q', 2::bigint), awa.shard_for_enqueue('tap_int_q', 2), 'shard_for_enqueue(queue, 2::bigint)');
SELECT is(awa.shard_for_enqueue('tap_int_q', '2'), awa.shard_for_enqueue('tap_int_q', 2), 'shard_for_enqueue(queue, ''2'')');
SELECT is(awa.reserve_enqueue_seq('tap_int_q', 2::bigint, 0::bigint, 0::bigint), awa.reserve_enqueue_seq('tap_int_q', 2, 0, 0),
          'reserve_enqueue_seq with bigint values');
SELECT is(awa.lane_sequence_name('tap_int_q', 2::bigint, 0::bigint), awa.lane_sequence_name('tap_int_q', 2, 0),
          'lane_sequence_name with bigint values gives the same name');
SELECT is(awa.lane_lock_key('tap_int_q', '2', '0'), awa.lane_lock_key('tap_int_q', 2, 0), 'lane_lock_key with untyped literals');
SELECT is(awa.shard_for_ordering_key('k'::text, 4::bigint), awa.shard_for_ordering_key('k'::text, 4), 'shard_for_ordering_key(key, 4::bigint)');
SELECT is(awa.shard_for_ordering_key('k'::bytea, '4'), awa.shard_for_ordering_key('k'::bytea, 4), 'shard_for_ordering_key(key, ''4'')');
SELECT is(awa.wait_for_jobs('tap_int_q', 0::bigint), true, 'wait_for_jobs(queue, 0::bigint)');
SELECT ok(awa.backoff_duration(1::bigint, '5') BETWEEN interval '2 seconds' AND interval '2.5 seconds', 'backoff_duration(1::bigint, ''5'')');
SELECT is(awa.promote_due(10::bigint), 0, 'promote_due(10::bigint)');
SELECT is(awa.rescue_expired_deadlines('10'), 0, 'rescue_expired_deadlines(''10'')');
SELECT is(awa.rescue_stale_heartbeats(interval '1 hour', 10::smallint), 0, 'rescue_stale_heartbeats(interval, 10::smallint)');
SELECT ok(awa.fold_claim_marks(10::bigint, 100::bigint) IS NOT NULL, 'fold_claim_marks with bigint values');
SELECT is(awa.create_queue('tap_int_big', 2::bigint), true, 'create_queue(queue, 2::bigint)');
SELECT is(awa.set_enqueue_shards('tap_int_big', '3'), 2::smallint, 'set_enqueue_shards(queue, ''3'')');
SELECT is((SELECT count(*)::int FROM awa.list_jobs('tap_int_q', 'available', 3::bigint)), 3, 'list_jobs(queue, state, 3::bigint)');
SELECT is((SELECT count(*)::int FROM awa.list_dlq(NULL, '10') WHERE queue = 'tap_int_q'), 0, 'list_dlq(NULL, ''10'')');
SELECT is(awa.age_waiting_priorities(interval '1 hour', 10::bigint, 'tap_int_q'), 0, 'age_waiting_priorities(interval, 10::bigint, queue)');
SELECT ok(awa.move_queue((SELECT min(job_id) FROM awa.ready_entries WHERE queue = 'tap_int_q' AND kind = 'h'), 'tap_int_q', 2::bigint),
          'move_queue(job, queue, 2::bigint)');
-- A numeric is no integer type: no function takes it (cast it first).
SELECT throws_ok($$SELECT awa.insert_job_compat('k', 'tap_int_q', p_priority => 1.0)$$, '42883', NULL,
                 'a numeric priority finds no function');

-- Values beyond smallint are refused by the checks, not wrapped into range (65537 would wrap to 1).
SELECT throws_ok($$SELECT awa.insert_job_compat('k', 'tap_int_q', p_priority => 65537)$$, '23514',
                 'p_priority must be between 1 and 4', 'p_priority 65537 is refused');
SELECT throws_ok($$SELECT awa.insert_job_compat('k', 'tap_int_q', p_max_attempts => 65537)$$, '23514',
                 'p_max_attempts must be between 1 and 1000', 'p_max_attempts 65537 is refused');
SELECT throws_ok($$SELECT awa.insert_job_compat('k', 'tap_int_q', p_priority => -2147483648)$$, '23514', NULL,
                 'the smallest integer priority is refused');
SELECT throws_ok($$SELECT awa.insert_jobs('tap_int_q', ARRAY['a'], p_priorities => ARRAY[65537])$$, '23514',
                 'p_priorities element must be between 1 and 4', 'a p_priorities element 65537 is refused');
SELECT throws_ok($$SELECT awa.insert_jobs('tap_int_q', ARRAY['a'], p_max_attempts => ARRAY[65537])$$, '23514',
                 'p_max_attempts element must be between 1 and 1000', 'a p_max_attempts element 65537 is refused');
SELECT throws_ok($$SELECT awa.shard_for_enqueue('tap_int_q', 65538)$$, '23514', NULL, 'shard_for_enqueue: priority 65538 is refused');
SELECT throws_ok($$SELECT awa.reserve_enqueue_seq('tap_int_q', 65538, 0, 1)$$, '23514', NULL, 'reserve_enqueue_seq: priority 65538 is refused');
SELECT throws_ok($$SELECT awa.reserve_enqueue_seq('tap_int_q', 2, 65536, 1)$$, '22023',
                 'p_enqueue_shard must be between 0 and 63', 'reserve_enqueue_seq: shard 65536 (0 when wrapped) is refused');
SELECT throws_ok($$SELECT awa.reserve_enqueue_seq('tap_int_q', 2, -1, 1)$$, '22023', NULL, 'reserve_enqueue_seq: shard -1 is refused');
SELECT throws_ok($$SELECT awa.move_queue(1, 'tap_int_q', 65537)$$, '23514', NULL, 'move_queue: priority 65537 is refused');
SELECT throws_ok($$SELECT awa.retry_from_dlq(1, 'tap_int_q', 5)$$, '23514', NULL, 'retry_from_dlq: priority 5 is refused');
SELECT throws_ok($$SELECT awa.create_queue('tap_int_bad', 65)$$, '22023', NULL, 'create_queue: 65 shards are refused');
-- Values beyond integer are refused the same way (4294967297 would wrap to 1 as an int).
SELECT throws_ok($$SELECT awa.insert_job_compat('k', 'tap_int_q', p_priority => 4294967297)$$, '23514',
                 'p_priority must be between 1 and 4', 'p_priority 4294967297 (bigint) is refused');
SELECT throws_ok($$SELECT awa.insert_jobs('tap_int_q', ARRAY['a'], p_priorities => ARRAY[4294967297])$$, '23514',
                 'p_priorities element must be between 1 and 4', 'a p_priorities element 4294967297 is refused');
SELECT throws_ok($$SELECT awa.reserve_enqueue_seq('tap_int_q', 2, 4294967296, 1)$$, '22023',
                 'p_enqueue_shard must be between 0 and 63', 'reserve_enqueue_seq: shard 4294967296 is refused');
SELECT throws_ok($$SELECT awa.wait_for_jobs('tap_int_q', 4294967296)$$, '22023', NULL, 'wait_for_jobs: 4294967296 ms is refused');
SELECT throws_ok($$SELECT awa.lane_sequence_name('tap_int_q', 4294967298, 0)$$, '22023', NULL,
                 'lane_sequence_name: a priority beyond integer is refused, not wrapped');
SELECT throws_ok($$SELECT awa.create_queue('tap_int_bad', 4294967297)$$, '22023', NULL, 'create_queue: 4294967297 shards are refused');
SELECT throws_ok($$SELECT awa.move_queue(1, 'tap_int_q', -9223372036854775808)$$, '23514', NULL, 'move_queue: the smallest bigint priority is refused');
SELECT is(awa.promote_due(9223372036854775807), 0, 'promote_due: the largest bigint limit promotes what is due');
SELECT ok(awa.prune_queue_ring(9223372036854775807) IS NOT NULL, 'prune_queue_ring: the largest bigint budget counts as the largest lock_timeout');
SELECT is(awa.rescue_stale_heartbeats(interval '1 hour', 9223372036854775807), 0, 'rescue_stale_heartbeats: the largest bigint limit');
SELECT is((SELECT count(*)::int FROM awa.ready_entries WHERE queue = 'tap_int_q' AND priority NOT BETWEEN 1 AND 4), 0,
          'no refused call left a row');
SELECT is((SELECT count(*)::int FROM awa.queue_enqueue_heads WHERE queue = 'tap_int_q' AND enqueue_shard > 1), 0,
          'no refused reservation created a lane');

SELECT * FROM finish();
ROLLBACK;
