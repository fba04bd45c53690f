-- retention: how long finished jobs stay visible is a per-queue setting
-- (awa.set_queue_retention; docs/operations.md "Retention"), not a side effect of the ring.
-- A queue with a retention keeps its completed (with their result), failed and cancelled
-- jobs past the prune of their ring slot: prune copies them once into a retention bucket of
-- done_entries that expires after them, and a bucket past its expiry is truncated whole.
-- The default keeps today's behaviour: completed and cancelled jobs go with their ring slot,
-- failed ones are kept until retried or deleted. Expiry is driven by the clock argument of
-- awa._expire_retention, never by waiting.
-- Rings are global: run in a database of our own so other tests' rows do not interfere.
SELECT current_database() AS home \gset
CREATE DATABASE awa_retention;
ALTER DATABASE awa_retention SET awa_shard.maintenance = off;
\c awa_retention
SET client_min_messages = warning;
CREATE EXTENSION awa_shard;
RESET client_min_messages;
\set VERBOSITY terse
\i sql/err.psql
\i sql/prune_when_seen.psql

SELECT awa.create_queue(q) IS NOT NULL AS created FROM unnest(ARRAY['ret_keep', 'ret_default', 'ret_short']) q;
-- The default: NULL in awa.queues.
SELECT queue, completed_retention, failed_retention FROM awa.queues WHERE queue LIKE 'ret%' ORDER BY queue;

-- Bad input: 22023 naming the argument (negative, longer than max_interval_years), a
-- NULL or unknown queue as every queue setting; nothing is written.
SELECT pg_temp.err($$SELECT awa.set_queue_retention('ret_keep', '-1 second', NULL)$$) AS negative_completed;
SELECT pg_temp.err($$SELECT awa.set_queue_retention('ret_keep', NULL, '-1 day')$$) AS negative_failed;
SELECT pg_temp.err($$SELECT awa.set_queue_retention('ret_keep', '1000000 years', NULL)$$) AS long_completed;
SELECT pg_temp.err($$SELECT awa.set_queue_retention('ret_keep', NULL, '1000000 years')$$) AS long_failed;
SELECT pg_temp.err($$SELECT awa.set_queue_retention(NULL, '1 day', '1 day')$$) AS null_queue;
SELECT pg_temp.err($$SELECT awa.set_queue_retention('ret_nowhere', '1 day', '1 day')$$) AS unknown_queue;
SELECT count(*) AS settings_written FROM awa.queue_meta
 WHERE completed_retention IS NOT NULL OR failed_retention IS NOT NULL;

-- Admin only.
SET ROLE awa_worker;
SELECT pg_temp.err($$SELECT awa.set_queue_retention('ret_keep', '7 days', '30 days')$$) AS as_worker;
SET ROLE awa_producer;
SELECT pg_temp.err($$SELECT awa.set_queue_retention('ret_keep', '7 days', '30 days')$$) AS as_producer;
SELECT pg_temp.err($$SELECT awa.expire_retention()$$) AS expire_as_producer;
SET ROLE awa_admin;
SELECT awa.set_queue_retention('ret_keep', '7 days', '30 days');
SELECT awa.set_queue_retention('ret_short', '0 seconds', '0 seconds');
RESET ROLE;
SELECT queue, completed_retention, failed_retention FROM awa.queues WHERE queue LIKE 'ret%' ORDER BY queue;
-- NULL goes back to the default.
SELECT awa.set_queue_retention('ret_default', '1 day', NULL);
SELECT awa.set_queue_retention('ret_default', NULL, NULL);
SELECT queue, completed_retention, failed_retention FROM awa.queues WHERE queue = 'ret_default';

-- In each queue: a completed job with a result (and a unique key, held in `completed` by
-- the default mask), a failed one, a cancelled one, and a completed one that is deleted.
CREATE TEMP TABLE ret_jobs (queue text, what text, id bigint);
INSERT INTO ret_jobs
SELECT q, w, (awa.insert_job_compat('ret', q, jsonb_build_object('what', w), p_max_attempts => 1,
                                    p_unique_key => CASE WHEN w = 'completed' THEN convert_to(q, 'UTF8') END)).id
  FROM unnest(ARRAY['ret_keep', 'ret_default', 'ret_short']) q,
       unnest(ARRAY['completed', 'failed', 'deleted', 'cancelled']) WITH ORDINALITY w(w, n)
 ORDER BY q, n;
SELECT count(*) AS cancelled FROM ret_jobs WHERE what = 'cancelled' AND awa.cancel_job(id);
CREATE TEMP TABLE ret_claims AS
SELECT c.job_id, c.run_lease, j.queue, j.what
  FROM unnest(ARRAY['ret_keep', 'ret_default', 'ret_short']) q
 CROSS JOIN LATERAL awa.claim_ready_runtime(q, 10) c
  JOIN ret_jobs j ON j.id = c.job_id;
