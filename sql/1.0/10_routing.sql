-- Routing: the ordering-key hash, shard selection and lane creation.

-- Composite returned by the producer functions; same columns as the awa.jobs view.
CREATE TYPE awa.job_row AS (
    id bigint,
    kind text,
    queue text,
    args jsonb,
    state awa.job_state,
    priority smallint,
    attempt smallint,
    run_lease bigint,
    max_attempts smallint,
    run_at timestamptz,
    attempted_at timestamptz,
    finalized_at timestamptz,
    created_at timestamptz,
    metadata jsonb,
    tags text[],
    errors jsonb,
    unique_key bytea,
    unique_states bit(8),
    ordering_key bytea,
    enqueue_shard smallint,
    lane_seq bigint);

-- The 64-bit rolling hash of the key bytes, as a two's-complement bigint.
CREATE FUNCTION awa.ordering_key_hash(key bytea) RETURNS bigint
    AS 'MODULE_PATHNAME', 'awa_ordering_key_hash_bytea'
    LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE
    SET search_path = pg_catalog, pg_temp;

-- Same hash over the UTF-8 bytes of a text key, whatever the database encoding.
CREATE FUNCTION awa.ordering_key_hash(key text) RETURNS bigint
    AS 'MODULE_PATHNAME', 'awa_ordering_key_hash_text'
    LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE
    SET search_path = pg_catalog, pg_temp;

-- Shard of a key for a queue of `shards` lanes (1..64): unsigned hash mod shards.
CREATE FUNCTION awa.shard_for_ordering_key(key bytea, shards integer) RETURNS smallint
    AS 'MODULE_PATHNAME', 'awa_shard_for_ordering_key_bytea'
    LANGUAGE C IMMUTABLE PARALLEL SAFE
    SET search_path = pg_catalog, pg_temp;

CREATE FUNCTION awa.shard_for_ordering_key(key text, shards integer) RETURNS smallint
    AS 'MODULE_PATHNAME', 'awa_shard_for_ordering_key_text'
    LANGUAGE C IMMUTABLE PARALLEL SAFE
    SET search_path = pg_catalog, pg_temp;

-- Current enqueue width of a queue as this transaction sees it (no queue_meta row = 1).
CREATE FUNCTION awa.queue_enqueue_shards(p_queue text) RETURNS smallint
    AS 'MODULE_PATHNAME', 'awa_queue_enqueue_shards'
    LANGUAGE C VOLATILE STRICT PARALLEL UNSAFE
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp SET jit = off;

-- The routing rule: keyed -> hash mod S; keyless -> rotor, sticky per (queue, priority)
-- for the rest of the transaction.
CREATE FUNCTION awa.shard_for_enqueue(p_queue text, p_priority smallint, p_ordering_key bytea DEFAULT NULL)
    RETURNS smallint
    AS 'MODULE_PATHNAME', 'awa_shard_for_enqueue'
    LANGUAGE C VOLATILE PARALLEL UNSAFE
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp SET jit = off;

-- Name of a lane's sequence: md5 of 'queue:priority:shard' (the reference's naming).
CREATE FUNCTION awa.lane_sequence_name(p_queue text, p_priority smallint, p_enqueue_shard smallint)
    RETURNS text
    LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
    SET search_path = pg_catalog, pg_temp
    RETURN 'queue_enqueue_seq_' || left(md5(p_queue || ':' || p_priority || ':' || p_enqueue_shard), 32);

-- Advisory-lock key of a lane: held by every reservation until its transaction ends;
-- lane creation takes it first, so concurrent first use of a lane cannot fail.
CREATE FUNCTION awa.lane_lock_key(p_queue text, p_priority smallint, p_enqueue_shard smallint)
    RETURNS bigint
    LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
    SET search_path = pg_catalog, pg_temp
    RETURN hashtextextended('awa.' || quote_ident(awa.lane_sequence_name(p_queue, p_priority, p_enqueue_shard)), 0);

-- Create a lane's head rows and sequence if missing, under the lane lock (cold path:
-- called by the C++ reservation only when its backend cache has no entry for the lane).
CREATE FUNCTION awa._ensure_lane(p_queue text, p_priority smallint, p_enqueue_shard smallint,
                                 OUT seq_oid oid, OUT lock_key bigint, OUT created boolean)
    LANGUAGE plpgsql VOLATILE STRICT PARALLEL UNSAFE
    SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_name text := awa.lane_sequence_name(p_queue, p_priority, p_enqueue_shard);
BEGIN
    lock_key := awa.lane_lock_key(p_queue, p_priority, p_enqueue_shard);
    PERFORM pg_advisory_xact_lock(lock_key);
    created := false;
    IF NOT EXISTS (SELECT 1 FROM awa.queue_enqueue_heads h
                    WHERE h.queue = p_queue AND h.priority = p_priority
                      AND h.enqueue_shard = p_enqueue_shard) THEN
        IF to_regclass('awa.' || quote_ident(v_name)) IS NULL THEN
            EXECUTE format('CREATE SEQUENCE awa.%I AS bigint START 1 MINVALUE 1 CACHE 1 '
                           'OWNED BY awa.queue_enqueue_heads.seq_name', v_name);
        END IF;
        INSERT INTO awa.queue_enqueue_heads (queue, priority, enqueue_shard, seq_name)
        VALUES (p_queue, p_priority, p_enqueue_shard, v_name);
        INSERT INTO awa.queue_claim_heads (queue, priority, enqueue_shard)
        VALUES (p_queue, p_priority, p_enqueue_shard)
        ON CONFLICT DO NOTHING;
        created := true;
    END IF;
    seq_oid := to_regclass('awa.' || quote_ident(v_name))::oid;
    IF seq_oid IS NULL THEN
        RAISE EXCEPTION 'missing enqueue lane sequence for queue %, priority %, shard %',
            p_queue, p_priority, p_enqueue_shard USING ERRCODE = '55000';
    END IF;
END
$$;

-- Reserve a contiguous block [start, start + count) of a lane's sequence under the lane
-- lock held to commit; count <= 0 peeks at the next value without reserving.
CREATE FUNCTION awa.reserve_enqueue_seq(p_queue text, p_priority smallint, p_enqueue_shard smallint, p_count bigint)
    RETURNS bigint
    AS 'MODULE_PATHNAME', 'awa_reserve_enqueue_seq'
    LANGUAGE C VOLATILE PARALLEL UNSAFE
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp SET jit = off;

-- Own-transaction changes of queue_meta must be seen by this transaction's next enqueue.
CREATE FUNCTION awa._queue_meta_changed() RETURNS trigger
    AS 'MODULE_PATHNAME', 'awa_queue_meta_changed'
    LANGUAGE C VOLATILE PARALLEL UNSAFE
    SET search_path = pg_catalog, pg_temp;
CREATE TRIGGER queue_meta_changed AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON awa.queue_meta
    FOR EACH STATEMENT EXECUTE FUNCTION awa._queue_meta_changed();
