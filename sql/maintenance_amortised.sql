-- Amortised maintenance (D23): a pending row is copied O(1) times over its life, whatever the
-- backlog. Maintenance (awa.run_maintenance, the background worker) frees a sealed queue slot
-- only when its finished rows are at least three times the pending rows it copies, or when
-- every slot of the ring is live and the current slot has grown as large as the oldest one.
-- Counted here: rows inserted into the ready partitions (n_tup_ins) over many passes.
-- Rings are global: run in a database of our own so other tests' rows do not interfere.
SELECT current_database() AS home \gset
CREATE DATABASE awa_maintenance_amortised;
ALTER DATABASE awa_maintenance_amortised SET awa_shard.maintenance = off;
\c awa_maintenance_amortised
SET client_min_messages = warning;
CREATE EXTENSION awa_shard;
RESET client_min_messages;
CREATE TEMP TABLE passes (n serial, queue_ring text, queue_prune text);
CREATE TEMP TABLE samples (round integer, ready_rows bigint, pending bigint, live_slots bigint);
-- Rows inserted into the ready partitions so far (statistics flushed by the previous statement).
CREATE FUNCTION pg_temp.ready_inserts() RETURNS bigint LANGUAGE sql AS $$
    SELECT coalesce(sum(n_tup_ins), 0)::bigint FROM pg_stat_user_tables
     WHERE schemaname = 'awa' AND relname LIKE 'ready\_entries\_%' $$;

-- 1. An idle backlog costs nothing: 2,000 pending jobs on 4 lanes and no consumer; 30
-- maintenance passes copy no row (each pass used to copy the whole backlog).
SELECT awa.create_queue('am_idle', 4) AS created;
SELECT cardinality(awa.insert_jobs('am_idle', array_fill('k'::text, ARRAY[2000]), p_spread_keyless => true)) AS enqueued;
SELECT pg_stat_force_next_flush();
SELECT pg_temp.ready_inserts() AS ins0 \gset
SELECT 'INSERT INTO passes (queue_ring, queue_prune) SELECT r->>''queue_ring'', r->>''queue_prune'' FROM awa.run_maintenance() r'
  FROM generate_series(1, 30) \gexec
SELECT pg_stat_force_next_flush();
SELECT pg_temp.ready_inserts() - :ins0 AS rows_copied_idle;
SELECT queue_ring, queue_prune, count(*) FROM passes GROUP BY 1, 2 ORDER BY 1, 2;
SELECT ready_slot, count(*) FROM awa.ready_entries GROUP BY 1 ORDER BY 1;

-- 2. A backlog that drains slowly (50 jobs per round, two passes per round): each pending row
-- is copied a third of a time on average (the bound: at most one copy per three rows freed),
-- storage stays within four times the pending rows plus what a round adds, and every job is
-- completed exactly once.
CREATE TEMP TABLE done_ids (job_id bigint);
SELECT pg_stat_force_next_flush();
SELECT pg_temp.ready_inserts() AS ins1 \gset
SELECT $q$WITH c AS (SELECT job_id, run_lease FROM awa.claim_ready_runtime('am_idle', 50, 0, 0))
          INSERT INTO done_ids SELECT job_id FROM awa.complete_jobs(ARRAY(SELECT job_id FROM c), ARRAY(SELECT run_lease FROM c))$q$,
       'INSERT INTO passes (queue_ring, queue_prune) SELECT r->>''queue_ring'', r->>''queue_prune'' FROM awa.run_maintenance() r',
       'INSERT INTO passes (queue_ring, queue_prune) SELECT r->>''queue_ring'', r->>''queue_prune'' FROM awa.run_maintenance() r',
       format('INSERT INTO samples SELECT %s, (SELECT count(*) FROM awa.ready_entries), '
              '(SELECT count(*) FROM awa.jobs WHERE state = ''available''), '
              '(SELECT count(*) FROM awa.queue_ring_slots WHERE generation >= 0)', g)
  FROM generate_series(1, 40) g \gexec
SELECT pg_stat_force_next_flush();
SELECT pg_temp.ready_inserts() - :ins1 AS rows_copied_draining,
       pg_temp.ready_inserts() - :ins1 <= 2000 / 3 AS within_a_third_per_job;
SELECT count(*) AS completed, count(DISTINCT job_id) AS distinct_jobs FROM done_ids;
SELECT queue_prune, count(*) FROM passes WHERE n > 30 GROUP BY 1 ORDER BY 1;
SELECT max(ready_rows - 4 * pending) <= 100 AS storage_within_bound, min(pending) AS pending_left FROM samples;