SELECT count(*) AS completed
  FROM awa.complete_jobs(ARRAY(SELECT job_id FROM ret_claims WHERE what IN ('completed', 'deleted') ORDER BY job_id),
                         ARRAY(SELECT run_lease FROM ret_claims WHERE what IN ('completed', 'deleted') ORDER BY job_id),
                         ARRAY(SELECT jsonb_build_object('done', queue) FROM ret_claims
                                WHERE what IN ('completed', 'deleted') ORDER BY job_id));
SELECT awa.fail_job(job_id, run_lease, 'boom ' || queue) AS failed FROM ret_claims WHERE what = 'failed' ORDER BY job_id;
SELECT j.queue, j.what, g.state, g.result, g.errors -> -1 ->> 'error' AS error
  FROM ret_jobs j LEFT JOIN LATERAL awa.get_job(j.id) g ON true ORDER BY j.queue, j.id;

-- Rotate and prune the slot: a queue's retained jobs are copied once and their originals
-- deleted (the slot is 'moved', then truncated once no snapshot needs it).
SELECT awa.rotate_queue_ring() AS rotate;
SELECT awa.prune_queue_ring() AS prune_copies;
CALL pg_temp.prune_when_seen(NULL); -- prune_frees
SELECT count(*) AS live_ring_slots FROM awa.queue_ring_slots WHERE generation >= 0;
-- ret_keep: every finished job found, completed with its result, failed with its error
-- (failed and cancelled kept 30 days); ret_default: the failed job only (kept as before);
-- ret_short: nothing (a retention shorter than the ring copies nothing).
SELECT j.queue, j.what, g.state, g.kind, g.args ->> 'what' AS args, g.result, g.errors -> -1 ->> 'error' AS error
  FROM ret_jobs j LEFT JOIN LATERAL awa.get_job(j.id) g ON true ORDER BY j.queue, j.id;
SELECT j.queue, j.what, g.state, g.result FROM ret_jobs j
  JOIN LATERAL awa.get_job(j.queue, j.id) g ON true WHERE j.queue = 'ret_keep' ORDER BY j.id;
SELECT array_position(ARRAY(SELECT id FROM ret_jobs WHERE queue = 'ret_keep' ORDER BY id), id) AS n, state, result
  FROM awa.list_jobs('ret_keep') ORDER BY id;
SELECT state, count(*) FROM awa.jobs WHERE queue = 'ret_keep' GROUP BY state ORDER BY state;
SELECT completed, failed, cancelled FROM awa.queue_counts_exact('ret_keep');
SELECT queue, completed, failed, cancelled FROM awa.queues WHERE queue LIKE 'ret%' ORDER BY queue;
-- Where they live: two buckets (the completed jobs', the failed and cancelled ones'), each
-- expiring after its rows' retention and less than a quarter of it later; the default's
-- failed job in the retained partition (-1).
SELECT d.queue, d.state, d.ready_slot <= -2 AS in_bucket, d.ready_slot = -1 AS kept,
       b.expires_at >= d.finalized_at + r.retention AS not_before_retention,
       b.expires_at < d.finalized_at + r.retention * 1.25 AS within_a_quarter
  FROM awa.done_entries d
  LEFT JOIN awa.retention_buckets b ON -2 - b.bucket = d.ready_slot
  LEFT JOIN LATERAL (SELECT CASE WHEN d.state = 'completed' THEN m.completed_retention ELSE m.failed_retention END
                       FROM awa.queue_meta m WHERE m.queue = d.queue) r(retention) ON true
 WHERE d.queue LIKE 'ret%' ORDER BY d.queue, d.job_id;
SELECT count(*) AS buckets_in_use FROM awa.retention_buckets WHERE expires_at IS NOT NULL;
-- Copied once: the ring slot they came from holds nothing of them; ready rows of the
-- retained completions went with them.
SELECT count(*) AS left_in_ring FROM awa.done_entries WHERE queue LIKE 'ret%' AND ready_slot >= 0;
SELECT count(*) AS batches_left FROM awa.completion_batches WHERE queue LIKE 'ret%';
SELECT count(*) AS ready_left FROM awa.ready_entries WHERE queue LIKE 'ret%';
-- The retained completed job keeps its unique key; the others' keys went at prune.
SELECT convert_from(unique_key, 'UTF8') AS held_key FROM awa.job_unique_claims ORDER BY 1;
-- A retained job can be deleted (and a failed one retried) as before.
SELECT awa.delete_job(id) AS deleted FROM ret_jobs WHERE queue = 'ret_keep' AND what = 'deleted';
SELECT count(*) AS found_after_delete FROM ret_jobs j, awa.get_job(j.id) g WHERE j.what = 'deleted';

