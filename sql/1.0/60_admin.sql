-- Administration of a sharded queue: cancel, delete, priority aging, moves, the DLQ,
-- pausing and the shard count (ADR-025 admin lookups; D3, D4, D7, D8).
--
-- Every path that removes an unclaimed ready row goes through awa._take_unclaimed_ready,
-- which locks that row's own lane claim head (queue, priority, enqueue_shard) and
-- re-checks lane_seq >= claim_seq under the lock: claim never locks ready rows, so the
-- head lock is what keeps an admin removal and a claim of the same row apart (D3).

-- Metadata with provenance keys added only where absent ("stamped once").
CREATE FUNCTION awa._stamp_metadata(p_metadata jsonb, p_stamp jsonb) RETURNS jsonb
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    SET search_path = pg_catalog, pg_temp
    RETURN nullif(coalesce(p_metadata, '{}'::jsonb)
                  || (coalesce(p_stamp, '{}'::jsonb)
                      - ARRAY(SELECT jsonb_object_keys(coalesce(p_metadata, '{}'::jsonb)))),
                  '{}'::jsonb);

-- A removed ready row as the input of awa._enqueue_ready, bound for p_queue/p_priority.
CREATE FUNCTION awa._ready_as_deferred(r awa.ready_entries, p_queue text, p_priority smallint,
                                       p_stamp jsonb) RETURNS awa.deferred_jobs
    LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
    SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    d awa.deferred_jobs;
BEGIN
    d.job_id := r.job_id;
    d.kind := r.kind;
    d.queue := p_queue;
    d.args := r.args;
    d.state := 'scheduled';
    d.priority := p_priority;
    d.attempt := r.attempt;
    d.run_lease := r.run_lease;
    d.max_attempts := r.max_attempts;
    d.run_at := r.run_at;
    d.attempted_at := r.attempted_at;
    d.created_at := r.created_at;
    d.unique_key := r.unique_key;
    d.unique_states := r.unique_states;
    d.ordering_key := r.ordering_key;
    d.metadata := awa._stamp_metadata(r.metadata, p_stamp);
    d.tags := r.tags;
    d.errors := r.errors;
    RETURN d;
END
$$;

-- Remove the job's unclaimed ready row, if it has one: lock the claim head of the row's
-- own lane (queue, priority, enqueue_shard), re-check lane_seq >= claim_seq under the
-- lock, delete the row by its full identity and return it (NULL when the job has no
-- unclaimed ready row). The claim cursor is left alone: claim jumps the gap (D3).
-- A concurrent move of the same row to another lane is followed by looking again.
CREATE FUNCTION awa._take_unclaimed_ready(p_job_id bigint) RETURNS awa.ready_entries
    LANGUAGE plpgsql VOLATILE
    SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    r awa.ready_entries;
    v_claim_seq bigint;
    v_taken awa.ready_entries;
    v_seen boolean;
BEGIN
    FOR pass IN 1..3 LOOP
        v_seen := false;
        FOR r IN
            SELECT e.* FROM awa.ready_entries e
              JOIN awa.queue_claim_heads h
                ON h.queue = e.queue AND h.priority = e.priority AND h.enqueue_shard = e.enqueue_shard
             WHERE e.job_id = p_job_id AND e.lane_seq >= h.claim_seq
        LOOP
            v_seen := true;
            SELECT h.claim_seq INTO v_claim_seq FROM awa.queue_claim_heads h
             WHERE h.queue = r.queue AND h.priority = r.priority AND h.enqueue_shard = r.enqueue_shard
               FOR UPDATE;
            CONTINUE WHEN NOT FOUND OR r.lane_seq < v_claim_seq;
            DELETE FROM awa.ready_entries e
             WHERE e.ready_slot = r.ready_slot AND e.queue = r.queue AND e.priority = r.priority
               AND e.enqueue_shard = r.enqueue_shard AND e.lane_seq = r.lane_seq AND e.job_id = p_job_id
            RETURNING e.* INTO v_taken;
            IF FOUND THEN
                RETURN v_taken;
            END IF;
        END LOOP;
        EXIT WHEN NOT v_seen;
    END LOOP;
    RETURN NULL;
