-- claim_direct: the receipts-mode drain of a claim runs without a planned statement
-- (src/direct_drain.cpp) and returns and writes exactly what the drain statement does
-- (claim_sql.hpp), which still runs where the direct drain steps aside (here: a trigger on
-- awa.claim_marks). Which one ran is read from this backend's plan cache: a kept statement
-- has a memory context named by its text (pg_backend_memory_contexts.ident).
\set VERBOSITY terse
\c
SET client_min_messages = warning;

CREATE FUNCTION pg_temp.drain_statements() RETURNS bigint LANGUAGE sql
    AS $$SELECT count(*) FROM pg_backend_memory_contexts WHERE ident LIKE 'WITH window_ AS MATERIALIZED%'$$;

-- The same five jobs on a queue: plain; metadata and tags; a unique key
-- whose states leave out 'running' (released at claim); one whose states cover it (kept);
-- an ordering key and stored errors.
CREATE FUNCTION pg_temp.fill(q text) RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    e_id bigint;
BEGIN
    PERFORM awa.insert_job_compat('plain', q, '{"n": 1}');
    PERFORM awa.insert_job_compat('tagged', q, '{"n": 2}', p_metadata => '{"m": [1, "two"]}',
                                  p_tags => ARRAY['x', 'y']);
    PERFORM awa.insert_job_compat('uniq_released', q, p_unique_key => ('\x01' || q::bytea),
                                  p_unique_states => B'11000000');
    PERFORM awa.insert_job_compat('uniq_kept', q, p_unique_key => ('\x02' || q::bytea),
                                  p_unique_states => B'11100000', p_max_attempts => 3);
    e_id := (awa.insert_job_compat('ordered', q, p_ordering_key => '\xabcd', p_tags => '{}')).id;
    UPDATE awa.ready_entries SET errors = '[{"error": "earlier"}]' WHERE job_id = e_id;
END $$;

CREATE TEMP TABLE claimed AS
SELECT 'direct'::text AS path, c.* FROM awa.claim_ready_runtime('cd_direct', 0) c WHERE false;
SELECT awa.create_queue('cd_direct');
SELECT awa.create_queue('cd_statement');
SELECT pg_temp.fill('cd_direct');
SELECT pg_temp.fill('cd_statement');

-- 1. The direct drain: five rows in lane order, and no drain statement in the plan cache.
INSERT INTO claimed SELECT 'direct', c.* FROM awa.claim_ready_runtime('cd_direct', 10, 30, 0) c;
SELECT pg_temp.drain_statements() AS drain_statements_after_direct;
SELECT kind, lane_seq, attempt, run_lease, lane_priority, priority, payload
  FROM claimed WHERE path = 'direct' ORDER BY lane_seq;
SELECT count(*) AS rows_, bool_and(lease_slot IS NULL AND lease_generation IS NULL AND claim_slot IS NOT NULL) AS receipts,
       bool_and(attempted_at = heartbeat_at AND deadline_at - heartbeat_at = interval '30 seconds') AS times,
       max(receipt_id) - min(receipt_id) AS receipt_span
  FROM claimed WHERE path = 'direct';
-- One claim batch (one ready slot, one block of 64), its offsets and priorities in lane order;
-- the lane's cursor after the batch with no hint (nothing waits behind it).
SELECT lane_offsets, effective_priorities, deadline_at - claimed_at AS deadline_after
  FROM awa.claim_batches WHERE queue = 'cd_direct';
SELECT claim_seq, head_run_at IS NULL AS no_hint FROM awa.claim_marks WHERE queue = 'cd_direct';
SELECT count(*) AS unique_claims_left FROM awa.job_unique_claims WHERE queue = 'cd_direct';
SELECT kind, state FROM awa.jobs WHERE queue = 'cd_direct' ORDER BY id;

-- 2. The statement, where the direct drain steps aside: the same rows, the same writes.
CREATE FUNCTION pg_temp.keep_row() RETURNS trigger LANGUAGE plpgsql AS $$BEGIN RETURN NEW; END $$;
CREATE TRIGGER claim_direct_test BEFORE INSERT ON awa.claim_marks FOR EACH ROW EXECUTE FUNCTION pg_temp.keep_row();
INSERT INTO claimed SELECT 'statement', c.* FROM awa.claim_ready_runtime('cd_statement', 10, 30, 0) c;
SELECT pg_temp.drain_statements() > 0 AS drain_statement_ran;
DROP TRIGGER claim_direct_test ON awa.claim_marks;
SELECT count(*) AS unique_claims_left FROM awa.job_unique_claims WHERE queue = 'cd_statement';

