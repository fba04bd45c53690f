-- Claim latency: one claim call of :batch jobs per transaction (attempts stay open).
BEGIN;
SELECT count(*) FROM awa.claim_ready_runtime('bench_q', :batch::bigint, 0, 0);
COMMIT;
