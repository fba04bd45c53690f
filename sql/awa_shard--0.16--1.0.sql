-- awa_shard 0.16 -> 1.0 is migration v017: reshape steps (pieces of sql/upgrade/) followed by
-- the function pieces of sql/1.0/.
\echo Use "ALTER EXTENSION awa_shard UPDATE TO '1.0'" to load this file. \quit

-- Step 1, the gate. The transition state is locked first (SHARE: no engine switch can
-- start until this upgrade commits), then checked: reshaping primary keys under live
-- cutover traffic would block both engines, so mixed_transition refuses with 55000.
-- Nothing has been changed when it refuses.
LOCK TABLE awa.storage_transition_state IN SHARE MODE;
DO $$
DECLARE
    v_state text;
BEGIN
    SELECT s.state INTO v_state FROM awa.storage_transition_state s;
    IF v_state = 'mixed_transition' THEN
        RAISE EXCEPTION 'awa_shard cannot be updated to 1.0 while awa.storage_transition_state is %', v_state
            USING ERRCODE = '55000',
                  HINT = 'Finish or roll back the storage transition, then run ALTER EXTENSION awa_shard UPDATE again.';
    END IF;
END
$$;

-- Step 2, the locks: every table this upgrade reshapes, ACCESS EXCLUSIVE, in the order
-- the hot paths touch them (enqueue: queue_meta, enqueue heads, ready rows; claim: claim
-- heads, ready rows, running attempts; finish: receipts, done rows; then the unsharded
-- holds). All are taken before anything changes. Partitioned parents lock every partition.
LOCK TABLE awa.queue_meta IN ACCESS EXCLUSIVE MODE;
LOCK TABLE awa.queue_enqueue_heads IN ACCESS EXCLUSIVE MODE;
LOCK TABLE awa.queue_claim_heads IN ACCESS EXCLUSIVE MODE;
LOCK TABLE awa.ready_entries IN ACCESS EXCLUSIVE MODE;
LOCK TABLE awa.leases IN ACCESS EXCLUSIVE MODE;
LOCK TABLE awa.lease_claims IN ACCESS EXCLUSIVE MODE;
LOCK TABLE awa.done_entries IN ACCESS EXCLUSIVE MODE;
LOCK TABLE awa.deferred_jobs IN ACCESS EXCLUSIVE MODE;
LOCK TABLE awa.dlq_entries IN ACCESS EXCLUSIVE MODE;

-- Step 3, the 0.16 functions go. The function pieces of 1.0 that follow create every
-- function anew; the 11-argument insert_job_compat in particular must not survive, or
-- 11-argument positional calls would match two overloads. Only a pre-shard schema (its
-- enqueue heads still carry next_seq) has them, so this step is a no-op on a 1.0 schema.
DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_catalog.pg_attribute
                WHERE attrelid = 'awa.queue_enqueue_heads'::regclass
                  AND attname = 'next_seq' AND NOT attisdropped) THEN
        DROP FUNCTION IF EXISTS awa.insert_job_compat(text, text, jsonb, awa.job_state, smallint, smallint,
                                                      timestamptz, jsonb, text[], bytea, bit);
        DROP FUNCTION IF EXISTS awa.claim_ready_runtime(text, integer);
        DROP FUNCTION IF EXISTS awa.complete_jobs(bigint[], bigint[]);
        DROP FUNCTION IF EXISTS awa.fail_job(bigint, bigint, text);
        DROP FUNCTION IF EXISTS awa.fail_job_to_dlq(bigint, bigint, text);
        DROP FUNCTION IF EXISTS awa._take_attempt(bigint, bigint, text);
        DROP FUNCTION IF EXISTS awa.job_state_in_bitmask(bit, awa.job_state);
        DROP TYPE IF EXISTS awa.job_row;
        IF EXISTS (SELECT 1 FROM pg_catalog.pg_proc WHERE pronamespace = 'awa'::regnamespace) THEN
            RAISE EXCEPTION 'a 0.16 function survived the upgrade: %',
                (SELECT string_agg(oid::regprocedure::text, ', ') FROM pg_catalog.pg_proc
                  WHERE pronamespace = 'awa'::regnamespace)
                USING ERRCODE = '55000';
        END IF;
    END IF;
END
$$;

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

-- Step 6, receipts and the unsharded holds. A receipt records its lane's shard so it
-- completes and is rescued onto the right lane; its key (claim_slot, job_id, run_lease)
-- does not change, job_id being unique. deferred_jobs and dlq_entries stay unsharded and
-- keep a job's ordering key so promotion and DLQ retry route it back to its key's shard.
ALTER TABLE awa.lease_claims ADD COLUMN IF NOT EXISTS enqueue_shard smallint NOT NULL DEFAULT 0;
ALTER TABLE awa.deferred_jobs ADD COLUMN IF NOT EXISTS ordering_key bytea;
ALTER TABLE awa.dlq_entries ADD COLUMN IF NOT EXISTS ordering_key bytea;
-- Routing: the ordering-key hash, shard selection and lane creation.

-- Composite returned by the producer functions; same columns as the awa.jobs view.
CREATE TYPE awa.job_row AS (
    id bigint,
    kind text,
    queue text,
    args jsonb,
    state awa.job_state,
    priority smallint,
    attempt smallint,
    run_lease bigint,
    max_attempts smallint,
    run_at timestamptz,
    attempted_at timestamptz,
    finalized_at timestamptz,
    created_at timestamptz,
    metadata jsonb,
    tags text[],
    errors jsonb,
    unique_key bytea,
    unique_states bit(8),
    ordering_key bytea,
    enqueue_shard smallint,
    lane_seq bigint);

-- The 64-bit rolling hash of the key bytes, as a two's-complement bigint.
CREATE FUNCTION awa.ordering_key_hash(key bytea) RETURNS bigint
    AS 'MODULE_PATHNAME', 'awa_ordering_key_hash_bytea'
    LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE
    SET search_path = pg_catalog, pg_temp;

-- Same hash over the UTF-8 bytes of a text key, whatever the database encoding.
CREATE FUNCTION awa.ordering_key_hash(key text) RETURNS bigint
    AS 'MODULE_PATHNAME', 'awa_ordering_key_hash_text'
    LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE
    SET search_path = pg_catalog, pg_temp;

-- Shard of a key for a queue of `shards` lanes (1..64): unsigned hash mod shards.
CREATE FUNCTION awa.shard_for_ordering_key(key bytea, shards integer) RETURNS smallint
    AS 'MODULE_PATHNAME', 'awa_shard_for_ordering_key_bytea'
    LANGUAGE C IMMUTABLE PARALLEL SAFE
    SET search_path = pg_catalog, pg_temp;

CREATE FUNCTION awa.shard_for_ordering_key(key text, shards integer) RETURNS smallint
    AS 'MODULE_PATHNAME', 'awa_shard_for_ordering_key_text'
    LANGUAGE C IMMUTABLE PARALLEL SAFE
    SET search_path = pg_catalog, pg_temp;

-- Current enqueue width of a queue as this transaction sees it (no queue_meta row = 1).
CREATE FUNCTION awa.queue_enqueue_shards(p_queue text) RETURNS smallint
    AS 'MODULE_PATHNAME', 'awa_queue_enqueue_shards'
    LANGUAGE C VOLATILE STRICT PARALLEL UNSAFE
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp SET jit = off;

-- The routing rule: keyed -> hash mod S; keyless -> rotor, sticky per (queue, priority)
-- for the rest of the transaction.
CREATE FUNCTION awa.shard_for_enqueue(p_queue text, p_priority smallint, p_ordering_key bytea DEFAULT NULL)
    RETURNS smallint
    AS 'MODULE_PATHNAME', 'awa_shard_for_enqueue'
    LANGUAGE C VOLATILE PARALLEL UNSAFE
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp SET jit = off;

-- Name of a lane's sequence: md5 of 'queue:priority:shard' (the reference's naming).
CREATE FUNCTION awa.lane_sequence_name(p_queue text, p_priority smallint, p_enqueue_shard smallint)
    RETURNS text
    LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
    SET search_path = pg_catalog, pg_temp
    RETURN 'queue_enqueue_seq_' || left(md5(p_queue || ':' || p_priority || ':' || p_enqueue_shard), 32);

-- Advisory-lock key of a lane: held by every reservation until its transaction ends;
-- lane creation takes it first, so concurrent first use of a lane cannot fail.
CREATE FUNCTION awa.lane_lock_key(p_queue text, p_priority smallint, p_enqueue_shard smallint)
    RETURNS bigint
    LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
    SET search_path = pg_catalog, pg_temp
    RETURN hashtextextended('awa.' || quote_ident(awa.lane_sequence_name(p_queue, p_priority, p_enqueue_shard)), 0);

-- Create a lane's head rows and sequence if missing, under the lane lock (cold path:
-- called by the C++ reservation only when its backend cache has no entry for the lane).
CREATE FUNCTION awa._ensure_lane(p_queue text, p_priority smallint, p_enqueue_shard smallint,
                                 OUT seq_oid oid, OUT lock_key bigint, OUT created boolean)
    LANGUAGE plpgsql VOLATILE STRICT PARALLEL UNSAFE
    SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_name text := awa.lane_sequence_name(p_queue, p_priority, p_enqueue_shard);
BEGIN
    lock_key := awa.lane_lock_key(p_queue, p_priority, p_enqueue_shard);
    PERFORM pg_advisory_xact_lock(lock_key);
    created := false;
    IF NOT EXISTS (SELECT 1 FROM awa.queue_enqueue_heads h
                    WHERE h.queue = p_queue AND h.priority = p_priority
                      AND h.enqueue_shard = p_enqueue_shard) THEN
        IF to_regclass('awa.' || quote_ident(v_name)) IS NULL THEN
            EXECUTE format('CREATE SEQUENCE awa.%I AS bigint START 1 MINVALUE 1 CACHE 1 '
                           'OWNED BY awa.queue_enqueue_heads.seq_name', v_name);
        END IF;
        INSERT INTO awa.queue_enqueue_heads (queue, priority, enqueue_shard, seq_name)
        VALUES (p_queue, p_priority, p_enqueue_shard, v_name);
        INSERT INTO awa.queue_claim_heads (queue, priority, enqueue_shard)
        VALUES (p_queue, p_priority, p_enqueue_shard)
        ON CONFLICT DO NOTHING;
        created := true;
    END IF;
    seq_oid := to_regclass('awa.' || quote_ident(v_name))::oid;
    IF seq_oid IS NULL THEN
        RAISE EXCEPTION 'missing enqueue lane sequence for queue %, priority %, shard %',
            p_queue, p_priority, p_enqueue_shard USING ERRCODE = '55000';
    END IF;
END
$$;

-- Reserve a contiguous block [start, start + count) of a lane's sequence under the lane
-- lock held to commit; count <= 0 peeks at the next value without reserving.
CREATE FUNCTION awa.reserve_enqueue_seq(p_queue text, p_priority smallint, p_enqueue_shard smallint, p_count bigint)
    RETURNS bigint
    AS 'MODULE_PATHNAME', 'awa_reserve_enqueue_seq'
    LANGUAGE C VOLATILE PARALLEL UNSAFE
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp SET jit = off;

-- Own-transaction changes of queue_meta must be seen by this transaction's next enqueue.
CREATE FUNCTION awa._queue_meta_changed() RETURNS trigger
    AS 'MODULE_PATHNAME', 'awa_queue_meta_changed'
    LANGUAGE C VOLATILE PARALLEL UNSAFE
    SET search_path = pg_catalog, pg_temp;
CREATE TRIGGER queue_meta_changed AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON awa.queue_meta
    FOR EACH STATEMENT EXECUTE FUNCTION awa._queue_meta_changed();
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

