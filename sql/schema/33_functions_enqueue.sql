-- Producer functions (C++: src/enqueue_api.cpp) and the way back onto the ready plane.

-- Enqueue one job (the reference's 12-argument signature, integer priority and attempts,
-- then the job's concurrency key).
CREATE FUNCTION awa.insert_job_compat(
    p_kind text,
    p_queue text DEFAULT 'default',
    p_args jsonb DEFAULT '{}',
    p_state awa.job_state DEFAULT 'available',
    p_priority bigint DEFAULT 2,
    p_max_attempts bigint DEFAULT 25,
    p_run_at timestamptz DEFAULT NULL,
    p_metadata jsonb DEFAULT '{}',
    p_tags text[] DEFAULT '{}',
    p_unique_key bytea DEFAULT NULL,
    p_unique_states bit(8) DEFAULT NULL,
    p_ordering_key bytea DEFAULT NULL,
    p_concurrency_key text DEFAULT NULL)
    RETURNS awa.job_row
    AS 'MODULE_PATHNAME', 'awa_insert_job_compat_1_1'
    LANGUAGE C VOLATILE PARALLEL UNSAFE
    SECURITY DEFINER;
REVOKE ALL ON FUNCTION awa.insert_job_compat(text, text, jsonb, awa.job_state, bigint, bigint, timestamptz, jsonb, text[], bytea, bit, bytea, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION awa.insert_job_compat(text, text, jsonb, awa.job_state, bigint, bigint, timestamptz, jsonb, text[], bytea, bit, bytea, text) TO awa_producer, awa_admin;
COMMENT ON FUNCTION awa.insert_job_compat(text, text, jsonb, awa.job_state, bigint, bigint, timestamptz, jsonb, text[], bytea, bit, bytea, text)
    IS 'Enqueue one job (the reference''s 12-argument signature, then p_concurrency_key) and return it as awa.job_row. Role: awa_producer, awa_admin.';

-- Enqueue a batch into one queue. Arrays are NULL or as long as the batch; a one-element
-- p_kinds is the kind of every job. Keyless rows of a priority share one rotor pick, or
-- with p_spread_keyless are cut into one run per shard. Returns the ids in input order.
CREATE FUNCTION awa.insert_jobs(
    p_queue text,
    p_kinds text[],
    p_args jsonb[] DEFAULT NULL,
    p_priorities bigint[] DEFAULT NULL,
    p_run_ats timestamptz[] DEFAULT NULL,
    p_ordering_keys bytea[] DEFAULT NULL,
    p_max_attempts bigint[] DEFAULT NULL,
    p_metadata jsonb[] DEFAULT NULL,
    p_unique_keys bytea[] DEFAULT NULL,
    p_unique_states bit(8)[] DEFAULT NULL,
    p_spread_keyless boolean DEFAULT false,
    p_concurrency_keys text[] DEFAULT NULL)
    RETURNS bigint[]
    AS 'MODULE_PATHNAME', 'awa_insert_jobs_1_1'
    LANGUAGE C VOLATILE PARALLEL UNSAFE
    SECURITY DEFINER;
REVOKE ALL ON FUNCTION awa.insert_jobs(text, text[], jsonb[], bigint[], timestamptz[], bytea[], bigint[], jsonb[], bytea[], bit[], boolean, text[]) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION awa.insert_jobs(text, text[], jsonb[], bigint[], timestamptz[], bytea[], bigint[], jsonb[], bytea[], bit[], boolean, text[]) TO awa_producer, awa_admin;
COMMENT ON FUNCTION awa.insert_jobs(text, text[], jsonb[], bigint[], timestamptz[], bytea[], bigint[], jsonb[], bytea[], bit[], boolean, text[])
    IS 'Enqueue a batch into one queue; returns the job ids in input order. One-element p_kinds: one kind for every job. p_spread_keyless: spread keyless rows over the shards. p_concurrency_keys: the jobs'' concurrency keys. Role: awa_producer, awa_admin.';

-- Put existing jobs back on the ready plane (promotion, DLQ retry, aging, moves): ids,
-- attempts and keys are kept; the destination queue's current width picks the shard.
CREATE FUNCTION awa._enqueue_ready(p_rows awa.deferred_jobs[]) RETURNS integer
    AS 'MODULE_PATHNAME', 'awa_enqueue_ready'
    LANGUAGE C VOLATILE PARALLEL UNSAFE
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp SET jit = off;
REVOKE ALL ON FUNCTION awa._enqueue_ready(awa.deferred_jobs[]) FROM PUBLIC;
COMMENT ON FUNCTION awa._enqueue_ready(awa.deferred_jobs[]) IS 'Internal: put existing jobs back on the ready plane (promotion, DLQ retry, aging, moves).';

-- A removed ready row as the input of awa._enqueue_ready, bound for p_queue/p_priority.
CREATE FUNCTION awa._ready_as_deferred(r awa.ready_entries, p_queue text, p_priority smallint,
                                                  p_stamp jsonb) RETURNS awa.deferred_jobs
    LANGUAGE sql STABLE PARALLEL SAFE
    SET search_path = pg_catalog, pg_temp
    RETURN awa._job_row(NULL::awa.deferred_jobs, awa._job(r), jsonb_build_object(
        'queue', p_queue, 'priority', p_priority, 'metadata', awa._stamp_metadata(r.metadata, p_stamp)));
REVOKE ALL ON FUNCTION awa._ready_as_deferred(awa.ready_entries, text, smallint, jsonb) FROM PUBLIC;
COMMENT ON FUNCTION awa._ready_as_deferred(awa.ready_entries, text, smallint, jsonb) IS 'Internal: a removed ready row as input of awa._enqueue_ready.';

-- How producers fence their reservations (docs/design.md §3): 'registry' (preloaded, an
-- in-flight registry in shared memory) or 'lane_lock' (the lane lock is held to commit).
-- Unlike SHOW awa_shard.reservation_mode, it works before the library is loaded.
CREATE FUNCTION awa.reservation_mode() RETURNS text
    AS 'MODULE_PATHNAME', 'awa_reservation_mode'
    LANGUAGE C STABLE PARALLEL SAFE
    SET search_path = pg_catalog, pg_temp;
REVOKE ALL ON FUNCTION awa.reservation_mode() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION awa.reservation_mode() TO awa_producer, awa_worker, awa_admin, pg_monitor;
COMMENT ON FUNCTION awa.reservation_mode() IS
    'How producers fence their reservations: registry (preloaded, in-flight registry in shared memory) or lane_lock (lane lock held to commit).';
