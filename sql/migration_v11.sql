-- Update 1.0 -> 1.1 on real data: a 1.0 install holding jobs in every state (waiting on
-- several shards, running on receipts and on a lease, completed, failed, retryable,
-- scheduled, dead-lettered), with a sealed ring slot, is updated in place. Every job keeps
-- its id and state; the open attempts finish; waiting jobs are claimed in lane order;
-- maintenance runs; and the catalog equals a fresh 1.1 line by line.
\set SHOW_CONTEXT never
SELECT current_database() AS home \gset
CREATE DATABASE migration_v11_fresh;
ALTER DATABASE migration_v11_fresh SET awa_shard.maintenance = off;
CREATE DATABASE migration_v11;
ALTER DATABASE migration_v11 SET awa_shard.maintenance = off;

\c migration_v11_fresh
CREATE EXTENSION awa_shard;
SELECT extversion FROM pg_catalog.pg_extension WHERE extname = 'awa_shard';
\set ECHO none
\i sql/migration_describe.psql
\set ECHO all
\copy (SELECT l FROM public.awa_catalog_lines() l) TO 'migration_v11_fresh.lines'

\c migration_v11
CREATE EXTENSION awa_shard VERSION '1.0';
CREATE TABLE public.v11_jobs (name text PRIMARY KEY, job_id bigint NOT NULL, run_lease bigint);
DO $$
DECLARE
    c record;
BEGIN
    INSERT INTO awa.queue_meta (queue, enqueue_shards) VALUES ('v11_a', 4);
    -- Ring slot 0: three finished jobs, then the ring turns: slot 0 is sealed.
    PERFORM awa.insert_job_compat('old', 'v11_b', p_ordering_key => ('old-' || n)::bytea) FROM generate_series(1, 3) n;
    PERFORM awa.complete_jobs(array_agg(job_id), array_agg(run_lease)) FROM awa.claim_ready_runtime('v11_b', 10, 0, 0);
    PERFORM awa.rotate_queue_ring();
    -- Waiting keyed jobs on the four shards of v11_a, keyless ones on v11_b.
    PERFORM awa.insert_job_compat('wait', 'v11_a', jsonb_build_object('n', n), p_ordering_key => ('key-' || n)::bytea)
       FROM generate_series(1, 12) n;
    PERFORM awa.insert_jobs('v11_b', ARRAY['wait', 'wait', 'wait'], ARRAY['{"n": 1}', '{"n": 2}', '{"n": 3}']::jsonb[]);
    -- Receipts: two running, one failed for good, one retryable, one dead-lettered.
    INSERT INTO public.v11_jobs (name, job_id, run_lease)
    SELECT 'run_' || row_number() OVER (ORDER BY lane_seq), job_id, run_lease FROM awa.claim_ready_runtime('v11_b', 2, 0, 0);
    FOR c IN SELECT * FROM awa.claim_ready_runtime('v11_b', 1, 0, 0) LOOP
        INSERT INTO public.v11_jobs VALUES ('retry', c.job_id, c.run_lease);
        PERFORM awa.fail_job(c.job_id, c.run_lease, 'later', interval '1 hour');
    END LOOP;
    PERFORM awa.insert_job_compat('fatal', 'v11_c', p_max_attempts => 1::smallint);
    PERFORM awa.insert_job_compat('poison', 'v11_c');
    FOR c IN SELECT * FROM awa.claim_ready_runtime('v11_c', 2, 0, 0) LOOP
        IF c.kind = 'fatal' THEN
            PERFORM awa.fail_job(c.job_id, c.run_lease, 'fatal');
        ELSE
            PERFORM awa.fail_job_to_dlq(c.job_id, c.run_lease, 'poison');
        END IF;
    END LOOP;
    -- Leases mode: one running lease.
    UPDATE awa.plane_settings SET receipts = false;
    PERFORM awa.insert_job_compat('leased', 'v11_d');
    INSERT INTO public.v11_jobs (name, job_id, run_lease)
    SELECT 'lease', job_id, run_lease FROM awa.claim_ready_runtime('v11_d', 1, 0, 0);
    UPDATE awa.plane_settings SET receipts = true;
    -- Scheduled.
    PERFORM awa.insert_job_compat('later', 'v11_d', p_run_at => now() + interval '1 day');
    -- A waiting job holding a unique key, and heartbeats of the running receipts: rows of the
    -- tables that gain a queue column in 1.1 (with the closures of the exits above).
    PERFORM awa.insert_job_compat('uniq', 'v11_b', p_unique_key => '\x0b11');
    PERFORM awa.heartbeat_jobs(ARRAY(SELECT job_id FROM public.v11_jobs WHERE name LIKE 'run\_%' ORDER BY name),
                               ARRAY(SELECT run_lease FROM public.v11_jobs WHERE name LIKE 'run\_%' ORDER BY name));
    -- Unique jobs that changed queue: one dead-lettered, then retried into v11_f; one failed
    -- for a retry, then moved to v11_g. Their first ready rows stay behind in v11_c.
    PERFORM awa.insert_job_compat('uniq_dlq', 'v11_c', p_unique_key => '\x0c01', p_unique_states => B'11111111');
    FOR c IN SELECT * FROM awa.claim_ready_runtime('v11_c', 1, 0, 0) LOOP
        PERFORM awa.fail_job_to_dlq(c.job_id, c.run_lease, 'poison');
        PERFORM awa.retry_from_dlq(c.job_id, 'v11_f');
    END LOOP;
    PERFORM awa.insert_job_compat('uniq_moved', 'v11_c', p_unique_key => '\x0c02');
    FOR c IN SELECT * FROM awa.claim_ready_runtime('v11_c', 1, 0, 0) LOOP
        PERFORM awa.fail_job(c.job_id, c.run_lease, 'later', interval '1 hour');
        PERFORM awa.move_queue(c.job_id, 'v11_g');
    END LOOP;
