-- drain_results.sql plus a third statement per claimed batch that does nothing (SELECT 1): the
-- floor of any report made once per batch as a statement of its own (its round trip, parse
-- and transaction; no write, no flush). bench/results compares progress/batch against it.
SELECT coalesce(array_agg(job_id), '{}') AS ids, coalesce(array_agg(run_lease), '{}') AS leases
FROM awa.claim_ready_runtime('bench_q', :batch::bigint, 0, 0) \gset
SELECT 1;
SELECT count(*) FROM awa.complete_jobs(:ids::bigint[], :leases::bigint[],
    array_fill('{"ok": true, "rows": 42}'::jsonb, ARRAY[cardinality(:ids::bigint[])]));
