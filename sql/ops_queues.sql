-- ops_queues (1.1): queues as objects (create, pause and resume, purge, drop, the
-- awa.queues view), the unknown-queue rule, the cheap depth, look-ups (get_job, list_jobs,
-- awa.jobs showing {} and []), dead-lettering of exhausted jobs, one kind for a whole batch,
-- and keyless batches spread over the shards.
\set VERBOSITY terse
\i sql/sqlstate_of.psql
CREATE TEMP TABLE q_saved AS SELECT receipts, dlq_enabled_by_default FROM awa.plane_settings;
UPDATE awa.plane_settings SET receipts = true;

-- 1. create_queue: true when it creates, false when the queue has these settings, 42710 otherwise.
SELECT awa.create_queue('q_mail', 4) AS created, awa.create_queue('q_mail', 4) AS again;
SELECT pg_temp.sqlstate_of($$SELECT awa.create_queue('q_mail', 2)$$) AS other_width;
SELECT queue, enqueue_shards, paused, dlq_enabled, depth, available, scheduled, retryable, running, completed, failed,
       cancelled, dlq, oldest_waiting_age
  FROM awa.queues WHERE queue = 'q_mail';

-- 2. Unknown names: admin calls raise 42704 and create nothing; producers create a queue
-- implicitly (as in 1.0); a queue so created can be paused and is listed.
SELECT pg_temp.sqlstate_of($$SELECT awa.pause_queue('q_mial')$$) AS typo;
SELECT pg_temp.sqlstate_of(format('SELECT awa.%s(%L)', f, 'q_mial')) AS typo
  FROM unnest(ARRAY['resume_queue', 'purge_queue', 'drop_queue', 'queue_depth', 'list_jobs']) f;
SELECT count(*) AS typo_rows FROM awa.queue_meta WHERE queue = 'q_mial';
SELECT kind, queue, state, priority FROM awa.insert_job_compat('send', 'q_implicit', '{"to": "a@b"}', p_priority => 1);
SELECT queue, enqueue_shards, paused, depth, available, oldest_waiting_age IS NOT NULL AS has_age
  FROM awa.queues WHERE queue = 'q_implicit';
SELECT awa.pause_queue('q_implicit') AS paused, awa.pause_queue('q_implicit') AS paused_again;
SELECT queue, paused FROM awa.queues WHERE queue = 'q_implicit';
SELECT count(*) AS claimed_while_paused FROM awa.claim_ready_runtime('q_implicit', 10);
SELECT awa.resume_queue('q_implicit') AS resumed, awa.resume_queue('q_implicit') AS resumed_again;

-- 3. Look-ups: get_job returns what insert_job_compat returned (metadata {}, tags {}, errors []),
-- then follows the job through its states; awa.jobs shows {} and [] too; unknown ids give no row.
CREATE TEMP TABLE q_one AS SELECT * FROM awa.insert_job_compat('send', 'q_mail', '{"to": "a@b"}', p_priority => 1);
SELECT (SELECT ROW(o.*)::text FROM q_one o) = (SELECT ROW(g.*)::text FROM awa.get_job((SELECT id FROM q_one)) g) AS same_as_insert;
SELECT state, metadata, tags, errors FROM awa.get_job((SELECT id FROM q_one));
SELECT state, metadata, tags, errors FROM awa.jobs WHERE id = (SELECT id FROM q_one);
SELECT count(*) AS other_queue FROM awa.get_job('q_implicit', (SELECT id FROM q_one));
SELECT count(*) AS unknown_id FROM awa.get_job(-1);
CREATE TEMP TABLE q_claim AS SELECT job_id, run_lease FROM awa.claim_ready_runtime('q_mail', 10);
SELECT state, attempt FROM awa.get_job('q_mail', (SELECT id FROM q_one));
SELECT awa.fail_job(job_id, run_lease, 'boom', interval '1 hour') AS failed FROM q_claim;
SELECT state, attempt, errors->0->>'error' AS error FROM awa.get_job((SELECT id FROM q_one));
SELECT count(*) AS with_null_bodies FROM awa.jobs WHERE metadata IS NULL OR tags IS NULL OR errors IS NULL;

-- 4. list_jobs: one queue, optionally one state, oldest id first, at most p_limit.
SELECT cardinality(awa.insert_jobs('q_list', ARRAY['a', 'b', 'c', 'd'],
                                   p_run_ats => ARRAY[NULL, now() + interval '1 day', NULL, NULL])) AS enqueued;
