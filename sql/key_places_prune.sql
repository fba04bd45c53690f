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
