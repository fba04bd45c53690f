-- lifecycle_leases: every attempt exit in leases mode (plane_settings.receipts = false): complete (once),
-- stale writers, fail -> retryable -> failed, DLQ, snooze, retry, heartbeat and rescue,
-- deadlines, promotion after lowering S, keyed retries, unique claims.
-- lifecycle_receipts.sql runs the same checks in receipts mode; keep the two in step.
\set VERBOSITY terse
UPDATE awa.plane_settings SET receipts = false;
SELECT receipts FROM awa.plane_settings;

-- The running attempt of a job as the worker sees it (receipt or lease).
CREATE FUNCTION pg_temp.running(p_job_id bigint) RETURNS TABLE (kind text, run_lease bigint, attempt smallint)
LANGUAGE sql AS $$
    SELECT 'receipt', c.run_lease, c.attempt FROM awa.lease_claims c
     WHERE c.job_id = p_job_id AND NOT EXISTS (SELECT 1 FROM awa.lease_claim_closures x
                                                WHERE (x.claim_slot, x.job_id, x.run_lease) = (c.claim_slot, c.job_id, c.run_lease))
    UNION ALL
    SELECT 'lease', l.run_lease, l.attempt FROM awa.leases l WHERE l.job_id = p_job_id AND l.state = 'running'
$$;

-- Where a job is now.
CREATE FUNCTION pg_temp.whereis(p_job_id bigint)
RETURNS TABLE (place text, state text, attempt smallint, run_lease bigint, enqueue_shard smallint, errors integer)
LANGUAGE sql AS $$
    SELECT 'deferred', d.state::text, d.attempt, d.run_lease, NULL::smallint, jsonb_array_length(coalesce(d.errors, '[]'))
      FROM awa.deferred_jobs d WHERE d.job_id = p_job_id
    UNION ALL
    SELECT 'done', d.state::text, d.attempt, d.run_lease, d.enqueue_shard, jsonb_array_length(coalesce(d.errors, '[]'))
      FROM awa.done_entries d WHERE d.job_id = p_job_id
    UNION ALL
    SELECT 'dlq', d.state::text, d.attempt, d.run_lease, NULL, jsonb_array_length(coalesce(d.errors, '[]'))
      FROM awa.dlq_entries d WHERE d.job_id = p_job_id
    UNION ALL
    SELECT 'running:' || r.kind, 'running', r.attempt, r.run_lease, NULL, NULL FROM pg_temp.running(p_job_id) r
    ORDER BY 1
$$;

-- 1. Complete: the first completion wins, a repeat or a wrong run_lease is a no-op.
SELECT id AS job FROM awa.insert_job_compat('done', 'lifecycle_leases_complete') \gset
SELECT job_id = :job AS claimed, attempt, run_lease, claim_slot IS NOT NULL AS has_receipt,
       lease_slot IS NOT NULL AS has_lease
  FROM awa.claim_ready_runtime('lifecycle_leases_complete', 10);
SELECT count(*) AS wrong_lease FROM awa.complete_jobs(ARRAY[:job]::bigint[], ARRAY[2]::bigint[]);
SELECT * FROM pg_temp.whereis(:job);
SELECT job_id = :job AS completed, run_lease FROM awa.complete_jobs(ARRAY[:job, :job]::bigint[], ARRAY[1, 1]::bigint[]);
SELECT count(*) AS second_time FROM awa.complete_jobs(ARRAY[:job]::bigint[], ARRAY[1]::bigint[]);
SELECT * FROM pg_temp.whereis(:job);
SELECT awa.heartbeat_jobs(ARRAY[:job]::bigint[], ARRAY[1]::bigint[]) AS heartbeat_after_complete;
SELECT awa.fail_job(:job, 1, 'too late') AS fail_after_complete,
       awa.fail_job_to_dlq(:job, 1) AS dlq_after_complete,
       awa.retry_job_after(:job, 1, '1 second') AS retry_after_complete,
       awa.snooze_job(:job, 1, '1 second') AS snooze_after_complete;
SELECT * FROM pg_temp.whereis(:job);

