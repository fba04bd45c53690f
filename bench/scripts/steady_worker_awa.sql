-- Steady-rate worker (bench/steady): wait_for_jobs (true at once when there is work, else
-- sleeps up to :wait_ms until a producer wakes it), then claim up to :batch (committed) and
-- complete (committed). A claim that comes back empty was a wasted wake-up or a lost race;
-- they are counted from pg_stat_user_functions (claim calls - complete calls).
SELECT awa.wait_for_jobs('steady_q', :wait_ms::int)::int AS work \gset
\if :work
SELECT coalesce(array_agg(job_id), '{}') AS ids, coalesce(array_agg(run_lease), '{}') AS leases, count(*) AS n
FROM awa.claim_ready_runtime('steady_q', :batch::bigint, 0, 0) \gset
\if :n > 0
SELECT count(*) FROM awa.complete_jobs(:ids::bigint[], :leases::bigint[]);
\endif
\endif
