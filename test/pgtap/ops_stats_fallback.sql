-- awa.shard_stats without shared_preload_libraries (this server does not preload):
-- the documented fallback derives the counters from the tables (source 'tables'), and
-- awa.shard_lag / awa.queue_counts_exact work the same way.
CREATE EXTENSION IF NOT EXISTS pgtap;
CREATE EXTENSION IF NOT EXISTS awa_shard;
BEGIN;
SELECT plan(12);

SELECT is(awa._stats_preloaded(), false, 'the library is not preloaded here');
SELECT is(awa.reset_shard_stats(), false, 'reset reports that there are no shared counters');

-- S = 2: three jobs on shard 0, two on shard 1; claim and complete shard 0's lane,
-- fail one job of shard 1 terminally. (Set-up output is discarded.)
\o /dev/null
SELECT awa.set_enqueue_shards('ops_tap_fb', 2);
SELECT awa.insert_jobs('ops_tap_fb', array_fill('fb'::text, ARRAY[5]),
    p_ordering_keys => ARRAY['shard-fixture-0', 'shard-fixture-0', 'shard-fixture-0',
                             'shard-fixture-1', 'shard-fixture-1']::text[]::bytea[],
    p_max_attempts => array_fill(1::smallint, ARRAY[5]));
CREATE TEMP TABLE fb_claims AS
    SELECT job_id, run_lease, enqueue_shard FROM awa.claim_ready_runtime('ops_tap_fb', 10) WHERE enqueue_shard = 0;
INSERT INTO fb_claims SELECT job_id, run_lease, enqueue_shard FROM awa.claim_ready_runtime('ops_tap_fb', 1);
SELECT count(*) FROM fb_claims c, LATERAL awa.complete_jobs(ARRAY[c.job_id], ARRAY[c.run_lease]) WHERE c.enqueue_shard = 0;
SELECT awa.fail_job(job_id, run_lease, 'boom') FROM fb_claims WHERE enqueue_shard = 1;
\o

SELECT results_eq(
    $$SELECT enqueue_shard, enqueued, claimed, completed, failed, source, since IS NULL
        FROM awa.shard_stats WHERE queue = 'ops_tap_fb' ORDER BY enqueue_shard$$,
    $$VALUES (0::smallint, 3::bigint, 3::bigint, 3::bigint, 0::bigint, 'tables'::text, true),
             (1::smallint, 2::bigint, 1::bigint, 0::bigint, 1::bigint, 'tables'::text, true)$$,
    'fallback counters per shard: enqueued = next_seq - 1, claimed = claim_seq - 1, terminal rows counted');

-- A rolled-back enqueue leaves a gap: the fallback counts lane positions handed out.
\o /dev/null
SAVEPOINT gap;
SELECT awa.insert_job_compat('fb', 'ops_tap_fb', p_ordering_key => 'shard-fixture-1'::bytea);
ROLLBACK TO SAVEPOINT gap;
SELECT awa.insert_job_compat('fb', 'ops_tap_fb', p_ordering_key => 'shard-fixture-1'::bytea);
\o
SELECT is((SELECT enqueued FROM awa.shard_stats WHERE queue = 'ops_tap_fb' AND enqueue_shard = 1), 4::bigint,
          'enqueued includes the rolled-back position');
SELECT results_eq(
    $$SELECT enqueue_shard, next_seq, claim_seq, lag, waiting FROM awa.shard_lag WHERE queue = 'ops_tap_fb' ORDER BY 1$$,
    $$VALUES (0::smallint, 4::bigint, 4::bigint, 0::bigint, 0::bigint), (1::smallint, 5::bigint, 2::bigint, 3::bigint, 2::bigint)$$,
    'shard_lag: lag counts the gap, waiting counts rows (lag never under-counts)');
SELECT results_eq(
    $$SELECT available, running, completed, failed FROM awa.queue_counts_exact('ops_tap_fb')$$,
    $$VALUES (2::bigint, 0::bigint, 3::bigint, 1::bigint)$$,
    'exact counts');

-- Monitoring role reads the fallback too.
SELECT lives_ok($$SET LOCAL ROLE pg_monitor; SELECT count(*) FROM awa.shard_stats; RESET ROLE$$,
                'pg_monitor reads the fallback');
SELECT throws_ok($$SELECT awa.set_enqueue_shards('ops_tap_fb', 0)$$, '22023', NULL, 'width 0 rejected');
SELECT throws_ok($$SELECT awa.cancel_job(NULL)$$, '22004', NULL, 'NULL job id rejected');

-- Without preload no maintenance worker exists, whatever awa_shard.maintenance says (it is
-- on by default): a claim promotes the due jobs of its own queue itself (maintenance.md §1).
SELECT is(current_setting('awa_shard.maintenance'), 'on', 'awa_shard.maintenance is on (the default)');
SELECT ok((awa.insert_job_compat('due', 'ops_tap_due', p_state => 'scheduled',
           p_run_at => clock_timestamp() - interval '1 second')).id > 0, 'a due scheduled job');
SELECT is((SELECT string_agg(kind, ',') FROM awa.claim_ready_runtime('ops_tap_due', 10)), 'due',
          'without preload a claim promotes and claims the due job');

SELECT * FROM finish();
ROLLBACK;
