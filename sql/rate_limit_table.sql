-- rate_limit_table: the server's table of token buckets (docs/api.md, "awa.set_rate_limit")
-- holds 1024 queue buckets, and only buckets still in use keep their place in it: a bucket is
-- given up when it is full at its queue's current limit, when its limit is removed or its
-- queue dropped, and when its database is dropped. Asserted by counts and SQLSTATEs, never by
-- time: a rate of 1e-6 per second never refills during the test. The table is shared by the
-- whole server, so it is filled until it refuses (53000), however many buckets other tests
-- left in it. Without the preload (expected/rate_limit_table_1.out) there are no buckets:
-- set_rate_limit raises 55000 and nothing below is limited.
\set ECHO none
\i sql/err.psql
\i sql/bucket_fill.psql
\set ECHO all
\set VERBOSITY terse

-- 1. The buckets of a dropped database: filled from another database, then that database
--    is dropped; a new queue's claim here finds room.
SELECT current_database() AS home \gset
SET client_min_messages = warning;
DROP DATABASE IF EXISTS rlt_other WITH (FORCE);
RESET client_min_messages;
CREATE DATABASE rlt_other;
\c rlt_other
SET client_min_messages = warning;
CREATE EXTENSION awa_shard;
ALTER DATABASE rlt_other SET awa_shard.maintenance = off;
RESET client_min_messages;
\set ECHO none
\i sql/bucket_fill.psql
\set ECHO all
SELECT pg_temp.fill_buckets('rlt_elsewhere') AS filled_until;
\c :home
\set VERBOSITY terse
\set ECHO none
\i sql/err.psql
\i sql/bucket_fill.psql
\set ECHO all
SELECT count(*) AS enqueued FROM awa.insert_job_compat('k', 'rlt_first');
SELECT pg_temp.err($$SELECT awa.set_rate_limit('rlt_first', 1e-6, 2)$$) AS set_limit;
SELECT pg_temp.claimed('rlt_first', 1) AS claimed_while_full;
DROP DATABASE rlt_other WITH (FORCE);
SELECT pg_temp.claimed('rlt_first', 1) AS claimed_after_drop;

-- 2. A lowered limit: rlt_hot drains its bucket at 1000 per second, burst 5, then its limit
--    becomes 1e-6 per second. At the old rate the bucket would be full again within 5 ms;
--    at its limit now it is not, so filling the table does not evict it and its next claim
--    gets nothing (evicted, it would come back full: 5 jobs).
SELECT coalesce(cardinality(ids), 0) AS enqueued FROM awa.insert_jobs('rlt_hot', array_fill('k'::text, ARRAY[10])) AS ids;
SELECT pg_temp.err($$SELECT awa.set_rate_limit('rlt_hot', 1000, 5)$$) AS set_limit;
SELECT pg_temp.claimed('rlt_hot', 10) AS drained;
SELECT pg_temp.err($$SELECT awa.set_rate_limit('rlt_hot', 1e-6, 5)$$) AS lowered;
SELECT pg_sleep(0.02);
SELECT pg_temp.fill_buckets('rlt_fill') AS filled_until;
SELECT pg_temp.claimed('rlt_hot', 10) AS claimed_after_fill;

-- 3. A limit removed gives its bucket up at once: with the table full, a new queue's claim
--    finds no room (53000), and finds it once one queue's limit is removed (it had to wait
--    for that bucket to refill: with this rate, days).
SELECT count(*) AS enqueued FROM awa.insert_job_compat('k', 'rlt_new');
SELECT pg_temp.err($$SELECT awa.set_rate_limit('rlt_new', 1e-6, 2)$$) AS set_limit;
SELECT pg_temp.claimed('rlt_new', 1) AS claimed_while_full;
SELECT pg_temp.err($$SELECT awa.set_rate_limit('rlt_fill_1', NULL)$$) AS removed;
SELECT pg_temp.claimed('rlt_new', 1) AS claimed_after_removal;
-- A removal rolled back gives nothing up: the table is full again.
SELECT count(*) AS enqueued FROM awa.insert_job_compat('k', 'rlt_later');
SELECT pg_temp.err($$SELECT awa.set_rate_limit('rlt_later', 1e-6, 2)$$) AS set_limit;
BEGIN;
SELECT pg_temp.err($$SELECT awa.set_rate_limit('rlt_fill_2', NULL)$$) AS removed;
ROLLBACK;
SELECT pg_temp.claimed('rlt_later', 1) AS claimed_after_rollback;

-- Every queue of this test dropped: their buckets go with them.
SELECT count(awa.drop_queue(q.queue, p_force => true)) > 0 AS dropped FROM awa.queues q WHERE q.queue LIKE 'rlt\_%';
