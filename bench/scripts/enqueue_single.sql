-- awa_shard single-row enqueue (the reference's 12-argument entry point, defaults).
SELECT 1 FROM awa.insert_job_compat('k', 'bench_q');
