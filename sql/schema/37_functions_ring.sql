-- The rings: write slots, rotation and prune (docs/maintenance.md).

-- The write slot of a ring ('queue', 'claim' or 'lease') for this transaction: its
-- partitions are locked so prune cannot free the slot before this transaction ends.
CREATE FUNCTION awa._ring_write_slot(p_ring text, OUT slot integer, OUT generation bigint)
    AS 'MODULE_PATHNAME', 'awa_ring_write_slot'
    LANGUAGE C VOLATILE PARALLEL UNSAFE
    SET search_path = pg_catalog, pg_temp;
REVOKE ALL ON FUNCTION awa._ring_write_slot(text) FROM PUBLIC;
COMMENT ON FUNCTION awa._ring_write_slot(text) IS 'Internal: the write slot of a ring for this transaction, fenced against prune.';

-- The live arc of a ring: the slots that can hold rows, as two inclusive ranges (an empty
-- range has lo > hi). Readers that name it let the executor skip the freed partitions.
CREATE FUNCTION awa._ring_live_arc(p_ring text, OUT lo1 integer, OUT hi1 integer, OUT lo2 integer, OUT hi2 integer)
    AS 'MODULE_PATHNAME', 'awa_ring_live_arc'
    LANGUAGE C VOLATILE PARALLEL UNSAFE
    SET search_path = pg_catalog, pg_temp;
REVOKE ALL ON FUNCTION awa._ring_live_arc(text) FROM PUBLIC;
COMMENT ON FUNCTION awa._ring_live_arc(text) IS 'Internal: the live slots of a ring, as two inclusive ranges.';

-- A prune freed a slot of a ring in this transaction: a write slot this transaction fenced
-- there is forgotten (its own locks never kept its own prune out), so its next write fences
-- the live slot instead of writing into the freed one.
CREATE FUNCTION awa._ring_slot_freed(p_ring text, p_slot integer) RETURNS void
    AS 'MODULE_PATHNAME', 'awa_ring_slot_freed'
    LANGUAGE C VOLATILE PARALLEL UNSAFE
    SET search_path = pg_catalog, pg_temp;
REVOKE ALL ON FUNCTION awa._ring_slot_freed(text, integer) FROM PUBLIC;
COMMENT ON FUNCTION awa._ring_slot_freed(text, integer) IS 'Internal: forget a write slot this transaction fenced in a slot it has just freed.';

-- Every write to a ring table (rotation, prune, a restore) opens a ring change that closes
-- when its transaction ends; backends use their cached ring cursors only while no change is
-- open and none has closed since they read them (docs/maintenance.md §2). A statement
-- trigger (every statement, TRUNCATE included) and a row trigger (a logical replication
-- apply worker fires row triggers only), both ENABLE ALWAYS so that they fire in replica
-- sessions too; a table without both enabled that way is never cached.
CREATE FUNCTION awa._ring_changed() RETURNS trigger
    AS 'MODULE_PATHNAME', 'awa_ring_changed'
    LANGUAGE C VOLATILE PARALLEL UNSAFE
    SET search_path = pg_catalog, pg_temp;
REVOKE ALL ON FUNCTION awa._ring_changed() FROM PUBLIC;
COMMENT ON FUNCTION awa._ring_changed() IS 'Internal: statement and row trigger on the ring tables; cached ring cursors are not trusted until this transaction ends.';
DO $$
DECLARE
    t text;
