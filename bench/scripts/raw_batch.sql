-- Physical limit: the same rows by one multi-row INSERT into an ordinary table shaped like
-- awa.ready_entries (same columns, primary key and secondary indexes).
INSERT INTO bench.raw_ready (ready_slot, ready_generation, job_id, kind, queue, args, priority,
                             lane_seq, enqueue_shard, run_at, created_at)
SELECT 0, 0, s.id, s.k, 'bench_q', '{}', 2, s.id, 0, now(), now()
FROM (SELECT nextval('bench.raw_seq') AS id, k FROM unnest(array_fill('k'::text, ARRAY[:batch::int])) AS k) s;
