-- Ring rotation and prune: a sealed slot is truncated only when nothing in it is pending,
-- with pending ready rows matched to their OWN lane's cursor (queue, priority, enqueue_shard).
-- The reference's AwaShardedPrune counterexample: two shards both hold lane_seq 1; shard 0's
-- job completes; a prune that ignored the shard would truncate shard 1's waiting job.
-- Rings are global: run in a database of our own so other tests' rows do not interfere.
SELECT current_database() AS home \gset
CREATE DATABASE awa_maintenance_ring;
\c awa_maintenance_ring
SET client_min_messages = warning;
CREATE EXTENSION awa_shard;
RESET client_min_messages;
INSERT INTO awa.queue_meta (queue, enqueue_shards) VALUES ('ring_q', 2);
-- Two keyed jobs on shards 0 and 1, both lane_seq 1.
SELECT enqueue_shard, lane_seq
  FROM awa.insert_job_compat('k', 'ring_q', p_ordering_key => 'shard-fixture-0') ORDER BY 1;
SELECT enqueue_shard, lane_seq
  FROM awa.insert_job_compat('k', 'ring_q', p_max_attempts => 1::smallint, p_ordering_key => 'shard-fixture-1') ORDER BY 1;
-- Drain shard 0 only: claim with SKIP LOCKED while shard 1's head is held by another claim
-- is not possible in one session, so complete whichever job comes first and keep the other.
CREATE TEMP TABLE first_claim AS
  SELECT job_id, run_lease, enqueue_shard FROM awa.claim_ready_runtime('ring_q', 1, 0, 0);
SELECT count(*) AS completed FROM awa.complete_jobs(
  (SELECT array_agg(job_id) FROM first_claim), (SELECT array_agg(run_lease) FROM first_claim));
SELECT awa.rotate_queue_ring() AS rotate;
SELECT current_slot, generation FROM awa.queue_ring_state;
-- The other shard's job (same lane_seq 1) is still waiting: the slot must not be pruned.
SELECT awa.prune_queue_ring() AS prune_with_pending;
SELECT count(*) AS ready_rows_kept FROM awa.ready_entries WHERE queue = 'ring_q';
-- A running (claimed, open) attempt also keeps the slot.
CREATE TEMP TABLE second_claim AS
  SELECT job_id, run_lease, enqueue_shard FROM awa.claim_ready_runtime('ring_q', 1, 0, 0);
SELECT (SELECT enqueue_shard FROM first_claim) <> (SELECT enqueue_shard FROM second_claim) AS other_shard;
SELECT awa.prune_queue_ring() AS prune_with_running;
-- A terminally failed job in the slot is retained: moved to the current slot with its body.
SELECT awa.fail_job((SELECT job_id FROM second_claim), (SELECT run_lease FROM second_claim), 'boom') AS final_state;
-- Now slot 0 holds nothing pending or running: it is pruned; the failed row survives.
SELECT awa.prune_queue_ring() AS prune_when_done;
SELECT ready_slot, count(*) FROM awa.ready_entries WHERE queue = 'ring_q' GROUP BY 1 ORDER BY 1;
SELECT ready_slot, state, kind, args, enqueue_shard, lane_seq, (errors -> -1 ->> 'error') AS last_error
  FROM awa.done_entries WHERE queue = 'ring_q' ORDER BY ready_slot, state;
SELECT slot, generation FROM awa.queue_ring_slots WHERE generation >= 0 ORDER BY slot;
-- Nothing sealed is left: the next prune has nothing to do; an empty current slot does not rotate.
SELECT awa.prune_queue_ring() AS prune_again;
SELECT awa.rotate_queue_ring() AS rotate_empty;
-- Claim ring: rotate once receipts exist, prune the sealed slot when every receipt is closed.
SELECT awa.rotate_attempt_ring('claim') AS claim_rotate;
SELECT awa.prune_attempt_ring('claim') AS claim_prune;
SELECT count(*) AS receipts_left FROM awa.lease_claims c JOIN awa.ready_entries r ON r.job_id = c.job_id WHERE r.queue = 'ring_q';
-- Bad input: SQLSTATE and message (NULL -> 22004, out of range -> 22023).
CREATE FUNCTION pg_temp.sqlstate_of(p_sql text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
    EXECUTE p_sql;
    RETURN 'no error';
EXCEPTION WHEN OTHERS THEN
    RETURN SQLSTATE || ' ' || SQLERRM;
END
$$;
SELECT pg_temp.sqlstate_of('SELECT awa.rotate_attempt_ring(NULL)');
SELECT pg_temp.sqlstate_of('SELECT awa.rotate_attempt_ring(''nope'')');
SELECT pg_temp.sqlstate_of('SELECT awa.prune_attempt_ring(''claim'', NULL)');
SELECT pg_temp.sqlstate_of('SELECT awa.prune_queue_ring(0)');
SELECT pg_temp.sqlstate_of('SELECT awa.run_maintenance(NULL)');
SELECT pg_temp.sqlstate_of('SELECT awa.run_maintenance(''1 minute'', 0)');
-- One pass of everything reports each step.
SELECT jsonb_object_keys(awa.run_maintenance()) AS step ORDER BY 1;
\c :home
DROP DATABASE awa_maintenance_ring;
