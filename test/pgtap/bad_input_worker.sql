-- Bad input to the worker and maintenance functions (claim_ready_runtime, complete_jobs,
-- fail_job, fail_job_to_dlq, retry_job_after, snooze_job, heartbeat_jobs, wait_for_jobs,
-- rescue_*, promote_due; the optional queue of every exit): NULL, out of range, too long, mismatched arrays raise the
-- documented SQLSTATE and change nothing; the wrong state or run_lease is a no-op.
BEGIN;
CREATE EXTENSION IF NOT EXISTS pgtap;
CREATE EXTENSION IF NOT EXISTS awa_shard;
SELECT plan(94);

-- One running attempt (run_lease 1) and one job that is still ready.
SELECT awa.insert_jobs('tap_badw_q', ARRAY['running', 'waiting']) AS ids \gset
SELECT job_id AS running_id FROM awa.claim_ready_runtime('tap_badw_q', 1) \gset
SELECT (:'ids'::bigint[])[2] AS ready_id \gset
CREATE TEMP TABLE tap_before AS
SELECT (SELECT claim_seq FROM awa.lane_cursors WHERE queue = 'tap_badw_q') AS claim_seq,
       (SELECT count(*) FROM awa.lease_claims) + (SELECT count(*) FROM awa.leases) AS attempts,
       (SELECT count(*) FROM awa.lease_claim_closures) AS closures,
       (SELECT count(*) FROM awa._terminal_attempts) AS done,
       (SELECT count(*) FROM awa.deferred_jobs) AS deferred,
       (SELECT count(*) FROM awa.dlq_entries) AS dlq,
       (SELECT count(*) FROM awa.attempt_state) AS heartbeats;

-- claim_ready_runtime: every argument.
SELECT throws_ok($$SELECT * FROM awa.claim_ready_runtime(NULL, 10)$$, '22004', NULL, 'claim: NULL p_queue');
SELECT throws_ok($$SELECT * FROM awa.claim_ready_runtime('', 10)$$, '23514', NULL, 'claim: empty p_queue');
SELECT throws_ok(format('SELECT * FROM awa.claim_ready_runtime(%L, 10)', repeat('q', 201)), '23514', NULL,
                 'claim: 201-character p_queue');
SELECT throws_ok($$SELECT * FROM awa.claim_ready_runtime('tap_badw_q', NULL)$$, '22004', NULL, 'claim: NULL p_max_batch');
SELECT throws_ok(format('SELECT * FROM awa.claim_ready_runtime(%L, %s)', 'tap_badw_q', b), '22023', NULL, 'claim: p_max_batch ' || b)
  FROM unnest(ARRAY[0, -1, 10001]) AS b;
SELECT throws_ok(format('SELECT * FROM awa.claim_ready_runtime(%L, 10, %L)', 'tap_badw_q', d), '22023', NULL,
                 'claim: p_deadline_secs ' || d)
  FROM unnest(ARRAY['-1', 'NaN', 'Infinity', '-Infinity', '1e13']) AS d;
SELECT throws_ok(format('SELECT * FROM awa.claim_ready_runtime(%L, 10, 0, %L)', 'tap_badw_q', a), '22023', NULL,
                 'claim: p_aging_secs ' || a)
  FROM unnest(ARRAY['-0.5', 'NaN', 'Infinity', '5e-324', '1e13']) AS a;
SELECT is((SELECT claim_seq FROM awa.lane_cursors WHERE queue = 'tap_badw_q'), (SELECT claim_seq FROM tap_before),
          'failed claims did not move the claim cursor');
SELECT is((SELECT count(*) FROM awa.lease_claims) + (SELECT count(*) FROM awa.leases), (SELECT attempts FROM tap_before),
          'failed claims opened no attempt');
SELECT is((SELECT count(*) FROM awa.claim_ready_runtime('tap_badw_nothing', 10)), 0::bigint, 'claim: a queue without lanes returns no rows');
SELECT is((SELECT count(*) FROM awa.claim_ready_runtime(repeat('q', 200), 10000, NULL, NULL)), 0::bigint,
          'claim: 200-character queue, batch 10000 and NULL seconds are accepted');

