-- job_progress: awa.set_jobs_progress, the batch form of set_progress (docs/api.md): one call
-- for a batch of attempts, one progress value each, a boolean per attempt in input order;
-- a heartbeat; a stale pair changes nothing; arguments checked before anything is written;
-- the same answers at every isolation level. The lifecycle suites (lifecycle_checks.psql,
-- section 11) run both forms in both plane modes.
\set VERBOSITY terse
\i sql/err.psql

SELECT awa.create_queue('prog_batch') IS NOT NULL AS created;
SELECT array_agg(id ORDER BY id) AS jobs FROM (
    SELECT (awa.insert_job_compat('prog', 'prog_batch')).id FROM generate_series(1, 4)) j \gset
-- Three of the four run; the fourth stays available.
SELECT count(*) AS claimed FROM awa.claim_ready_runtime('prog_batch', 3);
SELECT array_position(:'jobs'::bigint[], id) AS n, state FROM awa.list_jobs('prog_batch') ORDER BY id;

-- One call for the batch: true for each running attempt, false for the job that is not
-- running and for a stale run lease; nothing is written for those.
SELECT awa.set_jobs_progress(:'jobs'::bigint[] || (:'jobs'::bigint[])[1], '{1, 1, 1, 1, 2}',
                             ARRAY['{"done": 1}', '{"done": 2}', '{"done": 3}', '{"done": 4}', '{"stale": true}']::jsonb[])
       AS answers;
SELECT array_position(:'jobs'::bigint[], id) AS n, state, progress FROM awa.list_jobs('prog_batch') ORDER BY id;
SELECT progress FROM awa.get_job((:'jobs'::bigint[])[2]);
SELECT progress FROM awa.jobs WHERE id = (:'jobs'::bigint[])[3];
SELECT count(*) AS progress_rows FROM awa.attempt_state WHERE job_id = ANY (:'jobs'::bigint[]);

-- A NULL element is a heartbeat alone: the stored progress stays, the heartbeat time moves.
SELECT heartbeat_at AS beat_before FROM awa.attempt_state WHERE job_id = (:'jobs'::bigint[])[1] \gset
SELECT pg_sleep(0.01);
SELECT awa.set_jobs_progress((:'jobs'::bigint[])[1:2], '{1, 1}', ARRAY[NULL, '{"done": 22}']::jsonb[]) AS answers;
SELECT array_position(:'jobs'::bigint[], a.job_id) AS n, a.progress, a.heartbeat_at > :'beat_before' AS beat_moved
  FROM awa.attempt_state a WHERE a.job_id = ANY ((:'jobs'::bigint[])[1:2]) ORDER BY a.job_id;
-- An attempt whose first report is a NULL element gets a heartbeat and no progress.
SELECT awa.create_queue('prog_beat') IS NOT NULL AS created;
SELECT id AS beat_job FROM awa.insert_job_compat('prog', 'prog_beat') \gset
SELECT count(*) AS claimed FROM awa.claim_ready_runtime('prog_beat', 1);
SELECT awa.set_jobs_progress(ARRAY[:beat_job]::bigint[], '{1}', ARRAY[NULL]::jsonb[]) AS answers;
SELECT heartbeat_at IS NOT NULL AS beat, progress IS NULL AS no_progress FROM awa.attempt_state WHERE job_id = :beat_job;
SELECT progress FROM awa.get_job(:beat_job);

-- A pair given twice: both positions answer, the last value given wins.
SELECT awa.set_jobs_progress(ARRAY[(:'jobs'::bigint[])[3], (:'jobs'::bigint[])[3]], '{1, 1}',
                             ARRAY['"first"', '"last"']::jsonb[]) AS answers;
SELECT progress FROM awa.get_job((:'jobs'::bigint[])[3]);

-- Empty arrays: an empty answer, nothing done.
SELECT awa.set_jobs_progress('{}', '{}', '{}') AS empty;

-- p_queue (the routing argument): an attempt of another queue is not open there.
SELECT awa.set_jobs_progress((:'jobs'::bigint[])[1:1], '{1}', '{"\"elsewhere\""}', 'prog_beat') AS other_queue,
       awa.set_jobs_progress((:'jobs'::bigint[])[1:1], '{1}', '{"\"here\""}', 'prog_batch') AS own_queue;
SELECT progress FROM awa.get_job((:'jobs'::bigint[])[1]);

-- Any isolation level: the answers are those of the latest committed state.
BEGIN ISOLATION LEVEL REPEATABLE READ;
SELECT awa.set_jobs_progress((:'jobs'::bigint[])[1:2], '{1, 2}', '{"\"rr\"", "\"rr\""}') AS repeatable_read;
COMMIT;
BEGIN ISOLATION LEVEL SERIALIZABLE;
SELECT awa.set_jobs_progress((:'jobs'::bigint[])[1:2], '{1, 2}', '{"\"ser\"", "\"ser\""}') AS serializable,
       awa.set_progress((:'jobs'::bigint[])[2], 1, '"ser one"') AS serializable_one;
