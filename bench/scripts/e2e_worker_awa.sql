-- End-to-end worker: claim (committed), complete (committed) and record, per batch, how
-- many jobs completed and the enqueue->claim latency of each (unlogged table, like the PgQ
-- consumer's); when the queue is empty, sleep in wait_for_jobs.
SELECT coalesce(array_agg(job_id), '{}') AS ids, coalesce(array_agg(run_lease), '{}') AS leases,
       count(*) AS n, coalesce(array_agg(extract(epoch FROM clock_timestamp() - created_at)), '{}') AS lat
FROM awa.claim_ready_runtime('bench_q', :batch::bigint, 0, 0) \gset
\if :n = 0
SELECT awa.wait_for_jobs('bench_q', 100);
\else
INSERT INTO bench.awa_lat (events, lat)
SELECT count(*), :lat::double precision[] FROM awa.complete_jobs(:ids::bigint[], :leases::bigint[]);
\endif