-- Expiry: nothing before a bucket's deadline (6 days on); the completed jobs' bucket after
-- it (9 days on), one bucket per call; the failed and cancelled after theirs (40 days on).
SELECT awa.expire_retention() AS now_expires;
-- Expiry reads the bucket's jobs to drop their unique claims before it truncates the bucket:
-- a REPEATABLE READ snapshot could miss rows a prune committed there since, and leave their
-- claims behind, so it runs in READ COMMITTED only (0A000 otherwise).
BEGIN ISOLATION LEVEL REPEATABLE READ;
SELECT pg_temp.err($$SELECT awa.expire_retention()$$) AS expire_in_repeatable_read;
ROLLBACK;
SELECT awa._expire_retention(now() + interval '6 days', 1000) AS after_6_days;
SELECT awa._expire_retention(now() + interval '9 days', 1000) AS after_9_days,
       awa._expire_retention(now() + interval '9 days', 1000) AS again;
SELECT j.queue, j.what, g.state FROM ret_jobs j JOIN LATERAL awa.get_job(j.id) g ON true ORDER BY j.queue, j.id;
SELECT convert_from(unique_key, 'UTF8') AS held_key FROM awa.job_unique_claims ORDER BY 1;
SELECT awa._expire_retention(now() + interval '40 days', 1000) AS after_40_days,
       awa._expire_retention(now() + interval '40 days', 1000) AS again;
SELECT j.queue, j.what, g.state FROM ret_jobs j JOIN LATERAL awa.get_job(j.id) g ON true ORDER BY j.queue, j.id;
-- The storage is freed whole: no bucket in use, no row, no page in any bucket partition.
SELECT count(*) AS buckets_in_use FROM awa.retention_buckets WHERE expires_at IS NOT NULL;
SELECT count(*) AS bucket_rows FROM awa.done_entries WHERE ready_slot <= -2;
SELECT sum(pg_relation_size(format('awa.%I', 'done_entries_expiring_' || b)::regclass)) AS bucket_bytes
  FROM generate_series(0, 15) b;
SELECT count(*) AS bucket_partitions FROM pg_inherits i
 WHERE i.inhparent = 'awa.done_entries'::regclass AND i.inhrelid::regclass::text LIKE 'awa.done_entries_expiring_%';

-- The deadline of a row: at or after its expiry, less than a quarter of the retention (at
-- least 64 s) later, whatever the retention.
SELECT bool_and(awa._retention_deadline(t, r, t) >= t + r) AS not_before_expiry,
       bool_and(awa._retention_deadline(t, r, t) < t + r + greatest(r / 4, interval '64 seconds')) AS within_bound,
       bool_and(awa._retention_deadline(t, r, t + r) IS NULL) AS expired_is_not_kept
  FROM unnest(ARRAY['1 second', '10 minutes', '1 hour', '1 day', '7 days', '30 days', '1 year']::interval[]) r,
       unnest(ARRAY['2026-01-01 00:00:00+00', '2026-06-30 13:27:41.123456+00']::timestamptz[]) t;
-- Choosing a bucket: one deadline, one bucket; when all 16 are in use, a later deadline's
-- rows go to the bucket that expires next after it, and past the latest one that bucket's
-- expiry moves out to them (never earlier than a row's deadline).
BEGIN;
SELECT count(DISTINCT awa._retention_bucket(now() + make_interval(days => d))) AS buckets_filled
  FROM generate_series(1, 16) d;
SELECT awa._retention_bucket(now() + interval '3 days') = (SELECT -2 - bucket FROM awa.retention_buckets
                                                            WHERE expires_at = now() + interval '3 days') AS same_deadline_same_bucket;
SELECT awa._retention_bucket(now() + interval '3 days 12 hours') = (SELECT -2 - bucket FROM awa.retention_buckets
                                                                     WHERE expires_at = now() + interval '4 days') AS next_later_bucket;
SELECT (SELECT -2 - bucket FROM awa.retention_buckets WHERE expires_at = now() + interval '16 days') AS latest \gset
SELECT awa._retention_bucket(now() + interval '20 days') = :latest AS latest_bucket;
SELECT expires_at = now() + interval '20 days' AS moved_out FROM awa.retention_buckets WHERE -2 - bucket = :latest;
ROLLBACK;

-- Maintenance runs it: awa.run_maintenance reports 'retention' (expired, none expired,
-- skipped_locked, or deferred when a prune of the same pass took its locks).
SELECT awa.run_maintenance() ->> 'retention' IN ('expired', 'skipped_none_expired', 'skipped_locked', 'deferred')
       AS maintenance_reports_retention;

\c :home
DROP DATABASE awa_retention;