COMMIT;
SELECT array_position(:'jobs'::bigint[], id) AS n, progress FROM awa.list_jobs('prog_batch', 'running') ORDER BY id;

-- Bad input: every argument is checked before anything is written.
SELECT pg_temp.err($$SELECT awa.set_jobs_progress(NULL, '{1}', '{"1"}')$$) AS null_ids,
       pg_temp.err($$SELECT awa.set_jobs_progress('{1}', NULL, '{"1"}')$$) AS null_leases;
SELECT pg_temp.err($$SELECT awa.set_jobs_progress('{1}', '{1}', NULL)$$) AS null_progress;
SELECT pg_temp.err($$SELECT awa.set_jobs_progress('{1, NULL}', '{1, 1}', '{"1", "2"}')$$) AS null_id,
       pg_temp.err($$SELECT awa.set_jobs_progress('{1, 2}', '{1, NULL}', '{"1", "2"}')$$) AS null_lease;
SELECT pg_temp.err($$SELECT awa.set_jobs_progress('{{1}, {2}}', '{1, 1}', '{"1", "2"}')$$) AS two_dimensional_ids,
       pg_temp.err($$SELECT awa.set_jobs_progress('{1, 2}', '{1, 1}', '{{"1"}, {"2"}}')$$) AS two_dimensional_progress;
SELECT pg_temp.err($$SELECT awa.set_jobs_progress('{1, 2}', '{1}', '{"1", "2"}')$$) AS short_leases,
       pg_temp.err($$SELECT awa.set_jobs_progress('{1, 2}', '{1, 1}', '{"1"}')$$) AS short_progress;
SELECT pg_temp.err(format($$SELECT awa.set_jobs_progress(%L, '{1, 1}', ARRAY['"fits"', to_jsonb(repeat('x', %s))])$$,
                          (:'jobs'::bigint[])[1:2], awa._limit('max_result_bytes'))) AS too_large;
SELECT array_position(:'jobs'::bigint[], id) AS n, progress AS unchanged FROM awa.list_jobs('prog_batch', 'running') ORDER BY id;
-- The single form's checks are its own (its arguments' names).
SELECT pg_temp.err($$SELECT awa.set_progress(NULL, 1, '{}')$$) AS null_job,
       pg_temp.err($$SELECT awa.set_progress(1, 1, to_jsonb(repeat('x', 1048577)))$$) AS too_large_one;

-- Progress goes with the attempt: the completion removes every progress row of its jobs,
-- and a report after it is stale.
SELECT count(*) AS completed FROM awa.complete_jobs((:'jobs'::bigint[])[1:3], '{1, 1, 1}');
SELECT count(*) AS progress_rows_left FROM awa.attempt_state WHERE job_id = ANY (:'jobs'::bigint[]);
SELECT awa.set_jobs_progress((:'jobs'::bigint[])[1:3], '{1, 1, 1}', '{"1", "2", "3"}') AS after_completion;
SELECT array_position(:'jobs'::bigint[], id) AS n, state, progress FROM awa.list_jobs('prog_batch') ORDER BY id;
SELECT count(*) AS completed FROM awa.complete_jobs(ARRAY[:beat_job]::bigint[], '{1}');

-- Leases mode: the same answers; progress in attempt_state, the heartbeat on the lease.
UPDATE awa.plane_settings SET receipts = false;
SELECT count(*) AS claimed FROM awa.claim_ready_runtime('prog_batch', 3);
SELECT coalesce(heartbeat_at, '-infinity') AS lease_beat_before FROM awa.leases WHERE job_id = (:'jobs'::bigint[])[4] \gset
SELECT pg_sleep(0.01);
SELECT awa.set_jobs_progress(ARRAY[(:'jobs'::bigint[])[4], (:'jobs'::bigint[])[4], (:'jobs'::bigint[])[1]], '{1, 2, 1}',
                             ARRAY['"leased"', '"stale"', '"done already"']::jsonb[]) AS leased_answers;
SELECT progress, (SELECT heartbeat_at > :'lease_beat_before' FROM awa.leases WHERE job_id = (:'jobs'::bigint[])[4]) AS lease_beat_moved
  FROM awa.get_job((:'jobs'::bigint[])[4]);
SELECT count(*) AS completed FROM awa.complete_jobs((:'jobs'::bigint[])[4:4], '{1}');
SELECT count(*) AS progress_rows_left FROM awa.attempt_state WHERE job_id = ANY (:'jobs'::bigint[]);
UPDATE awa.plane_settings SET receipts = true;

-- Workers set progress; producers may not.
SET ROLE awa_worker;
SELECT awa.set_jobs_progress('{0}', '{0}', '{"1"}') AS worker_may;
RESET ROLE;
SET ROLE awa_producer;
SELECT pg_temp.err($$SELECT awa.set_jobs_progress('{0}', '{0}', '{"1"}')$$) AS producer_may_not;
RESET ROLE;

SELECT awa.drop_queue('prog_batch', p_force => true) IS NOT NULL AS dropped,
       awa.drop_queue('prog_beat', p_force => true) IS NOT NULL AS dropped_too;
