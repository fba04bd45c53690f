-- ops_admin: cancel, delete, priority aging, move, DLQ and pause on a sharded queue, and
-- the ADR's reason for the shard predicate: two shards holding the same lane_seq, an
-- operation on one never touches the other.
\set VERBOSITY terse
CREATE TEMP TABLE ops_admin_saved AS SELECT receipts FROM awa.plane_settings;
UPDATE awa.plane_settings SET receipts = true;

-- Jobs labelled by args->>'n'; 'shard-fixture-0' routes to shard 0 and 'shard-fixture-1'
-- to shard 1 at S = 2 (and S = 4).
CREATE FUNCTION pg_temp.ops_add(p_queue text, p_label text, p_key text, p_priority int DEFAULT 2,
                                p_run_at timestamptz DEFAULT NULL) RETURNS bigint
    LANGUAGE sql AS $$
    SELECT id FROM awa.insert_job_compat('ops', p_queue, jsonb_build_object('n', p_label),
        p_priority => p_priority::smallint, p_run_at => p_run_at,
        p_ordering_key => CASE WHEN p_key IS NOT NULL THEN convert_to(p_key, 'UTF8') END)
$$;
CREATE FUNCTION pg_temp.ops_id(p_label text) RETURNS bigint
    LANGUAGE sql AS $$ SELECT id FROM awa.jobs WHERE args->>'n' = p_label $$;

-- 1. Twins: same queue, priority and lane_seq on shards 0 and 1.
SELECT awa.set_enqueue_shards('ops_twin', 2) AS previous_width;
SELECT pg_temp.ops_add('ops_twin', 'A1', 'shard-fixture-0') > 0 AS a1,
       pg_temp.ops_add('ops_twin', 'B1', 'shard-fixture-1') > 0 AS b1;
SELECT pg_temp.ops_add('ops_twin', 'A2', 'shard-fixture-0') > 0 AS a2,
       pg_temp.ops_add('ops_twin', 'B2', 'shard-fixture-1') > 0 AS b2;
SELECT pg_temp.ops_add('ops_twin', 'A3', 'shard-fixture-0', 3, now() - interval '1 hour') > 0 AS a3,
       pg_temp.ops_add('ops_twin', 'B3', 'shard-fixture-1', 3) > 0 AS b3;
SELECT pg_temp.ops_add('ops_twin', 'A4', 'shard-fixture-0', 4) > 0 AS a4,
       pg_temp.ops_add('ops_twin', 'B4', 'shard-fixture-1', 4) > 0 AS b4;
CREATE TEMP TABLE ops_twin_before AS
    SELECT args->>'n' AS n, id, state, priority, enqueue_shard, lane_seq FROM awa.jobs WHERE queue = 'ops_twin';
SELECT n, state, priority, enqueue_shard, lane_seq FROM ops_twin_before ORDER BY n;

SELECT awa.cancel_job(pg_temp.ops_id('A1')) AS cancel_a1;
SELECT awa.delete_job(pg_temp.ops_id('A2')) AS delete_a2;
SELECT awa.age_waiting_priorities(interval '30 minutes', 100, 'ops_twin') AS aged;
SELECT awa.move_queue(pg_temp.ops_id('A4'), 'ops_twin_dest') AS move_a4;
-- Every B twin is exactly as it was; A1 cancelled on its own identity, A2 gone, A3 one
-- priority up on its key's shard, A4 in the destination queue.
SELECT b.n, j.state, j.priority, j.enqueue_shard, j.lane_seq,
       (j.id, j.state, j.priority, j.enqueue_shard, j.lane_seq) = (b.id, b.state, b.priority, b.enqueue_shard, b.lane_seq) AS untouched
  FROM ops_twin_before b JOIN awa.jobs j ON j.id = b.id WHERE b.n LIKE 'B%' ORDER BY b.n;
SELECT j.args->>'n' AS n, j.queue, j.state, j.priority, j.enqueue_shard, j.lane_seq, j.metadata
  FROM awa.jobs j WHERE j.args->>'n' LIKE 'A%' ORDER BY 1;
