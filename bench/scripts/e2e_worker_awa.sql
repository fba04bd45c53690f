-- End-to-end worker: claim (committed), complete (committed); when the queue is empty,
-- sleep in wait_for_jobs.
SELECT coalesce(array_agg(job_id), '{}') AS ids, coalesce(array_agg(run_lease), '{}') AS leases,
       count(*) AS n
FROM awa.claim_ready_runtime('bench_q', :batch::bigint, 0, 0) \gset
SELECT count(*) FROM awa.complete_jobs(:ids::bigint[], :leases::bigint[]);
\if :n = 0
SELECT awa.wait_for_jobs('bench_q', 100);
\endif