-- Producer functions (C++: src/enqueue_api.cpp).

-- Enqueue one job (the reference's 12-argument signature). 'available' jobs go to the
-- ready plane on their routed lane ('available' with a future run_at becomes
-- 'scheduled'); 'scheduled' and 'retryable' go to deferred_jobs, keeping the key.
CREATE FUNCTION awa.insert_job_compat(
    p_kind text,
    p_queue text DEFAULT 'default',
    p_args jsonb DEFAULT '{}',
    p_state awa.job_state DEFAULT 'available',
    p_priority smallint DEFAULT 2,
    p_max_attempts smallint DEFAULT 25,
    p_run_at timestamptz DEFAULT NULL,
    p_metadata jsonb DEFAULT '{}',
    p_tags text[] DEFAULT '{}',
    p_unique_key bytea DEFAULT NULL,
    p_unique_states bit(8) DEFAULT NULL,
    p_ordering_key bytea DEFAULT NULL)
    RETURNS awa.job_row
    AS 'MODULE_PATHNAME', 'awa_insert_job_compat'
    LANGUAGE C VOLATILE PARALLEL UNSAFE
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp SET jit = off;

-- Enqueue a batch into one queue; arrays are NULL or as long as p_kinds. One rotor pick
-- per (queue, priority) for keyless rows, one reservation per lane in sorted lane order,
-- one multi-row insert. Returns the job ids in input order.
CREATE FUNCTION awa.insert_jobs(
    p_queue text,
    p_kinds text[],
    p_args jsonb[] DEFAULT NULL,
    p_priorities smallint[] DEFAULT NULL,
    p_run_ats timestamptz[] DEFAULT NULL,
    p_ordering_keys bytea[] DEFAULT NULL,
    p_max_attempts smallint[] DEFAULT NULL,
    p_metadata jsonb[] DEFAULT NULL,
    p_unique_keys bytea[] DEFAULT NULL,
    p_unique_states bit(8)[] DEFAULT NULL)
    RETURNS bigint[]
    AS 'MODULE_PATHNAME', 'awa_insert_jobs'
    LANGUAGE C VOLATILE PARALLEL UNSAFE
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp SET jit = off;

-- Put existing jobs back on the ready plane (promotion, DLQ retry, aging, moves): ids,
-- attempts and keys are kept; the destination queue's current width picks the shard.
CREATE FUNCTION awa._enqueue_ready(p_rows awa.deferred_jobs[]) RETURNS integer
    AS 'MODULE_PATHNAME', 'awa_enqueue_ready'
    LANGUAGE C VOLATILE PARALLEL UNSAFE
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp SET jit = off;
-- Worker functions of the hot path (C++: src/claim.cpp, src/lifecycle.cpp, src/wakeup.cpp).
-- Their statements are planned once per backend (force_generic_plan: planning a claim costs
-- more than running it) and never by sequential scan: a plan made while the receipt and
-- terminal partitions were empty and unanalysed must not scan them whole once they hold
-- millions of rows (every lookup here has an index).

-- Claim up to p_max_batch jobs from one lane of the queue, in lane order. lane_priority
-- is the lane's priority (identity); priority is the aged, effective priority.
CREATE FUNCTION awa.claim_ready_runtime(
    p_queue text,
    p_max_batch bigint,
    p_deadline_secs double precision DEFAULT 0,
    p_aging_secs double precision DEFAULT 0)
    RETURNS TABLE (
        ready_slot integer,
        ready_generation bigint,
        lane_seq bigint,
        enqueue_shard smallint,
        lease_slot integer,
        lease_generation bigint,
        claim_slot integer,
        receipt_id bigint,
        job_id bigint,
        kind text,
        queue text,
        args jsonb,
        lane_priority smallint,
        priority smallint,
        attempt smallint,
        run_lease bigint,
        max_attempts smallint,
        run_at timestamptz,
        heartbeat_at timestamptz,
        deadline_at timestamptz,
        attempted_at timestamptz,
        created_at timestamptz,
        unique_key bytea,
        unique_states bit(8),
        ordering_key bytea,
        payload jsonb)
    AS 'MODULE_PATHNAME', 'awa_claim_ready_runtime'
    LANGUAGE C VOLATILE PARALLEL UNSAFE ROWS 10
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp SET jit = off
    SET plan_cache_mode = force_generic_plan SET enable_seqscan = off;

-- Complete running attempts; returns the (job_id, run_lease) pairs this call completed.
CREATE FUNCTION awa.complete_jobs(p_job_ids bigint[], p_run_leases bigint[])
    RETURNS TABLE (job_id bigint, run_lease bigint)
    AS 'MODULE_PATHNAME', 'awa_complete_jobs'
    LANGUAGE C VOLATILE PARALLEL UNSAFE ROWS 10
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp SET jit = off
    SET plan_cache_mode = force_generic_plan SET enable_seqscan = off;

-- Sleep until a producing transaction of the queue commits or the timeout passes.
CREATE FUNCTION awa.wait_for_jobs(p_queue text, p_timeout_ms integer) RETURNS boolean
    AS 'MODULE_PATHNAME', 'awa_wait_for_jobs'
    LANGUAGE C VOLATILE PARALLEL UNSAFE
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp SET jit = off;
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
-- Attempt exits other than success, heartbeats, rescue and promotion (SQL; D9).
-- Exits and heartbeats look attempts up by (job_id, run_lease) and never by sequential scan
-- (enable_seqscan = off), so a plan cached while the receipt partitions were empty cannot
-- turn into a scan of millions of receipts.

-- Whether a bit(8) unique-state mask holds a state (leftmost bit = scheduled).
CREATE FUNCTION awa.job_state_in_bitmask(p_mask bit(8), p_state awa.job_state) RETURNS boolean
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    SET search_path = pg_catalog, pg_temp
    RETURN get_bit(p_mask, array_position(enum_range(NULL::awa.job_state), p_state) - 1) = 1;

-- Retry backoff: 2^attempt seconds plus up to 25 % jitter, at most 24 hours.
CREATE FUNCTION awa.backoff_duration(p_attempt integer, p_max_attempts integer) RETURNS interval
    LANGUAGE sql VOLATILE PARALLEL SAFE
    SET search_path = pg_catalog, pg_temp
    RETURN least(make_interval(secs => power(2, least(p_attempt, 20)) * (1 + random() * 0.25)), interval '24 hours');

-- Move a job's unique claim with its state: released when the new state leaves the mask,
-- taken when it enters it (a conflicting live claim keeps its key).
CREATE FUNCTION awa._sync_unique_claim(p_job_id bigint, p_key bytea, p_mask bit(8),
                                       p_old awa.job_state, p_new awa.job_state) RETURNS void
    LANGUAGE plpgsql VOLATILE
    SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF p_key IS NULL OR p_mask IS NULL THEN
        RETURN;
    END IF;
    IF awa.job_state_in_bitmask(p_mask, p_old) AND NOT awa.job_state_in_bitmask(p_mask, p_new) THEN
        DELETE FROM awa.job_unique_claims WHERE job_id = p_job_id;
    ELSIF NOT awa.job_state_in_bitmask(p_mask, p_old) AND awa.job_state_in_bitmask(p_mask, p_new) THEN
        INSERT INTO awa.job_unique_claims (unique_key, job_id) VALUES (p_key, p_job_id)
        ON CONFLICT (unique_key) DO NOTHING;
    END IF;
END
$$;

-- A running attempt taken out of the running set, with its ready row's body.
CREATE TYPE awa.taken_attempt AS (
    job_id bigint, kind text, queue text, args jsonb, priority smallint, attempt smallint,
    run_lease bigint, max_attempts smallint, run_at timestamptz, attempted_at timestamptz,
    created_at timestamptz, unique_key bytea, unique_states bit(8), ordering_key bytea,
    metadata jsonb, tags text[], errors jsonb,
    ready_slot integer, ready_generation bigint, enqueue_shard smallint, lane_seq bigint);

-- Take the open attempt (job_id, run_lease): close its receipt with p_outcome (exactly
-- one closer wins) or delete its lease. NULL when the attempt is not open (stale writer).
-- The ready row is joined on the full lane identity, shard included.
CREATE FUNCTION awa._take_attempt(p_job_id bigint, p_run_lease bigint, p_outcome text)
    RETURNS awa.taken_attempt
    LANGUAGE plpgsql VOLATILE
    SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    t awa.taken_attempt;
BEGIN
    WITH c AS (
        SELECT * FROM awa.lease_claims
         WHERE job_id = p_job_id AND run_lease = p_run_lease AND materialized_at IS NULL),
    closed AS (
        INSERT INTO awa.lease_claim_closures (claim_slot, job_id, run_lease, outcome)
        SELECT claim_slot, job_id, run_lease, p_outcome FROM c
        ON CONFLICT DO NOTHING RETURNING claim_slot)
    SELECT r.job_id, r.kind, r.queue, r.args, c.priority, c.attempt, c.run_lease, r.max_attempts,
           r.run_at, c.claimed_at, r.created_at, r.unique_key, r.unique_states, r.ordering_key,
           r.metadata, r.tags, r.errors, c.ready_slot, c.ready_generation, c.enqueue_shard, c.lane_seq
      INTO t
      FROM c JOIN closed USING (claim_slot)
      JOIN awa.ready_entries r
        ON r.ready_slot = c.ready_slot AND r.queue = c.queue AND r.priority = c.priority
       AND r.enqueue_shard = c.enqueue_shard AND r.lane_seq = c.lane_seq;
    IF t.job_id IS NULL THEN
        WITH l AS (
            DELETE FROM awa.leases
             WHERE job_id = p_job_id AND run_lease = p_run_lease
               AND state IN ('running', 'waiting_external')
            RETURNING *)
        SELECT r.job_id, r.kind, r.queue, r.args, l.priority, l.attempt, l.run_lease, r.max_attempts,
               r.run_at, l.attempted_at, r.created_at, r.unique_key, r.unique_states, r.ordering_key,
               r.metadata, r.tags, r.errors, l.ready_slot, l.ready_generation, l.enqueue_shard, l.lane_seq
          INTO t
          FROM l JOIN awa.ready_entries r
            ON r.ready_slot = l.ready_slot AND r.queue = l.queue AND r.priority = l.priority
           AND r.enqueue_shard = l.enqueue_shard AND r.lane_seq = l.lane_seq;
    END IF;
    IF t.job_id IS NULL THEN
        RETURN NULL;
    END IF;
    DELETE FROM awa.attempt_state WHERE job_id = p_job_id AND run_lease = p_run_lease;
    RETURN t;
END
$$;

-- Errors array with one more entry {error, attempt, at[, terminal]}.
CREATE FUNCTION awa._append_error(p_errors jsonb, p_error text, p_attempt integer, p_terminal boolean)
    RETURNS jsonb
    LANGUAGE sql STABLE PARALLEL SAFE
    SET search_path = pg_catalog, pg_temp
    RETURN coalesce(p_errors, '[]'::jsonb) || jsonb_build_array(
        jsonb_build_object('error', p_error, 'attempt', p_attempt, 'at', clock_timestamp())
        || CASE WHEN p_terminal THEN '{"terminal": true}'::jsonb ELSE '{}'::jsonb END);

-- A taken attempt to deferred_jobs (retryable or scheduled) at p_run_at.
CREATE FUNCTION awa._defer_attempt(t awa.taken_attempt, p_state awa.job_state, p_run_at timestamptz,
                                   p_attempt smallint, p_errors jsonb) RETURNS void
    LANGUAGE plpgsql VOLATILE
    SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    INSERT INTO awa.deferred_jobs (job_id, kind, queue, args, state, priority, attempt, run_lease,
        max_attempts, run_at, attempted_at, finalized_at, created_at, unique_key, unique_states,
        ordering_key, metadata, tags, errors)
    VALUES (t.job_id, t.kind, t.queue, t.args, p_state, t.priority, p_attempt, t.run_lease,
        t.max_attempts, p_run_at, t.attempted_at,
        CASE WHEN p_state = 'retryable' THEN clock_timestamp() END, t.created_at, t.unique_key,
        t.unique_states, t.ordering_key, t.metadata, t.tags, p_errors);
    PERFORM awa._sync_unique_claim(t.job_id, t.unique_key, t.unique_states, 'running', p_state);
END
$$;

-- A taken attempt to done_entries on its own lane identity (failed or cancelled).
CREATE FUNCTION awa._finish_attempt(t awa.taken_attempt, p_state awa.job_state, p_errors jsonb) RETURNS void
    LANGUAGE plpgsql VOLATILE
    SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    INSERT INTO awa.done_entries (ready_slot, ready_generation, job_id, queue, priority, enqueue_shard,
        lane_seq, state, attempt, run_lease, attempted_at, errors)
    VALUES (t.ready_slot, t.ready_generation, t.job_id, t.queue, t.priority, t.enqueue_shard,
        t.lane_seq, p_state, t.attempt, t.run_lease, t.attempted_at, p_errors);
    PERFORM awa._sync_unique_claim(t.job_id, t.unique_key, t.unique_states, 'running', p_state);
END
$$;

-- Fail an attempt: retryable with backoff while attempts remain, else failed.
-- Returns the new state, or NULL when the attempt was not open (stale writer).
CREATE FUNCTION awa.fail_job(p_job_id bigint, p_run_lease bigint, p_error text DEFAULT NULL,
                             p_retry_in interval DEFAULT NULL)
    RETURNS awa.job_state
    LANGUAGE plpgsql VOLATILE
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp SET jit = off SET enable_seqscan = off
AS $$
DECLARE
    t awa.taken_attempt;
BEGIN
    IF p_job_id IS NULL OR p_run_lease IS NULL THEN
        RAISE EXCEPTION 'p_job_id and p_run_lease must not be null' USING ERRCODE = '22004';
    END IF;
    IF p_retry_in < interval '0' THEN
        RAISE EXCEPTION 'p_retry_in must not be negative' USING ERRCODE = '22023';
    END IF;
    t := awa._take_attempt(p_job_id, p_run_lease, 'retryable');
    IF t.job_id IS NULL THEN
        RETURN NULL;
    END IF;
    IF t.attempt >= t.max_attempts THEN
        PERFORM awa._finish_attempt(t, 'failed', awa._append_error(t.errors, coalesce(p_error, 'failed'), t.attempt, true));
        PERFORM awa._count_failed(t.queue, t.enqueue_shard);
        RETURN 'failed';
    END IF;
    PERFORM awa._defer_attempt(t, 'retryable',
        clock_timestamp() + coalesce(p_retry_in, awa.backoff_duration(t.attempt, t.max_attempts)),
        t.attempt, awa._append_error(t.errors, coalesce(p_error, 'failed'), t.attempt, false));
    RETURN 'retryable';
END
$$;

-- Fail an attempt straight into the dead-letter queue (ordering key kept).
CREATE FUNCTION awa.fail_job_to_dlq(p_job_id bigint, p_run_lease bigint, p_error text DEFAULT NULL,
                                    p_reason text DEFAULT 'failed')
    RETURNS boolean
    LANGUAGE plpgsql VOLATILE
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp SET jit = off SET enable_seqscan = off
AS $$
DECLARE
    t awa.taken_attempt;
BEGIN
    IF p_job_id IS NULL OR p_run_lease IS NULL OR p_reason IS NULL THEN
        RAISE EXCEPTION 'p_job_id, p_run_lease and p_reason must not be null' USING ERRCODE = '22004';
    END IF;
    t := awa._take_attempt(p_job_id, p_run_lease, 'dlq');
    IF t.job_id IS NULL THEN
        RETURN false;
    END IF;
    INSERT INTO awa.dlq_entries (job_id, kind, queue, args, state, priority, attempt, run_lease,
        max_attempts, run_at, attempted_at, created_at, unique_key, unique_states, ordering_key,
        metadata, tags, errors, dlq_reason, original_run_lease)
    VALUES (t.job_id, t.kind, t.queue, t.args, 'failed', t.priority, t.attempt, t.run_lease,
        t.max_attempts, t.run_at, t.attempted_at, t.created_at, t.unique_key, t.unique_states,
        t.ordering_key, t.metadata, t.tags,
        awa._append_error(t.errors, coalesce(p_error, p_reason), t.attempt, true), p_reason, t.run_lease);
    PERFORM awa._sync_unique_claim(t.job_id, t.unique_key, t.unique_states, 'running', 'failed');
    PERFORM awa._count_failed(t.queue, t.enqueue_shard);
    RETURN true;
END
$$;

-- Retry an attempt after p_delay without recording an error (attempt is consumed).
CREATE FUNCTION awa.retry_job_after(p_job_id bigint, p_run_lease bigint, p_delay interval)
    RETURNS boolean
    LANGUAGE plpgsql VOLATILE
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp SET jit = off SET enable_seqscan = off
AS $$
DECLARE
    t awa.taken_attempt;
BEGIN
    IF p_job_id IS NULL OR p_run_lease IS NULL OR p_delay IS NULL THEN
        RAISE EXCEPTION 'p_job_id, p_run_lease and p_delay must not be null' USING ERRCODE = '22004';
    END IF;
    IF p_delay < interval '0' THEN
        RAISE EXCEPTION 'p_delay must not be negative' USING ERRCODE = '22023';
    END IF;
    t := awa._take_attempt(p_job_id, p_run_lease, 'retryable');
    IF t.job_id IS NULL THEN
        RETURN false;
    END IF;
    PERFORM awa._defer_attempt(t, 'retryable', clock_timestamp() + p_delay, t.attempt, t.errors);
    RETURN true;
END
$$;

-- Snooze an attempt: scheduled again after p_delay; the attempt is not consumed.
CREATE FUNCTION awa.snooze_job(p_job_id bigint, p_run_lease bigint, p_delay interval)
    RETURNS boolean
    LANGUAGE plpgsql VOLATILE
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp SET jit = off SET enable_seqscan = off
AS $$
DECLARE
    t awa.taken_attempt;
BEGIN
    IF p_job_id IS NULL OR p_run_lease IS NULL OR p_delay IS NULL THEN
        RAISE EXCEPTION 'p_job_id, p_run_lease and p_delay must not be null' USING ERRCODE = '22004';
    END IF;
    IF p_delay < interval '0' THEN
        RAISE EXCEPTION 'p_delay must not be negative' USING ERRCODE = '22023';
    END IF;
    t := awa._take_attempt(p_job_id, p_run_lease, 'snoozed');
    IF t.job_id IS NULL THEN
        RETURN false;
    END IF;
    PERFORM awa._defer_attempt(t, 'scheduled', clock_timestamp() + p_delay,
                               greatest(t.attempt - 1, 0)::smallint, t.errors);
    RETURN true;
END
$$;

-- Record heartbeats (and optional progress) of open attempts; returns how many are alive.
CREATE FUNCTION awa.heartbeat_jobs(p_job_ids bigint[], p_run_leases bigint[]) RETURNS integer
    LANGUAGE plpgsql VOLATILE
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp SET jit = off SET enable_seqscan = off
AS $$
DECLARE
    v_alive integer := 0;
    v_leased integer := 0;
BEGIN
    IF p_job_ids IS NULL OR p_run_leases IS NULL THEN
        RAISE EXCEPTION 'p_job_ids and p_run_leases must not be null' USING ERRCODE = '22004';
    END IF;
    IF cardinality(p_job_ids) <> cardinality(p_run_leases) THEN
        RAISE EXCEPTION 'p_job_ids and p_run_leases must have the same number of elements'
            USING ERRCODE = '22023';
    END IF;
    WITH input AS (SELECT DISTINCT * FROM unnest(p_job_ids, p_run_leases) AS t(job_id, run_lease)),
    open_receipts AS (
        SELECT i.job_id, i.run_lease FROM input i
         WHERE EXISTS (SELECT 1 FROM awa.lease_claims c
                        WHERE c.job_id = i.job_id AND c.run_lease = i.run_lease AND c.materialized_at IS NULL
                          AND NOT EXISTS (SELECT 1 FROM awa.lease_claim_closures x
                                           WHERE x.claim_slot = c.claim_slot AND x.job_id = c.job_id
                                             AND x.run_lease = c.run_lease))),
    up AS (
        INSERT INTO awa.attempt_state (job_id, run_lease, heartbeat_at, updated_at)
        SELECT job_id, run_lease, clock_timestamp(), clock_timestamp() FROM open_receipts
        ON CONFLICT (job_id, run_lease) DO UPDATE SET heartbeat_at = EXCLUDED.heartbeat_at,
                                                     updated_at = EXCLUDED.updated_at
        RETURNING 1)
    SELECT count(*) INTO v_alive FROM up;
    UPDATE awa.leases l SET heartbeat_at = clock_timestamp()
      FROM unnest(p_job_ids, p_run_leases) AS i(job_id, run_lease)
     WHERE l.job_id = i.job_id AND l.run_lease = i.run_lease AND l.state IN ('running', 'waiting_external');
    GET DIAGNOSTICS v_leased = ROW_COUNT;
    RETURN v_alive + v_leased;
END
$$;

-- Rescue attempts whose last heartbeat (or claim) is older than p_stale: back to
-- deferred_jobs as retryable with backoff. Returns how many were rescued.
CREATE FUNCTION awa.rescue_stale_heartbeats(p_stale interval, p_limit integer DEFAULT 500)
    RETURNS integer
    LANGUAGE plpgsql VOLATILE
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp SET jit = off
AS $$
DECLARE
    v_cutoff timestamptz;
    v_count integer := 0;
    r record;
    t awa.taken_attempt;
BEGIN
    IF p_stale IS NULL OR p_limit IS NULL THEN
        RAISE EXCEPTION 'p_stale and p_limit must not be null' USING ERRCODE = '22004';
    END IF;
    IF p_stale <= interval '0' OR p_limit < 1 THEN
        RAISE EXCEPTION 'p_stale must be positive and p_limit at least 1' USING ERRCODE = '22023';
    END IF;
    v_cutoff := clock_timestamp() - p_stale;
    FOR r IN
        SELECT c.job_id, c.run_lease FROM awa.lease_claims c
          LEFT JOIN awa.attempt_state a ON a.job_id = c.job_id AND a.run_lease = c.run_lease
         WHERE c.materialized_at IS NULL
           AND coalesce(a.heartbeat_at, c.claimed_at) < v_cutoff
           AND NOT EXISTS (SELECT 1 FROM awa.lease_claim_closures x
                            WHERE x.claim_slot = c.claim_slot AND x.job_id = c.job_id AND x.run_lease = c.run_lease)
        UNION ALL
        SELECT l.job_id, l.run_lease FROM awa.leases l
         WHERE l.state = 'running' AND l.heartbeat_at < v_cutoff
        LIMIT p_limit
    LOOP
        t := awa._take_attempt(r.job_id, r.run_lease, 'rescued');
        CONTINUE WHEN t.job_id IS NULL;
        PERFORM awa._defer_attempt(t, 'retryable',
            clock_timestamp() + awa.backoff_duration(t.attempt, t.max_attempts), t.attempt,
            awa._append_error(t.errors, 'heartbeat stale: worker presumed dead', t.attempt, false));
        v_count := v_count + 1;
    END LOOP;
    RETURN v_count;
END
$$;

-- Rescue attempts past their hard deadline: back to deferred_jobs as retryable.
CREATE FUNCTION awa.rescue_expired_deadlines(p_limit integer DEFAULT 500)
    RETURNS integer
    LANGUAGE plpgsql VOLATILE
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp SET jit = off
AS $$
DECLARE
    v_now timestamptz := clock_timestamp();
    v_count integer := 0;
    r record;
    t awa.taken_attempt;
BEGIN
    PERFORM awa._require(p_limit IS NULL, 'p_limit');
    PERFORM awa._require_at_least(p_limit, 1, 'p_limit');
    FOR r IN
        SELECT c.job_id, c.run_lease FROM awa.lease_claims c
         WHERE c.deadline_at IS NOT NULL AND c.deadline_at < v_now AND c.materialized_at IS NULL
           AND NOT EXISTS (SELECT 1 FROM awa.lease_claim_closures x
                            WHERE x.claim_slot = c.claim_slot AND x.job_id = c.job_id AND x.run_lease = c.run_lease)
        UNION ALL
        SELECT l.job_id, l.run_lease FROM awa.leases l
         WHERE l.deadline_at IS NOT NULL AND l.deadline_at < v_now AND l.state = 'running'
        LIMIT p_limit
    LOOP
        t := awa._take_attempt(r.job_id, r.run_lease, 'deadline_expired');
        CONTINUE WHEN t.job_id IS NULL;
        PERFORM awa._defer_attempt(t, 'retryable',
            clock_timestamp() + awa.backoff_duration(t.attempt, t.max_attempts), t.attempt,
            awa._append_error(t.errors, 'hard deadline exceeded', t.attempt, false));
        v_count := v_count + 1;
    END LOOP;
    RETURN v_count;
END
$$;

-- Promote due scheduled/retryable jobs of unpaused queues into the ready plane with the
-- queue's current width (keyed jobs to their key's shard). Returns how many moved.
CREATE FUNCTION awa.promote_due(p_limit integer DEFAULT 1000)
    RETURNS integer
    LANGUAGE plpgsql VOLATILE
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp SET jit = off
AS $$
DECLARE
    v_rows awa.deferred_jobs[];
    d awa.deferred_jobs;
