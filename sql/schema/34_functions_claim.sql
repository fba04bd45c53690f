-- Worker functions of the hot path (C++: src/claim.cpp, src/lifecycle.cpp, src/wakeup.cpp)
-- and the claim cursors (docs/design.md §4, "Claim cursor").

-- Claim up to p_max_batch jobs from one lane of the queue, in lane order. lane_priority
-- is the lane's priority (identity); priority is the aged, effective priority.
CREATE FUNCTION awa.claim_ready_runtime(
    p_queue text,
    p_max_batch bigint,
    p_deadline_secs double precision DEFAULT 0,
    p_aging_secs double precision DEFAULT 0)
    RETURNS TABLE (
        ready_slot integer,
        ready_generation bigint,
        lane_seq bigint,
        enqueue_shard smallint,
        lease_slot integer,
        lease_generation bigint,
        claim_slot integer,
        receipt_id bigint,
        job_id bigint,
        kind text,
        queue text,
        args jsonb,
        lane_priority smallint,
        priority smallint,
        attempt smallint,
        run_lease bigint,
        max_attempts smallint,
        run_at timestamptz,
        heartbeat_at timestamptz,
        deadline_at timestamptz,
        attempted_at timestamptz,
        created_at timestamptz,
        unique_key bytea,
        unique_states bit(8),
        ordering_key bytea,
        payload jsonb)
    AS 'MODULE_PATHNAME', 'awa_claim_ready_runtime_1_1'
    LANGUAGE C VOLATILE PARALLEL UNSAFE ROWS 10
    SECURITY DEFINER
    SET plan_cache_mode = force_generic_plan SET enable_seqscan = off;
REVOKE ALL ON FUNCTION awa.claim_ready_runtime(text, bigint, double precision, double precision) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION awa.claim_ready_runtime(text, bigint, double precision, double precision) TO awa_worker, awa_admin;
COMMENT ON FUNCTION awa.claim_ready_runtime(text, bigint, double precision, double precision)
    IS 'Claim up to p_max_batch jobs of one lane of a queue, in lane order; starts one attempt each. Role: awa_worker, awa_admin.';

-- Complete running attempts, storing one result per pair when p_results is given (a NULL
-- element: no result); returns the (job_id, run_lease) pairs this call completed. p_queue,
-- the routing argument: NULL finds the attempts by id alone; given, only attempts of that
-- queue are completed (an attempt of another queue is left alone and not returned).
CREATE FUNCTION awa.complete_jobs(p_job_ids bigint[], p_run_leases bigint[], p_results jsonb[] DEFAULT NULL,
                                  p_queue text DEFAULT NULL)
    RETURNS TABLE (job_id bigint, run_lease bigint)
    AS 'MODULE_PATHNAME', 'awa_complete_jobs_1_1'
    LANGUAGE C VOLATILE PARALLEL UNSAFE ROWS 10
    SECURITY DEFINER
    SET plan_cache_mode = force_generic_plan SET enable_seqscan = off;
REVOKE ALL ON FUNCTION awa.complete_jobs(bigint[], bigint[], jsonb[], text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION awa.complete_jobs(bigint[], bigint[], jsonb[], text) TO awa_worker, awa_admin;
COMMENT ON FUNCTION awa.complete_jobs(bigint[], bigint[], jsonb[], text) IS 'Complete open attempts (job_id, run_lease), with their results when given; returns the pairs this call completed. Role: awa_worker, awa_admin.';

-- Sleep until a producing transaction of the queue commits or the timeout passes.
CREATE FUNCTION awa.wait_for_jobs(p_queue text, p_timeout_ms bigint) RETURNS boolean
    AS 'MODULE_PATHNAME', 'awa_wait_for_jobs_1_1'
    LANGUAGE C VOLATILE PARALLEL UNSAFE
    SECURITY DEFINER;
REVOKE ALL ON FUNCTION awa.wait_for_jobs(text, bigint) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION awa.wait_for_jobs(text, bigint) TO awa_worker, awa_admin;
COMMENT ON FUNCTION awa.wait_for_jobs(text, bigint) IS 'Sleep until a producing transaction of the queue commits or the timeout passes. Role: awa_worker, awa_admin.';

-- A lane's claim cursor on the latest committed state, whatever the caller's isolation
-- level: what an admin path reads after locking the lane's head (no claim can move the
-- cursor then). NULL for an unknown lane.
CREATE FUNCTION awa._lane_cursor(p_queue text, p_priority smallint, p_shard smallint) RETURNS bigint
    AS 'MODULE_PATHNAME', 'awa_lane_cursor'
    LANGUAGE C VOLATILE STRICT PARALLEL UNSAFE
    SET search_path = pg_catalog, pg_temp;
REVOKE ALL ON FUNCTION awa._lane_cursor(text, smallint, smallint) FROM PUBLIC;
COMMENT ON FUNCTION awa._lane_cursor(text, smallint, smallint) IS
    'Internal: a lane''s claim cursor on the latest committed state (after locking its head).';

-- An admin or maintenance path locked lane heads outside a claim (NULL: of any queue): the
-- transaction's end wakes the claims waiting for a held head (awa_shard.claim_wait), as a
-- claim's end does. Nothing without the preload.
CREATE FUNCTION awa._heads_locked(p_queue text) RETURNS void
    AS 'MODULE_PATHNAME', 'awa_heads_locked'
    LANGUAGE C VOLATILE PARALLEL UNSAFE
    SET search_path = pg_catalog, pg_temp;
REVOKE ALL ON FUNCTION awa._heads_locked(text) FROM PUBLIC;
COMMENT ON FUNCTION awa._heads_locked(text) IS
    'Internal: this transaction locked lane heads of the queue (NULL: any) outside a claim; its end wakes waiting claims.';

-- A lane's marks die with its head: a lane dropped and created again starts from its new
-- head, never from an old mark. (A trigger, not a foreign key: a key would be checked on the
-- caller's snapshot, where a REPEATABLE READ claim may not see a head created since.)
CREATE FUNCTION awa._drop_lane_marks() RETURNS trigger
    LANGUAGE plpgsql VOLATILE
    SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    l record;
BEGIN
    -- A statement per lane, naming its queue: on a Citus cluster a statement over a
    -- distributed table cannot join the trigger's transition table.
    FOR l IN SELECT DISTINCT h.queue, h.priority, h.enqueue_shard FROM dropped_heads h LOOP
        DELETE FROM awa.claim_marks k
         WHERE k.queue = l.queue AND k.priority = l.priority AND k.enqueue_shard = l.enqueue_shard;
    END LOOP;
    RETURN NULL;
END
$$;
REVOKE ALL ON FUNCTION awa._drop_lane_marks() FROM PUBLIC;
COMMENT ON FUNCTION awa._drop_lane_marks() IS 'Internal: delete the claim marks of deleted lane heads (trigger).';

CREATE TRIGGER drop_lane_marks AFTER DELETE ON awa.queue_claim_heads
    REFERENCING OLD TABLE AS dropped_heads FOR EACH STATEMENT EXECUTE FUNCTION awa._drop_lane_marks();
