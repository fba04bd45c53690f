-- Run by `make installcheck` before the suites (REGRESS_PREP). The suites drive promotion,
-- rescue, ring rotation and prune themselves and compare exact results, so a background
-- maintenance worker must not run in their databases meanwhile. Without preload there is
-- none; when the library is preloaded, awa_shard.maintenance must be off for the run.
-- One isolation spec (ring_prepare_refence) prepares transactions: the server must allow
-- a few (max_prepared_transactions, 0 by default).
DO $$
BEGIN
    IF current_setting('max_prepared_transactions')::integer < 2 THEN
        RAISE EXCEPTION 'max_prepared_transactions is %, the suites need at least 2',
                        current_setting('max_prepared_transactions')
            USING HINT = 'Set max_prepared_transactions = 4 in postgresql.conf and restart the server for the run.';
    END IF;
    IF EXISTS (SELECT 1 FROM unnest(string_to_array(current_setting('shared_preload_libraries'), ',')) AS l(name)
                WHERE regexp_replace(btrim(l.name, ' "'), '^.*/', '') IN ('awa_shard', 'awa_shard.so'))
       AND coalesce(current_setting('awa_shard.maintenance', true), 'on') = 'on'
       AND coalesce(current_setting('awa_shard.maintenance_database', true), '') IN ('', 'contrib_regression', 'isolation_regression')
    THEN
        RAISE EXCEPTION 'awa_shard background maintenance is on in the databases the suites use'
            USING HINT = 'The suites run maintenance themselves. For the run: ALTER SYSTEM SET awa_shard.maintenance = off; SELECT pg_reload_conf(); (ALTER SYSTEM RESET awa_shard.maintenance afterwards), or run them against a server without shared_preload_libraries = ''awa_shard''.';
    END IF;
END
$$;
