-- Administration of jobs: cancel, delete, priority aging, moves, the DLQ, reading jobs.
-- Every path that removes an unclaimed ready row goes through awa._take_unclaimed_ready.

-- Remove the job's unclaimed ready row, if it has one: lock the claim head of the row's
-- own lane, read the lane's cursor on the latest committed state (awa._lane_cursor: no
-- claim moves it while the head is locked, whatever this transaction's snapshot), re-check
-- lane_seq >= cursor, delete the row by its full identity and return it (NULL when the job
-- has no unclaimed ready row). The cursor is left alone: claim jumps the gap. A concurrent
-- move of the same row to another lane is followed by looking again. With p_queue, only a row
-- of that queue (its callers plan each statement with their arguments, so the condition is a
-- plain `queue = ` there).
CREATE FUNCTION awa._take_unclaimed_ready(p_job_id bigint, p_queue text DEFAULT NULL) RETURNS awa.ready_entries
    LANGUAGE plpgsql VOLATILE
    SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    r awa.ready_entries;
    v_cursor bigint;
    v_taken awa.ready_entries;
    v_seen boolean;
BEGIN
    FOR pass IN 1..3 LOOP
        v_seen := false;
        FOR r IN
            SELECT e.* FROM awa.ready_entries e
              JOIN awa.lane_cursors h
                ON h.queue = e.queue AND h.priority = e.priority AND h.enqueue_shard = e.enqueue_shard
             WHERE e.job_id = p_job_id AND e.lane_seq >= h.claim_seq AND (p_queue IS NULL OR e.queue = p_queue)
        LOOP
            v_seen := true;
            PERFORM 1 FROM awa.queue_claim_heads h
             WHERE h.queue = r.queue AND h.priority = r.priority AND h.enqueue_shard = r.enqueue_shard
               FOR UPDATE;
            CONTINUE WHEN NOT FOUND;
            PERFORM awa._heads_locked(r.queue);
            v_cursor := awa._lane_cursor(r.queue, r.priority, r.enqueue_shard);
            CONTINUE WHEN v_cursor IS NULL;
            -- Claimed since this transaction's snapshot: at READ COMMITTED the caller's next
            -- statement sees the attempt; an older snapshot never would (1.0 raised 40001
            -- here too, when the claim updated the head).
            IF r.lane_seq < v_cursor
               AND pg_catalog.current_setting('transaction_isolation') IN ('repeatable read', 'serializable') THEN
                RAISE EXCEPTION USING ERRCODE = '40001',
                    MESSAGE = 'could not serialize access: the job was claimed after this transaction''s snapshot',
                    DETAIL = format('Job %s.', p_job_id),
                    HINT = 'Retry the transaction, or run it at READ COMMITTED.';
            END IF;
            CONTINUE WHEN r.lane_seq < v_cursor;
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
REVOKE ALL ON FUNCTION awa._take_unclaimed_ready(bigint, text) FROM PUBLIC;
COMMENT ON FUNCTION awa._take_unclaimed_ready(bigint, text) IS 'Internal: remove a job''s unclaimed ready row under its lane''s claim-head lock.';

