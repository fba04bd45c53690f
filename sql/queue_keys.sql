-- queue_keys: every primary and unique key of a table holding job or attempt rows contains
-- the queue (a distributed engine places a queue's rows on one node by it); unique job keys
-- are per queue: the same key in two queues makes two jobs, twice in one queue one job.
\set VERBOSITY terse

-- pg_temp.err(sql): 'ok', or the SQLSTATE and message of the statement.
\set ECHO none
\i sql/err.psql
\set ECHO all

-- 1. The per-queue tables (a job_id or queue column; a schedule is not a job) and each of
-- their primary and unique keys, partitions included: all contain queue.
SELECT c.relname, i.indexrelid::regclass AS key, i.indisprimary AS primary_key,
       (SELECT string_agg(a.attname, ', ' ORDER BY k.ord) FROM unnest(i.indkey) WITH ORDINALITY AS k(attnum, ord)
          JOIN pg_catalog.pg_attribute a ON a.attrelid = c.oid AND a.attnum = k.attnum) AS columns
  FROM pg_catalog.pg_index i JOIN pg_catalog.pg_class c ON c.oid = i.indrelid
 WHERE c.relnamespace = 'awa'::regnamespace AND i.indisunique AND NOT c.relispartition
   AND c.relname <> 'cron_schedules'
   AND EXISTS (SELECT 1 FROM pg_catalog.pg_attribute a WHERE a.attrelid = c.oid AND a.attname IN ('job_id', 'queue'))
 ORDER BY 1, 2;
-- No key of any of them (partitions included) lacks queue.
SELECT count(*) AS keys_without_queue
  FROM pg_catalog.pg_index i JOIN pg_catalog.pg_class c ON c.oid = i.indrelid
 WHERE c.relnamespace = 'awa'::regnamespace AND i.indisunique AND c.relname <> 'cron_schedules'
   AND EXISTS (SELECT 1 FROM pg_catalog.pg_attribute a WHERE a.attrelid = c.oid AND a.attname IN ('job_id', 'queue'))
   AND NOT EXISTS (SELECT 1 FROM unnest(i.indkey) k JOIN pg_catalog.pg_attribute a
                    ON a.attrelid = c.oid AND a.attnum = k WHERE a.attname = 'queue');
-- The tables that had no queue column have one, never NULL.
SELECT c.relname, a.attnotnull
  FROM pg_catalog.pg_class c JOIN pg_catalog.pg_attribute a ON a.attrelid = c.oid AND a.attname = 'queue'
 WHERE c.oid IN ('awa.attempt_state'::regclass, 'awa.lease_claim_closures'::regclass, 'awa.job_unique_claims'::regclass)
 ORDER BY 1;
-- Every ON CONFLICT target of the extension's SQL names queue (or none: any key).
SELECT p.proname, m[1] AS target
  FROM pg_catalog.pg_proc p CROSS JOIN LATERAL regexp_matches(p.prosrc, 'ON CONFLICT \(([^)]*)\)', 'g') m
 WHERE p.pronamespace = 'awa'::regnamespace AND m[1] !~ 'queue' AND m[1] NOT IN ('name', 'singleton', 'slot')
 ORDER BY 1, 2;

-- 2. The same unique key in two queues: two jobs, each holding its key in its own queue.
SELECT state FROM awa.insert_job_compat('uniq', 'queue_keys_a', p_unique_key => '\x0a0b');
SELECT state FROM awa.insert_job_compat('uniq', 'queue_keys_b', p_unique_key => '\x0a0b');
SELECT cardinality(awa.insert_jobs('queue_keys_c', ARRAY['uniq'], p_unique_keys => ARRAY['\x0a0b'::bytea])) AS batch;
-- Twice in one queue: 23505, one job.
SELECT pg_temp.err($$SELECT awa.insert_job_compat('uniq', 'queue_keys_a', p_unique_key => '\x0a0b')$$) AS same_queue;
SELECT pg_temp.err($$SELECT awa.insert_jobs('queue_keys_b', ARRAY['uniq'], p_unique_keys => ARRAY['\x0a0b'::bytea])$$) AS same_queue_batch;
SELECT pg_temp.err($$SELECT awa.insert_job_compat('uniq', 'queue_keys_c', p_state => 'scheduled', p_unique_key => '\x0a0b')$$) AS same_queue_deferred;
SELECT j.queue, count(*) AS jobs,
       (SELECT count(*) FROM awa.job_unique_claims u WHERE u.queue = j.queue AND u.unique_key = '\x0a0b') AS claims
  FROM awa.jobs j WHERE j.queue LIKE 'queue_keys_%' GROUP BY j.queue ORDER BY 1;

-- 3. A claim follows its job: completed (the default mask keeps it), then a deleted job
-- frees the key in its queue only.
SELECT count(*) AS completed FROM awa.claim_ready_runtime('queue_keys_a', 10) c,
       LATERAL awa.complete_jobs(ARRAY[c.job_id], ARRAY[c.run_lease]) x;
SELECT pg_temp.err($$SELECT awa.insert_job_compat('uniq', 'queue_keys_a', p_unique_key => '\x0a0b')$$) AS still_held;
SELECT awa.delete_job(id) AS deleted FROM awa.jobs WHERE queue = 'queue_keys_a';
SELECT state FROM awa.insert_job_compat('uniq', 'queue_keys_a', p_unique_key => '\x0a0b');
SELECT pg_temp.err($$SELECT awa.insert_job_compat('uniq', 'queue_keys_b', p_unique_key => '\x0a0b')$$) AS b_still_held;

-- 4. A job moved to another queue takes its key there: refused where a job holds it
-- (23505, nothing moves), else moved, and the old queue's key is free again.
SELECT pg_temp.err(format('SELECT awa.move_queue(%s, %L)', id, 'queue_keys_b')) AS move_onto_held
  FROM awa.jobs WHERE queue = 'queue_keys_a';
SELECT awa.move_queue(id, 'queue_keys_d') AS moved FROM awa.jobs WHERE queue = 'queue_keys_a';
SELECT u.queue, count(*) FROM awa.job_unique_claims u WHERE u.queue LIKE 'queue_keys_%' GROUP BY 1 ORDER BY 1;
SELECT state FROM awa.insert_job_compat('uniq', 'queue_keys_a', p_unique_key => '\x0a0b');
SELECT pg_temp.err($$SELECT awa.insert_job_compat('uniq', 'queue_keys_d', p_unique_key => '\x0a0b')$$) AS d_held;

SELECT awa.drop_queue(q, true) IS NOT NULL AS dropped
  FROM unnest(ARRAY['queue_keys_a', 'queue_keys_b', 'queue_keys_c', 'queue_keys_d']) q;
SELECT count(*) AS claims_left FROM awa.job_unique_claims WHERE queue LIKE 'queue_keys_%';