BEGIN
    PERFORM awa._require(p_limit IS NULL, 'p_limit');
    PERFORM awa._require_at_least(p_limit, 1, 'p_limit');
    WITH due AS (
        SELECT j.job_id FROM awa.deferred_jobs j
         WHERE j.run_at <= clock_timestamp()
           AND NOT EXISTS (SELECT 1 FROM awa.queue_meta m WHERE m.queue = j.queue AND m.paused)
         ORDER BY j.run_at, j.priority, j.job_id
         LIMIT p_limit
         FOR UPDATE SKIP LOCKED),
    moved AS (DELETE FROM awa.deferred_jobs j USING due WHERE j.job_id = due.job_id RETURNING j.*)
    SELECT array_agg(m ORDER BY m.run_at, m.priority, m.job_id) INTO v_rows FROM moved m;
    IF v_rows IS NULL THEN
        RETURN 0;
    END IF;
    FOREACH d IN ARRAY v_rows LOOP
        PERFORM awa._sync_unique_claim(d.job_id, d.unique_key, d.unique_states, d.state, 'available');
    END LOOP;
    RETURN awa._enqueue_ready(v_rows);
END
$$;
-- Maintenance (D4, D9): ring rotation and prune, and one entry point that runs every
-- periodic task. Space is reclaimed by TRUNCATE of a whole sealed slot, never by
-- per-job DELETE + VACUUM. The background worker (src/worker.cpp) calls
-- awa.run_maintenance() when awa_shard.maintenance_database is set.

