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

-- The path a report takes. In receipts mode a report finds and tests its receipts through the
-- direct access routines, as awa.heartbeat_jobs does (src/direct_complete.cpp), and inserts or
-- updates its attempt_state rows there too (the upsert statement only for a row that changed
-- or raced meanwhile); the receipts statement (src/progress.cpp) runs only where the direct
-- path steps aside (here: a trigger on awa.attempt_state). Which one ran is read from
-- this backend's plan cache: a kept statement has a memory context named by its text
-- (pg_backend_memory_contexts.ident). Both paths must give the same answers and store the same
-- progress: a stale lease is false and writes nothing, a job not running is false, a pair
-- given twice is written once with its last value, a NULL element keeps the stored progress,
-- a completed attempt is no longer open, and a REPEATABLE READ caller reports as well.
\c
CREATE FUNCTION pg_temp.progress_statements(OUT receipts bigint, OUT leases bigint, OUT direct_upsert bigint)
LANGUAGE sql AS $$
    SELECT count(*) FILTER (WHERE ident LIKE 'WITH input AS MATERIALIZED%open_receipts AS (SELECT c.job_id%'),
           count(*) FILTER (WHERE ident LIKE 'WITH input AS MATERIALIZED%keys AS MATERIALIZED (SELECT l.*, i.progress%'),
           count(*) FILTER (WHERE ident LIKE 'INSERT INTO awa.attempt_state (job_id, run_lease, heartbeat_at, progress, updated_at, queue) SELECT t.job_id%')
      FROM pg_backend_memory_contexts
$$;
-- One queue's story: four jobs, three claimed; reports of every kind; what each answered and
-- what attempt_state holds after each (jobs by position 1..4).
CREATE FUNCTION pg_temp.progress_story(q text) RETURNS jsonb LANGUAGE plpgsql AS $$
DECLARE
    j bigint[];
    out jsonb := '[]';
    a jsonb;
BEGIN
    PERFORM awa.create_queue(q);
    j := awa.insert_jobs(q, array_fill('k'::text, ARRAY[4]));
    PERFORM count(*) FROM awa.claim_ready_runtime(q, 3, 0, 0);
    -- Three running, the fourth not claimed, the first again with a stale lease.
    a := to_jsonb(awa.set_jobs_progress(j || j[1], '{1, 1, 1, 1, 2}',
                                        ARRAY['{"done": 1}', '{"done": 2}', '{"done": 3}', '{"done": 4}', '"stale"']::jsonb[]));
    out := out || jsonb_build_array(a);
    -- A pair given twice (the last value wins); a NULL element (a heartbeat alone).
    a := to_jsonb(awa.set_jobs_progress(ARRAY[j[2], j[2], j[3]], '{1, 1, 1}', ARRAY['"first"', '"last"', NULL]::jsonb[]));
    out := out || jsonb_build_array(a);
    -- The single form: open, stale.
    a := jsonb_build_array(awa.set_progress(j[1], 1, '"one"'), awa.set_progress(j[1], 2, '"stale one"'),
                           awa.set_progress(j[4], 1, '"not running"'));
    out := out || jsonb_build_array(a);
    -- With the queue given: another queue's attempt is not open there.
    a := to_jsonb(awa.set_jobs_progress(j[1:2], '{1, 1}', ARRAY['"queued"', NULL]::jsonb[], 'prog_nowhere')
                  || awa.set_jobs_progress(j[2:2], '{1}', ARRAY['"in queue"']::jsonb[], q));
    out := out || jsonb_build_array(a);
    -- A completed attempt is no longer open; its row is gone.
    PERFORM count(*) FROM awa.complete_jobs(j[3:3], '{1}');
    a := to_jsonb(awa.set_jobs_progress(ARRAY[j[3], j[1]], '{1, 1}', ARRAY['"late"', NULL]::jsonb[]));
    out := out || jsonb_build_array(a);
    SELECT coalesce(jsonb_agg(jsonb_build_array(array_position(j, s.job_id), s.run_lease, s.progress,
                                                s.heartbeat_at IS NOT NULL) ORDER BY s.job_id, s.run_lease), '[]')
      INTO a FROM awa.attempt_state s WHERE s.job_id = ANY (j);
    RETURN jsonb_build_object('answers', out, 'rows', a);
END $$;
SET client_min_messages = warning;
SELECT awa.create_queue('prog_nowhere') IS NOT NULL AS created;
RESET client_min_messages;

-- The direct path: neither the receipts statement nor the upsert was planned.
SELECT pg_temp.progress_story('prog_direct') AS direct_story \gset
SELECT :'direct_story'::jsonb -> 'answers' AS answers;
SELECT jsonb_array_elements(:'direct_story'::jsonb -> 'rows') AS attempt_state_row;
SELECT * FROM pg_temp.progress_statements();
-- A REPEATABLE READ caller takes it as well (D14: the latest committed state).
BEGIN ISOLATION LEVEL REPEATABLE READ;
SELECT awa.set_jobs_progress(ARRAY(SELECT job_id FROM awa.attempt_state WHERE queue = 'prog_direct' ORDER BY job_id),
                             '{1, 1}', '{"\"rr 1\"", "\"rr 2\""}') AS repeatable_read;
COMMIT;
SELECT * FROM pg_temp.progress_statements();
SELECT progress FROM awa.attempt_state WHERE queue = 'prog_direct' ORDER BY job_id;

-- A trigger on attempt_state: the direct path steps aside, the statement runs (and the
-- trigger fires), with the same answers and the same rows.
CREATE TABLE progress_trigger_log (n bigint);
CREATE FUNCTION note_attempt_state() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO public.progress_trigger_log VALUES (1);
    RETURN NULL;
END $$;
CREATE TRIGGER progress_note AFTER INSERT OR UPDATE ON awa.attempt_state
    FOR EACH STATEMENT EXECUTE FUNCTION note_attempt_state();
SELECT pg_temp.progress_story('prog_statement') AS statement_story \gset
DROP TRIGGER progress_note ON awa.attempt_state;
SELECT * FROM pg_temp.progress_statements();
SELECT count(*) > 0 AS trigger_fired FROM progress_trigger_log;
SELECT :'statement_story'::jsonb = :'direct_story'::jsonb AS same_answers_and_rows;
DROP FUNCTION note_attempt_state();
DROP TABLE progress_trigger_log;

SET client_min_messages = warning;
SELECT awa.drop_queue('prog_direct', p_force => true) IS NOT NULL AS dropped,
       awa.drop_queue('prog_statement', p_force => true) IS NOT NULL AS dropped_too,
       awa.drop_queue('prog_nowhere', p_force => true) IS NOT NULL AS dropped_third;
