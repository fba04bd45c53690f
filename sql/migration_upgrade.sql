-- Migration v017 on real data: a 0.16 install holding jobs in every state (ready,
-- running on a receipt, running on a lease, completed, failed, scheduled, retryable,
-- dead-lettered) on several queues and priorities is updated to 1.0. Every job keeps
-- its id, row and state; ready jobs are claimed in their old lane order; lane numbering
-- continues where 0.16 left it; 0.16 attempts finish through the 1.0 functions.
\set SHOW_CONTEXT never
SELECT current_database() AS home \gset
CREATE DATABASE migration_upgrade;
ALTER DATABASE migration_upgrade SET awa_shard.maintenance = off;
\c migration_upgrade
CREATE EXTENSION awa_shard VERSION '0.16';
\set ECHO none
\i sql/migration_populate.psql
\set ECHO all
SELECT state, count(*) FROM public.mig_states GROUP BY 1 ORDER BY 1;
SELECT * FROM public.mig_lanes ORDER BY queue, priority;

ALTER EXTENSION awa_shard UPDATE TO '1.0';
SELECT extversion FROM pg_catalog.pg_extension WHERE extname = 'awa_shard';

-- Every row is still there and unchanged, but for the columns 1.0 adds.
CREATE TEMP VIEW now_rows AS
SELECT 'ready_entries' AS tbl, to_jsonb(t) - 'enqueue_shard' AS r FROM awa.ready_entries t
UNION ALL SELECT 'done_entries', to_jsonb(t) - 'enqueue_shard' FROM awa.done_entries t
UNION ALL SELECT 'leases', to_jsonb(t) - 'enqueue_shard' FROM awa.leases t
UNION ALL SELECT 'lease_claims', to_jsonb(t) - 'enqueue_shard' FROM awa.lease_claims t
UNION ALL SELECT 'lease_claim_closures', to_jsonb(t) FROM awa.lease_claim_closures t
UNION ALL SELECT 'deferred_jobs', to_jsonb(t) - 'ordering_key' FROM awa.deferred_jobs t
UNION ALL SELECT 'dlq_entries', to_jsonb(t) - 'ordering_key' FROM awa.dlq_entries t
UNION ALL SELECT 'queue_claim_heads', to_jsonb(t) - 'enqueue_shard' - 'head_run_at' FROM awa.queue_claim_heads t
UNION ALL SELECT 'job_unique_claims', to_jsonb(t) FROM awa.job_unique_claims t
UNION ALL SELECT 'attempt_state', to_jsonb(t) FROM awa.attempt_state t
UNION ALL SELECT 'queue_meta', to_jsonb(t) - 'enqueue_shards' FROM awa.queue_meta t;
SELECT 'lost' AS what, tbl, r FROM (SELECT tbl, r FROM public.mig_rows EXCEPT ALL SELECT tbl, r FROM now_rows) x
UNION ALL
SELECT 'new', tbl, r FROM (SELECT tbl, r FROM now_rows EXCEPT ALL SELECT tbl, r FROM public.mig_rows) y;
SELECT (SELECT count(*) FROM public.mig_rows) AS rows_checked,
       (SELECT count(*) FROM awa.ready_entries WHERE enqueue_shard <> 0)
     + (SELECT count(*) FROM awa.done_entries WHERE enqueue_shard <> 0)
     + (SELECT count(*) FROM awa.leases WHERE enqueue_shard <> 0)
     + (SELECT count(*) FROM awa.lease_claims WHERE enqueue_shard <> 0)
     + (SELECT count(*) FROM awa.queue_claim_heads WHERE enqueue_shard <> 0)
     + (SELECT count(*) FROM awa.queue_enqueue_heads WHERE enqueue_shard <> 0) AS rows_off_shard_0,
       (SELECT count(*) FROM awa.deferred_jobs WHERE ordering_key IS NOT NULL)
     + (SELECT count(*) FROM awa.dlq_entries WHERE ordering_key IS NOT NULL) AS holds_with_key;

-- Every job is in the same state, with the same id, as the 1.0 jobs view sees it.
SELECT 'was' AS side, job_id, state FROM (SELECT job_id, state FROM public.mig_states
                                          EXCEPT ALL SELECT id, state::text FROM awa.jobs) x
UNION ALL
SELECT 'now', id, state FROM (SELECT id, state::text FROM awa.jobs
                              EXCEPT ALL SELECT job_id, state FROM public.mig_states) y;

