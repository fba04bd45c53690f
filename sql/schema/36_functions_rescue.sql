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

-- The next transaction id the cluster will assign (src/ring.cpp): read after a snapshot, every
-- transaction running at that snapshot has a lower id.
CREATE FUNCTION awa._next_xid() RETURNS xid8
    AS 'MODULE_PATHNAME', 'awa_next_xid'
    LANGUAGE C VOLATILE STRICT PARALLEL UNSAFE
    SET search_path = pg_catalog, pg_temp;
REVOKE ALL ON FUNCTION awa._next_xid() FROM PUBLIC;
COMMENT ON FUNCTION awa._next_xid() IS 'Internal: the next transaction id the cluster will assign.';

-- Stale heartbeat rows of one queue's attempts that are no longer open: a heartbeat that
-- committed after the completion of its attempt, which could not see the uncommitted row and
-- left it behind. Nothing else reads them; without this they would stay for good. At most
-- p_limit rows; how many went. queue = p_queue on every table, so that on a Citus worker the
-- queue's own shards answer it (awa._rescue runs it per queue on every server).
CREATE FUNCTION awa._sweep_stale_attempt_state(p_queue text, p_cutoff timestamptz, p_limit integer)
    RETURNS integer
    LANGUAGE plpgsql VOLATILE
    SET search_path = pg_catalog, pg_temp SET plan_cache_mode = force_custom_plan
AS $$
DECLARE
    v_swept integer;
BEGIN
    DELETE FROM awa.attempt_state a
     WHERE a.ctid = ANY (ARRAY(
         SELECT s.ctid FROM awa.attempt_state s
          WHERE s.queue = p_queue AND s.heartbeat_at < p_cutoff
            AND NOT EXISTS (SELECT 1 FROM awa._open_receipts c
                             WHERE c.job_id = s.job_id AND c.run_lease = s.run_lease AND c.queue = p_queue)
            AND NOT EXISTS (SELECT 1 FROM awa.leases l
                             WHERE l.job_id = s.job_id AND l.run_lease = s.run_lease AND l.queue = p_queue
                               AND l.state IN ('running', 'waiting_external'))
          LIMIT p_limit))
       AND a.queue = p_queue AND a.heartbeat_at < p_cutoff;
    GET DIAGNOSTICS v_swept = ROW_COUNT;
    RETURN v_swept;
END
$$;
REVOKE ALL ON FUNCTION awa._sweep_stale_attempt_state(text, timestamptz, integer) FROM PUBLIC;
COMMENT ON FUNCTION awa._sweep_stale_attempt_state(text, timestamptz, integer) IS 'Internal: delete up to p_limit stale heartbeat rows of a queue''s attempts that are no longer open; how many.';

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
-- The deadline search reads claim batches from awa.rescue_progress's watermark on (their
-- deadline index), so a pass costs the batches whose deadline passed since the passes before
-- it and the attempts still open among them, not every completed claim of the ring
-- (regression test rescue_deadline_cost). A pass at READ COMMITTED that gets the progress row
-- (SKIP LOCKED: a concurrent pass keeps it) moves the watermark up to the candidate of an
-- earlier pass once every transaction running at that candidate's snapshot has ended, and
-- leaves its own candidate: its start, or the earliest deadline of an attempt it left open
-- (its batch was busy, or beyond p_limit), with the snapshot it read that under and the next
-- transaction id after it.
-- A deadline pass first asks whether any claim batch with a deadline in its window holds an
-- open receipt (awa._open_claim_batches, by the deadline index) or any running lease is past
-- its deadline; if none, it runs neither the search nor the earliest-deadline read, whose
-- plans start every partition of the ready, batch and attempt tables (8.7 ms a pass in a
-- 1,000 jobs/s cell, the most of any step), and its candidate is its start, read with its
-- snapshot in the same statement as the answer. A heartbeat pass likewise searches only when
-- a claim batch was claimed before its cutoff or a running lease's heartbeat is older.
CREATE FUNCTION awa._rescue(p_stale interval, p_deadlines boolean, p_limit integer,
                            OUT deadline_rescued integer, OUT heartbeat_rescued integer)
    LANGUAGE plpgsql VOLATILE
    SET search_path = pg_catalog, pg_temp SET plan_cache_mode = force_generic_plan
