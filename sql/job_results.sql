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