-- complete_jobs: both arrays.
SELECT throws_ok($$SELECT * FROM awa.complete_jobs(NULL, ARRAY[1::bigint])$$, '22004', NULL, 'complete: NULL p_job_ids');
SELECT throws_ok($$SELECT * FROM awa.complete_jobs(ARRAY[1::bigint], NULL)$$, '22004', NULL, 'complete: NULL p_run_leases');
SELECT throws_ok(format('SELECT * FROM awa.complete_jobs(ARRAY[%s, NULL]::bigint[], ARRAY[1, 1]::bigint[])', :running_id), '22004', NULL,
                 'complete: NULL job id element');
SELECT throws_ok(format('SELECT * FROM awa.complete_jobs(ARRAY[%s]::bigint[], ARRAY[NULL]::bigint[])', :running_id), '22004', NULL,
                 'complete: NULL run_lease element');
SELECT throws_ok(format('SELECT * FROM awa.complete_jobs(ARRAY[%s]::bigint[], ARRAY[1, 1]::bigint[])', :running_id), '22023', NULL,
                 'complete: arrays of different lengths');
SELECT throws_ok(format('SELECT * FROM awa.complete_jobs(ARRAY[[%s]]::bigint[], ARRAY[[1]]::bigint[])', :running_id), '22023', NULL,
                 'complete: two-dimensional arrays');
SELECT is((SELECT count(*) FROM awa.complete_jobs('{}', '{}')), 0::bigint, 'complete: empty arrays complete nothing');
SELECT is((SELECT count(*) FROM awa.complete_jobs(ARRAY[:running_id]::bigint[], ARRAY[2]::bigint[])), 0::bigint,
          'complete: the wrong run_lease is a no-op');
SELECT is((SELECT count(*) FROM awa.complete_jobs(ARRAY[:ready_id]::bigint[], ARRAY[0]::bigint[])), 0::bigint,
          'complete: a job that was never claimed is a no-op');
SELECT is((SELECT count(*) FROM awa.complete_jobs(ARRAY[-1, 0, 9223372036854775807]::bigint[], ARRAY[1, 1, 1]::bigint[])), 0::bigint,
          'complete: unknown job ids are a no-op');

-- fail_job: every argument.
SELECT throws_ok(format('SELECT awa.fail_job(NULL, 1)'), '22004', NULL, 'fail_job: NULL p_job_id');
SELECT throws_ok(format('SELECT awa.fail_job(%s, NULL)', :running_id), '22004', NULL, 'fail_job: NULL p_run_lease');
SELECT throws_ok(format('SELECT awa.fail_job(%s, 1, %L, %L)', :running_id, 'x', '-1 second'), '22023', NULL,
                 'fail_job: negative p_retry_in');
SELECT is(awa.fail_job(:running_id, 2, 'stale'), NULL, 'fail_job: the wrong run_lease is a no-op (NULL)');
SELECT is(awa.fail_job(:ready_id, 0, 'not running'), NULL, 'fail_job: a job that is not running is a no-op (NULL)');

-- fail_job_to_dlq: every argument.
SELECT throws_ok($$SELECT awa.fail_job_to_dlq(NULL, 1)$$, '22004', NULL, 'fail_job_to_dlq: NULL p_job_id');
SELECT throws_ok(format('SELECT awa.fail_job_to_dlq(%s, NULL)', :running_id), '22004', NULL, 'fail_job_to_dlq: NULL p_run_lease');
SELECT throws_ok(format('SELECT awa.fail_job_to_dlq(%s, 1, %L, NULL)', :running_id, 'x'), '22004', NULL, 'fail_job_to_dlq: NULL p_reason');
SELECT is(awa.fail_job_to_dlq(:running_id, 2), false, 'fail_job_to_dlq: the wrong run_lease is a no-op');
SELECT is(awa.fail_job_to_dlq(:ready_id, 0), false, 'fail_job_to_dlq: a job that is not running is a no-op');

-- retry_job_after and snooze_job: every argument.
-- Both take (job_id, run_lease, delay) and check them alike.
SELECT throws_ok(format(c.call, c.f, :running_id), c.code, NULL, c.f || ': ' || c.what)
  FROM (SELECT f, c.* FROM unnest(ARRAY['retry_job_after', 'snooze_job']) f,
               (VALUES (1, 'SELECT awa.%s(NULL, 1, ''1 second'')', '22004', 'NULL p_job_id'),
                       (2, 'SELECT awa.%s(%s, NULL, ''1 second'')', '22004', 'NULL p_run_lease'),
                       (3, 'SELECT awa.%s(%s, 1, NULL)', '22004', 'NULL p_delay'),
                       (4, 'SELECT awa.%s(%s, 1, ''-1 second'')', '22023', 'negative p_delay')) c(n, call, code, what)
         ORDER BY f, c.n) c;
