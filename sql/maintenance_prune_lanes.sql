-- Queue-ring prune over many lanes: it finds the lanes of the slot by skipping along the
-- lane index and reads each lane from its own cursor on, and it copies failed rows before it
-- takes the slot's locks. Whatever the lane mix, exactly the pending rows move (with their
-- lane identity, lane_seq and body), failed jobs are retained once, completed ones go, and
-- every job that was waiting, retryable or failed is still there afterwards, unchanged.
SELECT current_database() AS home \gset
CREATE DATABASE awa_maintenance_prune_lanes;
ALTER DATABASE awa_maintenance_prune_lanes SET awa_shard.maintenance = off;
\c awa_maintenance_prune_lanes
\i sql/prune_when_seen.psql
SET client_min_messages = warning;
CREATE EXTENSION awa_shard;
RESET client_min_messages;
SELECT awa.create_queue('pl_wide', 4) AS wide, awa.create_queue('pl_narrow', 2) AS narrow,
       awa.create_queue('pl_headless') AS headless;
-- 11 lanes with jobs: pl_wide x priorities 1, 2 x 4 shards (5 jobs each), pl_narrow x
-- priority 3 x 2 shards (10 each), pl_headless (one lane, whose claim head goes missing below).
SELECT count(*) AS enqueued FROM (
    SELECT unnest(awa.insert_jobs('pl_wide', array_fill('w'::text, ARRAY[40]),
                                  p_args => ARRAY(SELECT jsonb_build_object('n', g) FROM generate_series(1, 40) g),
                                  p_priorities => ARRAY(SELECT 1 + g % 2 FROM generate_series(1, 40) g),
                                  p_max_attempts => array_fill(1, ARRAY[40]),
                                  p_spread_keyless => true))
    UNION ALL
    SELECT unnest(awa.insert_jobs('pl_narrow', array_fill('n'::text, ARRAY[20]),
                                  p_priorities => array_fill(3, ARRAY[20]),
                                  p_max_attempts => array_fill(1, ARRAY[20]),
                                  p_spread_keyless => true))
    UNION ALL
    SELECT unnest(awa.insert_jobs('pl_headless', array_fill('h'::text, ARRAY[5])))) j;
SELECT count(DISTINCT (queue, priority, enqueue_shard)) AS lanes FROM awa.ready_entries;
-- A claim drains one lane: lanes end up partly claimed, wholly claimed or untouched. Fail a
-- quarter of the claimed jobs terminally (max_attempts 1) and complete the rest (an open
-- attempt would make prune refuse the slot).
CREATE TEMP TABLE claimed (n serial, job_id bigint, run_lease bigint);
INSERT INTO claimed (job_id, run_lease) SELECT job_id, run_lease FROM awa.claim_ready_runtime('pl_wide', 3, 0, 0);
INSERT INTO claimed (job_id, run_lease) SELECT job_id, run_lease FROM awa.claim_ready_runtime('pl_wide', 3, 0, 0);
INSERT INTO claimed (job_id, run_lease) SELECT job_id, run_lease FROM awa.claim_ready_runtime('pl_wide', 3, 0, 0);
INSERT INTO claimed (job_id, run_lease) SELECT job_id, run_lease FROM awa.claim_ready_runtime('pl_wide', 5, 0, 0);
INSERT INTO claimed (job_id, run_lease) SELECT job_id, run_lease FROM awa.claim_ready_runtime('pl_wide', 5, 0, 0);
INSERT INTO claimed (job_id, run_lease) SELECT job_id, run_lease FROM awa.claim_ready_runtime('pl_narrow', 4, 0, 0);
SELECT count(*) AS claimed FROM claimed;
SELECT count(*) AS failed FROM claimed c, LATERAL awa.fail_job(c.job_id, c.run_lease, 'boom') f
 WHERE c.n % 4 = 0;
SELECT count(*) AS completed FROM awa.complete_jobs(
    (SELECT array_agg(job_id) FROM claimed WHERE n % 4 <> 0),
    (SELECT array_agg(run_lease) FROM claimed WHERE n % 4 <> 0));
