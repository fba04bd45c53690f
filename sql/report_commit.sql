-- report_commit: a transaction whose only writes are heartbeats and progress reports commits
-- without waiting for its WAL flush (docs/api.md, "Heartbeats and progress commit without
-- waiting for a flush"); any other write in the transaction, a report that wrote nothing,
-- a report that ran a statement (a trigger on attempt_state, leases mode),
-- awa_shard.async_reports = off or an already asynchronous commit leave the commit as
-- synchronous_commit says. The decision is reported at DEBUG1 as the transaction commits:
-- each case below shows the commit's message, or its absence. Messages are shown for the
-- COMMIT alone (SET LOCAL just before it): a statement that loads catalog entries may log
-- the growth of a catalog cache at DEBUG1 too, at a moment that depends on what the
-- backend's caches hold (another test's invalidations can reset them).
\set VERBOSITY terse
SET synchronous_commit = on;
SELECT awa.create_queue('report_commit') IS NOT NULL AS created;
SELECT array_agg(id ORDER BY id) AS jobs FROM (
    SELECT (awa.insert_job_compat('rc', 'report_commit')).id FROM generate_series(1, 3)) j \gset
CREATE TEMP TABLE held AS SELECT job_id, run_lease FROM awa.claim_ready_runtime('report_commit', 3);
SELECT job_id AS j1, run_lease AS l1 FROM held ORDER BY job_id LIMIT 1 \gset
CREATE TABLE report_commit_other (n integer);

-- 1. A progress report alone: asynchronous.
BEGIN;
SELECT awa.set_progress(:j1, :l1, '{"step": 1}') AS open;
SET LOCAL client_min_messages = debug1;
COMMIT;
-- 2. A heartbeat alone, and a batch report alone: asynchronous.
BEGIN;
SELECT awa.heartbeat_jobs(ARRAY(SELECT job_id FROM held ORDER BY job_id), ARRAY(SELECT run_lease FROM held ORDER BY job_id)) AS open;
SET LOCAL client_min_messages = debug1;
COMMIT;
BEGIN;
SELECT awa.set_jobs_progress(ARRAY(SELECT job_id FROM held ORDER BY job_id), ARRAY(SELECT run_lease FROM held ORDER BY job_id),
                             array_fill('{"step": 2}'::jsonb, ARRAY[3])) AS open;
SET LOCAL client_min_messages = debug1;
COMMIT;
-- 3. Two reports in one transaction: asynchronous.
BEGIN;
SELECT awa.set_progress(:j1, :l1, '{"step": 3}') AS open;
SELECT awa.heartbeat_jobs(ARRAY[:j1]::bigint[], ARRAY[:l1]::bigint[]) AS open;
SET LOCAL client_min_messages = debug1;
COMMIT;
-- 4. A report, then the caller's own write: synchronous (no message).
BEGIN;
SELECT awa.set_progress(:j1, :l1, '{"step": 4}') AS open;
INSERT INTO report_commit_other VALUES (4);
SET LOCAL client_min_messages = debug1;
COMMIT;
-- 5. An enqueue, then a report: synchronous.
BEGIN;
SELECT kind FROM awa.insert_job_compat('rc_late', 'report_commit');
SELECT awa.set_progress(:j1, :l1, '{"step": 5}') AS open;
SET LOCAL client_min_messages = debug1;
COMMIT;
-- 6. Two reports with the caller's own write between them: synchronous.
BEGIN;
SELECT awa.set_progress(:j1, :l1, '{"step": 6}') AS open;
INSERT INTO report_commit_other VALUES (6);
SELECT awa.set_progress(:j1, :l1, '{"step": 6.5}') AS open;
SET LOCAL client_min_messages = debug1;
COMMIT;
-- 7. A stale report writes nothing: nothing to commit asynchronously.
BEGIN;
SELECT awa.set_progress(:j1, :l1 + 1, '{"stale": true}') AS open;
SET LOCAL client_min_messages = debug1;
COMMIT;
-- 8. awa_shard.async_reports = off, and a session already at synchronous_commit = off.
SET awa_shard.async_reports = off;
BEGIN;
SELECT awa.set_progress(:j1, :l1, '{"step": 8}') AS open;
SET LOCAL client_min_messages = debug1;
COMMIT;
RESET awa_shard.async_reports;
SET synchronous_commit = off;
BEGIN;
SELECT awa.set_progress(:j1, :l1, '{"step": 8.5}') AS open;
SET LOCAL client_min_messages = debug1;
COMMIT;
SET synchronous_commit = on;
-- 9. A trigger on attempt_state: the report steps aside to its statement, and the trigger
-- writes a table of its own: synchronous.
CREATE FUNCTION report_commit_note() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO public.report_commit_other VALUES (9);
    RETURN NULL;
END $$;
CREATE TRIGGER report_commit_note AFTER INSERT OR UPDATE ON awa.attempt_state
    FOR EACH ROW EXECUTE FUNCTION report_commit_note();
-- (Once without the messages: planning the statement and the trigger logs cache growth.)
SELECT awa.set_progress(:j1, :l1, '{"step": 9}') AS open, awa.heartbeat_jobs(ARRAY[:j1]::bigint[], ARRAY[:l1]::bigint[]) AS open;
BEGIN;
SELECT awa.set_progress(:j1, :l1, '{"step": 9}') AS open;
SET LOCAL client_min_messages = debug1;
COMMIT;
BEGIN;
SELECT awa.heartbeat_jobs(ARRAY[:j1]::bigint[], ARRAY[:l1]::bigint[]) AS open;
SET LOCAL client_min_messages = debug1;
COMMIT;
DROP TRIGGER report_commit_note ON awa.attempt_state;
DROP FUNCTION report_commit_note();
-- 10. Leases mode: a report is a statement on awa.leases (it may have triggers): synchronous.
UPDATE awa.plane_settings SET receipts = false;
SELECT job_id AS j2, run_lease AS l2 FROM awa.claim_ready_runtime('report_commit', 1) \gset
BEGIN;
SELECT awa.set_progress(:j2, :l2, '{"leased": true}') AS open;
SET LOCAL client_min_messages = debug1;
COMMIT;
BEGIN;
SELECT awa.heartbeat_jobs(ARRAY[:j2]::bigint[], ARRAY[:l2]::bigint[]) AS open;
SET LOCAL client_min_messages = debug1;
COMMIT;
UPDATE awa.plane_settings SET receipts = true;

-- Every report above that was open is stored, the last one kept; the setting is the
-- session's again after an asynchronous commit; the other writes are there.
SELECT awa.set_progress(:j1, :l1, '{"step": 11}') AS open;
SHOW synchronous_commit;
SELECT progress FROM awa.get_job(:j1);
SELECT count(*) FILTER (WHERE progress = '{"step": 2}') AS batch_reports FROM awa.list_jobs('report_commit');
SELECT array_agg(n ORDER BY n) AS other_writes FROM report_commit_other;
SELECT progress FROM awa.get_job(:j2);
SELECT count(*) AS late_jobs FROM awa.list_jobs('report_commit') WHERE kind = 'rc_late';

DROP TABLE report_commit_other;
SELECT awa.drop_queue('report_commit', true) IS NOT NULL AS dropped;
RESET synchronous_commit;
