-- Rescue of attempts whose worker went silent or ran past its deadline.

-- A rescued attempt: back to deferred_jobs as retryable with backoff while attempts
-- remain; at its last attempt the job ends as fail_job would leave it.
CREATE FUNCTION awa._rescue_taken(t awa.taken_attempt, p_error text) RETURNS void
    LANGUAGE plpgsql VOLATILE
    SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF t.attempt >= t.max_attempts THEN
        PERFORM awa._fail_exhausted(t, p_error);
    ELSE
        PERFORM awa._defer_attempt(t, 'retryable',
            clock_timestamp() + awa.backoff_duration(t.attempt, t.max_attempts), t.attempt,
            awa._append_error(t.errors, p_error, t.attempt, false));
    END IF;
END
$$;
REVOKE ALL ON FUNCTION awa._rescue_taken(awa.taken_attempt, text) FROM PUBLIC;
COMMENT ON FUNCTION awa._rescue_taken(awa.taken_attempt, text) IS 'Internal: a rescued attempt: retryable with backoff, or ended at its last attempt.';

-- Both rescues in one pass: attempts past their hard deadline (p_deadlines) and attempts
-- whose last heartbeat (or claim) is older than p_stale (unless NULL), up to p_limit of each,
-- taken in ONE order, the order of every exit that closes several attempts in a
-- transaction: receipts first, by their claim batch (receipt_base), then leases by
-- (job_id, run_lease). Two passes, each in that order, could deadlock a completion: the
-- second pass may go back to a lower batch than one the first holds (spec
-- maintenance_vs_complete_order). An attempt in both lists counts as a deadline rescue (one
-- past its deadline that only the heartbeat list reached, the deadline list being full, is
-- rescued as stale, as two passes would have done).
-- A receipt whose claim batch another transaction holds is left for the next pass.
-- Retryable with backoff while attempts remain, failed at the last one (like fail_job).
-- Its statements keep one generic plan: a custom plan of the search below (every partition
-- of the ready, batch and attempt tables) took 10-17 ms to make on every call, 95 % of an
-- idle maintenance pass, and the generic plan runs as fast (regression test
-- maintenance_guarantees; docs/benchmarks.md, "maintenance pass").
CREATE FUNCTION awa._rescue(p_stale interval, p_deadlines boolean, p_limit integer,
                            OUT deadline_rescued integer, OUT heartbeat_rescued integer)
    LANGUAGE plpgsql VOLATILE
    SET search_path = pg_catalog, pg_temp SET plan_cache_mode = force_generic_plan
AS $$
DECLARE
    v_now timestamptz := clock_timestamp();
    v_cutoff timestamptz := clock_timestamp() - p_stale;
    r record;
    t awa.taken_attempt;
