-- Ring rotation and prune: a sealed slot is truncated only when no open attempt reads it;
-- its pending ready rows (matched to their OWN lane's cursor: queue, priority AND
-- enqueue_shard) move forward into the current slot first. The reference's AwaShardedPrune
-- counterexample: two shards both hold lane_seq 1; shard 0's job completes; a prune that
-- ignored the shard would drop shard 1's waiting job.
-- Rings are global: run in a database of our own so other tests' rows do not interfere.
SELECT current_database() AS home \gset
CREATE DATABASE awa_maintenance_ring;
ALTER DATABASE awa_maintenance_ring SET awa_shard.maintenance = off;
\c awa_maintenance_ring
\i sql/prune_when_seen.psql
SET client_min_messages = warning;
CREATE EXTENSION awa_shard;
RESET client_min_messages;
INSERT INTO awa.queue_meta (queue, enqueue_shards) VALUES ('ring_q', 2);
-- Two keyed jobs on shards 0 and 1, both lane_seq 1.
SELECT enqueue_shard, lane_seq
  FROM awa.insert_job_compat('k', 'ring_q', p_ordering_key => 'shard-fixture-0') ORDER BY 1;
SELECT enqueue_shard, lane_seq
  FROM awa.insert_job_compat('k', 'ring_q', p_max_attempts => 1::smallint, p_ordering_key => 'shard-fixture-1') ORDER BY 1;
-- Complete whichever job comes first and keep the other one waiting.
CREATE TEMP TABLE first_claim AS
  SELECT job_id, run_lease, enqueue_shard FROM awa.claim_ready_runtime('ring_q', 1, 0, 0);
SELECT count(*) AS completed FROM awa.complete_jobs(
  (SELECT array_agg(job_id) FROM first_claim), (SELECT array_agg(run_lease) FROM first_claim));
SELECT awa.rotate_queue_ring() AS rotate;
SELECT current_slot, generation FROM awa.queue_ring_state;
-- The other shard's job (same lane_seq 1) is still waiting. Pruning the sealed slot moves
-- it forward into the current slot with its own lane identity, lane_seq and body; the
-- completed job (lane_seq 1 on the other shard) is not moved.
CREATE TEMP TABLE waiting_before AS
  SELECT job_id, queue, priority, enqueue_shard, lane_seq, kind, args, run_at, ordering_key
    FROM awa.ready_entries WHERE queue = 'ring_q' AND job_id NOT IN (SELECT job_id FROM first_claim);
SELECT awa.prune_queue_ring() AS prune_with_pending;
-- The move is one transaction (delete and insert: a snapshot taken before it still reads the
-- job in the old slot); the slot is truncated and freed by the next call, once no snapshot
-- can still need it.
SELECT slot, moved_xid IS NOT NULL AS moved FROM awa.queue_ring_slots WHERE generation >= 0 ORDER BY slot;
CALL pg_temp.prune_when_seen(NULL); -- prune_truncates_moved
SELECT ready_slot, (SELECT current_slot FROM awa.queue_ring_state) AS current_slot, count(*)
  FROM awa.ready_entries WHERE queue = 'ring_q' GROUP BY 1 ORDER BY 1;
SELECT (SELECT count(*) FROM (SELECT job_id, queue, priority, enqueue_shard, lane_seq, kind, args, run_at, ordering_key
                                FROM awa.ready_entries WHERE queue = 'ring_q'
                              EXCEPT SELECT * FROM waiting_before) d) AS rows_changed,
       (SELECT count(*) FROM waiting_before) AS rows_waiting;
SELECT slot, generation FROM awa.queue_ring_slots WHERE generation >= 0 ORDER BY slot;
-- The moved job is claimed from its own lane, at its own lane_seq.
CREATE TEMP TABLE second_claim AS
  SELECT job_id, run_lease, enqueue_shard, lane_seq FROM awa.claim_ready_runtime('ring_q', 1, 0, 0);
SELECT (SELECT job_id FROM waiting_before) = job_id AS same_job,
       (SELECT enqueue_shard FROM first_claim) <> enqueue_shard AS other_shard, lane_seq
  FROM second_claim;
