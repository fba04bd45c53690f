-- open_claim_batches: the prunes ask whether a slot still holds an open receipt through
-- awa._open_claim_batches, batch by batch: a claim batch every offset of which a completion
-- batch of its block names is passed over with one probe, and only the others are tested
-- receipt by receipt as awa._open_receipts tests them. It must name exactly the claim
-- batches that hold a receipt awa._open_receipts finds open, whatever ended the others:
-- a completion of the whole batch or of part of it, a failure, a snooze, a retry, a
-- rescue, a cancel, a completion in the same call as other blocks; in every claim slot
-- and every ready slot, and through the prunes that ask it.
-- Rings are global: run in a database of our own so other tests' rows do not interfere.
SELECT current_database() AS home \gset
CREATE DATABASE awa_open_claim_batches;
ALTER DATABASE awa_open_claim_batches SET awa_shard.maintenance = off;
\c awa_open_claim_batches
SET client_min_messages = warning;
CREATE EXTENSION awa_shard;
RESET client_min_messages;
\set VERBOSITY terse
-- The comparisons below run both views over every slot: their plans cost enough for JIT,
-- which would compile for seconds what runs in milliseconds (the prunes run with jit off).
SET jit = off;

SELECT awa.create_queue('ocb', p_enqueue_shards => 2) IS NOT NULL AS created;
-- Whether the batch view and the receipt view agree: the same (claim slot, batch) pairs,
-- and the same answer to "is anything open" for every claim slot and every ready slot.
CREATE FUNCTION pg_temp.agree() RETURNS TABLE (open_batches bigint, open_receipts bigint, same_batches boolean,
                                                same_claim_slots boolean, same_ready_slots boolean)
LANGUAGE sql AS $$
    SELECT (SELECT count(*) FROM awa._open_claim_batches),
           (SELECT count(*) FROM awa._open_receipts),
           NOT EXISTS ((SELECT claim_slot, receipt_base FROM awa._open_claim_batches
                        EXCEPT SELECT claim_slot, receipt_base FROM awa._open_receipts)
                       UNION ALL
                       (SELECT claim_slot, receipt_base FROM awa._open_receipts
                        EXCEPT SELECT claim_slot, receipt_base FROM awa._open_claim_batches)),
           bool_and(awa._claim_slot_has_open_receipts(s)
                    = EXISTS (SELECT 1 FROM awa._open_receipts c WHERE c.claim_slot = s)),
           bool_and(EXISTS (SELECT 1 FROM awa._open_claim_batches b WHERE b.ready_slot = s)
                    = EXISTS (SELECT 1 FROM awa._open_receipts c WHERE c.ready_slot = s))
      FROM generate_series(0, 15) s
$$;
CREATE TEMP TABLE claimed (n serial, job_id bigint, run_lease bigint);
-- 300 jobs on two lanes, claimed in batches of 1, 10 and 100 (a batch of 100 spans blocks
-- of 64 lane_seqs: several claim batches per call), across a rotation of both rings.
SELECT cardinality(awa.insert_jobs('ocb', array_fill('k'::text, ARRAY[300]))) AS enqueued;
INSERT INTO claimed (job_id, run_lease) SELECT job_id, run_lease FROM awa.claim_ready_runtime('ocb', 1, 0, 0);
INSERT INTO claimed (job_id, run_lease) SELECT job_id, run_lease FROM awa.claim_ready_runtime('ocb', 10, 0, 0);
SELECT awa.rotate_attempt_ring('claim') AS claim_ring, awa.rotate_queue_ring() AS queue_ring;
SELECT cardinality(awa.insert_jobs('ocb', array_fill('k'::text, ARRAY[100]))) AS enqueued;
INSERT INTO claimed (job_id, run_lease) SELECT job_id, run_lease FROM awa.claim_ready_runtime('ocb', 100, 0, 0);
INSERT INTO claimed (job_id, run_lease) SELECT job_id, run_lease FROM awa.claim_ready_runtime('ocb', 100, 0, 0);
INSERT INTO claimed (job_id, run_lease) SELECT job_id, run_lease FROM awa.claim_ready_runtime('ocb', 100, 0, 0);
SELECT count(*) AS claimed, count(DISTINCT job_id) AS distinct_jobs FROM claimed;
SELECT count(*) AS claim_batches, count(DISTINCT claim_slot) AS claim_slots FROM awa.claim_batches;
SELECT * FROM pg_temp.agree();  -- everything open

-- Whole batches completed (the first claim of 100), part of a batch (every other job of the
-- second), one job of a batch failed, one snoozed, one retried, one cancelled.
SELECT count(*) AS completed_whole FROM awa.complete_jobs(
    ARRAY(SELECT job_id FROM claimed WHERE n BETWEEN 12 AND 111 ORDER BY n),
    ARRAY(SELECT run_lease FROM claimed WHERE n BETWEEN 12 AND 111 ORDER BY n));