END
$$;

-- The open attempt of a job (receipt first, then lease) taken with p_outcome; NULL if none.
CREATE FUNCTION awa._take_open_attempt(p_job_id bigint, p_outcome text) RETURNS awa.taken_attempt
    LANGUAGE plpgsql VOLATILE
    SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_run_lease bigint;
    t awa.taken_attempt;
BEGIN
    SELECT c.run_lease INTO v_run_lease FROM awa.lease_claims c
     WHERE c.job_id = p_job_id AND c.materialized_at IS NULL
       AND NOT EXISTS (SELECT 1 FROM awa.lease_claim_closures x
                        WHERE x.claim_slot = c.claim_slot AND x.job_id = c.job_id AND x.run_lease = c.run_lease)
     ORDER BY c.run_lease DESC LIMIT 1;
    IF FOUND THEN
        t := awa._take_attempt(p_job_id, v_run_lease, p_outcome);
        IF t.job_id IS NOT NULL THEN
            RETURN t;
        END IF;
    END IF;
    SELECT l.run_lease INTO v_run_lease FROM awa.leases l
     WHERE l.job_id = p_job_id AND l.state IN ('running', 'waiting_external')
     ORDER BY l.run_lease DESC LIMIT 1;
    IF FOUND THEN
        RETURN awa._take_attempt(p_job_id, v_run_lease, p_outcome);
    END IF;
    RETURN NULL;
END
$$;

