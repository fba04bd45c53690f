-- drain_results.sql plus one progress report per claimed batch (the first job's), the cadence
-- of a worker that reports every so often rather than for every job.
SELECT coalesce(array_agg(job_id), '{}') AS ids, coalesce(array_agg(run_lease), '{}') AS leases
FROM awa.claim_ready_runtime('bench_q', :batch::bigint, 0, 0) \gset
SELECT count(*) FILTER (WHERE awa.set_progress(j, l, '{"done": 1, "of": 2}'))
  FROM (SELECT j, l FROM unnest(:ids::bigint[], :leases::bigint[]) AS t(j, l) LIMIT 1) f;
SELECT count(*) FROM awa.complete_jobs(:ids::bigint[], :leases::bigint[],
    array_fill('{"ok": true, "rows": 42}'::jsonb, ARRAY[cardinality(:ids::bigint[])]));
