-- awa_shard batch enqueue: :batch keyless jobs into one queue, one transaction.
SELECT 1 FROM awa.insert_jobs('bench_q', array_fill('k'::text, ARRAY[:batch::int]));