SELECT count(*) AS completed_part FROM awa.complete_jobs(
    ARRAY(SELECT job_id FROM claimed WHERE n BETWEEN 112 AND 211 AND n % 2 = 0 ORDER BY n),
    ARRAY(SELECT run_lease FROM claimed WHERE n BETWEEN 112 AND 211 AND n % 2 = 0 ORDER BY n));
SELECT awa.fail_job(job_id, run_lease, 'boom') AS failed FROM claimed WHERE n = 2;
SELECT awa.snooze_job(job_id, run_lease, '1 hour') AS snoozed FROM claimed WHERE n = 3;
SELECT awa.retry_job_after(job_id, run_lease, '1 hour') AS retried FROM claimed WHERE n = 4;
SELECT awa.cancel_job(job_id) AS cancelled FROM claimed WHERE n = 5;
SELECT * FROM pg_temp.agree();

-- The rest of the first two claims ended one by one, the single job by rescue.
SELECT count(*) AS completed_rest FROM awa.complete_jobs(
    ARRAY(SELECT job_id FROM claimed WHERE n BETWEEN 6 AND 11 ORDER BY n),
    ARRAY(SELECT run_lease FROM claimed WHERE n BETWEEN 6 AND 11 ORDER BY n));
UPDATE awa.claim_batches SET claimed_at = claimed_at - interval '1 day'
 WHERE receipt_base = (SELECT min(receipt_base) FROM awa.claim_batches);
SELECT awa.rescue_stale_heartbeats('1 hour') AS rescued;
SELECT * FROM pg_temp.agree();
-- The claim slot of the first two claims holds no open receipt now: its prune frees it;
-- the queue slot still has open attempts of later claims: its prune refuses.
SELECT awa.rotate_attempt_ring('claim') AS claim_ring;
SELECT awa.prune_attempt_ring('claim') AS claim_prune;
SELECT awa.prune_queue_ring() AS queue_prune;
SELECT * FROM pg_temp.agree();

-- Everything else completed, several blocks and lanes in one call: nothing is open, and
-- both rings free what they hold.
SELECT count(*) AS completed_all FROM awa.complete_jobs(
    ARRAY(SELECT c.job_id FROM claimed c JOIN awa._open_receipts o USING (job_id, run_lease) ORDER BY c.n),
    ARRAY(SELECT c.run_lease FROM claimed c JOIN awa._open_receipts o USING (job_id, run_lease) ORDER BY c.n));
SELECT * FROM pg_temp.agree();
SELECT awa.rotate_attempt_ring('claim') AS claim_ring;
SELECT awa.prune_attempt_ring('claim') AS claim_prune;
SELECT awa.prune_queue_ring() AS queue_prune;

-- A batch that is not wholly completed is probed within its own block: 300 claims of 10 on
-- one lane (346 batches: a claim across a block boundary makes two), each with nine
-- completions and one failure (no completion batch names every offset of a batch with the
-- failure, so it is tested receipt by receipt), and none open. The probes read a 64-row range of
-- the lane each; they read every row of the lane in the slot for each batch before (18,930
-- buffers of the ready plane for these 3,000 rows, 1,312 now).
\set ECHO none
\i sql/buffers_of.psql
\set ECHO all
SELECT pg_temp.set_autovacuum('ready\_entries%', false) AS ready_tables_quiet;
SELECT awa.create_queue('ocb_probe') IS NOT NULL AS created;
SELECT cardinality(awa.insert_jobs('ocb_probe', array_fill('p'::text, ARRAY[3000]))) AS enqueued;
DO $$ DECLARE ids bigint[]; leases bigint[]; BEGIN
  FOR i IN 1 .. 300 LOOP
    SELECT array_agg(job_id ORDER BY job_id), array_agg(run_lease ORDER BY job_id) INTO ids, leases
      FROM awa.claim_ready_runtime('ocb_probe', 10, 0, 0);
    PERFORM awa.complete_jobs(ids[1:9], leases[1:9]);
    PERFORM awa.fail_job(ids[10], leases[10], 'probe');
  END LOOP; END $$;
SELECT ready_slot AS probe_slot FROM awa.claim_batches WHERE queue = 'ocb_probe' LIMIT 1 \gset
SELECT count(*) AS probe_batches FROM awa.claim_batches WHERE queue = 'ocb_probe';
SELECT pg_stat_force_next_flush();
SELECT pg_temp.buffers_of('ready\_entries%') AS ready_buffers0 \gset
SELECT count(*) AS open_batches FROM awa._open_claim_batches WHERE ready_slot = :probe_slot;
SELECT pg_stat_force_next_flush();
SELECT pg_temp.buffers_of('ready\_entries%') - :ready_buffers0 < 4000 AS probed_within_blocks;
SELECT * FROM pg_temp.agree();

\c :home
DROP DATABASE awa_open_claim_batches;
