-- Roles and privileges (D10). Roles are cluster-wide: created once, kept by DROP EXTENSION.
DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_roles WHERE rolname = 'awa_producer') THEN
        CREATE ROLE awa_producer NOLOGIN;
    END IF;
    IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_roles WHERE rolname = 'awa_worker') THEN
        CREATE ROLE awa_worker NOLOGIN;
    END IF;
    IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_roles WHERE rolname = 'awa_admin') THEN
        CREATE ROLE awa_admin NOLOGIN;
    END IF;
END
$$;

-- Nothing is callable by default; each role gets exactly its functions.
REVOKE ALL ON ALL FUNCTIONS IN SCHEMA awa FROM PUBLIC;
REVOKE ALL ON ALL TABLES IN SCHEMA awa FROM PUBLIC;
REVOKE ALL ON ALL SEQUENCES IN SCHEMA awa FROM PUBLIC;
GRANT USAGE ON SCHEMA awa TO awa_producer, awa_worker, awa_admin;

-- Pure helpers: everyone who uses the queue.
GRANT EXECUTE ON FUNCTION
    awa.ordering_key_hash(bytea), awa.ordering_key_hash(text),
    awa.shard_for_ordering_key(bytea, integer), awa.shard_for_ordering_key(text, integer),
    awa.job_state_in_bitmask(bit, awa.job_state), awa.backoff_duration(integer, integer),
    awa.lane_sequence_name(text, smallint, smallint), awa.lane_lock_key(text, smallint, smallint),
    awa.queue_enqueue_shards(text)
    TO awa_producer, awa_worker, awa_admin;

-- Producers enqueue.
GRANT EXECUTE ON FUNCTION
    awa.insert_job_compat(text, text, jsonb, awa.job_state, smallint, smallint, timestamptz, jsonb, text[], bytea, bit, bytea),
    awa.insert_jobs(text, text[], jsonb[], smallint[], timestamptz[], bytea[], smallint[], jsonb[], bytea[], bit[]),
    awa.shard_for_enqueue(text, smallint, bytea),
    awa.reserve_enqueue_seq(text, smallint, smallint, bigint)
    TO awa_producer, awa_admin;

-- Workers claim and finish.
GRANT EXECUTE ON FUNCTION
    awa.claim_ready_runtime(text, bigint, double precision, double precision),
    awa.complete_jobs(bigint[], bigint[]),
    awa.fail_job(bigint, bigint, text, interval),
    awa.fail_job_to_dlq(bigint, bigint, text, text),
    awa.retry_job_after(bigint, bigint, interval),
    awa.snooze_job(bigint, bigint, interval),
    awa.heartbeat_jobs(bigint[], bigint[]),
    awa.wait_for_jobs(text, integer)
    TO awa_worker, awa_admin;

-- Maintenance and administration.
GRANT EXECUTE ON FUNCTION
    awa.rescue_stale_heartbeats(interval, integer),
    awa.rescue_expired_deadlines(integer),
    awa.promote_due(integer),
    awa.reset_shard_stats(),
    awa.rotate_queue_ring(), awa.prune_queue_ring(integer),
    awa.rotate_attempt_ring(text), awa.prune_attempt_ring(text, integer),
    awa.run_maintenance(interval, integer)
    TO awa_admin;
GRANT SELECT ON ALL TABLES IN SCHEMA awa TO awa_admin;
GRANT INSERT, UPDATE, DELETE ON awa.queue_meta TO awa_admin;