-- Every column but ids, times and the queue is the same on both paths.
CREATE TEMP VIEW comparable AS
SELECT path, lane_seq, enqueue_shard, lease_slot, lease_generation, claim_slot, receipt_id - min(receipt_id) OVER (PARTITION BY path) AS receipt_offset,
       kind, args, lane_priority, priority, attempt, run_lease, max_attempts, deadline_at - heartbeat_at AS deadline_after,
       attempted_at = heartbeat_at AS attempted_is_claim, run_at <= heartbeat_at AS run_at_before, created_at <= run_at AS created_before,
       unique_states, ordering_key, payload, substr(unique_key, 1, 1) AS unique_key_kind
  FROM claimed;
SELECT count(*) AS differing FROM (
  (SELECT lane_seq, enqueue_shard, lease_slot, lease_generation, claim_slot, receipt_offset, kind, args, lane_priority, priority,
          attempt, run_lease, max_attempts, deadline_after, attempted_is_claim, run_at_before, created_before, unique_states,
          ordering_key, payload, unique_key_kind FROM comparable WHERE path = 'direct'
   EXCEPT ALL
   SELECT lane_seq, enqueue_shard, lease_slot, lease_generation, claim_slot, receipt_offset, kind, args, lane_priority, priority,
          attempt, run_lease, max_attempts, deadline_after, attempted_is_claim, run_at_before, created_before, unique_states,
          ordering_key, payload, unique_key_kind FROM comparable WHERE path = 'statement')
  UNION ALL
  (SELECT lane_seq, enqueue_shard, lease_slot, lease_generation, claim_slot, receipt_offset, kind, args, lane_priority, priority,
          attempt, run_lease, max_attempts, deadline_after, attempted_is_claim, run_at_before, created_before, unique_states,
          ordering_key, payload, unique_key_kind FROM comparable WHERE path = 'statement'
   EXCEPT ALL
   SELECT lane_seq, enqueue_shard, lease_slot, lease_generation, claim_slot, receipt_offset, kind, args, lane_priority, priority,
          attempt, run_lease, max_attempts, deadline_after, attempted_is_claim, run_at_before, created_before, unique_states,
          ordering_key, payload, unique_key_kind FROM comparable WHERE path = 'direct')) d;
SELECT count(*) AS rows_per_path FROM claimed GROUP BY path ORDER BY path;
SELECT (SELECT array_agg(row(lane_offsets, effective_priorities, deadline_at - claimed_at, lane_block) ORDER BY lane_block)
          FROM awa.claim_batches WHERE queue = 'cd_direct')
     = (SELECT array_agg(row(lane_offsets, effective_priorities, deadline_at - claimed_at, lane_block) ORDER BY lane_block)
          FROM awa.claim_batches WHERE queue = 'cd_statement') AS same_batches,
       (SELECT array_agg(row(claim_seq, head_run_at IS NULL)) FROM awa.claim_marks WHERE queue = 'cd_direct')
     = (SELECT array_agg(row(claim_seq, head_run_at IS NULL)) FROM awa.claim_marks WHERE queue = 'cd_statement') AS same_marks;

-- 3. The receipts the direct drain wrote complete their jobs.
SELECT count(*) AS completed FROM awa.complete_jobs(
    (SELECT array_agg(job_id) FROM claimed WHERE path = 'direct'),
    (SELECT array_agg(run_lease) FROM claimed WHERE path = 'direct'));
SELECT state, count(*) FROM awa.jobs WHERE queue = 'cd_direct' GROUP BY state;