-- Cancel a job wherever it is live, in this order: an unclaimed ready row (removed under
-- its lane head lock; the cancelled terminal row takes the row's own identity and body),
-- an open attempt (receipts or leases mode alike; closed with outcome
-- 'cancelled'; the terminal row lands on the ready row's shard), a deferred row (its
-- terminal row gets lane_seq = -job_id on shard 0 of the queue ring's write slot: no lane exists).
-- Returns whether it cancelled; notifies channel 'awa:cancel' with the job id. p_queue, the
-- routing argument: NULL finds the job by id alone; given, a job of another queue is not
-- live there (false, nothing changes). Each statement is planned with the arguments
-- (force_custom_plan), so a given queue is a plain `queue = ` condition of every statement.
CREATE FUNCTION awa.cancel_job(p_job_id bigint, p_queue text DEFAULT NULL) RETURNS boolean
    LANGUAGE plpgsql VOLATILE
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp SET plan_cache_mode = force_custom_plan
AS $$
DECLARE
    r awa.ready_entries;
    t awa.taken_attempt;
    d awa.deferred_jobs;
BEGIN
    PERFORM awa._require_queue_local(p_queue);  -- on a Citus cluster: delegated by p_queue, or 0A000
    PERFORM awa._require(p_job_id IS NULL, 'p_job_id');
    -- At REPEATABLE READ or SERIALIZABLE the snapshot may predate the claim of a running
    -- job: its open attempt, found on the latest committed state, is taken first. Only
    -- otherwise is the ready row looked at, which raises 40001 if it was claimed since.
    IF pg_catalog.current_setting('transaction_isolation') IN ('repeatable read', 'serializable') THEN
        t := awa._take_open_attempt(p_job_id, 'cancelled', p_queue);
        -- Running in this snapshot but no longer: the attempt ended since (retried, snoozed,
        -- failed...), and where the job is now this snapshot cannot see.
        IF t.job_id IS NULL
           AND (EXISTS (SELECT 1 FROM awa._open_receipts c WHERE c.job_id = p_job_id AND (p_queue IS NULL OR c.queue = p_queue))
                OR EXISTS (SELECT 1 FROM awa.leases l
                            WHERE l.job_id = p_job_id AND (p_queue IS NULL OR l.queue = p_queue)
                              AND l.state IN ('running', 'waiting_external'))) THEN
            RAISE EXCEPTION USING ERRCODE = '40001',
                MESSAGE = 'could not serialize access: the job''s attempt ended after this transaction''s snapshot',
                DETAIL = format('Job %s.', p_job_id),
                HINT = 'Retry the transaction, or run it at READ COMMITTED.';
        END IF;
    END IF;
    IF t.job_id IS NULL THEN
        r := awa._take_unclaimed_ready(p_job_id, p_queue);
    END IF;
    IF t.job_id IS NOT NULL THEN
        PERFORM awa._finish_attempt(t, 'cancelled', t.errors);
    ELSIF r.job_id IS NOT NULL THEN
        PERFORM awa._end_job(awa._job(r), jsonb_build_object('ready_slot', r.ready_slot,
            'ready_generation', r.ready_generation, 'enqueue_shard', r.enqueue_shard, 'lane_seq', r.lane_seq),
            'available', 'cancelled');
    ELSE
        t := awa._take_open_attempt(p_job_id, 'cancelled', p_queue);
        IF t.job_id IS NOT NULL THEN
            PERFORM awa._finish_attempt(t, 'cancelled', t.errors);
        ELSE
            DELETE FROM awa.deferred_jobs j WHERE j.job_id = p_job_id AND (p_queue IS NULL OR j.queue = p_queue)
            RETURNING j.* INTO d;
            IF NOT FOUND THEN
                RETURN false;
            END IF;
            PERFORM awa._end_job(awa._job(d), jsonb_build_object('ready_slot', s.slot,
                'ready_generation', s.generation, 'enqueue_shard', 0, 'lane_seq', -d.job_id), d.state, 'cancelled')
              FROM awa._ring_write_slot('queue') s;
        END IF;
    END IF;
    PERFORM pg_notify('awa:cancel', p_job_id::text);
    RETURN true;
END
$$;
REVOKE ALL ON FUNCTION awa.cancel_job(bigint, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION awa.cancel_job(bigint, text) TO awa_admin;
COMMENT ON FUNCTION awa.cancel_job(bigint, text) IS 'Cancel a live job wherever it is (waiting, running, scheduled); false when it is not live. Role: awa_admin.';

-- Delete a job in any state (1.1: a completion is found through its ready row, its
-- terminal row (1.0) or its completion batch with it). p_queue as for cancel_job: given, a
-- job of another queue is unknown there (false, nothing changes).
CREATE FUNCTION awa.delete_job(p_job_id bigint, p_queue text DEFAULT NULL) RETURNS boolean
    LANGUAGE plpgsql VOLATILE
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp SET plan_cache_mode = force_custom_plan
AS $$
DECLARE
    r awa.ready_entries;
    t awa.taken_attempt;
    v_found boolean := false;
    v_rows bigint;
    v_batch record;
BEGIN
    PERFORM awa._require_queue_local(p_queue);  -- on a Citus cluster: delegated by p_queue, or 0A000
    PERFORM awa._require(p_job_id IS NULL, 'p_job_id');
    r := awa._take_unclaimed_ready(p_job_id, p_queue);
    v_found := r.job_id IS NOT NULL;
    IF NOT v_found THEN
        DELETE FROM awa.deferred_jobs j WHERE j.job_id = p_job_id AND (p_queue IS NULL OR j.queue = p_queue);
        v_found := FOUND;
    END IF;
    IF NOT v_found THEN
        t := awa._take_open_attempt(p_job_id, 'terminal_removed', p_queue);
        v_found := t.job_id IS NOT NULL;
    END IF;
    -- Terminal rows: those the job index holds, then a completion's, through its ready row.
    -- A completion's ready row goes with it: its terminal row is what ended its receipt
    -- (awa._open_receipts), and the ready row alone would make the receipt look open again.
    DELETE FROM awa.done_entries d
     WHERE d.job_id = p_job_id AND (p_queue IS NULL OR d.queue = p_queue)
       AND (d.state <> 'completed' OR d.kind IS NOT NULL);
    GET DIAGNOSTICS v_rows = ROW_COUNT;
    v_found := v_found OR v_rows > 0;
    WITH completion AS (
        DELETE FROM awa.done_entries d USING awa.ready_entries x
         WHERE x.job_id = p_job_id AND (p_queue IS NULL OR x.queue = p_queue) AND d.state = 'completed' AND d.kind IS NULL
           AND d.ready_slot = x.ready_slot AND d.ready_generation = x.ready_generation AND d.queue = x.queue
           AND d.priority = x.priority AND d.enqueue_shard = x.enqueue_shard AND d.lane_seq = x.lane_seq
        RETURNING d.ready_slot, d.queue, d.priority, d.enqueue_shard, d.lane_seq),
    ready AS (
        DELETE FROM awa.ready_entries x USING completion c
         WHERE x.job_id = p_job_id AND (p_queue IS NULL OR x.queue = p_queue) AND x.ready_slot = c.ready_slot
           AND x.queue = c.queue
           AND x.priority = c.priority AND x.enqueue_shard = c.enqueue_shard AND x.lane_seq = c.lane_seq)
    SELECT count(*) INTO v_rows FROM completion;
    v_found := v_found OR v_rows > 0;
    -- A completion in a batch: the job leaves the batch's arrays (the batch goes when it is
    -- left empty), and its ready row goes with it, for the same reason.
    WITH completion AS (
        UPDATE awa.completion_batches b
           SET lane_offsets = b.lane_offsets[:array_position(b.lane_offsets, (x.lane_seq % 64)::smallint) - 1]
                              || b.lane_offsets[array_position(b.lane_offsets, (x.lane_seq % 64)::smallint) + 1:],
               attempted_at = b.attempted_at[:array_position(b.lane_offsets, (x.lane_seq % 64)::smallint) - 1]
                              || b.attempted_at[array_position(b.lane_offsets, (x.lane_seq % 64)::smallint) + 1:],
               results = b.results[:array_position(b.lane_offsets, (x.lane_seq % 64)::smallint) - 1]
                         || b.results[array_position(b.lane_offsets, (x.lane_seq % 64)::smallint) + 1:]
          FROM awa.ready_entries x
         WHERE x.job_id = p_job_id AND (p_queue IS NULL OR x.queue = p_queue)
           AND b.ready_slot = x.ready_slot AND b.ready_generation = x.ready_generation
           AND b.queue = x.queue AND b.priority = x.priority AND b.enqueue_shard = x.enqueue_shard
           AND b.lane_block = x.lane_seq / 64
           AND (x.lane_seq % 64)::smallint = ANY (b.lane_offsets)
        RETURNING b.ready_slot, b.queue, b.priority, b.enqueue_shard, b.lane_block, x.lane_seq),
    ready AS (
        DELETE FROM awa.ready_entries x USING completion c
         WHERE x.job_id = p_job_id AND (p_queue IS NULL OR x.queue = p_queue) AND x.ready_slot = c.ready_slot
           AND x.queue = c.queue
           AND x.priority = c.priority AND x.enqueue_shard = c.enqueue_shard AND x.lane_seq = c.lane_seq)
    SELECT c.ready_slot, c.queue, c.priority, c.enqueue_shard, c.lane_block INTO v_batch FROM completion c;
    IF v_batch.queue IS NOT NULL THEN
        v_found := true;
        DELETE FROM awa.completion_batches b
         WHERE b.queue = v_batch.queue AND b.priority = v_batch.priority
           AND b.enqueue_shard = v_batch.enqueue_shard AND b.lane_block = v_batch.lane_block
           AND b.ready_slot = v_batch.ready_slot AND b.lane_offsets = '{}';
    END IF;
    DELETE FROM awa.dlq_entries e WHERE e.job_id = p_job_id AND (p_queue IS NULL OR e.queue = p_queue);
    GET DIAGNOSTICS v_rows = ROW_COUNT;
    v_found := v_found OR v_rows > 0;
    IF v_found THEN
        DELETE FROM awa.job_unique_claims u WHERE u.job_id = p_job_id AND (p_queue IS NULL OR u.queue = p_queue);
        PERFORM awa._job_finished(p_job_id);
    END IF;
    RETURN v_found;
END
$$;
REVOKE ALL ON FUNCTION awa.delete_job(bigint, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION awa.delete_job(bigint, text) TO awa_admin;
COMMENT ON FUNCTION awa.delete_job(bigint, text) IS 'Delete a job in any state and release its unique claim. Role: awa_admin.';

-- Physical priority aging: waiting ready rows of lanes with priority > 1 move one
-- priority up, always as a prefix of their lane in lane_seq order (from the claim cursor
-- up to the first row younger than p_older_than), at most p_limit rows. Their lane heads
-- are locked (sorted, SKIP LOCKED: lanes being claimed right now are left for the next
-- run), the rows are removed by full identity and re-enqueued at priority - 1 through
-- awa._enqueue_ready in lane order, so the jobs of one key keep their order: keyed rows
-- keep their key's shard, keyless rows take the rotor, within the queue's current width.
-- _awa_original_priority is stamped once. p_queue limits the run to one queue (NULL:
-- every queue; on a Citus cluster p_queue is required, 0A000 without it, and the call must
-- be delegated to the queue's worker). Returns how many rows moved up.
CREATE FUNCTION awa.age_waiting_priorities(p_older_than interval, p_limit bigint DEFAULT 1000,
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
    PERFORM awa._check_arg(p_older_than >= interval '0', 'p_older_than must not be negative');
    PERFORM awa._check_interval(p_older_than, 'p_older_than');
    PERFORM awa._check_arg(awa._interval_in_range(p_older_than), 'p_older_than must have no negative part');
    PERFORM awa._check_between(p_limit, 1, 100000, 'p_limit');
    IF p_queue IS NOT NULL THEN
        PERFORM awa._check_queue(p_queue, 'p_queue');
    ELSIF awa._citus_group() IS NOT NULL THEN
        -- Every queue at once would lock lane heads and re-enqueue on several workers in one
        -- transaction, which a cluster cannot do (docs/scale-out.md): one queue per call.
        RAISE EXCEPTION 'on a Citus cluster awa.age_waiting_priorities needs p_queue'
            USING ERRCODE = '0A000',
                  DETAIL = 'Aging every queue at once would move jobs of several workers in one transaction.',
                  HINT = 'Call awa.age_waiting_priorities(p_older_than, p_limit, p_queue => ''the queue'') for each queue, alone in its statement.';
    END IF;
    PERFORM awa._require_queue_local(p_queue);
    v_cutoff := clock_timestamp() - p_older_than;
    -- On a Citus cluster (p_queue given, its shards here): the same aging in statements that
    -- each name the queue (docs/scale-out.md).
    IF awa._citus_group() IS NOT NULL THEN
        RETURN awa._age_waiting_queue(p_queue, v_cutoff, p_limit);
    END IF;
    SELECT array_agg(h.queue), array_agg(h.priority), array_agg(h.enqueue_shard)
      INTO v_queues, v_priorities, v_shards
      FROM (SELECT c.queue, c.priority, c.enqueue_shard FROM awa.queue_claim_heads c
             WHERE c.priority > 1 AND (p_queue IS NULL OR c.queue = p_queue)
               AND EXISTS (SELECT 1 FROM awa.lane_cursors k
                             JOIN awa.ready_entries r
                               ON r.queue = k.queue AND r.priority = k.priority
                              AND r.enqueue_shard = k.enqueue_shard AND r.lane_seq >= k.claim_seq
                            WHERE k.queue = c.queue AND k.priority = c.priority
                              AND k.enqueue_shard = c.enqueue_shard AND r.run_at <= v_cutoff)
             ORDER BY c.queue, c.priority, c.enqueue_shard
               FOR UPDATE SKIP LOCKED) h;
    IF v_queues IS NULL THEN
        RETURN 0;
    END IF;
    PERFORM awa._heads_locked(p_queue);
    -- The locked lanes' cursors on the latest committed state: no claim can move them now.
    SELECT array_agg(awa._lane_cursor(l.queue, l.priority, l.enqueue_shard) ORDER BY l.ord) INTO v_claims
      FROM unnest(v_queues, v_priorities, v_shards) WITH ORDINALITY AS l(queue, priority, enqueue_shard, ord);
    WITH waiting AS (
        SELECT r.ready_slot, r.queue, r.priority, r.enqueue_shard, r.lane_seq,
               bool_and(r.run_at <= v_cutoff) OVER (PARTITION BY r.queue, r.priority, r.enqueue_shard
                                                    ORDER BY r.lane_seq) AS in_prefix
          FROM unnest(v_queues, v_priorities, v_shards, v_claims) AS h(queue, priority, enqueue_shard, claim_seq)
          JOIN awa.ready_entries r
            ON r.queue = h.queue AND r.priority = h.priority AND r.enqueue_shard = h.enqueue_shard
           AND r.lane_seq >= h.claim_seq),
    victims AS (
        SELECT w.* FROM waiting w WHERE w.in_prefix
         ORDER BY w.queue, w.priority, w.enqueue_shard, w.lane_seq
         LIMIT p_limit),
    gone AS (
        DELETE FROM awa.ready_entries r USING victims v
         WHERE r.ready_slot = v.ready_slot AND r.queue = v.queue AND r.priority = v.priority
           AND r.enqueue_shard = v.enqueue_shard AND r.lane_seq = v.lane_seq
        RETURNING r AS row_)
    SELECT array_agg(awa._ready_as_deferred(g.row_, (g.row_).queue, ((g.row_).priority - 1)::smallint,
                         jsonb_build_object('_awa_original_priority', (g.row_).priority))
                     ORDER BY (g.row_).queue, (g.row_).priority, (g.row_).enqueue_shard, (g.row_).lane_seq)
      INTO v_rows FROM gone g;
    IF v_rows IS NULL THEN
        RETURN 0;
    END IF;
    RETURN awa._enqueue_ready(v_rows);
END
$$;
REVOKE ALL ON FUNCTION awa.age_waiting_priorities(interval, bigint, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION awa.age_waiting_priorities(interval, bigint, text) TO awa_admin;
COMMENT ON FUNCTION awa.age_waiting_priorities(interval, bigint, text) IS 'Move waiting jobs older than p_older_than one priority up, in lane order. Role: awa_admin.';

-- Move a job's unique claim from queue p_from to queue p_to (unique keys are per queue):
-- 23505 when a live job of p_to holds the key. Nothing when the job holds no claim in p_from
-- or the queue does not change.
CREATE FUNCTION awa._move_unique_claim(p_job_id bigint, p_from text, p_to text) RETURNS void
    LANGUAGE plpgsql VOLATILE
    SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF p_from IS NULL OR p_from = p_to THEN
        RETURN;
    END IF;
    WITH gone AS (DELETE FROM awa.job_unique_claims u WHERE u.queue = p_from AND u.job_id = p_job_id
                  RETURNING u.unique_key)
    INSERT INTO awa.job_unique_claims (unique_key, job_id, queue) SELECT g.unique_key, p_job_id, p_to FROM gone g;
END
$$;
REVOKE ALL ON FUNCTION awa._move_unique_claim(bigint, text, text) FROM PUBLIC;
COMMENT ON FUNCTION awa._move_unique_claim(bigint, text, text) IS 'Internal: move a job''s unique claim to another queue (23505 when a job there holds the key).';

-- Move a scheduled/retryable or unclaimed ready job to another queue (and optionally
-- priority); the destination's current width decides the shard. Same rules as in 1.0:
-- a waiting row is removed under its lane head lock and re-enqueued. A destination that
-- does not exist yet is created, as an enqueue would create it. p_from_queue, the routing
-- argument (p_queue is the destination): NULL finds the job by id alone; given, a job of
-- another queue is not moved (false), as for cancel_job.
CREATE FUNCTION awa.move_queue(p_job_id bigint, p_queue text, p_priority bigint DEFAULT NULL,
                               p_from_queue text DEFAULT NULL)
    RETURNS boolean
    LANGUAGE plpgsql VOLATILE
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp SET plan_cache_mode = force_custom_plan
AS $$
DECLARE
    r awa.ready_entries;
    v_priority smallint;
    v_metadata jsonb;
    v_from text;
BEGIN
    PERFORM awa._require(p_job_id IS NULL, 'p_job_id');
    PERFORM awa._check_queue(p_queue, 'p_queue');
    PERFORM awa._check_priority(p_priority, 'p_priority');
    IF p_from_queue IS NOT NULL THEN
        PERFORM awa._check_queue(p_from_queue, 'p_from_queue');
    END IF;
    PERFORM awa._require_queue_kept(p_from_queue, p_queue, 'move_queue');
    SELECT j.queue, j.priority, j.metadata INTO v_from, v_priority, v_metadata FROM awa.deferred_jobs j
     WHERE j.job_id = p_job_id AND (p_from_queue IS NULL OR j.queue = p_from_queue) FOR UPDATE;
    -- Updated in place, so that a cancel, delete or move waiting for the row follows it, with
    -- values computed here (Citus allows no function but an immutable one in a CASE of an
    -- UPDATE). The queue is set only when it changes: on a Citus cluster it is the
    -- distribution column, which an UPDATE may not name (a move there stays in its queue:
    -- _require_queue_kept).
    IF v_from IS NOT NULL THEN
        v_metadata := awa._stamp_metadata(v_metadata,
            CASE WHEN v_from <> p_queue THEN jsonb_build_object('_awa_original_queue', v_from) ELSE '{}' END
            || CASE WHEN v_priority <> coalesce(p_priority, v_priority)
                    THEN jsonb_build_object('_awa_original_priority', v_priority) ELSE '{}' END);
        v_priority := coalesce(p_priority, v_priority);
        IF p_queue = v_from THEN
            UPDATE awa.deferred_jobs j SET priority = v_priority, metadata = v_metadata
             WHERE j.job_id = p_job_id AND j.queue = v_from;
        ELSE
            UPDATE awa.deferred_jobs j SET queue = p_queue, priority = v_priority, metadata = v_metadata
             WHERE j.job_id = p_job_id AND j.queue = v_from;
        END IF;
    END IF;
    IF v_from IS NOT NULL AND FOUND THEN
        PERFORM awa._move_unique_claim(p_job_id, v_from, p_queue);
        IF v_from <> p_queue THEN
            PERFORM awa._job_finished(p_job_id);  -- a waiter that names the old queue: NULL now
        END IF;
        RETURN true;
    END IF;
    r := awa._take_unclaimed_ready(p_job_id, p_from_queue);
    IF r.job_id IS NULL THEN
        RETURN false;
    END IF;
    PERFORM awa._move_unique_claim(p_job_id, r.queue, p_queue);
    IF r.queue <> p_queue THEN
        PERFORM awa._job_finished(p_job_id);
    END IF;
    v_priority := coalesce(p_priority, r.priority);
    PERFORM awa._enqueue_ready(ARRAY[awa._ready_as_deferred(r, p_queue, v_priority,
        CASE WHEN r.queue <> p_queue THEN jsonb_build_object('_awa_original_queue', r.queue) ELSE '{}' END
        || CASE WHEN r.priority <> v_priority THEN jsonb_build_object('_awa_original_priority', r.priority)
                ELSE '{}' END)]);
    RETURN true;
END
$$;
REVOKE ALL ON FUNCTION awa.move_queue(bigint, text, bigint, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION awa.move_queue(bigint, text, bigint, text) TO awa_admin;
COMMENT ON FUNCTION awa.move_queue(bigint, text, bigint, text) IS 'Move a scheduled, retryable or waiting job to another queue and optionally priority. Role: awa_admin.';

-- Bring a job back from the dead-letter queue, optionally into another queue or priority
-- (attempt restarts at 0, run_lease and ordering key kept; a future p_run_at schedules it).
-- p_from_queue, the routing argument (p_queue is the destination): NULL finds the dead
-- letter by id alone; given, a dead letter of another queue is not retried (false).
CREATE FUNCTION awa.retry_from_dlq(p_job_id bigint, p_queue text DEFAULT NULL,
                                   p_priority bigint DEFAULT NULL, p_run_at timestamptz DEFAULT NULL,
                                   p_from_queue text DEFAULT NULL)
    RETURNS boolean
    LANGUAGE plpgsql VOLATILE
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp SET plan_cache_mode = force_custom_plan
AS $$
DECLARE
    x awa.dlq_entries;
    d awa.deferred_jobs;
    v_later boolean := coalesce(p_run_at > clock_timestamp(), false);
BEGIN
    PERFORM awa._require(p_job_id IS NULL, 'p_job_id');
    IF p_queue IS NOT NULL THEN
        PERFORM awa._check_queue(p_queue, 'p_queue');
    END IF;
    PERFORM awa._check_priority(p_priority, 'p_priority');
    PERFORM awa._check_arg(isfinite(p_run_at), 'p_run_at must be a finite timestamp');
    IF p_from_queue IS NOT NULL THEN
        PERFORM awa._check_queue(p_from_queue, 'p_from_queue');
    END IF;
    PERFORM awa._require_queue_kept(p_from_queue, coalesce(p_queue, p_from_queue), 'retry_from_dlq');
    DELETE FROM awa.dlq_entries e WHERE e.job_id = p_job_id AND (p_from_queue IS NULL OR e.queue = p_from_queue)
    RETURNING e.* INTO x;
    IF NOT FOUND THEN
        RETURN false;
    END IF;
    -- The dead letter's job, with attempts restarting and no attempt or end time yet.
    d := awa._job_row(NULL::awa.deferred_jobs, awa._job(x), jsonb_build_object(
        'queue', coalesce(p_queue, x.queue), 'priority', coalesce(p_priority, x.priority), 'attempt', 0,
        'attempted_at', NULL, 'state', 'scheduled',
        'run_at', CASE WHEN v_later THEN p_run_at ELSE clock_timestamp() END,
        'metadata', awa._stamp_metadata(x.metadata,
            CASE WHEN coalesce(p_queue, x.queue) <> x.queue
                 THEN jsonb_build_object('_awa_original_queue', x.queue) ELSE '{}' END)));
    -- Unique keys are per queue: a job that changes queue leaves a claim it held in the old
    -- one, and takes its key in the new one when its new state is in its mask.
    IF d.queue <> x.queue THEN
        PERFORM awa._set_unique_claim(x.job_id, x.unique_key, false, x.queue);
        IF awa.job_state_in_bitmask(d.unique_states, CASE WHEN v_later THEN 'scheduled' ELSE 'available' END::awa.job_state) THEN
            PERFORM awa._set_unique_claim(d.job_id, d.unique_key, true, d.queue);
        END IF;
    END IF;
    IF v_later THEN
        INSERT INTO awa.deferred_jobs SELECT (d).*;
        IF d.queue = x.queue THEN
            PERFORM awa._sync_unique_claim(d.job_id, d.unique_key, d.unique_states, 'failed', 'scheduled', d.queue);
        END IF;
    ELSE
        IF d.queue = x.queue THEN
            PERFORM awa._sync_unique_claim(d.job_id, d.unique_key, d.unique_states, 'failed', 'available', d.queue);
        END IF;
        PERFORM awa._enqueue_ready(ARRAY[d]);
    END IF;
    -- Back in its mask, the job must hold its key. When another live job holds it, the dead
    -- letter stays where it is (23505, as an enqueue of the key would get): a job back without
    -- its claim would leave the key free once the holder's claim goes, for a third job.
    IF d.unique_key IS NOT NULL AND d.unique_states IS NOT NULL
       AND awa.job_state_in_bitmask(d.unique_states, CASE WHEN v_later THEN 'scheduled' ELSE 'available' END::awa.job_state)
       AND NOT EXISTS (SELECT 1 FROM awa.job_unique_claims u
                        WHERE u.queue = d.queue AND u.unique_key = d.unique_key AND u.job_id = d.job_id) THEN
        RAISE EXCEPTION 'duplicate key value violates unique constraint "idx_awa_jobs_unique"'
            USING ERRCODE = '23505',
                  DETAIL = format('Job %s holds the unique key of job %s.',
                                  (SELECT u.job_id FROM awa.job_unique_claims u
                                    WHERE u.queue = d.queue AND u.unique_key = d.unique_key), d.job_id),
                  HINT = 'Retry the dead letter once that job has left the key''s states.';
    END IF;
    RETURN true;
END
$$;
REVOKE ALL ON FUNCTION awa.retry_from_dlq(bigint, text, bigint, timestamptz, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION awa.retry_from_dlq(bigint, text, bigint, timestamptz, text) TO awa_admin;
COMMENT ON FUNCTION awa.retry_from_dlq(bigint, text, bigint, timestamptz, text) IS 'Bring a job back from the dead-letter queue (attempt 0), optionally elsewhere or later. Role: awa_admin.';

-- Move a failed terminal job into the dead-letter queue with a reason. The body comes
-- from the done row or, where that is narrow, from the ready row of the same lane
-- identity (shard included). Returns false when the job has no failed terminal row (in
-- p_queue, when given). p_queue is the routing argument on a Citus cluster, where a call
-- without it, or not delegated to the queue's worker, is refused (0A000) before anything
-- is touched (awa._require_queue_local); by id alone it works on one server. Row by row
-- through variables: no statement takes a whole row of a table (Citus would hand the
-- shard's row type to awa._done_job).
CREATE FUNCTION awa.move_failed_to_dlq(p_job_id bigint, p_reason text, p_queue text DEFAULT NULL) RETURNS boolean
    LANGUAGE plpgsql VOLATILE
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp SET plan_cache_mode = force_custom_plan
AS $$
DECLARE
    d awa.done_entries;
    r awa.ready_entries;
    j awa.job_template;
    x awa.dlq_entries;
    v_moved boolean := false;
BEGIN
    PERFORM awa._require(p_job_id IS NULL, 'p_job_id');
    PERFORM awa._require(p_reason IS NULL, 'p_reason');
    IF p_queue IS NOT NULL THEN
        PERFORM awa._check_queue(p_queue, 'p_queue');
    END IF;
    PERFORM awa._require_queue_local(p_queue);
    FOR d IN
        DELETE FROM awa.done_entries g
         WHERE g.job_id = p_job_id AND g.state = 'failed' AND (p_queue IS NULL OR g.queue = p_queue)
        RETURNING g.*
    LOOP
        r := NULL;
        SELECT e.* INTO r FROM awa.ready_entries e
         WHERE e.ready_slot = d.ready_slot AND e.ready_generation = d.ready_generation AND e.queue = d.queue
           AND e.priority = d.priority AND e.enqueue_shard = d.enqueue_shard AND e.lane_seq = d.lane_seq;
        j := awa._done_job(d, r);
        x := awa._job_row(NULL::awa.dlq_entries, j, jsonb_build_object(
                 'args', coalesce(j.args, '{}'), 'state', 'failed', 'max_attempts', coalesce(j.max_attempts, 25),
                 'finalized_at', d.finalized_at, 'created_at', coalesce(j.created_at, d.finalized_at),
                 'dlq_reason', p_reason, 'dlq_at', clock_timestamp(), 'original_run_lease', d.run_lease));
        INSERT INTO awa.dlq_entries SELECT (x).*;
        v_moved := true;
    END LOOP;
    RETURN v_moved;
END
$$;
REVOKE ALL ON FUNCTION awa.move_failed_to_dlq(bigint, text, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION awa.move_failed_to_dlq(bigint, text, text) TO awa_admin;
COMMENT ON FUNCTION awa.move_failed_to_dlq(bigint, text, text) IS 'Move a failed terminal job (in p_queue, when given: the routing argument on Citus) into the dead-letter queue. Role: awa_admin.';

-- Cancel many jobs of a queue (optionally of one kind, of some live states) with the rule of
-- awa.cancel_job, job by job, at most p_limit (1..10000) jobs a call, oldest lane position
-- first (lanes in (priority, shard) order, the lock order of the claim heads). Bounded: one
-- call is one transaction, and the claim heads of the lanes it cancelled waiting jobs in stay
-- locked until it ends, so a call touches at most p_limit jobs; call it again (in its own
-- transaction) until it returns 0. p_states: NULL = every live state (available, scheduled,
-- retryable, running, waiting_external); terminal states are refused. Returns how many
-- jobs it cancelled.
CREATE FUNCTION awa.cancel_jobs(p_queue text, p_kind text DEFAULT NULL, p_states awa.job_state[] DEFAULT NULL,
                                p_limit bigint DEFAULT 1000) RETURNS bigint
    LANGUAGE plpgsql VOLATILE
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp SET jit = off
AS $$
DECLARE
    v_live CONSTANT awa.job_state[] := ARRAY['available', 'scheduled', 'retryable', 'running', 'waiting_external'];
    v_states awa.job_state[] := coalesce(p_states, v_live);
    v_cancelled bigint := 0;
    v_id bigint;
BEGIN
    PERFORM awa._require_queue(p_queue, 'p_queue');
    PERFORM awa._require(p_limit IS NULL, 'p_limit');
    PERFORM awa._check_between(p_limit, 1, 10000, 'p_limit');
    PERFORM awa._check_arg(coalesce(array_ndims(p_states), 1) = 1 AND array_position(p_states, NULL) IS NULL
                           AND v_states <@ v_live,
                           'p_states may only hold live states (available, scheduled, retryable, running, waiting_external)');
    FOR v_id IN
        SELECT j.id FROM awa.jobs j
         WHERE j.queue = p_queue AND j.state = ANY (v_states) AND (p_kind IS NULL OR j.kind = p_kind)
         ORDER BY j.priority, j.enqueue_shard NULLS LAST, j.lane_seq NULLS LAST, j.id
         LIMIT p_limit
    LOOP
        IF awa.cancel_job(v_id, p_queue) THEN
            v_cancelled := v_cancelled + 1;
        END IF;
    END LOOP;
    RETURN v_cancelled;
END
$$;
REVOKE ALL ON FUNCTION awa.cancel_jobs(text, text, awa.job_state[], bigint) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION awa.cancel_jobs(text, text, awa.job_state[], bigint) TO awa_admin;
COMMENT ON FUNCTION awa.cancel_jobs(text, text, awa.job_state[], bigint) IS 'Cancel up to p_limit live jobs of a queue (optionally of a kind and states) by the rule of cancel_job; returns how many. Role: awa_admin.';

-- Bring failed jobs of a queue (optionally of one kind) back to available, at most p_limit
-- (1..10000) a call, oldest id first: a failed terminal job through the rules of
-- awa.move_failed_to_dlq then awa.retry_from_dlq, a dead letter through retry_from_dlq, so a
-- keyed job goes back to its key's shard and the jobs of one key re-enter their lane in id
-- order. A job whose unique key another live job holds stays where it is (skipped, 23505 of
-- retry_from_dlq absorbed for it alone). Bounded as awa.cancel_jobs: call again until it
-- returns 0. Returns how many jobs it brought back.
CREATE FUNCTION awa.retry_jobs(p_queue text, p_kind text DEFAULT NULL, p_limit bigint DEFAULT 1000) RETURNS bigint
    LANGUAGE plpgsql VOLATILE
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp SET jit = off
AS $$
DECLARE
    v_retried bigint := 0;
    r record;
BEGIN
    PERFORM awa._require_queue(p_queue, 'p_queue');
    PERFORM awa._require(p_limit IS NULL, 'p_limit');
    PERFORM awa._check_between(p_limit, 1, 10000, 'p_limit');
    FOR r IN
        SELECT j.id, EXISTS (SELECT 1 FROM awa.dlq_entries e WHERE e.queue = p_queue AND e.job_id = j.id) AS dead_lettered
          FROM awa.jobs j
         WHERE j.queue = p_queue AND j.state = 'failed' AND (p_kind IS NULL OR j.kind = p_kind)
         ORDER BY j.id
         LIMIT p_limit
    LOOP
        BEGIN
            IF (r.dead_lettered OR awa.move_failed_to_dlq(r.id, 'retry_jobs', p_queue))
               AND awa.retry_from_dlq(r.id, p_from_queue => p_queue) THEN
                v_retried := v_retried + 1;
            END IF;
        EXCEPTION WHEN unique_violation THEN
            NULL;
        END;
    END LOOP;
    RETURN v_retried;
END
$$;
REVOKE ALL ON FUNCTION awa.retry_jobs(text, text, bigint) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION awa.retry_jobs(text, text, bigint) TO awa_admin;
COMMENT ON FUNCTION awa.retry_jobs(text, text, bigint) IS 'Bring up to p_limit failed or dead-lettered jobs of a queue back to available by the rules of retry_from_dlq; returns how many. Role: awa_admin.';

-- Dead-letter entries of a queue (every queue when p_queue is NULL), newest first.
CREATE FUNCTION awa.list_dlq(p_queue text, p_limit bigint DEFAULT 100) RETURNS SETOF awa.dlq_entries
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
REVOKE ALL ON FUNCTION awa.list_dlq(text, bigint) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION awa.list_dlq(text, bigint) TO awa_admin;
COMMENT ON FUNCTION awa.list_dlq(text, bigint) IS 'Dead letters of a queue (every queue when NULL), newest first. Role: awa_admin.';

-- One job by id, in its current state (awa.jobs): one row, or none when the id is unknown
-- or the job's terminal row has been pruned. For producers and workers, who cannot read
-- the tables; it discloses the whole job row to any holder of those roles. Every branch of
-- awa.jobs has an index on the job id; a plan cached while the tables were small must not
-- scan them once they are large (enable_seqscan = off, as on the worker hot path).
CREATE FUNCTION awa.get_job(p_job_id bigint) RETURNS SETOF awa.job_row
    LANGUAGE plpgsql STABLE ROWS 1
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp SET jit = off SET enable_seqscan = off
AS $$
BEGIN
    PERFORM awa._require(p_job_id IS NULL, 'p_job_id');
    RETURN QUERY SELECT j.* FROM awa.jobs j WHERE j.id = p_job_id LIMIT 1;
END
$$;
REVOKE ALL ON FUNCTION awa.get_job(bigint) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION awa.get_job(bigint) TO awa_producer, awa_worker, awa_admin;
COMMENT ON FUNCTION awa.get_job(bigint) IS 'One job by id in its current state (awa.job_row); no row when unknown. Role: awa_producer, awa_worker, awa_admin.';

-- The same, told the job's queue (docs/design.md §12: every statement names its queue); no row when the
-- job is not in that queue.
CREATE FUNCTION awa.get_job(p_queue text, p_job_id bigint) RETURNS SETOF awa.job_row
    LANGUAGE plpgsql STABLE ROWS 1
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp SET jit = off SET enable_seqscan = off
AS $$
DECLARE
    v_sql constant text := 'SELECT j.* FROM awa.jobs j WHERE j.queue = $1 AND j.id = $2 LIMIT 1';
BEGIN
    PERFORM awa._check_queue(p_queue, 'p_queue');
    PERFORM awa._require(p_job_id IS NULL, 'p_job_id');
    -- On a Citus worker that holds the queue, over its own shards (awa._queue_shard_sql).
    RETURN QUERY EXECUTE coalesce(awa._queue_shard_sql(v_sql, p_queue), v_sql) USING p_queue, p_job_id;
END
$$;
REVOKE ALL ON FUNCTION awa.get_job(text, bigint) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION awa.get_job(text, bigint) TO awa_producer, awa_worker, awa_admin;
COMMENT ON FUNCTION awa.get_job(text, bigint) IS 'One job by queue and id in its current state; no row when not in that queue. Role: awa_producer, awa_worker, awa_admin.';

-- Wait for a job to finish: its row (awa.job_row) as soon as it is completed, failed,
-- cancelled or dead-lettered, or its current row when p_timeout_ms (0..3600000) passes;
-- NULL when no job has the id. Preloaded, it sleeps until the commit that finishes the job
-- (src/job_wait.cpp); otherwise it re-reads the job every 100 ms. Reads the latest committed
-- state whatever the caller's isolation level. For producers, workers and admins (it
-- discloses the job row to any holder of those roles, as get_job does). p_queue: the job's
-- queue (NULL when not in it); the routing argument on a Citus cluster, where a call
-- without it is refused (0A000); by id alone it works on one server.
CREATE FUNCTION awa.wait_for_job(p_job_id bigint, p_timeout_ms bigint, p_queue text DEFAULT NULL) RETURNS awa.job_row
    AS 'MODULE_PATHNAME', 'awa_wait_for_job'
    LANGUAGE C VOLATILE PARALLEL UNSAFE
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp SET jit = off SET enable_seqscan = off;
REVOKE ALL ON FUNCTION awa.wait_for_job(bigint, bigint, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION awa.wait_for_job(bigint, bigint, text) TO awa_producer, awa_worker, awa_admin;
COMMENT ON FUNCTION awa.wait_for_job(bigint, bigint, text) IS 'Wait until a job (of p_queue, when given: the routing argument on Citus) is terminal (or the timeout) and return it; NULL when unknown. Role: awa_producer, awa_worker, awa_admin.';

-- Jobs of a known queue, optionally of one state, oldest id first, at most p_limit
-- (1..10000). Reads like awa.jobs filtered on the queue: it scans that queue's rows.
CREATE FUNCTION awa.list_jobs(p_queue text, p_state awa.job_state DEFAULT NULL, p_limit bigint DEFAULT 100)
    RETURNS SETOF awa.job_row
    LANGUAGE plpgsql STABLE ROWS 100
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp SET jit = off
AS $$
DECLARE
    v_sql constant text := 'SELECT j.* FROM awa.jobs j WHERE j.queue = $1 AND ($2 IS NULL OR j.state = $2) '
                           'ORDER BY j.id LIMIT $3';
BEGIN
    PERFORM awa._require_queue(p_queue, 'p_queue');
    PERFORM awa._require(p_limit IS NULL, 'p_limit');
    PERFORM awa._check_between(p_limit, 1, 10000, 'p_limit');
    -- On a Citus worker that holds the queue, over its own shards (awa._queue_shard_sql).
    RETURN QUERY EXECUTE coalesce(awa._queue_shard_sql(v_sql, p_queue), v_sql) USING p_queue, p_state, p_limit;
END
$$;
REVOKE ALL ON FUNCTION awa.list_jobs(text, awa.job_state, bigint) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION awa.list_jobs(text, awa.job_state, bigint) TO awa_admin;
COMMENT ON FUNCTION awa.list_jobs(text, awa.job_state, bigint) IS 'Jobs of a known queue, optionally of one state, oldest id first. Role: awa_admin.';
