-- Attempt exits other than success, and heartbeats (SQL; D9). Exits and heartbeats look
-- attempts up by (job_id, run_lease) and never by sequential scan.

-- Take the open attempt (job_id, run_lease): close its receipt with p_outcome (exactly
-- one closer wins) or delete its lease. NULL when the attempt is not open (stale writer).
-- The ready row is joined on the full lane identity, shard included; the attempt row's
-- columns override the ready row's where they share a name (lane priority, attempt,
-- run_lease, lane identity), and its claim time is the attempt's attempted_at. C (1.1):
-- the attempt is found on the latest committed state, so a REPEATABLE READ or SERIALIZABLE
-- caller whose snapshot predates the claim still takes it (src/attempts.cpp). With p_queue,
-- only an attempt of that queue is open, and every statement carries it.
CREATE FUNCTION awa._take_attempt(p_job_id bigint, p_run_lease bigint, p_outcome text, p_queue text DEFAULT NULL)
    RETURNS awa.taken_attempt
    AS 'MODULE_PATHNAME', 'awa_take_attempt'
    LANGUAGE C VOLATILE PARALLEL UNSAFE
    SET search_path = pg_catalog, pg_temp;
REVOKE ALL ON FUNCTION awa._take_attempt(bigint, bigint, text, text) FROM PUBLIC;
COMMENT ON FUNCTION awa._take_attempt(bigint, bigint, text, text) IS 'Internal: take the open attempt (job_id, run_lease) out of the running set.';

-- The same for the rescues: a receipt whose claim batch another transaction holds (a closer
-- of one of its jobs, not yet committed) is left for a later pass instead of waited for, so
-- a maintenance pass never waits for a worker's transaction. With p_queue, only an attempt
-- of that queue is open, and every statement carries it (the rescue of one queue on Citus).
CREATE FUNCTION awa._take_attempt_unless_busy(p_job_id bigint, p_run_lease bigint, p_outcome text,
                                              p_queue text DEFAULT NULL)
    RETURNS awa.taken_attempt
    AS 'MODULE_PATHNAME', 'awa_take_attempt_unless_busy'
    LANGUAGE C VOLATILE PARALLEL UNSAFE
    SET search_path = pg_catalog, pg_temp;
REVOKE ALL ON FUNCTION awa._take_attempt_unless_busy(bigint, bigint, text, text) FROM PUBLIC;
COMMENT ON FUNCTION awa._take_attempt_unless_busy(bigint, bigint, text, text) IS
    'Internal: awa._take_attempt, except that an attempt whose claim batch another transaction holds (receipts mode) is left alone (rescues).';

-- Take whatever attempt of a job is open: its newest open receipt, else its newest running
-- lease (C, latest committed state, like awa._take_attempt; in p_queue when given).
CREATE FUNCTION awa._take_open_attempt(p_job_id bigint, p_outcome text, p_queue text DEFAULT NULL)
    RETURNS awa.taken_attempt
    AS 'MODULE_PATHNAME', 'awa_take_open_attempt'
    LANGUAGE C VOLATILE PARALLEL UNSAFE
    SET search_path = pg_catalog, pg_temp;
REVOKE ALL ON FUNCTION awa._take_open_attempt(bigint, text, text) FROM PUBLIC;
COMMENT ON FUNCTION awa._take_open_attempt(bigint, text, text) IS 'Internal: take whatever attempt of a job is open.';

-- A worker's call naming an attempt: 22004 for a NULL p_job_id or p_run_lease, then the
-- attempt taken with p_outcome (NULL when it is not open, or not in p_queue when given).
CREATE FUNCTION awa._take_named_attempt(p_job_id bigint, p_run_lease bigint, p_outcome text,
                                        p_queue text DEFAULT NULL)
    RETURNS awa.taken_attempt
    LANGUAGE plpgsql VOLATILE
    SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    PERFORM awa._require(p_job_id IS NULL, 'p_job_id');
    PERFORM awa._require(p_run_lease IS NULL, 'p_run_lease');
    RETURN awa._take_attempt(p_job_id, p_run_lease, p_outcome, p_queue);
END
$$;
REVOKE ALL ON FUNCTION awa._take_named_attempt(bigint, bigint, text, text) FROM PUBLIC;
COMMENT ON FUNCTION awa._take_named_attempt(bigint, bigint, text, text) IS 'Internal: 22004 for a NULL job_id or run_lease, then awa._take_attempt.';

