-- drain_awa.sql with results: the same claim, then complete_jobs with one small result per
-- job (bench/results compares the two).
SELECT coalesce(array_agg(job_id), '{}') AS ids, coalesce(array_agg(run_lease), '{}') AS leases
FROM awa.claim_ready_runtime('bench_q', :batch::bigint, 0, 0) \gset
SELECT count(*) FROM awa.complete_jobs(:ids::bigint[], :leases::bigint[],
    array_fill('{"ok": true, "rows": 42}'::jsonb, ARRAY[cardinality(:ids::bigint[])]));