SELECT kind, state FROM awa.list_jobs('q_list');
SELECT kind, state FROM awa.list_jobs('q_list', 'available', 2);
SELECT kind, state FROM awa.list_jobs('q_list', 'scheduled');
SELECT count(*) AS none_completed FROM awa.list_jobs('q_list', 'completed');

-- 5. The cheap depth: lane positions not yet claimed, no scan. Equal to the waiting jobs
-- here; an upper bound once a waiting job is removed (cancel leaves a gap until a claim passes it).
SELECT awa.set_enqueue_shards('q_depth', 4) AS previous_width;
SELECT cardinality(awa.insert_jobs('q_depth', ARRAY['k'], p_args => (SELECT array_agg(jsonb_build_object('n', n)) FROM generate_series(1, 6) n),
                                   p_ordering_keys => (SELECT array_agg(convert_to('key-' || n, 'UTF8')) FROM generate_series(1, 6) n))) AS enqueued;
SELECT awa.queue_depth('q_depth') AS depth, (SELECT available FROM awa.queue_counts_exact('q_depth')) AS available,
       (SELECT sum(lag) FROM awa.shard_lag WHERE queue = 'q_depth') AS shard_lag;
SELECT awa.cancel_job((SELECT max(id) FROM awa.jobs WHERE queue = 'q_depth')) AS cancelled;
SELECT awa.queue_depth('q_depth') AS depth_upper_bound, (SELECT available FROM awa.queue_counts_exact('q_depth')) AS available;
SELECT depth, available FROM awa.queues WHERE queue = 'q_depth';
SELECT awa.queue_depth('q_list') AS scheduled_not_counted;

-- 6. purge_queue: waiting, scheduled and retryable jobs go (their count is returned);
-- a running attempt finishes normally; dead letters stay; unique keys are released; the
-- cursors move past the removed rows, so the depth drops to 0; new jobs are claimed.
SELECT awa.create_queue('q_purge', 2) AS created;
SELECT count(*) AS keyed FROM awa.insert_job_compat('run', 'q_purge', p_ordering_key => 'shard-fixture-1'::bytea);
CREATE TEMP TABLE q_purge_run AS SELECT job_id, run_lease FROM awa.claim_ready_runtime('q_purge', 1);
SELECT count(*) AS poison FROM awa.insert_job_compat('poison', 'q_purge', p_ordering_key => 'shard-fixture-0'::bytea);
SELECT awa.fail_job_to_dlq(job_id, run_lease, 'bad') AS dead_lettered FROM awa.claim_ready_runtime('q_purge', 1);
SELECT cardinality(awa.insert_jobs('q_purge', ARRAY['wait'], p_args => (SELECT array_agg(jsonb_build_object('n', n)) FROM generate_series(1, 5) n),
                                   p_ordering_keys => (SELECT array_agg(CASE WHEN n % 2 = 0 THEN 'shard-fixture-0' ELSE 'shard-fixture-1' END::bytea)
                                                         FROM generate_series(1, 5) n),
                                   p_unique_keys => ARRAY['\x01'::bytea, NULL, NULL, NULL, NULL])) AS waiting;
SELECT count(*) AS scheduled FROM awa.insert_job_compat('later', 'q_purge', p_run_at => now() + interval '1 day');
SELECT available, scheduled, running, dlq FROM awa.queue_counts_exact('q_purge');
SELECT awa.queue_depth('q_purge') AS depth_before;
SELECT awa.purge_queue('q_purge') AS purged;
SELECT available, scheduled, retryable, running, dlq FROM awa.queue_counts_exact('q_purge');
SELECT awa.queue_depth('q_purge') AS depth_after, (SELECT sum(lag) FROM awa.shard_lag WHERE queue = 'q_purge') AS lag_after;
SELECT count(*) AS claimed_after_purge FROM awa.claim_ready_runtime('q_purge', 10);
SELECT count(*) AS completed_running FROM q_purge_run r, LATERAL awa.complete_jobs(ARRAY[r.job_id], ARRAY[r.run_lease]);
SELECT count(*) AS unique_key_free FROM awa.insert_job_compat('again', 'q_purge', p_unique_key => '\x01'::bytea);
CREATE TEMP TABLE q_again AS SELECT job_id, run_lease, kind, lane_seq > 1 AS after_the_purged FROM awa.claim_ready_runtime('q_purge', 10);
SELECT kind, after_the_purged FROM q_again;
SELECT count(*) AS completed FROM q_again a, LATERAL awa.complete_jobs(ARRAY[a.job_id], ARRAY[a.run_lease]);
SELECT awa.purge_queue('q_purge') AS purged_again;