-- 2. fail_job: retryable (backoff or p_retry_in) while attempts remain, then failed, errors recorded.
SELECT id AS job FROM awa.insert_job_compat('flaky', 'lifecycle_leases_fail', p_max_attempts => 2::smallint) \gset
SELECT attempt, run_lease FROM awa.claim_ready_runtime('lifecycle_leases_fail', 10);
SELECT awa.fail_job(:job, 1, 'boom 1', interval '0') AS first_failure;
SELECT awa.fail_job(:job, 1, 'stale') AS stale_failure;
SELECT * FROM pg_temp.whereis(:job);
SELECT awa.promote_due() AS promoted;
SELECT attempt, run_lease, payload -> 'errors' -> 0 ->> 'error' AS previous_error
  FROM awa.claim_ready_runtime('lifecycle_leases_fail', 10);
SELECT awa.fail_job(:job, 2, 'boom 2') AS second_failure;
SELECT * FROM pg_temp.whereis(:job);
SELECT e ->> 'error' AS error, (e ->> 'attempt')::int AS attempt, coalesce((e ->> 'terminal')::boolean, false) AS terminal
  FROM awa.done_entries d, jsonb_array_elements(d.errors) e WHERE d.job_id = :job;
-- Default backoff: a retryable row is not due at once.
SELECT id AS job FROM awa.insert_job_compat('flaky', 'lifecycle_leases_fail') \gset
SELECT attempt FROM awa.claim_ready_runtime('lifecycle_leases_fail', 10);
SELECT awa.fail_job(:job, 1, 'later') AS backoff_failure;
SELECT run_at > clock_timestamp() + interval '1 second' AS backed_off FROM awa.deferred_jobs WHERE job_id = :job;
DELETE FROM awa.deferred_jobs WHERE job_id = :job;

-- 3. fail_job_to_dlq keeps the ordering key; a repeat is a no-op.
INSERT INTO awa.queue_meta (queue, enqueue_shards) VALUES ('lifecycle_leases_dlq', 4);
SELECT id AS job FROM awa.insert_job_compat('poison', 'lifecycle_leases_dlq', p_ordering_key => 'account-c') \gset
SELECT attempt, enqueue_shard FROM awa.claim_ready_runtime('lifecycle_leases_dlq', 10);
SELECT awa.fail_job_to_dlq(:job, 1, 'cannot parse', 'poison') AS to_dlq;
SELECT awa.fail_job_to_dlq(:job, 1, 'again', 'poison') AS to_dlq_again;
SELECT convert_from(ordering_key, 'UTF8') AS ordering_key, dlq_reason, state, attempt, original_run_lease,
       errors -> -1 ->> 'error' AS error, errors -> -1 ->> 'terminal' AS terminal
  FROM awa.dlq_entries WHERE job_id = :job;
SELECT * FROM pg_temp.whereis(:job);

-- 4. snooze_job: scheduled again, the attempt is not consumed.
SELECT id AS job FROM awa.insert_job_compat('sleepy', 'lifecycle_leases_snooze', p_max_attempts => 1::smallint) \gset
SELECT attempt, run_lease FROM awa.claim_ready_runtime('lifecycle_leases_snooze', 10);
SELECT awa.snooze_job(:job, 1, interval '0') AS snoozed;
SELECT * FROM pg_temp.whereis(:job);
SELECT awa.promote_due() AS promoted;
SELECT attempt, run_lease, max_attempts FROM awa.claim_ready_runtime('lifecycle_leases_snooze', 10);
SELECT awa.snooze_job(:job, 1, interval '0') AS stale_snooze;
SELECT count(*) AS completed FROM awa.complete_jobs(ARRAY[:job]::bigint[], ARRAY[2]::bigint[]);
SELECT * FROM pg_temp.whereis(:job);

-- 5. retry_job_after: retryable at now + delay, attempt consumed, no error recorded.
SELECT id AS job FROM awa.insert_job_compat('later', 'lifecycle_leases_retry') \gset
SELECT attempt FROM awa.claim_ready_runtime('lifecycle_leases_retry', 10);
SELECT awa.retry_job_after(:job, 1, interval '1 hour') AS retried;
SELECT awa.retry_job_after(:job, 1, interval '1 hour') AS stale_retry;
SELECT *, (SELECT run_at BETWEEN clock_timestamp() + interval '59 minutes' AND clock_timestamp() + interval '61 minutes'
             FROM awa.deferred_jobs WHERE job_id = :job) AS due_in_an_hour
  FROM pg_temp.whereis(:job);
SELECT awa.promote_due() AS not_due_yet;
DELETE FROM awa.deferred_jobs WHERE job_id = :job;

