
-- Step 4, the control plane.
-- queue_meta gets the per-queue width, 1 (strict FIFO per (queue, priority)) by default.
ALTER TABLE awa.queue_meta ADD COLUMN IF NOT EXISTS enqueue_shards smallint NOT NULL DEFAULT 1;
DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_constraint
                    WHERE conrelid = 'awa.queue_meta'::regclass
                      AND conname = 'queue_meta_enqueue_shards_range') THEN
        ALTER TABLE awa.queue_meta ADD CONSTRAINT queue_meta_enqueue_shards_range
            CHECK (enqueue_shards BETWEEN 1 AND 64);
    END IF;
END
$$;

-- The heads are keyed by lane (queue, priority, enqueue_shard); every existing lane is
-- shard 0. claim_seq is kept as it is, so nothing already claimed is claimed again.
DO $$
DECLARE
    t text;
BEGIN
    FOREACH t IN ARRAY ARRAY['queue_enqueue_heads', 'queue_claim_heads'] LOOP
        IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_constraint c
                         JOIN pg_catalog.pg_attribute a
                           ON a.attrelid = c.conrelid AND a.attnum = ANY (c.conkey)
                        WHERE c.conrelid = format('awa.%I', t)::regclass AND c.contype = 'p'
                          AND a.attname = 'enqueue_shard') THEN
            EXECUTE format('ALTER TABLE awa.%I DROP CONSTRAINT IF EXISTS %I', t, t || '_pkey');
            EXECUTE format('ALTER TABLE awa.%I ADD COLUMN IF NOT EXISTS enqueue_shard smallint NOT NULL DEFAULT 0', t);
            EXECUTE format('ALTER TABLE awa.%I ADD CONSTRAINT %I PRIMARY KEY (queue, priority, enqueue_shard)',
                           t, t || '_pkey');
        END IF;
    END LOOP;
END
$$;

-- 1.0's claim walk keeps a hint of each lane's head run_at on the claim head; NULL (unknown)
-- makes the walk look the head up, which is right for every existing lane.
ALTER TABLE awa.queue_claim_heads ADD COLUMN IF NOT EXISTS head_run_at timestamptz;

-- The enqueue cursor moves from the next_seq column to one sequence per lane, named as
-- awa.lane_sequence_name(queue, priority, 0) names it (that function is created later in
-- this script, so the formula is spelled out here). The sequence continues from next_seq:
-- the next reservation returns the old next_seq, so no lane_seq is handed out twice.
-- Like a lane created at run time, the sequence belongs to the head column, not to the
-- extension.
DO $$
DECLARE
    r record;
    v_name text;
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_attribute
                    WHERE attrelid = 'awa.queue_enqueue_heads'::regclass
                      AND attname = 'next_seq' AND NOT attisdropped) THEN
        RETURN;
    END IF;
    ALTER TABLE awa.queue_enqueue_heads ADD COLUMN IF NOT EXISTS seq_name text;
    FOR r IN SELECT h.queue, h.priority, h.enqueue_shard, h.next_seq
               FROM awa.queue_enqueue_heads h ORDER BY h.queue, h.priority, h.enqueue_shard LOOP
        v_name := 'queue_enqueue_seq_' || left(md5(r.queue || ':' || r.priority || ':' || r.enqueue_shard), 32);
        IF to_regclass(format('awa.%I', v_name)) IS NULL THEN
            EXECUTE format('CREATE SEQUENCE awa.%I AS bigint START 1 MINVALUE 1 CACHE 1 '
                           'OWNED BY awa.queue_enqueue_heads.seq_name', v_name);
            EXECUTE format('ALTER EXTENSION awa_shard DROP SEQUENCE awa.%I', v_name);
        END IF;
        IF r.next_seq > 1 THEN
            PERFORM setval(format('awa.%I', v_name)::regclass, r.next_seq - 1, true);
        END IF;
        UPDATE awa.queue_enqueue_heads h SET seq_name = v_name
         WHERE h.queue = r.queue AND h.priority = r.priority AND h.enqueue_shard = r.enqueue_shard;
    END LOOP;
    ALTER TABLE awa.queue_enqueue_heads ALTER COLUMN seq_name SET NOT NULL;
    ALTER TABLE awa.queue_enqueue_heads DROP COLUMN next_seq;
END
$$;