-- A running (claimed, open) attempt keeps its slot: rotate and try to prune it.
SELECT awa.rotate_queue_ring() AS rotate_running;
SELECT awa.prune_queue_ring() AS prune_with_running;
-- A terminally failed job in the slot is retained: copied with its body to the retained
-- partition (ready_slot -1), once.
SELECT awa.fail_job((SELECT job_id FROM second_claim), (SELECT run_lease FROM second_claim), 'boom') AS final_state;
SELECT awa.prune_queue_ring() AS prune_when_done;
CALL pg_temp.prune_when_seen(NULL); -- prune_truncates_retained
SELECT ready_slot, count(*) FROM awa.ready_entries WHERE queue = 'ring_q' GROUP BY 1 ORDER BY 1;
SELECT ready_slot, state, kind, args, enqueue_shard, lane_seq, (errors -> -1 ->> 'error') AS last_error
  FROM awa.done_entries WHERE queue = 'ring_q' ORDER BY ready_slot, state;
-- The first job's completion went with its slot.
SELECT count(*) AS completions_left FROM awa._batch_completions WHERE queue = 'ring_q';
SELECT id, state, kind, enqueue_shard, lane_seq FROM awa.jobs WHERE queue = 'ring_q' ORDER BY id;
SELECT slot, generation FROM awa.queue_ring_slots WHERE generation >= 0 ORDER BY slot;
-- Nothing sealed is left: the next prune has nothing to do; an empty current slot does not rotate.
SELECT awa.prune_queue_ring() AS prune_again;
SELECT awa.rotate_queue_ring() AS rotate_empty;
-- Rotation never reuses a slot that prune has not freed: with every other slot sealed,
-- the ring stops (skipped_busy) until the oldest one is pruned.
SELECT format('DO $d$ BEGIN PERFORM awa.insert_job_compat(%L, %L); PERFORM awa.rotate_queue_ring(); END $d$',
              'k', 'ring_fill')
  FROM generate_series(1, 16) \gexec
SELECT awa.rotate_queue_ring() AS rotate_full_ring;
SELECT count(*) FILTER (WHERE generation >= 0) AS live_slots FROM awa.queue_ring_slots;
SELECT awa.prune_queue_ring() AS prune_full_ring;
SELECT awa.rotate_queue_ring() AS rotate_before_truncate;
CALL pg_temp.prune_when_seen(NULL); -- prune_full_ring_truncates
SELECT awa.rotate_queue_ring() AS rotate_after_prune;
SELECT count(*) AS ring_fill_waiting FROM awa.jobs WHERE queue = 'ring_fill' AND state = 'available';
-- Claim ring: rotate once receipts exist, prune the sealed slot when every receipt is closed.
SELECT awa.rotate_attempt_ring('claim') AS claim_rotate;
SELECT awa.prune_attempt_ring('claim') AS claim_prune;
SELECT count(*) AS receipts_left FROM awa.lease_claims c JOIN awa.ready_entries r ON r.job_id = c.job_id WHERE r.queue = 'ring_q';
-- Bad input: SQLSTATE and message (NULL -> 22004, out of range -> 22023).
\set ECHO none
\i sql/sqlstate_of.psql
\set ECHO all
SELECT pg_temp.sqlstate_of('SELECT awa.rotate_attempt_ring(NULL)');
SELECT pg_temp.sqlstate_of('SELECT awa.rotate_attempt_ring(''nope'')');
SELECT pg_temp.sqlstate_of('SELECT awa.prune_attempt_ring(''claim'', NULL)');
SELECT pg_temp.sqlstate_of('SELECT awa.prune_queue_ring(0)');
SELECT pg_temp.sqlstate_of('SELECT awa.run_maintenance(NULL)');
SELECT pg_temp.sqlstate_of('SELECT awa.run_maintenance(''1 minute'', 0)');
-- Rotation and prune decide on the latest committed state under the ring's row lock:
-- they refuse to run inside a REPEATABLE READ transaction (0A000) rather than decide on
-- an old snapshot.
BEGIN ISOLATION LEVEL REPEATABLE READ;
SELECT pg_temp.sqlstate_of('SELECT awa.prune_queue_ring()');
ROLLBACK;
BEGIN ISOLATION LEVEL REPEATABLE READ;
SELECT pg_temp.sqlstate_of('SELECT awa.rotate_attempt_ring(''claim'')');
ROLLBACK;
-- One pass of everything reports each step.
SELECT jsonb_object_keys(awa.run_maintenance()) AS step ORDER BY 1;
-- A pass that rescued an attempt prunes nothing: a worker closing that attempt would wait for
-- the pass's closure while holding ring partitions that a prune would wait for. The next
-- pass prunes.
SELECT cardinality(awa.insert_jobs('mr_rescue', ARRAY['r'])) AS enqueued;
SELECT count(*) AS claimed FROM awa.claim_ready_runtime('mr_rescue', 1, 0.001);
SELECT pg_sleep(0.01);
SELECT r->>'deadline_rescued' AS rescued, r->>'queue_prune' AS queue_prune, r->>'claim_prune' AS claim_prune,
       r->>'lease_prune' AS lease_prune
  FROM awa.run_maintenance() r;
