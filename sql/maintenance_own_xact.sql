-- maintenance_own_xact: a transaction that writes to a ring and then prunes that ring itself
-- (run_maintenance, prune_queue_ring or prune_attempt_ring called in the same transaction)
-- keeps writing to live slots. Its own partition locks never kept its own prune out, so a
-- write slot it fenced before the prune must not be reused once the prune freed it: a job
-- (or a receipt) written there would be committed and never claimed (or completed).
\set VERBOSITY terse
SELECT awa.create_queue('own_q');

-- 1. Queue ring: enqueue, rotate, prune (moves the job forward; a slot whose rows moved is
-- freed only by a later transaction, once no snapshot can need them), enqueue.
BEGIN;
SELECT cardinality(awa.insert_jobs('own_q', ARRAY['before_prune'])) AS enqueued;
SELECT awa.rotate_queue_ring() AS rotated;
SELECT awa.prune_queue_ring() AS pruned;
SELECT cardinality(awa.insert_jobs('own_q', ARRAY['after_prune'])) AS enqueued;
SELECT (awa.insert_job_compat('after_prune_compat', 'own_q')).id IS NOT NULL AS enqueued_compat;
COMMIT;
-- Every ready row sits in a live slot, and all three jobs are claimed.
SELECT count(*) AS rows_in_freed_slots
  FROM awa.ready_entries r JOIN awa.queue_ring_slots s ON s.slot = r.ready_slot
 WHERE s.generation <> r.ready_generation;
CREATE TEMP TABLE own_claimed AS SELECT * FROM awa.claim_ready_runtime('own_q', 10);
SELECT kind FROM own_claimed ORDER BY kind;

-- 2. Claim ring: claim and complete, rotate, prune (frees the claim slot), claim again; the
-- second claim's receipts are in a live slot: heartbeat and completion find them.
SELECT count(*) AS completed FROM awa.complete_jobs(ARRAY(SELECT job_id FROM own_claimed),
                                                    ARRAY(SELECT run_lease FROM own_claimed));
SELECT cardinality(awa.insert_jobs('own_q', ARRAY['c1', 'c2', 'c3'])) AS enqueued;
BEGIN;
CREATE TEMP TABLE own_first AS SELECT * FROM awa.claim_ready_runtime('own_q', 1);
SELECT count(*) AS completed FROM awa.complete_jobs(ARRAY(SELECT job_id FROM own_first),
                                                    ARRAY(SELECT run_lease FROM own_first));
SELECT awa.rotate_attempt_ring('claim') AS rotated;
SELECT awa.prune_attempt_ring('claim') AS pruned;
CREATE TEMP TABLE own_second AS SELECT * FROM awa.claim_ready_runtime('own_q', 10);
COMMIT;
SELECT count(*) AS receipts_in_freed_slots
  FROM awa.lease_claims c JOIN awa.claim_ring_slots s ON s.slot = c.claim_slot WHERE s.generation < 0;
SELECT kind FROM own_second ORDER BY kind;
SELECT awa.heartbeat_jobs(ARRAY(SELECT job_id FROM own_second), ARRAY(SELECT run_lease FROM own_second)) AS alive;
SELECT count(*) AS completed FROM awa.complete_jobs(ARRAY(SELECT job_id FROM own_second),
                                                    ARRAY(SELECT run_lease FROM own_second));

-- 3. Lease ring (leases mode): claim (a lease in the current slot), rotate, complete, prune
-- the emptied slot, claim again.
CREATE TEMP TABLE own_saved AS SELECT receipts FROM awa.plane_settings;
UPDATE awa.plane_settings SET receipts = false;
SELECT cardinality(awa.insert_jobs('own_q', ARRAY['l1', 'l2'])) AS enqueued;
BEGIN;
CREATE TEMP TABLE own_lfirst AS SELECT * FROM awa.claim_ready_runtime('own_q', 1);
SELECT awa.rotate_attempt_ring('lease') AS rotated;
SELECT count(*) AS completed FROM awa.complete_jobs(ARRAY(SELECT job_id FROM own_lfirst),
                                                    ARRAY(SELECT run_lease FROM own_lfirst));
SELECT awa.prune_attempt_ring('lease') AS pruned;
CREATE TEMP TABLE own_lsecond AS SELECT * FROM awa.claim_ready_runtime('own_q', 10);
COMMIT;
SELECT count(*) AS leases_in_freed_slots
  FROM awa.leases l JOIN awa.lease_ring_slots s ON s.slot = l.lease_slot WHERE s.generation <> l.lease_generation;
SELECT kind FROM own_lsecond ORDER BY kind;
SELECT count(*) AS completed FROM awa.complete_jobs(ARRAY(SELECT job_id FROM own_lsecond),
                                                    ARRAY(SELECT run_lease FROM own_lsecond));
UPDATE awa.plane_settings p SET receipts = s.receipts FROM own_saved s;

SELECT state, count(*) FROM awa.jobs WHERE queue = 'own_q' GROUP BY 1 ORDER BY 1;
SELECT awa.drop_queue('own_q', p_force => true) >= 0 AS dropped;
