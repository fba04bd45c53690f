-- Migration v017 leaves exactly the catalog of a fresh install: a populated 0.16
-- updated to 1.0 and a fresh 1.0 (CREATE EXTENSION ... VERSION '1.0') are described line by line (tables, columns with types,
-- defaults and nullability, constraints, every partition's indexes, sequences, views,
-- triggers, functions with signatures, results, security and settings, types, grants,
-- extension membership) and the two descriptions must not differ in a single line.
\set SHOW_CONTEXT never
SELECT current_database() AS home \gset
CREATE DATABASE migration_catalog_fresh;
ALTER DATABASE migration_catalog_fresh SET awa_shard.maintenance = off;
CREATE DATABASE migration_catalog_upgraded;
ALTER DATABASE migration_catalog_upgraded SET awa_shard.maintenance = off;

\c migration_catalog_fresh
CREATE EXTENSION awa_shard VERSION '1.0';
\set ECHO none
\i sql/migration_describe.psql
\set ECHO all
\copy (SELECT l FROM public.awa_catalog_lines() l) TO 'migration_catalog_fresh.lines'
SELECT md5(string_agg(l, E'\n' ORDER BY l)) AS md5_fresh, count(*) AS lines_fresh
  FROM public.awa_catalog_lines() l \gset

\c migration_catalog_upgraded
CREATE EXTENSION awa_shard VERSION '0.16';
\set ECHO none
\i sql/migration_populate.psql
\i sql/migration_describe.psql
\set ECHO all
SELECT count(*) > 20 AS populated FROM public.mig_states;
ALTER EXTENSION awa_shard UPDATE TO '1.0';
SELECT md5(string_agg(l, E'\n' ORDER BY l)) AS md5_upgraded, count(*) AS lines_upgraded
  FROM public.awa_catalog_lines() l \gset

-- Every line that only one side has (none).
CREATE TEMP TABLE fresh_lines (l text);
\copy fresh_lines FROM 'migration_catalog_fresh.lines'
\! rm -f migration_catalog_fresh.lines
SELECT 'only after upgrade' AS side, l FROM (SELECT l FROM public.awa_catalog_lines() l EXCEPT ALL SELECT l FROM fresh_lines) x
UNION ALL
SELECT 'only in fresh install', l FROM (SELECT l FROM fresh_lines EXCEPT ALL SELECT l FROM public.awa_catalog_lines() l) y
ORDER BY 1, 2;
SELECT :'md5_fresh' = :'md5_upgraded' AS same_md5, :lines_fresh = :lines_upgraded AS same_count,
       :lines_fresh > 3000 AS described;

-- The description sees what it must: shard-aware keys on every partition, the sharded
-- producer function only (no 11-argument overload), grants per role.
SELECT count(*) FILTER (WHERE l ~ '^index (ready|done)_entries_\d+_pkey def=.*\(ready_slot, queue, priority, enqueue_shard, lane_seq\)') AS ready_done_partition_keys,
       count(*) FILTER (WHERE l ~ '^index leases_\d+_pkey def=.*\(lease_slot, queue, priority, enqueue_shard, lane_seq\)') AS lease_partition_keys,
       count(*) FILTER (WHERE l ~ '^index (ready_entries|done_entries|leases)_\d+_queue_priority_enqueue_shard_lane_seq_idx ') AS lane_shard_indexes,
       count(*) FILTER (WHERE l ~ '^function insert_job_compat\(.* result=') AS insert_job_compat_overloads,
       count(*) FILTER (WHERE l ~ '^grant function awa\.insert_job_compat\(.*bytea\) to awa_producer ') AS producer_grant
  FROM public.awa_catalog_lines() l;

\c :home
DROP DATABASE migration_catalog_fresh;
DROP DATABASE migration_catalog_upgraded;