-- A lane with rows but no claim head: nothing proves any of its rows finished, so all move.
CREATE TEMP TABLE headless_head AS SELECT * FROM awa.queue_claim_heads WHERE queue = 'pl_headless';
DELETE FROM awa.queue_claim_heads WHERE queue = 'pl_headless';
-- What must survive: every job not completed, as awa.jobs shows it, and the pending rows.
CREATE TEMP TABLE jobs_before AS
    SELECT id, kind, queue, args, state, priority, attempt, run_lease, enqueue_shard, lane_seq, errors
      FROM awa.jobs WHERE queue LIKE 'pl\_%' AND state <> 'completed';
CREATE TEMP TABLE pending_before AS
    SELECT r.job_id, r.queue, r.priority, r.enqueue_shard, r.lane_seq, r.kind, r.args, r.run_at, r.created_at
      FROM awa.ready_entries r
      LEFT JOIN awa.lane_cursors h
        ON h.queue = r.queue AND h.priority = r.priority AND h.enqueue_shard = r.enqueue_shard
     WHERE r.lane_seq >= coalesce(h.claim_seq, 0);
SELECT state, count(*) FROM jobs_before GROUP BY 1 ORDER BY 1;
SELECT count(*) AS pending, count(DISTINCT (queue, priority, enqueue_shard)) AS pending_lanes FROM pending_before;
SELECT awa.rotate_queue_ring() AS rotate;
SELECT awa.prune_queue_ring() AS prune;
-- The move is one transaction; the next prune truncates the old slot (no snapshot needs it).
CALL pg_temp.prune_when_seen(NULL); -- prune_truncates
-- Exactly the pending rows are in the current slot, unchanged; nothing is left in the old one.
SELECT (SELECT count(*) FROM awa.ready_entries) AS ready_rows,
       (SELECT count(*) FROM awa.ready_entries WHERE ready_slot <> (SELECT current_slot FROM awa.queue_ring_state))
           AS outside_current_slot,
       (SELECT count(*) FROM (SELECT job_id, queue, priority, enqueue_shard, lane_seq, kind, args, run_at, created_at
                                FROM awa.ready_entries
                              EXCEPT SELECT * FROM pending_before) d) AS not_pending_before,
       (SELECT count(*) FROM (SELECT * FROM pending_before
                              EXCEPT SELECT job_id, queue, priority, enqueue_shard, lane_seq, kind, args, run_at, created_at
                                FROM awa.ready_entries) d) AS pending_lost;
-- Failed jobs are retained once, in the retained partition; completed ones are gone.
SELECT ready_slot, state, count(*) FROM awa._terminal_attempts GROUP BY 1, 2 ORDER BY 1, 2;
SELECT (SELECT count(*) FROM (SELECT id, kind, queue, args, state, priority, attempt, run_lease, enqueue_shard,
                                     lane_seq, errors FROM awa.jobs WHERE queue LIKE 'pl\_%'
                              EXCEPT SELECT * FROM jobs_before) d) AS jobs_changed,
       (SELECT count(*) FROM (SELECT * FROM jobs_before
                              EXCEPT SELECT id, kind, queue, args, state, priority, attempt, run_lease, enqueue_shard,
                                            lane_seq, errors FROM awa.jobs WHERE queue LIKE 'pl\_%') d) AS jobs_lost;
-- The moved rows drain once each (the headless lane needs its head back first).
INSERT INTO awa.queue_claim_heads SELECT * FROM headless_head;
CREATE TEMP TABLE drained (job_id bigint);
DO $$
DECLARE
    q text;
    n bigint;
BEGIN
    FOREACH q IN ARRAY ARRAY['pl_wide', 'pl_narrow', 'pl_headless'] LOOP
        LOOP
            INSERT INTO drained SELECT job_id FROM awa.claim_ready_runtime(q, 100, 0, 0);
            GET DIAGNOSTICS n = ROW_COUNT;
            EXIT WHEN n = 0;
        END LOOP;
    END LOOP;
END
$$;
SELECT count(*) AS drained, (SELECT count(*) FROM pending_before) AS pending_before, count(DISTINCT job_id) AS distinct_jobs,
       count(*) FILTER (WHERE job_id NOT IN (SELECT job_id FROM pending_before)) AS not_pending_before
  FROM drained;
\c :home
DROP DATABASE awa_maintenance_prune_lanes;
