-- retainable_plan: the prune's reads of a queue slot's completed attempts read each ready row
-- once, whatever the statistics say: awa._retainable (the finished jobs to retain,
-- docs/maintenance.md "Retention") probes each completed attempt's ready row by its key, and
-- awa._batch_completions (whose unique claims a freed slot drops, under the slot's share
-- lock) matches each ready row with the batch of its block. Joined on the lane alone, they
-- paired every ready row of the slot with every completion batch of its lane: a background
-- prune spent 20 s in the first on a slot of 21,000 ready rows and 2,300 batches whose
-- partitions had not been analyzed yet (and its pass enqueued no periodic job meanwhile).
-- Asserted by what the reads fetch, never by their time.
-- Rings are global: run in a database of our own so other tests' rows do not interfere.
SELECT current_database() AS home \gset
CREATE DATABASE awa_retainable_plan;
ALTER DATABASE awa_retainable_plan SET awa_shard.maintenance = off;
\c awa_retainable_plan
SET client_min_messages = warning;
CREATE EXTENSION awa_shard;
RESET client_min_messages;
-- Parallel workers' reads would not show in this backend's counters.
SET max_parallel_workers_per_gather = 0;

-- One lane: 3,000 jobs, 640 of them claimed and completed 10 at a time (74 completion
-- batches: a completion's batch splits at each block of 64 lane positions) in a queue that
-- keeps its completions a day, so the read returns them; the rest pending. No ANALYZE, as on
-- a slot the maintenance prunes soon after it filled.
SELECT awa.create_queue('rp_q') IS NOT NULL AS created;
SELECT awa.set_queue_retention('rp_q', '1 day', NULL) IS NOT NULL AS retention_set;
SELECT cardinality(awa.insert_jobs('rp_q', array_fill('k'::text, ARRAY[3000]))) AS enqueued;
DO $$
DECLARE
    v_ids bigint[];
    v_leases bigint[];
BEGIN
    FOR i IN 1..64 LOOP
        SELECT array_agg(c.job_id), array_agg(c.run_lease) INTO v_ids, v_leases
          FROM awa.claim_ready_runtime('rp_q', 10) c;
        PERFORM awa.complete_jobs(v_ids, v_leases);
    END LOOP;
END
$$;
SELECT (SELECT current_slot FROM awa.queue_ring_state) AS slot \gset
SELECT count(*) AS batches FROM awa.completion_batches WHERE ready_slot = :slot \gset
SELECT count(*) AS ready_rows FROM awa.ready_entries WHERE ready_slot = :slot \gset
SELECT :batches AS batches, :ready_rows AS ready_rows;

-- What the read does to the slot's ready partition: its counters before and after, in one
-- transaction (counters of earlier statements may not have been flushed yet).
SELECT format('awa.%I', 'ready_entries_' || :slot)::regclass::oid AS part,
       format('awa.%I', 'ready_entries_' || :slot || '_pkey')::regclass::oid AS pkey \gset
BEGIN;
SELECT pg_stat_get_xact_numscans(:part) AS scans0, pg_stat_get_xact_tuples_returned(:part) AS read0,
       pg_stat_get_xact_tuples_fetched(:pkey) AS fetched0 \gset
SELECT count(*) AS retainable, count(*) FILTER (WHERE (r.job).state = 'completed') AS completed
  FROM awa._retainable(:slot, clock_timestamp()) r;
SELECT pg_stat_get_xact_numscans(:part) - :scans0 AS seq_scans_of_ready_rows,
       pg_stat_get_xact_tuples_returned(:part) - :read0 AS ready_rows_read_by_seq_scans,
       pg_stat_get_xact_tuples_fetched(:pkey) - :fetched0 AS ready_rows_fetched_by_key;
-- The read of the unique-claims drop when a slot is freed (awa._free_queue_slot), through
-- awa._batch_completions: each ready row matched with the batch of its block, so it reads at
-- most the slot's ready rows once (a scan) and each batch's block of 64 (by key), whichever
-- plan (joined on the lane alone: 222,000).
SELECT pg_stat_get_xact_tuples_returned(:part) AS read0, pg_stat_get_xact_tuples_fetched(:pkey) AS fetched0 \gset
SELECT count(*) AS completed_attempts, count(DISTINCT job_id) AS jobs
  FROM awa._batch_completions b WHERE b.ready_slot = :slot;
SELECT pg_stat_get_xact_tuples_returned(:part) - :read0 + pg_stat_get_xact_tuples_fetched(:pkey) - :fetched0
       <= :ready_rows + 64 * :batches AS ready_rows_read_at_most_once_per_block;
COMMIT;

-- A prune that copied early reads again under the slot's lock, for what finished since:
-- p_uncopied passes over the jobs that have a copy, before hydrating them (nothing read by
-- key here: the 640 were copied by the first call).
SELECT cardinality(awa._retain_finished(:slot)) AS copied_first;
BEGIN;
SELECT pg_stat_get_xact_tuples_fetched(:pkey) AS fetched0 \gset
SELECT count(*) AS copied_again FROM unnest(awa._retain_finished(:slot, true));
SELECT count(*) AS uncopied FROM awa._retainable(:slot, clock_timestamp(), true);
SELECT pg_stat_get_xact_tuples_fetched(:pkey) - :fetched0 AS ready_rows_fetched_by_key;
SELECT count(*) AS retainable_still FROM awa._retainable(:slot, clock_timestamp());
COMMIT;

\c :home
DROP DATABASE awa_retainable_plan;
