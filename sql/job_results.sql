-- job_results: what a caller learns about its job (docs/api.md "Progress, results and
-- waiting"): progress of the running attempt, and the argument checks of set_progress.
-- The lifecycle suites (lifecycle_checks.psql, section 11) run progress in both plane modes.
\set VERBOSITY terse
\i sql/err.psql

-- set_progress: every argument is checked before anything is written; NULL -> 22004, a
-- value over awa._limit('max_result_bytes') -> 22023 naming the argument.
SELECT id AS job FROM awa.insert_job_compat('res', 'res_progress') \gset
SELECT run_lease FROM awa.claim_ready_runtime('res_progress', 1) \gset
SELECT pg_temp.err($$SELECT awa.set_progress(NULL, 1, '{}')$$) AS null_job,
       pg_temp.err($$SELECT awa.set_progress(1, NULL, '{}')$$) AS null_lease;
SELECT pg_temp.err($$SELECT awa.set_progress(1, 1, NULL)$$) AS null_progress;
SELECT awa._limit('max_result_bytes') AS max_result_bytes;
SELECT pg_temp.err(format($$SELECT awa.set_progress(%s, %s, to_jsonb(repeat('x', %s)))$$,
                          :job, :run_lease, awa._limit('max_result_bytes'))) AS too_large;
SELECT progress IS NULL AS nothing_written FROM awa.get_job(:job);
-- At the limit is accepted (a JSON string carries a few bytes of header).
SELECT awa.set_progress(:job, :run_lease, to_jsonb(repeat('x', awa._limit('max_result_bytes') - 16))) AS at_limit;
SELECT length(progress #>> '{}') AS stored FROM awa.get_job(:job);
SELECT count(*) AS completed FROM awa.complete_jobs(ARRAY[:job]::bigint[], ARRAY[:run_lease]::bigint[]);

-- Results: complete_jobs(..., p_results) stores one result per completed pair (a NULL
-- element: none), shown as `result`; in both plane modes; a stale pair stores nothing.
SELECT awa.create_queue('res_results') IS NOT NULL AS created;
SELECT array_agg(id ORDER BY id) AS jobs FROM (
    SELECT (awa.insert_job_compat('res', 'res_results')).id FROM generate_series(1, 4)) j \gset
SELECT count(*) AS claimed FROM awa.claim_ready_runtime('res_results', 4);
SELECT job_id = ANY (:'jobs'::bigint[]) AS completed
  FROM awa.complete_jobs(:'jobs'::bigint[], ARRAY[1, 1, 1, 1]::bigint[],
                         ARRAY['{"sum": 1}', NULL, '[1, 2]', '"three"']::jsonb[]);
SELECT array_position(:'jobs'::bigint[], id) AS n, state, result FROM awa.list_jobs('res_results') ORDER BY id;
SELECT result FROM awa.get_job((:'jobs'::bigint[])[1]);
SELECT result FROM awa.jobs WHERE id = (:'jobs'::bigint[])[3];
-- One completion batch holds the four, their results parallel to the offsets.
SELECT cardinality(lane_offsets) AS offsets, cardinality(results) AS results FROM awa.completion_batches
 WHERE queue = 'res_results';
-- A completion without results stores NULL, not an array of NULLs; a repeat stores nothing.
SELECT id AS job5 FROM awa.insert_job_compat('res', 'res_results') \gset
SELECT count(*) AS claimed FROM awa.claim_ready_runtime('res_results', 4);
SELECT count(*) AS completed FROM awa.complete_jobs(ARRAY[:job5]::bigint[], ARRAY[1]::bigint[]);
SELECT count(*) AS again FROM awa.complete_jobs(ARRAY[:job5]::bigint[], ARRAY[1]::bigint[], ARRAY['"late"']::jsonb[]);
SELECT state, result FROM awa.get_job(:job5);
SELECT count(*) AS batches_without_results FROM awa.completion_batches WHERE queue = 'res_results' AND results IS NULL;
-- Duplicate pairs count once (the first result given is kept).
SELECT id AS job6 FROM awa.insert_job_compat('res', 'res_results') \gset
SELECT count(*) AS claimed FROM awa.claim_ready_runtime('res_results', 4);
SELECT count(*) AS completed
  FROM awa.complete_jobs(ARRAY[:job6, :job6]::bigint[], ARRAY[1, 1]::bigint[], ARRAY['1', '2']::jsonb[]);
SELECT result FROM awa.get_job(:job6);

-- Leases mode: the same.
UPDATE awa.plane_settings SET receipts = false;
SELECT id AS job7 FROM awa.insert_job_compat('res', 'res_results') \gset
SELECT lease_slot IS NOT NULL AS leased FROM awa.claim_ready_runtime('res_results', 4);
SELECT count(*) AS completed FROM awa.complete_jobs(ARRAY[:job7]::bigint[], ARRAY[1]::bigint[], ARRAY['{"leased": true}']::jsonb[]);
SELECT state, result FROM awa.get_job(:job7);
UPDATE awa.plane_settings SET receipts = true;

-- Bad input: checked before anything is written (the attempts stay open).
SELECT array_agg(id ORDER BY id) AS bad FROM (
    SELECT (awa.insert_job_compat('res', 'res_results')).id FROM generate_series(1, 2)) j \gset
SELECT count(*) AS claimed FROM awa.claim_ready_runtime('res_results', 4);
SELECT pg_temp.err(format($$SELECT awa.complete_jobs(%L, '{1, 1}', '{"1"}')$$, :'bad')) AS short_results;
SELECT pg_temp.err(format($$SELECT awa.complete_jobs(%L, '{1, 1}', '{{"1"}, {"2"}}')$$, :'bad')) AS two_dimensions;
SELECT pg_temp.err(format($$SELECT awa.complete_jobs(%L, '{1, 1}', ARRAY['1', to_jsonb(repeat('x', %s))])$$,
                          :'bad', awa._limit('max_result_bytes'))) AS too_large;
SELECT count(*) AS still_running FROM awa.list_jobs('res_results', 'running');
SELECT count(*) AS completed
  FROM awa.complete_jobs(:'bad'::bigint[], '{1, 1}', ARRAY[NULL, to_jsonb(repeat('x', awa._limit('max_result_bytes') - 16))]);
SELECT array_position(:'bad'::bigint[], id) AS n, length(result #>> '{}') AS result_chars
  FROM awa.list_jobs('res_results') WHERE id = ANY (:'bad'::bigint[]) ORDER BY id;

-- A result lives as long as its job: deleting one job of a batch takes its result, and only
-- its result, out of the batch.
SELECT awa.delete_job((:'jobs'::bigint[])[1]) AS deleted;
SELECT array_position(:'jobs'::bigint[], id) AS n, result FROM awa.list_jobs('res_results')
 WHERE id = ANY (:'jobs'::bigint[]) ORDER BY id;

-- wait_for_job: a terminal job is returned at once (completed, failed, cancelled, dead-lettered);
-- a live one at the timeout, in its current state; an unknown id is NULL. (The wake-up by the
-- finishing commit is the isolation spec job_wait.)
SELECT state, result FROM awa.wait_for_job((:'jobs'::bigint[])[3], 3600000);
SELECT id AS live FROM awa.insert_job_compat('res', 'res_wait') \gset
SELECT id = :live AS same, state FROM awa.wait_for_job(:live, 0);
SELECT state FROM awa.wait_for_job(:live, 10);
SELECT run_lease FROM awa.claim_ready_runtime('res_wait', 1) \gset
SELECT state FROM awa.wait_for_job(:live, 0);
SELECT awa.fail_job_to_dlq(:live, :run_lease, 'boom') AS dead_lettered;
SELECT state, jsonb_array_length(errors) AS errors FROM awa.wait_for_job(:live, 3600000);
SELECT id AS to_cancel FROM awa.insert_job_compat('res', 'res_wait') \gset
SELECT awa.cancel_job(:to_cancel) AS cancelled;
SELECT state FROM awa.wait_for_job(:to_cancel, 3600000);
SELECT count(*) AS unknown FROM awa.wait_for_job(-1, 3600000) w WHERE w IS NOT NULL;
SELECT (awa.wait_for_job(-1, 0)).id IS NULL AS unknown_is_null;
SELECT pg_temp.err($$SELECT awa.wait_for_job(NULL, 1)$$) AS null_job,
       pg_temp.err($$SELECT awa.wait_for_job(1, NULL)$$) AS null_timeout;
SELECT pg_temp.err($$SELECT awa.wait_for_job(1, -1)$$) AS negative_timeout,
       pg_temp.err($$SELECT awa.wait_for_job(1, 3600001)$$) AS long_timeout;
-- p_queue (the routing argument on a Citus cluster): the job when it is in that queue, NULL
-- when it is not; a badly sized queue name is refused.
SELECT state FROM awa.wait_for_job(:to_cancel, 3600000, 'res_wait');
SELECT (awa.wait_for_job(:to_cancel, 0, 'res_other')).id IS NULL AS other_queue_is_null;
SELECT pg_temp.err($$SELECT awa.wait_for_job(1, 0, '')$$) AS empty_queue;
-- Cancelling the waiting query ends the wait at once (here: its statement timeout).
SELECT id AS still_live FROM awa.insert_job_compat('res', 'res_wait') \gset
SET statement_timeout = '200ms';
SELECT state FROM awa.wait_for_job(:still_live, 3600000);
RESET statement_timeout;
-- In a transaction that has ended attempts it does not sleep (0A000): an exit holds its claim
-- batch, which the exit of a job claimed in the same call takes too, and no deadlock check
-- sees a wait on a job. One that only claimed or enqueued waits as before; a read with
-- timeout 0, and a job terminal there (by its own writes too), return at once.
SELECT id AS mate_a FROM awa.insert_job_compat('res', 'res_mates') \gset
SELECT id AS mate_b FROM awa.insert_job_compat('res', 'res_mates') \gset
SELECT count(*) AS claimed_in_one_call FROM awa.claim_ready_runtime('res_mates', 2);
BEGIN;
SELECT (awa.insert_job_compat('res', 'res_wait')).state AS enqueued;
SELECT state FROM awa.wait_for_job(:mate_b, 10);
SELECT awa.fail_job(:mate_a, 1, 'boom') IS NOT NULL AS failed;
SELECT state FROM awa.wait_for_job(:mate_b, 0);
SELECT pg_temp.err(format('SELECT awa.wait_for_job(%s, 1000)', :mate_b)) AS wait_after_exit;
SELECT awa.cancel_job(:mate_b) AS cancelled;
SELECT state FROM awa.wait_for_job(:mate_b, 3600000);
ROLLBACK;
SELECT count(*) AS completed FROM awa.complete_jobs(ARRAY[:mate_a, :mate_b]::bigint[], ARRAY[1, 1]::bigint[]);

-- A result lives as long as its completed job: when prune frees the ring slot of the
-- completion, both go (in a transaction rolled back, so that the ring is left as it was).
-- A slot that still holds pending rows of other queues is freed in two steps (its pending
-- rows move first, the slot goes once every snapshot sees the move): either way the job and
-- its result are read together, both or neither.
SELECT id AS kept FROM awa.insert_job_compat('res', 'res_retention') \gset
SELECT run_lease FROM awa.claim_ready_runtime('res_retention', 1) \gset
SELECT count(*) AS completed FROM awa.complete_jobs(ARRAY[:kept]::bigint[], ARRAY[:run_lease]::bigint[], ARRAY['"kept"']::jsonb[]);
SELECT state, result FROM awa.get_job(:kept);
BEGIN;
SELECT awa.rotate_queue_ring() AS rotate;
SELECT awa.prune_queue_ring() AS prune \gset
SELECT :'prune' IN ('pruned', 'moved') AS freed_or_moved;
SELECT (SELECT count(*) FROM awa.jobs WHERE id = :kept)
     = (SELECT count(*) FROM awa.completion_batches WHERE queue = 'res_retention') AS job_and_result_together,
       (SELECT count(*) FROM awa.jobs WHERE id = :kept) = CASE :'prune' WHEN 'pruned' THEN 0 ELSE 1 END AS job_gone_only_when_freed;
ROLLBACK;
SELECT state, result FROM awa.get_job(:kept);
