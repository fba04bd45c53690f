-- Roles and the schema (D10). Roles are cluster-wide: created once, kept by DROP EXTENSION.
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

-- Nothing is callable by default: every function below revokes EXECUTE from PUBLIC right
-- after its definition and grants it to exactly the roles that call it; tables and views are
-- readable by awa_admin (the user-facing views by pg_monitor too) and writable by nobody but
-- their owner (awa.queue_meta: awa_admin).
GRANT USAGE ON SCHEMA awa TO awa_producer, awa_worker, awa_admin, pg_monitor;
COMMENT ON SCHEMA awa IS 'awa_shard: a sharded, vacuum-aware job queue (docs/api.md).';
