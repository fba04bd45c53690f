-- promote_bounded: promotion reads the due jobs, not the ones still to come. The time it
-- compares run_at with is read once and bound as a parameter: compared with clock_timestamp()
-- itself (volatile), run_at was never an index bound, and every promotion read every
-- scheduled job not yet due (in the background pass, awa.promote_due; and in a claim of a
-- queue that no maintenance worker serves, the queue's own probe and move). Counted here:
-- the rows of awa.deferred_jobs read (by sequential scans, and index entries by index scans)
-- while 5,000 jobs wait for tomorrow and 10 are due.
-- Run in a database of our own so that other tests' scheduled jobs are not counted.
SELECT current_database() AS home \gset
CREATE DATABASE awa_promote_bounded;
ALTER DATABASE awa_promote_bounded SET awa_shard.maintenance = off;
\c awa_promote_bounded
SET client_min_messages = warning;
CREATE EXTENSION awa_shard;
RESET client_min_messages;
\set ECHO none
\i sql/buffers_of.psql
\set ECHO all
SELECT pg_temp.set_autovacuum('deferred\_jobs', false) AS deferred_quiet;
-- Rows of awa.deferred_jobs read so far (statistics flushed by the previous statement).
CREATE FUNCTION pg_temp.deferred_rows_read() RETURNS bigint LANGUAGE sql AS $$
    SELECT (SELECT coalesce(sum(seq_tup_read), 0) FROM pg_stat_user_tables
             WHERE schemaname = 'awa' AND relname = 'deferred_jobs')
         + (SELECT coalesce(sum(idx_tup_read), 0) FROM pg_stat_user_indexes
             WHERE schemaname = 'awa' AND relname = 'deferred_jobs')
$$;
SELECT awa.create_queue('pb_later') AS created_later, awa.create_queue('pb_due') AS created_due;
SELECT cardinality(awa.insert_jobs('pb_later', array_fill('later'::text, ARRAY[5000]),
                                   p_run_ats => array_fill(now() + interval '1 day', ARRAY[5000]))) AS scheduled_later;
SELECT cardinality(awa.insert_jobs('pb_due', array_fill('due'::text, ARRAY[10]),
                                   p_run_ats => array_fill(clock_timestamp() + interval '1 second', ARRAY[10]))) AS scheduled_due;
-- Statistics as autovacuum would leave them (it is off for the table here).
ANALYZE awa.deferred_jobs;
SELECT pg_sleep(1.2);
-- 1. The background pass's promotion: the 10 due jobs, and not the 5,000 others.
SELECT pg_stat_force_next_flush();
SELECT pg_temp.deferred_rows_read() AS r0 \gset
SELECT awa.promote_due() AS promoted;
SELECT pg_stat_force_next_flush();
SELECT pg_temp.deferred_rows_read() - :r0 AS pass_rows_read \gset
SELECT :pass_rows_read < 1000 AS pass_reads_due_jobs_only;
-- 2. A claim of a queue nobody serves promotes it first: its probe finds nothing due among the
-- 5,000 without reading them.
SELECT pg_stat_force_next_flush();
SELECT pg_temp.deferred_rows_read() AS r1 \gset
SELECT count(*) AS claimed_later FROM awa.claim_ready_runtime('pb_later', 10);
SELECT pg_stat_force_next_flush();
SELECT pg_temp.deferred_rows_read() - :r1 AS claim_rows_read \gset
SELECT :claim_rows_read < 1000 AS claim_probe_reads_due_jobs_only;
SELECT state, count(*) FROM awa.jobs WHERE queue IN ('pb_later', 'pb_due') GROUP BY 1 ORDER BY 1;
\c :home
DROP DATABASE awa_promote_bounded;
