-- flow_control_per_key: concurrency keys on jobs and per-key concurrency limits
-- (docs/api.md, "Flow control"): the key travels with the job, set_concurrency_limit with
-- p_per_key caps each key's running attempts, an exit frees its key's place at once, a lane
-- that begins with a capped key's job does not hold back the other lanes, who may do what,
-- and the per-key claim reads, drains and records without planned statements where it can,
-- writing what the statements write.
\set ECHO none
\i sql/sqlstate_of.psql
\set ECHO all

-- 1. The key is a job attribute: given by insert_job_compat (last argument) and insert_jobs
--    (p_concurrency_keys), shown by the returned row, awa.jobs and get_job.
SELECT awa.create_queue('pk_q', 1);
SELECT (awa.insert_job_compat('k', 'pk_q', p_concurrency_key => 'tenant-a')).concurrency_key AS compat_key;
SELECT (awa.insert_job_compat('k', 'pk_q')).concurrency_key IS NULL AS no_key_by_default;
SELECT cardinality(awa.insert_jobs('pk_q', ARRAY['k'], p_concurrency_keys => ARRAY['tenant-a', NULL, 'tenant-b'])) AS batch;
SELECT concurrency_key, count(*) FROM awa.jobs WHERE queue = 'pk_q' GROUP BY 1 ORDER BY 1 NULLS LAST;
SELECT g.concurrency_key FROM awa.jobs j CROSS JOIN LATERAL awa.get_job(j.id) g
 WHERE j.queue = 'pk_q' ORDER BY j.id;
-- A scheduled job keeps its key (deferred_jobs), and so does the ready row it is promoted to.
SELECT (awa.insert_job_compat('k', 'pk_q', p_run_at => now() + interval '1 hour', p_concurrency_key => 'tenant-c')).state;
SELECT state, concurrency_key FROM awa.deferred_jobs WHERE queue = 'pk_q';
UPDATE awa.deferred_jobs SET run_at = now() - interval '1 second' WHERE queue = 'pk_q';
SELECT awa.promote_due() >= 1 AS promoted;
SELECT state, concurrency_key FROM awa.jobs WHERE queue = 'pk_q' AND concurrency_key = 'tenant-c';

-- 2. Bad input: a key is 1..200 bytes (22023), limits as the queue-wide one.
SELECT a.call, pg_temp.sqlstate_of(a.call) AS result FROM (VALUES
    ($$SELECT awa.insert_job_compat('k', 'pk_q', p_concurrency_key => '')$$),
    ($$SELECT awa.insert_job_compat('k', 'pk_q', p_concurrency_key => repeat('x', 201))$$),
    ($$SELECT awa.insert_jobs('pk_q', ARRAY['k'], p_concurrency_keys => ARRAY['a', ''])$$),
    ($$SELECT awa.insert_jobs('pk_q', ARRAY['k', 'k'], p_concurrency_keys => ARRAY['a'])$$),
    ($$SELECT awa.insert_jobs('pk_q', ARRAY['k'], p_concurrency_keys => ARRAY[['a'], ['b']])$$),
    ($$SELECT awa.set_concurrency_limit('pk_q', 0, true)$$),
    ($$SELECT awa.set_concurrency_limit('pk_q', -1, true)$$),
    ($$SELECT awa.set_concurrency_limit('pk_q', 1000001, true)$$),
    ($$SELECT awa.set_concurrency_limit('pk_q', 9223372036854775807, true)$$),
    ($$SELECT awa.set_concurrency_limit('pk_q', 1, NULL)$$),
    ($$SELECT awa.set_concurrency_limit('pk_nope', 1, true)$$),
    ($$SELECT awa.set_concurrency_limit(NULL, 1, true)$$),
    ($$SELECT awa.set_rate_limit('pk_q', 1, 0, true)$$),
    ($$UPDATE awa.queue_meta SET key_concurrency_limit = 0 WHERE queue = 'pk_q'$$)) a(call);
SELECT (awa.insert_job_compat('k', 'pk_q', p_concurrency_key => repeat('x', 200))).concurrency_key = repeat('x', 200) AS longest_key;
SELECT queue, concurrency_limit, key_concurrency_limit FROM awa.queues WHERE queue = 'pk_q';
SELECT awa.drop_queue('pk_q', true) > 0 AS dropped;