SELECT count(*) AS ready_rows_left FROM awa.ready_entries WHERE queue = 'ops_twin';
SELECT state, count(*) FROM awa.jobs WHERE queue = 'ops_twin' GROUP BY state ORDER BY state;

-- 2. Cancel in each state; a second cancel and a cancel of a terminal job return false.
SELECT awa.set_enqueue_shards('ops_cancel', 4) AS previous_width;
SELECT pg_temp.ops_add('ops_cancel', 'C-ready', 'shard-fixture-3') > 0 AS ready,
       pg_temp.ops_add('ops_cancel', 'C-deferred', NULL, 2, now() + interval '1 day') > 0 AS deferred;
SELECT awa.cancel_job(pg_temp.ops_id('C-ready')) AS ready, awa.cancel_job(pg_temp.ops_id('C-ready')) AS again,
       awa.cancel_job(pg_temp.ops_id('C-deferred')) AS deferred, awa.cancel_job(-1) AS unknown;
SELECT args->>'n' AS n, state, enqueue_shard, lane_seq, kind FROM awa.jobs WHERE queue = 'ops_cancel' ORDER BY 1;
-- A leased (leases mode) attempt: cancelled, the lease is gone, the worker's completion loses.
UPDATE awa.plane_settings SET receipts = false;
SELECT pg_temp.ops_add('ops_cancel', 'C-lease', 'shard-fixture-2') > 0 AS lease;
CREATE TEMP TABLE ops_cancel_claim AS SELECT job_id, run_lease, enqueue_shard FROM awa.claim_ready_runtime('ops_cancel', 5);
UPDATE awa.plane_settings SET receipts = true;
SELECT count(*) AS claimed, min(enqueue_shard) AS shard FROM ops_cancel_claim;
SELECT awa.cancel_job(job_id) AS lease_cancelled FROM ops_cancel_claim;
SELECT count(*) AS leases_left FROM awa.leases l JOIN ops_cancel_claim c USING (job_id);
SELECT count(*) AS completed_late FROM ops_cancel_claim c, LATERAL awa.complete_jobs(ARRAY[c.job_id], ARRAY[c.run_lease]);
SELECT state, enqueue_shard FROM awa.jobs WHERE args->>'n' = 'C-lease';
SELECT awa.cancel_job(pg_temp.ops_id('C-lease')) AS terminal_again;
-- Unique claims are released by cancel.
SELECT count(*) AS unique_claimed
  FROM awa.insert_job_compat('ops', 'ops_cancel', '{"n": "C-unique"}', p_unique_key => '\x01'::bytea,
                             p_unique_states => B'11111000');
SELECT awa.cancel_job(pg_temp.ops_id('C-unique')) AS cancelled;
SELECT count(*) AS claims_left FROM awa.job_unique_claims WHERE unique_key = '\x01'::bytea;

-- 3. delete_job in every state releases the unique claim of that job only.
SELECT awa.set_enqueue_shards('ops_delete', 4) AS previous_width;
-- D-run and D-done first: their lane's head is the oldest, so one claim takes both.
SELECT pg_temp.ops_add('ops_delete', 'D-run', 'shard-fixture-1') > 0 AS run;
SELECT pg_temp.ops_add('ops_delete', 'D-done', 'shard-fixture-1') > 0 AS done;
SELECT count(*) FROM awa.insert_job_compat('ops', 'ops_delete', '{"n": "D-ready"}', p_unique_key => '\x02'::bytea,
                                           p_unique_states => B'11111000', p_ordering_key => '\x00'::bytea);
SELECT count(*) FROM awa.insert_job_compat('ops', 'ops_delete', '{"n": "D-sched"}', p_unique_key => '\x03'::bytea,
                                           p_unique_states => B'11111000', p_run_at => now() + interval '1 day');
CREATE TEMP TABLE ops_delete_claim AS SELECT job_id, run_lease, args->>'n' AS n FROM awa.claim_ready_runtime('ops_delete', 10)
  WHERE args->>'n' IN ('D-run', 'D-done');
