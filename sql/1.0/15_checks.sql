-- Argument checks shared by the SQL functions (D11: every argument is checked before
-- anything is written, with one SQLSTATE per kind of bad input).

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

-- A priority argument: 1 (most urgent) to 4 (23514), NULL allowed (keep the job's own).
CREATE FUNCTION awa._check_priority(p_priority smallint, p_name text) RETURNS void
    LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
    SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF p_priority NOT BETWEEN 1 AND 4 THEN
        RAISE EXCEPTION '% must be between 1 and 4', p_name USING ERRCODE = '23514',
            DETAIL = format('The value is %s.', p_priority);
    END IF;
END
$$;

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