SELECT r->>'deadline_rescued' AS rescued, r->>'queue_prune' <> 'deferred' AS queue_prune_ran
  FROM awa.run_maintenance() r;
-- A job's unique claim goes with its last row: once prune drops the slot of a completed or
-- cancelled job whose mask holds its state, its key can be enqueued again (the default mask
-- holds completed). A failed job's row is retained, and so is its claim.
SELECT (awa.insert_job_compat('u', 'mr_unique', p_unique_key => 'done'::bytea)).id IS NOT NULL AS enqueued;
SELECT (awa.insert_job_compat('u', 'mr_unique', p_unique_key => 'cancelled'::bytea,
                              p_unique_states => B'11111010')).id IS NOT NULL AS enqueued;
SELECT (awa.insert_job_compat('u', 'mr_unique', p_unique_key => 'failed'::bytea, p_unique_states => B'11111100',
                              p_max_attempts => 1)).id IS NOT NULL AS enqueued;
SELECT count(*) AS completed FROM awa.complete_jobs(
    ARRAY(SELECT job_id FROM awa.claim_ready_runtime('mr_unique', 1)), ARRAY[1]::bigint[]);
SELECT awa.cancel_job((SELECT job_id FROM awa.claim_ready_runtime('mr_unique', 1))) AS cancelled;
SELECT awa.fail_job((SELECT job_id FROM awa.claim_ready_runtime('mr_unique', 1)), 1, 'boom') AS failed;
SELECT u.unique_key, j.state FROM awa.job_unique_claims u JOIN awa.jobs j ON j.id = u.job_id ORDER BY 1;
-- (A slot that held pending rows takes two prunes: move, then truncate; the second waits until
-- no snapshot of the database, an autovacuum's or the launcher's look included, predates the
-- move, as prune_when_seen does.)
CREATE PROCEDURE pg_temp.rotate_and_prune(n integer) LANGUAGE plpgsql AS $f$
DECLARE
    prune text;
BEGIN
    FOR i IN 1..n LOOP
        PERFORM awa.rotate_queue_ring();
        COMMIT;
        CALL pg_temp.prune_when_seen(prune);
        COMMIT;
    END LOOP;
END
$f$;
CALL pg_temp.rotate_and_prune(40);
SELECT state, count(*) FROM awa.jobs WHERE queue = 'mr_unique' GROUP BY 1 ORDER BY 1;
SELECT unique_key FROM awa.job_unique_claims ORDER BY 1;
SELECT (awa.insert_job_compat('u', 'mr_unique', p_unique_key => 'done'::bytea)).id IS NOT NULL AS done_key_free;
SELECT (awa.insert_job_compat('u', 'mr_unique', p_unique_key => 'cancelled'::bytea)).id IS NOT NULL AS cancelled_key_free;
SELECT pg_temp.sqlstate_of($$SELECT awa.insert_job_compat('u', 'mr_unique', p_unique_key => 'failed'::bytea)$$)
       AS failed_key_held;
\c :home
DROP DATABASE awa_maintenance_ring;
