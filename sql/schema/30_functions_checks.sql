-- Argument checks and limits (D11, docs/design.md §12): every check of the SQL functions
-- goes through these helpers; the limits have one definition, src/limits.hpp.

-- A limit of src/limits.hpp by name (max_enqueue_shards, max_queue_chars, default_priority, ...).
CREATE FUNCTION awa._limit(p_name text) RETURNS integer
    AS 'MODULE_PATHNAME', 'awa_limit'
    LANGUAGE C IMMUTABLE PARALLEL SAFE
    SET search_path = pg_catalog, pg_temp;
REVOKE ALL ON FUNCTION awa._limit(text) FROM PUBLIC;
COMMENT ON FUNCTION awa._limit(text) IS 'Internal: a named limit of src/limits.hpp (the C++ side), so SQL states it once.';

-- Reject a NULL argument (22004) naming it.
CREATE FUNCTION awa._require(p_isnull boolean, p_name text) RETURNS void
    LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
    SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF p_isnull THEN
        RAISE EXCEPTION '% must not be null', p_name USING ERRCODE = '22004';
    END IF;
END
$$;
REVOKE ALL ON FUNCTION awa._require(boolean, text) FROM PUBLIC;
COMMENT ON FUNCTION awa._require(boolean, text) IS 'Internal: raise 22004 naming a NULL argument.';

-- A queue name argument: 1 to 200 characters (23514), as for the producer functions.
CREATE FUNCTION awa._check_queue(p_queue text, p_name text) RETURNS void
    LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
    SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    PERFORM awa._require(p_queue IS NULL, p_name);
    IF length(p_queue) NOT BETWEEN 1 AND 200 THEN
        RAISE EXCEPTION '% must be 1 to 200 characters long', p_name USING ERRCODE = '23514',
            DETAIL = format('The value has %s characters.', length(p_queue));
    END IF;
END
$$;
REVOKE ALL ON FUNCTION awa._check_queue(text, text) FROM PUBLIC;
COMMENT ON FUNCTION awa._check_queue(text, text) IS 'Internal: raise 22004 / 23514 for a NULL or badly sized queue name.';

