-- The work check alone (bench/steady): wait_for_jobs with timeout 0 only checks; its
-- latency, logged by pgbench, is the check's time plus one round trip.
SELECT awa.wait_for_jobs('steady_q', 0);
