-- The extreme values of every argument kind (docs/api.md, Conventions): the smallest and
-- largest bigint run_lease and job id, the smallest and largest integer attempt, the longest
-- intervals and non-finite timestamps. Each gives its documented result (a stale pair does
-- nothing) or 22023 naming the argument, never an overflow (22003, 22008), and a refused call
-- changes nothing.
BEGIN;
CREATE EXTENSION IF NOT EXISTS pgtap;
CREATE EXTENSION IF NOT EXISTS awa_shard;
SELECT plan(50);

-- One running attempt (run_lease 1).
SELECT awa.insert_jobs('tap_edge_q', ARRAY['running']) AS ids \gset
SELECT job_id AS running_id FROM awa.claim_ready_runtime('tap_edge_q', 1) \gset
CREATE TEMP TABLE tap_before AS
SELECT (SELECT count(*) FROM awa._open_receipts) AS open_attempts,
       (SELECT count(*) FROM awa.deferred_jobs) AS deferred,
       (SELECT count(*) FROM awa.attempt_state) AS heartbeats;

-- run_lease and job id at both ends of bigint: a stale pair, no overflow.
SELECT is(awa.fail_job(:running_id, l), NULL, 'fail_job: run_lease ' || l || ' is a stale pair (NULL)')
  FROM unnest(ARRAY[-9223372036854775808, 9223372036854775807, 0]) l;
SELECT is(awa.fail_job_to_dlq(:running_id, l), false, 'fail_job_to_dlq: run_lease ' || l || ' is a stale pair')
  FROM unnest(ARRAY[-9223372036854775808, 9223372036854775807]) l;
SELECT is(awa.retry_job_after(:running_id, l, '1 second'), false, 'retry_job_after: run_lease ' || l || ' is a stale pair')
  FROM unnest(ARRAY[-9223372036854775808, 9223372036854775807]) l;
SELECT is(awa.snooze_job(:running_id, l, '1 second'), false, 'snooze_job: run_lease ' || l || ' is a stale pair')
  FROM unnest(ARRAY[-9223372036854775808, 9223372036854775807]) l;
SELECT is((SELECT count(*) FROM awa.complete_jobs(ARRAY[:running_id, :running_id]::bigint[],
                                                  ARRAY[-9223372036854775808, 9223372036854775807])), 0::bigint,
          'complete_jobs: the extreme run_leases are stale pairs');
SELECT is(awa.heartbeat_jobs(ARRAY[:running_id, :running_id]::bigint[], ARRAY[-9223372036854775808, 9223372036854775807]), 0,
          'heartbeat_jobs: the extreme run_leases are stale pairs');
SELECT is((SELECT count(*) FROM awa.complete_jobs(ARRAY[-9223372036854775808, 9223372036854775807],
                                                  ARRAY[-9223372036854775808, 9223372036854775807])), 0::bigint,
          'complete_jobs: the extreme job ids are unknown jobs');
SELECT is(awa.fail_job(-9223372036854775808, -9223372036854775808), NULL, 'fail_job: the smallest job id is an unknown job');
SELECT is(awa.cancel_job(-9223372036854775808), false, 'cancel_job: the smallest job id is an unknown job');
SELECT is(awa.delete_job(9223372036854775807), false, 'delete_job: the largest job id is an unknown job');
SELECT is((SELECT count(*) FROM awa.get_job(-9223372036854775808)), 0::bigint, 'get_job: the smallest job id finds nothing');
SELECT is(awa.retry_from_dlq(9223372036854775807), false, 'retry_from_dlq: the largest job id is no dead letter');
SELECT is(awa.move_queue(-9223372036854775808, 'tap_edge_q'), false, 'move_queue: the smallest job id moves nothing');

-- backoff_duration: any integer attempt gives a delay between 1 second and 24 hours.
SELECT ok(awa.backoff_duration(a, m) BETWEEN interval '1 second' AND interval '24 hours',
          format('backoff_duration(%s, %s) is between 1 second and 24 hours', a, m))
  FROM (VALUES (-2147483648, 1), (-1, 5), (0, 0), (2147483647, 2147483647), (1, -2147483648)) v(a, m);
SELECT ok(awa.backoff_duration(-2147483648, 5) <= interval '1.25 seconds', 'backoff_duration: a negative attempt counts as 0');
SELECT is(awa.backoff_duration(2147483647, 5), interval '24 hours', 'backoff_duration: a huge attempt is capped at 24 hours');

-- Intervals: at most 1000 years (in the sum of their parts), else 22023 naming the argument.
SELECT is(awa.snooze_job(:running_id, 2, interval '1000 years'), false, 'snooze_job: p_delay of 1000 years is accepted (stale pair)');
SELECT is(awa.fail_job(:running_id, 2, 'x', interval '1000 years'), NULL, 'fail_job: p_retry_in of 1000 years is accepted (stale pair)');
SELECT throws_ok(format('SELECT awa.%s(%s, 1, %L)', f, :running_id, i), '22023', 'p_delay must be at most 1000 years',
                 f || ': p_delay ' || i)
  FROM unnest(ARRAY['retry_job_after', 'snooze_job']) f,
       unnest(ARRAY['178000000 years', '1001 years', '-1000 years 2000000000 days', '2562047788 hours']) i;
SELECT throws_ok(format('SELECT awa.fail_job(%s, 1, NULL, %L)', :running_id, i), '22023', 'p_retry_in must be at most 1000 years',
                 'fail_job: p_retry_in ' || i)
  FROM unnest(ARRAY['178000000 years', '1001 years', '2147483647 days']) i;
SELECT throws_ok($$SELECT awa.rescue_stale_heartbeats('178000000 years')$$, '22023', 'p_stale must be at most 1000 years',
                 'rescue_stale_heartbeats: p_stale of 178000000 years');
SELECT throws_ok($$SELECT awa.run_maintenance('178000000 years')$$, '22023', 'p_stale_heartbeat must be at most 1000 years',
                 'run_maintenance: p_stale_heartbeat of 178000000 years');
SELECT throws_ok($$SELECT awa.age_waiting_priorities('178000000 years')$$, '22023', 'p_older_than must be at most 1000 years',
                 'age_waiting_priorities: p_older_than of 178000000 years');
SELECT is(awa.rescue_stale_heartbeats('1000 years'), 0, 'rescue_stale_heartbeats: p_stale of 1000 years rescues nothing');
SELECT is(awa.age_waiting_priorities('1000 years'), 0, 'age_waiting_priorities: p_older_than of 1000 years ages nothing');

-- Non-finite timestamps.
SELECT throws_ok(format('SELECT awa.retry_from_dlq(1, NULL, NULL, %L)', t), '22023', 'p_run_at must be a finite timestamp',
                 'retry_from_dlq: p_run_at ' || t)
  FROM unnest(ARRAY['infinity', '-infinity']) t;

-- Nothing above changed the running attempt.
SELECT is((SELECT count(*) FROM awa._open_receipts), (SELECT open_attempts FROM tap_before), 'the attempt is still open');
SELECT is((SELECT count(*) FROM awa.deferred_jobs), (SELECT deferred FROM tap_before), 'no job was deferred');
SELECT is((SELECT count(*) FROM awa.attempt_state), (SELECT heartbeats FROM tap_before), 'no heartbeat was recorded');
SELECT is(awa.retry_job_after(:running_id, 1, '1000 years'), true, 'retry_job_after: 1000 years ends the open attempt');
SELECT ok((SELECT run_at FROM awa.get_job(:running_id)) > now() + interval '999 years', 'the job is due in 1000 years');

SELECT * FROM finish();
ROLLBACK;