-- Each lane is shard 0 of its (queue, priority), its sequence is named as 1.0 names it,
-- continues at the old next_seq, and the claim cursor is unchanged.
SELECT l.queue, l.priority, h.enqueue_shard,
       h.seq_name = awa.lane_sequence_name(l.queue, l.priority, 0::smallint) AS named,
       awa.reserve_enqueue_seq(l.queue, l.priority, 0::smallint, 0) = l.next_seq AS continues,
       c.claim_seq = l.claim_seq AS claim_kept
  FROM public.mig_lanes l
  JOIN awa.queue_enqueue_heads h ON h.queue = l.queue AND h.priority = l.priority
  JOIN awa.queue_claim_heads c ON c.queue = h.queue AND c.priority = h.priority AND c.enqueue_shard = h.enqueue_shard
 ORDER BY 1, 2;

-- New enqueues continue at the old next_seq; a new lane starts at 1.
CREATE TABLE public.mig_new AS
SELECT l.queue, l.priority, l.next_seq, j.id AS job_id, j.lane_seq, j.enqueue_shard
  FROM public.mig_lanes l, LATERAL awa.insert_job_compat('mig', l.queue, '{}', 'available', l.priority) j;
SELECT queue, priority, lane_seq = next_seq AS at_old_next_seq, enqueue_shard FROM public.mig_new ORDER BY 1, 2;
SELECT (awa.insert_job_compat('mig', 'mig_fresh_lane', '{}', 'available', 2::smallint)).lane_seq AS fresh_lane_seq;
SELECT queue, priority, enqueue_shard, lane_seq, count(*) FROM awa.ready_entries
 GROUP BY 1, 2, 3, 4 HAVING count(*) > 1;

-- Upgraded lane sequences belong to their head column and not to the extension, exactly
-- like a lane created at run time (mig_fresh_lane).
SELECT h.queue, h.priority,
       (SELECT d.refobjid::regclass || '.' || a.attname FROM pg_catalog.pg_depend d
          JOIN pg_catalog.pg_attribute a ON a.attrelid = d.refobjid AND a.attnum = d.refobjsubid
         WHERE d.classid = 'pg_class'::regclass AND d.objid = to_regclass('awa.' || quote_ident(h.seq_name))
           AND d.deptype = 'a') AS owned_by,
       EXISTS (SELECT 1 FROM pg_catalog.pg_depend d
                WHERE d.classid = 'pg_class'::regclass AND d.objid = to_regclass('awa.' || quote_ident(h.seq_name))
                  AND d.deptype = 'e') AS extension_member
  FROM awa.queue_enqueue_heads h ORDER BY 1, 2;

-- Draining mig_a hands out exactly its unclaimed jobs, lane by lane in the old lane order
-- followed by the new job; nothing claimed in 0.16 is claimed again.
CREATE TABLE public.mig_claimed (n serial, queue text, lane_priority smallint, enqueue_shard smallint,
                                 lane_seq bigint, job_id bigint, run_lease bigint);
CREATE FUNCTION public.mig_drain(p_queue text) RETURNS integer LANGUAGE plpgsql AS $$
DECLARE
    k integer;
    total integer := 0;
BEGIN
    LOOP
        INSERT INTO public.mig_claimed (queue, lane_priority, enqueue_shard, lane_seq, job_id, run_lease)
        SELECT c.queue, c.lane_priority, c.enqueue_shard, c.lane_seq, c.job_id, c.run_lease
          FROM awa.claim_ready_runtime(p_queue, 3) c;
        GET DIAGNOSTICS k = ROW_COUNT;
        EXIT WHEN k = 0;
        total := total + k;
    END LOOP;
    RETURN total;
END
$$;
SELECT public.mig_drain('mig_a') AS claimed;
WITH expected AS (
    SELECT queue, priority, array_agg(job_id ORDER BY lane_seq) AS jobs
      FROM (SELECT queue, priority, lane_seq, job_id FROM public.mig_ready
            UNION ALL SELECT queue, priority, lane_seq, job_id FROM public.mig_new) e
     WHERE queue = 'mig_a' GROUP BY 1, 2),
got AS (
    SELECT queue, lane_priority AS priority, array_agg(job_id ORDER BY n) AS jobs,
           bool_and(enqueue_shard = 0) AS on_shard_0
      FROM public.mig_claimed WHERE queue = 'mig_a' GROUP BY 1, 2)
SELECT e.queue, e.priority, g.jobs = e.jobs AS in_old_lane_order, cardinality(g.jobs) AS claimed, g.on_shard_0
  FROM expected e FULL JOIN got g USING (queue, priority) ORDER BY 1, 2;

