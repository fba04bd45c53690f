-- claim_marks: a claim moves its lane's cursor by appending a claim mark, never by updating
-- the lane's head row (docs/design.md §4, "Claim cursor"); awa.lane_cursors is the cursor,
-- awa.fold_claim_marks folds marks into the heads; the cursor never goes back.
\set VERBOSITY terse
\i sql/sqlstate_of.psql

SELECT awa.create_queue('marks_q', 2);
SELECT count(*) AS enqueued FROM (
    SELECT awa.insert_job_compat('m', 'marks_q', p_ordering_key => convert_to((g % 2)::text, 'UTF8'))
      FROM generate_series(1, 40) g) x;
CREATE TEMP TABLE heads_before AS
    SELECT queue, priority, enqueue_shard, ctid AS head_ctid, xmin::text AS head_xmin, claim_seq FROM awa.queue_claim_heads
     WHERE queue = 'marks_q';

-- 1. Claims leave the head rows as they were (same version) and append one mark per claim.
CREATE TEMP TABLE claimed (job_id bigint, run_lease bigint, lane_seq bigint, enqueue_shard smallint);
INSERT INTO claimed SELECT job_id, run_lease, lane_seq, enqueue_shard FROM awa.claim_ready_runtime('marks_q', 3);
INSERT INTO claimed SELECT job_id, run_lease, lane_seq, enqueue_shard FROM awa.claim_ready_runtime('marks_q', 3);
INSERT INTO claimed SELECT job_id, run_lease, lane_seq, enqueue_shard FROM awa.claim_ready_runtime('marks_q', 3);
INSERT INTO claimed SELECT job_id, run_lease, lane_seq, enqueue_shard FROM awa.claim_ready_runtime('marks_q', 3);
SELECT count(*) AS claimed, count(DISTINCT job_id) AS distinct_jobs FROM claimed;
SELECT count(*) AS heads_rewritten
  FROM awa.queue_claim_heads h JOIN heads_before b USING (queue, priority, enqueue_shard)
 WHERE h.ctid <> b.head_ctid OR h.xmin::text <> b.head_xmin OR h.claim_seq <> b.claim_seq;
SELECT count(*) AS marks FROM awa.claim_marks WHERE queue = 'marks_q';
-- The cursor of each lane is one past the last row claimed from it.
SELECT c.enqueue_shard, c.claim_seq, c.claim_seq = (SELECT max(lane_seq) + 1 FROM claimed x
                                                     WHERE x.enqueue_shard = c.enqueue_shard) AS one_past_last
  FROM awa.lane_cursors c WHERE c.queue = 'marks_q' ORDER BY 1;
-- The views agree with the cursor: available = rows at or after it.
SELECT available, running FROM awa.queue_counts_exact('marks_q');
SELECT count(*) AS available_in_jobs FROM awa.jobs WHERE queue = 'marks_q' AND state = 'available';
SELECT sum(lag) AS lag, sum(waiting) AS waiting FROM awa.shard_lag WHERE queue = 'marks_q';
SELECT awa.queue_depth('marks_q') AS depth;

-- 2. Fold: heads move to their latest mark, then the passed marks go; no cursor changes.
CREATE TEMP TABLE cursors_before AS SELECT * FROM awa.lane_cursors WHERE queue = 'marks_q';
SELECT awa.fold_claim_marks() AS heads_moved;
SELECT count(*) AS heads_behind FROM awa.queue_claim_heads h JOIN cursors_before c USING (queue, priority, enqueue_shard)
 WHERE h.claim_seq <> c.claim_seq;
SELECT count(*) AS marks_left FROM awa.claim_marks WHERE queue = 'marks_q';
-- The next calls delete the marks the heads have passed, a few at a time with p_limit; the
-- mark level with each head stays until a further one exists.
SELECT awa.fold_claim_marks(10, 3) AS heads_moved_again;
SELECT count(*) AS marks_left FROM awa.claim_marks WHERE queue = 'marks_q';
SELECT awa.fold_claim_marks() AS heads_moved_again;
SELECT count(*) AS marks_left FROM awa.claim_marks WHERE queue = 'marks_q';
SELECT count(*) AS cursors_changed FROM (
    SELECT * FROM awa.lane_cursors WHERE queue = 'marks_q' EXCEPT SELECT * FROM cursors_before) d;

-- 3. Claims after a fold go on from the folded cursor: every job exactly once.
INSERT INTO claimed SELECT job_id, run_lease, lane_seq, enqueue_shard FROM awa.claim_ready_runtime('marks_q', 100);
INSERT INTO claimed SELECT job_id, run_lease, lane_seq, enqueue_shard FROM awa.claim_ready_runtime('marks_q', 100);
SELECT count(*) AS claimed, count(DISTINCT job_id) AS distinct_jobs FROM claimed;
SELECT count(*) AS left_over FROM awa.claim_ready_runtime('marks_q', 100);
SELECT count(*) AS completed FROM awa.complete_jobs((SELECT array_agg(job_id) FROM claimed),
                                                    (SELECT array_agg(run_lease) FROM claimed));

