-- Bad input to the producer functions (insert_job_compat, insert_jobs, reserve_enqueue_seq,
-- shard_for_enqueue): NULL, out of range, too long, wrong state and mismatched arrays raise
-- the documented SQLSTATE (22004 null, 23514 check, 22023 invalid value, 23505 unique) and
-- leave no row, lane, sequence value or relation behind.
BEGIN;
CREATE EXTENSION IF NOT EXISTS pgtap;
CREATE EXTENSION IF NOT EXISTS awa_shard;
SELECT plan(92);

-- A known lane (tap_bad_q, 2, 0) and a snapshot of everything a failed call could leave behind.
CREATE TEMP TABLE tap_first AS SELECT * FROM awa.insert_job_compat('tap', 'tap_bad_q');
CREATE TEMP TABLE tap_before AS
SELECT awa.reserve_enqueue_seq('tap_bad_q', 2::smallint, 0::smallint, 0) AS next_lane_seq,
       (SELECT last_value FROM awa.job_id_seq) AS last_job_id,
       (SELECT count(*) FROM awa.queue_enqueue_heads) AS heads,
       (SELECT count(*) FROM awa.queue_claim_heads) AS claim_heads,
       (SELECT count(*) FROM awa.ready_entries) AS ready,
       (SELECT count(*) FROM awa.deferred_jobs) AS deferred,
       (SELECT count(*) FROM awa.job_unique_claims) AS unique_claims,
       (SELECT count(*) FROM pg_class WHERE relnamespace = 'awa'::regnamespace) AS relations;

-- insert_job_compat: every argument.
SELECT throws_ok($$SELECT awa.insert_job_compat(NULL)$$, '22004', NULL, 'insert_job_compat: NULL p_kind');
SELECT throws_ok($$SELECT awa.insert_job_compat('', 'tap_bad_q')$$, '23514', NULL, 'insert_job_compat: empty p_kind');
SELECT throws_ok(format('SELECT awa.insert_job_compat(%L, %L)', repeat('k', 201), 'tap_bad_q'), '23514', NULL,
                 'insert_job_compat: 201-character p_kind');
SELECT throws_ok(format('SELECT awa.insert_job_compat(%L, %L)', repeat('é', 201), 'tap_bad_q'), '23514', NULL,
                 'insert_job_compat: 201-character multibyte p_kind');
SELECT throws_ok($$SELECT awa.insert_job_compat('tap', '')$$, '23514', NULL, 'insert_job_compat: empty p_queue');
SELECT throws_ok(format('SELECT awa.insert_job_compat(%L, %L)', 'tap', repeat('q', 201)), '23514', NULL,
                 'insert_job_compat: 201-character p_queue');
SELECT throws_ok(format('SELECT awa.insert_job_compat(%L, %L, p_state => %L)', 'tap', 'tap_bad_q', s), '22023', NULL,
                 'insert_job_compat: p_state ' || s)
  FROM unnest(ARRAY['running', 'completed', 'failed', 'cancelled', 'waiting_external']) AS s;
SELECT throws_ok($$SELECT awa.insert_job_compat('tap', 'tap_bad_q', p_state => 'nonsense')$$, '22P02', NULL,
                 'insert_job_compat: p_state that is no job_state');
SELECT throws_ok(format('SELECT awa.insert_job_compat(%L, %L, p_priority => %s::smallint)', 'tap', 'tap_bad_q', p), '23514', NULL,
                 'insert_job_compat: p_priority ' || p)
  FROM unnest(ARRAY[0, 5, -1]) AS p;
SELECT throws_ok(format('SELECT awa.insert_job_compat(%L, %L, p_max_attempts => %s::smallint)', 'tap', 'tap_bad_q', m), '23514', NULL,
                 'insert_job_compat: p_max_attempts ' || m)
  FROM unnest(ARRAY[0, 1001, -5]) AS m;
SELECT throws_ok($$SELECT awa.insert_job_compat('tap', 'tap_bad_q', p_metadata => '[1]')$$, '22023', NULL,
                 'insert_job_compat: p_metadata array');
SELECT throws_ok($$SELECT awa.insert_job_compat('tap', 'tap_bad_q', p_metadata => '"x"')$$, '22023', NULL,
                 'insert_job_compat: p_metadata scalar');