-- Rotate the queue ring: seal the current slot and make the next one current, when the
-- next slot is empty and the current one holds rows. Returns rotated/skipped_busy/skipped_idle.
CREATE FUNCTION awa.rotate_queue_ring() RETURNS text
    LANGUAGE plpgsql VOLATILE
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp SET jit = off
AS $$
DECLARE
    st awa.queue_ring_state;
    v_next integer;
BEGIN
    SELECT * INTO st FROM awa.queue_ring_state FOR UPDATE;
    v_next := (st.current_slot + 1) % st.slot_count;
    IF NOT EXISTS (SELECT 1 FROM awa.ready_entries WHERE ready_slot = st.current_slot) THEN
        RETURN 'skipped_idle';
    END IF;
    IF EXISTS (SELECT 1 FROM awa.ready_entries WHERE ready_slot = v_next)
       OR EXISTS (SELECT 1 FROM awa.done_entries WHERE ready_slot = v_next) THEN
        RETURN 'skipped_busy';
    END IF;
    UPDATE awa.queue_ring_state SET current_slot = v_next, generation = st.generation + 1;
    UPDATE awa.queue_ring_slots SET generation = st.generation + 1 WHERE slot = v_next;
    RETURN 'rotated';
END
$$;

-- Prune the oldest sealed queue slot when nothing in it is pending: no ready row at or
-- after its own lane's cursor (matched on queue, priority AND enqueue_shard), no open
-- receipt and no lease referencing it. Retained failed rows move to the current slot
-- with their body; everything else of the slot is truncated. Returns pruned/skipped_*.
CREATE FUNCTION awa.prune_queue_ring(p_lock_timeout_ms integer DEFAULT 1000) RETURNS text
    LANGUAGE plpgsql VOLATILE
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp SET jit = off
AS $$
DECLARE
    st awa.queue_ring_state;
    v_slot integer;
    v_gen bigint;
BEGIN
    PERFORM awa._require(p_lock_timeout_ms IS NULL, 'p_lock_timeout_ms');
    PERFORM awa._require_at_least(p_lock_timeout_ms, 1, 'p_lock_timeout_ms');
    SELECT * INTO st FROM awa.queue_ring_state;
    SELECT s.slot, s.generation INTO v_slot, v_gen FROM awa.queue_ring_slots s
     WHERE s.generation >= 0 AND s.slot <> st.current_slot
     ORDER BY s.generation LIMIT 1;
    IF v_slot IS NULL THEN
        RETURN 'skipped_none_sealed';
    END IF;
    -- Writers read queue_ring_state in their insert statement and hold that lock to commit:
    -- taking it exclusively waits out every writer that may still target the sealed slot.
    PERFORM set_config('lock_timeout', p_lock_timeout_ms || 'ms', true);
    BEGIN
        LOCK TABLE awa.queue_ring_state IN ACCESS EXCLUSIVE MODE;
        EXECUTE format('LOCK TABLE awa.%I, awa.%I IN ACCESS EXCLUSIVE MODE',
                       'ready_entries_' || v_slot, 'done_entries_' || v_slot);
    EXCEPTION WHEN lock_not_available THEN
        RETURN 'skipped_locked';
    END;
    IF EXISTS (SELECT 1 FROM awa.ready_entries r
                 JOIN awa.queue_claim_heads h
                   ON h.queue = r.queue AND h.priority = r.priority AND h.enqueue_shard = r.enqueue_shard
                WHERE r.ready_slot = v_slot AND r.lane_seq >= h.claim_seq) THEN
        RETURN 'skipped_pending_ready';
    END IF;
    IF EXISTS (SELECT 1 FROM awa.lease_claims c
                WHERE c.ready_slot = v_slot
                  AND NOT EXISTS (SELECT 1 FROM awa.lease_claim_closures x
                                   WHERE x.claim_slot = c.claim_slot AND x.job_id = c.job_id
                                     AND x.run_lease = c.run_lease))
       OR EXISTS (SELECT 1 FROM awa.leases l WHERE l.ready_slot = v_slot) THEN
        RETURN 'skipped_running';
    END IF;
    INSERT INTO awa.done_entries (ready_slot, ready_generation, job_id, queue, priority, enqueue_shard,
        lane_seq, state, attempt, run_lease, attempted_at, finalized_at, kind, args, max_attempts, run_at,
        created_at, unique_key, unique_states, ordering_key, metadata, tags, errors)
    SELECT st.current_slot, st.generation, d.job_id, d.queue, d.priority, d.enqueue_shard, d.lane_seq,
           d.state, d.attempt, d.run_lease, d.attempted_at, d.finalized_at,
           coalesce(d.kind, r.kind), coalesce(d.args, r.args), coalesce(d.max_attempts, r.max_attempts),
           coalesce(d.run_at, r.run_at), coalesce(d.created_at, r.created_at),
           coalesce(d.unique_key, r.unique_key), coalesce(d.unique_states, r.unique_states),
           coalesce(d.ordering_key, r.ordering_key), coalesce(d.metadata, r.metadata),
           coalesce(d.tags, r.tags), d.errors
      FROM awa.done_entries d
      LEFT JOIN awa.ready_entries r
        ON r.ready_slot = d.ready_slot AND r.queue = d.queue AND r.priority = d.priority
       AND r.enqueue_shard = d.enqueue_shard AND r.lane_seq = d.lane_seq
     WHERE d.ready_slot = v_slot AND d.state = 'failed';
    EXECUTE format('TRUNCATE awa.%I, awa.%I', 'ready_entries_' || v_slot, 'done_entries_' || v_slot);
    UPDATE awa.queue_ring_slots SET generation = -1 WHERE slot = v_slot;
    RETURN 'pruned';
END
$$;

-- Rotate the claim ring (receipts) or the lease ring when the next slot is empty.
CREATE FUNCTION awa.rotate_attempt_ring(p_ring text) RETURNS text
    LANGUAGE plpgsql VOLATILE
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp SET jit = off
AS $$
DECLARE
    v_slot integer;
    v_count integer;
    v_gen bigint;
    v_next integer;
    v_busy boolean;
BEGIN
    PERFORM awa._require(p_ring IS NULL, 'p_ring');
    IF p_ring = 'claim' THEN
        SELECT current_slot, slot_count, generation INTO v_slot, v_count, v_gen FROM awa.claim_ring_state FOR UPDATE;
        v_next := (v_slot + 1) % v_count;
        IF NOT EXISTS (SELECT 1 FROM awa.lease_claims WHERE claim_slot = v_slot) THEN
            RETURN 'skipped_idle';
        END IF;
        v_busy := EXISTS (SELECT 1 FROM awa.lease_claims WHERE claim_slot = v_next)
               OR EXISTS (SELECT 1 FROM awa.lease_claim_closures WHERE claim_slot = v_next);
        IF v_busy THEN RETURN 'skipped_busy'; END IF;
        UPDATE awa.claim_ring_state SET current_slot = v_next, generation = v_gen + 1;
        UPDATE awa.claim_ring_slots SET generation = v_gen + 1 WHERE slot = v_next;
    ELSIF p_ring = 'lease' THEN
        SELECT current_slot, slot_count, generation INTO v_slot, v_count, v_gen FROM awa.lease_ring_state FOR UPDATE;
        v_next := (v_slot + 1) % v_count;
        IF NOT EXISTS (SELECT 1 FROM awa.leases WHERE lease_slot = v_slot) THEN
            RETURN 'skipped_idle';
        END IF;
        IF EXISTS (SELECT 1 FROM awa.leases WHERE lease_slot = v_next) THEN
            RETURN 'skipped_busy';
        END IF;
        UPDATE awa.lease_ring_state SET current_slot = v_next, generation = v_gen + 1;
        UPDATE awa.lease_ring_slots SET generation = v_gen + 1 WHERE slot = v_next;
    ELSE
        RAISE EXCEPTION 'p_ring must be claim or lease' USING ERRCODE = '22023';
    END IF;
    RETURN 'rotated';
END
$$;