-- 7. drop_queue: refuses a queue with live jobs (55000) unless forced; removes lanes,
-- sequences, settings and every row; the name is then unknown; an enqueue creates it afresh.
SELECT pg_temp.sqlstate_of($$SELECT awa.drop_queue('q_purge')$$) AS not_empty;
SELECT awa.delete_job(job_id) AS deleted FROM awa.dlq_entries WHERE queue = 'q_purge';
SELECT awa.drop_queue('q_purge') AS dropped_jobs;
SELECT (SELECT count(*) FROM awa.queues WHERE queue = 'q_purge') AS listed,
       (SELECT count(*) FROM awa.queue_enqueue_heads WHERE queue = 'q_purge') AS lanes,
       (SELECT count(*) FROM awa.queue_claim_heads WHERE queue = 'q_purge') AS claim_heads,
       (SELECT count(*) FROM awa.ready_entries WHERE queue = 'q_purge') AS ready_rows,
       (SELECT count(*) FROM awa._terminal_attempts WHERE queue = 'q_purge') AS done_rows,
       (SELECT count(*) FROM pg_class WHERE relname IN (awa.lane_sequence_name('q_purge', 2, 0),
                                                        awa.lane_sequence_name('q_purge', 2, 1))) AS sequences,
       (SELECT count(*) FROM awa.queue_meta WHERE queue = 'q_purge') AS settings;
SELECT pg_temp.sqlstate_of($$SELECT awa.pause_queue('q_purge')$$) AS pause_dropped;
SELECT enqueue_shard, lane_seq FROM awa.insert_job_compat('fresh', 'q_purge');
SELECT kind, lane_seq FROM awa.claim_ready_runtime('q_purge', 10);
-- Forced: waiting, scheduled, running and dead-lettered jobs go; the running attempt's
-- completion then finds nothing; unique claims are released.
SELECT awa.create_queue('q_force', 2) AS created;
SELECT count(*) AS run FROM awa.insert_job_compat('run', 'q_force', p_unique_key => '\x02'::bytea);
CREATE TEMP TABLE q_force_run AS SELECT job_id, run_lease FROM awa.claim_ready_runtime('q_force', 1);
SELECT count(*) AS waiting FROM awa.insert_job_compat('wait', 'q_force', p_unique_key => '\x03'::bytea);
SELECT count(*) AS scheduled FROM awa.insert_job_compat('later', 'q_force', p_run_at => now() + interval '1 day');
SELECT pg_temp.sqlstate_of($$SELECT awa.drop_queue('q_force')$$) AS not_empty;
SELECT awa.drop_queue('q_force', p_force => true) AS dropped_jobs;
SELECT count(*) AS late_completion FROM q_force_run r, LATERAL awa.complete_jobs(ARRAY[r.job_id], ARRAY[r.run_lease]);
SELECT count(*) AS jobs_left FROM awa.jobs WHERE queue = 'q_force';
SELECT count(*) AS claims_left FROM awa.job_unique_claims WHERE unique_key IN ('\x02'::bytea, '\x03'::bytea);
SELECT awa.prune_attempt_ring('claim') IS NOT NULL AS claim_ring_prunable;
-- Purge and drop decide on the latest state: not inside REPEATABLE READ, with a hint about
-- the isolation level (not the maintenance hint of the ring functions).
\set VERBOSITY default
BEGIN ISOLATION LEVEL REPEATABLE READ;
SELECT awa.purge_queue('q_mail');
ROLLBACK;
BEGIN ISOLATION LEVEL REPEATABLE READ;
SELECT awa.drop_queue('q_mail');
ROLLBACK;
\set VERBOSITY terse