-- Cancel a job wherever it is live, in this order: an unclaimed ready row (removed under
-- its lane head lock; the cancelled terminal row takes the row's own identity and body),
-- a running receipt-only attempt, a materialised lease (both closed with outcome
-- 'cancelled'; the terminal row lands on the ready row's shard), a deferred row (its
-- terminal row gets lane_seq = -job_id on shard 0 of the current slot: no lane exists).
-- Returns whether it cancelled; notifies channel 'awa:cancel' with the job id.
CREATE FUNCTION awa.cancel_job(p_job_id bigint) RETURNS boolean
    LANGUAGE plpgsql VOLATILE
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    r awa.ready_entries;
    t awa.taken_attempt;
    d awa.deferred_jobs;
BEGIN
    PERFORM awa._require(p_job_id IS NULL, 'p_job_id');
    r := awa._take_unclaimed_ready(p_job_id);
    IF r.job_id IS NOT NULL THEN
        INSERT INTO awa.done_entries (ready_slot, ready_generation, job_id, queue, priority, enqueue_shard,
            lane_seq, state, attempt, run_lease, attempted_at, kind, args, max_attempts, run_at, created_at,
            unique_key, unique_states, ordering_key, metadata, tags, errors)
        VALUES (r.ready_slot, r.ready_generation, r.job_id, r.queue, r.priority, r.enqueue_shard,
            r.lane_seq, 'cancelled', r.attempt, r.run_lease, r.attempted_at, r.kind, r.args, r.max_attempts,
            r.run_at, r.created_at, r.unique_key, r.unique_states, r.ordering_key, r.metadata, r.tags, r.errors);
        PERFORM awa._sync_unique_claim(r.job_id, r.unique_key, r.unique_states, 'available', 'cancelled');
    ELSE
        t := awa._take_open_attempt(p_job_id, 'cancelled');
        IF t.job_id IS NOT NULL THEN
            PERFORM awa._finish_attempt(t, 'cancelled', t.errors);
        ELSE
            DELETE FROM awa.deferred_jobs j WHERE j.job_id = p_job_id RETURNING j.* INTO d;
            IF NOT FOUND THEN
                RETURN false;
            END IF;
            INSERT INTO awa.done_entries (ready_slot, ready_generation, job_id, queue, priority, enqueue_shard,
                lane_seq, state, attempt, run_lease, attempted_at, kind, args, max_attempts, run_at, created_at,
                unique_key, unique_states, ordering_key, metadata, tags, errors)
            SELECT s.current_slot, s.generation, d.job_id, d.queue, d.priority, 0, -d.job_id, 'cancelled',
                d.attempt, d.run_lease, d.attempted_at, d.kind, d.args, d.max_attempts, d.run_at, d.created_at,
                d.unique_key, d.unique_states, d.ordering_key, d.metadata, d.tags, d.errors
              FROM awa.queue_ring_state s;
            PERFORM awa._sync_unique_claim(d.job_id, d.unique_key, d.unique_states, d.state, 'cancelled');
        END IF;
    END IF;
    PERFORM pg_notify('awa:cancel', p_job_id::text);
    RETURN true;
END
$$;

-- Delete a job in any state (ready, deferred, running, terminal, DLQ) and release its
-- unique claim. A running attempt is closed with outcome 'terminal_removed' so its
-- worker's completion finds nothing. Returns whether anything was deleted.
CREATE FUNCTION awa.delete_job(p_job_id bigint) RETURNS boolean
    LANGUAGE plpgsql VOLATILE
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    r awa.ready_entries;
    t awa.taken_attempt;
    v_found boolean := false;
    v_rows bigint;
BEGIN
    PERFORM awa._require(p_job_id IS NULL, 'p_job_id');
    r := awa._take_unclaimed_ready(p_job_id);
    v_found := r.job_id IS NOT NULL;
    IF NOT v_found THEN
        DELETE FROM awa.deferred_jobs WHERE job_id = p_job_id;
        v_found := FOUND;
    END IF;
    IF NOT v_found THEN
        t := awa._take_open_attempt(p_job_id, 'terminal_removed');
        v_found := t.job_id IS NOT NULL;
    END IF;
    DELETE FROM awa.done_entries WHERE job_id = p_job_id;
    GET DIAGNOSTICS v_rows = ROW_COUNT;
    v_found := v_found OR v_rows > 0;
    DELETE FROM awa.dlq_entries WHERE job_id = p_job_id;
    GET DIAGNOSTICS v_rows = ROW_COUNT;
    v_found := v_found OR v_rows > 0;
    IF v_found THEN
        DELETE FROM awa.job_unique_claims WHERE job_id = p_job_id;
    END IF;
    RETURN v_found;
END
$$;

-- Physical priority aging: up to p_limit waiting ready rows with priority > 1 whose run_at
-- is older than p_older_than move one priority up. Their lane heads are locked (sorted,
-- SKIP LOCKED: lanes being claimed right now are left for the next run), the rows are
-- removed by full identity and re-enqueued at priority - 1 through awa._enqueue_ready,
-- so keyed rows keep their key's shard and keyless rows take the rotor, always within
-- the queue's current width. _awa_original_priority is stamped once. p_queue limits the
-- run to one queue (NULL: every queue). Returns how many rows moved up.
CREATE FUNCTION awa.age_waiting_priorities(p_older_than interval, p_limit integer DEFAULT 1000,
                                           p_queue text DEFAULT NULL)
    RETURNS integer
    LANGUAGE plpgsql VOLATILE
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_cutoff timestamptz;
    v_queues text[];
    v_priorities smallint[];
    v_shards smallint[];
    v_claims bigint[];
    v_rows awa.deferred_jobs[];
BEGIN
    PERFORM awa._require(p_older_than IS NULL, 'p_older_than');
    PERFORM awa._require(p_limit IS NULL, 'p_limit');
    IF p_older_than < interval '0' THEN
        RAISE EXCEPTION 'p_older_than must not be negative' USING ERRCODE = '22023';
    END IF;
    IF p_limit NOT BETWEEN 1 AND 100000 THEN
        RAISE EXCEPTION 'p_limit must be between 1 and 100000' USING ERRCODE = '22023',
            DETAIL = format('The value is %s.', p_limit);
    END IF;
    IF p_queue IS NOT NULL THEN
        PERFORM awa._check_queue(p_queue, 'p_queue');
    END IF;
    v_cutoff := clock_timestamp() - p_older_than;
    SELECT array_agg(h.queue), array_agg(h.priority), array_agg(h.enqueue_shard), array_agg(h.claim_seq)
      INTO v_queues, v_priorities, v_shards, v_claims
      FROM (SELECT c.queue, c.priority, c.enqueue_shard, c.claim_seq FROM awa.queue_claim_heads c
             WHERE c.priority > 1 AND (p_queue IS NULL OR c.queue = p_queue)
               AND EXISTS (SELECT 1 FROM awa.ready_entries r
                            WHERE r.queue = c.queue AND r.priority = c.priority
                              AND r.enqueue_shard = c.enqueue_shard AND r.lane_seq >= c.claim_seq
                              AND r.run_at <= v_cutoff)
             ORDER BY c.queue, c.priority, c.enqueue_shard
               FOR UPDATE SKIP LOCKED) h;
    IF v_queues IS NULL THEN
        RETURN 0;
    END IF;
    WITH victims AS (
        SELECT r.ready_slot, r.queue, r.priority, r.enqueue_shard, r.lane_seq
          FROM unnest(v_queues, v_priorities, v_shards, v_claims) AS h(queue, priority, enqueue_shard, claim_seq)
          JOIN awa.ready_entries r
            ON r.queue = h.queue AND r.priority = h.priority AND r.enqueue_shard = h.enqueue_shard
           AND r.lane_seq >= h.claim_seq
         WHERE r.run_at <= v_cutoff
         ORDER BY r.run_at, r.lane_seq
         LIMIT p_limit),
    gone AS (
        DELETE FROM awa.ready_entries r USING victims v
         WHERE r.ready_slot = v.ready_slot AND r.queue = v.queue AND r.priority = v.priority
           AND r.enqueue_shard = v.enqueue_shard AND r.lane_seq = v.lane_seq
        RETURNING r AS row_)
    SELECT array_agg(awa._ready_as_deferred(g.row_, (g.row_).queue, ((g.row_).priority - 1)::smallint,
                         jsonb_build_object('_awa_original_priority', (g.row_).priority))
                     ORDER BY (g.row_).run_at, (g.row_).lane_seq)
      INTO v_rows FROM gone g;
    IF v_rows IS NULL THEN
        RETURN 0;
    END IF;
    RETURN awa._enqueue_ready(v_rows);
END
$$;

-- Move a scheduled/retryable or unclaimed ready job to another queue (and optionally
-- priority). A deferred row is updated in place; a ready row is removed under its lane
-- head lock and re-enqueued into the destination, whose current width decides the shard
-- (keyed: the key's shard there; keyless: the rotor) — a source shard number is never
-- copied. _awa_original_queue / _awa_original_priority are stamped once when they change.
-- Returns false when the job is not movable (running, terminal, DLQ, unknown).
CREATE FUNCTION awa.move_queue(p_job_id bigint, p_queue text, p_priority smallint DEFAULT NULL)
    RETURNS boolean
    LANGUAGE plpgsql VOLATILE
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    r awa.ready_entries;
    v_priority smallint;
BEGIN
    PERFORM awa._require(p_job_id IS NULL, 'p_job_id');
    PERFORM awa._check_queue(p_queue, 'p_queue');
    PERFORM awa._check_priority(p_priority, 'p_priority');
    UPDATE awa.deferred_jobs j
       SET queue = p_queue,
           priority = coalesce(p_priority, j.priority),
           metadata = awa._stamp_metadata(j.metadata,
               CASE WHEN j.queue <> p_queue THEN jsonb_build_object('_awa_original_queue', j.queue) ELSE '{}' END
               || CASE WHEN j.priority <> coalesce(p_priority, j.priority)
                       THEN jsonb_build_object('_awa_original_priority', j.priority) ELSE '{}' END)
     WHERE j.job_id = p_job_id;
    IF FOUND THEN
        RETURN true;
    END IF;
    r := awa._take_unclaimed_ready(p_job_id);
    IF r.job_id IS NULL THEN
        RETURN false;
    END IF;
    v_priority := coalesce(p_priority, r.priority);
    PERFORM awa._enqueue_ready(ARRAY[awa._ready_as_deferred(r, p_queue, v_priority,
        CASE WHEN r.queue <> p_queue THEN jsonb_build_object('_awa_original_queue', r.queue) ELSE '{}' END
        || CASE WHEN r.priority <> v_priority THEN jsonb_build_object('_awa_original_priority', r.priority)
                ELSE '{}' END)]);
    RETURN true;
END
$$;

-- Bring a job back from the dead-letter queue, optionally into another queue or priority.
-- attempt restarts at 0 (run_lease is kept, so stale writers stay stale); a future
-- p_run_at makes it scheduled, otherwise it is ready at once. The ordering key is kept,
-- so a keyed job returns to its key's shard (within the queue's current width).
CREATE FUNCTION awa.retry_from_dlq(p_job_id bigint, p_queue text DEFAULT NULL,
                                   p_priority smallint DEFAULT NULL, p_run_at timestamptz DEFAULT NULL)
    RETURNS boolean
    LANGUAGE plpgsql VOLATILE
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    x awa.dlq_entries;
    d awa.deferred_jobs;
BEGIN
    PERFORM awa._require(p_job_id IS NULL, 'p_job_id');
    IF p_queue IS NOT NULL THEN
        PERFORM awa._check_queue(p_queue, 'p_queue');
    END IF;
    PERFORM awa._check_priority(p_priority, 'p_priority');
    DELETE FROM awa.dlq_entries e WHERE e.job_id = p_job_id RETURNING e.* INTO x;
    IF NOT FOUND THEN
        RETURN false;
    END IF;
    d.job_id := x.job_id;
    d.kind := x.kind;
    d.queue := coalesce(p_queue, x.queue);
    d.args := x.args;
    d.priority := coalesce(p_priority, x.priority);
    d.attempt := 0;
    d.run_lease := x.run_lease;
    d.max_attempts := x.max_attempts;
    d.created_at := x.created_at;
    d.unique_key := x.unique_key;
    d.unique_states := x.unique_states;
    d.ordering_key := x.ordering_key;
    d.metadata := awa._stamp_metadata(x.metadata,
        CASE WHEN d.queue <> x.queue THEN jsonb_build_object('_awa_original_queue', x.queue) ELSE '{}' END);
    d.tags := x.tags;
    d.errors := x.errors;
    IF p_run_at > clock_timestamp() THEN
        d.state := 'scheduled';
        d.run_at := p_run_at;
        INSERT INTO awa.deferred_jobs SELECT (d).*;
        PERFORM awa._sync_unique_claim(d.job_id, d.unique_key, d.unique_states, 'failed', 'scheduled');
    ELSE
        d.state := 'scheduled';
        d.run_at := clock_timestamp();
        PERFORM awa._sync_unique_claim(d.job_id, d.unique_key, d.unique_states, 'failed', 'available');
        PERFORM awa._enqueue_ready(ARRAY[d]);
    END IF;
    RETURN true;
END
$$;

-- Move a failed terminal job into the dead-letter queue with a reason. The body comes
-- from the done row or, where that is narrow, from the ready row of the same lane
-- identity (shard included). Returns false when the job has no failed terminal row.
CREATE FUNCTION awa.move_failed_to_dlq(p_job_id bigint, p_reason text) RETURNS boolean
    LANGUAGE plpgsql VOLATILE
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    PERFORM awa._require(p_job_id IS NULL, 'p_job_id');
    PERFORM awa._require(p_reason IS NULL, 'p_reason');
    WITH gone AS (
        DELETE FROM awa.done_entries d WHERE d.job_id = p_job_id AND d.state = 'failed' RETURNING d.*)
    INSERT INTO awa.dlq_entries (job_id, kind, queue, args, state, priority, attempt, run_lease, max_attempts,
        run_at, attempted_at, finalized_at, created_at, unique_key, unique_states, ordering_key, metadata,
        tags, errors, dlq_reason, original_run_lease)
    SELECT g.job_id, coalesce(g.kind, r.kind), g.queue, coalesce(g.args, r.args, '{}'), 'failed', g.priority,
           g.attempt, g.run_lease, coalesce(g.max_attempts, r.max_attempts, 25), coalesce(g.run_at, r.run_at),
           g.attempted_at, g.finalized_at, coalesce(g.created_at, r.created_at, g.finalized_at),
           coalesce(g.unique_key, r.unique_key), coalesce(g.unique_states, r.unique_states),
           coalesce(g.ordering_key, r.ordering_key), coalesce(g.metadata, r.metadata), coalesce(g.tags, r.tags),
           coalesce(g.errors, r.errors), p_reason, g.run_lease
      FROM gone g
      LEFT JOIN awa.ready_entries r
        ON r.ready_slot = g.ready_slot AND r.ready_generation = g.ready_generation AND r.queue = g.queue
       AND r.priority = g.priority AND r.enqueue_shard = g.enqueue_shard AND r.lane_seq = g.lane_seq;
    RETURN FOUND;
END
$$;

-- Dead-letter entries of a queue (every queue when p_queue is NULL), newest first.
CREATE FUNCTION awa.list_dlq(p_queue text, p_limit integer DEFAULT 100) RETURNS SETOF awa.dlq_entries
    LANGUAGE plpgsql STABLE
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF p_queue IS NOT NULL THEN
        PERFORM awa._check_queue(p_queue, 'p_queue');
    END IF;
    PERFORM awa._require(p_limit IS NULL, 'p_limit');
    IF p_limit NOT BETWEEN 1 AND 10000 THEN
        RAISE EXCEPTION 'p_limit must be between 1 and 10000' USING ERRCODE = '22023',
            DETAIL = format('The value is %s.', p_limit);
    END IF;
    RETURN QUERY
        SELECT e.* FROM awa.dlq_entries e
         WHERE p_queue IS NULL OR e.queue = p_queue
         ORDER BY e.dlq_at DESC, e.job_id DESC
         LIMIT p_limit;
END
$$;

-- Pause a queue: claim skips it (promotion too); enqueue still works.
CREATE FUNCTION awa.pause_queue(p_queue text) RETURNS void
    LANGUAGE plpgsql VOLATILE
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    PERFORM awa._check_queue(p_queue, 'p_queue');
    INSERT INTO awa.queue_meta AS m (queue, paused, paused_at, paused_by)
    VALUES (p_queue, true, clock_timestamp(), session_user)
    ON CONFLICT (queue) DO UPDATE
       SET paused = true, paused_at = EXCLUDED.paused_at, paused_by = EXCLUDED.paused_by
     WHERE NOT m.paused;
END
$$;

-- Resume a paused queue (no-op when it is not paused).
CREATE FUNCTION awa.resume_queue(p_queue text) RETURNS void
    LANGUAGE plpgsql VOLATILE
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    PERFORM awa._check_queue(p_queue, 'p_queue');
    UPDATE awa.queue_meta SET paused = false, paused_at = NULL, paused_by = NULL
     WHERE queue = p_queue AND paused;
END
$$;

-- Set a queue's enqueue width (1..64; the UPSERT of the ADR). Every backend routes with
-- it from its next transaction; rows on shards >= the new width keep draining.
-- Returns the previous width.
CREATE FUNCTION awa.set_enqueue_shards(p_queue text, p_shards integer) RETURNS smallint
    LANGUAGE plpgsql VOLATILE
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_old smallint;
BEGIN
    PERFORM awa._check_queue(p_queue, 'p_queue');
    PERFORM awa._require(p_shards IS NULL, 'p_shards');
    IF p_shards NOT BETWEEN 1 AND 64 THEN
        RAISE EXCEPTION 'p_shards must be between 1 and 64' USING ERRCODE = '22023',
            DETAIL = format('The value is %s.', p_shards);
    END IF;
    SELECT m.enqueue_shards INTO v_old FROM awa.queue_meta m WHERE m.queue = p_queue FOR UPDATE;
    INSERT INTO awa.queue_meta (queue, enqueue_shards) VALUES (p_queue, p_shards)
    ON CONFLICT (queue) DO UPDATE SET enqueue_shards = EXCLUDED.enqueue_shards;
    RETURN coalesce(v_old, 1);
END
$$;