-- Prune the oldest sealed claim slot whose receipts are all closed, or the oldest sealed
-- lease slot that is empty (TRUNCATE reclaims its dead tuples).
CREATE FUNCTION awa.prune_attempt_ring(p_ring text, p_lock_timeout_ms integer DEFAULT 1000) RETURNS text
    LANGUAGE plpgsql VOLATILE
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp SET jit = off
AS $$
DECLARE
    v_current integer;
    v_slot integer;
BEGIN
    PERFORM awa._require(p_ring IS NULL, 'p_ring');
    IF p_ring NOT IN ('claim', 'lease') THEN
        RAISE EXCEPTION 'p_ring must be claim or lease' USING ERRCODE = '22023';
    END IF;
    PERFORM awa._require(p_lock_timeout_ms IS NULL, 'p_lock_timeout_ms');
    PERFORM awa._require_at_least(p_lock_timeout_ms, 1, 'p_lock_timeout_ms');
    PERFORM set_config('lock_timeout', p_lock_timeout_ms || 'ms', true);
    IF p_ring = 'claim' THEN
        SELECT current_slot INTO v_current FROM awa.claim_ring_state;
        SELECT slot INTO v_slot FROM awa.claim_ring_slots
         WHERE generation >= 0 AND slot <> v_current ORDER BY generation LIMIT 1;
        IF v_slot IS NULL THEN RETURN 'skipped_none_sealed'; END IF;
        BEGIN
            LOCK TABLE awa.claim_ring_state IN ACCESS EXCLUSIVE MODE;
            EXECUTE format('LOCK TABLE awa.%I, awa.%I IN ACCESS EXCLUSIVE MODE',
                           'lease_claims_' || v_slot, 'lease_claim_closures_' || v_slot);
        EXCEPTION WHEN lock_not_available THEN
            RETURN 'skipped_locked';
        END;
        IF EXISTS (SELECT 1 FROM awa.lease_claims c
                    WHERE c.claim_slot = v_slot
                      AND NOT EXISTS (SELECT 1 FROM awa.lease_claim_closures x
                                       WHERE x.claim_slot = c.claim_slot AND x.job_id = c.job_id
                                         AND x.run_lease = c.run_lease)) THEN
            RETURN 'skipped_open_receipts';
        END IF;
        EXECUTE format('TRUNCATE awa.%I, awa.%I', 'lease_claims_' || v_slot, 'lease_claim_closures_' || v_slot);
        UPDATE awa.claim_ring_slots SET generation = -1 WHERE slot = v_slot;
    ELSE
        SELECT current_slot INTO v_current FROM awa.lease_ring_state;
        SELECT slot INTO v_slot FROM awa.lease_ring_slots
         WHERE generation >= 0 AND slot <> v_current ORDER BY generation LIMIT 1;
        IF v_slot IS NULL THEN RETURN 'skipped_none_sealed'; END IF;
        BEGIN
            LOCK TABLE awa.lease_ring_state IN ACCESS EXCLUSIVE MODE;
            EXECUTE format('LOCK TABLE awa.%I IN ACCESS EXCLUSIVE MODE', 'leases_' || v_slot);
        EXCEPTION WHEN lock_not_available THEN
            RETURN 'skipped_locked';
        END;
        IF EXISTS (SELECT 1 FROM awa.leases WHERE lease_slot = v_slot) THEN
            RETURN 'skipped_open_leases';
        END IF;
        EXECUTE format('TRUNCATE awa.%I', 'leases_' || v_slot);
        UPDATE awa.lease_ring_slots SET generation = -1 WHERE slot = v_slot;
    END IF;
    RETURN 'pruned';
END
$$;

-- Every periodic task once: promotion, deadline and heartbeat rescue, ring rotation and
-- prune. Returns what each step did.
CREATE FUNCTION awa.run_maintenance(p_stale_heartbeat interval DEFAULT '5 minutes',
                                    p_batch integer DEFAULT 1000)
    RETURNS jsonb
    LANGUAGE plpgsql VOLATILE
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp SET jit = off
AS $$
BEGIN
    IF p_stale_heartbeat IS NULL OR p_batch IS NULL THEN
        RAISE EXCEPTION 'p_stale_heartbeat and p_batch must not be null' USING ERRCODE = '22004';
    END IF;
    IF p_batch < 1 OR p_stale_heartbeat <= interval '0' THEN
        RAISE EXCEPTION 'p_batch must be at least 1 and p_stale_heartbeat positive' USING ERRCODE = '22023';
    END IF;
    RETURN jsonb_build_object(
        'promoted', awa.promote_due(p_batch),
        'deadline_rescued', awa.rescue_expired_deadlines(p_batch),
        'heartbeat_rescued', awa.rescue_stale_heartbeats(p_stale_heartbeat, p_batch),
        'queue_ring', awa.rotate_queue_ring(),
        'queue_prune', awa.prune_queue_ring(),
        'claim_ring', awa.rotate_attempt_ring('claim'),
        'claim_prune', awa.prune_attempt_ring('claim'),
        'lease_ring', awa.rotate_attempt_ring('lease'),
        'lease_prune', awa.prune_attempt_ring('lease'));
END
$$;
-- Administration of a sharded queue: cancel, delete, priority aging, moves, the DLQ,
-- pausing and the shard count (ADR-025 admin lookups; D3, D4, D7, D8).
--
-- Every path that removes an unclaimed ready row goes through awa._take_unclaimed_ready,
-- which locks that row's own lane claim head (queue, priority, enqueue_shard) and
-- re-checks lane_seq >= claim_seq under the lock: claim never locks ready rows, so the
-- head lock is what keeps an admin removal and a claim of the same row apart (D3).

-- Metadata with provenance keys added only where absent ("stamped once").
CREATE FUNCTION awa._stamp_metadata(p_metadata jsonb, p_stamp jsonb) RETURNS jsonb
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    SET search_path = pg_catalog, pg_temp
    RETURN nullif(coalesce(p_metadata, '{}'::jsonb)
                  || (coalesce(p_stamp, '{}'::jsonb)
                      - ARRAY(SELECT jsonb_object_keys(coalesce(p_metadata, '{}'::jsonb)))),
                  '{}'::jsonb);

-- A removed ready row as the input of awa._enqueue_ready, bound for p_queue/p_priority.
CREATE FUNCTION awa._ready_as_deferred(r awa.ready_entries, p_queue text, p_priority smallint,
                                       p_stamp jsonb) RETURNS awa.deferred_jobs
    LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
    SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    d awa.deferred_jobs;
BEGIN
    d.job_id := r.job_id;
    d.kind := r.kind;
    d.queue := p_queue;
    d.args := r.args;
    d.state := 'scheduled';
    d.priority := p_priority;
    d.attempt := r.attempt;
    d.run_lease := r.run_lease;
    d.max_attempts := r.max_attempts;
    d.run_at := r.run_at;
    d.attempted_at := r.attempted_at;
    d.created_at := r.created_at;
    d.unique_key := r.unique_key;
    d.unique_states := r.unique_states;
    d.ordering_key := r.ordering_key;
    d.metadata := awa._stamp_metadata(r.metadata, p_stamp);
    d.tags := r.tags;
    d.errors := r.errors;
    RETURN d;
END
$$;

-- Remove the job's unclaimed ready row, if it has one: lock the claim head of the row's
-- own lane (queue, priority, enqueue_shard), re-check lane_seq >= claim_seq under the
-- lock, delete the row by its full identity and return it (NULL when the job has no
-- unclaimed ready row). The claim cursor is left alone: claim jumps the gap (D3).
-- A concurrent move of the same row to another lane is followed by looking again.
CREATE FUNCTION awa._take_unclaimed_ready(p_job_id bigint) RETURNS awa.ready_entries
    LANGUAGE plpgsql VOLATILE
    SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    r awa.ready_entries;
    v_claim_seq bigint;
    v_taken awa.ready_entries;
    v_seen boolean;
BEGIN
    FOR pass IN 1..3 LOOP
        v_seen := false;
        FOR r IN
            SELECT e.* FROM awa.ready_entries e
              JOIN awa.queue_claim_heads h
                ON h.queue = e.queue AND h.priority = e.priority AND h.enqueue_shard = e.enqueue_shard
             WHERE e.job_id = p_job_id AND e.lane_seq >= h.claim_seq
        LOOP
            v_seen := true;
            SELECT h.claim_seq INTO v_claim_seq FROM awa.queue_claim_heads h
             WHERE h.queue = r.queue AND h.priority = r.priority AND h.enqueue_shard = r.enqueue_shard
               FOR UPDATE;
            CONTINUE WHEN NOT FOUND OR r.lane_seq < v_claim_seq;
            DELETE FROM awa.ready_entries e
             WHERE e.ready_slot = r.ready_slot AND e.queue = r.queue AND e.priority = r.priority
               AND e.enqueue_shard = r.enqueue_shard AND e.lane_seq = r.lane_seq AND e.job_id = p_job_id
            RETURNING e.* INTO v_taken;
            IF FOUND THEN
                RETURN v_taken;
            END IF;
        END LOOP;
        EXIT WHEN NOT v_seen;
    END LOOP;
    RETURN NULL;
END
$$;

-- The open attempt of a job (receipt first, then lease) taken with p_outcome; NULL if none.
CREATE FUNCTION awa._take_open_attempt(p_job_id bigint, p_outcome text) RETURNS awa.taken_attempt
    LANGUAGE plpgsql VOLATILE
    SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_run_lease bigint;
    t awa.taken_attempt;
BEGIN
    SELECT c.run_lease INTO v_run_lease FROM awa.lease_claims c
     WHERE c.job_id = p_job_id AND c.materialized_at IS NULL
       AND NOT EXISTS (SELECT 1 FROM awa.lease_claim_closures x
                        WHERE x.claim_slot = c.claim_slot AND x.job_id = c.job_id AND x.run_lease = c.run_lease)
     ORDER BY c.run_lease DESC LIMIT 1;
    IF FOUND THEN
        t := awa._take_attempt(p_job_id, v_run_lease, p_outcome);
        IF t.job_id IS NOT NULL THEN
            RETURN t;
        END IF;
    END IF;
    SELECT l.run_lease INTO v_run_lease FROM awa.leases l
     WHERE l.job_id = p_job_id AND l.state IN ('running', 'waiting_external')
     ORDER BY l.run_lease DESC LIMIT 1;
    IF FOUND THEN
        RETURN awa._take_attempt(p_job_id, v_run_lease, p_outcome);
    END IF;
    RETURN NULL;
END
$$;

