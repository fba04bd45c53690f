-- End-to-end producer: :batch jobs per transaction (offered rate set by pgbench --rate).
SELECT 1 FROM awa.insert_jobs('bench_q', array_fill('k'::text, ARRAY[:batch::int]));
