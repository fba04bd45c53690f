-- drain_results.sql plus progress: after the claim, one statement records a progress value
-- for every job of the batch (as a batch heartbeat would), then the jobs complete with results.
SELECT coalesce(array_agg(job_id), '{}') AS ids, coalesce(array_agg(run_lease), '{}') AS leases
FROM awa.claim_ready_runtime('bench_q', :batch::bigint, 0, 0) \gset
SELECT count(*) FILTER (WHERE awa.set_progress(j, l, '{"done": 1, "of": 2}'))
  FROM unnest(:ids::bigint[], :leases::bigint[]) AS t(j, l);
SELECT count(*) FROM awa.complete_jobs(:ids::bigint[], :leases::bigint[],
    array_fill('{"ok": true, "rows": 42}'::jsonb, ARRAY[cardinality(:ids::bigint[])]));