END
$$;
CREATE TABLE public.v11_before AS
SELECT id, state::text, kind, queue, priority, enqueue_shard, lane_seq, args, ordering_key FROM awa.jobs;
SELECT state, count(*) FROM public.v11_before GROUP BY 1 ORDER BY 1;
SELECT generation >= 0 AS live, count(*) FROM awa.queue_ring_slots GROUP BY 1 ORDER BY 1;

-- Grants of the database's own roles on what the update replaces (functions whose arguments
-- or result change, the table lease_claims that becomes a view), and an object of its own
-- on that table: the update first refuses, naming the view; then it lists the grants it did
-- not carry over, with the statements that give them again.
DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_roles WHERE rolname = 'awa_v11_app') THEN
        CREATE ROLE awa_v11_app NOLOGIN;
    END IF;
END
$$;
GRANT EXECUTE ON FUNCTION awa.pause_queue(text), awa.move_queue(bigint, text, smallint) TO awa_v11_app;
GRANT SELECT ON awa.lease_claims TO awa_v11_app WITH GRANT OPTION;
CREATE VIEW public.v11_my_claims AS SELECT job_id FROM awa.lease_claims;
ALTER EXTENSION awa_shard UPDATE TO '1.1';
DROP VIEW public.v11_my_claims;
ALTER EXTENSION awa_shard UPDATE TO '1.1';
SELECT extversion FROM pg_catalog.pg_extension WHERE extname = 'awa_shard';

-- Every job is where it was, in the same state.
SELECT 'was' AS side, * FROM (SELECT * FROM public.v11_before
                              EXCEPT ALL SELECT id, state::text, kind, queue, priority, enqueue_shard, lane_seq,
                                                args, ordering_key FROM awa.jobs) x
UNION ALL
SELECT 'now', * FROM (SELECT id, state::text, kind, queue, priority, enqueue_shard, lane_seq, args, ordering_key
                        FROM awa.jobs EXCEPT ALL SELECT * FROM public.v11_before) y;

-- The rows that gained a queue column carry their job's queue: heartbeats, closures and
-- unique claims (none dropped: every one belongs to a job that exists); the closures of the
-- two attempts whose jobs changed queue after them keep the queue of their claim (v11_c).
SELECT 'attempt_state' AS tbl, count(*) AS rows_, count(*) FILTER (WHERE a.queue = j.queue) AS of_job_queue
  FROM awa.attempt_state a LEFT JOIN awa.jobs j ON j.id = a.job_id
UNION ALL
SELECT 'lease_claim_closures', count(*),
       count(*) FILTER (WHERE x.queue = CASE WHEN j.kind IN ('uniq_dlq', 'uniq_moved') THEN 'v11_c' ELSE j.queue END)
  FROM awa.lease_claim_closures x LEFT JOIN awa.jobs j ON j.id = x.job_id
UNION ALL
SELECT 'job_unique_claims', count(*), count(*) FILTER (WHERE u.queue = j.queue)
  FROM awa.job_unique_claims u LEFT JOIN awa.jobs j ON j.id = u.job_id;
