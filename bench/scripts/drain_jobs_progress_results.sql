-- drain_results.sql plus progress for every job of the batch in one call
-- (awa.set_jobs_progress: one progress value per job), then the jobs complete with results.
SELECT coalesce(array_agg(job_id), '{}') AS ids, coalesce(array_agg(run_lease), '{}') AS leases
FROM awa.claim_ready_runtime('bench_q', :batch::bigint, 0, 0) \gset
SELECT cardinality(awa.set_jobs_progress(:ids::bigint[], :leases::bigint[],
    array_fill('{"done": 1, "of": 2}'::jsonb, ARRAY[cardinality(:ids::bigint[])])));
SELECT count(*) FROM awa.complete_jobs(:ids::bigint[], :leases::bigint[],
    array_fill('{"ok": true, "rows": 42}'::jsonb, ARRAY[cardinality(:ids::bigint[])]));
