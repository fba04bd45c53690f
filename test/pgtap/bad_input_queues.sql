-- Bad input to the queue and look-up functions of 1.1 (create_queue, create_lanes, drop_queue,
-- purge_queue, pause_queue, resume_queue, set_queue_dlq, queue_depth, list_jobs, get_job),
-- and the unknown-queue rule: a call that acts on a queue by name raises 42704 for a name
-- that is no known queue, and never creates it. A failed call writes nothing.
BEGIN;
CREATE EXTENSION IF NOT EXISTS pgtap;
CREATE EXTENSION IF NOT EXISTS awa_shard;
SELECT plan(75);

SELECT lives_ok($$SELECT awa.insert_job_compat('k', 'tap_bq_known')$$, 'a queue made known by a producer');
CREATE TEMP TABLE tap_bq_before AS
SELECT (SELECT count(*) FROM awa.queue_meta) AS meta, (SELECT count(*) FROM awa.queue_enqueue_heads) AS lanes,
       (SELECT count(*) FROM awa.ready_entries) AS ready, (SELECT count(*) FROM awa.deferred_jobs) AS deferred;

-- NULL and badly sized names: 22004 / 23514, as everywhere.
SELECT throws_ok(format('SELECT awa.%s(NULL)', f), '22004', 'p_queue must not be null', f || ': NULL p_queue')
  FROM unnest(ARRAY['create_queue', 'create_lanes', 'drop_queue', 'purge_queue', 'pause_queue', 'resume_queue', 'queue_depth', 'list_jobs']) f;
SELECT throws_ok(format('SELECT awa.%s(%L)', f, ''), '23514', 'p_queue must be 1 to 200 characters long', f || ': empty p_queue')
  FROM unnest(ARRAY['create_queue', 'create_lanes', 'drop_queue', 'purge_queue', 'pause_queue', 'resume_queue', 'queue_depth', 'list_jobs']) f;
SELECT throws_ok(format('SELECT awa.%s(%L)', f, repeat('q', 201)), '23514', NULL, f || ': 201-character p_queue')
  FROM unnest(ARRAY['create_queue', 'create_lanes', 'drop_queue', 'purge_queue', 'pause_queue', 'resume_queue', 'queue_depth', 'list_jobs']) f;

-- Unknown names: 42704 naming the queue, for every call that acts on a queue by name.
SELECT throws_ok(format('SELECT awa.%s(%L)', f, 'tap_bq_typo'), '42704', 'queue "tap_bq_typo" does not exist',
                 f || ': an unknown queue is an error')
  FROM unnest(ARRAY['create_lanes', 'drop_queue', 'purge_queue', 'pause_queue', 'resume_queue', 'queue_depth', 'list_jobs']) f;
SELECT throws_ok($$SELECT awa.set_queue_dlq('tap_bq_typo', true)$$, '42704', NULL, 'set_queue_dlq: an unknown queue is an error');
SELECT is((SELECT count(*)::int FROM awa.queue_meta WHERE queue = 'tap_bq_typo'), 0, 'none of them created the queue');
-- Known queues (settings, lanes, deferred jobs, dead letters) are accepted.
SELECT is(awa.pause_queue('tap_bq_known'), true, 'a queue known by its lanes can be paused');
SELECT lives_ok($$SELECT awa.insert_job_compat('k', 'tap_bq_later', p_run_at => now() + interval '1 day')$$, 'a scheduled-only queue');
SELECT is(awa.queue_depth('tap_bq_later'), 0::bigint, 'a queue known by its scheduled job has depth 0');
-- Calls that keep their 1.0 behaviour for unknown names: reads return nothing, workers wait.
SELECT is((SELECT count(*)::int FROM awa.claim_ready_runtime('tap_bq_typo', 10)), 0, 'claim on an unknown queue: no rows');
SELECT is(awa.wait_for_jobs('tap_bq_typo', 0), false, 'wait_for_jobs on an unknown queue: false');
SELECT is((SELECT available FROM awa.queue_counts_exact('tap_bq_typo')), 0::bigint, 'queue_counts_exact on an unknown queue: zeros');
SELECT is((SELECT count(*)::int FROM awa.get_job('tap_bq_typo', 1)), 0, 'get_job in an unknown queue: no row');
SELECT is((SELECT count(*)::int FROM awa.queue_meta WHERE queue = 'tap_bq_typo'), 0, 'and still no queue');

-- create_queue: width and its conflicts.
SELECT throws_ok($$SELECT awa.create_queue('tap_bq_new', NULL)$$, '22004', 'p_enqueue_shards must not be null', 'create_queue: NULL width');
SELECT throws_ok($$SELECT awa.create_queue('tap_bq_new', 0)$$, '22023', 'p_enqueue_shards must be between 1 and 64', 'create_queue: width 0');
SELECT throws_ok($$SELECT awa.create_queue('tap_bq_new', 65)$$, '22023', NULL, 'create_queue: width 65');
SELECT is(awa.create_queue('tap_bq_new', 3, true), true, 'create_queue creates');
SELECT is(awa.create_queue('tap_bq_new', 3), false, 'again with the same width: false (the NULL DLQ argument is not compared)');
SELECT is(awa.create_queue('tap_bq_new', 3, true), false, 'again with the same settings: false');
SELECT throws_ok($$SELECT awa.create_queue('tap_bq_new', 4)$$, '42710', 'queue "tap_bq_new" already exists with other settings',
                 'another width: 42710');
