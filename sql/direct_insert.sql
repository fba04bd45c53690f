-- direct_insert: ready rows are inserted straight into the write slot's partition, without a
-- planned statement (docs/design.md §3, "Direct inserts"). The partition follows the ring
-- through rotations and prunes (its OID is never stale), the parent's OID survives a
-- re-created extension, a unique conflict raises 23505 as the statement did, and a table
-- with a user's trigger, rule or row security goes through the planned statement, which
-- fires the trigger.
-- Rings are global: run in a database of our own so other tests' rows do not interfere.
\set VERBOSITY terse
SELECT current_database() AS home \gset
CREATE DATABASE awa_direct_insert;
ALTER DATABASE awa_direct_insert SET awa_shard.maintenance = off;
\c awa_direct_insert
SET client_min_messages = warning;
CREATE EXTENSION awa_shard;
RESET client_min_messages;
SELECT awa.create_queue('di_q');

-- 1. Twenty turns of enqueue, claim, complete, rotate and prune, in one session: the ring
-- (16 slots) wraps around, slots are truncated and reused with a new generation, and every
-- row lands in the partition of the slot that was current when it was enqueued.
CREATE TABLE placed (job_id bigint, part text, ready_slot int, ready_generation bigint,
                     current_slot int, current_generation bigint);
CREATE TABLE claimed (job_id bigint, run_lease bigint);
\set ECHO none
\o /dev/null
SELECT 'SELECT awa.insert_job_compat(''k'', ''di_q'')',
       'INSERT INTO placed SELECT r.job_id, r.tableoid::regclass::text, r.ready_slot, r.ready_generation,
               s.current_slot, g.generation
          FROM awa.ready_entries r, awa.queue_ring_state s
          JOIN awa.queue_ring_slots g ON g.slot = s.current_slot
         WHERE r.queue = ''di_q'' AND r.job_id NOT IN (SELECT job_id FROM placed)',
       'INSERT INTO claimed SELECT job_id, run_lease FROM awa.claim_ready_runtime(''di_q'', 10, 0, 0)',
       'SELECT awa.complete_jobs(ARRAY(SELECT job_id FROM claimed), ARRAY(SELECT run_lease FROM claimed))',
       'TRUNCATE claimed',
       'SELECT awa.rotate_queue_ring()',
       'SELECT awa.prune_queue_ring()',
       'SELECT awa.prune_queue_ring()'
  FROM generate_series(1, 20) \gexec
\o
\set ECHO all
SELECT count(*) AS enqueued,
       count(*) FILTER (WHERE part = format('awa.ready_entries_%s', ready_slot)) AS in_own_partition,
       count(*) FILTER (WHERE ready_slot = current_slot AND ready_generation = current_generation) AS in_current_slot,
       count(DISTINCT ready_slot) AS slots_used,
       max(ready_generation) >= 16 AS ring_wrapped
  FROM placed;
SELECT state, count(*) FROM awa.jobs WHERE queue = 'di_q' GROUP BY 1 ORDER BY 1;

-- 2. A batch and a single job in one transaction share the slot.
BEGIN;
SELECT cardinality(awa.insert_jobs('di_q', ARRAY['b1', 'b2', 'b3'])) AS enqueued;
SELECT (awa.insert_job_compat('b4', 'di_q')).lane_seq IS NOT NULL AS enqueued;
SELECT count(*) AS rows, count(DISTINCT tableoid) AS partitions,
       bool_and(tableoid = format('awa.ready_entries_%s', (SELECT current_slot FROM awa.queue_ring_state))::regclass)
         AS in_current_partition
  FROM awa.ready_entries WHERE kind IN ('b1', 'b2', 'b3', 'b4');