SELECT u.unique_key, u.queue, j.kind FROM awa.job_unique_claims u JOIN awa.jobs j ON j.id = u.job_id ORDER BY 1;
-- A moved job's key holds in its new queue, and is free in the queue it left.
DO $$
BEGIN
    PERFORM awa.insert_job_compat('uniq_moved', 'v11_g', p_unique_key => '\x0c02');
    RAISE NOTICE 'the key is free in the new queue';
EXCEPTION WHEN unique_violation THEN
    RAISE NOTICE 'the key is held in the new queue';
END
$$;
SELECT (awa.insert_job_compat('uniq_moved', 'v11_c', p_unique_key => '\x0c02')).state AS key_free_in_old_queue;
SELECT awa.delete_job(id) AS removed FROM awa.jobs WHERE queue = 'v11_c' AND kind = 'uniq_moved';
-- The key still holds in its queue; another queue may use it (unique keys are per queue).
DO $$
BEGIN
    PERFORM awa.insert_job_compat('uniq', 'v11_b', p_unique_key => '\x0b11');
    RAISE NOTICE 'the key is free in its queue';
EXCEPTION WHEN unique_violation THEN
    RAISE NOTICE 'the key is held in its queue';
END
$$;
SELECT (awa.insert_job_compat('uniq', 'v11_e', p_unique_key => '\x0b11')).state AS same_key_other_queue;
SELECT awa.delete_job(id) AS removed FROM awa.jobs WHERE queue = 'v11_e';

-- The attempts open across the update finish normally.
SELECT j.name, c.run_lease = j.run_lease AS same_attempt
  FROM awa.complete_jobs(ARRAY(SELECT job_id FROM public.v11_jobs WHERE name IN ('run_1', 'run_2', 'lease') ORDER BY name),
                         ARRAY(SELECT run_lease FROM public.v11_jobs WHERE name IN ('run_1', 'run_2', 'lease') ORDER BY name)) c
  JOIN public.v11_jobs j ON j.job_id = c.job_id ORDER BY 1;

-- Maintenance of 1.1 prunes the sealed slot: its waiting jobs move forward (the slot itself
-- is truncated by a later prune) and are then claimed lane by lane in lane order, each once.
SELECT awa.prune_queue_ring() AS prune;
CREATE TABLE public.v11_claimed (n serial, queue text, enqueue_shard smallint, lane_seq bigint, job_id bigint);
DO $$
BEGIN
    LOOP
        INSERT INTO public.v11_claimed (queue, enqueue_shard, lane_seq, job_id)
        SELECT queue, enqueue_shard, lane_seq, job_id FROM awa.claim_ready_runtime('v11_a', 3, 0, 0)
        UNION ALL
        SELECT queue, enqueue_shard, lane_seq, job_id FROM awa.claim_ready_runtime('v11_b', 3, 0, 0)
        UNION ALL
        SELECT queue, enqueue_shard, lane_seq, job_id FROM awa.claim_ready_runtime('v11_f', 3, 0, 0);
        EXIT WHEN NOT FOUND;
    END LOOP;
END
$$;
SELECT (SELECT count(*) FROM public.v11_claimed) AS claimed,
       (SELECT count(*) FROM public.v11_before WHERE state = 'available') AS were_waiting,
       (SELECT count(DISTINCT job_id) FROM public.v11_claimed) AS distinct_claimed,
       (SELECT bool_and(ordered) FROM (SELECT lane_seq > lag(lane_seq, 1, 0::bigint) OVER (PARTITION BY queue, enqueue_shard ORDER BY n) AS ordered
                                         FROM public.v11_claimed) o) AS lane_order;
SELECT jsonb_object_keys(awa.run_maintenance()) AS step ORDER BY 1;

-- The catalog equals a fresh 1.1 install, line by line.
CREATE TEMP TABLE fresh_lines (l text);
\copy fresh_lines FROM 'migration_v11_fresh.lines'
\! rm -f migration_v11_fresh.lines
\set ECHO none
\i sql/migration_describe.psql
\set ECHO all
SELECT 'only after update' AS side, l FROM (SELECT l FROM public.awa_catalog_lines() l EXCEPT ALL SELECT l FROM fresh_lines) x
UNION ALL
SELECT 'only in fresh install', l FROM (SELECT l FROM fresh_lines EXCEPT ALL SELECT l FROM public.awa_catalog_lines() l) y
ORDER BY 1, 2;
SELECT count(*) > 3000 AS described FROM fresh_lines;

\c :home
DROP DATABASE migration_v11_fresh;
DROP DATABASE migration_v11;
DROP ROLE awa_v11_app;
