-- bulk_jobs: awa.cancel_jobs and awa.retry_jobs act on many jobs of a queue by the rules of
-- cancel_job and retry_from_dlq (docs/api.md "Bulk operations"), at most p_limit a call,
-- and return how many they changed.
\set VERBOSITY terse
\i sql/err.psql
SELECT awa.create_queue('bulk_q', 2) IS NOT NULL AS created;
SELECT awa.set_queue_dlq('bulk_q', false) IS NOT NULL AS dlq_off;

-- Live jobs of two kinds in every live state: waiting, scheduled, running.
SELECT count(*) AS enqueued FROM (
    SELECT awa.insert_job_compat(CASE WHEN g % 2 = 0 THEN 'even' ELSE 'odd' END, 'bulk_q', jsonb_build_object('g', g))
      FROM generate_series(1, 10) g) j;
SELECT count(*) AS scheduled FROM (
    SELECT awa.insert_job_compat('odd', 'bulk_q', p_run_at => clock_timestamp() + interval '1 hour')
      FROM generate_series(1, 3)) j;
SELECT count(*) AS claimed FROM awa.claim_ready_runtime('bulk_q', 2);
SELECT kind, state, count(*) FROM awa.list_jobs('bulk_q') GROUP BY 1, 2 ORDER BY 1, 2;

-- Bad input: checked before anything changes.
SELECT pg_temp.err($$SELECT awa.cancel_jobs('bulk_q', NULL, ARRAY['completed']::awa.job_state[])$$) AS terminal_state;
SELECT pg_temp.err($$SELECT awa.cancel_jobs('bulk_q', NULL, ARRAY[NULL]::awa.job_state[])$$) AS null_state;
SELECT pg_temp.err($$SELECT awa.cancel_jobs('bulk_q', p_limit => 0)$$) AS zero_limit,
       pg_temp.err($$SELECT awa.cancel_jobs('bulk_q', p_limit => NULL)$$) AS null_limit;
SELECT pg_temp.err($$SELECT awa.cancel_jobs(NULL)$$) AS null_queue,
       pg_temp.err($$SELECT awa.cancel_jobs('bulk_nowhere')$$) AS unknown_queue;
SELECT pg_temp.err($$SELECT awa.retry_jobs('bulk_q', p_limit => 10001)$$) AS big_limit,
       pg_temp.err($$SELECT awa.retry_jobs('bulk_nowhere')$$) AS unknown_queue;
SELECT count(*) FILTER (WHERE state = 'cancelled') AS cancelled_so_far FROM awa.list_jobs('bulk_q');

-- Only the scheduled ones; then only kind 'even', in chunks of 2 (each call at most p_limit).
SELECT awa.cancel_jobs('bulk_q', NULL, ARRAY['scheduled']::awa.job_state[]) AS cancelled_scheduled;
SELECT awa.cancel_jobs('bulk_q', 'even', p_limit => 2) AS chunk_1, awa.cancel_jobs('bulk_q', 'even', p_limit => 2) AS chunk_2,
       awa.cancel_jobs('bulk_q', 'even', p_limit => 2) AS chunk_3, awa.cancel_jobs('bulk_q', 'even', p_limit => 2) AS chunk_4;
SELECT kind, state, count(*) FROM awa.list_jobs('bulk_q') GROUP BY 1, 2 ORDER BY 1, 2;
-- Everything live that is left, running attempts included.
SELECT awa.cancel_jobs('bulk_q') AS cancelled_rest, awa.cancel_jobs('bulk_q') AS nothing_left;
SELECT state, count(*) FROM awa.list_jobs('bulk_q') GROUP BY 1 ORDER BY 1;

-- retry_jobs: failed terminal jobs and dead letters back to available, keyed jobs to their
-- key's shard, the jobs of one key in their order.
SELECT awa.create_queue('bulk_r', 4) IS NOT NULL AS created;
SELECT array_agg(id ORDER BY id) AS keyed FROM (
    SELECT (awa.insert_job_compat('k', 'bulk_r', jsonb_build_object('n', g), p_max_attempts => 1,
                                  p_ordering_key => convert_to('acct-7', 'UTF8'))).id
      FROM generate_series(1, 3) g) j \gset
SELECT id AS keyless FROM awa.insert_job_compat('other', 'bulk_r', p_max_attempts => 1) \gset
SELECT count(*) AS claimed FROM (
    SELECT awa.claim_ready_runtime('bulk_r', 10) FROM generate_series(1, 4)) c;
-- Two keyed jobs fail (attempts exhausted: failed terminal rows), one is dead-lettered, the
-- keyless one fails too.
SELECT awa.fail_job((:'keyed'::bigint[])[1], 1, 'x') AS f1, awa.fail_job_to_dlq((:'keyed'::bigint[])[2], 1, 'y') AS f2,
       awa.fail_job((:'keyed'::bigint[])[3], 1, 'z') AS f3, awa.fail_job(:keyless, 1, 'w') AS f4;
SELECT count(*) AS in_dlq FROM awa.dlq_entries WHERE queue = 'bulk_r';
SELECT awa.retry_jobs('bulk_r', 'k', p_limit => 2) AS chunk_1, awa.retry_jobs('bulk_r', 'k', p_limit => 2) AS chunk_2,
       awa.retry_jobs('bulk_r', 'k') AS nothing_left;
SELECT kind, state, attempt, count(*) FROM awa.list_jobs('bulk_r') GROUP BY 1, 2, 3 ORDER BY 1, 2, 3;
-- The key's jobs are back on its shard, in id order.
SELECT array_position(:'keyed'::bigint[], job_id) AS n,
       enqueue_shard = awa.shard_for_ordering_key(convert_to('acct-7', 'UTF8'), 4) AS key_shard
  FROM awa.claim_ready_runtime('bulk_r', 10) WHERE kind = 'k' ORDER BY lane_seq;
SELECT awa.retry_jobs('bulk_r') AS keyless_retried;
SELECT kind, state, count(*) FROM awa.list_jobs('bulk_r') GROUP BY 1, 2 ORDER BY 1, 2;
-- Leave no unfolded claim marks for the tests that follow (claim_marks counts the heads it moves).
SELECT awa.fold_claim_marks() >= 0 AS folded;