-- 8. Exhausted jobs to the DLQ: off by default; per queue (create_queue, set_queue_dlq) or
-- for the install (plane_settings.dlq_enabled_by_default); fail_job and rescue alike.
SELECT awa.create_queue('q_dlq', 1, true) AS created;
SELECT count(*) FROM awa.insert_job_compat('last', 'q_dlq', p_max_attempts => 1);
SELECT awa.fail_job(job_id, run_lease, 'exhausted') AS state FROM awa.claim_ready_runtime('q_dlq', 1);
SELECT kind, dlq_reason, attempt, errors->-1->>'error' AS error, errors->-1->>'terminal' AS terminal FROM awa.list_dlq('q_dlq');
SELECT state FROM awa.list_jobs('q_dlq');
SELECT count(*) AS failed_terminal_rows FROM awa.done_entries WHERE queue = 'q_dlq';
SELECT queue, dlq_enabled, dlq, failed FROM awa.queues WHERE queue = 'q_dlq';
-- The override off: failed terminal row as before.
SELECT awa.set_queue_dlq('q_dlq', false) AS previous;
SELECT count(*) FROM awa.insert_job_compat('last2', 'q_dlq', p_max_attempts => 1);
SELECT awa.fail_job(job_id, run_lease) AS state FROM awa.claim_ready_runtime('q_dlq', 1);
SELECT kind, state FROM awa.list_jobs('q_dlq') ORDER BY kind;
-- The install default, for a queue without an override; a retryable failure is unaffected.
UPDATE awa.plane_settings SET dlq_enabled_by_default = true;
SELECT awa.set_queue_dlq('q_dlq', NULL) AS previous;
SELECT count(*) FROM awa.insert_job_compat('twice', 'q_dlq', p_max_attempts => 2);
SELECT awa.fail_job(job_id, run_lease) AS state FROM awa.claim_ready_runtime('q_dlq', 1);
SELECT count(*) AS dead_letters FROM awa.list_dlq('q_dlq');
-- Rescue of a last attempt (heartbeat gone stale) dead-letters too.
SELECT count(*) FROM awa.insert_job_compat('lost', 'q_dlq_rescue', p_max_attempts => 1);
SELECT count(*) AS claimed FROM awa.claim_ready_runtime('q_dlq_rescue', 1);
SELECT pg_sleep(0.05);
SELECT awa.rescue_stale_heartbeats(interval '10 milliseconds', 100) >= 1 AS rescued;
SELECT kind, dlq_reason, errors->-1->>'error' AS error FROM awa.list_dlq('q_dlq_rescue');
UPDATE awa.plane_settings SET dlq_enabled_by_default = (SELECT dlq_enabled_by_default FROM q_saved);
SELECT awa.set_queue_dlq('q_typo_dlq', true);

-- 9. One kind for a whole batch: the batch has as many jobs as the first array given.
SELECT cardinality(awa.insert_jobs('q_batch', ARRAY['same'], p_args => ARRAY['{"n": 1}', '{"n": 2}', '{"n": 3}']::jsonb[],
                                   p_priorities => ARRAY[1, 2, 3])) AS jobs;
SELECT kind, args->>'n' AS n, priority FROM awa.jobs WHERE queue = 'q_batch' ORDER BY id;
SELECT cardinality(awa.insert_jobs('q_batch', ARRAY['alone'])) AS one_job;
SELECT pg_temp.sqlstate_of($$SELECT awa.insert_jobs('q_batch', ARRAY['x'], p_args => ARRAY['{}', '{}']::jsonb[], p_priorities => ARRAY[1])$$) AS mismatch;
SELECT pg_temp.sqlstate_of($$SELECT awa.insert_jobs('q_batch', ARRAY['x', 'y'], p_args => ARRAY['{}']::jsonb[])$$) AS two_kinds;
SELECT pg_temp.sqlstate_of($$SELECT awa.insert_jobs('q_batch', ARRAY[NULL]::text[], p_args => ARRAY['{}', '{}']::jsonb[])$$) AS null_kind;

-- 10. Keyless batches: one rotor pick by default (one shard); with p_spread_keyless, one run
-- of consecutive jobs per shard (input order kept inside each), starting at the rotor pick.
-- Keyed jobs keep their key's shard; scheduled jobs are routed when promoted.
SELECT awa.create_queue('q_spread', 4) AS created;
SELECT cardinality(awa.insert_jobs('q_spread', ARRAY['one_pick'], p_args => (SELECT array_agg(jsonb_build_object('n', n)) FROM generate_series(1, 8) n))) AS jobs;
SELECT count(DISTINCT enqueue_shard) AS shards_used FROM awa.jobs WHERE queue = 'q_spread' AND kind = 'one_pick';
SELECT cardinality(awa.insert_jobs('q_spread', ARRAY['spread'], p_args => (SELECT array_agg(jsonb_build_object('n', n)) FROM generate_series(1, 8) n),
                                   p_spread_keyless => true)) AS jobs;