BEGIN
    deadline_rescued := 0;
    heartbeat_rescued := 0;
    FOR r IN
        WITH deadlines AS (
            SELECT c.receipt_base, c.job_id, c.run_lease FROM awa._open_receipts c
             WHERE p_deadlines AND c.deadline_at IS NOT NULL AND c.deadline_at < v_now
            UNION ALL
            SELECT NULL, l.job_id, l.run_lease FROM awa.leases l
             WHERE p_deadlines AND l.deadline_at IS NOT NULL AND l.deadline_at < v_now AND l.state = 'running'
            ORDER BY 1 NULLS LAST, 2, 3
            LIMIT p_limit),
        stale AS (
            SELECT c.receipt_base, c.job_id, c.run_lease FROM awa._open_receipts c
              LEFT JOIN awa.attempt_state a ON a.job_id = c.job_id AND a.run_lease = c.run_lease AND a.queue = c.queue
             WHERE v_cutoff IS NOT NULL AND c.claimed_at < v_cutoff
               AND coalesce(a.heartbeat_at, c.claimed_at) < v_cutoff
            UNION ALL
            SELECT NULL, l.job_id, l.run_lease FROM awa.leases l
             WHERE v_cutoff IS NOT NULL AND l.state = 'running' AND l.heartbeat_at < v_cutoff
            ORDER BY 1 NULLS LAST, 2, 3
            LIMIT p_limit)
        SELECT DISTINCT ON (receipt_base, job_id, run_lease) job_id, run_lease, due_deadline
          FROM (SELECT receipt_base, job_id, run_lease, true AS due_deadline FROM deadlines
                UNION ALL
                SELECT receipt_base, job_id, run_lease, false FROM stale) due
         ORDER BY receipt_base NULLS LAST, job_id, run_lease, due_deadline DESC
    LOOP
        t := awa._take_attempt_unless_busy(r.job_id, r.run_lease,
                                           CASE WHEN r.due_deadline THEN 'deadline_expired' ELSE 'rescued' END);
        CONTINUE WHEN t.job_id IS NULL;
        IF r.due_deadline THEN
            PERFORM awa._rescue_taken(t, 'hard deadline exceeded');
            deadline_rescued := deadline_rescued + 1;
        ELSE
            PERFORM awa._rescue_taken(t, 'heartbeat stale: worker presumed dead');
            heartbeat_rescued := heartbeat_rescued + 1;
        END IF;
    END LOOP;
    IF v_cutoff IS NOT NULL THEN
        -- Stale heartbeat rows of attempts that are no longer open: a heartbeat that committed
        -- after the completion of its attempt, which could not see the uncommitted row and left
        -- it behind. Nothing else reads them; without this they would stay for good.
        DELETE FROM awa.attempt_state a
         WHERE a.ctid = ANY (ARRAY(
             SELECT s.ctid FROM awa.attempt_state s
              WHERE s.heartbeat_at < v_cutoff
                AND NOT EXISTS (SELECT 1 FROM awa._open_receipts c
                                 WHERE c.job_id = s.job_id AND c.run_lease = s.run_lease AND c.queue = s.queue)
                AND NOT EXISTS (SELECT 1 FROM awa.leases l
                                 WHERE l.job_id = s.job_id AND l.run_lease = s.run_lease AND l.queue = s.queue
                                   AND l.state IN ('running', 'waiting_external'))
              LIMIT p_limit))
           AND a.heartbeat_at < v_cutoff;
    END IF;
END
$$;
REVOKE ALL ON FUNCTION awa._rescue(interval, boolean, integer) FROM PUBLIC;
COMMENT ON FUNCTION awa._rescue(interval, boolean, integer) IS 'Internal: both rescues in one pass, every attempt taken in one order (receipts mode by claim batch, then leases mode by job).';

-- Rescue attempts whose last heartbeat (or claim) is older than p_stale: retryable with
-- backoff while attempts remain, failed at the last one (like fail_job).
CREATE FUNCTION awa.rescue_stale_heartbeats(p_stale interval, p_limit bigint DEFAULT 500)
    RETURNS integer
    LANGUAGE plpgsql VOLATILE
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp SET jit = off
AS $$
BEGIN
    PERFORM awa._require(p_stale IS NULL OR p_limit IS NULL, 'p_stale and p_limit');
    PERFORM awa._check_arg(p_stale > interval '0' AND p_limit >= 1, 'p_stale must be positive and p_limit at least 1');
    PERFORM awa._check_interval(p_stale, 'p_stale');
    RETURN (awa._rescue(p_stale, false, least(p_limit, 2147483647)::integer)).heartbeat_rescued;
END
$$;
REVOKE ALL ON FUNCTION awa.rescue_stale_heartbeats(interval, bigint) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION awa.rescue_stale_heartbeats(interval, bigint) TO awa_admin;
COMMENT ON FUNCTION awa.rescue_stale_heartbeats(interval, bigint) IS 'Take back attempts whose heartbeat is older than p_stale (retryable, or failed at the last attempt). Role: awa_admin.';

-- Rescue attempts past their hard deadline, with the same last-attempt rule.
CREATE FUNCTION awa.rescue_expired_deadlines(p_limit bigint DEFAULT 500)
    RETURNS integer
    LANGUAGE plpgsql VOLATILE
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp SET jit = off
AS $$
BEGIN
    PERFORM awa._require(p_limit IS NULL, 'p_limit');
    PERFORM awa._require_at_least(p_limit, 1, 'p_limit');
    RETURN (awa._rescue(NULL, true, least(p_limit, 2147483647)::integer)).deadline_rescued;
END
$$;
REVOKE ALL ON FUNCTION awa.rescue_expired_deadlines(bigint) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION awa.rescue_expired_deadlines(bigint) TO awa_admin;
COMMENT ON FUNCTION awa.rescue_expired_deadlines(bigint) IS 'Take back attempts past their hard deadline (retryable, or failed at the last attempt). Role: awa_admin.';
