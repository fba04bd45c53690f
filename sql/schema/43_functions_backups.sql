

-- Backups (docs/operations.md, "Backups"). pg_dump keeps the data of extension tables only
-- where they are marked as configuration: every table and partition that holds jobs,
-- lanes, cursors or settings is marked, and so are the job id and receipt id sequences
-- (lane sequences are created at run time, outside the extension, and pg_dump keeps them
-- anyway). The singleton and slot tables already hold their default rows when a restore
-- runs CREATE EXTENSION, so a restored row replaces the default one (awa._restore_upsert)
-- instead of failing on the primary key.
CREATE FUNCTION awa._restore_upsert() RETURNS trigger
    LANGUAGE plpgsql VOLATILE
    SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_key text := TG_ARGV[0];
    v_found boolean;
BEGIN
    EXECUTE format('SELECT EXISTS (SELECT 1 FROM %I.%I t WHERE t.%I = $1.%I)',
                   TG_TABLE_SCHEMA, TG_TABLE_NAME, v_key, v_key)
       INTO v_found USING NEW;
    IF NOT v_found THEN
        RETURN NEW;
    END IF;
    EXECUTE format('DELETE FROM %I.%I t WHERE t.%I = $1.%I', TG_TABLE_SCHEMA, TG_TABLE_NAME, v_key, v_key)
      USING NEW;
    RETURN NEW;
END
$$;
REVOKE ALL ON FUNCTION awa._restore_upsert() FROM PUBLIC;
COMMENT ON FUNCTION awa._restore_upsert() IS 'Internal: trigger that lets a restored singleton or slot row replace the default one.';

-- Every singleton and slot table replaces its default row with a restored one (pg_dump
-- marks are set next to each table).
DO $$
DECLARE
    t record;
BEGIN
    FOR t IN SELECT * FROM (VALUES ('storage_transition_state', 'singleton'), ('plane_settings', 'singleton'),
                                   ('queue_ring_state', 'singleton'), ('lease_ring_state', 'singleton'),
                                   ('claim_ring_state', 'singleton'), ('queue_ring_slots', 'slot'),
                                   ('lease_ring_slots', 'slot'), ('claim_ring_slots', 'slot'),
                                   ('retention_buckets', 'bucket')) AS v(tbl, key) LOOP
        EXECUTE format('CREATE TRIGGER restore_upsert BEFORE INSERT ON awa.%I FOR EACH ROW '
                       'EXECUTE FUNCTION awa._restore_upsert(%L)', t.tbl, t.key);
    END LOOP;
END
$$;
