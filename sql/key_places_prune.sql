-- key_places_prune: the places of concurrency keys no longer in use go with the maintenance
-- (awa.prune_key_places, a step of awa.run_maintenance and of the background pass): a place
-- whose attempt's claim slot was pruned (the ring turned past it since its key last used it)
-- is removed; a place whose attempt is in a live slot stays, running or ended. A key whose
-- places went starts again at place 0. Bad input and privileges.
-- Rings are global: run in a database of our own so other tests' rows do not interfere.
SELECT current_database() AS home \gset
CREATE DATABASE awa_key_places_prune;
ALTER DATABASE awa_key_places_prune SET awa_shard.maintenance = off;
\c awa_key_places_prune
SET client_min_messages = warning;
CREATE EXTENSION awa_shard;
RESET client_min_messages;
\set VERBOSITY terse
\i sql/sqlstate_of.psql

SELECT awa.create_queue('kp', 1);
SELECT awa.set_concurrency_limit('kp', 2, p_per_key => true);
SELECT cardinality(awa.insert_jobs('kp', ARRAY['k'], p_concurrency_keys => ARRAY['gone', 'gone', 'busy', 'done', 'gone'])) AS enqueued;
-- 'gone' runs twice in the first claim slot and completes; the ring turns.
CREATE TEMP TABLE kp_first AS SELECT * FROM awa.claim_ready_runtime('kp', 2);
SELECT count(*) AS completed FROM awa.complete_jobs(ARRAY(SELECT job_id FROM kp_first), ARRAY(SELECT run_lease FROM kp_first));
SELECT awa.rotate_attempt_ring('claim') AS rotated;
-- 'busy' runs and 'done' runs and completes in the next slot.
CREATE TEMP TABLE kp_second AS SELECT * FROM awa.claim_ready_runtime('kp', 2);
SELECT count(*) AS completed FROM awa.complete_jobs(
    ARRAY(SELECT job_id FROM kp_second WHERE lane_seq = 4), ARRAY(SELECT run_lease FROM kp_second WHERE lane_seq = 4));
SELECT concurrency_key, place, lane_seq FROM awa.key_attempts WHERE queue = 'kp' ORDER BY 1, 2;
-- While the first slot is live, nothing goes.
SELECT awa.prune_key_places() AS removed;
SELECT awa.prune_attempt_ring('claim') AS pruned;
-- The first slot pruned: both places of 'gone' go; 'busy' (running) and 'done' (ended, live slot) stay.
SELECT awa.prune_key_places() AS removed;
SELECT concurrency_key, place, lane_seq FROM awa.key_attempts WHERE queue = 'kp' ORDER BY 1, 2;
-- 'gone' comes back: a new place 0.
SELECT lane_seq FROM awa.claim_ready_runtime('kp', 1);
SELECT concurrency_key, place, lane_seq FROM awa.key_attempts WHERE queue = 'kp' ORDER BY 1, 2;
-- A call reads p_blocks blocks from where the previous call of the session stopped: with
-- one block a call on a one-block table reads it every time.
SELECT awa.prune_key_places(1) AS removed_one_block;
-- The same step in awa.run_maintenance's report.
SELECT (awa.run_maintenance())->'key_places' AS run_maintenance_key_places;
-- A table of many blocks: 3000 places of a key no longer in use (their slot made to look
-- pruned) beside the live ones.
INSERT INTO awa.key_attempts (queue, concurrency_key, place, job_id, run_lease, priority, enqueue_shard,
                              lane_seq, ready_slot, ready_generation, claim_slot)
SELECT 'kp', 'old', i, -i, 1, 2, 0, 0, 0, 0, -1 FROM generate_series(0, 2999) i;
SELECT pg_relation_size('awa.key_attempts') / current_setting('block_size')::int > 30 AS many_blocks;
-- A call reads p_blocks blocks on from where the session's previous call stopped ('table:block').
SET awa_maintenance.key_places_block = '1:20';
SELECT awa.prune_key_places(5) > 0 AS removed_some, current_setting('awa_maintenance.key_places_block') AS stopped_at;
-- With budget left at the end of the table it goes on from its start, up to where it began:
-- every block once.
SELECT count(*) AS old_places FROM awa.key_attempts WHERE concurrency_key = 'old' \gset
SELECT awa.prune_key_places(1000000) = :old_places AS removed_the_rest,
       current_setting('awa_maintenance.key_places_block') AS stopped_at;
SELECT count(*) AS old_places_left FROM awa.key_attempts WHERE concurrency_key = 'old';
SELECT concurrency_key, place FROM awa.key_attempts WHERE queue = 'kp' ORDER BY 1, 2;
-- The largest budget, from the middle of a table: no overflow.
INSERT INTO awa.key_attempts (queue, concurrency_key, place, job_id, run_lease, priority, enqueue_shard,
                              lane_seq, ready_slot, ready_generation, claim_slot)
SELECT 'kp', 'old', i, -i, 1, 2, 0, 0, 0, 0, -1 FROM generate_series(0, 2999) i;
SET awa_maintenance.key_places_block = '1:7';
SELECT awa.prune_key_places(9223372036854775807) AS removed_all;
-- A setting that is not 'table:block' of this node is passed over for a random start.
SET awa_maintenance.key_places_block = 'x:y';
SELECT awa.prune_key_places() AS removed_with_bad_setting;
SET awa_maintenance.key_places_block = '1:99999999999999999999';
SELECT awa.prune_key_places() AS removed_with_huge_block;
SET awa_maintenance.key_places_block = '7:0';
SELECT awa.prune_key_places() AS removed_with_no_such_table;
RESET awa_maintenance.key_places_block;
-- READ COMMITTED only (the rings' states are share-locked while it runs; a REPEATABLE READ
-- delete could fail on a place a claim reuses meanwhile).
BEGIN ISOLATION LEVEL REPEATABLE READ;
SELECT pg_temp.sqlstate_of($$SELECT awa.prune_key_places()$$) AS repeatable_read;
ROLLBACK;
-- Bad input; only awa_admin may call it.
SELECT pg_temp.sqlstate_of($$SELECT awa.prune_key_places(0)$$) AS zero_blocks;
SELECT pg_temp.sqlstate_of($$SELECT awa.prune_key_places(NULL)$$) AS null_blocks;
SET client_min_messages = warning;
DROP ROLE IF EXISTS kp_worker;
RESET client_min_messages;
CREATE ROLE kp_worker IN ROLE awa_worker;
SET ROLE kp_worker;
SELECT pg_temp.sqlstate_of($$SELECT awa.prune_key_places()$$) AS worker;
RESET ROLE;
DROP ROLE kp_worker;

\c :home
DROP DATABASE awa_key_places_prune;