-- 3. Per-key limit 2 on one lane: a claim takes jobs in lane order and stops before the first
--    job whose key is at its cap; keyless jobs are not limited; the queue-wide limit is
--    independent (none here).
SELECT awa.create_queue('pk_cap', 1);
SELECT cardinality(awa.insert_jobs('pk_cap', ARRAY['k'],
    p_concurrency_keys => ARRAY['a', 'a', NULL, 'b', 'a', 'b', NULL, 'b', 'a'])) AS enqueued;
SELECT awa.set_concurrency_limit('pk_cap', 2, p_per_key => true);
SELECT queue, concurrency_limit, key_concurrency_limit FROM awa.queues WHERE queue = 'pk_cap';
CREATE TEMP TABLE pk_running AS
  SELECT c.job_id, c.run_lease, j.concurrency_key, c.lane_seq
    FROM awa.claim_ready_runtime('pk_cap', 10) c JOIN awa.jobs j ON j.id = c.job_id;
-- a, a, -, b, then the third a (lane_seq 5) is at the cap: the claim stops before it.
SELECT lane_seq, concurrency_key FROM pk_running ORDER BY lane_seq;
SELECT count(*) AS claimed_at_cap FROM awa.claim_ready_runtime('pk_cap', 10);
SELECT awa.wait_for_jobs('pk_cap', 0) AS work_after_capped_claim;
-- A completion of an 'a' frees its place at once: the next claim goes on from lane_seq 5.
SELECT count(*) AS completed FROM awa.complete_jobs(
    ARRAY(SELECT job_id FROM pk_running WHERE concurrency_key = 'a' ORDER BY lane_seq LIMIT 1),
    ARRAY(SELECT run_lease FROM pk_running WHERE concurrency_key = 'a' ORDER BY lane_seq LIMIT 1));
DELETE FROM pk_running WHERE lane_seq = (SELECT min(lane_seq) FROM pk_running WHERE concurrency_key = 'a');
INSERT INTO pk_running SELECT c.job_id, c.run_lease, j.concurrency_key, c.lane_seq
    FROM awa.claim_ready_runtime('pk_cap', 10) c JOIN awa.jobs j ON j.id = c.job_id;
-- a(5), b(6), -(7), then the third b (8) is at the cap.
SELECT lane_seq, concurrency_key FROM pk_running ORDER BY lane_seq;
SELECT concurrency_key, count(*) AS running FROM awa.jobs WHERE queue = 'pk_cap' AND state = 'running' GROUP BY 1 ORDER BY 1 NULLS LAST;
-- A failure (retried later) and a cancel free places too: b(8) and then a(9) go.
SELECT awa.fail_job(job_id, run_lease, 'boom', interval '1 hour') FROM pk_running
 WHERE concurrency_key = 'b' ORDER BY lane_seq LIMIT 1;
SELECT awa.cancel_job(job_id) FROM pk_running WHERE concurrency_key = 'a' ORDER BY lane_seq LIMIT 1;
SELECT c.lane_seq, j.concurrency_key FROM awa.claim_ready_runtime('pk_cap', 10) c JOIN awa.jobs j ON j.id = c.job_id
 ORDER BY 1;
-- The retried job keeps its key.
SELECT state, concurrency_key FROM awa.jobs WHERE queue = 'pk_cap' AND state = 'retryable';
-- Removing the limit lifts the cap.
SELECT awa.set_concurrency_limit('pk_cap', NULL, p_per_key => true);
SELECT cardinality(awa.insert_jobs('pk_cap', ARRAY['k'], p_concurrency_keys => ARRAY['a', 'a'])) AS enqueued;
SELECT count(*) AS claimed_uncapped FROM awa.claim_ready_runtime('pk_cap', 10);
SELECT queue, concurrency_limit, key_concurrency_limit FROM awa.queues WHERE queue = 'pk_cap';

-- 4. A lane that begins with a capped key's job does not hold back the other lanes: with
--    ordering keys, key 'x' and key 'y' live on different shards.
SELECT awa.create_queue('pk_lanes', 4);
SELECT awa.set_concurrency_limit('pk_lanes', 1, p_per_key => true);
SELECT awa.shard_for_enqueue('pk_lanes', 2, 'x'::bytea) <> awa.shard_for_enqueue('pk_lanes', 2, 'y'::bytea) AS apart;
SELECT cardinality(awa.insert_jobs('pk_lanes', ARRAY['k'], p_ordering_keys => ARRAY['x', 'x', 'x']::bytea[],
    p_concurrency_keys => ARRAY['x', 'x', 'x'])) AS x_jobs;
