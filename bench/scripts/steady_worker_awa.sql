-- Steady-rate worker (bench/steady): claim up to :batch (committed), complete (committed);
-- when a claim comes back empty, sleep in wait_for_jobs for up to :wait_ms, as a real worker
-- does. Empty claims are counted from pg_stat_user_functions (claim calls - complete calls).
SELECT coalesce(array_agg(job_id), '{}') AS ids, coalesce(array_agg(run_lease), '{}') AS leases, count(*) AS n
FROM awa.claim_ready_runtime('steady_q', :batch::bigint, 0, 0) \gset
\if :n = 0
SELECT awa.wait_for_jobs('steady_q', :wait_ms::int);
\else
SELECT count(*) FROM awa.complete_jobs(:ids::bigint[], :leases::bigint[]);
\endif