-- An ended attempt (awa.taken_attempt) to deferred_jobs (retryable or scheduled) at p_run_at.
CREATE FUNCTION awa._defer_attempt(t awa.taken_attempt, p_state awa.job_state, p_run_at timestamptz,
                                              p_attempt smallint, p_errors jsonb) RETURNS void
    LANGUAGE plpgsql VOLATILE
    SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    INSERT INTO awa.deferred_jobs
    SELECT x.* FROM awa._job_row(NULL::awa.deferred_jobs, awa._job(t), jsonb_build_object(
        'state', p_state, 'attempt', p_attempt, 'run_at', p_run_at, 'errors', p_errors,
        'finalized_at', CASE WHEN p_state = 'retryable' THEN clock_timestamp() END)) x;
    PERFORM awa._sync_unique_claim(t.job_id, t.unique_key, t.unique_states, 'running', p_state, t.queue);
END
$$;
REVOKE ALL ON FUNCTION awa._defer_attempt(awa.taken_attempt, awa.job_state, timestamptz, smallint, jsonb) FROM PUBLIC;
COMMENT ON FUNCTION awa._defer_attempt(awa.taken_attempt, awa.job_state, timestamptz, smallint, jsonb) IS 'Internal: an ended attempt''s job to deferred_jobs (retryable or scheduled).';

-- An ended attempt (awa.taken_attempt) to done_entries on its own lane identity (failed
-- or cancelled).
CREATE FUNCTION awa._finish_attempt(t awa.taken_attempt, p_state awa.job_state, p_errors jsonb) RETURNS void
    LANGUAGE plpgsql VOLATILE
    SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    INSERT INTO awa.done_entries (ready_slot, ready_generation, job_id, queue, priority, enqueue_shard,
        lane_seq, state, attempt, run_lease, attempted_at, errors)
    VALUES (t.ready_slot, t.ready_generation, t.job_id, t.queue, t.priority, t.enqueue_shard,
        t.lane_seq, p_state, t.attempt, t.run_lease, t.attempted_at, p_errors);
    PERFORM awa._sync_unique_claim(t.job_id, t.unique_key, t.unique_states, 'running', p_state, t.queue);
    PERFORM awa._job_finished(t.job_id);
END
$$;
REVOKE ALL ON FUNCTION awa._finish_attempt(awa.taken_attempt, awa.job_state, jsonb) FROM PUBLIC;
COMMENT ON FUNCTION awa._finish_attempt(awa.taken_attempt, awa.job_state, jsonb) IS 'Internal: an ended attempt''s terminal row in done_entries, on its own lane identity.';

-- An ended attempt (awa.taken_attempt) to the dead-letter queue with p_reason and its
-- errors (ordering key kept).
CREATE FUNCTION awa._dead_letter(t awa.taken_attempt, p_errors jsonb, p_reason text) RETURNS void
    LANGUAGE plpgsql VOLATILE
    SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    INSERT INTO awa.dlq_entries
    SELECT x.* FROM awa._job_row(NULL::awa.dlq_entries, awa._job(t), jsonb_build_object(
        'state', 'failed', 'errors', p_errors, 'finalized_at', clock_timestamp(), 'dlq_reason', p_reason,
        'dlq_at', clock_timestamp(), 'original_run_lease', t.run_lease)) x;
    PERFORM awa._sync_unique_claim(t.job_id, t.unique_key, t.unique_states, 'running', 'failed', t.queue);
    PERFORM awa._job_finished(t.job_id);
END
$$;
REVOKE ALL ON FUNCTION awa._dead_letter(awa.taken_attempt, jsonb, text) FROM PUBLIC;
COMMENT ON FUNCTION awa._dead_letter(awa.taken_attempt, jsonb, text) IS 'Internal: an ended attempt''s job to the dead-letter queue.';

-- A job ended where it was live (cancelled, ...): its terminal row with the job's attributes
-- on the lane identity p_lane (ready_slot, ready_generation, enqueue_shard, lane_seq), and
-- its unique claim moved from p_from to p_state.
CREATE FUNCTION awa._end_job(p_job awa.job_template, p_lane jsonb, p_from awa.job_state, p_state awa.job_state)
    RETURNS void
    LANGUAGE plpgsql VOLATILE
    SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    INSERT INTO awa.done_entries
    SELECT x.* FROM awa._job_row(NULL::awa.done_entries, p_job,
        p_lane || jsonb_build_object('state', p_state, 'finalized_at', clock_timestamp())) x;
    PERFORM awa._sync_unique_claim(p_job.job_id, p_job.unique_key, p_job.unique_states, p_from, p_state, p_job.queue);
    PERFORM awa._job_finished(p_job.job_id);