SELECT throws_ok(format('SELECT awa.insert_job_compat(%L, %L, p_tags => %L)', 'tap', 'tap_bad_q',
                        (SELECT array_agg('t' || i) FROM generate_series(1, 21) i)), '23514', NULL,
                 'insert_job_compat: 21 tags');
SELECT throws_ok($$SELECT awa.insert_job_compat('tap', 'tap_bad_q', p_tags => ARRAY['a', NULL])$$, '22004', NULL,
                 'insert_job_compat: NULL tag');
SELECT throws_ok($$SELECT awa.insert_job_compat('tap', 'tap_bad_q', p_tags => '{{a,b},{c,d}}')$$, '22023', NULL,
                 'insert_job_compat: two-dimensional p_tags');
SELECT throws_ok($$SELECT awa.insert_job_compat('tap', 'tap_bad_q', p_unique_key => '')$$, '22023', NULL,
                 'insert_job_compat: empty p_unique_key');
SELECT throws_ok($$SELECT awa.insert_job_compat('tap', 'tap_bad_q', p_unique_states => B'11111000')$$, '22023', NULL,
                 'insert_job_compat: p_unique_states without p_unique_key');
SELECT throws_ok(format('SELECT awa.insert_job_compat(%L, %L, p_unique_key => %L, p_unique_states => %L::varbit)',
                        'tap', 'tap_bad_q', '\x01', m), '22023', NULL, 'insert_job_compat: p_unique_states of ' || length(m) || ' bits')
  FROM unnest(ARRAY['1', '', '111110001111']) AS m;
SELECT throws_ok(format('SELECT awa.insert_job_compat(%L, %L, p_ordering_key => decode(repeat(%L, 1025), %L))',
                        'tap', 'tap_bad_q', 'ab', 'hex'), '22023', NULL,
                 'insert_job_compat: 1025-byte p_ordering_key');

-- insert_jobs: every argument, including arrays that do not match p_kinds.
SELECT throws_ok($$SELECT awa.insert_jobs(NULL, ARRAY['a'])$$, '22004', NULL, 'insert_jobs: NULL p_queue');
SELECT throws_ok($$SELECT awa.insert_jobs('', ARRAY['a'])$$, '23514', NULL, 'insert_jobs: empty p_queue');
SELECT throws_ok(format('SELECT awa.insert_jobs(%L, ARRAY[%L])', repeat('q', 201), 'a'), '23514', NULL,
                 'insert_jobs: 201-character p_queue');
SELECT throws_ok($$SELECT awa.insert_jobs('tap_bad_q', NULL)$$, '22004', NULL, 'insert_jobs: NULL p_kinds');
SELECT throws_ok($$SELECT awa.insert_jobs('tap_bad_q', ARRAY['a', NULL])$$, '22004', NULL, 'insert_jobs: NULL kind element');
SELECT throws_ok($$SELECT awa.insert_jobs('tap_bad_q', ARRAY['a', ''])$$, '23514', NULL, 'insert_jobs: empty kind element');
SELECT throws_ok(format('SELECT awa.insert_jobs(%L, ARRAY[%L, %L])', 'tap_bad_q', 'a', repeat('k', 201)), '23514', NULL,
                 'insert_jobs: 201-character kind element');
SELECT throws_ok($$SELECT awa.insert_jobs('tap_bad_q', '{{a,b},{c,d}}'::text[])$$, '22023', NULL,
                 'insert_jobs: two-dimensional p_kinds');
SELECT throws_ok($$SELECT awa.insert_jobs('tap_bad_q', array_fill('a'::text, ARRAY[100001]))$$, '22023', NULL,
                 'insert_jobs: more than 100000 kinds');