-- A priority argument: 1 (most urgent) to 4 (23514), NULL allowed (keep the job's own).
CREATE FUNCTION awa._check_priority(p_priority bigint, p_name text) RETURNS void
    LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
    SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    PERFORM awa._check_between(p_priority, awa._limit('min_priority'), awa._limit('max_priority'), p_name, '23514');
END
$$;
REVOKE ALL ON FUNCTION awa._check_priority(bigint, text) FROM PUBLIC;
COMMENT ON FUNCTION awa._check_priority(bigint, text) IS 'Internal: raise 23514 for a priority outside 1..4 (NULL allowed).';

-- A number argument below its minimum (22023), naming it; NULL is left to awa._require.
CREATE FUNCTION awa._require_at_least(p_value bigint, p_min bigint, p_name text) RETURNS void
    LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
    SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF p_value < p_min THEN
        RAISE EXCEPTION '% must be at least %', p_name, p_min USING ERRCODE = '22023',
            DETAIL = format('The value is %s.', p_value);
    END IF;
END
$$;
REVOKE ALL ON FUNCTION awa._require_at_least(bigint, bigint, text) FROM PUBLIC;
COMMENT ON FUNCTION awa._require_at_least(bigint, bigint, text) IS 'Internal: raise 22023 for a number below its minimum.';

-- A number argument outside [p_min, p_max] (22023, or p_errcode), naming it; NULL is left
-- to awa._require.
CREATE FUNCTION awa._check_between(p_value bigint, p_min bigint, p_max bigint, p_name text,
                                   p_errcode text DEFAULT '22023') RETURNS void
    LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
    SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF p_value NOT BETWEEN p_min AND p_max THEN
        RAISE EXCEPTION '% must be between % and %', p_name, p_min, p_max USING ERRCODE = p_errcode,
            DETAIL = format('The value is %s.', p_value);
    END IF;
END
$$;
REVOKE ALL ON FUNCTION awa._check_between(bigint, bigint, bigint, text, text) FROM PUBLIC;
COMMENT ON FUNCTION awa._check_between(bigint, bigint, bigint, text, text) IS 'Internal: raise 22023 (or the given SQLSTATE) for a number outside its range.';

-- An argument rule that is no range: 22023 with p_message when p_ok is false (NULL passes:
-- NULL arguments are awa._require's).
CREATE FUNCTION awa._check_arg(p_ok boolean, p_message text) RETURNS void
    LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
    SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF p_ok IS FALSE THEN
        RAISE EXCEPTION '%', p_message USING ERRCODE = '22023';
    END IF;
END
$$;
REVOKE ALL ON FUNCTION awa._check_arg(boolean, text) FROM PUBLIC;
COMMENT ON FUNCTION awa._check_arg(boolean, text) IS 'Internal: raise 22023 with the message when an argument rule is false.';

-- An interval argument of at most kMaxIntervalYears (src/limits.hpp) in the sum of its
-- parts' sizes (months, days, time), so that now plus or minus it is a valid timestamp
-- (22023 naming it; longer ones failed with 22008); NULL passes (awa._require's).
CREATE FUNCTION awa._check_interval(p_value interval, p_name text) RETURNS void
    LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
    SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_years numeric := abs(extract(year FROM p_value) * 12 + extract(month FROM p_value)) / 12
                       + abs(extract(day FROM p_value)) / 365.25
                       + abs(extract(hour FROM p_value) * 3600 + extract(minute FROM p_value) * 60
                             + extract(second FROM p_value)) / 31557600;
BEGIN
    IF v_years > awa._limit('max_interval_years') THEN
        RAISE EXCEPTION '% must be at most % years', p_name, awa._limit('max_interval_years') USING ERRCODE = '22023',
            DETAIL = format('The value is %s.', p_value);
    END IF;
END
$$;
REVOKE ALL ON FUNCTION awa._check_interval(interval, text) FROM PUBLIC;
COMMENT ON FUNCTION awa._check_interval(interval, text) IS 'Internal: raise 22023 for an interval argument longer than the limit max_interval_years.';

-- An interval that is NULL or has no negative part and is at most kMaxIntervalYears long: a
-- part of a different sign makes its length depend on the calendar ('1 month -29 days' is two
-- days after 1 January and less than nothing after 1 February). Retentions
-- (awa.queue_meta.completed_retention, failed_retention: a longer one made every prune fail
-- with 22008, a deadline past the last timestamp, once awa_admin had written it into
-- queue_meta by hand) and thresholds subtracted from now (rescue's staleness, aging's age:
-- now minus such an interval could be in the future) are held to it: the table's CHECK
-- queue_meta_retention_range, awa.set_queue_retention, awa.run_maintenance,
-- awa.rescue_stale_heartbeats and awa.age_waiting_priorities (regress retention_edges checks
-- the limit against awa._limit).
CREATE FUNCTION awa._interval_in_range(p_value interval) RETURNS boolean
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    SET search_path = pg_catalog, pg_temp
    RETURN p_value IS NULL
        OR (extract(year FROM p_value) >= 0 AND extract(month FROM p_value) >= 0 AND extract(day FROM p_value) >= 0
            AND extract(hour FROM p_value) >= 0 AND extract(minute FROM p_value) >= 0
            AND extract(second FROM p_value) >= 0
            AND extract(year FROM p_value) + extract(month FROM p_value) / 12 + extract(day FROM p_value) / 365.25
                + (extract(hour FROM p_value) * 3600 + extract(minute FROM p_value) * 60 + extract(second FROM p_value))
                  / 31557600 <= 1000);  -- awa._limit('max_interval_years'), which awa_admin may not call
REVOKE ALL ON FUNCTION awa._interval_in_range(interval) FROM PUBLIC;
-- awa_admin writes queue_meta by hand, so evaluates its CHECK.
GRANT EXECUTE ON FUNCTION awa._interval_in_range(interval) TO awa_admin;
COMMENT ON FUNCTION awa._interval_in_range(interval) IS 'Internal: whether an interval is NULL or has no negative part and is at most max_interval_years long.';
ALTER TABLE awa.queue_meta ADD CONSTRAINT queue_meta_retention_range
    CHECK (awa._interval_in_range(completed_retention) AND awa._interval_in_range(failed_retention));

-- A JSON value of at most awa._limit('max_result_bytes') bytes (results and progress), else
-- 22023 naming the argument (C, src/validate.cpp).
CREATE FUNCTION awa._check_json_size(p_value jsonb, p_name text) RETURNS void
    AS 'MODULE_PATHNAME', 'awa_check_json_size'
    LANGUAGE C IMMUTABLE PARALLEL SAFE
    SET search_path = pg_catalog, pg_temp;
REVOKE ALL ON FUNCTION awa._check_json_size(jsonb, text) FROM PUBLIC;
COMMENT ON FUNCTION awa._check_json_size(jsonb, text) IS 'Internal: raise 22023 when a JSON value is larger than awa._limit(''max_result_bytes'').';

-- Rotation and prune decide on the latest committed ring state, under the ring's cursor
-- row lock: they refuse to run where a statement does not see that state (and so do
-- purge_queue and drop_queue, which move or read lane cursors; their hint is their own).
CREATE FUNCTION awa._require_read_committed(p_name text) RETURNS void
    LANGUAGE plpgsql VOLATILE
    SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF current_setting('transaction_isolation') <> 'read committed' THEN
        RAISE EXCEPTION '% must run at READ COMMITTED isolation', p_name USING ERRCODE = '0A000',
            HINT = CASE WHEN p_name IN ('purge_queue', 'drop_queue', 'set_concurrency_limit')
                        THEN 'Call it in a transaction of its own at READ COMMITTED, the default isolation level.'
                        ELSE 'Call it in its own transaction, or let the background worker run maintenance.' END;
    END IF;
END
$$;
REVOKE ALL ON FUNCTION awa._require_read_committed(text) FROM PUBLIC;
COMMENT ON FUNCTION awa._require_read_committed(text) IS 'Internal: raise 0A000 outside READ COMMITTED.';

-- Whether a bit(8) unique-state mask holds a state (leftmost bit = scheduled): the one rule,
-- in C (src/unique_claims.cpp), shared by enqueue, claims, promotion and every SQL caller.
CREATE FUNCTION awa.job_state_in_bitmask(p_mask bit(8), p_state awa.job_state) RETURNS boolean
    AS 'MODULE_PATHNAME', 'awa_job_state_in_bitmask'
    LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE
    SET search_path = pg_catalog, pg_temp;
REVOKE ALL ON FUNCTION awa.job_state_in_bitmask(bit, awa.job_state) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION awa.job_state_in_bitmask(bit, awa.job_state) TO awa_producer, awa_worker, awa_admin;
COMMENT ON FUNCTION awa.job_state_in_bitmask(bit, awa.job_state) IS 'Whether a unique-state mask holds a state (leftmost bit = scheduled). Role: all three.';

-- Retry backoff: 2^attempt seconds plus up to 25 % jitter, at most 24 hours; attempts below
-- 0 count as 0 (power(2, -2^31) underflowed, 22003).
CREATE FUNCTION awa.backoff_duration(p_attempt bigint, p_max_attempts bigint) RETURNS interval
    LANGUAGE sql VOLATILE PARALLEL SAFE
    SET search_path = pg_catalog, pg_temp
    RETURN least(make_interval(secs => power(2, greatest(least(p_attempt, 20), 0)) * (1 + random() * 0.25)), interval '24 hours');
REVOKE ALL ON FUNCTION awa.backoff_duration(bigint, bigint) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION awa.backoff_duration(bigint, bigint) TO awa_producer, awa_worker, awa_admin;
COMMENT ON FUNCTION awa.backoff_duration(bigint, bigint) IS 'Default retry delay: 2^attempt seconds plus up to 25 % jitter, at most 24 hours. Role: all three.';
