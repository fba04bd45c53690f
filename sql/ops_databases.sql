-- Shared memory is keyed by database: two databases on one server with a queue of the
-- same name see only their own counters in awa.shard_stats, and reset_shard_stats resets
-- only the calling database's, and its `since` only (the others keep theirs). Internal
-- functions refuse a queue name that does not fit the shared-memory key (22023) instead of
-- overrunning it (1.0 aborted the server process).
-- Without preload there is no shared memory: the counters come from each database's own
-- tables, reset_shard_stats() returns false and the internal counters do nothing
-- (ops_databases_1.out).
SELECT current_database() AS home \gset
CREATE DATABASE awa_db_a;
ALTER DATABASE awa_db_a SET awa_shard.maintenance = off;
CREATE DATABASE awa_db_b;
ALTER DATABASE awa_db_b SET awa_shard.maintenance = off;
\c awa_db_a
SET client_min_messages = warning;
CREATE EXTENSION awa_shard;
RESET client_min_messages;
SELECT cardinality(awa.insert_jobs('same_q', array_fill('k'::text, ARRAY[3]))) AS enqueued_in_a;
SELECT coalesce(min(since)::text, 'none') AS since_a FROM awa.shard_stats \gset
\c awa_db_b
SET client_min_messages = warning;
CREATE EXTENSION awa_shard;
RESET client_min_messages;
SELECT cardinality(awa.insert_jobs('same_q', array_fill('k'::text, ARRAY[5]))) AS enqueued_in_b;
SELECT queue, sum(enqueued) AS enqueued, min(source) AS source FROM awa.shard_stats GROUP BY 1 ORDER BY 1;
SELECT clock_timestamp() AS before_reset \gset
SELECT awa.reset_shard_stats() AS reset_b;
SELECT count(*) AS counters_left_in_b FROM awa.shard_stats;
SELECT cardinality(awa.insert_jobs('same_q', ARRAY['k'])) AS enqueued_after_reset;
SELECT sum(enqueued) AS enqueued, min(since) >= :'before_reset' AS counted_from_reset FROM awa.shard_stats;
\c awa_db_a
SELECT queue, sum(enqueued) AS enqueued, coalesce(min(since)::text, 'none') = :'since_a' AS since_kept
  FROM awa.shard_stats GROUP BY 1 ORDER BY 1;

SET client_min_messages = warning;
\set ECHO none
\i sql/sqlstate_of.psql
\set ECHO all
RESET client_min_messages;
SELECT pg_temp.sqlstate_of($$SELECT awa._count_failed(repeat('x', 10 * 1024 * 1024), 0::smallint)$$);
SELECT pg_temp.sqlstate_of($$SELECT awa._count_failed(repeat(U&'\+01F600', 201), 0::smallint)$$);
SELECT pg_temp.sqlstate_of($$SELECT awa._enqueue_ready(ARRAY[ROW(1, 'k', repeat('q', 10 * 1024 * 1024), '{}', 'scheduled',
    2, 0, 0, 25, now(), NULL, NULL, now(), NULL, NULL, NULL, NULL, NULL, NULL, NULL)::awa.deferred_jobs])$$);
-- The longest valid name (200 four-byte characters) still counts, and reads back intact.
SELECT awa._count_failed(repeat(U&'\+01F600', 200), 0::smallint);
SELECT length(queue) AS chars, octet_length(queue) AS bytes, failed FROM awa.shard_stats WHERE failed > 0;
SELECT 1 AS server_still_up;
\c :home
DROP DATABASE awa_db_a;
DROP DATABASE awa_db_b;
