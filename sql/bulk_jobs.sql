-- bulk_jobs: awa.cancel_jobs and awa.retry_jobs act on many jobs of a queue by the rules of
-- cancel_job and retry_from_dlq (docs/api.md "Bulk operations"), at most p_limit a call,
-- and return how many they changed.
-- It calls each queue's functions alone in their statements so that it runs through a Citus
-- coordinator too.
\set VERBOSITY terse
\i sql/err.psql
SELECT awa.create_queue('bulk_q', 2) IS NOT NULL AS created;
SELECT awa.set_queue_dlq('bulk_q', false) IS NOT NULL AS dlq_off;

-- Live jobs of two kinds in every live state: waiting, scheduled, running.
SELECT coalesce(cardinality(ids), 0) AS enqueued FROM awa.insert_jobs('bulk_q',
    ARRAY['odd', 'even', 'odd', 'even', 'odd', 'even', 'odd', 'even', 'odd', 'even'],
    ARRAY['{"g": 1}', '{"g": 2}', '{"g": 3}', '{"g": 4}', '{"g": 5}',
          '{"g": 6}', '{"g": 7}', '{"g": 8}', '{"g": 9}', '{"g": 10}']::jsonb[]) AS ids;
SELECT clock_timestamp() + interval '1 hour' AS later \gset
SELECT coalesce(cardinality(ids), 0) AS scheduled FROM awa.insert_jobs('bulk_q', ARRAY['odd', 'odd', 'odd'],
    p_run_ats => array_fill(:'later'::timestamptz, ARRAY[3])) AS ids;
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
SELECT awa.cancel_jobs('bulk_q', 'even', p_limit => 2) AS chunk_1;
SELECT awa.cancel_jobs('bulk_q', 'even', p_limit => 2) AS chunk_2;
SELECT awa.cancel_jobs('bulk_q', 'even', p_limit => 2) AS chunk_3;
SELECT awa.cancel_jobs('bulk_q', 'even', p_limit => 2) AS chunk_4;
SELECT kind, state, count(*) FROM awa.list_jobs('bulk_q') GROUP BY 1, 2 ORDER BY 1, 2;
-- Everything live that is left, running attempts included.
SELECT awa.cancel_jobs('bulk_q') AS cancelled_rest;
SELECT awa.cancel_jobs('bulk_q') AS nothing_left;
SELECT state, count(*) FROM awa.list_jobs('bulk_q') GROUP BY 1 ORDER BY 1;

-- retry_jobs: failed terminal jobs and dead letters back to available, keyed jobs to their
-- key's shard, the jobs of one key in their order.
SELECT awa.create_queue('bulk_r', 4) IS NOT NULL AS created;
SELECT awa.insert_jobs('bulk_r', ARRAY['k', 'k', 'k'], ARRAY['{"n": 1}', '{"n": 2}', '{"n": 3}']::jsonb[],
                       p_max_attempts => ARRAY[1, 1, 1]::bigint[],
                       p_ordering_keys => array_fill(convert_to('acct-7', 'UTF8'), ARRAY[3])) AS keyed \gset
SELECT array_agg(id ORDER BY id) AS keyed FROM unnest(:'keyed'::bigint[]) id \gset
SELECT id AS keyless FROM awa.insert_job_compat('other', 'bulk_r', p_max_attempts => 1) \gset
SELECT count(*) AS claimed_1 FROM awa.claim_ready_runtime('bulk_r', 10) \gset
SELECT count(*) AS claimed_2 FROM awa.claim_ready_runtime('bulk_r', 10) \gset
SELECT count(*) AS claimed_3 FROM awa.claim_ready_runtime('bulk_r', 10) \gset
SELECT count(*) AS claimed_4 FROM awa.claim_ready_runtime('bulk_r', 10) \gset
SELECT :claimed_1 + :claimed_2 + :claimed_3 + :claimed_4 AS claimed;
-- Two keyed jobs fail (attempts exhausted: failed terminal rows), one is dead-lettered, the
-- keyless one fails too.
SELECT awa.fail_job((:'keyed'::bigint[])[1], 1, 'x', p_queue => 'bulk_r') AS f1;
SELECT awa.fail_job_to_dlq((:'keyed'::bigint[])[2], 1, 'y', p_queue => 'bulk_r') AS f2;
SELECT awa.fail_job((:'keyed'::bigint[])[3], 1, 'z', p_queue => 'bulk_r') AS f3;
SELECT awa.fail_job(:keyless, 1, 'w', p_queue => 'bulk_r') AS f4;
SELECT count(*) AS in_dlq FROM awa.dlq_entries WHERE queue = 'bulk_r';
SELECT awa.retry_jobs('bulk_r', 'k', p_limit => 2) AS chunk_1;
SELECT awa.retry_jobs('bulk_r', 'k', p_limit => 2) AS chunk_2;
SELECT awa.retry_jobs('bulk_r', 'k') AS nothing_left;
SELECT kind, state, attempt, count(*) FROM awa.list_jobs('bulk_r') GROUP BY 1, 2, 3 ORDER BY 1, 2, 3;
-- The key's jobs are back on its shard, in id order (the keyless one is failed: not claimed).
SELECT array_position(:'keyed'::bigint[], job_id) AS n,
       enqueue_shard = awa.shard_for_ordering_key(convert_to('acct-7', 'UTF8'), 4) AS key_shard
  FROM awa.claim_ready_runtime('bulk_r', 10) ORDER BY lane_seq;
SELECT awa.retry_jobs('bulk_r') AS keyless_retried;
SELECT kind, state, count(*) FROM awa.list_jobs('bulk_r') GROUP BY 1, 2 ORDER BY 1, 2;
-- Leave no unfolded claim marks for the tests that follow (claim_marks counts the heads it moves).
SELECT awa.fold_claim_marks() >= 0 AS folded;
SELECT awa.drop_queue('bulk_q', p_force => true);
SELECT awa.drop_queue('bulk_r', p_force => true);