END
$$;
REVOKE ALL ON FUNCTION awa._end_job(awa.job_template, jsonb, awa.job_state, awa.job_state) FROM PUBLIC;
COMMENT ON FUNCTION awa._end_job(awa.job_template, jsonb, awa.job_state, awa.job_state) IS 'Internal: a job''s terminal row on a lane identity, its unique claim moved.';

-- Whether a queue dead-letters jobs whose last attempt failed (override, else the default).
-- plpgsql, not SQL: Citus cannot plan an SQL function's parameters over distributed tables
-- (the rescue of a job at its last attempt runs it on the queue's worker).
CREATE FUNCTION awa._dlq_enabled(p_queue text) RETURNS boolean
    LANGUAGE plpgsql STABLE
    SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_enabled boolean;
BEGIN
    -- Two statements: on a Citus cluster one statement may not read the queue's shard and a
    -- reference table inside a delegated call.
    SELECT m.dlq_enabled INTO v_enabled FROM awa.queue_meta m WHERE m.queue = p_queue;
    IF v_enabled IS NULL THEN
        SELECT s.dlq_enabled_by_default INTO v_enabled FROM awa.plane_settings s;
    END IF;
    RETURN coalesce(v_enabled, false);
END
$$;
REVOKE ALL ON FUNCTION awa._dlq_enabled(text) FROM PUBLIC;
COMMENT ON FUNCTION awa._dlq_enabled(text) IS 'Internal: whether a queue dead-letters exhausted jobs (override, else the install default).';

-- An ended attempt (awa.taken_attempt) that was the job's last (failed, rescued or past
-- its deadline): to the DLQ with reason 'max_attempts_exhausted' when its queue
-- dead-letters exhausted jobs, otherwise a failed terminal row on its own lane identity.
-- Either way the job's state is 'failed', its error is appended as terminal and the
-- failure is counted.
CREATE FUNCTION awa._fail_exhausted(t awa.taken_attempt, p_error text) RETURNS void
    LANGUAGE plpgsql VOLATILE
    SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF awa._dlq_enabled(t.queue) THEN
        PERFORM awa._dead_letter(t, awa._append_error(t.errors, p_error, t.attempt, true), 'max_attempts_exhausted');
    ELSE
        PERFORM awa._finish_attempt(t, 'failed', awa._append_error(t.errors, p_error, t.attempt, true));
    END IF;
    PERFORM awa._count_failed(t.queue, t.enqueue_shard);
END
$$;
REVOKE ALL ON FUNCTION awa._fail_exhausted(awa.taken_attempt, text) FROM PUBLIC;
COMMENT ON FUNCTION awa._fail_exhausted(awa.taken_attempt, text) IS 'Internal: end a job whose last attempt failed: the DLQ or a failed terminal row.';

-- Fail an attempt: retryable with backoff while attempts remain; after the last attempt
-- failed (dead-lettered when the queue says so). Returns the new state, or NULL when the
-- attempt was not open (stale writer, or, with p_queue, an attempt of another queue).
CREATE FUNCTION awa.fail_job(p_job_id bigint, p_run_lease bigint, p_error text DEFAULT NULL,
                                        p_retry_in interval DEFAULT NULL, p_queue text DEFAULT NULL)
    RETURNS awa.job_state
    LANGUAGE plpgsql VOLATILE
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp SET jit = off SET enable_seqscan = off
AS $$
DECLARE
    t awa.taken_attempt;
BEGIN
    PERFORM awa._require_queue_local(p_queue);  -- on a Citus cluster: delegated by p_queue, or 0A000
    PERFORM awa._require(p_job_id IS NULL OR p_run_lease IS NULL, 'p_job_id and p_run_lease');
    PERFORM awa._check_arg(NOT p_retry_in < interval '0', 'p_retry_in must not be negative');
    PERFORM awa._check_interval(p_retry_in, 'p_retry_in');
    t := awa._take_attempt(p_job_id, p_run_lease, 'retryable', p_queue);
    IF t.job_id IS NULL THEN
        RETURN NULL;
    END IF;
    IF t.attempt >= t.max_attempts THEN
        PERFORM awa._fail_exhausted(t, coalesce(p_error, 'failed'));
        RETURN 'failed';
    END IF;
    PERFORM awa._defer_attempt(t, 'retryable',
        clock_timestamp() + coalesce(p_retry_in, awa.backoff_duration(t.attempt, t.max_attempts)),
        t.attempt, awa._append_error(t.errors, coalesce(p_error, 'failed'), t.attempt, false));
    RETURN 'retryable';
