-- Producer functions (C++: src/enqueue_api.cpp).

-- Enqueue one job (the reference's 12-argument signature). 'available' jobs go to the
-- ready plane on their routed lane ('available' with a future run_at becomes
-- 'scheduled'); 'scheduled' and 'retryable' go to deferred_jobs, keeping the key.
CREATE FUNCTION awa.insert_job_compat(
    p_kind text,
    p_queue text DEFAULT 'default',
    p_args jsonb DEFAULT '{}',
    p_state awa.job_state DEFAULT 'available',
    p_priority smallint DEFAULT 2,
    p_max_attempts smallint DEFAULT 25,
    p_run_at timestamptz DEFAULT NULL,
    p_metadata jsonb DEFAULT '{}',
    p_tags text[] DEFAULT '{}',
    p_unique_key bytea DEFAULT NULL,
    p_unique_states bit(8) DEFAULT NULL,
    p_ordering_key bytea DEFAULT NULL)
    RETURNS awa.job_row
    AS 'MODULE_PATHNAME', 'awa_insert_job_compat'
    LANGUAGE C VOLATILE PARALLEL UNSAFE
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp SET jit = off;

-- Enqueue a batch into one queue; arrays are NULL or as long as p_kinds. One rotor pick
-- per (queue, priority) for keyless rows, one reservation per lane in sorted lane order,
-- one multi-row insert. Returns the job ids in input order.
CREATE FUNCTION awa.insert_jobs(
    p_queue text,
    p_kinds text[],
    p_args jsonb[] DEFAULT NULL,
    p_priorities smallint[] DEFAULT NULL,
    p_run_ats timestamptz[] DEFAULT NULL,
    p_ordering_keys bytea[] DEFAULT NULL,
    p_max_attempts smallint[] DEFAULT NULL,
    p_metadata jsonb[] DEFAULT NULL,
    p_unique_keys bytea[] DEFAULT NULL,
    p_unique_states bit(8)[] DEFAULT NULL)
    RETURNS bigint[]
    AS 'MODULE_PATHNAME', 'awa_insert_jobs'
    LANGUAGE C VOLATILE PARALLEL UNSAFE
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp SET jit = off;

-- Put existing jobs back on the ready plane (promotion, DLQ retry, aging, moves): ids,
-- attempts and keys are kept; the destination queue's current width picks the shard.
CREATE FUNCTION awa._enqueue_ready(p_rows awa.deferred_jobs[]) RETURNS integer
    AS 'MODULE_PATHNAME', 'awa_enqueue_ready'
    LANGUAGE C VOLATILE PARALLEL UNSAFE
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp SET jit = off;