-- insert_jobs: arrays of the wrong length and bad elements, one row each: the arguments
-- after the queue, the SQLSTATE, the message (NULL: any) and the description.
SELECT throws_ok(format('SELECT awa.insert_jobs(%L, %s)', 'tap_bad_q', t.args), t.code::char(5), t.msg, t.what)
  FROM (SELECT * FROM (VALUES
    (1, $c$ARRAY['a', 'b'], p_args => ARRAY['{}'::jsonb]$c$, '22023', NULL, 'insert_jobs: p_args shorter than p_kinds'),
    (2, $c$ARRAY['a', 'b'], p_priorities => '{1,2,3}'$c$, '22023', NULL, 'insert_jobs: p_priorities longer than p_kinds'),
    (3, $c$ARRAY['a', 'b'], p_priorities => '{1,0}'$c$, '23514', NULL, 'insert_jobs: priority element 0'),
    (4, $c$ARRAY['a', 'b'], p_priorities => '{5,1}'$c$, '23514', NULL, 'insert_jobs: priority element 5'),
    (5, $c$ARRAY['a', 'b'], p_run_ats => ARRAY[now()]$c$, '22023', NULL, 'insert_jobs: p_run_ats shorter than p_kinds'),
    (6, $c$ARRAY['a', 'b'], p_ordering_keys => ARRAY['\x01'::bytea, '\x02', '\x03']$c$, '22023', NULL, 'insert_jobs: p_ordering_keys longer than p_kinds'),
    (7, $c$ARRAY['a'], p_args => ARRAY['{}'::jsonb, '{}'], p_ordering_keys => ARRAY['\x01'::bytea]$c$, '22023', 'p_ordering_keys must have as many elements as p_args', 'insert_jobs with one kind: an array shorter than the first array given (p_args sets the batch size)'),
    (8, $c$ARRAY['a', 'b'], p_ordering_keys => ARRAY['\x01'::bytea, decode(repeat('ab', 1025), 'hex')]$c$, '22023', NULL, 'insert_jobs: 1025-byte ordering key element'),
    (9, $c$ARRAY['a', 'b'], p_max_attempts => '{5}'$c$, '22023', NULL, 'insert_jobs: p_max_attempts shorter than p_kinds'),
    (10, $c$ARRAY['a', 'b'], p_max_attempts => '{5,0}'$c$, '23514', NULL, 'insert_jobs: max_attempts element 0'),
    (11, $c$ARRAY['a', 'b'], p_max_attempts => '{1001,5}'$c$, '23514', NULL, 'insert_jobs: max_attempts element 1001'),
    (12, $c$ARRAY['a', 'b'], p_metadata => ARRAY['{}'::jsonb]$c$, '22023', NULL, 'insert_jobs: p_metadata shorter than p_kinds'),
    (13, $c$ARRAY['a', 'b'], p_metadata => ARRAY['{}'::jsonb, '[]']$c$, '22023', NULL, 'insert_jobs: metadata element that is not an object'),
    (14, $c$ARRAY['a', 'b'], p_unique_keys => ARRAY['\x01'::bytea]$c$, '22023', NULL, 'insert_jobs: p_unique_keys shorter than p_kinds'),
    (15, $c$ARRAY['a', 'b'], p_unique_keys => ARRAY['\x01'::bytea, '']$c$, '22023', NULL, 'insert_jobs: empty unique key element'),
    (16, $c$ARRAY['a', 'b'], p_unique_states => ARRAY[B'11111000']$c$, '22023', NULL, 'insert_jobs: p_unique_states shorter than p_kinds'),
    (17, $c$ARRAY['a'], p_unique_states => ARRAY[B'11111000']$c$, '22023', NULL, 'insert_jobs: unique state mask without a unique key')
  ) AS v(n, args, code, msg, what) ORDER BY n) t;

-- reserve_enqueue_seq: every argument.
SELECT throws_ok($$SELECT awa.reserve_enqueue_seq(NULL, 2::smallint, 0::smallint, 1)$$, '22004', NULL, 'reserve_enqueue_seq: NULL p_queue');
SELECT throws_ok($$SELECT awa.reserve_enqueue_seq('', 2::smallint, 0::smallint, 1)$$, '23514', NULL, 'reserve_enqueue_seq: empty p_queue');
SELECT throws_ok(format('SELECT awa.reserve_enqueue_seq(%L, 2::smallint, 0::smallint, 1)', repeat('q', 201)), '23514', NULL,
                 'reserve_enqueue_seq: 201-character p_queue');
