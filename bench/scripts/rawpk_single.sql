-- Lighter physical limit, single row: one bare INSERT per transaction into a table with the
-- same columns, a primary key on the job id and the lane index only.
INSERT INTO bench.raw_ready_pk (ready_slot, ready_generation, job_id, kind, queue, args, priority,
                                lane_seq, enqueue_shard, run_at, created_at)
VALUES (0, 0, nextval('bench.raw_seq'), 'k', 'bench_q', '{}', 2, currval('bench.raw_seq'), 0, now(), now());