-- 3. A paused queue pins nothing: 30 jobs of a paused queue sit in the oldest slot, never
-- worth moving on their own; another queue runs 20 jobs through per pass. Once every slot of
-- the ring is live and the current slot is as large as the oldest, the paused jobs move
-- forward once and the ring turns on; they are moved about once per turn of the ring.
SELECT awa.create_queue('am_paused') AS created, awa.create_queue('am_flow') AS created_flow;
SELECT awa.rotate_queue_ring() AS rotate_to_fresh_slot;
SELECT cardinality(awa.insert_jobs('am_paused', array_fill('p'::text, ARRAY[30]))) AS paused_jobs;
SELECT awa.pause_queue('am_paused') IS NOT NULL AS paused;
TRUNCATE passes, samples;
SELECT pg_stat_force_next_flush();
SELECT pg_temp.ready_inserts() AS ins2 \gset
SELECT $q$DO $d$ BEGIN PERFORM awa.insert_jobs('am_flow', array_fill('f'::text, ARRAY[20])); END $d$$q$,
       $q$WITH c AS (SELECT job_id, run_lease FROM awa.claim_ready_runtime('am_flow', 20, 0, 0))
          INSERT INTO done_ids SELECT job_id FROM awa.complete_jobs(ARRAY(SELECT job_id FROM c), ARRAY(SELECT run_lease FROM c))$q$,
       'INSERT INTO passes (queue_ring, queue_prune) SELECT r->>''queue_ring'', r->>''queue_prune'' FROM awa.run_maintenance() r',
       format('INSERT INTO samples SELECT %s, (SELECT count(*) FROM awa.ready_entries), '
              '(SELECT count(*) FROM awa.jobs WHERE state = ''available''), '
              '(SELECT count(*) FROM awa.queue_ring_slots WHERE generation >= 0)', g)
  FROM generate_series(1, 60) g \gexec
SELECT pg_stat_force_next_flush();
-- Rows inserted beyond the flow's own: the paused rows' moves (at most once per 15 passes).
SELECT pg_temp.ready_inserts() - :ins2 - 60 * 20 AS paused_rows_copied,
       pg_temp.ready_inserts() - :ins2 - 60 * 20 <= 30 * 60 / 15 AS at_most_once_per_turn;
SELECT queue_prune, count(*) FROM passes GROUP BY 1 ORDER BY 1;
-- The ring keeps turning (fewer than 16 live slots at the end), and storage stays within the
-- ring's slots of flow rows plus the paused rows and their moved copies.
SELECT max(live_slots) AS max_live_slots, (SELECT live_slots FROM samples ORDER BY round DESC LIMIT 1) AS live_slots_now,
       max(ready_rows) AS max_ready_rows, max(ready_rows) <= 16 * 2 * 20 + 2 * 30 AS storage_bounded FROM samples;
SELECT count(*) AS paused_available, count(DISTINCT id) AS distinct_jobs FROM awa.jobs WHERE queue = 'am_paused' AND state = 'available';
\c :home
DROP DATABASE awa_maintenance_amortised;

-- 4. A move reads each lane's claim cursor once, not once per row it moves: 2,990 pending jobs
-- of one lane whose cursor is a claim mark, moved forward by an explicit prune. The buffers of
-- the cursor's tables (the lane's claim head and its marks) stay a handful; read per row,
-- they were several per moved row, and a move under a busy lane (its marks many and not yet
-- folded) ran for minutes, holding back every table's vacuum meanwhile.
CREATE DATABASE awa_maintenance_move;
ALTER DATABASE awa_maintenance_move SET awa_shard.maintenance = off;
\c awa_maintenance_move
SET client_min_messages = warning;
CREATE EXTENSION awa_shard;
RESET client_min_messages;
\set ECHO none
\i sql/buffers_of.psql
\set ECHO all
-- No autovacuum reads among the counted buffers.
SELECT pg_temp.set_autovacuum('queue\_claim\_heads', false) + pg_temp.set_autovacuum('claim\_marks', false) AS tables_quiet;
SELECT awa.create_queue('am_move') AS created;
SELECT cardinality(awa.insert_jobs('am_move', array_fill('m'::text, ARRAY[3000]))) AS enqueued;
WITH c AS (SELECT job_id, run_lease FROM awa.claim_ready_runtime('am_move', 10, 0, 0))
SELECT count(*) AS completed FROM awa.complete_jobs(ARRAY(SELECT job_id FROM c), ARRAY(SELECT run_lease FROM c));
SELECT count(*) AS claim_marks FROM awa.claim_marks WHERE queue = 'am_move';
SELECT awa.rotate_queue_ring() AS sealed;
SELECT pg_stat_force_next_flush();
SELECT pg_temp.buffers_of('queue\_claim\_heads') + pg_temp.buffers_of('claim\_marks') AS cursor_buffers0 \gset
SELECT awa.prune_queue_ring() AS prune;
SELECT pg_stat_force_next_flush();
SELECT pg_temp.buffers_of('queue\_claim\_heads') + pg_temp.buffers_of('claim\_marks') - :cursor_buffers0 < 100
       AS cursor_read_per_lane;
SELECT ready_slot, count(*) FROM awa.ready_entries WHERE queue = 'am_move' GROUP BY 1 ORDER BY 1;
-- The exact count of the waiting jobs reads each lane's cursor once too (it was read per row).
SELECT pg_stat_force_next_flush();
SELECT pg_temp.buffers_of('queue\_claim\_heads') + pg_temp.buffers_of('claim\_marks') AS cursor_buffers1 \gset
SELECT available FROM awa.queue_counts_exact('am_move');
SELECT pg_stat_force_next_flush();
SELECT pg_temp.buffers_of('queue\_claim\_heads') + pg_temp.buffers_of('claim\_marks') - :cursor_buffers1 < 100
       AS count_reads_cursor_per_lane;
\c :home
DROP DATABASE awa_maintenance_move;