BEGIN
    FOREACH t IN ARRAY ARRAY['queue_ring_state', 'queue_ring_slots', 'claim_ring_state', 'claim_ring_slots',
                             'lease_ring_state', 'lease_ring_slots'] LOOP
        EXECUTE format('CREATE TRIGGER ring_changed AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON awa.%I
                            FOR EACH STATEMENT EXECUTE FUNCTION awa._ring_changed()', t);
        EXECUTE format('CREATE TRIGGER ring_row_changed AFTER INSERT OR UPDATE OR DELETE ON awa.%I
                            FOR EACH ROW EXECUTE FUNCTION awa._ring_changed()', t);
        EXECUTE format('ALTER TABLE awa.%I ENABLE ALWAYS TRIGGER ring_changed', t);
        EXECUTE format('ALTER TABLE awa.%I ENABLE ALWAYS TRIGGER ring_row_changed', t);
    END LOOP;
END
$$;

-- Take ACCESS EXCLUSIVE (with p_share: SHARE ROW EXCLUSIVE, which keeps writers out and lets
-- readers in) on every relation named (schema-qualified, quoted), without ever queueing for
-- long: the first try does not wait at all (NOWAIT); later tries, while p_budget_ms lasts,
-- wait at most lock_timeout (10 ms) each and then step out of the lock queue and sleep.
-- Producers and workers never wait on a prune's lock request longer than one try. A try that
-- PostgreSQL finds deadlocked at once (a lock this transaction already holds is awaited by a
-- writer whose own lock this one would wait for) is a refusal too: the caller steps back.
-- Returns whether the locks are held.
CREATE FUNCTION awa._lock_relations_briefly(p_relations text[], p_budget_ms integer, p_share boolean)
    RETURNS boolean
    LANGUAGE plpgsql VOLATILE
    SET search_path = pg_catalog, pg_temp SET lock_timeout = '10ms'
AS $$
DECLARE
    v_deadline timestamptz := clock_timestamp() + make_interval(secs => p_budget_ms / 1000.0);
    v_sql text := 'LOCK TABLE ' || array_to_string(p_relations, ', ')
                  || CASE WHEN p_share THEN ' IN SHARE ROW EXCLUSIVE MODE' ELSE ' IN ACCESS EXCLUSIVE MODE' END;
    v_first boolean := true;
BEGIN
    LOOP
        BEGIN
            EXECUTE v_sql || CASE WHEN v_first THEN ' NOWAIT' ELSE '' END;
            RETURN true;
        EXCEPTION WHEN lock_not_available THEN
            v_first := false;
        WHEN deadlock_detected THEN
            RETURN false;
        END;
        PERFORM pg_sleep(0.002);
        IF clock_timestamp() >= v_deadline THEN
            RETURN false;
        END IF;
    END LOOP;
END
$$;
REVOKE ALL ON FUNCTION awa._lock_relations_briefly(text[], integer, boolean) FROM PUBLIC;
COMMENT ON FUNCTION awa._lock_relations_briefly(text[], integer, boolean) IS 'Internal: take ACCESS EXCLUSIVE (or SHARE ROW EXCLUSIVE) on relations in short tries, never queueing for long.';

-- awa._lock_relations_briefly on ring partitions awa.<table>, for every table named.
CREATE FUNCTION awa._lock_ring_partitions(p_tables text[], p_budget_ms integer, p_share boolean DEFAULT false)
    RETURNS boolean
    LANGUAGE sql VOLATILE
    SET search_path = pg_catalog, pg_temp
    RETURN awa._lock_relations_briefly(ARRAY(SELECT 'awa.' || quote_ident(t) FROM unnest(p_tables) t),
                                       p_budget_ms, p_share);
REVOKE ALL ON FUNCTION awa._lock_ring_partitions(text[], integer, boolean) FROM PUBLIC;
COMMENT ON FUNCTION awa._lock_ring_partitions(text[], integer, boolean) IS 'Internal: take ACCESS EXCLUSIVE (or SHARE ROW EXCLUSIVE) on ring partitions in short tries, never queueing for long.';

-- Rotate the queue ring: seal the current slot and make the next one current, when the
-- current slot holds rows and the next slot is free (pruned). Serialised with prune and
-- other rotations by the cursor row lock, never waiting for it.
-- Returns rotated / skipped_idle / skipped_busy / skipped_concurrent.
CREATE FUNCTION awa.rotate_queue_ring() RETURNS text
    LANGUAGE plpgsql VOLATILE
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp SET jit = off
AS $$
DECLARE
    st awa.queue_ring_state;
    v_next integer;
BEGIN
    PERFORM awa._require_read_committed('rotate_queue_ring');
    -- On a Citus cluster the shared rings are the coordinator's (docs/scale-out.md).
    IF awa._citus_group() <> 0 THEN
        RETURN 'skipped_not_coordinator';
    END IF;
    BEGIN
        SELECT * INTO st FROM awa.queue_ring_state FOR UPDATE NOWAIT;
    EXCEPTION WHEN lock_not_available THEN
        RETURN 'skipped_concurrent';
    END;
    v_next := (st.current_slot + 1) % st.slot_count;
    IF NOT EXISTS (SELECT 1 FROM awa.ready_entries WHERE ready_slot = st.current_slot) THEN
        RETURN 'skipped_idle';
    END IF;
    IF (SELECT s.generation FROM awa.queue_ring_slots s WHERE s.slot = v_next) >= 0
       OR EXISTS (SELECT 1 FROM awa.ready_entries WHERE ready_slot = v_next)
       OR EXISTS (SELECT 1 FROM awa.done_entries WHERE ready_slot = v_next)
       OR EXISTS (SELECT 1 FROM awa.completion_batches WHERE ready_slot = v_next) THEN
        RETURN 'skipped_busy';
    END IF;
    UPDATE awa.queue_ring_state SET current_slot = v_next, generation = st.generation + 1;
    UPDATE awa.queue_ring_slots SET generation = st.generation + 1, moved_xid = NULL, moved_horizons = NULL WHERE slot = v_next;
    RETURN 'rotated';
END
$$;
REVOKE ALL ON FUNCTION awa.rotate_queue_ring() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION awa.rotate_queue_ring() TO awa_admin;
COMMENT ON FUNCTION awa.rotate_queue_ring() IS 'Seal the queue ring''s current slot and start the next one when possible. Role: awa_admin.';

-- The retention bucket (its ready_slot in done_entries, -2 - bucket) for rows that may go at
-- p_deadline; NULL: the retained partition (-1), kept until retried or deleted. A bucket
-- already expiring at p_deadline, else a free one, else (all 16 in use) the one expiring
-- next after p_deadline, else the latest one, its expiry moved to p_deadline: a row never
-- goes before its deadline, only later when more deadlines are live than there are buckets.
-- Only prune calls it (serialised by the queue ring's cursor row); expiry skips the bucket
-- rows it locks, and it skips those expiry locks (when every one is, the prune steps back:
-- 'skipped_locked').
CREATE FUNCTION awa._retention_bucket(p_deadline timestamptz) RETURNS integer
    LANGUAGE plpgsql VOLATILE
    SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_bucket integer;
BEGIN
    IF p_deadline IS NULL THEN
        RETURN -1;
    END IF;
    SELECT b.bucket INTO v_bucket FROM awa.retention_buckets b
     WHERE b.expires_at = p_deadline ORDER BY b.bucket LIMIT 1 FOR SHARE SKIP LOCKED;
    IF v_bucket IS NULL THEN
        UPDATE awa.retention_buckets b SET expires_at = p_deadline
         WHERE b.bucket = (SELECT f.bucket FROM awa.retention_buckets f WHERE f.expires_at IS NULL
                            ORDER BY f.bucket LIMIT 1 FOR UPDATE SKIP LOCKED)
        RETURNING b.bucket INTO v_bucket;
    END IF;
    IF v_bucket IS NULL THEN
        SELECT b.bucket INTO v_bucket FROM awa.retention_buckets b
         WHERE b.expires_at > p_deadline ORDER BY b.expires_at, b.bucket LIMIT 1 FOR SHARE SKIP LOCKED;
    END IF;
    IF v_bucket IS NULL THEN
        UPDATE awa.retention_buckets b SET expires_at = p_deadline
         WHERE b.bucket = (SELECT l.bucket FROM awa.retention_buckets l WHERE l.expires_at IS NOT NULL
                            ORDER BY l.expires_at DESC, l.bucket LIMIT 1 FOR UPDATE SKIP LOCKED)
        RETURNING b.bucket INTO v_bucket;
    END IF;
    IF v_bucket IS NULL THEN
        -- Every bucket row is locked (by expiry): the prune steps back and tries again.
        RAISE EXCEPTION USING ERRCODE = 'AWA01', MESSAGE = 'skipped_locked';
    END IF;
    RETURN -2 - v_bucket;
END
$$;
REVOKE ALL ON FUNCTION awa._retention_bucket(timestamptz) FROM PUBLIC;
COMMENT ON FUNCTION awa._retention_bucket(timestamptz) IS 'Internal: the retention bucket (ready_slot) for rows that may go at a deadline; -1 (kept) for NULL.';

-- When a row finished at p_finished and kept for p_retention may go: its expiry rounded up
-- to a multiple of the bucket width, a power of two seconds from an eighth to a quarter of
-- the retention (at least 64 s), so a queue's rows share a few buckets and so do queues of
-- similar retentions. NULL when the row has expired by p_now (nothing to keep).
CREATE FUNCTION awa._retention_deadline(p_finished timestamptz, p_retention interval, p_now timestamptz)
    RETURNS timestamptz
    LANGUAGE sql STABLE PARALLEL SAFE
    SET search_path = pg_catalog, pg_temp
    RETURN CASE WHEN p_finished + p_retention > p_now THEN
        to_timestamp((ceil(extract(epoch FROM p_finished + p_retention)
                           / (2 ^ greatest(6, ceil(log(2.0, greatest(extract(epoch FROM p_retention) / 8, 1))))))
                      * (2 ^ greatest(6, ceil(log(2.0, greatest(extract(epoch FROM p_retention) / 8, 1))))))::double precision)
    END;
REVOKE ALL ON FUNCTION awa._retention_deadline(timestamptz, interval, timestamptz) FROM PUBLIC;
COMMENT ON FUNCTION awa._retention_deadline(timestamptz, interval, timestamptz) IS 'Internal: the bucket deadline of a row finished at a time and kept for a retention; NULL when expired.';

-- The finished jobs of a queue slot that outlive it, hydrated with their body (and a
-- completion's result), with the deadline of their bucket (NULL: kept, the default for
-- failed jobs): failed rows (a queue without failed retention keeps them), cancelled rows
-- of a queue with a failed retention, completions (terminal rows and completion batches) of
-- a queue with a completed retention, each only while its retention has not run out at
-- p_now. ready_slot is left to the caller. With p_uncopied, only those without a copy in a
-- retained partition yet (same lane identity and state), tested before they are hydrated:
-- a prune's second read, under the slot's lock, after it copied early.
CREATE FUNCTION awa._retainable(p_slot integer, p_now timestamptz, p_uncopied boolean DEFAULT false)
    RETURNS TABLE (job awa.done_entries, deadline timestamptz)
    LANGUAGE sql STABLE
    SET search_path = pg_catalog, pg_temp SET jit = off
AS $$
    SELECT x, k.deadline
      FROM awa.done_entries d
      LEFT JOIN awa.ready_entries r
        ON r.ready_slot = d.ready_slot AND r.queue = d.queue AND r.priority = d.priority
       AND r.enqueue_shard = d.enqueue_shard AND r.lane_seq = d.lane_seq
      LEFT JOIN awa.queue_meta m ON m.queue = d.queue
     CROSS JOIN LATERAL (SELECT CASE WHEN d.state = 'completed' THEN m.completed_retention
                                     ELSE m.failed_retention END AS retention) t
     CROSS JOIN LATERAL (SELECT awa._retention_deadline(d.finalized_at, t.retention, p_now) AS deadline) k
     CROSS JOIN LATERAL awa._job_row(d, awa._done_job(d, r), NULL) x
     WHERE d.ready_slot = p_slot
       AND ((d.state = 'failed' AND t.retention IS NULL) OR k.deadline IS NOT NULL)
       AND NOT (p_uncopied
                AND EXISTS (SELECT 1 FROM awa.done_entries c
                             WHERE c.ready_slot < 0 AND c.queue = d.queue AND c.priority = d.priority
                               AND c.enqueue_shard = d.enqueue_shard AND c.lane_seq = d.lane_seq
                               AND c.state = d.state))
    UNION ALL
    SELECT x, k.deadline
      FROM awa.completion_batches b
      JOIN awa.queue_meta m ON m.queue = b.queue AND m.completed_retention IS NOT NULL
     CROSS JOIN LATERAL (SELECT awa._retention_deadline(b.finalized_at, m.completed_retention, p_now) AS deadline) k
     CROSS JOIN LATERAL unnest(b.lane_offsets) WITH ORDINALITY AS u(lane_offset, n)
     -- One probe of the ready rows' key per attempt. OFFSET 0 keeps the planner from
     -- flattening the probe into a join on the lane alone, which pairs every ready row of the
     -- slot with every batch of its lane (seen: 20 s for a slot of 21,000 rows and 2,300
     -- batches, on partitions not analyzed yet, with no queue keeping completions).
     CROSS JOIN LATERAL (SELECT e.* FROM awa.ready_entries e
                          WHERE e.queue = b.queue AND e.priority = b.priority AND e.enqueue_shard = b.enqueue_shard
                            AND e.lane_seq = b.lane_block * 64 + u.lane_offset AND e.ready_slot = b.ready_slot
                            AND e.ready_generation = b.ready_generation
                         OFFSET 0) r
     CROSS JOIN LATERAL awa._job_row(NULL::awa.done_entries, awa._job(r),
                                     jsonb_build_object('ready_slot', b.ready_slot, 'ready_generation', b.ready_generation,
                                                        'enqueue_shard', b.enqueue_shard, 'lane_seq', r.lane_seq,
                                                        'state', 'completed', 'attempt', r.attempt + 1,
                                                        'run_lease', r.run_lease + 1, 'attempted_at', b.attempted_at[u.n],
                                                        'finalized_at', b.finalized_at, 'result', b.results[u.n])) x
     WHERE b.ready_slot = p_slot AND k.deadline IS NOT NULL
       AND NOT (p_uncopied
                AND EXISTS (SELECT 1 FROM awa.done_entries c
                             WHERE c.ready_slot < 0 AND c.queue = b.queue AND c.priority = b.priority
                               AND c.enqueue_shard = b.enqueue_shard AND c.lane_seq = b.lane_block * 64 + u.lane_offset
                               AND c.state = 'completed'))
$$;
REVOKE ALL ON FUNCTION awa._retainable(integer, timestamptz, boolean) FROM PUBLIC;
COMMENT ON FUNCTION awa._retainable(integer, timestamptz, boolean) IS 'Internal: the finished jobs of a queue slot its queue keeps past the slot, hydrated, with their bucket deadline.';

-- Copy the finished jobs of a queue slot that outlive it (awa._retainable), with their body
-- and result, to the retained partition (failed jobs kept by default) or to the retention
-- bucket of their deadline, once; returns the rows copied by this call. Once also when a prune
-- calls it twice (early, then under the slot's lock) and the queue's retention changed
-- between the calls: a job with a copy already (same lane identity and state, any retained
-- partition) is not copied again into the bucket of its new deadline. The second call passes
-- p_uncopied, so that it reads and hydrates only what finished since the first (a slot of
-- 140,000 kept completions took 10 s to hydrate again, under the lock).
CREATE FUNCTION awa._retain_finished(p_slot integer, p_uncopied boolean DEFAULT false) RETURNS awa.done_entries[]
    LANGUAGE plpgsql VOLATILE
    SET search_path = pg_catalog, pg_temp SET jit = off
AS $$
DECLARE
    v_now timestamptz := pg_catalog.clock_timestamp();
    v_jobs awa.done_entries[];
    v_job_deadlines timestamptz[];
    v_deadlines timestamptz[];
    v_slots integer[];
    v_copied awa.done_entries[];
BEGIN
    -- One read of the slot's retainable jobs: a retention changed meanwhile must not give
    -- the copies deadlines that have no bucket (they would go to the kept partition).
    SELECT array_agg(r.job), array_agg(r.deadline) INTO v_jobs, v_job_deadlines
      FROM awa._retainable(p_slot, v_now, p_uncopied) r;
    SELECT array_agg(x.deadline ORDER BY x.deadline), array_agg(awa._retention_bucket(x.deadline) ORDER BY x.deadline)
      INTO v_deadlines, v_slots
      FROM (SELECT DISTINCT d.deadline FROM unnest(v_job_deadlines) AS d(deadline) WHERE d.deadline IS NOT NULL) x;
    WITH copied AS (
        INSERT INTO awa.done_entries
        SELECT y.*
          FROM (SELECT v_jobs[i] AS job, v_job_deadlines[i] AS deadline
                  FROM pg_catalog.generate_subscripts(v_jobs, 1) AS g(i)) x
          LEFT JOIN unnest(v_deadlines, v_slots) AS m(deadline, slot) ON m.deadline = x.deadline
         CROSS JOIN LATERAL jsonb_populate_record(x.job, jsonb_build_object('ready_slot', coalesce(m.slot, -1))) y
         WHERE NOT EXISTS (SELECT 1 FROM awa.done_entries k
                            WHERE k.ready_slot < 0 AND k.queue = y.queue AND k.priority = y.priority
                              AND k.enqueue_shard = y.enqueue_shard AND k.lane_seq = y.lane_seq AND k.state = y.state)
        ON CONFLICT DO NOTHING
        RETURNING *)
    SELECT array_agg(c) INTO v_copied FROM copied c;
    RETURN v_copied;
END
$$;
REVOKE ALL ON FUNCTION awa._retain_finished(integer, boolean) FROM PUBLIC;
COMMENT ON FUNCTION awa._retain_finished(integer, boolean) IS 'Internal: copy a queue slot''s finished jobs that outlive it, with body and result, to the retained partition or their retention bucket, once.';

-- Free a queue slot (a prune): with the writers of the slot kept out (SHARE ROW EXCLUSIVE on
-- its partitions, which readers pass), drop the unique claims of the jobs whose last rows go
-- with it -- every finished job still in the slot (retained ones were moved out, and keep
-- theirs until they expire).
-- Without this a key held in `completed` (the default mask) could never be enqueued again. A
-- claim row another transaction has locked (a delete of the job) is skipped: a prune must not
-- wait with the slot's partitions locked. Only then take ACCESS EXCLUSIVE, the one lock that
-- holds claims and completions of every queue out (their plans lock every ready partition),
-- truncate the partitions and mark the slot free: readers wait for the truncate and the commit
-- alone. Both locks are taken in short tries within p_budget_ms; false when one did not come
-- (the caller steps back, and its rollback undoes the deletes). p_after_move: the slot's rows
-- were moved forward by an earlier prune, and a producer that read the ring before the slot
-- was sealed may have fenced it since and written there (its re-check of the slot's
-- generation passes: a moved slot stays live until freed); so once writers are kept out,
-- look again: pending rows, open attempts or finished jobs to retain in the slot raise AWA01
-- 'written_since_move', and the caller prunes the slot as a first step again (moving them).
CREATE FUNCTION awa._free_queue_slot(p_slot integer, p_budget_ms integer, p_after_move boolean DEFAULT false)
    RETURNS boolean
    LANGUAGE plpgsql VOLATILE
    SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_tables text[] := ARRAY['ready_entries_' || p_slot, 'done_entries_' || p_slot, 'completion_batches_' || p_slot];
BEGIN
    IF NOT awa._lock_ring_partitions(v_tables, p_budget_ms, true) THEN
        RETURN false;
    END IF;
    -- A probe per lane (OFFSET 0 keeps each EXISTS a probe from the lane's cursor) and batch
    -- by batch for open receipts (awa._open_claim_batches): joined on the lane, the planner
    -- paired every ready row of the slot with every claim batch of its lane, and this check
    -- held the slot's locks and its snapshot for 234 s on a slot of 600,000 rows.
    IF p_after_move
       AND (EXISTS (WITH RECURSIVE lanes AS (
                        (SELECT r.queue, r.priority, r.enqueue_shard FROM awa.ready_entries r
                          WHERE r.ready_slot = p_slot
                          ORDER BY r.queue, r.priority, r.enqueue_shard LIMIT 1)
                        UNION ALL
                        SELECT n.queue, n.priority, n.enqueue_shard
                          FROM lanes l
                         CROSS JOIN LATERAL (
                             SELECT r.queue, r.priority, r.enqueue_shard FROM awa.ready_entries r
                              WHERE r.ready_slot = p_slot
                                AND (r.queue, r.priority, r.enqueue_shard) > (l.queue, l.priority, l.enqueue_shard)
                              ORDER BY r.queue, r.priority, r.enqueue_shard LIMIT 1) n)
                    SELECT 1 FROM lanes l
                      LEFT JOIN awa.lane_cursors h
                        ON h.queue = l.queue AND h.priority = l.priority AND h.enqueue_shard = l.enqueue_shard
                     WHERE EXISTS (SELECT 1 FROM awa.ready_entries r
                                    WHERE r.ready_slot = p_slot AND r.queue = l.queue AND r.priority = l.priority
                                      AND r.enqueue_shard = l.enqueue_shard AND r.lane_seq >= coalesce(h.claim_seq, 0)
                                    OFFSET 0))
            OR EXISTS (SELECT 1 FROM awa._open_claim_batches b WHERE b.ready_slot = p_slot)
            OR EXISTS (SELECT 1 FROM awa.leases l WHERE l.ready_slot = p_slot)
            OR EXISTS (SELECT 1 FROM awa._retainable(p_slot, pg_catalog.clock_timestamp()))) THEN
        RAISE EXCEPTION USING ERRCODE = 'AWA01', MESSAGE = 'written_since_move';
    END IF;
    IF EXISTS (SELECT 1 FROM awa.job_unique_claims) THEN
        DELETE FROM awa.job_unique_claims u
         WHERE u.ctid = ANY (ARRAY(
             SELECT c.ctid FROM awa.job_unique_claims c
              WHERE (c.queue, c.job_id) IN (SELECT d.queue, d.job_id FROM awa.done_entries d
                                             WHERE d.ready_slot = p_slot
                                            UNION ALL
                                            SELECT b.queue, b.job_id FROM awa._batch_completions b WHERE b.ready_slot = p_slot)
                FOR UPDATE SKIP LOCKED));
    END IF;
    IF NOT awa._lock_ring_partitions(v_tables, p_budget_ms, false) THEN
        RETURN false;
    END IF;
    EXECUTE format('TRUNCATE awa.%I, awa.%I, awa.%I', 'ready_entries_' || p_slot, 'done_entries_' || p_slot,
                   'completion_batches_' || p_slot);
    UPDATE awa.queue_ring_slots SET generation = -1, moved_xid = NULL, moved_horizons = NULL WHERE slot = p_slot;
    PERFORM awa._ring_slot_freed('queue', p_slot);
    RETURN true;
END
$$;
REVOKE ALL ON FUNCTION awa._free_queue_slot(integer, integer, boolean) FROM PUBLIC;
COMMENT ON FUNCTION awa._free_queue_slot(integer, integer, boolean) IS 'Internal: drop the unique claims of a queue slot''s finished jobs, truncate the slot and mark it free; false when its locks did not come in time (after a move: AWA01 when rows were written there since).';

-- Whether every snapshot of this database sees transaction p_xid as ended (src/ring.cpp:
-- the procarray's horizon, read without waiting): then no reader can still need the rows
-- p_xid moved out of a slot, and the slot may be truncated.
CREATE FUNCTION awa._seen_ended_by_all(p_xid xid8) RETURNS boolean
    AS 'MODULE_PATHNAME', 'awa_seen_ended_by_all'
    LANGUAGE C VOLATILE STRICT PARALLEL UNSAFE
    SET search_path = pg_catalog, pg_temp;
REVOKE ALL ON FUNCTION awa._seen_ended_by_all(xid8) FROM PUBLIC;
COMMENT ON FUNCTION awa._seen_ended_by_all(xid8) IS 'Internal: whether every snapshot of this database sees a transaction as ended.';

-- Whether freeing a sealed queue slot is worth what it copies (D23): its ready rows that no
-- claim reads again (below their lane's cursor) must be at least three times its pending rows
-- (at or after the cursor, or in a lane without a claim head), which a prune copies forward;
-- so a prune copies at most a quarter of the rows it frees, and a pending row is copied a
-- third of a time over its life on average. The lanes of the slot are found by skipping along
-- the lane index; the finished rows are counted, the pending ones only up to a third of them,
-- so a slot that is all backlog costs one probe per lane.
CREATE FUNCTION awa._queue_slot_worth_pruning(p_slot integer) RETURNS boolean
    LANGUAGE plpgsql VOLATILE
    SET search_path = pg_catalog, pg_temp SET jit = off SET plan_cache_mode = force_generic_plan
AS $$
DECLARE
    v_finished bigint;
    v_pending bigint;
BEGIN
    WITH RECURSIVE lanes AS (
        (SELECT r.queue, r.priority, r.enqueue_shard FROM awa.ready_entries r
          WHERE r.ready_slot = p_slot
          ORDER BY r.queue, r.priority, r.enqueue_shard LIMIT 1)
        UNION ALL
        SELECT n.queue, n.priority, n.enqueue_shard
          FROM lanes l
         CROSS JOIN LATERAL (
             SELECT r.queue, r.priority, r.enqueue_shard FROM awa.ready_entries r
              WHERE r.ready_slot = p_slot
                AND (r.queue, r.priority, r.enqueue_shard) > (l.queue, l.priority, l.enqueue_shard)
              ORDER BY r.queue, r.priority, r.enqueue_shard LIMIT 1) n)
    SELECT coalesce(sum(f.n), 0) INTO v_finished
      FROM lanes l
      LEFT JOIN awa.lane_cursors h
        ON h.queue = l.queue AND h.priority = l.priority AND h.enqueue_shard = l.enqueue_shard
     CROSS JOIN LATERAL (
         SELECT count(*) AS n FROM awa.ready_entries r
          WHERE r.ready_slot = p_slot AND r.queue = l.queue AND r.priority = l.priority
            AND r.enqueue_shard = l.enqueue_shard AND r.lane_seq < coalesce(h.claim_seq, 0)) f;
    WITH RECURSIVE lanes AS (
        (SELECT r.queue, r.priority, r.enqueue_shard FROM awa.ready_entries r
          WHERE r.ready_slot = p_slot
          ORDER BY r.queue, r.priority, r.enqueue_shard LIMIT 1)
        UNION ALL
        SELECT n.queue, n.priority, n.enqueue_shard
          FROM lanes l
         CROSS JOIN LATERAL (
             SELECT r.queue, r.priority, r.enqueue_shard FROM awa.ready_entries r
              WHERE r.ready_slot = p_slot
                AND (r.queue, r.priority, r.enqueue_shard) > (l.queue, l.priority, l.enqueue_shard)
              ORDER BY r.queue, r.priority, r.enqueue_shard LIMIT 1) n)
    SELECT count(*) INTO v_pending FROM (
        SELECT 1
          FROM lanes l
          LEFT JOIN awa.lane_cursors h
            ON h.queue = l.queue AND h.priority = l.priority AND h.enqueue_shard = l.enqueue_shard
         CROSS JOIN LATERAL (
             SELECT 1 FROM awa.ready_entries r
              WHERE r.ready_slot = p_slot AND r.queue = l.queue AND r.priority = l.priority
                AND r.enqueue_shard = l.enqueue_shard AND r.lane_seq >= coalesce(h.claim_seq, 0)
              LIMIT v_finished / 3 + 1) p
         LIMIT v_finished / 3 + 1) x;
    RETURN 3 * v_pending <= v_finished;
END
$$;
REVOKE ALL ON FUNCTION awa._queue_slot_worth_pruning(integer) FROM PUBLIC;
COMMENT ON FUNCTION awa._queue_slot_worth_pruning(integer) IS 'Internal: whether a sealed queue slot frees at least three rows for every pending row it would copy.';

-- Prune the oldest sealed queue slot (docs/maintenance.md §2). In two steps when it holds
-- rows a reader may still need: the first moves them out in one transaction (MVCC-safe:
-- delete and insert), the second, in a later call, truncates the slot once every snapshot
-- of the database sees the move as committed (TRUNCATE is not MVCC-safe). The first step:
--   1. lock the ring's cursor row (NOWAIT: a concurrent rotation or prune wins);
--   2. with p_amortised (what maintenance passes), refuse ('skipped_not_worth') unless the
--      slot frees at least three rows for every pending row it copies
--      (awa._queue_slot_worth_pruning), or every slot of the ring is live and the current
--      slot has grown as large as this one (a backlog that pins the ring is then copied
--      once for at least as many rows written since); then remember every lane's claim
--      cursor and refuse when an open attempt (a claim batch with an open receipt, or a
--      lease) still reads a ready row of the slot. These checks hold no lock, and the
--      cheaper comes first: a slot a backlog pins is refused without reading its receipts;
--   3. copy the finished jobs that outlive the slot (awa._retain_finished: failed ones, and
--      those of a queue with a retention that has not run out), with their body and
--      result, to the retained partition or their retention bucket, once. Still
--      without a lock: no attempt of the slot is open, so no finished row can be added to it
--      (a claim since step 2 makes step 4 refuse, which undoes the copies). Not when a
--      transaction older than the lock budget holds the slot's partitions: then the copy
--      waits for step 4's lock, so a prune that steps back has copied nothing;
--   4. lock the slot's partitions (awa._lock_ring_partitions: never queued for long), so no
--      writer can add to the slot, and refuse when a claim since step 2 took rows of the
--      slot (their attempts may be open); drop the copies of jobs that were dead-lettered,
--      retried or deleted between step 3 and the lock, and delete the originals of the
--      retained ones (a retained completion's batch and ready rows with it);
--   5. lock the claim heads of the lanes that still have pending rows in the slot (NOWAIT)
--      and move those rows (and any row whose lane has no claim head, which nothing proves
--      finished) into the current slot with their lane identity and lane_seq (delete and
--      insert): claims drain them in the same order, and a claim holding one of those heads
--      makes this prune step back instead. The lanes of the slot are found by skipping along
--      the lane index and each lane's cursor is read once (the heads to lock, a probe each),
--      so the work done under the lock is the lanes, the pending rows and at most one read
--      of the slot's rows, never a product of rows and lanes or batches;
--   6. nothing moved: truncate the slot's partitions and mark it free ('pruned'). Rows
--      moved: remember the moving transaction in the slot ('moved'); the slot stays live
--      (readers and the arc still include it) until the second step.
-- The second step (the oldest sealed slot has moved rows): refuse ('skipped_snapshots')
-- while a snapshot of the database may not see the move; otherwise lock the partitions as
-- in step 4, truncate and mark the slot free ('pruned').
-- Any refusal after step 1 rolls back a subtransaction, which releases every lock taken.
-- Returns pruned / moved / skipped_none_sealed / skipped_running / skipped_not_worth /
-- skipped_snapshots / skipped_locked / skipped_concurrent.
-- Its statements and awa._queue_slot_worth_pruning's run generic plans, which prune the
-- ring's partitions as each plan starts: custom plans were planned again on every call, and
-- a maintenance pass that found the oldest slot not worth pruning spent 3.7 ms of CPU on it
-- (0.6 ms generic; 100,000 jobs waiting in the slot, docs/benchmarks.md).
CREATE FUNCTION awa.prune_queue_ring(p_lock_timeout_ms bigint DEFAULT 1000, p_amortised boolean DEFAULT false)
    RETURNS text
    LANGUAGE plpgsql VOLATILE
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp SET jit = off
    SET plan_cache_mode = force_generic_plan
AS $$
DECLARE
    st awa.queue_ring_state;
    v_slot integer;
    v_moved_by xid8;
    v_cursors awa.lane_cursors[];
    v_copied awa.done_entries[];
    v_copy_early boolean;
    v_reason text;
    v_moved bigint;
    v_retained bigint := 0;
    v_result text := 'pruned';
BEGIN
    PERFORM awa._require(p_lock_timeout_ms IS NULL OR p_amortised IS NULL, 'p_lock_timeout_ms and p_amortised');
    PERFORM awa._require_at_least(p_lock_timeout_ms, 1, 'p_lock_timeout_ms');
    p_lock_timeout_ms := least(p_lock_timeout_ms, 2147483647);  -- lock_timeout's largest value
    PERFORM awa._require_read_committed('prune_queue_ring');
    -- On a Citus cluster the shared rings are the coordinator's (docs/scale-out.md).
    IF awa._citus_group() <> 0 THEN
        RETURN 'skipped_not_coordinator';
    END IF;
    BEGIN
        SELECT * INTO st FROM awa.queue_ring_state FOR UPDATE NOWAIT;
    EXCEPTION WHEN lock_not_available THEN
        RETURN 'skipped_concurrent';
    END;
    SELECT s.slot, s.moved_xid INTO v_slot, v_moved_by FROM awa.queue_ring_slots s
     WHERE s.generation >= 0 AND s.slot <> st.current_slot
     ORDER BY s.generation LIMIT 1;
    IF v_slot IS NULL THEN
        RETURN 'skipped_none_sealed';
    END IF;
    -- On a Citus cluster (here, the coordinator): the same steps, each queue's rows moved on its
    -- worker (awa._citus_prune_queue_slot; docs/scale-out.md).
    IF awa._citus_group() IS NOT NULL THEN
        RETURN awa._citus_prune_queue_slot(v_slot, p_lock_timeout_ms::integer, st.current_slot, st.generation,
                                           coalesce(p_amortised, false));
    END IF;
    IF v_moved_by IS NOT NULL THEN
        -- Second step: the slot's rows that a reader may need were moved by v_moved_by; a
        -- snapshot that does not see that move still reads them here.
        IF NOT awa._seen_ended_by_all(v_moved_by) THEN
            RETURN 'skipped_snapshots';
        END IF;
        BEGIN
            IF NOT awa._free_queue_slot(v_slot, p_lock_timeout_ms::integer, true) THEN
                RAISE EXCEPTION USING ERRCODE = 'AWA01', MESSAGE = 'skipped_locked';
            END IF;
        EXCEPTION WHEN SQLSTATE 'AWA01' THEN
            GET STACKED DIAGNOSTICS v_reason = MESSAGE_TEXT;
            IF v_reason <> 'written_since_move' THEN
                RETURN v_reason;
            END IF;
            -- A stale producer wrote into the slot after the move: prune it as a first step
            -- again (below), which moves those rows forward too.
            v_moved_by := NULL;
        END;
        IF v_moved_by IS NOT NULL THEN
            RETURN 'pruned';
        END IF;
    END IF;
    IF p_amortised
       AND NOT ((SELECT s.generation FROM awa.queue_ring_slots s
                  WHERE s.slot = (st.current_slot + 1) % st.slot_count) >= 0
                AND pg_catalog.pg_relation_size(format('awa.%I', 'ready_entries_' || st.current_slot)::regclass)
                    >= pg_catalog.pg_relation_size(format('awa.%I', 'ready_entries_' || v_slot)::regclass))
       AND NOT awa._queue_slot_worth_pruning(v_slot) THEN
        RETURN 'skipped_not_worth';
    END IF;
    SELECT array_agg(h) INTO v_cursors FROM awa.lane_cursors h;
    IF EXISTS (SELECT 1 FROM awa._open_claim_batches b WHERE b.ready_slot = v_slot)
       OR EXISTS (SELECT 1 FROM awa.leases l WHERE l.ready_slot = v_slot) THEN
        RETURN 'skipped_running';
    END IF;
    BEGIN
        -- Copy early unless a transaction that has already run longer than the lock budget
        -- holds the slot's partitions (or one whose start is not visible, or a prepared
        -- one): the lock would likely not come in time, and a prune that steps back
        -- (skipped_locked) would have copied and rolled back for nothing. Short holders,
        -- such as claims, end long before the budget does.
        v_copy_early := NOT EXISTS (
            SELECT 1 FROM pg_catalog.pg_locks k
              LEFT JOIN pg_catalog.pg_stat_activity a ON a.pid = k.pid
             WHERE k.locktype = 'relation' AND k.database = (SELECT oid FROM pg_catalog.pg_database
                                                            WHERE datname = pg_catalog.current_database())
               AND k.relation IN (format('awa.%I', 'ready_entries_' || v_slot)::regclass,
                                  format('awa.%I', 'done_entries_' || v_slot)::regclass,
                                  format('awa.%I', 'completion_batches_' || v_slot)::regclass)
               AND k.pid IS DISTINCT FROM pg_catalog.pg_backend_pid()
               AND (a.xact_start IS NULL
                    OR a.xact_start < pg_catalog.clock_timestamp()
                                      - pg_catalog.make_interval(secs => p_lock_timeout_ms / 1000.0)));
        IF v_copy_early THEN
            v_copied := awa._retain_finished(v_slot);
        END IF;
        -- SHARE ROW EXCLUSIVE keeps every writer of the slot out (producers that fenced it,
        -- exits writing its terminal rows) and lets readers in: claims and completions of every
        -- queue, whose plans lock every ready partition, go on while pending rows move. Only
        -- the truncate below takes ACCESS EXCLUSIVE.
        IF NOT awa._lock_ring_partitions(ARRAY['ready_entries_' || v_slot, 'done_entries_' || v_slot,
                                               'completion_batches_' || v_slot],
                                         p_lock_timeout_ms::integer, true) THEN
            RAISE EXCEPTION USING ERRCODE = 'AWA01', MESSAGE = 'skipped_locked';
        END IF;
        -- Copied early: what finished since (an exit that wrote a terminal row before the
        -- lock came, such as a cancel) is copied now, once, like the rest.
        IF v_copy_early THEN
            v_copied := v_copied || awa._retain_finished(v_slot, true);
        ELSE
            v_copied := awa._retain_finished(v_slot);
        END IF;
        -- The heads of the lanes that still have pending rows in the slot: a claim can take
        -- rows of the slot only under one of them. A claim holding one makes the prune step
        -- back; once they are held, no claim opens an attempt on a row of the slot.
        -- Per head, its cursor and then one probe of the slot's rows at or past it: OFFSET 0
        -- keeps the EXISTS a probe per head, where a semi-join read the cursor (a probe of the
        -- claim marks) once per ready row of the slot (10 s for a slot of 200,000 rows).
        BEGIN
            PERFORM 1 FROM awa.queue_claim_heads h
             WHERE EXISTS (SELECT 1 FROM awa.ready_entries r
                            WHERE r.queue = h.queue AND r.priority = h.priority
                              AND r.enqueue_shard = h.enqueue_shard AND r.ready_slot = v_slot
                              AND r.lane_seq >= (SELECT c.claim_seq FROM awa.lane_cursors c
                                                  WHERE c.queue = h.queue AND c.priority = h.priority
                                                    AND c.enqueue_shard = h.enqueue_shard)
                           OFFSET 0)
             ORDER BY h.queue, h.priority, h.enqueue_shard
               FOR UPDATE NOWAIT;
        EXCEPTION WHEN lock_not_available THEN
            RAISE EXCEPTION USING ERRCODE = 'AWA01', MESSAGE = 'skipped_locked';
        END;
        PERFORM awa._heads_locked(NULL);
        -- Rows of the slot claimed after the cursors were remembered (read after the heads are
        -- held, so a claim that committed before they were taken is seen): attempts may be open.
        -- A probe per lane whose cursor moved (OFFSET 0: as a semi-join, the planner read every
        -- row of the slot for each such lane).
        IF EXISTS (SELECT 1 FROM awa.lane_cursors h
                     LEFT JOIN unnest(v_cursors) o
                       ON o.queue = h.queue AND o.priority = h.priority AND o.enqueue_shard = h.enqueue_shard
                    WHERE h.claim_seq > coalesce(o.claim_seq, 1)
                      AND EXISTS (SELECT 1 FROM awa.ready_entries r
                                   WHERE r.ready_slot = v_slot AND r.queue = h.queue
                                     AND r.priority = h.priority AND r.enqueue_shard = h.enqueue_shard
                                     AND r.lane_seq >= coalesce(o.claim_seq, 1) AND r.lane_seq < h.claim_seq
                                  OFFSET 0)) THEN
            RAISE EXCEPTION USING ERRCODE = 'AWA01', MESSAGE = 'skipped_running';
        END IF;
        -- Finished jobs dead-lettered, retried or deleted since they were copied: drop their
        -- copies (a completion is still there while its completion batch names it).
        IF v_copied IS NOT NULL AND v_copy_early THEN
            DELETE FROM awa.done_entries k
             USING unnest(v_copied) f
             WHERE k.ready_slot = f.ready_slot AND k.queue = f.queue AND k.priority = f.priority
               AND k.enqueue_shard = f.enqueue_shard AND k.lane_seq = f.lane_seq
               AND NOT EXISTS (SELECT 1 FROM awa.done_entries d
                                WHERE d.ready_slot = v_slot AND d.queue = f.queue AND d.priority = f.priority
                                  AND d.enqueue_shard = f.enqueue_shard AND d.lane_seq = f.lane_seq
                                  AND d.state = f.state)
               AND NOT (f.state = 'completed'
                        AND EXISTS (SELECT 1 FROM awa.completion_batches b
                                     WHERE b.ready_slot = v_slot AND b.queue = f.queue AND b.priority = f.priority
                                       AND b.enqueue_shard = f.enqueue_shard AND b.lane_block = f.lane_seq / 64
                                       AND (f.lane_seq % 64)::smallint = ANY (b.lane_offsets)));
        END IF;
        -- The originals of the retained rows: a reader sees one or the other. A retained
        -- completion's batch goes, with the ready rows of every attempt it names (a receipt
        -- whose ready row is gone is not open, as after the truncate), and so does the ready
        -- row of a retained terminal completion (1.0).
        IF v_copied IS NOT NULL THEN
            DELETE FROM awa.done_entries d
             USING unnest(v_copied) f
             WHERE d.ready_slot = v_slot AND d.queue = f.queue AND d.priority = f.priority
               AND d.enqueue_shard = f.enqueue_shard AND d.lane_seq = f.lane_seq AND d.state = f.state;
            GET DIAGNOSTICS v_retained = ROW_COUNT;
            WITH gone AS (
                DELETE FROM awa.completion_batches b
                 WHERE b.ready_slot = v_slot
                   AND EXISTS (SELECT 1 FROM unnest(v_copied) f
                                WHERE f.state = 'completed' AND f.queue = b.queue AND f.priority = b.priority
                                  AND f.enqueue_shard = b.enqueue_shard AND f.lane_seq / 64 = b.lane_block
                                  AND (f.lane_seq % 64)::smallint = ANY (b.lane_offsets))
                RETURNING b.ready_generation, b.queue, b.priority, b.enqueue_shard, b.lane_block, b.lane_offsets),
            ready AS (
                DELETE FROM awa.ready_entries r
                 USING gone g CROSS JOIN LATERAL unnest(g.lane_offsets) AS o(lane_offset)
                 WHERE r.ready_slot = v_slot AND r.ready_generation = g.ready_generation AND r.queue = g.queue
                   AND r.priority = g.priority AND r.enqueue_shard = g.enqueue_shard
                   AND r.lane_seq = g.lane_block * 64 + o.lane_offset)
            SELECT v_retained + count(*) INTO v_retained FROM gone;
            DELETE FROM awa.ready_entries r
             USING unnest(v_copied) f
             WHERE f.state = 'completed' AND r.ready_slot = v_slot AND r.queue = f.queue
               AND r.priority = f.priority AND r.enqueue_shard = f.enqueue_shard AND r.lane_seq = f.lane_seq
               AND r.job_id = f.job_id;
        END IF;
        -- Whole rows move: only the slot changes (no column is named). Each lane's cursor is
        -- read once (MATERIALIZED): inlined, the planner read it again for every row of the
        -- slot, and under a busy lane (many claim marks not yet folded) a move ran for
        -- minutes, holding back vacuum of every table meanwhile.
        WITH RECURSIVE lanes AS (
            (SELECT r.queue, r.priority, r.enqueue_shard FROM awa.ready_entries r
              WHERE r.ready_slot = v_slot
              ORDER BY r.queue, r.priority, r.enqueue_shard LIMIT 1)
            UNION ALL
            SELECT n.queue, n.priority, n.enqueue_shard
              FROM lanes l
             CROSS JOIN LATERAL (
                 SELECT r.queue, r.priority, r.enqueue_shard FROM awa.ready_entries r
                  WHERE r.ready_slot = v_slot
                    AND (r.queue, r.priority, r.enqueue_shard) > (l.queue, l.priority, l.enqueue_shard)
                  ORDER BY r.queue, r.priority, r.enqueue_shard LIMIT 1) n),
        pending AS MATERIALIZED (
            SELECT l.queue, l.priority, l.enqueue_shard, coalesce(h.claim_seq, 0) AS claim_seq
              FROM lanes l
              LEFT JOIN awa.lane_cursors h
                ON h.queue = l.queue AND h.priority = l.priority AND h.enqueue_shard = l.enqueue_shard),
        moved AS (
            DELETE FROM awa.ready_entries r
             USING pending p
             WHERE r.ready_slot = v_slot AND r.queue = p.queue AND r.priority = p.priority
               AND r.enqueue_shard = p.enqueue_shard AND r.lane_seq >= p.claim_seq
            RETURNING r)
        INSERT INTO awa.ready_entries
        SELECT m.*
          FROM moved p
         CROSS JOIN LATERAL jsonb_populate_record(p.r, jsonb_build_object('ready_slot', st.current_slot,
                                                                        'ready_generation', st.generation)) m;
        GET DIAGNOSTICS v_moved = ROW_COUNT;
        IF v_moved + v_retained > 0 THEN
            -- A snapshot taken before this commits still reads the moved rows here.
            UPDATE awa.queue_ring_slots SET moved_xid = pg_catalog.pg_current_xact_id() WHERE slot = v_slot;
            v_result := 'moved';
        ELSE
            -- Nothing pending and nothing retained: the truncate, the one step that holds
            -- readers out (ACCESS EXCLUSIVE), from its lock to the commit.
            IF NOT awa._free_queue_slot(v_slot, p_lock_timeout_ms::integer) THEN
                RAISE EXCEPTION USING ERRCODE = 'AWA01', MESSAGE = 'skipped_locked';
            END IF;
        END IF;
    EXCEPTION WHEN SQLSTATE 'AWA01' THEN
        GET STACKED DIAGNOSTICS v_reason = MESSAGE_TEXT;
        RETURN v_reason;
    END;
    RETURN v_result;
END
$$;
REVOKE ALL ON FUNCTION awa.prune_queue_ring(bigint, boolean) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION awa.prune_queue_ring(bigint, boolean) TO awa_admin;
COMMENT ON FUNCTION awa.prune_queue_ring(bigint, boolean) IS 'Reclaim the oldest sealed queue-ring slot (pending rows move forward; the slot is truncated once no snapshot needs them), with p_amortised only when that is worth what it copies. Role: awa_admin.';

-- Free the retention bucket that expired first by p_now (at most one a call): drop the
-- unique claims of its jobs, truncate it whole (no per-row delete, no dead rows left) and
-- mark it free. A bucket prune is filling is skipped (its row is locked); its partition is
-- locked in short tries as prune locks a ring slot's. Returns expired /
-- skipped_none_expired / skipped_locked. p_now is the clock (awa.expire_retention passes
-- now()).
CREATE FUNCTION awa._expire_retention(p_now timestamptz, p_lock_timeout_ms bigint) RETURNS text
    LANGUAGE plpgsql VOLATILE
    SET search_path = pg_catalog, pg_temp SET jit = off
AS $$
DECLARE
    v_bucket integer;
    v_reason text;
BEGIN
    SELECT b.bucket INTO v_bucket FROM awa.retention_buckets b
     WHERE b.expires_at <= p_now ORDER BY b.expires_at, b.bucket LIMIT 1 FOR UPDATE SKIP LOCKED;
    IF v_bucket IS NULL THEN
        RETURN 'skipped_none_expired';
    END IF;
    BEGIN
        IF NOT awa._lock_ring_partitions(ARRAY['done_entries_expiring_' || v_bucket],
                                         least(p_lock_timeout_ms, 2147483647)::integer) THEN
            RAISE EXCEPTION USING ERRCODE = 'AWA01', MESSAGE = 'skipped_locked';
        END IF;
        DELETE FROM awa.job_unique_claims u
         WHERE u.ctid = ANY (ARRAY(
             SELECT c.ctid FROM awa.job_unique_claims c
              WHERE (c.queue, c.job_id) IN (SELECT d.queue, d.job_id FROM awa.done_entries d
                                             WHERE d.ready_slot = -2 - v_bucket)
                FOR UPDATE SKIP LOCKED));
        EXECUTE format('TRUNCATE awa.%I', 'done_entries_expiring_' || v_bucket);
        UPDATE awa.retention_buckets SET expires_at = NULL WHERE bucket = v_bucket;
    EXCEPTION WHEN SQLSTATE 'AWA01' THEN
        GET STACKED DIAGNOSTICS v_reason = MESSAGE_TEXT;
        RETURN v_reason;
    END;
    RETURN 'expired';
END
$$;
REVOKE ALL ON FUNCTION awa._expire_retention(timestamptz, bigint) FROM PUBLIC;
COMMENT ON FUNCTION awa._expire_retention(timestamptz, bigint) IS 'Internal: truncate and free the retention bucket that expired first by a given time.';

-- Free the retention bucket that expired first (docs/maintenance.md, "Retention"); what
-- maintenance runs every pass. Returns expired / skipped_none_expired / skipped_locked.
CREATE FUNCTION awa.expire_retention(p_lock_timeout_ms bigint DEFAULT 1000) RETURNS text
    LANGUAGE plpgsql VOLATILE
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp SET jit = off
AS $$
BEGIN
    PERFORM awa._require(p_lock_timeout_ms IS NULL, 'p_lock_timeout_ms');
    PERFORM awa._require_at_least(p_lock_timeout_ms, 1, 'p_lock_timeout_ms');
    -- Its claims' delete must see every row a prune committed to the bucket before the truncate.
    PERFORM awa._require_read_committed('expire_retention');
    -- On a Citus cluster the shared rings are the coordinator's (docs/scale-out.md).
    IF awa._citus_group() <> 0 THEN
        RETURN 'skipped_not_coordinator';
    END IF;
    RETURN awa._expire_retention(now(), p_lock_timeout_ms);
END
$$;
REVOKE ALL ON FUNCTION awa.expire_retention(bigint) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION awa.expire_retention(bigint) TO awa_admin;
COMMENT ON FUNCTION awa.expire_retention(bigint) IS 'Truncate the retention bucket of finished jobs that expired first, if any. Role: awa_admin.';

-- Rotate the claim ring (receipts) or the lease ring when the current slot holds rows
-- and the next slot is free; same serialisation as the queue ring.
CREATE FUNCTION awa.rotate_attempt_ring(p_ring text) RETURNS text
    LANGUAGE plpgsql VOLATILE
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp SET jit = off
AS $$
DECLARE
    v_slot integer;
    v_count integer;
    v_gen bigint;
    v_next integer;
BEGIN
    PERFORM awa._require(p_ring IS NULL, 'p_ring');
    PERFORM awa._check_arg(p_ring IN ('claim', 'lease'), 'p_ring must be claim or lease');
    PERFORM awa._require_read_committed('rotate_attempt_ring');
    -- On a Citus cluster the shared rings are the coordinator's (docs/scale-out.md).
    IF awa._citus_group() <> 0 THEN
        RETURN 'skipped_not_coordinator';
    END IF;
    BEGIN
        IF p_ring = 'claim' THEN
            SELECT current_slot, slot_count, generation INTO v_slot, v_count, v_gen
              FROM awa.claim_ring_state FOR UPDATE NOWAIT;
        ELSE
            SELECT current_slot, slot_count, generation INTO v_slot, v_count, v_gen
              FROM awa.lease_ring_state FOR UPDATE NOWAIT;
        END IF;
    EXCEPTION WHEN lock_not_available THEN
        RETURN 'skipped_concurrent';
    END;
    v_next := (v_slot + 1) % v_count;
    IF p_ring = 'claim' THEN
        IF NOT EXISTS (SELECT 1 FROM awa.claim_batches WHERE claim_slot = v_slot) THEN
            RETURN 'skipped_idle';
        END IF;
        IF (SELECT generation FROM awa.claim_ring_slots WHERE slot = v_next) >= 0
           OR EXISTS (SELECT 1 FROM awa.claim_batches WHERE claim_slot = v_next)
           OR EXISTS (SELECT 1 FROM awa.lease_claim_closures WHERE claim_slot = v_next) THEN
            RETURN 'skipped_busy';
        END IF;
        UPDATE awa.claim_ring_state SET current_slot = v_next, generation = v_gen + 1;
        UPDATE awa.claim_ring_slots SET generation = v_gen + 1 WHERE slot = v_next;
    ELSE
        IF NOT EXISTS (SELECT 1 FROM awa.leases WHERE lease_slot = v_slot) THEN
            RETURN 'skipped_idle';
        END IF;
        IF (SELECT generation FROM awa.lease_ring_slots WHERE slot = v_next) >= 0
           OR EXISTS (SELECT 1 FROM awa.leases WHERE lease_slot = v_next) THEN
            RETURN 'skipped_busy';
        END IF;
        UPDATE awa.lease_ring_state SET current_slot = v_next, generation = v_gen + 1;
        UPDATE awa.lease_ring_slots SET generation = v_gen + 1 WHERE slot = v_next;
    END IF;
    RETURN 'rotated';
END
$$;
REVOKE ALL ON FUNCTION awa.rotate_attempt_ring(text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION awa.rotate_attempt_ring(text) TO awa_admin;
COMMENT ON FUNCTION awa.rotate_attempt_ring(text) IS 'Seal the claim or lease ring''s current slot and start the next one when possible. Role: awa_admin.';

-- Whether a claim slot holds an open receipt (awa._open_receipts). A completed receipt has
-- no closure, so counting receipts against closures no longer tells.
-- plpgsql, not SQL: Citus cannot plan an SQL function's parameters over distributed tables.
CREATE FUNCTION awa._claim_slot_has_open_receipts(p_slot integer) RETURNS boolean
    LANGUAGE plpgsql VOLATILE
    SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    RETURN EXISTS (SELECT 1 FROM awa._open_claim_batches b WHERE b.claim_slot = p_slot);
END
$$;
REVOKE ALL ON FUNCTION awa._claim_slot_has_open_receipts(integer) FROM PUBLIC;
COMMENT ON FUNCTION awa._claim_slot_has_open_receipts(integer) IS 'Internal: whether a claim-ring slot holds an open receipt.';

-- Prune the oldest sealed claim slot whose receipts are all closed, or the oldest sealed
-- lease slot that is empty. The check runs first without locks (a slot that is still in
-- use costs nothing), then again under the partition locks, which no writer can pass.
-- Returns pruned / skipped_none_sealed / skipped_open_receipts / skipped_open_leases /
-- skipped_locked / skipped_concurrent.
CREATE FUNCTION awa.prune_attempt_ring(p_ring text, p_lock_timeout_ms bigint DEFAULT 1000) RETURNS text
    LANGUAGE plpgsql VOLATILE
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp SET jit = off
AS $$
DECLARE
    v_current integer;
    v_slot integer;
    v_reason text;
    v_receipts bigint;
BEGIN
    PERFORM awa._require(p_ring IS NULL, 'p_ring');
    PERFORM awa._check_arg(p_ring IN ('claim', 'lease'), 'p_ring must be claim or lease');
    PERFORM awa._require(p_lock_timeout_ms IS NULL, 'p_lock_timeout_ms');
    PERFORM awa._require_at_least(p_lock_timeout_ms, 1, 'p_lock_timeout_ms');
    p_lock_timeout_ms := least(p_lock_timeout_ms, 2147483647);  -- lock_timeout's largest value
    PERFORM awa._require_read_committed('prune_attempt_ring');
    -- On a Citus cluster the shared rings are the coordinator's (docs/scale-out.md).
    IF awa._citus_group() <> 0 THEN
        RETURN 'skipped_not_coordinator';
    END IF;
    BEGIN
        IF p_ring = 'claim' THEN
            SELECT current_slot INTO v_current FROM awa.claim_ring_state FOR UPDATE NOWAIT;
            SELECT slot INTO v_slot FROM awa.claim_ring_slots
             WHERE generation >= 0 AND slot <> v_current ORDER BY generation LIMIT 1;
        ELSE
            SELECT current_slot INTO v_current FROM awa.lease_ring_state FOR UPDATE NOWAIT;
            SELECT slot INTO v_slot FROM awa.lease_ring_slots
             WHERE generation >= 0 AND slot <> v_current ORDER BY generation LIMIT 1;
        END IF;
    EXCEPTION WHEN lock_not_available THEN
        RETURN 'skipped_concurrent';
    END;
    IF v_slot IS NULL THEN
        RETURN 'skipped_none_sealed';
    END IF;
    -- On a Citus cluster each worker frees its own shards of the slot, in a transaction of
    -- its own, with the same tests under its own locks (docs/scale-out.md).
    IF awa._citus_group() IS NOT NULL THEN
        RETURN awa._citus_free_ring_slot(p_ring, v_slot, p_lock_timeout_ms::integer);
    END IF;
    IF p_ring = 'claim' THEN
        -- The receipts of a sealed slot only grow (a claim that took the slot before the
        -- rotation may still commit), and an ended receipt never opens again. So under the
        -- partition locks the prune only compares the slot's count of claim batches with the one it counted
        -- before its test, and steps back if it grew: a receipt that committed since is one
        -- just claimed (a claim appends at least one batch), open in all
        -- likelihood, and testing the slot again there (a probe per receipt, 0.4 s at
        -- 100 000 receipts) would hold every worker for that long.
        v_receipts := (SELECT count(*) FROM awa.claim_batches WHERE claim_slot = v_slot);
        IF awa._claim_slot_has_open_receipts(v_slot) THEN
            RETURN 'skipped_open_receipts';
        END IF;
        BEGIN
            -- The count under SHARE ROW EXCLUSIVE (no claim can add a batch; completions and
            -- readers go on), and ACCESS EXCLUSIVE, which every worker statement on the claim
            -- ring waits for, for the truncate alone.
            IF NOT awa._lock_ring_partitions(
                    ARRAY['claim_batches_' || v_slot, 'lease_claim_closures_' || v_slot], p_lock_timeout_ms::integer, true) THEN
                RAISE EXCEPTION USING ERRCODE = 'AWA01', MESSAGE = 'skipped_locked';
            END IF;
            IF (SELECT count(*) FROM awa.claim_batches WHERE claim_slot = v_slot) <> v_receipts THEN
                RAISE EXCEPTION USING ERRCODE = 'AWA01', MESSAGE = 'skipped_open_receipts';
            END IF;
            IF NOT awa._lock_ring_partitions(
                    ARRAY['claim_batches_' || v_slot, 'lease_claim_closures_' || v_slot], p_lock_timeout_ms::integer) THEN
                RAISE EXCEPTION USING ERRCODE = 'AWA01', MESSAGE = 'skipped_locked';
            END IF;
            EXECUTE format('TRUNCATE awa.%I, awa.%I', 'claim_batches_' || v_slot, 'lease_claim_closures_' || v_slot);
            UPDATE awa.claim_ring_slots SET generation = -1 WHERE slot = v_slot;
            PERFORM awa._ring_slot_freed('claim', v_slot);
        EXCEPTION WHEN SQLSTATE 'AWA01' THEN
            GET STACKED DIAGNOSTICS v_reason = MESSAGE_TEXT;
            RETURN v_reason;
        END;
    ELSE
        IF EXISTS (SELECT 1 FROM awa.leases WHERE lease_slot = v_slot) THEN
            RETURN 'skipped_open_leases';
        END IF;
        BEGIN
            IF NOT awa._lock_ring_partitions(ARRAY['leases_' || v_slot], p_lock_timeout_ms::integer) THEN
                RAISE EXCEPTION USING ERRCODE = 'AWA01', MESSAGE = 'skipped_locked';
            END IF;
            IF EXISTS (SELECT 1 FROM awa.leases WHERE lease_slot = v_slot) THEN
                RAISE EXCEPTION USING ERRCODE = 'AWA01', MESSAGE = 'skipped_open_leases';
            END IF;
            EXECUTE format('TRUNCATE awa.%I', 'leases_' || v_slot);
            UPDATE awa.lease_ring_slots SET generation = -1 WHERE slot = v_slot;
            PERFORM awa._ring_slot_freed('lease', v_slot);
        EXCEPTION WHEN SQLSTATE 'AWA01' THEN
            GET STACKED DIAGNOSTICS v_reason = MESSAGE_TEXT;
            RETURN v_reason;
        END;
    END IF;
    RETURN 'pruned';
END
$$;
REVOKE ALL ON FUNCTION awa.prune_attempt_ring(text, bigint) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION awa.prune_attempt_ring(text, bigint) TO awa_admin;
COMMENT ON FUNCTION awa.prune_attempt_ring(text, bigint) IS 'Reclaim the oldest sealed claim or lease slot when nothing in it is open. Role: awa_admin.';
