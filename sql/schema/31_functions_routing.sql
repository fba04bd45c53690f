-- Routing: the ordering-key hash, shard selection, lanes and reservations (docs/design.md §3, §6).

-- The 64-bit rolling hash of the key bytes, as a two's-complement bigint.
CREATE FUNCTION awa.ordering_key_hash(key bytea) RETURNS bigint
    AS 'MODULE_PATHNAME', 'awa_ordering_key_hash_bytea'
    LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE
    SET search_path = pg_catalog, pg_temp;
REVOKE ALL ON FUNCTION awa.ordering_key_hash(bytea) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION awa.ordering_key_hash(bytea) TO awa_producer, awa_worker, awa_admin;
COMMENT ON FUNCTION awa.ordering_key_hash(bytea) IS 'The 64-bit ordering-key hash of the key bytes (two''s-complement bigint). Role: all three.';

-- Same hash over the UTF-8 bytes of a text key, whatever the database encoding.
CREATE FUNCTION awa.ordering_key_hash(key text) RETURNS bigint
    AS 'MODULE_PATHNAME', 'awa_ordering_key_hash_text'
    LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE
    SET search_path = pg_catalog, pg_temp;
REVOKE ALL ON FUNCTION awa.ordering_key_hash(text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION awa.ordering_key_hash(text) TO awa_producer, awa_worker, awa_admin;
COMMENT ON FUNCTION awa.ordering_key_hash(text) IS 'The 64-bit ordering-key hash of the UTF-8 bytes of a text key. Role: all three.';

-- Shard of a key for a queue of `shards` lanes (1..64): unsigned hash mod shards.
CREATE FUNCTION awa.shard_for_ordering_key(key bytea, shards bigint) RETURNS smallint
    AS 'MODULE_PATHNAME', 'awa_shard_for_ordering_key_bytea'
    LANGUAGE C IMMUTABLE PARALLEL SAFE
    SET search_path = pg_catalog, pg_temp;
REVOKE ALL ON FUNCTION awa.shard_for_ordering_key(bytea, bigint) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION awa.shard_for_ordering_key(bytea, bigint) TO awa_producer, awa_worker, awa_admin;
COMMENT ON FUNCTION awa.shard_for_ordering_key(bytea, bigint) IS 'The shard of a key in a queue of `shards` lanes (hash mod shards). Role: all three.';

CREATE FUNCTION awa.shard_for_ordering_key(key text, shards bigint) RETURNS smallint
    AS 'MODULE_PATHNAME', 'awa_shard_for_ordering_key_text'
    LANGUAGE C IMMUTABLE PARALLEL SAFE
    SET search_path = pg_catalog, pg_temp;
REVOKE ALL ON FUNCTION awa.shard_for_ordering_key(text, bigint) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION awa.shard_for_ordering_key(text, bigint) TO awa_producer, awa_worker, awa_admin;
COMMENT ON FUNCTION awa.shard_for_ordering_key(text, bigint) IS 'The shard of a text key (UTF-8 bytes) in a queue of `shards` lanes. Role: all three.';

-- Current enqueue width of a queue as this transaction sees it (no queue_meta row = 1).
CREATE FUNCTION awa.queue_enqueue_shards(p_queue text) RETURNS smallint
    AS 'MODULE_PATHNAME', 'awa_queue_enqueue_shards'
    LANGUAGE C VOLATILE STRICT PARALLEL UNSAFE
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp SET jit = off;
REVOKE ALL ON FUNCTION awa.queue_enqueue_shards(text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION awa.queue_enqueue_shards(text) TO awa_producer, awa_worker, awa_admin;
COMMENT ON FUNCTION awa.queue_enqueue_shards(text)
    IS 'The width (enqueue_shards) this transaction routes a queue with; 1 without settings. Role: all three.';

-- The routing rule: keyed -> hash mod S; keyless -> rotor, sticky per (queue, priority).
CREATE FUNCTION awa.shard_for_enqueue(p_queue text, p_priority bigint, p_ordering_key bytea DEFAULT NULL)
    RETURNS smallint
    AS 'MODULE_PATHNAME', 'awa_shard_for_enqueue'
    LANGUAGE C VOLATILE PARALLEL UNSAFE
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp SET jit = off;
REVOKE ALL ON FUNCTION awa.shard_for_enqueue(text, bigint, bytea) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION awa.shard_for_enqueue(text, bigint, bytea) TO awa_producer, awa_admin;
COMMENT ON FUNCTION awa.shard_for_enqueue(text, bigint, bytea)
    IS 'The shard a job of (queue, priority, key) would be enqueued to now in this transaction. Role: awa_producer, awa_admin.';

-- Name of a lane's sequence: 'queue_enqueue_seq_' and left(md5('queue:priority:shard'), 32),
-- the rule of 1.0, in C (src/reserve.cpp) so that the enqueue path and SQL share one text.
CREATE FUNCTION awa.lane_sequence_name(p_queue text, p_priority bigint, p_enqueue_shard bigint)
    RETURNS text
    AS 'MODULE_PATHNAME', 'awa_lane_sequence_name'
    LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE
    SET search_path = pg_catalog, pg_temp;
REVOKE ALL ON FUNCTION awa.lane_sequence_name(text, bigint, bigint) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION awa.lane_sequence_name(text, bigint, bigint) TO awa_producer, awa_worker, awa_admin;
COMMENT ON FUNCTION awa.lane_sequence_name(text, bigint, bigint) IS 'Name of a lane''s enqueue sequence in schema awa. Role: all three.';

-- Advisory-lock key of a lane (held by every reservation until its transaction ends):
-- hashtextextended('awa.' || quote_ident(lane_sequence_name(...)), 0), the rule of 1.0, in C.
CREATE FUNCTION awa.lane_lock_key(p_queue text, p_priority bigint, p_enqueue_shard bigint)
    RETURNS bigint
    AS 'MODULE_PATHNAME', 'awa_lane_lock_key'
    LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE
    SET search_path = pg_catalog, pg_temp;
REVOKE ALL ON FUNCTION awa.lane_lock_key(text, bigint, bigint) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION awa.lane_lock_key(text, bigint, bigint) TO awa_producer, awa_worker, awa_admin;
COMMENT ON FUNCTION awa.lane_lock_key(text, bigint, bigint) IS 'Advisory-lock key of a lane (find lane waits in pg_locks). Role: all three.';

-- Create a lane's heads and sequence if missing, under the lane lock (cold path of enqueue;
-- C, src/reserve.cpp, the same code the reservation runs on a cache miss).
CREATE FUNCTION awa._ensure_lane(p_queue text, p_priority smallint, p_enqueue_shard smallint,
                                 OUT seq_oid oid, OUT lock_key bigint, OUT created boolean)
    AS 'MODULE_PATHNAME', 'awa_ensure_lane'
    LANGUAGE C VOLATILE STRICT PARALLEL UNSAFE
    SET search_path = pg_catalog, pg_temp;
REVOKE ALL ON FUNCTION awa._ensure_lane(text, smallint, smallint) FROM PUBLIC;
COMMENT ON FUNCTION awa._ensure_lane(text, smallint, smallint) IS 'Internal: create a lane''s heads and sequence under the lane lock (cold path of enqueue).';

-- Under Citus, make again the sequence of a lane whose head is on this node without it (after
-- a shard move or split), at the lane's position; only a restore, never waiting for the lane
-- lock (C, src/reserve.cpp). False when the lock is busy, the lane gone or its sequence there.
CREATE FUNCTION awa._restore_lane_sequence(p_queue text, p_priority smallint, p_enqueue_shard smallint)
    RETURNS boolean
    AS 'MODULE_PATHNAME', 'awa_restore_lane_sequence'
    LANGUAGE C VOLATILE STRICT PARALLEL UNSAFE
    SET search_path = pg_catalog, pg_temp;
REVOKE ALL ON FUNCTION awa._restore_lane_sequence(text, smallint, smallint) FROM PUBLIC;
COMMENT ON FUNCTION awa._restore_lane_sequence(text, smallint, smallint) IS 'Internal: under Citus, make again a lane''s missing sequence at its position (after a shard move or split), lock tried.';

-- Reserve [start, start + count) of a lane under the lane lock; count <= 0 peeks.
CREATE FUNCTION awa.reserve_enqueue_seq(p_queue text, p_priority bigint, p_enqueue_shard bigint, p_count bigint)
    RETURNS bigint
    AS 'MODULE_PATHNAME', 'awa_reserve_enqueue_seq'
    LANGUAGE C VOLATILE PARALLEL UNSAFE
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp SET jit = off;
REVOKE ALL ON FUNCTION awa.reserve_enqueue_seq(text, bigint, bigint, bigint) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION awa.reserve_enqueue_seq(text, bigint, bigint, bigint) TO awa_producer, awa_admin;
COMMENT ON FUNCTION awa.reserve_enqueue_seq(text, bigint, bigint, bigint)
    IS 'Reserve a contiguous block of a lane''s numbers under the lane lock (count <= 0: peek). Role: awa_producer, awa_admin.';

-- The exclusive upper bound of lane_seq below which every reservation of a lane (given by
-- its sequence) has ended: min(lowest reservation still in flight, high-water + 1) in
-- registry mode, no bound in lane-lock mode (docs/design.md §3). A path that moves a claim
-- cursor past rows it did not claim reads it before the statement whose snapshot it relies on.
CREATE FUNCTION awa._lane_claim_bound(p_seq oid) RETURNS bigint
    AS 'MODULE_PATHNAME', 'awa_lane_claim_bound'
    LANGUAGE C VOLATILE PARALLEL UNSAFE
    SET search_path = pg_catalog, pg_temp;
REVOKE ALL ON FUNCTION awa._lane_claim_bound(oid) FROM PUBLIC;
COMMENT ON FUNCTION awa._lane_claim_bound(oid) IS
    'Internal: the lane_seq below which every reservation of a lane has ended (claim bound).';

-- Next value a lane's enqueue sequence will hand out (1 for a fresh lane), for the
-- monitoring views. NULL while drop_queue is dropping the lane: it holds the sequence until
-- it commits, and a reader neither waits for it nor fails once the sequence is gone. SECURITY
-- DEFINER: reading a sequence needs rights a monitoring role does not have.
CREATE FUNCTION awa._lane_next_seq(p_seq_name text) RETURNS bigint
    AS 'MODULE_PATHNAME', 'awa_lane_next_seq'
    LANGUAGE C STABLE STRICT PARALLEL RESTRICTED
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp;
REVOKE ALL ON FUNCTION awa._lane_next_seq(text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION awa._lane_next_seq(text) TO awa_admin, pg_monitor;
COMMENT ON FUNCTION awa._lane_next_seq(text) IS 'Internal: next value a lane''s enqueue sequence will hand out (security definer).';

-- Own-transaction changes of queue_meta must be seen by this transaction's next enqueue.
CREATE FUNCTION awa._queue_meta_changed() RETURNS trigger
    AS 'MODULE_PATHNAME', 'awa_queue_meta_changed'
    LANGUAGE C VOLATILE PARALLEL UNSAFE
    SET search_path = pg_catalog, pg_temp;
REVOKE ALL ON FUNCTION awa._queue_meta_changed() FROM PUBLIC;
COMMENT ON FUNCTION awa._queue_meta_changed() IS 'Internal: statement and row trigger on queue_meta (ENABLE ALWAYS); this transaction''s next enqueue re-reads widths and limits, and its commit tells every backend to.';

CREATE TRIGGER queue_meta_changed AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON awa.queue_meta
    FOR EACH STATEMENT EXECUTE FUNCTION awa._queue_meta_changed();
-- Since 1.1 also a row trigger (a logical replication apply worker fires row triggers only),
-- and both ENABLE ALWAYS so that they fire in replica sessions too (session_replication_role
-- = replica, as a data load may run): a change of queue_meta made there must still make every
-- backend re-read its cached widths and limits at commit.
CREATE TRIGGER queue_meta_row_changed AFTER INSERT OR UPDATE OR DELETE ON awa.queue_meta
    FOR EACH ROW EXECUTE FUNCTION awa._queue_meta_changed();
ALTER TABLE awa.queue_meta ENABLE ALWAYS TRIGGER queue_meta_changed;
ALTER TABLE awa.queue_meta ENABLE ALWAYS TRIGGER queue_meta_row_changed;