-- 6. Heartbeats keep an attempt alive; rescue takes only the stale one back to retryable.
SELECT awa.insert_jobs('lifecycle_leases_rescue', ARRAY['alive', 'dead']) AS ids \gset
SELECT kind, attempt FROM awa.claim_ready_runtime('lifecycle_leases_rescue', 10) ORDER BY kind;
SELECT (:'ids'::bigint[])[1] AS alive, (:'ids'::bigint[])[2] AS dead \gset
-- Both were claimed an hour ago (as if the workers had been running that long).
UPDATE awa.lease_claims SET claimed_at = claimed_at - interval '1 hour' WHERE job_id IN (:alive, :dead);
UPDATE awa.leases SET heartbeat_at = heartbeat_at - interval '1 hour' WHERE job_id IN (:alive, :dead);
SELECT awa.heartbeat_jobs(ARRAY[:alive]::bigint[], ARRAY[1]::bigint[]) AS alive_beats,
       awa.heartbeat_jobs(ARRAY[:dead]::bigint[], ARRAY[7]::bigint[]) AS wrong_lease_beats;
SELECT awa.rescue_stale_heartbeats(interval '10 minutes') AS rescued;
SELECT awa.rescue_stale_heartbeats(interval '10 minutes') AS rescued_again;
SELECT * FROM pg_temp.whereis(:alive);
SELECT * FROM pg_temp.whereis(:dead);
SELECT errors -> -1 ->> 'error' AS rescue_error, run_at > clock_timestamp() AS backed_off
  FROM awa.deferred_jobs WHERE job_id = :dead;
-- The dead worker comes back too late: its completion is a no-op; the live one completes.
SELECT count(*) AS late_completion FROM awa.complete_jobs(ARRAY[:dead]::bigint[], ARRAY[1]::bigint[]);
SELECT count(*) AS live_completion FROM awa.complete_jobs(ARRAY[:alive]::bigint[], ARRAY[1]::bigint[]);
SELECT count(*) AS done_rows FROM awa.done_entries WHERE job_id IN (:alive, :dead);
DELETE FROM awa.deferred_jobs WHERE job_id = :dead;

-- 7. Hard deadlines: an attempt past its deadline is rescued; one without a deadline is not.
SELECT id AS job FROM awa.insert_job_compat('slow', 'lifecycle_leases_deadline') \gset
SELECT id AS nodeadline FROM awa.insert_job_compat('slow', 'lifecycle_leases_nodeadline') \gset
SELECT deadline_at IS NOT NULL AS has_deadline FROM awa.claim_ready_runtime('lifecycle_leases_deadline', 10, 0.001);
SELECT deadline_at IS NOT NULL AS has_deadline FROM awa.claim_ready_runtime('lifecycle_leases_nodeadline', 10, 0);
SELECT pg_sleep(0.02);
SELECT awa.rescue_expired_deadlines() AS rescued;
SELECT * FROM pg_temp.whereis(:job);
SELECT errors -> -1 ->> 'error' AS deadline_error FROM awa.deferred_jobs WHERE job_id = :job;
SELECT count(*) AS late_completion FROM awa.complete_jobs(ARRAY[:job]::bigint[], ARRAY[1]::bigint[]);
SELECT count(*) AS completion FROM awa.complete_jobs(ARRAY[:nodeadline]::bigint[], ARRAY[1]::bigint[]);
DELETE FROM awa.deferred_jobs WHERE job_id = :job;

-- 8. Promotion after lowering S from 4 to 2: keyless rows only on shards 0..1, keyed rows on
-- hash mod 2 (customer-1..8 are on shards 3,0,1,2,3,0,1,2 at S = 4).
INSERT INTO awa.queue_meta (queue, enqueue_shards) VALUES ('lifecycle_leases_promote', 4);
SELECT count(awa.insert_job_compat('keyless', 'lifecycle_leases_promote', p_state => 'scheduled')) AS keyless
  FROM generate_series(1, 8);
SELECT count(awa.insert_job_compat('keyed', 'lifecycle_leases_promote', p_state => 'retryable',
                                   p_ordering_key => convert_to('customer-' || i, 'UTF8'))) AS keyed
  FROM generate_series(1, 8) i;
