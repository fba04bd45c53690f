-- Worker functions of the hot path (C++: src/claim.cpp, src/lifecycle.cpp, src/wakeup.cpp).
-- Their statements are planned once per backend (force_generic_plan: planning a claim costs
-- more than running it) and never by sequential scan: a plan made while the receipt and
-- terminal partitions were empty and unanalysed must not scan them whole once they hold
-- millions of rows (every lookup here has an index).

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
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp SET jit = off
    SET plan_cache_mode = force_generic_plan SET enable_seqscan = off;

-- Complete running attempts; returns the (job_id, run_lease) pairs this call completed.
CREATE FUNCTION awa.complete_jobs(p_job_ids bigint[], p_run_leases bigint[])
    RETURNS TABLE (job_id bigint, run_lease bigint)
    AS 'MODULE_PATHNAME', 'awa_complete_jobs'
    LANGUAGE C VOLATILE PARALLEL UNSAFE ROWS 10
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp SET jit = off
    SET plan_cache_mode = force_generic_plan SET enable_seqscan = off;

-- Sleep until a producing transaction of the queue commits or the timeout passes.
CREATE FUNCTION awa.wait_for_jobs(p_queue text, p_timeout_ms integer) RETURNS boolean
    AS 'MODULE_PATHNAME', 'awa_wait_for_jobs'
    LANGUAGE C VOLATILE PARALLEL UNSAFE
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp SET jit = off;