SELECT throws_ok($$SELECT awa.reserve_enqueue_seq('tap_bad_q', NULL, 0::smallint, 1)$$, '22004', NULL, 'reserve_enqueue_seq: NULL p_priority');
SELECT throws_ok($$SELECT awa.reserve_enqueue_seq('tap_bad_q', 0::smallint, 0::smallint, 1)$$, '23514', NULL, 'reserve_enqueue_seq: p_priority 0');
SELECT throws_ok($$SELECT awa.reserve_enqueue_seq('tap_bad_q', 5::smallint, 0::smallint, 1)$$, '23514', NULL, 'reserve_enqueue_seq: p_priority 5');
SELECT throws_ok($$SELECT awa.reserve_enqueue_seq('tap_bad_q', 2::smallint, NULL, 1)$$, '22004', NULL, 'reserve_enqueue_seq: NULL p_enqueue_shard');
SELECT throws_ok($$SELECT awa.reserve_enqueue_seq('tap_bad_q', 2::smallint, (-1)::smallint, 1)$$, '22023', NULL, 'reserve_enqueue_seq: p_enqueue_shard -1');
SELECT throws_ok($$SELECT awa.reserve_enqueue_seq('tap_bad_q', 2::smallint, 64::smallint, 1)$$, '22023', NULL, 'reserve_enqueue_seq: p_enqueue_shard 64');
SELECT throws_ok($$SELECT awa.reserve_enqueue_seq('tap_bad_q', 2::smallint, 0::smallint, NULL)$$, '22004', NULL, 'reserve_enqueue_seq: NULL p_count');
SELECT throws_ok($$SELECT awa.reserve_enqueue_seq('tap_bad_q', 2::smallint, 0::smallint, 1000001)$$, '22023', NULL, 'reserve_enqueue_seq: p_count 1000001');

-- shard_for_enqueue: every argument.
SELECT throws_ok($$SELECT awa.shard_for_enqueue(NULL, 2::smallint)$$, '22004', NULL, 'shard_for_enqueue: NULL p_queue');
SELECT throws_ok($$SELECT awa.shard_for_enqueue('', 2::smallint)$$, '23514', NULL, 'shard_for_enqueue: empty p_queue');
SELECT throws_ok(format('SELECT awa.shard_for_enqueue(%L, 2::smallint)', repeat('q', 201)), '23514', NULL,
                 'shard_for_enqueue: 201-character p_queue');
SELECT throws_ok($$SELECT awa.shard_for_enqueue('tap_bad_q', NULL)$$, '22004', NULL, 'shard_for_enqueue: NULL p_priority');
SELECT throws_ok($$SELECT awa.shard_for_enqueue('tap_bad_q', 0::smallint)$$, '23514', NULL, 'shard_for_enqueue: p_priority 0');
SELECT throws_ok($$SELECT awa.shard_for_enqueue('tap_bad_q', 5::smallint)$$, '23514', NULL, 'shard_for_enqueue: p_priority 5');

-- Nothing was left behind by any failed call: no row, no lane, no relation, no lane_seq or
-- job id consumed (the sequences are not transactional, so a late check would show here).
SELECT is(awa.reserve_enqueue_seq('tap_bad_q', 2::smallint, 0::smallint, 0), (SELECT next_lane_seq FROM tap_before),
          'failed calls reserved no lane_seq');
SELECT is((SELECT last_value FROM awa.job_id_seq), (SELECT last_job_id FROM tap_before), 'failed calls consumed no job id');
SELECT is((SELECT ROW((SELECT count(*) FROM awa.queue_enqueue_heads), (SELECT count(*) FROM awa.queue_claim_heads),
                      (SELECT count(*) FROM awa.ready_entries), (SELECT count(*) FROM awa.deferred_jobs),
                      (SELECT count(*) FROM awa.job_unique_claims))::text),
          (SELECT ROW(heads, claim_heads, ready, deferred, unique_claims)::text FROM tap_before),
          'failed calls left no head, ready, deferred or unique-claim row');
SELECT is((SELECT count(*) FROM pg_class WHERE relnamespace = 'awa'::regnamespace), (SELECT relations FROM tap_before),
          'failed calls created no relation (no lane sequence)');