SELECT throws_ok($$SELECT awa.create_queue('tap_bq_new', 3, false)$$, '42710', NULL, 'another DLQ setting: 42710');
SELECT is((SELECT ROW(enqueue_shards, dlq_enabled)::text FROM awa.queue_meta WHERE queue = 'tap_bq_new'), '(3,t)',
          'the refused calls changed nothing');

-- create_lanes: priorities, and the lanes it makes.
SELECT throws_ok($$SELECT awa.create_lanes('tap_bq_new', '{}')$$, '22023', 'p_priorities must not be empty', 'create_lanes: no priority');
SELECT throws_ok($$SELECT awa.create_lanes('tap_bq_new', ARRAY[2, NULL])$$, '22004', 'p_priorities element must not be null',
                 'create_lanes: a NULL priority');
SELECT throws_ok($$SELECT awa.create_lanes('tap_bq_new', ARRAY[2, 0])$$, '23514', 'p_priorities element must be between 1 and 4',
                 'create_lanes: priority 0');
SELECT throws_ok($$SELECT awa.create_lanes('tap_bq_new', ARRAY[5])$$, '23514', NULL, 'create_lanes: priority 5');
SELECT is((SELECT count(*)::int FROM awa.queue_enqueue_heads WHERE queue = 'tap_bq_new'), 0, 'the refused calls made no lane');
SELECT is(awa.create_lanes('tap_bq_new', ARRAY[2, 2, 1]), 6, 'create_lanes makes the lanes of each priority once, on every shard');
SELECT is((SELECT string_agg(priority || '/' || enqueue_shard, ' ' ORDER BY priority, enqueue_shard)
             FROM awa.queue_enqueue_heads WHERE queue = 'tap_bq_new'), '1/0 1/1 1/2 2/0 2/1 2/2',
          'lanes (priority/shard) of priorities 1 and 2 on shards 0..2');
SELECT is((SELECT count(*)::int FROM awa.queue_claim_heads WHERE queue = 'tap_bq_new'), 6, 'each with its claim head');
SELECT is(awa.create_lanes('tap_bq_new'), 6, 'NULL priorities: the lanes of the other two priorities');
SELECT is(awa.create_lanes('tap_bq_new'), 0, 'again: none to make');
SELECT is((SELECT count(*)::int FROM awa.queue_enqueue_heads e WHERE queue = 'tap_bq_new' AND to_regclass('awa.' || quote_ident(e.seq_name)) IS NOT NULL),
          12, 'every lane has its sequence');
SELECT is(awa.queue_depth('tap_bq_new'), 0::bigint, 'and no position taken: depth 0');
SELECT lives_ok($$SELECT awa.insert_job_compat('k', 'tap_bq_new', p_priority => 1)$$, 'a producer enqueues into a made lane');
SELECT is((SELECT lane_seq FROM awa.ready_entries WHERE queue = 'tap_bq_new'), 1::bigint, 'its first job takes position 1');

-- drop_queue and list_jobs arguments.
SELECT throws_ok($$SELECT awa.drop_queue('tap_bq_known', NULL)$$, '22004', 'p_force must not be null', 'drop_queue: NULL p_force');
SELECT throws_ok($$SELECT awa.drop_queue('tap_bq_known')$$, '55000', 'queue "tap_bq_known" is not empty',
                 'drop_queue refuses a queue with a waiting job');
SELECT throws_ok($$SELECT awa.list_jobs('tap_bq_known', NULL, 0)$$, '22023', 'p_limit must be between 1 and 10000', 'list_jobs: limit 0');
SELECT throws_ok($$SELECT awa.list_jobs('tap_bq_known', NULL, 10001)$$, '22023', NULL, 'list_jobs: limit 10001');
SELECT throws_ok($$SELECT awa.list_jobs('tap_bq_known', NULL, NULL)$$, '22004', NULL, 'list_jobs: NULL limit');
SELECT throws_ok($$SELECT awa.list_jobs('tap_bq_known', 'nonsense')$$, '22P02', NULL, 'list_jobs: a state that is no job_state');
SELECT throws_ok($$SELECT * FROM awa.get_job(NULL)$$, '22004', 'p_job_id must not be null', 'get_job: NULL id');
SELECT throws_ok($$SELECT * FROM awa.get_job('tap_bq_known', NULL)$$, '22004', NULL, 'get_job(queue, id): NULL id');
SELECT throws_ok($$SELECT * FROM awa.get_job(NULL::text, 1)$$, '22004', 'p_queue must not be null', 'get_job(queue, id): NULL queue');

-- Nothing written by any refused call.
SELECT is((SELECT ROW((SELECT count(*) FROM awa.queue_meta) - 2, (SELECT count(*) FROM awa.queue_enqueue_heads WHERE queue <> 'tap_bq_new'),
                      (SELECT count(*) FROM awa.ready_entries WHERE queue <> 'tap_bq_new'), (SELECT count(*) FROM awa.deferred_jobs) - 1)::text),
          (SELECT ROW(meta, lanes, ready, deferred)::text FROM tap_bq_before),
          'refused calls left no settings row, lane, ready or deferred row (beyond the two queues set up above)');

SELECT * FROM finish();
ROLLBACK;