-- 4. A fold never moves a head back: a head already further than the lane's marks (purge
--    sets it past the removed rows) keeps its cursor, and the stale marks go.
SELECT count(*) AS enqueued FROM (SELECT awa.insert_job_compat('p', 'marks_q') FROM generate_series(1, 4) g) x;
SELECT count(*) AS claimed_one FROM awa.claim_ready_runtime('marks_q', 1);
SELECT awa.purge_queue('marks_q') AS purged;
CREATE TEMP TABLE cursors_purged AS SELECT * FROM awa.lane_cursors WHERE queue = 'marks_q';
SELECT awa.fold_claim_marks() AS heads_moved;
SELECT awa.fold_claim_marks() AS heads_moved;
SELECT count(*) AS cursors_moved FROM awa.lane_cursors c JOIN cursors_purged p USING (queue, priority, enqueue_shard)
 WHERE c.claim_seq <> p.claim_seq;
SELECT count(*) AS marks_left FROM awa.claim_marks WHERE queue = 'marks_q';

-- 5. A lane's marks die with its head: a dropped queue created again starts from 1 and its
--    first job is claimed (an old mark would hide it).
SELECT awa.create_queue('marks_drop');
SELECT (awa.insert_job_compat('d', 'marks_drop')).lane_seq;
SELECT count(*) AS claimed FROM awa.claim_ready_runtime('marks_drop', 5);
SELECT awa.drop_queue('marks_drop', true) AS dropped;
SELECT count(*) AS marks_of_dropped FROM awa.claim_marks WHERE queue = 'marks_drop';
SELECT (awa.insert_job_compat('d2', 'marks_drop')).lane_seq;
SELECT kind, lane_seq FROM awa.claim_ready_runtime('marks_drop', 5);

-- 6. The cursor read on the latest committed state: NULL for an unknown lane.
SELECT awa._lane_cursor('marks_q', 2::smallint, 0::smallint) = claim_seq AS agrees
  FROM awa.lane_cursors WHERE queue = 'marks_q' AND priority = 2 AND enqueue_shard = 0;
SELECT awa._lane_cursor('no_such_queue', 2::smallint, 0::smallint) IS NULL AS unknown_is_null;

-- 7. Arguments of the fold.
SELECT pg_temp.sqlstate_of($$SELECT awa.fold_claim_marks(NULL)$$);
SELECT pg_temp.sqlstate_of($$SELECT awa.fold_claim_marks(-1)$$);
SELECT pg_temp.sqlstate_of($$SELECT awa.fold_claim_marks(10, 0)$$);
BEGIN ISOLATION LEVEL REPEATABLE READ;
SELECT pg_temp.sqlstate_of($$SELECT awa.fold_claim_marks()$$);
ROLLBACK;

-- 8. What a claim publishes for the walk (the cursor board, when preloaded) is published at
--    commit only: a claim rolled back, to a savepoint or whole, or prepared and then rolled
--    back, must not make its jobs look taken to the next walks.
SELECT awa.create_queue('marks_board');
SELECT count(*) AS enqueued FROM (SELECT awa.insert_job_compat('b' || g, 'marks_board') FROM generate_series(1, 5) g) x;
BEGIN;
SAVEPOINT before_claim;
SELECT count(*) AS claimed_then_rolled_back FROM awa.claim_ready_runtime('marks_board', 5);
ROLLBACK TO SAVEPOINT before_claim;
COMMIT;
BEGIN;
SELECT count(*) AS claimed_then_rolled_back FROM awa.claim_ready_runtime('marks_board', 5);
ROLLBACK;
-- A second claim in the same transaction reads the first one's (uncommitted) mark.
BEGIN;
SELECT count(*) AS claimed_then_rolled_back FROM awa.claim_ready_runtime('marks_board', 5);
SELECT count(*) AS nothing_left_in_xact FROM awa.claim_ready_runtime('marks_board', 5);
ROLLBACK;
BEGIN;
SAVEPOINT twice;
SELECT count(*) AS claimed_then_rolled_back FROM awa.claim_ready_runtime('marks_board', 5);
SELECT count(*) AS nothing_left_in_xact FROM awa.claim_ready_runtime('marks_board', 5);
ROLLBACK TO SAVEPOINT twice;
COMMIT;
BEGIN;
SELECT count(*) AS claimed_then_prepared FROM awa.claim_ready_runtime('marks_board', 5);
PREPARE TRANSACTION 'marks_board_claim';
ROLLBACK PREPARED 'marks_board_claim';
BEGIN;
SAVEPOINT a;
SELECT count(*) AS claimed_in_released_savepoint FROM awa.claim_ready_runtime('marks_board', 2);
RELEASE SAVEPOINT a;
COMMIT;
SELECT string_agg(kind, ',' ORDER BY lane_seq) AS still_claimable FROM awa.claim_ready_runtime('marks_board', 5);
SELECT count(*) AS left_over FROM awa.claim_ready_runtime('marks_board', 5);

-- Exits may be prepared, but not a cancel that cancelled a job: it sends NOTIFY "awa:cancel",
-- which PostgreSQL refuses in a prepared transaction (docs/api.md, "Transactions"). The
-- PREPARE fails, the transaction rolls back, and the job is still waiting.
SELECT count(*) AS enqueued FROM awa.insert_job_compat('cancel_me', 'marks_cancel');
BEGIN;
SELECT awa.cancel_job(job_id, 'marks_cancel') AS cancelled FROM awa.ready_entries WHERE queue = 'marks_cancel';
PREPARE TRANSACTION 'marks_cancel';
SELECT count(*) AS still_waiting FROM awa.ready_entries WHERE queue = 'marks_cancel';
SELECT awa.drop_queue('marks_cancel', p_force => true) AS dropped;
