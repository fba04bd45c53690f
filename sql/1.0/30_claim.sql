-- Worker functions of the hot path (C++: src/claim.cpp, src/lifecycle.cpp, src/wakeup.cpp).

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
    AS 'MODULE_PATHNAME', 'awa_claim_ready_runtime'
    LANGUAGE C VOLATILE PARALLEL UNSAFE ROWS 10
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp SET jit = off;

-- Complete running attempts; returns the (job_id, run_lease) pairs this call completed.
CREATE FUNCTION awa.complete_jobs(p_job_ids bigint[], p_run_leases bigint[])
    RETURNS TABLE (job_id bigint, run_lease bigint)
    AS 'MODULE_PATHNAME', 'awa_complete_jobs'
    LANGUAGE C VOLATILE PARALLEL UNSAFE ROWS 10
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp SET jit = off;

-- Sleep until a producing transaction of the queue commits or the timeout passes.
CREATE FUNCTION awa.wait_for_jobs(p_queue text, p_timeout_ms integer) RETURNS boolean
    AS 'MODULE_PATHNAME', 'awa_wait_for_jobs'
    LANGUAGE C VOLATILE PARALLEL UNSAFE
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp SET jit = off;
