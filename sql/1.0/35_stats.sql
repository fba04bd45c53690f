-- Per-shard live counters in shared memory (C++: src/stats.cpp).

-- Raw counters since server start (or the last reset); empty when not preloaded.
CREATE FUNCTION awa._shard_stats(
    OUT queue text, OUT enqueue_shard smallint, OUT enqueued bigint, OUT claimed bigint,
    OUT completed bigint, OUT failed bigint, OUT since timestamptz)
    RETURNS SETOF record
    AS 'MODULE_PATHNAME', 'awa_shard_stats'
    LANGUAGE C VOLATILE STRICT PARALLEL SAFE
    SET search_path = pg_catalog, pg_temp;

-- Forget every counter; false when the library is not preloaded.
CREATE FUNCTION awa.reset_shard_stats() RETURNS boolean
    AS 'MODULE_PATHNAME', 'awa_reset_shard_stats'
    LANGUAGE C VOLATILE PARALLEL UNSAFE
    SET search_path = pg_catalog, pg_temp;

-- Count one terminal failure of a (queue, shard).
CREATE FUNCTION awa._count_failed(p_queue text, p_enqueue_shard smallint) RETURNS void
    AS 'MODULE_PATHNAME', 'awa_count_failed'
    LANGUAGE C VOLATILE PARALLEL UNSAFE
    SET search_path = pg_catalog, pg_temp;
