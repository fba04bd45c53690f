-- citus_setup: without Citus, awa.citus_setup() refuses with a hint and changes nothing
-- (the Citus suite, test/citus/run.sh, covers it on a cluster).
\i sql/err.psql
SELECT count(*) AS citus_installed FROM pg_extension WHERE extname = 'citus';
SELECT md5(string_agg(p.oid::regprocedure::text || coalesce(array_to_string(p.proconfig, ','), ''), ';' ORDER BY p.oid)) AS before
  FROM pg_proc p WHERE p.pronamespace = 'awa'::regnamespace \gset
SELECT pg_temp.err('SELECT * FROM awa.citus_setup()') AS setup;
-- The hint says what to do.
CREATE FUNCTION pg_temp.hint_of(p_sql text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE h text;
BEGIN
    EXECUTE p_sql;
    RETURN 'no error';
EXCEPTION WHEN OTHERS THEN
    GET STACKED DIAGNOSTICS h = PG_EXCEPTION_HINT;
    RETURN h;
END
$$;
SELECT pg_temp.hint_of('SELECT * FROM awa.citus_setup()') AS hint;
-- Nothing changed: the functions and their settings are as before.
SELECT md5(string_agg(p.oid::regprocedure::text || coalesce(array_to_string(p.proconfig, ','), ''), ';' ORDER BY p.oid)) = :'before' AS unchanged
  FROM pg_proc p WHERE p.pronamespace = 'awa'::regnamespace;
SELECT has_function_privilege('public', 'awa.citus_setup()', 'EXECUTE') AS public_may_call;