AS $$
DECLARE
    v_now timestamptz := clock_timestamp();
    v_cutoff timestamptz := clock_timestamp() - p_stale;
    v_from timestamptz := '-infinity';
    v_progress awa.rescue_progress;
    v_owner boolean := false;
    v_ended boolean := false;
    v_open_from timestamptz;
    v_open_snapshot pg_snapshot;
    v_open_next xid8;
    r record;
    t awa.taken_attempt;
    v_citus boolean := awa._citus_group() IS NOT NULL;
    v_queue text;
    v_queues text[];
    v_swept integer := 0;
    v_due boolean := false;
    v_leases_due boolean := false;
    v_stale boolean := false;
    v_cursor record;
    v_window record;
    w record;
    v_stale_bases bigint[] := '{}';
    v_stale_jobs bigint[] := '{}';
    v_stale_leases bigint[] := '{}';
BEGIN
    deadline_rescued := 0;
    heartbeat_rescued := 0;
    IF p_deadlines THEN
        -- After v_now, so that a candidate left below is never later than the snapshot it
        -- is read under.
        IF current_setting('transaction_isolation') = 'read committed' THEN
            SELECT * INTO v_progress FROM awa.rescue_progress FOR UPDATE SKIP LOCKED;
            v_owner := FOUND;
        END IF;
        IF NOT v_owner THEN
            SELECT * INTO v_progress FROM awa.rescue_progress;
        END IF;
        v_from := coalesce(v_progress.deadline_watermark, '-infinity');
        -- Every transaction that was running when the candidate was read (those of its
        -- snapshot's list, and any from its xmax up to the next id read after it: ids that
        -- high are not listed) has ended by now, so the search below sees every batch any of
        -- them committed. A range too long to test id by id waits until all of it has ended.
        IF v_owner AND v_progress.candidate_snapshot IS NOT NULL THEN
            SELECT NOT EXISTS (SELECT 1 FROM pg_catalog.pg_snapshot_xip(v_progress.candidate_snapshot) x
                                WHERE NOT pg_catalog.pg_visible_in_snapshot(x, s.cur))
                   AND (pg_catalog.pg_snapshot_xmin(s.cur) >= v_progress.candidate_next
                        OR (s.next - s.xmax <= 10000
                            AND NOT EXISTS (SELECT 1 FROM pg_catalog.generate_series(s.xmax, s.next - 1) g
                                             WHERE NOT pg_catalog.pg_visible_in_snapshot(g::text::xid8, s.cur))))
              INTO v_ended
              FROM (SELECT pg_catalog.pg_current_snapshot() AS cur,
                           pg_catalog.pg_snapshot_xmax(v_progress.candidate_snapshot)::text::bigint AS xmax,
                           v_progress.candidate_next::text::bigint AS next) s;
        END IF;
        -- Anything due: a claim batch with a deadline in the window (by the deadline index)
        -- and then, if so, one with an open receipt (batch by batch: a completed batch costs
        -- one probe; its plan starts the receipt test's partitions, so it is asked second),
        -- or a running lease past its deadline. On one server only (a Citus node reads queue
        -- by queue below).
        -- The snapshot that goes with the candidate is the one of the statement that last
        -- looked at the batches (leases have no candidate).
        IF v_citus THEN
            v_due := true;
        ELSE
            SELECT EXISTS (SELECT 1 FROM awa.claim_batches b
                            WHERE b.deadline_at >= v_from AND b.deadline_at < v_now),
                   EXISTS (SELECT 1 FROM awa.leases l
                            WHERE l.deadline_at IS NOT NULL AND l.deadline_at < v_now AND l.state = 'running'),
                   pg_catalog.pg_current_snapshot()
              INTO v_due, v_leases_due, v_open_snapshot;
            IF v_due AND NOT v_leases_due THEN
                SELECT EXISTS (SELECT 1 FROM awa._open_claim_batches b
                                WHERE b.deadline_at >= v_from AND b.deadline_at < v_now),
                       pg_catalog.pg_current_snapshot()
                  INTO v_due, v_open_snapshot;
            END IF;
            v_due := v_due OR v_leases_due;
        END IF;
    END IF;
    -- On a Citus cluster: this node's queues, one at a time, each in its own statements
    -- (awa._rescue_queue, the deadline search from this node's watermark; docs/scale-out.md,
    -- "Maintenance").
    IF v_citus THEN
        FOR v_queue IN SELECT q FROM awa._citus_local_queues() q LOOP
            SELECT * INTO r FROM awa._rescue_queue(v_queue, p_stale, p_deadlines, p_limit, v_from);
            deadline_rescued := deadline_rescued + r.deadline_rescued;
            heartbeat_rescued := heartbeat_rescued + r.heartbeat_rescued;
        END LOOP;
    ELSE
    -- Anything stale at all: a claim batch claimed before the cutoff (its attempts may be
    -- open) or a running lease whose heartbeat is older.
    IF v_cutoff IS NOT NULL THEN
        v_stale := EXISTS (SELECT 1 FROM awa.claim_batches b WHERE b.claimed_at < v_cutoff)
                   OR EXISTS (SELECT 1 FROM awa.leases l WHERE l.state = 'running' AND l.heartbeat_at < v_cutoff);
    END IF;
    -- The stale attempts of claim batches: at most 500 batches claimed before the cutoff a
    -- pass, from the cursor in awa.rescue_progress on (every batch before the cutoff, in
    -- (claimed_at, claim_slot, receipt_base) order, then from the start again), each asked
    -- first whether it holds an open receipt (awa._open_claim_batches: one probe when all its
    -- attempts have ended), only the open ones receipt by receipt. Reading every batch before
    -- the cutoff on every pass cost minutes once a dead worker's attempt had pinned the claim
    -- ring for the stale interval.
    IF v_stale THEN
        SELECT p.stale_cursor_at AS at, p.stale_cursor_slot AS slot, p.stale_cursor_base AS base
          INTO v_cursor FROM awa.rescue_progress p;
        SELECT x.claimed_at, x.claim_slot, x.receipt_base, x.n INTO v_window
          FROM (SELECT b.claimed_at, b.claim_slot, b.receipt_base, count(*) OVER () AS n
                  FROM (SELECT b.claimed_at, b.claim_slot, b.receipt_base FROM awa.claim_batches b
                         WHERE b.claimed_at < v_cutoff
                           AND (v_cursor.at IS NULL OR (b.claimed_at, b.claim_slot, b.receipt_base)
                                                        > (v_cursor.at, v_cursor.slot, v_cursor.base))
                         ORDER BY 1, 2, 3 LIMIT 500) b) x
         ORDER BY 1 DESC, 2 DESC, 3 DESC LIMIT 1;
        FOR w IN
            SELECT b.claim_slot, b.receipt_base, b.queue, b.priority, b.enqueue_shard, b.lane_block, b.ready_slot
              FROM awa._open_claim_batches b
             WHERE b.claimed_at < v_cutoff
               AND (v_cursor.at IS NULL OR (b.claimed_at, b.claim_slot, b.receipt_base)
                                            > (v_cursor.at, v_cursor.slot, v_cursor.base))
               AND (b.claimed_at, b.claim_slot, b.receipt_base)
                   <= (v_window.claimed_at, v_window.claim_slot, v_window.receipt_base)
        LOOP
            SELECT v_stale_bases || array_agg(c.receipt_base), v_stale_jobs || array_agg(c.job_id),
                   v_stale_leases || array_agg(c.run_lease)
              INTO v_stale_bases, v_stale_jobs, v_stale_leases
              FROM awa._open_receipts c
              LEFT JOIN awa.attempt_state a ON a.job_id = c.job_id AND a.run_lease = c.run_lease AND a.queue = c.queue
             WHERE c.queue = w.queue AND c.priority = w.priority AND c.enqueue_shard = w.enqueue_shard
               AND c.lane_block = w.lane_block AND c.ready_slot = w.ready_slot AND c.claim_slot = w.claim_slot
               AND c.receipt_base = w.receipt_base
               AND coalesce(a.heartbeat_at, c.claimed_at) < v_cutoff;
        END LOOP;
        -- The next pass goes on after this window, or from the start when it reached the end;
        -- it reads the window again while more of it is stale than this pass may take.
        UPDATE awa.rescue_progress p
           SET stale_cursor_at = CASE WHEN v_window.n >= 500 THEN v_window.claimed_at END,
               stale_cursor_slot = CASE WHEN v_window.n >= 500 THEN v_window.claim_slot END,
               stale_cursor_base = CASE WHEN v_window.n >= 500 THEN v_window.receipt_base END
         WHERE p.only_row AND current_setting('transaction_isolation') = 'read committed'
           AND cardinality(v_stale_jobs) <= p_limit
           AND p.only_row IN (SELECT q.only_row FROM awa.rescue_progress q FOR UPDATE SKIP LOCKED);
    END IF;
    IF v_due OR v_stale THEN
    FOR r IN
        WITH deadlines AS (
            SELECT c.receipt_base, c.job_id, c.run_lease FROM awa._open_receipts c
             WHERE p_deadlines AND c.deadline_at >= v_from AND c.deadline_at < v_now
            UNION ALL
            SELECT NULL, l.job_id, l.run_lease FROM awa.leases l
             WHERE p_deadlines AND l.deadline_at IS NOT NULL AND l.deadline_at < v_now AND l.state = 'running'
            ORDER BY 1 NULLS LAST, 2, 3
            LIMIT p_limit),
        stale AS (
            SELECT s.receipt_base, s.job_id, s.run_lease
              FROM ROWS FROM (pg_catalog.unnest(v_stale_bases), pg_catalog.unnest(v_stale_jobs),
                              pg_catalog.unnest(v_stale_leases)) AS s(receipt_base, job_id, run_lease)
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
    END IF;
    END IF;
    IF v_owner THEN
        -- The earliest deadline still open in what this pass searched (its own rescues are
        -- closed now), read together with the snapshot that saw it. On a Citus cluster it is
        -- read queue by queue, in several statements: the snapshot is taken before the first
        -- of them (a transaction that commits during the reads is then one to wait for) and
        -- the next transaction id after the last.
        IF v_citus THEN
            v_open_snapshot := pg_catalog.pg_current_snapshot();
            v_open_from := v_now;
            FOR v_queue IN SELECT q FROM awa._citus_local_queues() q LOOP
                SELECT least(v_open_from, min(c.deadline_at)) INTO v_open_from
                  FROM awa._open_receipts c
                 WHERE c.queue = v_queue AND c.deadline_at >= v_from AND c.deadline_at < v_now;
            END LOOP;
        ELSIF v_due THEN
            SELECT least(min(c.deadline_at), v_now), pg_catalog.pg_current_snapshot()
              INTO v_open_from, v_open_snapshot
              FROM awa._open_receipts c WHERE c.deadline_at >= v_from AND c.deadline_at < v_now;
        ELSE
            -- No open receipt had a deadline in the window when v_open_snapshot was taken.
            v_open_from := v_now;
        END IF;
        v_open_next := awa._next_xid();
        UPDATE awa.rescue_progress p
           SET deadline_watermark = CASE WHEN v_ended
                                         THEN greatest(p.deadline_watermark, least(p.deadline_candidate, v_open_from))
                                         ELSE p.deadline_watermark END,
               deadline_candidate = CASE WHEN v_ended OR p.candidate_snapshot IS NULL
                                         THEN v_open_from ELSE p.deadline_candidate END,
               candidate_snapshot = CASE WHEN v_ended OR p.candidate_snapshot IS NULL
                                         THEN v_open_snapshot ELSE p.candidate_snapshot END,
               candidate_next = CASE WHEN v_ended OR p.candidate_snapshot IS NULL
                                     THEN v_open_next ELSE p.candidate_next END
         WHERE p.only_row;
    END IF;
    IF v_cutoff IS NOT NULL THEN
        -- Stale heartbeat rows of attempts no longer open, queue by queue
        -- (awa._sweep_stale_attempt_state): on a Citus cluster this node's queues; on one
        -- server the queues that have such rows.
        IF v_citus THEN
            v_queues := ARRAY(SELECT q FROM awa._citus_local_queues() q);
        ELSE
            v_queues := ARRAY(SELECT DISTINCT s.queue FROM awa.attempt_state s WHERE s.heartbeat_at < v_cutoff);
        END IF;
        FOREACH v_queue IN ARRAY v_queues LOOP
            EXIT WHEN v_swept >= p_limit;
            v_swept := v_swept + awa._sweep_stale_attempt_state(v_queue, v_cutoff, p_limit - v_swept);
        END LOOP;
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
    PERFORM awa._check_arg(awa._interval_in_range(p_stale), 'p_stale must have no negative part');
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