SELECT count(*) AS x_claimed FROM awa.claim_ready_runtime('pk_lanes', 10);
SELECT cardinality(awa.insert_jobs('pk_lanes', ARRAY['k'], p_ordering_keys => ARRAY['y', 'y']::bytea[],
    p_concurrency_keys => ARRAY['y', 'y'])) AS y_jobs;
-- The walk may try x's lane first; it is passed over and y's lane is claimed.
SELECT j.concurrency_key, count(*) FROM awa.claim_ready_runtime('pk_lanes', 10) c JOIN awa.jobs j ON j.id = c.job_id
 GROUP BY 1;
SELECT count(*) AS nothing_left_to_claim FROM awa.claim_ready_runtime('pk_lanes', 10);
-- Within one lane the cap is head-of-line: a key at its cap holds back the jobs behind it
-- (documented; keeps the lane's order).
SELECT cardinality(awa.insert_jobs('pk_lanes', ARRAY['k'], p_ordering_keys => ARRAY['x']::bytea[],
    p_concurrency_keys => ARRAY['z'])) AS z_behind_x;
SELECT count(*) AS z_held_back FROM awa.claim_ready_runtime('pk_lanes', 10);

-- 5. Attempts already running when the limit is set count against it, in both modes: with
--    leases (a lease row per attempt) and with receipts.
SELECT awa.create_queue('pk_set', 1);
UPDATE awa.plane_settings SET receipts = false;
SELECT cardinality(awa.insert_jobs('pk_set', ARRAY['k'], p_concurrency_keys => array_fill('s'::text, ARRAY[6]))) AS enqueued;
SELECT count(*) AS leased_before_limit FROM awa.claim_ready_runtime('pk_set', 2);
UPDATE awa.plane_settings SET receipts = true;
SELECT count(*) AS receipts_before_limit FROM awa.claim_ready_runtime('pk_set', 1);
SELECT awa.set_concurrency_limit('pk_set', 3, p_per_key => true);
SELECT count(*) AS recorded FROM awa.key_attempts WHERE queue = 'pk_set';
SELECT count(*) AS claimed_at_cap FROM awa.claim_ready_runtime('pk_set', 5);
-- The lease's completion frees one place; the entry of the ended attempt goes.
SELECT count(*) AS completed FROM awa.complete_jobs(
    ARRAY(SELECT job_id FROM awa.leases WHERE queue = 'pk_set' ORDER BY job_id LIMIT 1),
    ARRAY(SELECT run_lease FROM awa.leases WHERE queue = 'pk_set' ORDER BY job_id LIMIT 1));
SELECT count(*) AS claimed_after_lease_exit FROM awa.claim_ready_runtime('pk_set', 5);
SELECT count(*) AS recorded FROM awa.key_attempts WHERE queue = 'pk_set';
-- An entry whose claim batch is gone (as when its claim-ring slot is pruned) has ended: the
-- two receipts' places are free again (the lease still holds one).
DELETE FROM awa.claim_batches WHERE queue = 'pk_set';
SELECT count(*) AS claimed_after_batches_gone FROM awa.claim_ready_runtime('pk_set', 5);
-- Removing the limit forgets the entries; drop_queue too.
SELECT awa.set_concurrency_limit('pk_set', NULL, p_per_key => true);
SELECT count(*) AS recorded_after_removal FROM awa.key_attempts WHERE queue = 'pk_set';
SELECT awa.drop_queue('pk_set', true) >= 0 AS dropped;

-- 6. Who may do what: producers give keys, only awa_admin sets limits (42501 otherwise).
CREATE ROLE pk_producer IN ROLE awa_producer;
CREATE ROLE pk_worker IN ROLE awa_worker;
CREATE ROLE pk_admin IN ROLE awa_admin;
SET ROLE pk_producer;
SELECT pg_temp.sqlstate_of($$SELECT awa.insert_job_compat('k', 'pk_cap', p_concurrency_key => 'p')$$) AS producer_key;
SELECT pg_temp.sqlstate_of($$SELECT awa.insert_jobs('pk_cap', ARRAY['k'], p_concurrency_keys => ARRAY['p'])$$) AS producer_keys;
SELECT pg_temp.sqlstate_of($$SELECT awa.set_concurrency_limit('pk_cap', 1, true)$$) AS producer_limit;
SET ROLE pk_worker;
SELECT pg_temp.sqlstate_of($$SELECT awa.set_concurrency_limit('pk_cap', 1, true)$$) AS worker_limit;
SET ROLE pk_admin;
SELECT pg_temp.sqlstate_of($$SELECT awa.set_concurrency_limit('pk_cap', 1, true)$$) AS admin_limit;
RESET ROLE;
DROP ROLE pk_producer;
DROP ROLE pk_worker;
DROP ROLE pk_admin;
SELECT queue, key_concurrency_limit FROM awa.queues WHERE queue = 'pk_cap';
-- It waits for the claims of the keys it touches and must see what they committed: READ COMMITTED only.
BEGIN ISOLATION LEVEL REPEATABLE READ;
SELECT pg_temp.sqlstate_of($$SELECT awa.set_concurrency_limit('pk_cap', 2, true)$$) AS repeatable_read;
ROLLBACK;

SELECT awa.drop_queue(q, true) >= 0 AS dropped FROM unnest(ARRAY['pk_cap', 'pk_lanes']) q;
SELECT count(*) AS entries_left FROM awa.key_attempts WHERE queue LIKE 'pk\_%';

-- 7. The per-key claim reads its window, counts its keys' running attempts, drains and
--    records its keyed attempts without planned statements (src/direct_drain.cpp,
--    direct_key_places.cpp, flow_control.cpp); the statements still run where the direct
--    routines step aside (a trigger on awa.key_attempts: the count and record statements; a
--    trigger on awa.claim_marks: the drain statement and the record statement), and
--    every path returns and writes the same. Which one ran is read from this backend's plan
--    cache (a kept statement has a memory context named by its text), as in claim_direct.
\c
SET client_min_messages = warning;
CREATE FUNCTION pg_temp.kept(p_prefix text) RETURNS bigint LANGUAGE sql
    AS $$SELECT count(*) FROM pg_backend_memory_contexts WHERE ident LIKE p_prefix || '%'$$;
CREATE FUNCTION pg_temp.statements() RETURNS TABLE (window_ bigint, count_ bigint, drain bigint, record bigint) LANGUAGE sql
    AS $$SELECT pg_temp.kept('SELECT r.concurrency_key FROM awa.ready_entries r'),
                pg_temp.kept('WITH places AS MATERIALIZED (SELECT c.concurrency_key, c.place'),
                pg_temp.kept('WITH window_ AS MATERIALIZED'),
                pg_temp.kept('WITH d AS MATERIALIZED (SELECT d.*, r.concurrency_key')$$;
SELECT awa.create_queue(q, 1) FROM unnest(ARRAY['pk_direct', 'pk_stmt', 'pk_rec']) q;
SELECT cardinality(awa.insert_jobs(q, ARRAY['k'], p_concurrency_keys => ARRAY['a', 'a', NULL, 'b', 'a', 'b']))
  FROM unnest(ARRAY['pk_direct', 'pk_stmt', 'pk_rec']) q;
SELECT awa.set_concurrency_limit(q, 2, p_per_key => true) FROM unnest(ARRAY['pk_direct', 'pk_stmt', 'pk_rec']) q;
CREATE TEMP TABLE pk_paths AS
  SELECT 'direct'::text AS path, c.* FROM awa.claim_ready_runtime('pk_direct', 10, 30, 0) c;
-- a, a, -, b, then the third a is at its cap; no statement read, counted, drained or recorded.
SELECT c.lane_seq, j.concurrency_key FROM pk_paths c JOIN awa.jobs j ON j.id = c.job_id ORDER BY 1;
SELECT * FROM pg_temp.statements();
-- The direct drain with the count and record statements, where the direct count and insert step aside.
CREATE FUNCTION pg_temp.keep_row() RETURNS trigger LANGUAGE plpgsql AS $$BEGIN RETURN NEW; END $$;
CREATE TRIGGER pk_paths_test BEFORE INSERT ON awa.key_attempts FOR EACH ROW EXECUTE FUNCTION pg_temp.keep_row();
INSERT INTO pk_paths SELECT 'record', c.* FROM awa.claim_ready_runtime('pk_rec', 10, 30, 0) c;
DROP TRIGGER pk_paths_test ON awa.key_attempts;
SELECT * FROM pg_temp.statements();
-- The drain statement (and with it the record statement) where the direct drain steps aside.
CREATE TRIGGER pk_paths_test BEFORE INSERT ON awa.claim_marks FOR EACH ROW EXECUTE FUNCTION pg_temp.keep_row();
INSERT INTO pk_paths SELECT 'statement', c.* FROM awa.claim_ready_runtime('pk_stmt', 10, 30, 0) c;
DROP TRIGGER pk_paths_test ON awa.claim_marks;
SELECT * FROM pg_temp.statements();
-- The same rows on every path, and the same key_attempts rows: one place per keyed attempt
-- (a key's places numbered from 0), naming the claimed job's attempt, its lane and ready
-- row, the claim ring's slot and no lease slot.
SELECT path, count(*) AS rows_, array_agg(lane_seq ORDER BY lane_seq) AS lane_seqs,
       bool_and(run_lease = 1 AND attempt = 1 AND claim_slot IS NOT NULL AND lease_slot IS NULL) AS receipts
  FROM pk_paths GROUP BY path ORDER BY path;
SELECT c.path, array_agg(row(k.concurrency_key, k.place, k.lane_seq, k.priority, k.enqueue_shard, k.lease_slot IS NULL,
                             k.claim_slot = c.claim_slot, k.ready_slot = c.ready_slot,
                             k.ready_generation = c.ready_generation, k.run_lease = c.run_lease) ORDER BY k.lane_seq) AS key_attempts
  FROM awa.key_attempts k JOIN pk_paths c ON c.job_id = k.job_id AND c.queue = k.queue
 WHERE k.queue IN ('pk_direct', 'pk_stmt', 'pk_rec') GROUP BY c.path ORDER BY c.path;
SELECT queue, count(*) AS entries FROM awa.key_attempts WHERE queue IN ('pk_direct', 'pk_stmt', 'pk_rec')
 GROUP BY 1 ORDER BY 1;
-- The directly recorded attempts count: with two 'a' running the third waits; a completion
-- of an 'a' frees its place at once, and the third 'a' and the second 'b' go.
SELECT count(*) AS claimed_at_cap FROM awa.claim_ready_runtime('pk_direct', 10);
SELECT count(*) AS completed FROM awa.complete_jobs(
    ARRAY(SELECT job_id FROM pk_paths WHERE path = 'direct' ORDER BY lane_seq LIMIT 1),
    ARRAY(SELECT run_lease FROM pk_paths WHERE path = 'direct' ORDER BY lane_seq LIMIT 1));
SELECT c.lane_seq, j.concurrency_key FROM awa.claim_ready_runtime('pk_direct', 10) c JOIN awa.jobs j ON j.id = c.job_id
 ORDER BY 1;
-- The third 'a' took the completed attempt's place (updated in place); the second 'b' a new place.
SELECT array_agg(row(concurrency_key, place, lane_seq) ORDER BY concurrency_key, place) AS places
  FROM awa.key_attempts WHERE queue = 'pk_direct';
-- The same on the statement paths (the count and record statements find the same places).
SELECT p AS path, (SELECT count(*) FROM awa.complete_jobs(
    ARRAY(SELECT job_id FROM pk_paths WHERE path = p ORDER BY lane_seq LIMIT 1),
    ARRAY(SELECT run_lease FROM pk_paths WHERE path = p ORDER BY lane_seq LIMIT 1))) AS completed
  FROM unnest(ARRAY['record', 'statement']) p;
CREATE TRIGGER pk_paths_test BEFORE INSERT ON awa.key_attempts FOR EACH ROW EXECUTE FUNCTION pg_temp.keep_row();
SELECT count(*) AS claimed FROM awa.claim_ready_runtime('pk_rec', 10);
DROP TRIGGER pk_paths_test ON awa.key_attempts;
CREATE TRIGGER pk_paths_test BEFORE INSERT ON awa.claim_marks FOR EACH ROW EXECUTE FUNCTION pg_temp.keep_row();
SELECT count(*) AS claimed FROM awa.claim_ready_runtime('pk_stmt', 10);
DROP TRIGGER pk_paths_test ON awa.claim_marks;
SELECT queue, array_agg(row(concurrency_key, place, lane_seq) ORDER BY concurrency_key, place) AS places
  FROM awa.key_attempts WHERE queue IN ('pk_direct', 'pk_stmt', 'pk_rec') GROUP BY 1 ORDER BY 1;
SELECT awa.drop_queue(q, true) >= 0 AS dropped FROM unnest(ARRAY['pk_direct', 'pk_stmt', 'pk_rec']) q;
SELECT count(*) AS entries_left FROM awa.key_attempts WHERE queue LIKE 'pk\_%';

-- 8. A key's places are reused: its next claim puts its attempt in the place an ended attempt
--    left (an update in place, HOT: no index entry), so cycles of claim and completion insert
--    and delete no key_attempts row; a key that ran two attempts at once and now runs one
--    keeps one place (the free place left over is removed). The same on the statements' path.
--    Read in the cycles' own transaction from the table's counters (their change over it).
SELECT awa.create_queue(q, 1) FROM unnest(ARRAY['pk_cycle', 'pk_cycle_stmt']) q;
SELECT awa.set_concurrency_limit(q, 2, p_per_key => true) FROM unnest(ARRAY['pk_cycle', 'pk_cycle_stmt']) q;
SELECT cardinality(awa.insert_jobs(q, ARRAY['k'], p_concurrency_keys => array_fill('a'::text, ARRAY[30])))
  FROM unnest(ARRAY['pk_cycle', 'pk_cycle_stmt']) q;
CREATE TEMP TABLE pk_held AS
  SELECT c.job_id, c.run_lease FROM unnest(ARRAY['pk_cycle', 'pk_cycle_stmt']) q, awa.claim_ready_runtime(q, 2) c;
SELECT count(*) AS completed FROM awa.complete_jobs(ARRAY(SELECT job_id FROM pk_held), ARRAY(SELECT run_lease FROM pk_held));
SELECT queue, array_agg(place ORDER BY place) AS places FROM awa.key_attempts
 WHERE queue IN ('pk_cycle', 'pk_cycle_stmt') GROUP BY 1 ORDER BY 1;
CREATE FUNCTION pg_temp.cycles(p_queue text, p_n integer) RETURNS TABLE (inserted bigint, updated bigint, hot_updated bigint, deleted bigint)
    LANGUAGE plpgsql AS $$
DECLARE
    r record;
    t regclass := 'awa.key_attempts';
    i0 bigint := pg_stat_get_xact_tuples_inserted(t);
    u0 bigint := pg_stat_get_xact_tuples_updated(t);
    h0 bigint := pg_stat_get_xact_tuples_hot_updated(t);
    d0 bigint := pg_stat_get_xact_tuples_deleted(t);
BEGIN
    FOR i IN 1 .. p_n LOOP
        SELECT c.job_id, c.run_lease INTO r FROM awa.claim_ready_runtime(p_queue, 1) c;
        PERFORM awa.complete_jobs(ARRAY[r.job_id], ARRAY[r.run_lease]);
    END LOOP;
    RETURN QUERY SELECT pg_stat_get_xact_tuples_inserted(t) - i0, pg_stat_get_xact_tuples_updated(t) - u0,
                        pg_stat_get_xact_tuples_hot_updated(t) - h0, pg_stat_get_xact_tuples_deleted(t) - d0;
END $$;
BEGIN;
SELECT * FROM pg_temp.cycles('pk_cycle', 10);
COMMIT;
BEGIN;
CREATE TRIGGER pk_paths_test BEFORE INSERT ON awa.key_attempts FOR EACH ROW EXECUTE FUNCTION pg_temp.keep_row();
SELECT * FROM pg_temp.cycles('pk_cycle_stmt', 10);
DROP TRIGGER pk_paths_test ON awa.key_attempts;
COMMIT;
SELECT queue, array_agg(row(place, job_id = (SELECT max(j.id) FROM awa.jobs j WHERE j.queue = k.queue AND j.state = 'completed'))
                        ORDER BY place) AS places
  FROM awa.key_attempts k WHERE queue IN ('pk_cycle', 'pk_cycle_stmt') GROUP BY 1 ORDER BY 1;
SELECT awa.drop_queue(q, true) >= 0 AS dropped FROM unnest(ARRAY['pk_cycle', 'pk_cycle_stmt']) q;
