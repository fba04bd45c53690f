-- The 1.0 -> 1.1 update takes every table lock it needs at once, in tries of 200 ms that
-- release what they took; the caller's lock_timeout bounds the whole: while a transaction
-- holds one of the extension's tables past it, the update fails with 55P03 and changes
-- nothing, and succeeds once that transaction has ended. The holder is a prepared
-- transaction (a server without them, max_prepared_transactions = 0, updates at once:
-- migration_lock_budget_2.out).
\set SHOW_CONTEXT never
SELECT current_database() AS home \gset
CREATE DATABASE migration_lock_budget;
ALTER DATABASE migration_lock_budget SET awa_shard.maintenance = off;
\c migration_lock_budget
CREATE EXTENSION awa_shard VERSION '1.0';
BEGIN;
LOCK TABLE awa.dlq_entries IN ACCESS SHARE MODE;
PREPARE TRANSACTION 'awa_migration_lock_budget';
SET lock_timeout = '300ms';
ALTER EXTENSION awa_shard UPDATE TO '1.1';
SELECT extversion FROM pg_catalog.pg_extension WHERE extname = 'awa_shard';
COMMIT PREPARED 'awa_migration_lock_budget';
ALTER EXTENSION awa_shard UPDATE TO '1.1';
SELECT extversion FROM pg_catalog.pg_extension WHERE extname = 'awa_shard';
\c :home
DROP DATABASE migration_lock_budget;