-- A batch that fails on its last element does not create the lanes of its first ones.
SELECT throws_ok($$SELECT awa.insert_jobs('tap_bad_fresh', ARRAY['a', 'b', 'c'], p_priorities => '{1,2,9}')$$, '23514', NULL,
                 'insert_jobs: a bad last element fails the whole batch');
SELECT is((SELECT count(*) FROM awa.queue_enqueue_heads WHERE queue = 'tap_bad_fresh'), 0::bigint, 'no lane of the failed batch');
SELECT is((SELECT count(*) FROM pg_class WHERE relname = awa.lane_sequence_name('tap_bad_fresh', 1::smallint, 0::smallint)),
          0::bigint, 'no lane sequence of the failed batch');
SELECT is(awa.insert_jobs('tap_bad_fresh', ARRAY['a', 'b'], p_priorities => '{1,2}'), ARRAY[(SELECT last_job_id FROM tap_before) + 1,
          (SELECT last_job_id FROM tap_before) + 2], 'the same lanes work afterwards');
SELECT results_eq($$SELECT priority::int, lane_seq FROM awa.ready_entries WHERE queue = 'tap_bad_fresh' ORDER BY priority$$,
                  $$VALUES (1, 1::bigint), (2, 1::bigint)$$, 'and start at lane_seq 1');

-- Defaults stand in for NULLs of defaulted arguments; boundaries are accepted.
SELECT is((SELECT ROW(queue, args, state, priority, max_attempts, metadata, tags)::text
             FROM awa.insert_job_compat('tap', NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL)),
          ROW('default', '{}'::jsonb, 'available'::awa.job_state, 2::smallint, 25::smallint, '{}'::jsonb, '{}'::text[])::text,
          'insert_job_compat: NULL defaulted arguments take their defaults');
SELECT lives_ok(format('SELECT awa.insert_job_compat(%L, %L, p_max_attempts => 1000::smallint, p_tags => %L)',
                       repeat('k', 200), repeat('q', 200), (SELECT array_agg('t' || i) FROM generate_series(1, 20) i)),
                '200-character kind and queue, 1000 attempts and 20 tags are accepted');
SELECT lives_ok($$SELECT awa.insert_job_compat('tap', 'tap_bad_q', p_priority => 1::smallint, p_max_attempts => 1::smallint,
                                              p_ordering_key => decode(repeat('ff', 1024), 'hex'))$$,
                'priority 1, one attempt and a 1024-byte ordering key are accepted');
SELECT lives_ok($$SELECT awa.insert_job_compat('tap', 'tap_bad_q', p_priority => 4::smallint, p_ordering_key => '')$$,
                'priority 4 and the empty ordering key are accepted');
SELECT is((SELECT unique_states FROM awa.insert_job_compat('tap', 'tap_bad_q', p_unique_key => '\xbeef')), B'11111000',
          'a unique key without a mask gets 11111000');
SELECT is(awa.reserve_enqueue_seq('tap_bad_q', 4::smallint, 63::smallint, 1), 1::bigint, 'shard 63 is a valid lane');
SELECT is(awa.insert_jobs('tap_bad_q', '{}'::text[]), '{}'::bigint[], 'an empty batch returns no ids');
SELECT ok(awa.shard_for_enqueue('tap_bad_q', 2::smallint, NULL) = 0, 'NULL ordering key: the rotor, at S = 1 shard 0');

-- Unique conflicts: 23505 and nothing written.
SELECT throws_ok($$SELECT awa.insert_job_compat('tap', 'tap_bad_q', p_unique_key => '\xbeef')$$, '23505', NULL,
                 'insert_job_compat: a live unique key');
SELECT throws_ok($$SELECT awa.insert_jobs('tap_bad_q', ARRAY['a', 'b'], p_unique_keys => ARRAY['\xcafe'::bytea, '\xcafe'])$$, '23505', NULL,
                 'insert_jobs: a unique key twice in one batch');
SELECT is((SELECT count(*) FROM awa.job_unique_claims WHERE unique_key IN ('\xbeef', '\xcafe')), 1::bigint,
          'only the first unique claim exists');

-- Wrong state of worker-side helpers is not the producer's concern; the producer functions
-- refuse every state but available, scheduled and retryable (checked above).
SELECT * FROM finish();
ROLLBACK;
