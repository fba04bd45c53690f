-- wait_check: the "is there work" check of awa.wait_for_jobs (docs/design.md §8) reads
-- O(lanes): a lane whose claim cursor reached its high-water mark costs no read of the ready
-- rows, and any other lane one index probe that starts at its cursor. Claimed rows stay in
-- the ready partitions until prune removes them; the check must never read them. Counted
-- with the statistics of this transaction (index entries returned and heap rows read of
-- every ready partition and its indexes), not with time.
\set VERBOSITY terse
CREATE FUNCTION pg_temp.ready_reads() RETURNS bigint LANGUAGE sql AS $$
    SELECT sum(pg_stat_get_xact_tuples_returned(c.oid) + pg_stat_get_xact_tuples_fetched(c.oid))::bigint
    FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
    WHERE n.nspname = 'awa' AND c.relname LIKE 'ready\_entries\_%'
$$;

-- 1. 4,000 jobs over 4 lanes, all claimed: nothing to do, and not one ready row read.
SELECT awa.create_queue('wc_q', 4);
SELECT cardinality(awa.insert_jobs('wc_q', array_fill('k'::text, ARRAY[4000]),
    p_ordering_keys => ARRAY(SELECT convert_to(g::text, 'UTF8') FROM generate_series(1, 4000) g))) AS enqueued;
SELECT count(*) AS lanes FROM awa.queue_claim_heads WHERE queue = 'wc_q';
DO $$
BEGIN
    WHILE EXISTS (SELECT 1 FROM awa.claim_ready_runtime('wc_q', 1000)) LOOP END LOOP;
END
$$;
SELECT count(*) AS claimed_rows_still_stored FROM awa.ready_entries WHERE queue = 'wc_q';
BEGIN;
SELECT pg_temp.ready_reads() AS before_ \gset
SELECT awa.wait_for_jobs('wc_q', 0) AS work;
SELECT pg_temp.ready_reads() - :before_ AS ready_rows_read;
COMMIT;

-- 2. One more job: the check finds it with one probe from its lane's cursor (one index
--    entry and its heap row), however many claimed rows sit below the cursors.
SELECT cardinality(awa.insert_jobs('wc_q', ARRAY['k'])) AS enqueued;
BEGIN;
SELECT pg_temp.ready_reads() AS before_ \gset
SELECT awa.wait_for_jobs('wc_q', 0) AS work;
SELECT pg_temp.ready_reads() - :before_ <= 2 AS ready_rows_read_at_most_2;
COMMIT;

-- 3. A paused queue has no work, and its check reads no ready row.
SELECT awa.pause_queue('wc_q');
BEGIN;
SELECT pg_temp.ready_reads() AS before_ \gset
SELECT awa.wait_for_jobs('wc_q', 0) AS work;
SELECT pg_temp.ready_reads() - :before_ AS ready_rows_read;
COMMIT;
SELECT awa.resume_queue('wc_q');
SELECT awa.wait_for_jobs('wc_q', 0) AS work;
SELECT count(*) AS claimed FROM awa.claim_ready_runtime('wc_q', 10);
SELECT awa.wait_for_jobs('wc_q', 0) AS work;

-- 4. Priorities: a job in another priority's lane is work; once claimed, it is not.
SELECT (awa.insert_job_compat('urgent', 'wc_q', p_priority => 1)).id IS NOT NULL AS enqueued;
SELECT awa.wait_for_jobs('wc_q', 0) AS work;
SELECT kind FROM awa.claim_ready_runtime('wc_q', 10);
SELECT awa.wait_for_jobs('wc_q', 0) AS work;

-- 5. A scheduled job (run_at in the future) is not work; a job whose lane's number was
--    rolled back leaves a gap the check probes but does not count.
SELECT (awa.insert_job_compat('later', 'wc_q', p_run_at => now() + interval '1 hour')).id IS NOT NULL AS scheduled;
BEGIN;
SELECT cardinality(awa.insert_jobs('wc_q', ARRAY['gone'])) AS enqueued;
ROLLBACK;
SELECT awa.wait_for_jobs('wc_q', 0) AS work;

-- 6. A cancelled job is not work; the one behind it is.
SELECT cardinality(awa.insert_jobs('wc_q', ARRAY['a', 'b'],
    p_ordering_keys => ARRAY[convert_to('1', 'UTF8'), convert_to('1', 'UTF8')])) AS enqueued;
SELECT awa.cancel_job(job_id) AS cancelled FROM awa.ready_entries WHERE queue = 'wc_q' AND kind = 'a';
SELECT awa.wait_for_jobs('wc_q', 0) AS work;
SELECT kind FROM awa.claim_ready_runtime('wc_q', 10);
SELECT awa.wait_for_jobs('wc_q', 0) AS work;
SELECT cardinality(awa.insert_jobs('wc_q', ARRAY['c'])) AS enqueued;
SELECT awa.cancel_job(job_id) AS cancelled FROM awa.ready_entries WHERE queue = 'wc_q' AND kind = 'c';
SELECT awa.wait_for_jobs('wc_q', 0) AS work;

-- 7. In the transaction whose claim took the lane's last jobs the check sees that claim
--    (its claim marks), not the cursor board, which it updates only at commit: no work.
SELECT cardinality(awa.insert_jobs('wc_q', ARRAY['d', 'e'])) AS enqueued;
BEGIN;
SELECT count(*) AS claimed FROM awa.claim_ready_runtime('wc_q', 10);
SELECT awa.wait_for_jobs('wc_q', 0) AS work;
COMMIT;
SELECT awa.wait_for_jobs('wc_q', 0) AS work;
