-- direct_complete: awa.complete_jobs completes receipts (and awa.heartbeat_jobs finds them)
-- through the direct access routines
-- (docs/design.md §5, "Direct completion"): no planned statement runs over the rings on the
-- common path. A generic plan of the completion statements locked every partition of every
-- table it named (PostgreSQL 15 locks a generic plan's whole range table), the lease ring's
-- included; the direct path locks the live partitions it probes and nothing of the lease
-- ring. So the locks a completion holds tell which path ran. Only pairs without a receipt
-- (a stale pair, a lease) go to the statements. The results, heartbeats and unique claims
-- of the completed attempts are handled as the statement handled them.
-- Rings are global: run in a database of our own, whose rings have one live slot each.
\set VERBOSITY terse
SELECT current_database() AS home \gset
CREATE DATABASE awa_direct_complete;
ALTER DATABASE awa_direct_complete SET awa_shard.maintenance = off;
\c awa_direct_complete
SET client_min_messages = warning;
CREATE EXTENSION awa_shard;
RESET client_min_messages;
SELECT awa.create_queue('dc_q') IS NOT NULL AS created;

-- The partitions of the rings' tables this backend holds a lock on, by table.
CREATE FUNCTION pg_temp.locked_partitions() RETURNS TABLE (tab text, partitions bigint) LANGUAGE sql AS $$
    SELECT t.tab, count(DISTINCT l.relation)
      FROM unnest(ARRAY['ready_entries', 'done_entries', 'claim_batches', 'completion_batches',
                        'lease_claim_closures', 'leases']) AS t(tab)
      LEFT JOIN (pg_locks l JOIN pg_inherits i ON i.inhrelid = l.relation)
        ON l.pid = pg_backend_pid() AND l.locktype = 'relation' AND i.inhparent = ('awa.' || t.tab)::regclass
     GROUP BY t.tab ORDER BY t.tab
$$;

-- Eleven jobs (two with a unique key: one unique while it is not completed, one whose mask
-- holds 'completed'), claimed; two of them heartbeat (attempt_state rows).
CREATE TABLE jobs AS SELECT (awa.insert_job_compat('k', 'dc_q')).id AS job_id FROM generate_series(1, 9);
INSERT INTO jobs SELECT id FROM awa.insert_job_compat('k', 'dc_q', p_unique_key => 'dc-until-done',
                                                      p_unique_states => B'11100000');
INSERT INTO jobs SELECT id FROM awa.insert_job_compat('k', 'dc_q', p_unique_key => 'dc-for-ever',
                                                      p_unique_states => B'11110000');
CREATE TABLE claimed AS SELECT job_id, run_lease FROM awa.claim_ready_runtime('dc_q', 20, 0, 0);
SELECT count(*) AS claimed FROM claimed;
-- The heartbeat finds its receipts the same way (a stale pair among them is not alive) and
-- locks no partition beyond the live ones, none of the lease ring: only the pairs without a
-- receipt would go to the lease statement.
BEGIN;
SELECT awa.heartbeat_jobs(ARRAY(SELECT job_id FROM claimed ORDER BY job_id LIMIT 2),
                          ARRAY(SELECT run_lease FROM claimed ORDER BY job_id LIMIT 2)) AS alive;
SELECT * FROM pg_temp.locked_partitions();
COMMIT;
SELECT awa.set_progress(job_id, run_lease, '{"done": 1}') AS progress_set
  FROM claimed ORDER BY job_id LIMIT 1;
SELECT awa.heartbeat_jobs(ARRAY(SELECT job_id FROM claimed ORDER BY job_id LIMIT 2),
                          ARRAY(SELECT run_lease + 1 FROM claimed ORDER BY job_id LIMIT 2)) AS stale_alive;
SELECT count(*) AS heartbeats, count(progress) AS with_progress FROM awa.attempt_state WHERE queue = 'dc_q';
SELECT progress FROM awa.get_job((SELECT min(job_id) FROM claimed));
SELECT count(*) AS unique_claims FROM awa.job_unique_claims WHERE queue = 'dc_q';

-- 1. The completion: every pair completed once, results stored, in a transaction that then
-- shows its locks: one live partition of each table it reads, none of the lease ring, where
-- the planned statements locked all 16 (17 and more for done_entries) and the 8 of leases.
BEGIN;
SELECT count(*) AS completed, count(DISTINCT job_id) AS distinct_jobs
  FROM awa.complete_jobs(ARRAY(SELECT job_id FROM claimed ORDER BY job_id) || ARRAY(SELECT job_id FROM claimed),
                         ARRAY(SELECT run_lease FROM claimed ORDER BY job_id) || ARRAY(SELECT run_lease FROM claimed),
                         ARRAY(SELECT to_jsonb(job_id) FROM claimed ORDER BY job_id)
                           || ARRAY(SELECT '"second"'::jsonb FROM claimed));
SELECT * FROM pg_temp.locked_partitions();
COMMIT;
SELECT state, count(*) AS jobs, count(*) FILTER (WHERE result = to_jsonb(id)) AS first_result_kept
  FROM awa.jobs WHERE queue = 'dc_q' GROUP BY state;
SELECT count(*) AS batches, sum(cardinality(lane_offsets)) AS attempts
  FROM awa.completion_batches WHERE queue = 'dc_q';
-- The heartbeats went with them, and the unique claim whose mask does not hold 'completed'.
SELECT count(*) AS heartbeats_left FROM awa.attempt_state WHERE queue = 'dc_q';
SELECT unique_key FROM awa.job_unique_claims WHERE queue = 'dc_q';

-- 2. A repeat is stale: its receipts are found and closed, nothing is written, and no pair
-- is left for the statements (the lease ring stays unlocked).
BEGIN;
SELECT count(*) AS completed_again
  FROM awa.complete_jobs(ARRAY(SELECT job_id FROM claimed), ARRAY(SELECT run_lease FROM claimed));
SELECT partitions AS lease_partitions_locked FROM pg_temp.locked_partitions() WHERE tab = 'leases';
COMMIT;

-- 3. A pair without a receipt (a wrong run_lease) goes to the statements, which find nothing
-- either: they lock the lease ring.
BEGIN;
SELECT count(*) AS completed_stale
  FROM awa.complete_jobs(ARRAY(SELECT job_id FROM claimed LIMIT 1), ARRAY(SELECT run_lease + 7 FROM claimed LIMIT 1));
SELECT partitions > 1 AS statements_ran FROM pg_temp.locked_partitions() WHERE tab = 'leases';
COMMIT;
SELECT count(*) AS batches_after FROM awa.completion_batches WHERE queue = 'dc_q';

-- 4. In the queue given (p_queue): another queue's attempt is not completed (its pair goes to
-- the statements, which leave it alone too).
SELECT awa.create_queue('dc_other') IS NOT NULL AS created;
SELECT (awa.insert_job_compat('k', 'dc_q')).id AS q_job \gset
SELECT (awa.insert_job_compat('k', 'dc_other')).id AS other_job \gset
SELECT run_lease AS q_lease FROM awa.claim_ready_runtime('dc_q', 1, 0, 0) \gset
SELECT run_lease AS other_lease FROM awa.claim_ready_runtime('dc_other', 1, 0, 0) \gset
SELECT job_id = :q_job AS only_own_queue
  FROM awa.complete_jobs(ARRAY[:other_job, :q_job]::bigint[], ARRAY[:other_lease, :q_lease]::bigint[], NULL, 'dc_q');
SELECT id = :other_job AS other, state FROM awa.jobs WHERE id IN (:q_job, :other_job) ORDER BY id;

\c :home
DROP DATABASE awa_direct_complete;