END
$$;
REVOKE ALL ON FUNCTION awa.fail_job(bigint, bigint, text, interval, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION awa.fail_job(bigint, bigint, text, interval, text) TO awa_worker, awa_admin;
COMMENT ON FUNCTION awa.fail_job(bigint, bigint, text, interval, text)
    IS 'Fail an attempt: retryable with backoff while attempts remain, then failed (dead-lettered when the queue says so). Role: awa_worker, awa_admin.';

-- Fail an attempt straight into the dead-letter queue (ordering key kept). False when the
-- attempt was not open (or, with p_queue, is of another queue).
CREATE FUNCTION awa.fail_job_to_dlq(p_job_id bigint, p_run_lease bigint, p_error text DEFAULT NULL,
                                               p_reason text DEFAULT 'failed', p_queue text DEFAULT NULL)
    RETURNS boolean
    LANGUAGE plpgsql VOLATILE
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp SET jit = off SET enable_seqscan = off
AS $$
DECLARE
    t awa.taken_attempt;
BEGIN
    PERFORM awa._require_queue_local(p_queue);  -- on a Citus cluster: delegated by p_queue, or 0A000
    PERFORM awa._require(p_reason IS NULL, 'p_reason');
    t := awa._take_named_attempt(p_job_id, p_run_lease, 'dlq', p_queue);
    IF t.job_id IS NULL THEN
        RETURN false;
    END IF;
    PERFORM awa._dead_letter(t, awa._append_error(t.errors, coalesce(p_error, p_reason), t.attempt, true), p_reason);
    PERFORM awa._count_failed(t.queue, t.enqueue_shard);
    RETURN true;
END
$$;
REVOKE ALL ON FUNCTION awa.fail_job_to_dlq(bigint, bigint, text, text, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION awa.fail_job_to_dlq(bigint, bigint, text, text, text) TO awa_worker, awa_admin;
COMMENT ON FUNCTION awa.fail_job_to_dlq(bigint, bigint, text, text, text) IS 'End an attempt by moving the job to the dead-letter queue. Role: awa_worker, awa_admin.';

-- End an attempt without an error and put the job back after p_delay: retryable (the
-- attempt is consumed) or, snoozed, scheduled with the attempt given back. False when the
-- attempt was not open (stale writer, or, with p_queue, an attempt of another queue).
CREATE FUNCTION awa._put_back(p_job_id bigint, p_run_lease bigint, p_delay interval, p_snooze boolean,
                              p_queue text DEFAULT NULL)
    RETURNS boolean
    LANGUAGE plpgsql VOLATILE
    SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    t awa.taken_attempt;
BEGIN
    PERFORM awa._require_queue_local(p_queue);  -- on a Citus cluster: delegated by p_queue, or 0A000
    PERFORM awa._require(p_delay IS NULL, 'p_delay');
    IF p_delay < interval '0' THEN
        RAISE EXCEPTION 'p_delay must not be negative' USING ERRCODE = '22023';
    END IF;
    PERFORM awa._check_interval(p_delay, 'p_delay');
    t := awa._take_named_attempt(p_job_id, p_run_lease, CASE WHEN p_snooze THEN 'snoozed' ELSE 'retryable' END,
                                 p_queue);
    IF t.job_id IS NULL THEN
        RETURN false;
    END IF;
    PERFORM awa._defer_attempt(t, CASE WHEN p_snooze THEN 'scheduled' ELSE 'retryable' END::awa.job_state,
                               clock_timestamp() + p_delay,
                               CASE WHEN p_snooze THEN greatest(t.attempt - 1, 0) ELSE t.attempt END::smallint,
                               t.errors);
    RETURN true;
END
$$;
REVOKE ALL ON FUNCTION awa._put_back(bigint, bigint, interval, boolean, text) FROM PUBLIC;
COMMENT ON FUNCTION awa._put_back(bigint, bigint, interval, boolean, text) IS 'Internal: retry_job_after and snooze_job: end an attempt and defer the job.';

-- Retry an attempt after p_delay without recording an error (attempt is consumed).
CREATE FUNCTION awa.retry_job_after(p_job_id bigint, p_run_lease bigint, p_delay interval, p_queue text DEFAULT NULL)
    RETURNS boolean
    LANGUAGE sql VOLATILE
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp SET jit = off SET enable_seqscan = off
    RETURN awa._put_back(p_job_id, p_run_lease, p_delay, false, p_queue);
REVOKE ALL ON FUNCTION awa.retry_job_after(bigint, bigint, interval, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION awa.retry_job_after(bigint, bigint, interval, text) TO awa_worker, awa_admin;
COMMENT ON FUNCTION awa.retry_job_after(bigint, bigint, interval, text) IS 'End an attempt without an error; retryable after p_delay. Role: awa_worker, awa_admin.';

-- Snooze an attempt: scheduled again after p_delay; the attempt is not consumed.
CREATE FUNCTION awa.snooze_job(p_job_id bigint, p_run_lease bigint, p_delay interval, p_queue text DEFAULT NULL)
    RETURNS boolean
    LANGUAGE sql VOLATILE
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp SET jit = off SET enable_seqscan = off
    RETURN awa._put_back(p_job_id, p_run_lease, p_delay, true, p_queue);
REVOKE ALL ON FUNCTION awa.snooze_job(bigint, bigint, interval, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION awa.snooze_job(bigint, bigint, interval, text) TO awa_worker, awa_admin;
COMMENT ON FUNCTION awa.snooze_job(bigint, bigint, interval, text) IS 'Put a running job back as scheduled after p_delay without using up the attempt. Role: awa_worker, awa_admin.';

-- Record heartbeats of open attempts; returns how many are alive (with p_queue, only
-- attempts of that queue count: another queue's are left alone). C (src/attempts.cpp): checks
-- every argument, then finds the open attempts on the latest committed state.
CREATE FUNCTION awa.heartbeat_jobs(p_job_ids bigint[], p_run_leases bigint[], p_queue text DEFAULT NULL)
    RETURNS integer
    AS 'MODULE_PATHNAME', 'awa_heartbeat_jobs'
    LANGUAGE C VOLATILE PARALLEL UNSAFE
    SECURITY DEFINER;
REVOKE ALL ON FUNCTION awa.heartbeat_jobs(bigint[], bigint[], text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION awa.heartbeat_jobs(bigint[], bigint[], text) TO awa_worker, awa_admin;
COMMENT ON FUNCTION awa.heartbeat_jobs(bigint[], bigint[], text) IS 'Record that open attempts are alive; returns how many were open. Role: awa_worker, awa_admin.';

-- Record the progress of one running attempt (any JSON value, at most
-- awa._limit('max_result_bytes') bytes); it also counts as a heartbeat. True when the attempt
-- is open; a stale run lease changes nothing and returns false. The latest progress is the
-- `progress` of the job (awa.job_row) while the attempt runs; it goes with the attempt. With
-- p_queue, an attempt of another queue is not open (false). C (src/progress.cpp): checks
-- every argument, then one statement on the latest committed state in receipts mode.
CREATE FUNCTION awa.set_progress(p_job_id bigint, p_run_lease bigint, p_progress jsonb, p_queue text DEFAULT NULL)
    RETURNS boolean
    AS 'MODULE_PATHNAME', 'awa_set_progress'
    LANGUAGE C VOLATILE PARALLEL UNSAFE
    SECURITY DEFINER;
REVOKE ALL ON FUNCTION awa.set_progress(bigint, bigint, jsonb, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION awa.set_progress(bigint, bigint, jsonb, text) TO awa_worker, awa_admin;
COMMENT ON FUNCTION awa.set_progress(bigint, bigint, jsonb, text) IS 'Record the progress of a running attempt (also a heartbeat); false when the attempt is not open. Role: awa_worker, awa_admin.';

-- Record the progress of a batch of running attempts in one call: p_progress[k] for attempt
-- (p_job_ids[k], p_run_leases[k]); a NULL element is a heartbeat alone (the stored progress
-- stays). Element k of the result is true when attempt k is open (as awa.set_progress). C
-- (src/progress.cpp), like awa.set_progress.
CREATE FUNCTION awa.set_jobs_progress(p_job_ids bigint[], p_run_leases bigint[], p_progress jsonb[],
                                      p_queue text DEFAULT NULL)
    RETURNS boolean[]
    AS 'MODULE_PATHNAME', 'awa_set_jobs_progress'
    LANGUAGE C VOLATILE PARALLEL UNSAFE
    SECURITY DEFINER;
REVOKE ALL ON FUNCTION awa.set_jobs_progress(bigint[], bigint[], jsonb[], text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION awa.set_jobs_progress(bigint[], bigint[], jsonb[], text) TO awa_worker, awa_admin;
COMMENT ON FUNCTION awa.set_jobs_progress(bigint[], bigint[], jsonb[], text) IS 'Record the progress of a batch of running attempts (also heartbeats); per attempt, false when it is not open. Role: awa_worker, awa_admin.';
