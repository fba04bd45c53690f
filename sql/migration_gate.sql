-- Migration v017 refuses to run while awa.storage_transition_state is mixed_transition
-- (SQLSTATE 55000, message naming the state) and changes nothing; once the state is
-- switched back it runs. Its reshape steps are idempotent: run again on an upgraded
-- schema, or on a fresh 1.0 install, they change nothing.
\set SHOW_CONTEXT never
SELECT current_database() AS home \gset
CREATE DATABASE migration_gate;
ALTER DATABASE migration_gate SET awa_shard.maintenance = off;
CREATE DATABASE migration_gate_fresh;
ALTER DATABASE migration_gate_fresh SET awa_shard.maintenance = off;
-- migration_gate_reshape.tmp: the reshape steps of v017, in one transaction, quietly.
\! (echo 'BEGIN;'; echo 'SET LOCAL client_min_messages = warning;'; sed -n '/^-- Step 1, the gate/,/^-- Routing: the ordering-key hash/p' sql/awa_shard--0.16--1.0.sql | sed '$d'; echo 'COMMIT;') > migration_gate_reshape.tmp

\c migration_gate
CREATE EXTENSION awa_shard VERSION '0.16';
\set ECHO none
\i sql/migration_populate.psql
\i sql/migration_describe.psql
\set ECHO all
CREATE TABLE public.lines_016 AS SELECT l FROM public.awa_catalog_lines() l;

-- The gate: refused, with the state named, and nothing changed.
UPDATE awa.storage_transition_state SET state = 'mixed_transition';
ALTER EXTENSION awa_shard UPDATE TO '1.0';
SELECT :'LAST_ERROR_SQLSTATE' AS sqlstate;
SELECT extversion FROM pg_catalog.pg_extension WHERE extname = 'awa_shard';
SELECT public.catalog_lines_changed('public.lines_016') AS catalog_lines_changed;
SELECT count(*) AS rows_changed FROM (
    (SELECT 'ready_entries' AS tbl, to_jsonb(t) AS r FROM awa.ready_entries t
     UNION ALL SELECT 'lease_claims', to_jsonb(t) FROM awa.lease_claims t
     UNION ALL SELECT 'leases', to_jsonb(t) FROM awa.leases t
     UNION ALL SELECT 'queue_claim_heads', to_jsonb(t) FROM awa.queue_claim_heads t
     EXCEPT ALL SELECT tbl, r FROM public.mig_rows)) d;
-- 0.16 keeps working meanwhile.
SELECT (awa.insert_job_compat('mig', 'mig_a', '{}', 'available', 1::smallint)).lane_seq AS lane_seq_016;

-- Any other state lets it run.
UPDATE awa.storage_transition_state SET state = 'active';
ALTER EXTENSION awa_shard UPDATE TO '1.0';
SELECT extversion FROM pg_catalog.pg_extension WHERE extname = 'awa_shard';
-- The lane continues after the job enqueued by 0.16 above; 11 positional arguments name
-- one function only (the 0.16 overload is gone).
SELECT (awa.insert_job_compat('mig', 'mig_a', '{}', 'available', 1::smallint, 25::smallint, NULL, '{}', '{}',
                              NULL, NULL)).lane_seq AS lane_seq_10;
SELECT count(*) AS insert_job_compat_overloads FROM pg_catalog.pg_proc
 WHERE proname = 'insert_job_compat' AND pronamespace = 'awa'::regnamespace;

-- Idempotent: the reshape steps again, on the upgraded schema, change no catalog line,
-- no row and no lane sequence.
CREATE TABLE public.lines_10 AS SELECT l FROM public.awa_catalog_lines() l;
CREATE TABLE public.rows_10 AS SELECT * FROM public.awa_plane_rows();
\set ECHO none
\i migration_gate_reshape.tmp
\set ECHO all
SELECT public.catalog_lines_changed('public.lines_10') AS catalog_lines_changed;
SELECT count(*) AS rows_changed
  FROM (SELECT * FROM public.awa_plane_rows() EXCEPT ALL SELECT tbl, r FROM public.rows_10) d;
SELECT (SELECT count(*) FROM public.rows_10) > 50 AS rows_compared;

-- The same on a fresh 1.0 install.
\c migration_gate_fresh
CREATE EXTENSION awa_shard VERSION '1.0';
\set ECHO none
\i sql/migration_describe.psql
\set ECHO all
CREATE TABLE public.lines_10 AS SELECT l FROM public.awa_catalog_lines() l;
\set ECHO none
\i migration_gate_reshape.tmp
\set ECHO all
SELECT public.catalog_lines_changed('public.lines_10') AS catalog_lines_changed;

\! rm -f migration_gate_reshape.tmp
\c :home
DROP DATABASE migration_gate;
DROP DATABASE migration_gate_fresh;