SELECT count(*) AS completed FROM ops_delete_claim c, LATERAL awa.complete_jobs(ARRAY[c.job_id], ARRAY[c.run_lease]) WHERE c.n = 'D-done';
SELECT args->>'n' AS n, state FROM awa.jobs WHERE queue = 'ops_delete' ORDER BY 1;
SELECT awa.delete_job(pg_temp.ops_id('D-ready')) AS ready, awa.delete_job(pg_temp.ops_id('D-sched')) AS sched,
       awa.delete_job(pg_temp.ops_id('D-run')) AS run, awa.delete_job(pg_temp.ops_id('D-done')) AS done;
SELECT count(*) AS jobs_left FROM awa.jobs WHERE queue = 'ops_delete';
SELECT count(*) AS claims_left FROM awa.job_unique_claims WHERE unique_key IN ('\x02'::bytea, '\x03'::bytea);
SELECT count(*) AS late_completion FROM ops_delete_claim c, LATERAL awa.complete_jobs(ARRAY[c.job_id], ARRAY[c.run_lease]) WHERE c.n = 'D-run';
SELECT awa.delete_job(-1) AS unknown;

-- 4. Priority aging: only waiting rows older than the interval with priority > 1; a
-- keyed row keeps its key's shard; the original priority is stamped once.
SELECT awa.set_enqueue_shards('ops_aging', 4) AS previous_width;
SELECT pg_temp.ops_add('ops_aging', 'G-old3', 'shard-fixture-3', 3, now() - interval '2 hours') > 0,
       pg_temp.ops_add('ops_aging', 'G-old1', 'shard-fixture-2', 1, now() - interval '2 hours') > 0,
       pg_temp.ops_add('ops_aging', 'G-new3', 'shard-fixture-3', 3) > 0,
       pg_temp.ops_add('ops_aging', 'G-old4', NULL, 4, now() - interval '2 hours') > 0;
SELECT pg_temp.ops_add('ops_aging_other', 'G-other', NULL, 3, now() - interval '2 hours') > 0 AS other_queue;
SELECT awa.age_waiting_priorities(interval '1 hour', 1, 'ops_aging') AS aged_first;
SELECT awa.age_waiting_priorities(interval '1 hour', 10, 'ops_aging') AS aged_rest;
SELECT awa.age_waiting_priorities(interval '1 hour', 10, 'ops_aging') AS aged_again;
SELECT args->>'n' AS n, state, priority, CASE WHEN ordering_key IS NOT NULL THEN enqueue_shard END AS key_shard,
       enqueue_shard < 4 AS in_width, metadata FROM awa.jobs WHERE queue = 'ops_aging' ORDER BY 1;
SELECT awa.age_waiting_priorities(interval '0', 10, 'ops_aging') AS aged_now;
SELECT args->>'n' AS n, priority, CASE WHEN ordering_key IS NOT NULL THEN enqueue_shard END AS key_shard,
       enqueue_shard < 4 AS in_width, metadata FROM awa.jobs WHERE queue = 'ops_aging' ORDER BY 1;
-- A claimed (running) row is never aged; a queue-limited run leaves other queues alone.
SELECT pg_temp.ops_add('ops_aging_claimed', 'G-run', NULL, 3, now() - interval '2 hours') > 0 AS run;
SELECT count(*) AS claimed FROM awa.claim_ready_runtime('ops_aging_claimed', 10);
SELECT awa.age_waiting_priorities(interval '0', 10, 'ops_aging_claimed') AS aged_claimed;
SELECT state, priority FROM awa.jobs WHERE args->>'n' = 'G-run';
SELECT priority FROM awa.jobs WHERE args->>'n' = 'G-other';

-- 5. move_queue: the destination's width decides the shard; never an out-of-range one.
SELECT awa.set_enqueue_shards('ops_move_src', 4) AS previous_width;
SELECT awa.set_enqueue_shards('ops_move_dst', 2) AS previous_width;
SELECT pg_temp.ops_add('ops_move_src', 'M-key3', 'shard-fixture-3') > 0,
       pg_temp.ops_add('ops_move_src', 'M-sched', 'shard-fixture-3', 2, now() + interval '1 day') > 0,
       pg_temp.ops_add('ops_move_src', 'M-run', 'shard-fixture-2') > 0;
