-- awa_shard: the full install script of the current version, concatenated by the build
-- from sql/schema/*.sql in file-name order (docs/design.md §11). Edit the sources, never
-- the generated sql/awa_shard--<version>.sql.
\echo Use "CREATE EXTENSION awa_shard" to load this file. \quit

-- The schema must be one that only superusers can write to: PostgreSQL uses an existing
-- schema `awa` as it is, and a role that could create functions in it could shadow a call
-- of the extension's own code (an overload with more exact argument types) and run it as
-- the caller, the background maintenance's superuser included. So an existing schema must
-- belong to a superuser, grant CREATE to no other role, and hold nothing yet (after DROP
-- EXTENSION it stays, empty, with its USAGE grants).
DO $awa_schema_check$
DECLARE
    s record;
BEGIN
    SELECT n.oid, n.nspname, r.rolname, r.rolsuper INTO s
      FROM pg_catalog.pg_namespace n JOIN pg_catalog.pg_roles r ON r.oid = n.nspowner
     WHERE n.nspname = 'awa';
    IF NOT s.rolsuper THEN
        RAISE EXCEPTION 'schema awa is owned by role %, which is not a superuser', s.rolname
            USING ERRCODE = '42501',
                  DETAIL = 'Its owner could create functions in it that the extension''s calls would run.',
                  HINT = 'Drop the schema, or make a superuser its owner, and create the extension again.';
    END IF;
    IF EXISTS (SELECT 1 FROM pg_catalog.pg_roles r
                WHERE NOT r.rolsuper AND pg_catalog.has_schema_privilege(r.oid, s.oid, 'CREATE')) THEN
        RAISE EXCEPTION 'schema awa grants CREATE to a role that is not a superuser'
            USING ERRCODE = '42501',
                  DETAIL = 'Such a role could create functions in it that the extension''s calls would run.',
                  HINT = 'REVOKE CREATE ON SCHEMA awa FROM that role (and PUBLIC), then create the extension again.';
    END IF;
    IF EXISTS (SELECT 1 FROM pg_catalog.pg_class WHERE relnamespace = s.oid
               UNION ALL SELECT 1 FROM pg_catalog.pg_proc WHERE pronamespace = s.oid
               UNION ALL SELECT 1 FROM pg_catalog.pg_type WHERE typnamespace = s.oid
               UNION ALL SELECT 1 FROM pg_catalog.pg_operator WHERE oprnamespace = s.oid
               UNION ALL SELECT 1 FROM pg_catalog.pg_collation WHERE collnamespace = s.oid
               UNION ALL SELECT 1 FROM pg_catalog.pg_conversion WHERE connamespace = s.oid
               UNION ALL SELECT 1 FROM pg_catalog.pg_opfamily WHERE opfnamespace = s.oid
               UNION ALL SELECT 1 FROM pg_catalog.pg_opclass WHERE opcnamespace = s.oid
               UNION ALL SELECT 1 FROM pg_catalog.pg_ts_config WHERE cfgnamespace = s.oid
               UNION ALL SELECT 1 FROM pg_catalog.pg_ts_dict WHERE dictnamespace = s.oid
               UNION ALL SELECT 1 FROM pg_catalog.pg_ts_parser WHERE prsnamespace = s.oid
               UNION ALL SELECT 1 FROM pg_catalog.pg_ts_template WHERE tmplnamespace = s.oid
               UNION ALL SELECT 1 FROM pg_catalog.pg_statistic_ext WHERE stxnamespace = s.oid) THEN
        RAISE EXCEPTION 'schema awa already holds objects'
            USING ERRCODE = '42P07',
                  DETAIL = 'The extension creates everything in schema awa itself.',
                  HINT = 'Move or drop them (or the schema), then create the extension again.';
    END IF;
END
$awa_schema_check$;