-- The attempts left running in 0.16 (a receipt on mig_a, a lease and a receipt on mig_b)
-- complete through awa.complete_jobs into done_entries on shard 0.
SELECT j.name, c.job_id = j.job_id AS same_job, c.run_lease
  FROM awa.complete_jobs(ARRAY(SELECT job_id FROM public.mig_jobs WHERE name IN ('a1_2', 'b2_2', 'b2_3') ORDER BY name),
                         ARRAY(SELECT run_lease FROM public.mig_jobs WHERE name IN ('a1_2', 'b2_2', 'b2_3') ORDER BY name)) c
  JOIN public.mig_jobs j ON j.job_id = c.job_id ORDER BY 1;
SELECT j.name, d.state, d.enqueue_shard, d.attempt, d.lane_seq
  FROM public.mig_jobs j JOIN awa.done_entries d ON d.job_id = j.job_id
 WHERE j.name IN ('a1_2', 'b2_2', 'b2_3') ORDER BY 1;
SELECT count(*) AS leases_left FROM awa.leases;
SELECT count(*) AS completed_now
  FROM awa.complete_jobs(ARRAY(SELECT job_id FROM public.mig_claimed ORDER BY n),
                         ARRAY(SELECT run_lease FROM public.mig_claimed ORDER BY n));

-- Deferred jobs of 0.16 promote onto shard 0 (the far-future one stays scheduled).
SELECT awa.promote_due(1000) AS promoted;
SELECT j.name, v.state, v.enqueue_shard
  FROM public.mig_jobs j JOIN awa.jobs v ON v.id = j.job_id
 WHERE j.name IN ('a1_3', 'sched_due_1', 'sched_due_2', 'sched_later', 'retry_due') ORDER BY 1;

-- The 0.16 dead letter goes back to the ready plane and runs.
SELECT awa.retry_from_dlq(job_id) AS retried FROM public.mig_jobs WHERE name = 'a1_4';
SELECT v.state, v.enqueue_shard, v.attempt FROM public.mig_jobs j JOIN awa.jobs v ON v.id = j.job_id WHERE j.name = 'a1_4';
TRUNCATE public.mig_claimed;
SELECT public.mig_drain('mig_a') AS claimed;
SELECT j.name FROM public.mig_claimed c JOIN public.mig_jobs j USING (job_id) ORDER BY 1;
SELECT count(*) AS completed_now
  FROM awa.complete_jobs(ARRAY(SELECT job_id FROM public.mig_claimed ORDER BY n),
                         ARRAY(SELECT run_lease FROM public.mig_claimed ORDER BY n));

-- Raising mig_b to 4 shards spreads new (keyed) jobs over 4 shards while the rows left on
-- shard 0 by 0.16 still drain.
SELECT count(*) AS mig_b_waiting_on_shard_0 FROM awa.jobs WHERE queue = 'mig_b' AND state = 'available' AND enqueue_shard = 0;
INSERT INTO awa.queue_meta (queue, enqueue_shards) VALUES ('mig_b', 4)
ON CONFLICT (queue) DO UPDATE SET enqueue_shards = EXCLUDED.enqueue_shards;
CREATE TABLE public.mig_wide AS
SELECT j.id AS job_id, j.enqueue_shard, j.lane_seq
  FROM generate_series(1, 40) n,
       LATERAL awa.insert_job_compat('mig', 'mig_b', '{}', 'available', 2::smallint, 25::smallint, NULL, '{}', '{}',
                                     NULL, NULL, convert_to('key-' || n, 'UTF8')) j;
SELECT count(DISTINCT enqueue_shard) AS shards_used, min(enqueue_shard), max(enqueue_shard) FROM public.mig_wide;
TRUNCATE public.mig_claimed;
SELECT public.mig_drain('mig_b') AS claimed;
SELECT (SELECT count(*) FROM public.mig_wide w WHERE NOT EXISTS (SELECT 1 FROM public.mig_claimed c WHERE c.job_id = w.job_id)) AS wide_unclaimed,
       (SELECT count(*) FROM public.mig_ready r WHERE r.queue = 'mig_b'
           AND NOT EXISTS (SELECT 1 FROM public.mig_claimed c WHERE c.job_id = r.job_id)) AS old_unclaimed,
       (SELECT count(*) FROM public.mig_claimed WHERE enqueue_shard = 0
           AND job_id NOT IN (SELECT job_id FROM public.mig_wide)) AS old_claimed_from_shard_0;
SELECT count(*) AS completed_now
  FROM awa.complete_jobs(ARRAY(SELECT job_id FROM public.mig_claimed ORDER BY n),
                         ARRAY(SELECT run_lease FROM public.mig_claimed ORDER BY n));
SELECT queue, state, count(*) FROM awa.jobs GROUP BY 1, 2 ORDER BY 1, 2;

\c :home
DROP DATABASE migration_upgrade;