SELECT is(awa.retry_job_after(:running_id, 2, '1 second'), false, 'retry_job_after: the wrong run_lease is a no-op');
SELECT is(awa.retry_job_after(:ready_id, 0, '1 second'), false, 'retry_job_after: a job that is not running is a no-op');
SELECT is(awa.snooze_job(:running_id, 2, '1 second'), false, 'snooze_job: the wrong run_lease is a no-op');
SELECT is(awa.snooze_job(:ready_id, 0, '1 second'), false, 'snooze_job: a job that is not running is a no-op');

-- heartbeat_jobs: both arrays.
SELECT throws_ok($$SELECT awa.heartbeat_jobs(NULL, ARRAY[1::bigint])$$, '22004', NULL, 'heartbeat_jobs: NULL p_job_ids');
SELECT throws_ok($$SELECT awa.heartbeat_jobs(ARRAY[1::bigint], NULL)$$, '22004', NULL, 'heartbeat_jobs: NULL p_run_leases');
SELECT throws_ok($$SELECT awa.heartbeat_jobs(ARRAY[1, 2]::bigint[], ARRAY[1]::bigint[])$$, '22023', NULL,
                 'heartbeat_jobs: arrays of different lengths');
SELECT throws_ok($$SELECT awa.heartbeat_jobs(ARRAY[[1, 2]]::bigint[], ARRAY[[1, 1]]::bigint[])$$, '22023', NULL,
                 'heartbeat_jobs: two-dimensional arrays, as complete_jobs');
SELECT throws_ok($$SELECT awa.heartbeat_jobs(ARRAY[1, NULL]::bigint[], ARRAY[1, 1]::bigint[])$$, '22004',
                 'p_job_ids and p_run_leases must not contain nulls', 'heartbeat_jobs: a NULL job id, as complete_jobs');
SELECT throws_ok($$SELECT awa.heartbeat_jobs(ARRAY[1, 2]::bigint[], ARRAY[NULL, 1]::bigint[])$$, '22004',
                 'p_job_ids and p_run_leases must not contain nulls', 'heartbeat_jobs: a NULL run lease, as complete_jobs');
SELECT is(awa.heartbeat_jobs(ARRAY[:running_id]::bigint[], ARRAY[2]::bigint[]), 0, 'heartbeat_jobs: the wrong run_lease beats nothing');
SELECT is(awa.heartbeat_jobs(ARRAY[:ready_id]::bigint[], ARRAY[0]::bigint[]), 0, 'heartbeat_jobs: a job that is not running beats nothing');

-- wait_for_jobs: both arguments.
SELECT throws_ok($$SELECT awa.wait_for_jobs(NULL, 10)$$, '22004', NULL, 'wait_for_jobs: NULL p_queue');
SELECT throws_ok($$SELECT awa.wait_for_jobs('', 10)$$, '23514', NULL, 'wait_for_jobs: empty p_queue');
SELECT throws_ok(format('SELECT awa.wait_for_jobs(%L, 10)', repeat('q', 201)), '23514', NULL, 'wait_for_jobs: 201-character p_queue');
SELECT throws_ok($$SELECT awa.wait_for_jobs('tap_badw_q', NULL)$$, '22004', NULL, 'wait_for_jobs: NULL p_timeout_ms');
SELECT throws_ok($$SELECT awa.wait_for_jobs('tap_badw_q', -1)$$, '22023', NULL, 'wait_for_jobs: negative p_timeout_ms');
SELECT throws_ok($$SELECT awa.wait_for_jobs('tap_badw_q', 3600001)$$, '22023', NULL, 'wait_for_jobs: p_timeout_ms over an hour');
SELECT is(awa.wait_for_jobs('tap_badw_q', 0), true, 'wait_for_jobs: visible work returns true at once');
SELECT is(awa.wait_for_jobs('tap_badw_empty', 20), false, 'wait_for_jobs: an empty queue times out with false');

