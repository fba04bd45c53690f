-- complete_block_reads: a completion reads what a lane block holds once, not once per job.
-- The receipts of one completion mostly share a few lane blocks (a claim takes a run of one
-- lane): the claim batches of a block, the completion batches that name its offsets and its
-- terminal rows are each read once per block and snapshot (docs/design.md §5, "Direct
-- completion"), where a probe per job read each index once per job. The cost is counted,
-- not timed: blocks of claim_batches, completion_batches and done_entries (partitions and
-- their indexes) that this backend read in the completing transaction. The answers are
-- those of the per-job test: a stale lease (left to the statements) completes nothing; one
-- call with a job already completed, a job failed for good and the open jobs of three
-- blocks completes the open ones; the same pairs again complete nothing.
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
-- 126 jobs completed; a probe per job read at least one index block per job in each of the
-- three tables (378 and more here), a read per block a few blocks per block (25 here).
SELECT (SELECT count(*) FROM completed) AS completed_now,
       (SELECT before FROM reads) < 64 AS reads_per_block_not_per_job;
COMMIT;

SELECT state, count(*) FROM awa.jobs WHERE queue = 'cbr' GROUP BY 1 ORDER BY 1;
SELECT count(*) AS failed_or_completed_before_in_result
  FROM completed WHERE job_id IN (SELECT job_id FROM taken ORDER BY job_id LIMIT 2);
-- The same pairs again complete nothing.
SELECT count(*) AS completed_again FROM awa.complete_jobs(
    ARRAY(SELECT job_id FROM taken ORDER BY job_id), ARRAY(SELECT run_lease FROM taken ORDER BY job_id));
SELECT awa.drop_queue('cbr');
