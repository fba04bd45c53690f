-- complete_block_reads: a completion reads what a lane block holds once, not once per job.
-- The receipts of one completion mostly share a few lane blocks (a claim takes a run of one
-- lane): the claim batches of a block, the completion batches that name its offsets and its
-- terminal rows are each read once per block and snapshot (docs/design.md §5, "Direct
-- completion"), where a probe per job read each index once per job. The cost is counted,
-- not timed: blocks of claim_batches, completion_batches and done_entries (partitions and
-- their indexes) that this backend read in the completing transaction. The answers are
-- those of the per-job test: a stale lease (left to the statements) completes nothing; one
-- call with a job already completed, a job failed for good, a job snoozed and the open jobs
-- (two with a heartbeat) of three blocks completes the open ones and removes their
-- heartbeats; the same pairs again complete nothing; and the same where the job ids lie
-- far apart.
SELECT awa.create_queue('cbr');

-- Blocks of the three tables (and their indexes) this transaction has read so far.
CREATE FUNCTION pg_temp.block_reads() RETURNS bigint LANGUAGE sql AS $$
    SELECT sum(pg_stat_get_xact_blocks_fetched(c.oid))::bigint
      FROM pg_class c
      LEFT JOIN pg_index i ON i.indexrelid = c.oid
      JOIN pg_class t ON t.oid = coalesce(i.indrelid, c.oid)
     WHERE t.relnamespace = 'awa'::regnamespace
       AND (t.relname LIKE 'claim\_batches%' OR t.relname LIKE 'completion\_batches%' OR t.relname LIKE 'done\_entries%')
$$;

-- 128 jobs on one lane (lane_seq 1..128: blocks 0, 1 and 2); the first may run once.
SELECT (awa.insert_job_compat('once', 'cbr', p_max_attempts => 1::smallint)).id AS once_id \gset
SELECT count(*) AS inserted FROM awa.insert_jobs('cbr', array_fill('k'::text, ARRAY[127]));
CREATE TEMP TABLE taken AS SELECT job_id, run_lease FROM awa.claim_ready_runtime('cbr', 100, 0, 0);
INSERT INTO taken SELECT job_id, run_lease FROM awa.claim_ready_runtime('cbr', 100, 0, 0);
SELECT count(*) AS claimed, count(DISTINCT job_id) AS distinct_jobs FROM taken;

-- Before the completion: the first job fails for good (a terminal row), the second is
-- completed alone (a completion batch).
SELECT awa.fail_job(:once_id, (SELECT run_lease FROM taken WHERE job_id = :once_id), 'boom') AS failed_state;
SELECT count(*) AS completed_alone FROM awa.complete_jobs(
    ARRAY(SELECT job_id FROM taken ORDER BY job_id OFFSET 1 LIMIT 1),
    ARRAY(SELECT run_lease FROM taken ORDER BY job_id OFFSET 1 LIMIT 1));

-- The fourth job is snoozed (its receipt closed by a closure row); the fifth and sixth have
-- a heartbeat (attempt_state rows, removed when they complete).
SELECT awa.snooze_job(job_id, run_lease, interval '1 hour') AS snoozed
  FROM (SELECT * FROM taken ORDER BY job_id OFFSET 3 LIMIT 1) t;
SELECT awa.heartbeat_jobs(ARRAY(SELECT job_id FROM taken ORDER BY job_id OFFSET 4 LIMIT 2),
                          ARRAY(SELECT run_lease FROM taken ORDER BY job_id OFFSET 4 LIMIT 2)) AS heartbeats;
SELECT count(*) AS states_before FROM awa.attempt_state WHERE job_id IN (SELECT job_id FROM taken);

-- A stale lease of the third job (open) completes nothing.
SELECT count(*) AS completed_stale FROM awa.complete_jobs(
    ARRAY(SELECT job_id FROM taken ORDER BY job_id OFFSET 2 LIMIT 1),
    ARRAY(SELECT run_lease + 5 FROM taken ORDER BY job_id OFFSET 2 LIMIT 1));

-- One completion of every pair.
BEGIN;
CREATE TEMP TABLE reads (before bigint);
INSERT INTO reads SELECT pg_temp.block_reads();
CREATE TEMP TABLE completed AS SELECT * FROM awa.complete_jobs(
    ARRAY(SELECT job_id FROM taken ORDER BY job_id), ARRAY(SELECT run_lease FROM taken ORDER BY job_id));
UPDATE reads SET before = pg_temp.block_reads() - before;
-- 125 jobs completed; a probe per job read at least one index block per job in each of the
-- three tables (375 and more here), a read per block a few blocks per block (25 here).
SELECT (SELECT count(*) FROM completed) AS completed_now,
       (SELECT before FROM reads) < 64 AS reads_per_block_not_per_job;
COMMIT;

SELECT state, count(*) FROM awa.jobs WHERE queue = 'cbr' GROUP BY 1 ORDER BY 1;
SELECT count(*) AS states_after FROM awa.attempt_state WHERE job_id IN (SELECT job_id FROM taken);
SELECT count(*) AS failed_or_completed_before_in_result
  FROM completed WHERE job_id IN (SELECT job_id FROM taken ORDER BY job_id LIMIT 2);
-- The same pairs again complete nothing.
SELECT count(*) AS completed_again FROM awa.complete_jobs(
    ARRAY(SELECT job_id FROM taken ORDER BY job_id), ARRAY(SELECT run_lease FROM taken ORDER BY job_id));
SELECT awa.drop_queue('cbr', p_force => true) >= 0 AS dropped;

-- Attempts whose job ids lie far apart (more than four times their number plus 64): the
-- closures and heartbeats are probed attempt by attempt, with the same answers.
SELECT (awa.insert_job_compat('far', 'cbr_far')).id AS far_a \gset
SELECT cardinality(awa.insert_jobs('cbr_pad', array_fill('pad'::text, ARRAY[200]))) AS padding;
SELECT (awa.insert_job_compat('far', 'cbr_far')).id AS far_b \gset
SELECT (awa.insert_job_compat('far', 'cbr_far')).id AS far_c \gset
SELECT cardinality(awa.insert_jobs('cbr_pad', array_fill('pad'::text, ARRAY[200]))) AS padding;
SELECT (awa.insert_job_compat('far', 'cbr_far')).id AS far_d \gset
CREATE TEMP TABLE far AS SELECT job_id, run_lease FROM awa.claim_ready_runtime('cbr_far', 4, 0, 0);
SELECT count(*) AS far_claimed FROM far;
SELECT awa.snooze_job(:far_b, (SELECT run_lease FROM far WHERE job_id = :far_b), interval '1 hour') AS snoozed;
SELECT awa.heartbeat_jobs(ARRAY[:far_a, :far_d]::bigint[],
                          ARRAY(SELECT run_lease FROM far WHERE job_id IN (:far_a, :far_d) ORDER BY job_id)) AS heartbeats;
SELECT job_id = :far_a AS is_a, job_id = :far_c AS is_c, job_id = :far_d AS is_d FROM awa.complete_jobs(
    ARRAY[:far_a, :far_b, :far_d]::bigint[],
    ARRAY(SELECT run_lease FROM far WHERE job_id IN (:far_a, :far_b, :far_d) ORDER BY job_id)) ORDER BY job_id;
SELECT count(*) AS far_states_after FROM awa.attempt_state WHERE job_id IN (SELECT job_id FROM far);
SELECT id = :far_b AS is_b, id = :far_c AS is_c, state FROM awa.jobs WHERE queue = 'cbr_far' ORDER BY id;
SELECT awa.drop_queue(q, p_force => true) >= 0 AS dropped FROM unnest(ARRAY['cbr_far', 'cbr_pad']) q;