-- Cancel a job wherever it is live, in this order: an unclaimed ready row (removed under
-- its lane head lock; the cancelled terminal row takes the row's own identity and body),
-- a running receipt-only attempt, a materialised lease (both closed with outcome
-- 'cancelled'; the terminal row lands on the ready row's shard), a deferred row (its
-- terminal row gets lane_seq = -job_id on shard 0 of the current slot: no lane exists).
-- Returns whether it cancelled; notifies channel 'awa:cancel' with the job id.
CREATE FUNCTION awa.cancel_job(p_job_id bigint) RETURNS boolean
    LANGUAGE plpgsql VOLATILE
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    r awa.ready_entries;
    t awa.taken_attempt;
    d awa.deferred_jobs;
BEGIN
    PERFORM awa._require(p_job_id IS NULL, 'p_job_id');
    r := awa._take_unclaimed_ready(p_job_id);
    IF r.job_id IS NOT NULL THEN
        INSERT INTO awa.done_entries (ready_slot, ready_generation, job_id, queue, priority, enqueue_shard,
            lane_seq, state, attempt, run_lease, attempted_at, kind, args, max_attempts, run_at, created_at,
            unique_key, unique_states, ordering_key, metadata, tags, errors)
        VALUES (r.ready_slot, r.ready_generation, r.job_id, r.queue, r.priority, r.enqueue_shard,
            r.lane_seq, 'cancelled', r.attempt, r.run_lease, r.attempted_at, r.kind, r.args, r.max_attempts,
            r.run_at, r.created_at, r.unique_key, r.unique_states, r.ordering_key, r.metadata, r.tags, r.errors);
        PERFORM awa._sync_unique_claim(r.job_id, r.unique_key, r.unique_states, 'available', 'cancelled');
    ELSE
        t := awa._take_open_attempt(p_job_id, 'cancelled');
        IF t.job_id IS NOT NULL THEN
            PERFORM awa._finish_attempt(t, 'cancelled', t.errors);
        ELSE
            DELETE FROM awa.deferred_jobs j WHERE j.job_id = p_job_id RETURNING j.* INTO d;
            IF NOT FOUND THEN
                RETURN false;
            END IF;
            INSERT INTO awa.done_entries (ready_slot, ready_generation, job_id, queue, priority, enqueue_shard,
                lane_seq, state, attempt, run_lease, attempted_at, kind, args, max_attempts, run_at, created_at,
                unique_key, unique_states, ordering_key, metadata, tags, errors)
            SELECT s.current_slot, s.generation, d.job_id, d.queue, d.priority, 0, -d.job_id, 'cancelled',
                d.attempt, d.run_lease, d.attempted_at, d.kind, d.args, d.max_attempts, d.run_at, d.created_at,
                d.unique_key, d.unique_states, d.ordering_key, d.metadata, d.tags, d.errors
              FROM awa.queue_ring_state s;
            PERFORM awa._sync_unique_claim(d.job_id, d.unique_key, d.unique_states, d.state, 'cancelled');
        END IF;
    END IF;
    PERFORM pg_notify('awa:cancel', p_job_id::text);
    RETURN true;
END
$$;

-- Delete a job in any state (ready, deferred, running, terminal, DLQ) and release its
-- unique claim. A running attempt is closed with outcome 'terminal_removed' so its
-- worker's completion finds nothing. Returns whether anything was deleted.
CREATE FUNCTION awa.delete_job(p_job_id bigint) RETURNS boolean
    LANGUAGE plpgsql VOLATILE
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    r awa.ready_entries;
    t awa.taken_attempt;
    v_found boolean := false;
    v_rows bigint;
BEGIN
    PERFORM awa._require(p_job_id IS NULL, 'p_job_id');
    r := awa._take_unclaimed_ready(p_job_id);
    v_found := r.job_id IS NOT NULL;
    IF NOT v_found THEN
        DELETE FROM awa.deferred_jobs WHERE job_id = p_job_id;
        v_found := FOUND;
    END IF;
    IF NOT v_found THEN
        t := awa._take_open_attempt(p_job_id, 'terminal_removed');
        v_found := t.job_id IS NOT NULL;
    END IF;
    DELETE FROM awa.done_entries WHERE job_id = p_job_id;
    GET DIAGNOSTICS v_rows = ROW_COUNT;
    v_found := v_found OR v_rows > 0;
    DELETE FROM awa.dlq_entries WHERE job_id = p_job_id;
    GET DIAGNOSTICS v_rows = ROW_COUNT;
    v_found := v_found OR v_rows > 0;
    IF v_found THEN
        DELETE FROM awa.job_unique_claims WHERE job_id = p_job_id;
    END IF;
    RETURN v_found;
END
$$;

-- Physical priority aging: up to p_limit waiting ready rows with priority > 1 whose run_at
-- is older than p_older_than move one priority up. Their lane heads are locked (sorted,
-- SKIP LOCKED: lanes being claimed right now are left for the next run), the rows are
-- removed by full identity and re-enqueued at priority - 1 through awa._enqueue_ready,
-- so keyed rows keep their key's shard and keyless rows take the rotor, always within
-- the queue's current width. _awa_original_priority is stamped once. p_queue limits the
-- run to one queue (NULL: every queue). Returns how many rows moved up.
CREATE FUNCTION awa.age_waiting_priorities(p_older_than interval, p_limit integer DEFAULT 1000,
                                           p_queue text DEFAULT NULL)
    RETURNS integer
    LANGUAGE plpgsql VOLATILE
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_cutoff timestamptz;
    v_queues text[];
    v_priorities smallint[];
    v_shards smallint[];
    v_claims bigint[];
    v_rows awa.deferred_jobs[];
BEGIN
    PERFORM awa._require(p_older_than IS NULL, 'p_older_than');
    PERFORM awa._require(p_limit IS NULL, 'p_limit');
    IF p_older_than < interval '0' THEN
        RAISE EXCEPTION 'p_older_than must not be negative' USING ERRCODE = '22023';
    END IF;
    IF p_limit NOT BETWEEN 1 AND 100000 THEN
        RAISE EXCEPTION 'p_limit must be between 1 and 100000' USING ERRCODE = '22023',
            DETAIL = format('The value is %s.', p_limit);
    END IF;
    IF p_queue IS NOT NULL THEN
        PERFORM awa._check_queue(p_queue, 'p_queue');
    END IF;
    v_cutoff := clock_timestamp() - p_older_than;
    SELECT array_agg(h.queue), array_agg(h.priority), array_agg(h.enqueue_shard), array_agg(h.claim_seq)
      INTO v_queues, v_priorities, v_shards, v_claims
      FROM (SELECT c.queue, c.priority, c.enqueue_shard, c.claim_seq FROM awa.queue_claim_heads c
             WHERE c.priority > 1 AND (p_queue IS NULL OR c.queue = p_queue)
               AND EXISTS (SELECT 1 FROM awa.ready_entries r
                            WHERE r.queue = c.queue AND r.priority = c.priority
                              AND r.enqueue_shard = c.enqueue_shard AND r.lane_seq >= c.claim_seq
                              AND r.run_at <= v_cutoff)
             ORDER BY c.queue, c.priority, c.enqueue_shard
               FOR UPDATE SKIP LOCKED) h;
    IF v_queues IS NULL THEN
        RETURN 0;
    END IF;
    WITH victims AS (
        SELECT r.ready_slot, r.queue, r.priority, r.enqueue_shard, r.lane_seq
          FROM unnest(v_queues, v_priorities, v_shards, v_claims) AS h(queue, priority, enqueue_shard, claim_seq)
          JOIN awa.ready_entries r
            ON r.queue = h.queue AND r.priority = h.priority AND r.enqueue_shard = h.enqueue_shard
           AND r.lane_seq >= h.claim_seq
         WHERE r.run_at <= v_cutoff
         ORDER BY r.run_at, r.lane_seq
         LIMIT p_limit),
    gone AS (
        DELETE FROM awa.ready_entries r USING victims v
         WHERE r.ready_slot = v.ready_slot AND r.queue = v.queue AND r.priority = v.priority
           AND r.enqueue_shard = v.enqueue_shard AND r.lane_seq = v.lane_seq
        RETURNING r AS row_)
    SELECT array_agg(awa._ready_as_deferred(g.row_, (g.row_).queue, ((g.row_).priority - 1)::smallint,
                         jsonb_build_object('_awa_original_priority', (g.row_).priority))
                     ORDER BY (g.row_).run_at, (g.row_).lane_seq)
      INTO v_rows FROM gone g;
    IF v_rows IS NULL THEN
        RETURN 0;
    END IF;
    RETURN awa._enqueue_ready(v_rows);
END
$$;

-- Move a scheduled/retryable or unclaimed ready job to another queue (and optionally
-- priority). A deferred row is updated in place; a ready row is removed under its lane
-- head lock and re-enqueued into the destination, whose current width decides the shard
-- (keyed: the key's shard there; keyless: the rotor) — a source shard number is never
-- copied. _awa_original_queue / _awa_original_priority are stamped once when they change.
-- Returns false when the job is not movable (running, terminal, DLQ, unknown).
CREATE FUNCTION awa.move_queue(p_job_id bigint, p_queue text, p_priority smallint DEFAULT NULL)
    RETURNS boolean
    LANGUAGE plpgsql VOLATILE
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    r awa.ready_entries;
    v_priority smallint;
BEGIN
    PERFORM awa._require(p_job_id IS NULL, 'p_job_id');
    PERFORM awa._check_queue(p_queue, 'p_queue');
    PERFORM awa._check_priority(p_priority, 'p_priority');
    UPDATE awa.deferred_jobs j
       SET queue = p_queue,
           priority = coalesce(p_priority, j.priority),
           metadata = awa._stamp_metadata(j.metadata,
               CASE WHEN j.queue <> p_queue THEN jsonb_build_object('_awa_original_queue', j.queue) ELSE '{}' END
               || CASE WHEN j.priority <> coalesce(p_priority, j.priority)
                       THEN jsonb_build_object('_awa_original_priority', j.priority) ELSE '{}' END)
     WHERE j.job_id = p_job_id;
    IF FOUND THEN
        RETURN true;
    END IF;
    r := awa._take_unclaimed_ready(p_job_id);
    IF r.job_id IS NULL THEN
        RETURN false;
    END IF;
    v_priority := coalesce(p_priority, r.priority);
    PERFORM awa._enqueue_ready(ARRAY[awa._ready_as_deferred(r, p_queue, v_priority,
        CASE WHEN r.queue <> p_queue THEN jsonb_build_object('_awa_original_queue', r.queue) ELSE '{}' END
        || CASE WHEN r.priority <> v_priority THEN jsonb_build_object('_awa_original_priority', r.priority)
                ELSE '{}' END)]);
    RETURN true;
END
$$;

-- Bring a job back from the dead-letter queue, optionally into another queue or priority.
-- attempt restarts at 0 (run_lease is kept, so stale writers stay stale); a future
-- p_run_at makes it scheduled, otherwise it is ready at once. The ordering key is kept,
-- so a keyed job returns to its key's shard (within the queue's current width).
CREATE FUNCTION awa.retry_from_dlq(p_job_id bigint, p_queue text DEFAULT NULL,
                                   p_priority smallint DEFAULT NULL, p_run_at timestamptz DEFAULT NULL)
    RETURNS boolean
    LANGUAGE plpgsql VOLATILE
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    x awa.dlq_entries;
    d awa.deferred_jobs;
BEGIN
    PERFORM awa._require(p_job_id IS NULL, 'p_job_id');
    IF p_queue IS NOT NULL THEN
        PERFORM awa._check_queue(p_queue, 'p_queue');
    END IF;
    PERFORM awa._check_priority(p_priority, 'p_priority');
    DELETE FROM awa.dlq_entries e WHERE e.job_id = p_job_id RETURNING e.* INTO x;
    IF NOT FOUND THEN
        RETURN false;
    END IF;
    d.job_id := x.job_id;
    d.kind := x.kind;
    d.queue := coalesce(p_queue, x.queue);
    d.args := x.args;
    d.priority := coalesce(p_priority, x.priority);
    d.attempt := 0;
    d.run_lease := x.run_lease;
    d.max_attempts := x.max_attempts;
    d.created_at := x.created_at;
    d.unique_key := x.unique_key;
    d.unique_states := x.unique_states;
    d.ordering_key := x.ordering_key;
    d.metadata := awa._stamp_metadata(x.metadata,
        CASE WHEN d.queue <> x.queue THEN jsonb_build_object('_awa_original_queue', x.queue) ELSE '{}' END);
    d.tags := x.tags;
    d.errors := x.errors;
    IF p_run_at > clock_timestamp() THEN
        d.state := 'scheduled';
        d.run_at := p_run_at;
        INSERT INTO awa.deferred_jobs SELECT (d).*;
        PERFORM awa._sync_unique_claim(d.job_id, d.unique_key, d.unique_states, 'failed', 'scheduled');
    ELSE
        d.state := 'scheduled';
        d.run_at := clock_timestamp();
        PERFORM awa._sync_unique_claim(d.job_id, d.unique_key, d.unique_states, 'failed', 'available');
        PERFORM awa._enqueue_ready(ARRAY[d]);
    END IF;
    RETURN true;
END
$$;

-- Move a failed terminal job into the dead-letter queue with a reason. The body comes
-- from the done row or, where that is narrow, from the ready row of the same lane
-- identity (shard included). Returns false when the job has no failed terminal row.
CREATE FUNCTION awa.move_failed_to_dlq(p_job_id bigint, p_reason text) RETURNS boolean
    LANGUAGE plpgsql VOLATILE
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    PERFORM awa._require(p_job_id IS NULL, 'p_job_id');
    PERFORM awa._require(p_reason IS NULL, 'p_reason');
    WITH gone AS (
        DELETE FROM awa.done_entries d WHERE d.job_id = p_job_id AND d.state = 'failed' RETURNING d.*)
    INSERT INTO awa.dlq_entries (job_id, kind, queue, args, state, priority, attempt, run_lease, max_attempts,
        run_at, attempted_at, finalized_at, created_at, unique_key, unique_states, ordering_key, metadata,
        tags, errors, dlq_reason, original_run_lease)
    SELECT g.job_id, coalesce(g.kind, r.kind), g.queue, coalesce(g.args, r.args, '{}'), 'failed', g.priority,
           g.attempt, g.run_lease, coalesce(g.max_attempts, r.max_attempts, 25), coalesce(g.run_at, r.run_at),
           g.attempted_at, g.finalized_at, coalesce(g.created_at, r.created_at, g.finalized_at),
           coalesce(g.unique_key, r.unique_key), coalesce(g.unique_states, r.unique_states),
           coalesce(g.ordering_key, r.ordering_key), coalesce(g.metadata, r.metadata), coalesce(g.tags, r.tags),
           coalesce(g.errors, r.errors), p_reason, g.run_lease
      FROM gone g
      LEFT JOIN awa.ready_entries r
        ON r.ready_slot = g.ready_slot AND r.ready_generation = g.ready_generation AND r.queue = g.queue
       AND r.priority = g.priority AND r.enqueue_shard = g.enqueue_shard AND r.lane_seq = g.lane_seq;
    RETURN FOUND;
END
$$;

-- Dead-letter entries of a queue (every queue when p_queue is NULL), newest first.
CREATE FUNCTION awa.list_dlq(p_queue text, p_limit integer DEFAULT 100) RETURNS SETOF awa.dlq_entries
    LANGUAGE plpgsql STABLE
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF p_queue IS NOT NULL THEN
        PERFORM awa._check_queue(p_queue, 'p_queue');
    END IF;
    PERFORM awa._require(p_limit IS NULL, 'p_limit');
    IF p_limit NOT BETWEEN 1 AND 10000 THEN
        RAISE EXCEPTION 'p_limit must be between 1 and 10000' USING ERRCODE = '22023',
            DETAIL = format('The value is %s.', p_limit);
    END IF;
    RETURN QUERY
        SELECT e.* FROM awa.dlq_entries e
         WHERE p_queue IS NULL OR e.queue = p_queue
         ORDER BY e.dlq_at DESC, e.job_id DESC
         LIMIT p_limit;
END
$$;

-- Pause a queue: claim skips it (promotion too); enqueue still works.
CREATE FUNCTION awa.pause_queue(p_queue text) RETURNS void
    LANGUAGE plpgsql VOLATILE
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    PERFORM awa._check_queue(p_queue, 'p_queue');
    INSERT INTO awa.queue_meta AS m (queue, paused, paused_at, paused_by)
    VALUES (p_queue, true, clock_timestamp(), session_user)
    ON CONFLICT (queue) DO UPDATE
       SET paused = true, paused_at = EXCLUDED.paused_at, paused_by = EXCLUDED.paused_by
     WHERE NOT m.paused;
END
$$;

-- Resume a paused queue (no-op when it is not paused).
CREATE FUNCTION awa.resume_queue(p_queue text) RETURNS void
    LANGUAGE plpgsql VOLATILE
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    PERFORM awa._check_queue(p_queue, 'p_queue');
    UPDATE awa.queue_meta SET paused = false, paused_at = NULL, paused_by = NULL
     WHERE queue = p_queue AND paused;
END
$$;

-- Set a queue's enqueue width (1..64; the UPSERT of the ADR). Every backend routes with
-- it from its next transaction; rows on shards >= the new width keep draining.
-- Returns the previous width.
CREATE FUNCTION awa.set_enqueue_shards(p_queue text, p_shards integer) RETURNS smallint
    LANGUAGE plpgsql VOLATILE
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_old smallint;
BEGIN
    PERFORM awa._check_queue(p_queue, 'p_queue');
    PERFORM awa._require(p_shards IS NULL, 'p_shards');
    IF p_shards NOT BETWEEN 1 AND 64 THEN
        RAISE EXCEPTION 'p_shards must be between 1 and 64' USING ERRCODE = '22023',
            DETAIL = format('The value is %s.', p_shards);
    END IF;
    SELECT m.enqueue_shards INTO v_old FROM awa.queue_meta m WHERE m.queue = p_queue FOR UPDATE;
    INSERT INTO awa.queue_meta (queue, enqueue_shards) VALUES (p_queue, p_shards)
    ON CONFLICT (queue) DO UPDATE SET enqueue_shards = EXCLUDED.enqueue_shards;
    RETURN coalesce(v_old, 1);
END
$$;
-- Observability of a sharded queue: exact counts, per-shard lag, per-shard counters and
-- the awa.jobs view over every state (ADR-025 "Fairness and observability").
-- Every join between ready rows and a claim cursor, and between ready, done, lease and
-- receipt rows, carries enqueue_shard (reference pitfall P4): a ready row is only ever
-- compared with its own lane's cursor, so no row is counted twice or on the wrong shard.

-- Exact job counts of one queue by state. available = ready rows at or after their own
-- lane's claim cursor; running = open receipts (no closure, not materialised) plus
-- running or waiting leases; the terminal states count done_entries rows.
CREATE FUNCTION awa.queue_counts_exact(p_queue text,
    OUT available bigint, OUT scheduled bigint, OUT retryable bigint, OUT running bigint,
    OUT completed bigint, OUT failed bigint, OUT cancelled bigint, OUT dlq bigint)
    LANGUAGE plpgsql STABLE
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    PERFORM awa._check_queue(p_queue, 'p_queue');
    SELECT count(*) INTO available
      FROM awa.queue_claim_heads h
      JOIN awa.ready_entries r
        ON r.queue = h.queue AND r.priority = h.priority AND r.enqueue_shard = h.enqueue_shard
       AND r.lane_seq >= h.claim_seq
     WHERE h.queue = p_queue;
    SELECT count(*) FILTER (WHERE j.state = 'scheduled'), count(*) FILTER (WHERE j.state = 'retryable')
      INTO scheduled, retryable
      FROM awa.deferred_jobs j WHERE j.queue = p_queue;
    SELECT (SELECT count(*) FROM awa.lease_claims c
             WHERE c.queue = p_queue AND c.materialized_at IS NULL
               AND NOT EXISTS (SELECT 1 FROM awa.lease_claim_closures x
                                WHERE x.claim_slot = c.claim_slot AND x.job_id = c.job_id
                                  AND x.run_lease = c.run_lease))
         + (SELECT count(*) FROM awa.leases l
             WHERE l.queue = p_queue AND l.state IN ('running', 'waiting_external'))
      INTO running;
    SELECT count(*) FILTER (WHERE d.state = 'completed'), count(*) FILTER (WHERE d.state = 'failed'),
           count(*) FILTER (WHERE d.state = 'cancelled')
      INTO completed, failed, cancelled
      FROM awa.done_entries d WHERE d.queue = p_queue;
    SELECT count(*) INTO dlq FROM awa.dlq_entries e WHERE e.queue = p_queue;
END
$$;

-- Next value a lane's enqueue sequence will hand out (1 for a fresh lane). SECURITY
-- DEFINER: reading a sequence needs rights a monitoring role does not have.
CREATE FUNCTION awa._lane_next_seq(p_seq_name text) RETURNS bigint
    LANGUAGE sql STABLE STRICT PARALLEL SAFE
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp
    RETURN coalesce(pg_sequence_last_value(to_regclass('awa.' || quote_ident(p_seq_name))), 0) + 1;

-- One row per lane: enqueue and claim cursors, their distance, the waiting rows and the
-- oldest waiting run_at, and whether the shard is outside the current width (draining).
CREATE FUNCTION awa._shard_lag()
    RETURNS TABLE (queue text, priority smallint, enqueue_shard smallint, next_seq bigint,
                   claim_seq bigint, lag bigint, waiting bigint, oldest_run_at timestamptz,
                   enqueue_shards smallint, draining boolean)
    LANGUAGE sql STABLE
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$
    SELECT e.queue, e.priority, e.enqueue_shard, n.next_seq, h.claim_seq, n.next_seq - h.claim_seq,
           w.waiting, w.oldest_run_at, coalesce(m.enqueue_shards, 1::smallint),
           e.enqueue_shard >= coalesce(m.enqueue_shards, 1::smallint)
      FROM awa.queue_enqueue_heads e
      JOIN awa.queue_claim_heads h
        ON h.queue = e.queue AND h.priority = e.priority AND h.enqueue_shard = e.enqueue_shard
      LEFT JOIN awa.queue_meta m ON m.queue = e.queue
     CROSS JOIN LATERAL (SELECT awa._lane_next_seq(e.seq_name) AS next_seq) n
     CROSS JOIN LATERAL (
        SELECT count(*) AS waiting, min(r.run_at) AS oldest_run_at
          FROM awa.ready_entries r
         WHERE r.queue = e.queue AND r.priority = e.priority AND r.enqueue_shard = e.enqueue_shard
           AND r.lane_seq >= h.claim_seq) w
$$;

-- The incident query of ADR-025 as a view. lag = next_seq - claim_seq counts every lane
-- position handed out and not yet passed by claim: waiting rows plus in-flight
-- reservations and gaps (rolled back or removed rows), so it never under-counts.
CREATE VIEW awa.shard_lag AS
    SELECT queue, priority, enqueue_shard, next_seq, claim_seq, lag, waiting, oldest_run_at,
           enqueue_shards, draining
      FROM awa._shard_lag();

-- Whether this server loaded awa_shard through shared_preload_libraries (so the shared
-- memory counters exist). SECURITY DEFINER: the setting is hidden from ordinary roles.
CREATE FUNCTION awa._stats_preloaded() RETURNS boolean
    LANGUAGE sql STABLE
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp
    RETURN EXISTS (
        SELECT 1 FROM unnest(string_to_array(current_setting('shared_preload_libraries'), ',')) AS l(name)
         WHERE regexp_replace(btrim(l.name, ' "'), '^.*/', '') IN ('awa_shard', 'awa_shard.so'));

-- Counters derived from the tables when the library is not preloaded: enqueued = lane
-- positions handed out (next_seq - 1), claimed = positions passed by claim
-- (claim_seq - 1), both including gaps; completed and failed = retained done rows.
CREATE FUNCTION awa._shard_stats_from_tables()
    RETURNS TABLE (queue text, enqueue_shard smallint, enqueued bigint, claimed bigint,
                   completed bigint, failed bigint)
    LANGUAGE sql STABLE
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$
    WITH lanes AS (
        SELECT e.queue, e.enqueue_shard, sum(awa._lane_next_seq(e.seq_name) - 1)::bigint AS enqueued,
               sum(h.claim_seq - 1)::bigint AS claimed
          FROM awa.queue_enqueue_heads e
          JOIN awa.queue_claim_heads h
            ON h.queue = e.queue AND h.priority = e.priority AND h.enqueue_shard = e.enqueue_shard
         GROUP BY e.queue, e.enqueue_shard),
    finals AS (
        SELECT d.queue, d.enqueue_shard, count(*) FILTER (WHERE d.state = 'completed') AS completed,
               count(*) FILTER (WHERE d.state = 'failed') AS failed
          FROM awa.done_entries d
         WHERE d.lane_seq > 0
         GROUP BY d.queue, d.enqueue_shard)
    SELECT l.queue, l.enqueue_shard, l.enqueued, l.claimed, coalesce(f.completed, 0), coalesce(f.failed, 0)
      FROM lanes l
      LEFT JOIN finals f ON f.queue = l.queue AND f.enqueue_shard = l.enqueue_shard
$$;

-- Per-(queue, enqueue_shard) counters: from shared memory when preloaded (since server
-- start or the last awa.reset_shard_stats(), source 'shared_memory'), otherwise derived
-- from the tables (since the lanes were created, source 'tables', since NULL).
CREATE VIEW awa.shard_stats AS
    SELECT s.queue, s.enqueue_shard, s.enqueued, s.claimed, s.completed, s.failed, s.since,
           'shared_memory'::text AS source
      FROM awa._shard_stats() s
     WHERE awa._stats_preloaded()
    UNION ALL
    SELECT t.queue, t.enqueue_shard, t.enqueued, t.claimed, t.completed, t.failed, NULL::timestamptz,
           'tables'::text
      FROM awa._shard_stats_from_tables() t
     WHERE NOT awa._stats_preloaded();

-- Every job once, in its current state, with the columns of awa.job_row:
-- available = ready rows at or after their own lane's cursor; scheduled/retryable =
-- deferred rows; running = open receipts and leases, each joined to its ready row on
-- the full lane identity (shard included); terminal = done rows hydrated from the ready
-- row of the same identity (a job cancelled while deferred never had a lane: NULL shard
-- and lane_seq); failed dead letters from the DLQ.
CREATE VIEW awa.jobs AS
    SELECT r.job_id AS id, r.kind, r.queue, r.args, 'available'::awa.job_state AS state, r.priority,
           r.attempt, r.run_lease, r.max_attempts, r.run_at, r.attempted_at, NULL::timestamptz AS finalized_at,
           r.created_at, r.metadata, r.tags, r.errors, r.unique_key, r.unique_states, r.ordering_key,
           r.enqueue_shard, r.lane_seq
      FROM awa.ready_entries r
      JOIN awa.queue_claim_heads h
        ON h.queue = r.queue AND h.priority = r.priority AND h.enqueue_shard = r.enqueue_shard
     WHERE r.lane_seq >= h.claim_seq
    UNION ALL
    SELECT j.job_id, j.kind, j.queue, j.args, j.state, j.priority, j.attempt, j.run_lease, j.max_attempts,
           j.run_at, j.attempted_at, j.finalized_at, j.created_at, j.metadata, j.tags, j.errors, j.unique_key,
           j.unique_states, j.ordering_key, NULL::smallint, NULL::bigint
      FROM awa.deferred_jobs j
    UNION ALL
    SELECT c.job_id, r.kind, c.queue, r.args, 'running'::awa.job_state, c.priority, c.attempt, c.run_lease,
           c.max_attempts, r.run_at, c.claimed_at, NULL::timestamptz, r.created_at, r.metadata, r.tags, r.errors,
           r.unique_key, r.unique_states, r.ordering_key, c.enqueue_shard, c.lane_seq
      FROM awa.lease_claims c
      JOIN awa.ready_entries r
        ON r.ready_slot = c.ready_slot AND r.ready_generation = c.ready_generation AND r.queue = c.queue
       AND r.priority = c.priority AND r.enqueue_shard = c.enqueue_shard AND r.lane_seq = c.lane_seq
     WHERE c.materialized_at IS NULL
       AND NOT EXISTS (SELECT 1 FROM awa.lease_claim_closures x
                        WHERE x.claim_slot = c.claim_slot AND x.job_id = c.job_id AND x.run_lease = c.run_lease)
    UNION ALL
    SELECT l.job_id, r.kind, l.queue, r.args, l.state, l.priority, l.attempt, l.run_lease, l.max_attempts,
           r.run_at, l.attempted_at, NULL::timestamptz, r.created_at, r.metadata, r.tags, r.errors,
           r.unique_key, r.unique_states, r.ordering_key, l.enqueue_shard, l.lane_seq
      FROM awa.leases l
      JOIN awa.ready_entries r
        ON r.ready_slot = l.ready_slot AND r.ready_generation = l.ready_generation AND r.queue = l.queue
       AND r.priority = l.priority AND r.enqueue_shard = l.enqueue_shard AND r.lane_seq = l.lane_seq
     WHERE l.state IN ('running', 'waiting_external')
    UNION ALL
    SELECT d.job_id, coalesce(d.kind, r.kind), d.queue, coalesce(d.args, r.args), d.state, d.priority,
           d.attempt, d.run_lease, coalesce(d.max_attempts, r.max_attempts), coalesce(d.run_at, r.run_at),
           d.attempted_at, d.finalized_at, coalesce(d.created_at, r.created_at), coalesce(d.metadata, r.metadata),
           coalesce(d.tags, r.tags), coalesce(d.errors, r.errors), coalesce(d.unique_key, r.unique_key),
           coalesce(d.unique_states, r.unique_states), coalesce(d.ordering_key, r.ordering_key),
           CASE WHEN d.lane_seq > 0 THEN d.enqueue_shard END, CASE WHEN d.lane_seq > 0 THEN d.lane_seq END
      FROM awa.done_entries d
      LEFT JOIN awa.ready_entries r
        ON r.ready_slot = d.ready_slot AND r.ready_generation = d.ready_generation AND r.queue = d.queue
       AND r.priority = d.priority AND r.enqueue_shard = d.enqueue_shard AND r.lane_seq = d.lane_seq
    UNION ALL
    SELECT e.job_id, e.kind, e.queue, e.args, e.state, e.priority, e.attempt, e.run_lease, e.max_attempts,
           e.run_at, e.attempted_at, e.finalized_at, e.created_at, e.metadata, e.tags, e.errors, e.unique_key,
           e.unique_states, e.ordering_key, NULL::smallint, NULL::bigint
      FROM awa.dlq_entries e;
-- Roles and privileges (D10). Roles are cluster-wide: created once, kept by DROP EXTENSION.
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

-- Nothing is callable by default; each role gets exactly its functions.
REVOKE ALL ON ALL FUNCTIONS IN SCHEMA awa FROM PUBLIC;
REVOKE ALL ON ALL TABLES IN SCHEMA awa FROM PUBLIC;
REVOKE ALL ON ALL SEQUENCES IN SCHEMA awa FROM PUBLIC;
GRANT USAGE ON SCHEMA awa TO awa_producer, awa_worker, awa_admin;

-- Pure helpers: everyone who uses the queue.
GRANT EXECUTE ON FUNCTION
    awa.ordering_key_hash(bytea), awa.ordering_key_hash(text),
    awa.shard_for_ordering_key(bytea, integer), awa.shard_for_ordering_key(text, integer),
    awa.job_state_in_bitmask(bit, awa.job_state), awa.backoff_duration(integer, integer),
    awa.lane_sequence_name(text, smallint, smallint), awa.lane_lock_key(text, smallint, smallint),
    awa.queue_enqueue_shards(text)
    TO awa_producer, awa_worker, awa_admin;

-- Producers enqueue.
GRANT EXECUTE ON FUNCTION
    awa.insert_job_compat(text, text, jsonb, awa.job_state, smallint, smallint, timestamptz, jsonb, text[], bytea, bit, bytea),
    awa.insert_jobs(text, text[], jsonb[], smallint[], timestamptz[], bytea[], smallint[], jsonb[], bytea[], bit[]),
    awa.shard_for_enqueue(text, smallint, bytea),
    awa.reserve_enqueue_seq(text, smallint, smallint, bigint)
    TO awa_producer, awa_admin;

-- Workers claim and finish.
GRANT EXECUTE ON FUNCTION
    awa.claim_ready_runtime(text, bigint, double precision, double precision),
    awa.complete_jobs(bigint[], bigint[]),
    awa.fail_job(bigint, bigint, text, interval),
    awa.fail_job_to_dlq(bigint, bigint, text, text),
    awa.retry_job_after(bigint, bigint, interval),
    awa.snooze_job(bigint, bigint, interval),
    awa.heartbeat_jobs(bigint[], bigint[]),
    awa.wait_for_jobs(text, integer)
    TO awa_worker, awa_admin;

-- Maintenance and administration.
GRANT EXECUTE ON FUNCTION
    awa.rescue_stale_heartbeats(interval, integer),
    awa.rescue_expired_deadlines(integer),
    awa.promote_due(integer),
    awa.reset_shard_stats(),
    awa.rotate_queue_ring(), awa.prune_queue_ring(integer),
    awa.rotate_attempt_ring(text), awa.prune_attempt_ring(text, integer),
    awa.run_maintenance(interval, integer)
    TO awa_admin;
GRANT SELECT ON ALL TABLES IN SCHEMA awa TO awa_admin;
GRANT INSERT, UPDATE, DELETE ON awa.queue_meta TO awa_admin;
-- Privileges of the operations functions and views (D10). 90_security.sql has already
-- revoked everything from PUBLIC; the revokes below repeat it for these objects so this
-- piece stands on its own in the upgrade script.

REVOKE ALL ON FUNCTION
    awa._require(boolean, text), awa._check_queue(text, text), awa._check_priority(smallint, text),
    awa._stamp_metadata(jsonb, jsonb), awa._ready_as_deferred(awa.ready_entries, text, smallint, jsonb),
    awa._take_unclaimed_ready(bigint), awa._take_open_attempt(bigint, text),
    awa.cancel_job(bigint), awa.delete_job(bigint), awa.age_waiting_priorities(interval, integer, text),
    awa.move_queue(bigint, text, smallint), awa.retry_from_dlq(bigint, text, smallint, timestamptz),
    awa.move_failed_to_dlq(bigint, text), awa.list_dlq(text, integer),
    awa.pause_queue(text), awa.resume_queue(text), awa.set_enqueue_shards(text, integer),
    awa.queue_counts_exact(text), awa._lane_next_seq(text), awa._shard_lag(), awa._stats_preloaded(),
    awa._shard_stats_from_tables()
    FROM PUBLIC;
REVOKE ALL ON awa.shard_lag, awa.shard_stats, awa.jobs FROM PUBLIC;

-- Administration: awa_admin only.
GRANT EXECUTE ON FUNCTION
    awa.cancel_job(bigint), awa.delete_job(bigint), awa.age_waiting_priorities(interval, integer, text),
    awa.move_queue(bigint, text, smallint), awa.retry_from_dlq(bigint, text, smallint, timestamptz),
    awa.move_failed_to_dlq(bigint, text), awa.list_dlq(text, integer),
    awa.pause_queue(text), awa.resume_queue(text), awa.set_enqueue_shards(text, integer)
    TO awa_admin;

-- Reads: awa_admin and the monitoring role. The views call these functions as the
-- reading role, so it needs EXECUTE on them (they are read-only).
GRANT EXECUTE ON FUNCTION
    awa.queue_counts_exact(text), awa._lane_next_seq(text), awa._shard_lag(), awa._stats_preloaded(),
    awa._shard_stats_from_tables(), awa._shard_stats()
    TO awa_admin, pg_monitor;
GRANT SELECT ON awa.shard_lag, awa.shard_stats, awa.jobs TO awa_admin, pg_monitor;
GRANT USAGE ON SCHEMA awa TO pg_monitor;