SELECT awa.move_queue(pg_temp.ops_id('M-key3'), 'ops_move_dst') AS keyed,
       awa.move_queue(pg_temp.ops_id('M-sched'), 'ops_move_dst', 1::smallint) AS scheduled,
       awa.move_queue(pg_temp.ops_id('M-key3'), 'ops_move_one', 3::smallint) AS again;
SELECT count(*) AS claimed FROM awa.claim_ready_runtime('ops_move_src', 10);
SELECT awa.move_queue(pg_temp.ops_id('M-run'), 'ops_move_dst') AS running_moved, awa.move_queue(-1, 'ops_move_dst') AS unknown;
-- M-key3: S=4 shard 3 -> ops_move_dst (S=2) shard 1 = hash mod 2 -> ops_move_one (S=1) shard 0.
SELECT args->>'n' AS n, queue, state, priority, enqueue_shard, metadata FROM awa.jobs WHERE args->>'n' LIKE 'M-%' ORDER BY 1;
SELECT awa.shard_for_ordering_key('shard-fixture-3', 2) AS key3_at_2;

-- 6. DLQ: fail to DLQ, list, retry now (keyed: back on the key's shard, attempt 0),
-- retry later (scheduled), failed terminal row -> DLQ.
SELECT awa.set_enqueue_shards('ops_dlq', 4) AS previous_width;
SELECT pg_temp.ops_add('ops_dlq', 'Q-key3', 'shard-fixture-3') > 0, pg_temp.ops_add('ops_dlq', 'Q-later', NULL) > 0;
SELECT count(*) FROM awa.insert_job_compat('ops', 'ops_dlq', '{"n": "Q-fail"}', p_max_attempts => 1::smallint,
                                           p_ordering_key => convert_to('shard-fixture-1', 'UTF8'));
UPDATE awa.plane_settings SET receipts = false;
CREATE TEMP TABLE ops_dlq_claim AS SELECT job_id, run_lease, args->>'n' AS n FROM awa.claim_ready_runtime('ops_dlq', 10);
INSERT INTO ops_dlq_claim SELECT job_id, run_lease, args->>'n' FROM awa.claim_ready_runtime('ops_dlq', 10);
INSERT INTO ops_dlq_claim SELECT job_id, run_lease, args->>'n' FROM awa.claim_ready_runtime('ops_dlq', 10);
UPDATE awa.plane_settings SET receipts = true;
SELECT n FROM ops_dlq_claim ORDER BY n;
SELECT awa.fail_job_to_dlq(job_id, run_lease, 'bad', 'poison') FROM ops_dlq_claim WHERE n IN ('Q-key3', 'Q-later') ORDER BY n;
SELECT awa.fail_job(job_id, run_lease, 'boom') FROM ops_dlq_claim WHERE n = 'Q-fail';
SELECT args->>'n' AS n, queue, dlq_reason, attempt FROM awa.list_dlq('ops_dlq') ORDER BY 1;
SELECT count(*) AS other_queue FROM awa.list_dlq('ops_dlq_nothing');
-- Told another queue (p_queue, the routing argument on a Citus cluster), it moves nothing.
SELECT awa.move_failed_to_dlq(pg_temp.ops_id('Q-fail'), 'operator', p_queue => 'ops_dlq_other') AS other_queue;
SELECT awa.move_failed_to_dlq(pg_temp.ops_id('Q-fail'), 'operator') AS moved,
       awa.move_failed_to_dlq(pg_temp.ops_id('Q-fail'), 'operator') AS again;
SELECT args->>'n' AS n, kind, dlq_reason, jsonb_array_length(errors) AS errors FROM awa.list_dlq('ops_dlq', 10) ORDER BY 1;
SELECT awa.retry_from_dlq(pg_temp.ops_id('Q-key3')) AS now,
       awa.retry_from_dlq(pg_temp.ops_id('Q-later'), p_run_at => now() + interval '1 hour') AS later,
       awa.retry_from_dlq(pg_temp.ops_id('Q-fail'), 'ops_dlq_other', 1::smallint) AS elsewhere,
       awa.retry_from_dlq(-1) AS unknown;
SELECT args->>'n' AS n, queue, state, priority, attempt, enqueue_shard, ordering_key IS NOT NULL AS keyed, metadata
  FROM awa.jobs WHERE args->>'n' LIKE 'Q-%' ORDER BY 1;
SELECT count(*) AS dlq_left FROM awa.list_dlq(NULL, 100) WHERE queue = 'ops_dlq';
-- A dead letter whose unique key another live job has taken since is not retried: 23505, as an
-- enqueue of the key would get, and it stays in the DLQ (a job back without its claim would
-- leave the key free for a third job once the holder's claim goes). Once the holder has left
-- the key's states, the retry works and the retried job holds the key.
SELECT (awa.insert_job_compat('u', 'ops_dlq_key', p_unique_key => 'K'::bytea)).id AS dk_first \gset
SELECT job_id AS dk_job, run_lease AS dk_lease FROM awa.claim_ready_runtime('ops_dlq_key', 1) \gset
SELECT awa.fail_job_to_dlq(:dk_job, :dk_lease, 'bad', 'poison') AS dead_lettered;
SELECT count(*) AS key_claims FROM awa.job_unique_claims WHERE unique_key = 'K'::bytea;
SELECT (awa.insert_job_compat('u', 'ops_dlq_key', p_unique_key => 'K'::bytea)).id AS dk_holder \gset
SELECT awa.retry_from_dlq(:dk_job) AS retried_while_held;
SELECT count(*) AS still_dead_lettered FROM awa.list_dlq('ops_dlq_key');
SELECT awa.cancel_job(:dk_holder) AS holder_cancelled;
SELECT awa.retry_from_dlq(:dk_job) AS retried;
SELECT job_id = :dk_job AS retried_job_holds_key FROM awa.job_unique_claims WHERE unique_key = 'K'::bytea;

-- 7. pause / resume: a paused queue is not claimed, enqueue still works. Each returns whether
-- it changed the queue (1.1); a name that is no known queue is an error and creates nothing.
SELECT pg_temp.ops_add('ops_pause', 'P-1', NULL) > 0;
SELECT awa.pause_queue('ops_pause');
SELECT awa.pause_queue('ops_pause');
SELECT paused, paused_by IS NOT NULL AS by FROM awa.queue_meta WHERE queue = 'ops_pause';
SELECT pg_temp.ops_add('ops_pause', 'P-2', NULL) > 0 AS enqueued_while_paused;
SELECT count(*) AS claimed_while_paused FROM awa.claim_ready_runtime('ops_pause', 10);
SELECT awa.resume_queue('ops_pause');
SELECT count(*) AS claimed_after_resume FROM awa.claim_ready_runtime('ops_pause', 10);
SELECT awa.resume_queue('ops_never_paused');
SELECT count(*) AS meta_rows FROM awa.queue_meta WHERE queue = 'ops_never_paused';

-- 8. Bad input: checked before anything is written.
SELECT awa.cancel_job(NULL);
SELECT awa.move_queue(1, NULL);
SELECT awa.move_queue(1, 'ops_move_dst', 5::smallint);
SELECT awa.age_waiting_priorities(interval '-1 second', 10);
SELECT awa.age_waiting_priorities(interval '1 second', 0);
SELECT awa.age_waiting_priorities(interval '1 second', 10, '');
SELECT awa.retry_from_dlq(1, '');
SELECT awa.move_failed_to_dlq(1, NULL);
SELECT awa.move_failed_to_dlq(1, 'x', '');
SELECT awa.list_dlq('ops_dlq', 0);
SELECT awa.pause_queue(repeat('x', 201));
SELECT awa.set_enqueue_shards('ops_bad', 65);
SELECT count(*) AS meta_rows FROM awa.queue_meta WHERE queue = 'ops_bad';

UPDATE awa.plane_settings SET receipts = (SELECT receipts FROM ops_admin_saved);
