
-- Step 5, the partitioned plane. ready_entries, done_entries and leases are keyed by lane
-- identity, so the shard joins their primary key. The parent's key is dropped first (the
-- partitions' inherited keys go with it), the column is added (a catalog change: existing
-- rows read the default 0, nothing is rewritten), then the new key is added on the parent,
-- which builds it on every partition. The lane index becomes the shard-aware one; every
-- partition gets it under the name a fresh install gives it.
DO $$
DECLARE
    t text;
    v_slot text;
BEGIN
    FOREACH t IN ARRAY ARRAY['ready_entries', 'leases', 'done_entries'] LOOP
        v_slot := CASE t WHEN 'leases' THEN 'lease_slot' ELSE 'ready_slot' END;
        IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_constraint c
                         JOIN pg_catalog.pg_attribute a
                           ON a.attrelid = c.conrelid AND a.attnum = ANY (c.conkey)
                        WHERE c.conrelid = format('awa.%I', t)::regclass AND c.contype = 'p'
                          AND a.attname = 'enqueue_shard') THEN
            EXECUTE format('ALTER TABLE awa.%I DROP CONSTRAINT IF EXISTS %I', t, t || '_pkey');
            EXECUTE format('ALTER TABLE awa.%I ADD COLUMN IF NOT EXISTS enqueue_shard smallint NOT NULL DEFAULT 0', t);
            EXECUTE format('ALTER TABLE awa.%I ADD CONSTRAINT %I PRIMARY KEY (%I, queue, priority, enqueue_shard, lane_seq)',
                           t, t || '_pkey', v_slot);
        END IF;
        EXECUTE format('DROP INDEX IF EXISTS awa.%I', t || '_lane_idx');
        EXECUTE format('CREATE INDEX IF NOT EXISTS %I ON awa.%I (queue, priority, enqueue_shard, lane_seq)',
                       t || '_lane_shard_idx', t);
    END LOOP;
END
$$;