-- The queue a call acts in (p_queue; p_from_queue of move_queue and retry_from_dlq), optional:
-- a badly sized one raises 23514 as every queue argument does, before anything is written.
SELECT throws_ok(format('SELECT %s', c), '23514', NULL, 'optional queue: ' || c)
  FROM unnest(ARRAY[
      format($$awa.complete_jobs(ARRAY[%s]::bigint[], ARRAY[1]::bigint[], NULL, '')$$, :running_id),
      format($$awa.complete_jobs(ARRAY[%s]::bigint[], ARRAY[1]::bigint[], NULL, %L)$$, :running_id, repeat('q', 201)),
      format($$awa.heartbeat_jobs(ARRAY[%s]::bigint[], ARRAY[1]::bigint[], '')$$, :running_id),
      format($$awa.set_progress(%s, 1, '{}', '')$$, :running_id),
      format($$awa.set_jobs_progress(ARRAY[%s]::bigint[], ARRAY[1]::bigint[], ARRAY['{}']::jsonb[], '')$$, :running_id),
      format($$awa.fail_job(%s, 1, 'x', NULL, '')$$, :running_id),
      format($$awa.fail_job_to_dlq(%s, 1, 'x', 'y', '')$$, :running_id),
      format($$awa.retry_job_after(%s, 1, '1 second', '')$$, :running_id),
      format($$awa.snooze_job(%s, 1, '1 second', '')$$, :running_id),
      format($$awa.cancel_job(%s, '')$$, :running_id),
      format($$awa.delete_job(%s, '')$$, :ready_id),
      format($$awa.move_failed_to_dlq(%s, 'x', '')$$, :running_id),
      format($$awa.move_queue(%s, 'tap_badw_q', NULL, '')$$, :ready_id),
      format($$awa.retry_from_dlq(%s, NULL, NULL, NULL, '')$$, :running_id)]) AS c;

-- Maintenance functions.
SELECT throws_ok($$SELECT awa.rescue_stale_heartbeats(NULL)$$, '22004', NULL, 'rescue_stale_heartbeats: NULL p_stale');
SELECT throws_ok($$SELECT awa.rescue_stale_heartbeats('1 minute', NULL)$$, '22004', NULL, 'rescue_stale_heartbeats: NULL p_limit');
SELECT throws_ok($$SELECT awa.rescue_stale_heartbeats('0')$$, '22023', NULL, 'rescue_stale_heartbeats: zero p_stale');
SELECT throws_ok($$SELECT awa.rescue_stale_heartbeats('-1 minute')$$, '22023', NULL, 'rescue_stale_heartbeats: negative p_stale');
SELECT throws_ok($$SELECT awa.rescue_stale_heartbeats('1 minute', 0)$$, '22023', NULL, 'rescue_stale_heartbeats: p_limit 0');
SELECT throws_ok($$SELECT awa.rescue_expired_deadlines(NULL)$$, '22004', NULL, 'rescue_expired_deadlines: NULL p_limit');
SELECT throws_ok($$SELECT awa.rescue_expired_deadlines(0)$$, '22023', NULL, 'rescue_expired_deadlines: p_limit 0');
SELECT throws_ok($$SELECT awa.promote_due(NULL)$$, '22004', NULL, 'promote_due: NULL p_limit');
SELECT throws_ok($$SELECT awa.promote_due(0)$$, '22023', NULL, 'promote_due: p_limit 0');

-- Nothing above changed the running attempt or wrote a terminal, deferred, DLQ or heartbeat row.
SELECT is((SELECT ROW((SELECT count(*) FROM awa.lease_claims) + (SELECT count(*) FROM awa.leases),
                      (SELECT count(*) FROM awa.lease_claim_closures), (SELECT count(*) FROM awa._terminal_attempts),
                      (SELECT count(*) FROM awa.deferred_jobs), (SELECT count(*) FROM awa.dlq_entries),
                      (SELECT count(*) FROM awa.attempt_state))::text),
          (SELECT ROW(attempts, closures, done, deferred, dlq, heartbeats)::text FROM tap_before),
          'bad input and stale writers changed no attempt, closure, done, deferred, DLQ or heartbeat row');
SELECT results_eq(format($$SELECT job_id, run_lease FROM awa.complete_jobs(ARRAY[%s]::bigint[], ARRAY[1]::bigint[])$$, :running_id),
                  format($$VALUES (%s::bigint, 1::bigint)$$, :running_id),
                  'the running attempt still completes with its own run_lease');
SELECT * FROM finish();
ROLLBACK;