WITH s AS (SELECT (args->>'n')::int AS n, enqueue_shard, lane_seq FROM awa.jobs WHERE queue = 'q_spread' AND kind = 'spread'),
     first AS (SELECT enqueue_shard AS start FROM s WHERE n = 1)
SELECT (s.enqueue_shard - first.start + 4) % 4 AS run, array_agg(s.n ORDER BY s.lane_seq) AS jobs_in_lane_order
  FROM s, first GROUP BY 1 ORDER BY 1;
SELECT cardinality(awa.insert_jobs('q_spread', ARRAY['small'], p_args => ARRAY['{}', '{}', '{}']::jsonb[], p_spread_keyless => true)) AS jobs;
SELECT count(DISTINCT enqueue_shard) AS shards_for_three FROM awa.jobs WHERE queue = 'q_spread' AND kind = 'small';
SELECT cardinality(awa.insert_jobs('q_spread', ARRAY['mixed'], p_args => ARRAY['{}', '{}', '{}', '{}']::jsonb[],
                                   p_ordering_keys => ARRAY['shard-fixture-3'::bytea, NULL, 'shard-fixture-3', NULL],
                                   p_run_ats => ARRAY[NULL, NULL, NULL, now() + interval '1 day'],
                                   p_spread_keyless => true)) AS jobs;
SELECT state, count(*), count(*) FILTER (WHERE enqueue_shard = 3 AND ordering_key IS NOT NULL) AS keyed_on_key_shard
  FROM awa.jobs WHERE queue = 'q_spread' AND kind = 'mixed' GROUP BY state ORDER BY state;
SELECT cardinality(awa.insert_jobs('q_batch', ARRAY['narrow'], p_args => ARRAY['{}', '{}']::jsonb[], p_spread_keyless => true)) AS s1_jobs;
SELECT DISTINCT enqueue_shard AS s1_shard FROM awa.jobs WHERE queue = 'q_batch' AND kind = 'narrow';

-- A queue dropped and created again numbers its lanes from 1, so its first job has the lane
-- identity of the old queue's first job. The old job was completed (its receipt ended by its
-- terminal row, which the drop removed): it must not come back as running, a stale repeat of
-- its completion must complete nothing, and the new job runs and completes normally.
SELECT awa.create_queue('q_reuse') AS created;
SELECT id AS reuse_old FROM awa.insert_job_compat('old', 'q_reuse') \gset
SELECT count(*) AS old_claimed FROM awa.claim_ready_runtime('q_reuse', 1);
SELECT count(*) AS old_completed FROM awa.complete_jobs(ARRAY[:reuse_old]::bigint[], ARRAY[1]::bigint[]);
SELECT awa.drop_queue('q_reuse') >= 0 AS dropped, awa.create_queue('q_reuse') AS created_again;
SELECT id AS reuse_new FROM awa.insert_job_compat('new', 'q_reuse') \gset
SELECT id = :reuse_new AS is_new_job, kind, state FROM awa.jobs WHERE queue = 'q_reuse' ORDER BY id;
SELECT count(*) AS stale_repeat FROM awa.complete_jobs(ARRAY[:reuse_old]::bigint[], ARRAY[1]::bigint[]);
SELECT available, running, completed FROM awa.queue_counts_exact('q_reuse');
SELECT awa.rescue_stale_heartbeats('1 microsecond') AS rescued_old;
SELECT count(*) AS new_claimed FROM awa.claim_ready_runtime('q_reuse', 1);
SELECT count(*) AS new_completed FROM awa.complete_jobs(ARRAY[:reuse_new]::bigint[], ARRAY[1]::bigint[]);
SELECT id = :reuse_new AS is_new_job, state FROM awa.jobs WHERE queue = 'q_reuse' ORDER BY id;
SELECT awa.drop_queue('q_reuse') >= 0 AS dropped;

UPDATE awa.plane_settings SET receipts = (SELECT receipts FROM q_saved);
