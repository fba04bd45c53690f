-- flow_control: concurrency limits of a queue, the checks of both limits and who may set
-- them (docs/api.md, "Flow control"); the same with or without the preload. Rate limits,
-- whose buckets need the preload, are in rate_limit.sql. It calls each queue's functions alone
-- in their statements so that it runs through a Citus coordinator too.
\set ECHO none
\i sql/sqlstate_of.psql
\set ECHO all

SELECT awa.create_queue('fc_rate', 4);
SELECT coalesce(cardinality(ids), 0) AS enqueued
  FROM awa.insert_jobs('fc_rate', array_fill('k'::text, ARRAY[40]), p_spread_keyless => true) AS ids;

-- 1. Bad input: 22023 naming the argument, NULL 22004, unknown queue 42704.
SELECT a.call, pg_temp.sqlstate_of(a.call) AS result FROM (VALUES
    ($$SELECT awa.set_rate_limit('fc_rate', 0)$$),
    ($$SELECT awa.set_rate_limit('fc_rate', -1)$$),
    ($$SELECT awa.set_rate_limit('fc_rate', 'NaN')$$),
    ($$SELECT awa.set_rate_limit('fc_rate', 'Infinity')$$),
    ($$SELECT awa.set_rate_limit('fc_rate', 2e9)$$),
    ($$SELECT awa.set_rate_limit('fc_rate', 1, 0)$$),
    ($$SELECT awa.set_rate_limit('fc_rate', 1, 1000001)$$),
    ($$SELECT awa.set_rate_limit('fc_rate', 1, NULL)$$),
    ($$SELECT awa.set_rate_limit('fc_rate', 0, 1, true)$$),
    ($$SELECT awa.set_rate_limit('fc_rate', 1, 1, NULL)$$),
    ($$SELECT awa.set_rate_limit('fc_nope', 1)$$),
    ($$SELECT awa.set_rate_limit(NULL, 1)$$),
    ($$SELECT awa.set_concurrency_limit('fc_rate', 0)$$),
    ($$SELECT awa.set_concurrency_limit('fc_rate', -5)$$),
    ($$SELECT awa.set_concurrency_limit('fc_rate', 1000001)$$),
    ($$SELECT awa.set_concurrency_limit('fc_rate', 1, NULL)$$),
    ($$SELECT awa.set_concurrency_limit('fc_nope', 1)$$)) a(call);
-- A failed call changed nothing.
SELECT queue, rate_per_second, rate_burst, concurrency_limit FROM awa.queues WHERE queue = 'fc_rate';

-- 2. Concurrency limit 3: claims start at most 3 attempts in all; a completion, a failure
--    and a cancel each free a place (the rest of the exits free one the same way: the
--    count is the running attempts of awa.queues).
SELECT awa.create_queue('fc_conc', 2);
SELECT coalesce(cardinality(ids), 0) AS enqueued
  FROM awa.insert_jobs('fc_conc', array_fill('k'::text, ARRAY[20]), p_spread_keyless => true) AS ids;
SELECT awa.set_concurrency_limit('fc_conc', 3);
SELECT queue, rate_per_second, rate_burst, concurrency_limit FROM awa.queues WHERE queue = 'fc_conc';
-- fc_running keeps the open attempts (job_id, run_lease) each claim returned.
SELECT coalesce(array_agg(job_id), '{}') AS ids, coalesce(array_agg(run_lease), '{}') AS leases
  FROM awa.claim_ready_runtime('fc_conc', 2) \gset
CREATE TEMP TABLE fc_running AS SELECT * FROM unnest(:'ids'::bigint[], :'leases'::bigint[]) r(job_id, run_lease);
SELECT count(*) AS claimed FROM fc_running;
SELECT coalesce(array_agg(job_id), '{}') AS ids, coalesce(array_agg(run_lease), '{}') AS leases
  FROM awa.claim_ready_runtime('fc_conc', 5) \gset
