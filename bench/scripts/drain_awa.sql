-- awa_shard worker: claim up to :batch jobs (committed), then complete them (committed):
-- the shape of a real worker, which must commit its claim before it works.
SELECT coalesce(array_agg(job_id), '{}') AS ids, coalesce(array_agg(run_lease), '{}') AS leases
FROM awa.claim_ready_runtime('bench_q', :batch::bigint, 0, 0) \gset
SELECT count(*) FROM awa.complete_jobs(:ids::bigint[], :leases::bigint[]);
