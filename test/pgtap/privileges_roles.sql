-- Privileges (docs/design.md §12, docs/api.md "Roles and privileges"): a login role with only awa_producer enqueues and nothing else; one with
-- only awa_worker claims and finishes but cannot enqueue; PUBLIC can use nothing in awa.
BEGIN;
CREATE EXTENSION IF NOT EXISTS pgtap;
CREATE EXTENSION IF NOT EXISTS awa_shard;
SELECT plan(69);

CREATE ROLE tap_priv_producer LOGIN;
CREATE ROLE tap_priv_worker LOGIN;
CREATE ROLE tap_priv_admin LOGIN;
CREATE ROLE tap_priv_nobody LOGIN;
GRANT awa_producer TO tap_priv_producer;
GRANT awa_worker TO tap_priv_worker;
GRANT awa_admin TO tap_priv_admin;

-- Run p_sql as p_role (SET ROLE for the statement only); the first column of its first row
-- as text, 'ok' when there is none, or 'ERROR <sqlstate>'.
CREATE FUNCTION pg_temp.as_role(p_role text, p_sql text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    v_result text;
BEGIN
    EXECUTE format('SET LOCAL ROLE %I', p_role);
    BEGIN
        EXECUTE p_sql INTO v_result;
        v_result := coalesce(v_result, 'ok');
    EXCEPTION WHEN OTHERS THEN
        v_result := 'ERROR ' || SQLSTATE;
    END;
    RESET ROLE;
    RETURN v_result;
END
$$;

-- The producer: enqueues through the functions, touches no table and no worker function.
SELECT is(pg_temp.as_role('tap_priv_producer', $$SELECT current_user::text$$), 'tap_priv_producer', 'SET ROLE works for the check');
SELECT ok(pg_temp.as_role('tap_priv_producer', $$SELECT (awa.insert_job_compat('tap', 'tap_priv_q')).id$$) ~ '^[0-9]+$',
          'producer: insert_job_compat');
SELECT ok(pg_temp.as_role('tap_priv_producer', $$SELECT cardinality(awa.insert_jobs('tap_priv_q', ARRAY['a', 'b'], p_ordering_keys => ARRAY['\x01'::bytea, '\x02']))$$) = '2',
          'producer: insert_jobs');
SELECT ok(pg_temp.as_role('tap_priv_producer', $$SELECT (awa.insert_job_compat('tap', 'tap_priv_q', p_state => 'scheduled', p_run_at => now() + interval '1 hour')).id$$) ~ '^[0-9]+$',
          'producer: insert_job_compat into deferred_jobs');
SELECT is(pg_temp.as_role('tap_priv_producer', $$SELECT awa.shard_for_enqueue('tap_priv_q', 2::smallint, 'k')::text$$), '0',
          'producer: shard_for_enqueue');
SELECT is(pg_temp.as_role('tap_priv_producer', $$UPDATE awa.queue_meta SET enqueue_shards = 8 RETURNING 1$$), 'ERROR 42501',
          'producer: cannot UPDATE awa.queue_meta');
SELECT is(pg_temp.as_role('tap_priv_producer', $$INSERT INTO awa.queue_meta (queue, enqueue_shards) VALUES ('tap_priv_q', 8) RETURNING 1$$),
          'ERROR 42501', 'producer: cannot INSERT INTO awa.queue_meta');
SELECT is(pg_temp.as_role('tap_priv_producer', $$SELECT count(*) FROM awa.ready_entries$$), 'ERROR 42501',
          'producer: cannot read awa.ready_entries');
SELECT is(pg_temp.as_role('tap_priv_producer', $$INSERT INTO awa.ready_entries (ready_slot, ready_generation, job_id, kind, queue, priority, lane_seq) VALUES (0, 0, -1, 'x', 'tap_priv_q', 2, 999) RETURNING 1$$),
          'ERROR 42501', 'producer: cannot write awa.ready_entries directly');
SELECT is(pg_temp.as_role('tap_priv_producer', $$SELECT count(*) FROM awa.claim_ready_runtime('tap_priv_q', 10)$$), 'ERROR 42501',
          'producer: cannot call claim_ready_runtime');
SELECT is(pg_temp.as_role('tap_priv_producer', $$SELECT count(*) FROM awa.complete_jobs('{1}', '{1}')$$), 'ERROR 42501',
          'producer: cannot call complete_jobs');
SELECT is(pg_temp.as_role('tap_priv_producer', $$SELECT awa.fail_job(1, 1)::text$$), 'ERROR 42501', 'producer: cannot call fail_job');
SELECT is(pg_temp.as_role('tap_priv_producer', $$SELECT awa.promote_due()::text$$), 'ERROR 42501', 'producer: cannot call promote_due');
SELECT is(pg_temp.as_role('tap_priv_producer', $$SELECT nextval('awa.job_id_seq')::text$$), 'ERROR 42501',
          'producer: cannot draw job ids itself');
SELECT is(pg_temp.as_role('tap_priv_producer', $$SELECT awa._ensure_lane('tap_priv_q', 2::smallint, 5::smallint)::text$$), 'ERROR 42501',
          'producer: cannot create lanes directly');
SELECT is((SELECT count(*) FROM awa.ready_entries WHERE queue = 'tap_priv_q'), 3::bigint, 'the producer''s three ready jobs are there');
-- The producer looks its jobs up (1.1): state included, in the queue or by id alone.
CREATE TEMP TABLE tap_priv_look (id bigint);
INSERT INTO tap_priv_look
SELECT pg_temp.as_role('tap_priv_producer', $$SELECT (awa.insert_jobs('tap_priv_look_q', ARRAY['look'], p_run_ats => ARRAY[now() + interval '1 hour']))[1]::text$$)::bigint;
SELECT is(pg_temp.as_role('tap_priv_producer', format($$SELECT state::text FROM awa.get_job(%s)$$, (SELECT id FROM tap_priv_look))),
          'scheduled', 'producer: get_job(job_id) returns the state of its scheduled job');
SELECT is(pg_temp.as_role('tap_priv_producer', format($$SELECT state::text FROM awa.get_job('tap_priv_q', %s)$$,
                                                     (SELECT min(job_id) FROM awa.ready_entries WHERE queue = 'tap_priv_q'))),
          'available', 'producer: get_job(queue, job_id)');
SELECT is(pg_temp.as_role('tap_priv_producer', $$SELECT count(*)::text FROM awa.get_job(-1)$$), '0', 'producer: an unknown id is no row');
SELECT is(pg_temp.as_role('tap_priv_producer', format($$SELECT state::text FROM awa.wait_for_job(%s, 0)$$, (SELECT id FROM tap_priv_look))),
          'scheduled', 'producer: wait_for_job returns its job (at the timeout, in its current state)');
SELECT is(pg_temp.as_role('tap_priv_nobody', $$SELECT state::text FROM awa.wait_for_job(-1, 0)$$), 'ERROR 42501',
          'PUBLIC: cannot wait for jobs');
SELECT is(pg_temp.as_role('tap_priv_producer', $$SELECT count(*)::text FROM awa.list_jobs('tap_priv_q')$$), 'ERROR 42501',
          'producer: cannot list a queue''s jobs');
SELECT is(pg_temp.as_role('tap_priv_producer', $$SELECT awa.queue_depth('tap_priv_q')::text$$), 'ERROR 42501',
          'producer: cannot call queue_depth');
SELECT is(pg_temp.as_role('tap_priv_producer', $$SELECT awa.create_queue('tap_priv_new')::text$$), 'ERROR 42501',
          'producer: cannot create queues');
SELECT is(pg_temp.as_role('tap_priv_producer', $$SELECT count(*)::text FROM awa.queues$$), 'ERROR 42501',
          'producer: cannot read awa.queues');

-- The worker: claims, heartbeats and completes; cannot enqueue or read tables.
SELECT is(pg_temp.as_role('tap_priv_worker', $$SELECT count(*)::text FROM awa.claim_ready_runtime('tap_priv_q', 10)$$), '3',
          'worker: claim_ready_runtime');
SELECT is(pg_temp.as_role('tap_priv_worker', $$SELECT awa.heartbeat_jobs(array_agg(job_id), array_agg(run_lease))::text FROM (VALUES (0::bigint, 0::bigint)) v(job_id, run_lease)$$),
          '0', 'worker: heartbeat_jobs');
SELECT is(pg_temp.as_role('tap_priv_worker', $$SELECT awa.set_progress(0, 0, '{"done": 1}')::text$$), 'false',
          'worker: set_progress (no open attempt: false)');
SELECT is(pg_temp.as_role('tap_priv_producer', $$SELECT awa.set_progress(0, 0, '{"done": 1}')::text$$), 'ERROR 42501',
          'producer: cannot set progress');
SELECT is(pg_temp.as_role('tap_priv_worker', $$SELECT awa.set_jobs_progress('{0}', '{0}', '{"{\"done\": 1}"}')::text$$), '{f}',
          'worker: set_jobs_progress (no open attempt: {f})');
SELECT is(pg_temp.as_role('tap_priv_producer', $$SELECT awa.set_jobs_progress('{0}', '{0}', '{"{\"done\": 1}"}')::text$$), 'ERROR 42501',
          'producer: cannot set the progress of a batch');
SELECT is(pg_temp.as_role('tap_priv_worker',
          format($$SELECT count(*)::text FROM awa.complete_jobs(%L, %L)$$,
                 (SELECT array_agg(job_id) FROM awa.lease_claims WHERE queue = 'tap_priv_q'),
                 (SELECT array_agg(run_lease) FROM awa.lease_claims WHERE queue = 'tap_priv_q'))), '3',
          'worker: complete_jobs');
SELECT is(pg_temp.as_role('tap_priv_worker', $$SELECT awa.wait_for_jobs('tap_priv_q', 0)::text$$), 'false', 'worker: wait_for_jobs');
SELECT is(pg_temp.as_role('tap_priv_worker', $$SELECT count(*)::text FROM awa.complete_jobs('{0}', '{0}', '{"{}"}')$$), '0',
          'worker: complete_jobs with results');
SELECT is(pg_temp.as_role('tap_priv_worker', $$SELECT awa.fail_job(-1, 1)::text$$), 'ok', 'worker: fail_job');
SELECT is(pg_temp.as_role('tap_priv_worker', format($$SELECT state::text FROM awa.get_job(%s)$$,
                                                   (SELECT min(job_id) FROM awa.lease_claims WHERE queue = 'tap_priv_q'))),
          'completed', 'worker: get_job sees the job it completed');
SELECT is(pg_temp.as_role('tap_priv_worker', format($$SELECT state::text FROM awa.wait_for_job(%s, 0)$$,
                                                   (SELECT min(job_id) FROM awa.lease_claims WHERE queue = 'tap_priv_q'))),
          'completed', 'worker: wait_for_job');
SELECT is(pg_temp.as_role('tap_priv_worker', $$SELECT awa.queue_depth('tap_priv_q')::text$$), '0',
          'worker: queue_depth (what an autoscaler polls)');
SELECT is(pg_temp.as_role('tap_priv_worker', $$SELECT awa.purge_queue('tap_priv_q')::text$$), 'ERROR 42501',
          'worker: cannot purge');
SELECT is(pg_temp.as_role('tap_priv_worker', $$SELECT awa.cancel_jobs('tap_priv_q')::text$$), 'ERROR 42501',
          'worker: cannot cancel jobs in bulk');
SELECT is(pg_temp.as_role('tap_priv_producer', $$SELECT awa.retry_jobs('tap_priv_q')::text$$), 'ERROR 42501',
          'producer: cannot retry jobs in bulk');
SELECT is(pg_temp.as_role('tap_priv_admin', $$SELECT awa.retry_jobs('tap_priv_q')::text$$), '0',
          'admin: retry_jobs (nothing failed)');
SELECT is(pg_temp.as_role('tap_priv_worker', $$SELECT count(*)::text FROM awa.list_jobs('tap_priv_q')$$), 'ERROR 42501',
          'worker: cannot list a queue''s jobs');
SELECT is(pg_temp.as_role('tap_priv_worker', $$SELECT (awa.insert_job_compat('tap', 'tap_priv_q')).id$$), 'ERROR 42501',
          'worker: cannot call insert_job_compat');
SELECT is(pg_temp.as_role('tap_priv_worker', $$SELECT awa.insert_jobs('tap_priv_q', ARRAY['a'])::text$$), 'ERROR 42501',
          'worker: cannot call insert_jobs');
SELECT is(pg_temp.as_role('tap_priv_worker', $$SELECT awa.reserve_enqueue_seq('tap_priv_q', 2::smallint, 0::smallint, 1)::text$$), 'ERROR 42501',
          'worker: cannot reserve lane numbers');
SELECT is(pg_temp.as_role('tap_priv_worker', $$SELECT count(*) FROM awa.done_entries$$), 'ERROR 42501', 'worker: cannot read awa.done_entries');
SELECT is(pg_temp.as_role('tap_priv_worker', $$SELECT count(*) FROM awa.completion_batches$$), 'ERROR 42501', 'worker: cannot read awa.completion_batches');
SELECT is(pg_temp.as_role('tap_priv_worker', $$SELECT count(*) FROM awa.claim_batches$$), 'ERROR 42501', 'worker: cannot read awa.claim_batches');
SELECT is(pg_temp.as_role('tap_priv_worker', $$UPDATE awa.queue_claim_heads SET claim_seq = 1 RETURNING 1$$), 'ERROR 42501',
          'worker: cannot move claim cursors');
SELECT is(pg_temp.as_role('tap_priv_worker', $$INSERT INTO awa.claim_marks VALUES ('tap_priv_q', 2, 0, 1000) RETURNING 1$$), 'ERROR 42501',
          'worker: cannot write claim marks');
SELECT is(pg_temp.as_role('tap_priv_worker', $$SELECT awa.fold_claim_marks()::text$$), 'ERROR 42501', 'worker: cannot fold claim marks');
SELECT is(pg_temp.as_role('tap_priv_admin', $$SELECT (awa.fold_claim_marks() >= -1)::text$$), 'true', 'admin: folds claim marks');
SELECT is(pg_temp.as_role('tap_priv_worker', $$SELECT awa.prune_key_places()::text$$), 'ERROR 42501', 'worker: cannot prune key places');
SELECT is(pg_temp.as_role('tap_priv_admin', $$SELECT (awa.prune_key_places() >= 0)::text$$), 'true', 'admin: prunes key places');
SELECT is(pg_temp.as_role('tap_priv_admin', $$SELECT count(*)::text FROM awa.lane_cursors WHERE queue = 'no_such_q'$$), '0',
          'admin: reads lane cursors');
SELECT is(pg_temp.as_role('tap_priv_worker', $$SELECT awa.promote_due()::text$$), 'ERROR 42501', 'worker: cannot call promote_due');

-- The admin: reads and configures queues, runs maintenance; no direct writes to the plane.
SELECT is(pg_temp.as_role('tap_priv_admin', $$INSERT INTO awa.queue_meta (queue, enqueue_shards) VALUES ('tap_priv_q', 4) RETURNING enqueue_shards::text$$), '4',
          'admin: writes awa.queue_meta');
SELECT is(pg_temp.as_role('tap_priv_admin', $$SELECT count(*)::text FROM awa.done_entries WHERE queue = 'tap_priv_q'$$), '0', 'admin: reads awa.done_entries');
SELECT is(pg_temp.as_role('tap_priv_admin', $$SELECT sum(cardinality(lane_offsets))::text FROM awa.completion_batches WHERE queue = 'tap_priv_q'$$), '3',
          'admin: reads awa.completion_batches (the three completions)');
SELECT is(pg_temp.as_role('tap_priv_admin', $$SELECT count(*)::text FROM awa.lease_claims WHERE queue = 'tap_priv_q'$$), '3',
          'admin: reads awa.lease_claims (the three receipts, from their claim batches)');
SELECT ok(pg_temp.as_role('tap_priv_admin', $$SELECT awa.promote_due()::text$$) ~ '^[0-9]+$', 'admin: promote_due');
SELECT is(pg_temp.as_role('tap_priv_admin', $$DELETE FROM awa.ready_entries RETURNING 1$$), 'ERROR 42501', 'admin: cannot delete ready rows directly');

-- PUBLIC (a role with no grant) can use nothing in schema awa.
SELECT is(pg_temp.as_role('tap_priv_nobody', $$SELECT awa.ordering_key_hash('a'::text)::text$$), 'ERROR 42501', 'nobody: cannot even hash');
SELECT is(pg_temp.as_role('tap_priv_nobody', $$SELECT (awa.insert_job_compat('tap', 'tap_priv_q')).id$$), 'ERROR 42501', 'nobody: cannot enqueue');
SELECT is(pg_temp.as_role('tap_priv_nobody', $$SELECT count(*)::text FROM awa.get_job(1)$$), 'ERROR 42501', 'nobody: cannot look jobs up');
SELECT is((SELECT count(*) FROM pg_proc p WHERE p.pronamespace = 'awa'::regnamespace
             AND (p.proacl IS NULL OR EXISTS (SELECT 1 FROM aclexplode(p.proacl) a WHERE a.grantee = 0)))::int, 0,
          'no function in awa is executable by PUBLIC (no default ACL, no PUBLIC grant)');
SELECT is((SELECT count(*) FROM pg_class c WHERE c.relnamespace = 'awa'::regnamespace AND c.relkind IN ('r', 'p', 'v', 'S', 'm')
             AND EXISTS (SELECT 1 FROM aclexplode(coalesce(c.relacl, acldefault(CASE WHEN c.relkind = 'S' THEN 's' ELSE 'r' END::"char", c.relowner))) a
                          WHERE a.grantee = 0))::int, 0,
          'no table, view or sequence in awa grants anything to PUBLIC');
SELECT ok(NOT has_schema_privilege('tap_priv_nobody', 'awa', 'USAGE'), 'PUBLIC has no USAGE on schema awa');

SELECT * FROM finish();
ROLLBACK;