INSERT INTO fc_running SELECT * FROM unnest(:'ids'::bigint[], :'leases'::bigint[]);
SELECT count(*) AS running FROM fc_running;
SELECT count(*) AS claimed_at_cap FROM awa.claim_ready_runtime('fc_conc', 5);
SELECT running FROM awa.queues WHERE queue = 'fc_conc';
SELECT awa.wait_for_jobs('fc_conc', 0) AS work_at_cap;
-- A completion frees one place.
SELECT job_id, run_lease FROM fc_running ORDER BY job_id LIMIT 1 \gset
SELECT count(*) AS completed FROM awa.complete_jobs(ARRAY[:job_id]::bigint[], ARRAY[:run_lease]::bigint[], p_queue => 'fc_conc');
DELETE FROM fc_running WHERE job_id = (SELECT min(job_id) FROM fc_running);
SELECT awa.wait_for_jobs('fc_conc', 0) AS work_below_cap;
SELECT coalesce(array_agg(job_id), '{}') AS ids, coalesce(array_agg(run_lease), '{}') AS leases
  FROM awa.claim_ready_runtime('fc_conc', 5) \gset
INSERT INTO fc_running SELECT * FROM unnest(:'ids'::bigint[], :'leases'::bigint[]);
SELECT count(*) AS running FROM fc_running;
-- A failure (to retry later) and a cancel each free one.
SELECT job_id, run_lease FROM fc_running ORDER BY job_id LIMIT 1 \gset
SELECT awa.fail_job(:job_id, :run_lease, 'boom', interval '1 hour', p_queue => 'fc_conc');
SELECT job_id FROM fc_running ORDER BY job_id DESC LIMIT 1 \gset
SELECT awa.cancel_job(:job_id, p_queue => 'fc_conc');
SELECT count(*) AS claimed_after_exits FROM awa.claim_ready_runtime('fc_conc', 5);
SELECT running FROM awa.queues WHERE queue = 'fc_conc';
-- A higher limit gives room at once; without a limit, claims are not capped.
SELECT awa.set_concurrency_limit('fc_conc', 5);
SELECT count(*) AS claimed_to_new_cap FROM awa.claim_ready_runtime('fc_conc', 5);
SELECT awa.set_concurrency_limit('fc_conc', NULL);
SELECT count(*) AS claimed_uncapped FROM awa.claim_ready_runtime('fc_conc', 1);
SELECT queue, concurrency_limit, running FROM awa.queues WHERE queue = 'fc_conc';

-- 3. Who may set limits: awa_admin, not a worker or producer (42501). The settings travel
--    with the queue's settings row, which pg_dump keeps (awa.queue_meta is configuration).
--    The roles may log in: on a Citus cluster a call runs on its queue's worker as the role.
CREATE ROLE fc_worker LOGIN IN ROLE awa_worker;
CREATE ROLE fc_admin LOGIN IN ROLE awa_admin;
SET ROLE fc_worker;
SELECT pg_temp.sqlstate_of($$SELECT awa.set_rate_limit('fc_rate', 1)$$) AS worker_rate;
SELECT pg_temp.sqlstate_of($$SELECT awa.set_concurrency_limit('fc_rate', 1)$$) AS worker_concurrency;
SET ROLE fc_admin;
SELECT awa.set_rate_limit('fc_rate', NULL) AS admin_rate;
SELECT awa.set_concurrency_limit('fc_rate', 7) AS admin_concurrency;
RESET ROLE;
DROP ROLE fc_worker;
DROP ROLE fc_admin;
SELECT queue, rate_per_second, rate_burst, concurrency_limit FROM awa.queues WHERE queue = 'fc_rate';
SELECT pg_catalog.pg_get_expr(c.conbin, c.conrelid) IS NOT NULL AS checked, c.conname
  FROM pg_constraint c WHERE c.conrelid = 'awa.queue_meta'::regclass AND c.conname LIKE 'queue_meta_%limit' ORDER BY 2;

SELECT awa.drop_queue('fc_rate', true) AS dropped;
SELECT awa.drop_queue('fc_conc', true) AS dropped;