-- 4. A window larger than the batch: the hint is the run_at of the first row left, a second
--    claim takes the rest, and a batch across two blocks of 64 makes two claim batches.
SELECT awa.create_queue('cd_window');
SELECT cardinality(awa.insert_jobs('cd_window', array_fill('w'::text, ARRAY[70]))) AS enqueued;
SELECT count(*) AS first_claim FROM awa.claim_ready_runtime('cd_window', 3);
SELECT m.claim_seq, m.head_run_at = r.run_at AS hint_is_next_row
  FROM awa.claim_marks m JOIN awa.ready_entries r ON r.queue = m.queue AND r.lane_seq = m.claim_seq
 WHERE m.queue = 'cd_window';
SELECT count(*) AS second_claim, min(lane_seq), max(lane_seq), count(DISTINCT receipt_id) AS receipts
  FROM awa.claim_ready_runtime('cd_window', 100);
SELECT lane_block, cardinality(lane_offsets) AS jobs FROM awa.claim_batches WHERE queue = 'cd_window' ORDER BY claim_slot, receipt_base;

-- 5. The lane probes of the claim walk and of wait_for_jobs' work check, the head lock, the
--    cursor read and (preloaded) the heads read run without statements too: none is kept.
SELECT awa.create_queue('cd_wait');
SELECT (awa.insert_job_compat('w', 'cd_wait')).id IS NOT NULL AS enqueued;
SELECT awa.wait_for_jobs('cd_wait', 0) AS work_seen;
SELECT count(*) AS claimed FROM awa.claim_ready_runtime('cd_wait', 10);
-- A paused queue shows no lane to the heads read.
SELECT awa.pause_queue('cd_wait') IS NOT NULL AS paused;
SELECT (awa.insert_job_compat('w2', 'cd_wait')).id IS NOT NULL AS enqueued_while_paused;
SELECT count(*) AS claimed_while_paused FROM awa.claim_ready_runtime('cd_wait', 10);
SELECT awa.resume_queue('cd_wait') IS NOT NULL AS resumed;
SELECT count(*) AS claimed_after_resume FROM awa.claim_ready_runtime('cd_wait', 10);
SELECT count(*) AS probe_statements FROM pg_backend_memory_contexts
 WHERE ident LIKE 'SELECT r.run_at, r.ready_slot, r.lane_seq FROM awa.ready_entries%'
    OR ident LIKE 'SELECT 1 FROM awa.ready_entries r%'
    OR ident LIKE 'SELECT 1 FROM awa.queue_claim_heads h%'
    OR ident LIKE 'SELECT h.claim_seq FROM awa.lane_cursors h%';
-- The heads read is direct where the cursor board completes it (preloaded); without the
-- preload it reads the cursors through awa.lane_cursors, a statement.
SELECT count(*) = 0 OR current_setting('shared_preload_libraries') NOT LIKE '%awa_shard%' AS heads_read_direct_when_preloaded
  FROM pg_backend_memory_contexts WHERE ident LIKE 'SELECT h.priority, h.enqueue_shard, h.claim_seq%';

-- A read-only transaction gets the statement's error (the head lock steps aside), and nothing is claimed.
SELECT (awa.insert_job_compat('w3', 'cd_wait')).id IS NOT NULL AS enqueued;
BEGIN TRANSACTION READ ONLY;
SELECT count(*) FROM awa.claim_ready_runtime('cd_wait', 10);
ROLLBACK;
SELECT count(*) AS claimed_after_read_only FROM awa.claim_ready_runtime('cd_wait', 10);

-- REPEATABLE READ and SERIALIZABLE claimers take the same path and commit.
SELECT awa.create_queue('cd_iso');
SELECT cardinality(awa.insert_jobs('cd_iso', array_fill('i'::text, ARRAY[4]))) AS enqueued;
BEGIN ISOLATION LEVEL REPEATABLE READ;
SELECT count(*) AS claimed_rr FROM awa.claim_ready_runtime('cd_iso', 2);
COMMIT;
BEGIN ISOLATION LEVEL SERIALIZABLE;
SELECT count(*) AS claimed_serializable, min(lane_seq) AS from_seq FROM awa.claim_ready_runtime('cd_iso', 2);
COMMIT;
SELECT state, count(*) FROM awa.jobs WHERE queue = 'cd_iso' GROUP BY state;

-- The heads of this test's queues are folded, as maintenance would, for the tests after it.
SELECT awa.fold_claim_marks() >= 5 AS folded;
