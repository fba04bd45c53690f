-- flow_control_per_key: concurrency keys on jobs and per-key concurrency limits
-- (docs/api.md, "Flow control"): the key travels with the job, set_concurrency_limit with
-- p_per_key caps each key's running attempts, an exit frees its key's place at once, a lane
-- that begins with a capped key's job does not hold back the other lanes, and who may do what.
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
    ($$SELECT awa.set_rate_limit('pk_q', 1, 1, true)$$),
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

SELECT awa.drop_queue(q, true) >= 0 AS dropped FROM unnest(ARRAY['pk_cap', 'pk_lanes']) q;
SELECT count(*) AS entries_left FROM awa.key_attempts WHERE queue LIKE 'pk\_%';