COMMIT;
-- No planned INSERT into ready_entries, and no statement reading a ring's cursor or a slot's
-- generation on its own, was prepared in this backend (a kept plan's memory context is named
-- by its statement; the claims' cursor read with the live arc is one statement of its own).
SELECT count(*) FILTER (WHERE ident LIKE 'INSERT INTO awa.ready_entries%') AS ready_insert_plans,
       count(*) FILTER (WHERE ident LIKE 'SELECT r.current_slot, s.generation FROM awa.%'
                           OR ident LIKE 'SELECT generation FROM awa.%ring_slots WHERE slot = $1') AS ring_read_plans
  FROM pg_backend_memory_contexts;

-- 3. A unique conflict raises 23505 as the planned statement did: a lane's sequence set back
-- hands out a lane position that is taken in the current slot.
SELECT setval(format('awa.%I', awa.lane_sequence_name('di_q', 2, 0))::regclass,
              (SELECT min(lane_seq) FROM awa.ready_entries WHERE kind = 'b1'), false) IS NOT NULL AS set_back;
SELECT awa.insert_job_compat('dup', 'di_q');
SELECT setval(format('awa.%I', awa.lane_sequence_name('di_q', 2, 0))::regclass,
              (SELECT min(lane_seq) FROM awa.ready_entries WHERE kind = 'b1'), false) IS NOT NULL AS set_back;
SELECT awa.insert_jobs('di_q', ARRAY['dup1', 'dup2']);
SELECT count(*) AS dup_rows FROM awa.ready_entries WHERE kind LIKE 'dup%';

-- 4. Triggers: with a user's row trigger on the parent (cloned onto every partition) and a
-- statement trigger on the parent, the planned statement inserts, and both fire, for a single
-- job and for a batch. A trigger that returns another row changes what is stored, as it did.
SELECT setval(format('awa.%I', awa.lane_sequence_name('di_q', 2, 0))::regclass,
              (SELECT max(lane_seq) FROM awa.ready_entries WHERE queue = 'di_q' AND priority = 2)) IS NOT NULL AS restored;
CREATE TABLE trig_log (op text, level text, kind text);
CREATE FUNCTION log_row() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO public.trig_log VALUES (TG_OP, 'row', NEW.kind);
    RETURN NULL;
END $$;
CREATE FUNCTION log_statement() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO public.trig_log VALUES (TG_OP, 'statement', NULL);
    RETURN NULL;
END $$;
CREATE FUNCTION tag_row() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    NEW.tags := ARRAY['tagged'];
    RETURN NEW;
END $$;
CREATE TRIGGER user_row AFTER INSERT ON awa.ready_entries FOR EACH ROW EXECUTE FUNCTION public.log_row();
CREATE TRIGGER user_stmt AFTER INSERT ON awa.ready_entries FOR EACH STATEMENT EXECUTE FUNCTION public.log_statement();
CREATE TRIGGER user_before BEFORE INSERT ON awa.ready_entries FOR EACH ROW EXECUTE FUNCTION public.tag_row();
SELECT (awa.insert_job_compat('t1', 'di_q')).lane_seq IS NOT NULL AS enqueued;
SELECT cardinality(awa.insert_jobs('di_q', ARRAY['t2', 't3'])) AS enqueued;
-- The single-row and the batch statement are prepared now.
SELECT count(*) AS ready_insert_plans FROM pg_backend_memory_contexts
 WHERE ident LIKE 'INSERT INTO awa.ready_entries%';
SELECT op, level, kind, count(*) FROM trig_log GROUP BY 1, 2, 3 ORDER BY 1, 2, 3;
SELECT kind, tags FROM awa.ready_entries WHERE kind LIKE 't_' ORDER BY kind;
-- Dropped again, the direct insert is back: nothing fires, nothing is tagged.
DROP TRIGGER user_row ON awa.ready_entries;
DROP TRIGGER user_stmt ON awa.ready_entries;
DROP TRIGGER user_before ON awa.ready_entries;
TRUNCATE trig_log;
SELECT (awa.insert_job_compat('t4', 'di_q')).lane_seq IS NOT NULL AS enqueued;
SELECT count(*) AS fired FROM trig_log;
SELECT kind, tags FROM awa.ready_entries WHERE kind = 't4';

-- 5. A rule on the parent also goes through the planned statement.
CREATE TABLE rule_log (kind text);
CREATE RULE user_rule AS ON INSERT TO awa.ready_entries DO ALSO INSERT INTO public.rule_log VALUES (NEW.kind);
SELECT (awa.insert_job_compat('r1', 'di_q')).lane_seq IS NOT NULL AS enqueued;
SELECT kind FROM rule_log;
DROP RULE user_rule ON awa.ready_entries;

-- 6. The extension dropped and created again in this session: the parent and its partitions
-- have new OIDs, and the next enqueue finds them.
SET client_min_messages = warning;
DROP EXTENSION awa_shard CASCADE;
CREATE EXTENSION awa_shard;
RESET client_min_messages;
SELECT (awa.insert_job_compat('after_recreate', 'di_q')).lane_seq AS lane_seq;
SELECT tableoid::regclass AS partition, kind FROM awa.ready_entries;

\c :home
DROP DATABASE awa_direct_insert;