UPDATE awa.queue_meta SET enqueue_shards = 2 WHERE queue = 'lifecycle_leases_promote';
-- The oldest (keyless) rows one per transaction, so the rotor picks eight times; then the rest.
SELECT 'SELECT awa.promote_due(1) AS promoted' FROM generate_series(1, 8) \gexec
SELECT awa.promote_due() AS promoted;
SELECT kind, count(*) AS jobs, array_agg(DISTINCT enqueue_shard) AS shards,
       bool_and(ordering_key IS NULL OR enqueue_shard = awa.shard_for_ordering_key(ordering_key, 2)) AS on_key_shard,
       bool_and(attempt = 0 AND run_lease = 0) AS bodies_kept
  FROM awa.ready_entries WHERE queue = 'lifecycle_leases_promote' GROUP BY kind ORDER BY kind;
SELECT count(*) AS left_deferred FROM awa.deferred_jobs WHERE queue = 'lifecycle_leases_promote';

-- 9. A keyed job retried returns to its key's shard under the current width
-- (account-c: shard 2 at S = 4, 6 at S = 8).
INSERT INTO awa.queue_meta (queue, enqueue_shards) VALUES ('lifecycle_leases_keyed', 4);
SELECT id AS job FROM awa.insert_job_compat('keyed', 'lifecycle_leases_keyed', p_ordering_key => 'account-c') \gset
SELECT enqueue_shard, lane_seq, attempt FROM awa.claim_ready_runtime('lifecycle_leases_keyed', 10);
SELECT awa.fail_job(:job, 1, 'retry me', interval '0') AS failed;
SELECT convert_from(ordering_key, 'UTF8') AS deferred_key FROM awa.deferred_jobs WHERE job_id = :job;
SELECT awa.promote_due() AS promoted;
SELECT enqueue_shard, lane_seq, attempt FROM awa.claim_ready_runtime('lifecycle_leases_keyed', 10);
UPDATE awa.queue_meta SET enqueue_shards = 8 WHERE queue = 'lifecycle_leases_keyed';
SELECT awa.fail_job(:job, 2, 'retry me again', interval '0') AS failed;
SELECT awa.promote_due() AS promoted;
SELECT enqueue_shard, lane_seq, attempt, enqueue_shard = awa.shard_for_ordering_key('account-c'::text, 8) AS key_shard
  FROM awa.claim_ready_runtime('lifecycle_leases_keyed', 10);
SELECT count(*) AS completed FROM awa.complete_jobs(ARRAY[:job]::bigint[], ARRAY[3]::bigint[]);
SELECT * FROM pg_temp.whereis(:job);

-- 10. Unique claims follow the state: kept while running and retryable, released when failed.
SELECT id AS job FROM awa.insert_job_compat('uniq', 'lifecycle_leases_unique', p_max_attempts => 2::smallint,
                                            p_unique_key => '\x1ea5') \gset
SELECT attempt FROM awa.claim_ready_runtime('lifecycle_leases_unique', 10);
SELECT count(*) AS claims_running FROM awa.job_unique_claims WHERE unique_key = '\x1ea5';
SELECT awa.fail_job(:job, 1, 'x', interval '0') AS failed;
SELECT count(*) AS claims_retryable FROM awa.job_unique_claims WHERE unique_key = '\x1ea5';
SELECT awa.promote_due() AS promoted;
SELECT attempt FROM awa.claim_ready_runtime('lifecycle_leases_unique', 10);
SELECT awa.fail_job(:job, 2, 'y') AS failed;
SELECT count(*) AS claims_failed FROM awa.job_unique_claims WHERE unique_key = '\x1ea5';
SELECT state FROM awa.insert_job_compat('uniq', 'lifecycle_leases_unique', p_unique_key => '\x1ea5');

-- Leave nothing running or due for the tests that follow.
SELECT count(*) AS closed
  FROM (SELECT coalesce(array_agg(r.job_id), '{}') AS ids, coalesce(array_agg(r.run_lease), '{}') AS leases
          FROM (SELECT c.job_id, c.run_lease FROM awa.lease_claims c WHERE c.queue LIKE 'lifecycle_leases%'
                UNION SELECT l.job_id, l.run_lease FROM awa.leases l WHERE l.queue LIKE 'lifecycle_leases%') r) o,
       LATERAL awa.complete_jobs(o.ids, o.leases);
DELETE FROM awa.deferred_jobs WHERE queue LIKE 'lifecycle_leases%';
UPDATE awa.plane_settings SET receipts = true;
