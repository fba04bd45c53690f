-- The gate of docs/design.md §11: a fresh install of the default version (the full script
-- built from sql/schema/) and the upgrade from every released version give the same
-- catalog, line by line: 1.0 -> 1.1 and 0.16 -> 1.0 -> 1.1, both populated with jobs in
-- every state before they are updated. Column order is compared where the released
-- scripts make it the same: the fresh install against the upgraded 1.0 (a 0.16 install
-- upgraded to 1.0 has its shard columns where v017 added them, at the end).
\set SHOW_CONTEXT never
SELECT current_database() AS home \gset
CREATE DATABASE gate_fresh;
ALTER DATABASE gate_fresh SET awa_shard.maintenance = off;
CREATE DATABASE gate_from_10;
ALTER DATABASE gate_from_10 SET awa_shard.maintenance = off;
CREATE DATABASE gate_from_016;
ALTER DATABASE gate_from_016 SET awa_shard.maintenance = off;

\c gate_fresh
CREATE EXTENSION awa_shard;
SELECT extversion = (SELECT default_version FROM pg_catalog.pg_available_extensions WHERE name = 'awa_shard')
       AS default_version
  FROM pg_catalog.pg_extension WHERE extname = 'awa_shard';
\set ECHO none
\i sql/migration_describe.psql
\set ECHO all
\copy (SELECT l FROM public.awa_catalog_lines() l) TO 'gate_fresh.lines'
\copy (SELECT c.relname || ' ' || string_agg(a.attname, ',' ORDER BY a.attnum) FROM pg_catalog.pg_class c JOIN pg_catalog.pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped WHERE c.relnamespace = 'awa'::regnamespace AND c.relkind IN ('r', 'p', 'v', 'c') GROUP BY c.relname) TO 'gate_fresh.columns'

-- 1.0 -> 1.1, populated.
\c gate_from_10
CREATE EXTENSION awa_shard VERSION '1.0';
\set ECHO none
\i sql/migration_populate_10.psql
\set ECHO all
SELECT count(*) > 10 AS populated, count(DISTINCT state) >= 5 AS states FROM awa.jobs;
ALTER EXTENSION awa_shard UPDATE;
SELECT extversion FROM pg_catalog.pg_extension WHERE extname = 'awa_shard';
\set ECHO none
\i sql/migration_describe.psql
\set ECHO all
CREATE TEMP TABLE fresh_lines (l text);
\copy fresh_lines FROM 'gate_fresh.lines'
SELECT 'only after update' AS side, l FROM (SELECT l FROM public.awa_catalog_lines() l EXCEPT ALL SELECT l FROM fresh_lines) x
UNION ALL
SELECT 'only in fresh install', l FROM (SELECT l FROM fresh_lines EXCEPT ALL SELECT l FROM public.awa_catalog_lines() l) y
ORDER BY 1, 2;
SELECT count(*) > 3000 AS described FROM fresh_lines;
-- Same columns in the same order, so SELECT * and positional code behave alike.
CREATE TEMP TABLE fresh_columns (l text);
\copy fresh_columns FROM 'gate_fresh.columns'
CREATE TEMP TABLE upgraded_columns AS
SELECT c.relname || ' ' || string_agg(a.attname, ',' ORDER BY a.attnum) AS l
  FROM pg_catalog.pg_class c JOIN pg_catalog.pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
 WHERE c.relnamespace = 'awa'::regnamespace AND c.relkind IN ('r', 'p', 'v', 'c') GROUP BY c.relname;
SELECT 'only after update' AS side, l FROM (SELECT l FROM upgraded_columns EXCEPT ALL SELECT l FROM fresh_columns) x
UNION ALL
SELECT 'only in fresh install', l FROM (SELECT l FROM fresh_columns EXCEPT ALL SELECT l FROM upgraded_columns) y
ORDER BY 1, 2;
SELECT count(*) > 100 AS relations_compared FROM fresh_columns;

-- 0.16 -> 1.0 -> 1.1, populated.
\c gate_from_016
CREATE EXTENSION awa_shard VERSION '0.16';
\set ECHO none
\i sql/migration_populate.psql
\set ECHO all
SELECT count(*) > 10 AS populated FROM public.mig_jobs;
ALTER EXTENSION awa_shard UPDATE TO '1.0';
ALTER EXTENSION awa_shard UPDATE;
SELECT extversion FROM pg_catalog.pg_extension WHERE extname = 'awa_shard';
\set ECHO none
\i sql/migration_describe.psql
\set ECHO all
CREATE TEMP TABLE fresh_lines (l text);
\copy fresh_lines FROM 'gate_fresh.lines'
SELECT 'only after update' AS side, l FROM (SELECT l FROM public.awa_catalog_lines() l EXCEPT ALL SELECT l FROM fresh_lines) x
UNION ALL
SELECT 'only in fresh install', l FROM (SELECT l FROM fresh_lines EXCEPT ALL SELECT l FROM public.awa_catalog_lines() l) y
ORDER BY 1, 2;

\! rm -f gate_fresh.lines gate_fresh.columns
\c :home
DROP DATABASE gate_fresh;
DROP DATABASE gate_from_10;
DROP DATABASE gate_from_016;
