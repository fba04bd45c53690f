-- awa_shard 1.0 -> 1.1: maintenance that can never lose, strand or stall a job.
--
-- A hand-written delta: a fresh CREATE EXTENSION installs 1.1 from the full script built
-- from sql/schema/, and the test migration_gate_fresh proves that a 1.0 updated by this
-- script has the same catalog (docs/design.md §11).
-- What changes (docs/maintenance.md says what is guaranteed and why):
--   * writers append to a ring's write slot fenced against prune (awa._ring_write_slot and
--     the C++ hot path), read on the latest committed state whatever their isolation level;
--   * rotation and prune serialise on the ring's cursor row and take their locks before
--     they decide; prune never queues behind an open transaction for more than a few
--     milliseconds, and a skipped prune releases every lock it took;
--   * prune moves the pending rows of a sealed slot forward into the current slot, keeping
--     their lane identity and lane_seq, under their lanes' claim-head locks, so one paused
--     queue no longer pins the ring; retained failed rows move once to the retained slot;
--   * rescue honours max_attempts; aging moves lane prefixes in lane order; non-finite
--     run_at values are refused and cannot break the aging arithmetic;
--   * the ring tables' keys lead with the lane (or, for receipts, the attempt), which makes
--     their duplicate lane and job indexes redundant: one index entry fewer per row written.
\echo Use "ALTER EXTENSION awa_shard UPDATE TO '1.1'" to load this file. \quit

-- As the full script checks before it creates anything (sql/schema/00_header.sql): schema
-- awa must be writable by superusers only, and hold no function or operator but the
-- extension's, since 1.1's background maintenance calls the extension's functions as a
-- superuser and an overload with more exact argument types would be called instead.
DO $awa_schema_check$
DECLARE
    s record;
BEGIN
    SELECT n.oid, r.rolname, r.rolsuper INTO s
      FROM pg_catalog.pg_namespace n JOIN pg_catalog.pg_roles r ON r.oid = n.nspowner
     WHERE n.nspname = 'awa';
    IF NOT s.rolsuper THEN
        RAISE EXCEPTION 'schema awa is owned by role %, which is not a superuser', s.rolname
            USING ERRCODE = '42501',
                  DETAIL = 'Its owner could create functions in it that the extension''s calls would run.',
                  HINT = 'ALTER SCHEMA awa OWNER TO a superuser, then update the extension.';
    END IF;
    IF EXISTS (SELECT 1 FROM pg_catalog.pg_roles r
                WHERE NOT r.rolsuper AND pg_catalog.has_schema_privilege(r.oid, s.oid, 'CREATE')) THEN
        RAISE EXCEPTION 'schema awa grants CREATE to a role that is not a superuser'
            USING ERRCODE = '42501',
                  DETAIL = 'Such a role could create functions in it that the extension''s calls would run.',
                  HINT = 'REVOKE CREATE ON SCHEMA awa FROM that role (and PUBLIC), then update the extension.';
    END IF;
    -- Members of awa_shard only: a role with CREATE on the database can install a trusted
    -- extension (pgcrypto, hstore, ...) into schema awa, which PostgreSQL does not check.
    IF EXISTS (SELECT 1 FROM pg_catalog.pg_proc p WHERE p.pronamespace = s.oid AND NOT EXISTS (
                   SELECT 1 FROM pg_catalog.pg_depend d JOIN pg_catalog.pg_extension e ON e.oid = d.refobjid
                    WHERE d.classid = 'pg_catalog.pg_proc'::pg_catalog.regclass AND d.objid = p.oid AND d.deptype = 'e'
                      AND d.refclassid = 'pg_catalog.pg_extension'::pg_catalog.regclass AND e.extname = 'awa_shard')
               UNION ALL
               SELECT 1 FROM pg_catalog.pg_operator o WHERE o.oprnamespace = s.oid AND NOT EXISTS (
                   SELECT 1 FROM pg_catalog.pg_depend d JOIN pg_catalog.pg_extension e ON e.oid = d.refobjid
                    WHERE d.classid = 'pg_catalog.pg_operator'::pg_catalog.regclass AND d.objid = o.oid AND d.deptype = 'e'
                      AND d.refclassid = 'pg_catalog.pg_extension'::pg_catalog.regclass AND e.extname = 'awa_shard')) THEN
        RAISE EXCEPTION 'schema awa holds functions or operators that are not the extension''s'
            USING ERRCODE = '42501',
                  DETAIL = 'A call of the extension''s own functions could resolve to one of them.',
                  HINT = 'Move or drop them, then update the extension.';
    END IF;
END
$awa_schema_check$;

-- An object of the database's own that depends on awa.lease_claims (a table in 1.0, a view
-- in 1.1) would stop the update deep inside, naming a table the user never saw: say so first.
DO $awa_dependents_check$
DECLARE
    v_objects text;
BEGIN
    SELECT pg_catalog.string_agg(DISTINCT o.name, ', ') INTO v_objects
      FROM pg_catalog.pg_depend d
     CROSS JOIN LATERAL (
           SELECT CASE WHEN d.classid = 'pg_catalog.pg_rewrite'::pg_catalog.regclass
                       THEN 'pg_catalog.pg_class'::pg_catalog.regclass ELSE d.classid END AS classid,
                  CASE WHEN d.classid = 'pg_catalog.pg_rewrite'::pg_catalog.regclass
                       THEN (SELECT r.ev_class FROM pg_catalog.pg_rewrite r WHERE r.oid = d.objid) ELSE d.objid END AS objid) x
     CROSS JOIN LATERAL (SELECT pg_catalog.pg_describe_object(x.classid, x.objid, 0) AS name) o
     WHERE d.refclassid = 'pg_catalog.pg_class'::pg_catalog.regclass
       AND d.refobjid = 'awa.lease_claims'::pg_catalog.regclass AND d.deptype = 'n'
       AND NOT (x.classid = 'pg_catalog.pg_class'::pg_catalog.regclass AND x.objid = 'awa.lease_claims'::pg_catalog.regclass)
       AND NOT EXISTS (SELECT 1 FROM pg_catalog.pg_depend e
                        WHERE e.classid = x.classid AND e.objid = x.objid AND e.deptype = 'e');
    IF v_objects IS NOT NULL THEN
        RAISE EXCEPTION 'objects of this database depend on awa.lease_claims, which the update replaces by a view: %', v_objects
            USING ERRCODE = '2BP01',
                  HINT = 'Drop them, update the extension, then create them again (docs/upgrade.md).';
    END IF;
END
$awa_dependents_check$;

-- Grants of the database's own roles on what this update replaces by DROP and CREATE (the
-- functions whose arguments or result changed, and awa.lease_claims) are noted now and
-- listed at the end in a WARNING, with the statements that give them again. The update does
-- not give them itself: a grant made by an extension's script becomes one of its initial
-- privileges, which pg_dump leaves out, so a restore would lose it without a word.
SELECT pg_catalog.set_config('awa_update.grants', coalesce(pg_catalog.jsonb_agg(g)::text, '[]'), true)
  FROM (SELECT 'function' AS kind, p.oid, p.proname::text AS name, p.proowner AS owner, a.grantee,
               a.privilege_type, a.is_grantable
          FROM pg_catalog.pg_proc p, pg_catalog.aclexplode(p.proacl) a
         WHERE p.pronamespace = 'awa'::pg_catalog.regnamespace
        UNION ALL
        SELECT 'table', c.oid, c.relname::text, c.relowner, a.grantee, a.privilege_type, a.is_grantable
          FROM pg_catalog.pg_class c, pg_catalog.aclexplode(c.relacl) a
         WHERE c.relnamespace = 'awa'::pg_catalog.regnamespace) g
 WHERE g.grantee <> g.owner
   AND g.grantee NOT IN (SELECT r.oid FROM pg_catalog.pg_roles r WHERE r.rolname IN ('awa_producer', 'awa_worker', 'awa_admin'));

-- Every table lock this update needs, taken at once before anything changes: producers and
-- workers then wait for the update instead of deadlocking with it. A try that has to wait
-- behind an open transaction gives up after 200 ms, releases what it took and tries again, so
-- the update never holds one table while queueing for another. Its deadlock check runs
-- first (50 ms), so in a cycle with a client that waits for one of its tables the update is
-- the one that gives up and tries again, whatever the server's deadlock_timeout. The
-- caller's lock_timeout, when set, bounds the whole: past it the update fails (55P03).
DO $$
DECLARE
    v_lock_timeout text := pg_catalog.current_setting('lock_timeout');
    v_deadlock_timeout text := pg_catalog.current_setting('deadlock_timeout');
    v_give_up timestamptz := CASE WHEN v_lock_timeout::interval > interval '0'
                                  THEN pg_catalog.clock_timestamp() + v_lock_timeout::interval END;
BEGIN
    LOOP
        BEGIN
            PERFORM pg_catalog.set_config('lock_timeout', '200ms', true);
            PERFORM pg_catalog.set_config('deadlock_timeout', '50ms', true);
            LOCK TABLE awa.queue_meta, awa.plane_settings, awa.storage_transition_state, awa.queue_enqueue_heads,
                       awa.queue_claim_heads, awa.deferred_jobs, awa.queue_ring_state, awa.queue_ring_slots,
                       awa.claim_ring_state, awa.claim_ring_slots, awa.lease_ring_state, awa.lease_ring_slots,
                       awa.ready_entries, awa.done_entries, awa.leases, awa.lease_claims,
                       awa.lease_claim_closures, awa.attempt_state, awa.dlq_entries, awa.job_unique_claims
                IN ACCESS EXCLUSIVE MODE;
            EXIT;
        EXCEPTION WHEN lock_not_available OR deadlock_detected THEN
            IF pg_catalog.clock_timestamp() > v_give_up THEN
                RAISE EXCEPTION 'the update could not take its table locks within lock_timeout (%)', v_lock_timeout
                    USING ERRCODE = '55P03',
                          HINT = 'A transaction holds one of the extension''s tables: end it, or update in a quieter moment.';
            END IF;
            PERFORM pg_catalog.pg_sleep(0.02 + random() * 0.05);
        END;
    END LOOP;
    PERFORM pg_catalog.set_config('lock_timeout', v_lock_timeout, true);
    PERFORM pg_catalog.set_config('deadlock_timeout', v_deadlock_timeout, true);
END
$$;

-- Every key of a table holding job or attempt rows contains the queue, so that a distributed
-- engine can place a queue's rows on one node (docs/design.md, "Keys"); it comes last where
-- look-ups by id alone (a call without its queue) must keep using the key. The tables that
-- had no queue column get one, filled from the job's rows; a row whose job or attempt is gone
-- (a heartbeat, closure or unique claim nothing reads any more) goes. Unique job keys become
-- per queue: adding the queue to the key only relaxes it, so no row conflicts.
ALTER TABLE awa.deferred_jobs DROP CONSTRAINT deferred_jobs_pkey,
    ADD CONSTRAINT deferred_jobs_pkey PRIMARY KEY (job_id, queue);
ALTER TABLE awa.dlq_entries DROP CONSTRAINT dlq_entries_pkey,
    ADD CONSTRAINT dlq_entries_pkey PRIMARY KEY (job_id, queue);
ALTER TABLE awa.attempt_state ADD COLUMN queue text;
UPDATE awa.attempt_state a
   SET queue = coalesce((SELECT c.queue FROM awa.lease_claims c WHERE c.job_id = a.job_id AND c.run_lease = a.run_lease LIMIT 1),
                        (SELECT l.queue FROM awa.leases l WHERE l.job_id = a.job_id AND l.run_lease = a.run_lease LIMIT 1),
                        (SELECT r.queue FROM awa.ready_entries r WHERE r.job_id = a.job_id LIMIT 1));
DELETE FROM awa.attempt_state WHERE queue IS NULL;
ALTER TABLE awa.attempt_state ALTER COLUMN queue SET NOT NULL, DROP CONSTRAINT attempt_state_pkey,
    ADD CONSTRAINT attempt_state_pkey PRIMARY KEY (job_id, run_lease, queue);
ALTER TABLE awa.lease_claim_closures ADD COLUMN queue text;
UPDATE awa.lease_claim_closures x
   SET queue = coalesce((SELECT c.queue FROM awa.lease_claims c
                          WHERE c.claim_slot = x.claim_slot AND c.job_id = x.job_id AND c.run_lease = x.run_lease LIMIT 1),
                        (SELECT r.queue FROM awa.ready_entries r WHERE r.job_id = x.job_id LIMIT 1));
DELETE FROM awa.lease_claim_closures WHERE queue IS NULL;
ALTER TABLE awa.lease_claim_closures ALTER COLUMN queue SET NOT NULL, DROP CONSTRAINT lease_claim_closures_pkey,
    ADD CONSTRAINT lease_claim_closures_pkey PRIMARY KEY (claim_slot, job_id, run_lease, queue);
ALTER TABLE awa.job_unique_claims ADD COLUMN queue text;
-- A claim goes with its job's queue now, as awa.jobs (1.0) shows it: a job dead-lettered and
-- retried into another queue, or moved, left its first ready rows behind in the old one.
-- One read of the view, not one per claim.
UPDATE awa.job_unique_claims u
   SET queue = j.queue
  FROM (SELECT DISTINCT ON (v.id) v.id, v.queue FROM awa.jobs v ORDER BY v.id) j
 WHERE j.id = u.job_id;
DELETE FROM awa.job_unique_claims WHERE queue IS NULL;
ALTER TABLE awa.job_unique_claims ALTER COLUMN queue SET NOT NULL;
DROP INDEX awa.idx_awa_jobs_unique;
CREATE UNIQUE INDEX idx_awa_jobs_unique ON awa.job_unique_claims (queue, unique_key);

-- Retained failed terminal rows live in their own partition (ready_slot -1, not a ring
-- slot): prune copies a failed row here once, with its body, and never again.
CREATE TABLE awa.done_entries_retained PARTITION OF awa.done_entries FOR VALUES IN (-1);
GRANT SELECT ON awa.done_entries_retained TO awa_admin;

-- The result of a completed job kept past its ring slot (its completion batch goes).
ALTER TABLE awa.done_entries ADD COLUMN result jsonb;
COMMENT ON COLUMN awa.done_entries.result IS 'The result of a completed job kept past its ring slot (retention buckets); NULL otherwise (a completion''s result is in its completion batch).';

-- Retention buckets (docs/maintenance.md, "Retention"): finished jobs of a queue with a
-- retention (awa.set_queue_retention) that outlive their ring slot are copied by prune, once
-- and with their body and result, into the bucket of done_entries that expires after them
-- (ready_slot -2 - bucket); a bucket is truncated whole once its expiry has passed
-- (awa.expire_retention), never a row at a time. expires_at NULL: the bucket is free.
CREATE TABLE awa.retention_buckets (
    bucket integer PRIMARY KEY CHECK (bucket BETWEEN 0 AND 15),
    expires_at timestamptz);
INSERT INTO awa.retention_buckets (bucket) SELECT b FROM generate_series(0, 15) b;
SELECT pg_catalog.pg_extension_config_dump('awa.retention_buckets', '');
GRANT SELECT ON awa.retention_buckets TO awa_admin;
COMMENT ON TABLE awa.retention_buckets IS 'Retention buckets of done_entries (ready_slot -2 - bucket): when each expires (NULL: free).';
DO $$
BEGIN
    FOR b IN 0..15 LOOP
        EXECUTE format('CREATE TABLE awa.%I PARTITION OF awa.done_entries FOR VALUES IN (%s)',
                       'done_entries_expiring_' || b, -2 - b);
        EXECUTE format('GRANT SELECT ON awa.%I TO awa_admin', 'done_entries_expiring_' || b);
        PERFORM pg_catalog.pg_extension_config_dump(format('awa.%I', 'done_entries_expiring_' || b)::regclass, '');
        EXECUTE format('COMMENT ON TABLE awa.%I IS %L', 'done_entries_expiring_' || b,
                       format('Retention bucket %s of awa.done_entries (ready_slot %s): finished jobs kept past their ring slot.', b, -2 - b));
    END LOOP;
END
$$;

-- Lane-first keys. Inside a ring partition the slot column is one constant, so the 1.0 key
-- (slot, queue, priority, enqueue_shard, lane_seq) and the lane index (queue, priority,
-- enqueue_shard, lane_seq) were the same order twice, and every row paid two index entries
-- for one. The key now leads with the lane and ends with the slot (a key of a partitioned
-- table must contain its partition column): it serves the identity look-ups and the ordered
-- lane scans, and the lane indexes go. The column sets, and so what each key makes
-- unique, do not change. (Receipts move to claim batches, below.)
ALTER TABLE awa.ready_entries DROP CONSTRAINT ready_entries_pkey,
    ADD CONSTRAINT ready_entries_pkey PRIMARY KEY (queue, priority, enqueue_shard, lane_seq, ready_slot);
DROP INDEX awa.ready_entries_lane_shard_idx;
ALTER TABLE awa.done_entries DROP CONSTRAINT done_entries_pkey,
    ADD CONSTRAINT done_entries_pkey PRIMARY KEY (queue, priority, enqueue_shard, lane_seq, ready_slot);
DROP INDEX awa.done_entries_lane_shard_idx;
ALTER TABLE awa.leases DROP CONSTRAINT leases_pkey,
    ADD CONSTRAINT leases_pkey PRIMARY KEY (queue, priority, enqueue_shard, lane_seq, lease_slot);
DROP INDEX awa.leases_lane_shard_idx;
-- The job index of the terminal rows stays whole: a completion writes no terminal row any
-- more (awa.completion_batches below), so the rows it indexes are the rare exits' and 1.0's
-- completions, and every look-up by id has an index condition, whatever the planner
-- estimates of a table that is mostly empty.

-- Completions, one row per (completion call, lane, block of 64 lane_seqs): the completed
-- attempts of the block by their offsets in it (lane_seq - 64 * lane_block, 0..63), in lane
-- order, and their claim times. A success writes no row of its own: a completion of ten
-- jobs of one lane appends one row, not ten.
-- A ready row is claimed once, so the attempt that ran it is named by the row itself: job
-- id, attempt (ready attempt + 1) and run_lease (ready run_lease + 1) are read from the
-- ready row (awa._batch_completions), not stored again. The block (lane_seq / 64) bounds
-- every look-up of one attempt to the few rows of its block, found by the key; the arrays
-- are read only there. Partitioned by queue-ring slot like the ready rows they name, and
-- pruned with them; awa.drop_queue deletes a queue's batches, whose lane numbers a queue
-- created again would reuse. Failed and cancelled attempts keep their per-job done_entries
-- rows (the rare exits).
CREATE TABLE awa.completion_batches (
    ready_slot integer NOT NULL,
    ready_generation bigint NOT NULL,
    queue text NOT NULL,
    priority smallint NOT NULL,
    enqueue_shard smallint NOT NULL,
    lane_block bigint NOT NULL,
    lane_offsets smallint[] NOT NULL,
    attempted_at timestamptz[] NOT NULL,
    finalized_at timestamptz NOT NULL DEFAULT clock_timestamp(),
    results jsonb[])
    PARTITION BY LIST (ready_slot);
CREATE INDEX completion_batches_block_idx ON awa.completion_batches (queue, priority, enqueue_shard, lane_block, ready_slot);
GRANT SELECT ON awa.completion_batches TO awa_admin;

-- One row per completed attempt of awa.completion_batches, with the attempt's identity read
-- from its ready row (internal; what readers of many attempts join with). Each ready row is
-- matched with the batch of its block (lane_seq / 64, the block's range spelled out, as in
-- awa._open_receipts), never with every batch of its lane: a join on the lane alone paired
-- every ready row of a slot with every completion batch of its lane. A reader of one job
-- starts from the ready rows' job index; a reader of a slot from its batches.
CREATE VIEW awa._batch_completions AS
    SELECT b.ready_slot, b.ready_generation, b.queue, b.priority, b.enqueue_shard, b.lane_block,
           r.lane_seq, r.job_id, r.run_lease + 1 AS run_lease, (r.attempt + 1)::smallint AS attempt,
           b.attempted_at[x.k] AS attempted_at, b.finalized_at
      FROM awa.completion_batches b
      JOIN awa.ready_entries r
        ON r.queue = b.queue AND r.priority = b.priority AND r.enqueue_shard = b.enqueue_shard
       AND r.ready_slot = b.ready_slot AND r.ready_generation = b.ready_generation
       AND r.lane_seq / 64 = b.lane_block AND r.lane_seq BETWEEN b.lane_block * 64 AND b.lane_block * 64 + 63
     CROSS JOIN LATERAL (SELECT array_position(b.lane_offsets, (r.lane_seq % 64)::smallint) AS k) x
     WHERE x.k IS NOT NULL;
COMMENT ON VIEW awa._batch_completions IS 'Internal: one row per completed attempt of awa.completion_batches.';
GRANT SELECT ON awa._batch_completions TO awa_admin;

-- Every attempt that ended in a terminal state, one row each: the terminal rows (failed,
-- cancelled, and completions of 1.0) and the completions in batches (internal; for readers
-- of many attempts and for checks).
CREATE VIEW awa._terminal_attempts AS
    SELECT d.ready_slot, d.ready_generation, d.job_id, d.queue, d.priority, d.enqueue_shard, d.lane_seq, d.state,
           d.attempt, d.run_lease, d.attempted_at, d.finalized_at
      FROM awa.done_entries d
    UNION ALL
    SELECT b.ready_slot, b.ready_generation, b.job_id, b.queue, b.priority, b.enqueue_shard, b.lane_seq,
           'completed'::awa.job_state, b.attempt, b.run_lease, b.attempted_at, b.finalized_at
      FROM awa._batch_completions b;
COMMENT ON VIEW awa._terminal_attempts IS 'Internal: every attempt that ended in a terminal state (terminal rows and batch completions).';
GRANT SELECT ON awa._terminal_attempts TO awa_admin;

-- Receipts, one row per (claim call, lane, ready slot, block of 64 lane_seqs): the attempts a
-- claim took from one block of one lane by their offsets in it (lane_seq - 64 * lane_block,
-- 0..63), in lane order, and their effective priorities. A claim of ten jobs of one lane
-- appends one row (two when its window crosses a block), not ten. Job id, attempt, run
-- lease and max_attempts of each attempt are its ready row's (attempt and run_lease plus
-- one), which a claim reads and never changes: they are not stored again. The receipt of one
-- attempt is found through its ready row (the ready rows' job index gives the lane, the
-- lane_seq and the ready slot), then by the key of its block and by its offset's position in
-- the arrays, like a completion in awa.completion_batches. The k-th attempt of a row has
-- receipt id receipt_base + k - 1: a claim draws one value of awa.receipt_id_seq per row,
-- and the sequence steps by 64, the most attempts a row can hold. A closer locks the row of
-- the attempts it ends (FOR UPDATE), rows in key order, so batch-mates' closers queue for
-- each other and exactly one closer of each attempt wins (awa._open_receipts). A closure,
-- a completion batch, a terminal row or the absence of the ready row ends a receipt; the
-- row itself is never updated. Partitioned by claim-ring slot, pruned with the closures.
CREATE TABLE awa.claim_batches (
    claim_slot integer NOT NULL,
    receipt_base bigint NOT NULL,
    queue text NOT NULL,
    priority smallint NOT NULL,
    enqueue_shard smallint NOT NULL,
    lane_block bigint NOT NULL,
    ready_slot integer NOT NULL,
    ready_generation bigint NOT NULL,
    claimed_at timestamptz NOT NULL,
    deadline_at timestamptz,
    lane_offsets smallint[] NOT NULL,
    effective_priorities smallint[] NOT NULL)
    PARTITION BY LIST (claim_slot);
-- The partitions of both batch tables: 16 queue-ring slots of completions, 8 claim-ring
-- slots of claims.
DO $$
DECLARE
    t record;
BEGIN
    FOR t IN SELECT * FROM (VALUES ('completion_batches', 15), ('claim_batches', 7)) AS v(tbl, last_slot) LOOP
        FOR s IN 0..t.last_slot LOOP
            EXECUTE format('CREATE TABLE awa.%I PARTITION OF awa.%I FOR VALUES IN (%s)', t.tbl || '_' || s, t.tbl, s);
            EXECUTE format('GRANT SELECT ON awa.%I TO awa_admin', t.tbl || '_' || s);
        END LOOP;
    END LOOP;
END
$$;
CREATE INDEX claim_batches_block_idx ON awa.claim_batches (queue, priority, enqueue_shard, lane_block, ready_slot);
CREATE INDEX claim_batches_deadline_idx ON awa.claim_batches (deadline_at) WHERE deadline_at IS NOT NULL;
GRANT SELECT ON awa.claim_batches TO awa_admin;

-- How far deadline rescue has read the claim batches (one row). Every claim batch whose
-- deadline_at is below deadline_watermark has no open attempt and never will have one again,
-- so a pass reads only the batches from there on (each batch's attempts are tested by the few
-- passes after its deadline, not by every pass until its slot is pruned). A pass proposes
-- deadline_candidate (its own start, or the earliest deadline it left open) with the snapshot
-- it read under (candidate_snapshot) and the next transaction id after it (candidate_next);
-- a later pass makes it the watermark once every transaction running at that snapshot (its
-- list, and the ids from its xmax up to candidate_next) has ended, since only those can still
-- commit a batch whose deadline is below it (a claim holds its transaction id before it
-- reads the clock).
CREATE TABLE awa.rescue_progress (
    only_row boolean PRIMARY KEY DEFAULT true CHECK (only_row),
    deadline_watermark timestamptz NOT NULL DEFAULT '-infinity',
    deadline_candidate timestamptz,
    candidate_snapshot pg_snapshot,
    candidate_next xid8,
    stale_cursor_at timestamptz,
    stale_cursor_slot integer,
    stale_cursor_base bigint);
INSERT INTO awa.rescue_progress DEFAULT VALUES;
GRANT SELECT ON awa.rescue_progress TO awa_admin;
COMMENT ON TABLE awa.rescue_progress IS 'Deadline rescue: claim batches with a deadline below deadline_watermark have no open attempt; heartbeat rescue: the claim batch (claimed_at, claim_slot, receipt_base) its next pass goes on after, NULL from the start (one row).';

-- The receipts of 1.0, one row each, become claim batches of one attempt with the same
-- receipt id; receipt ids drawn from now on are above every one of them. (materialized_at
-- was never set by any release; a receipt that carried one was not open, and gets the
-- closure that says so.)
INSERT INTO awa.claim_batches (claim_slot, ready_slot, ready_generation, queue, priority, enqueue_shard, lane_block,
                               receipt_base, claimed_at, deadline_at, lane_offsets, effective_priorities)
SELECT c.claim_slot, c.ready_slot, c.ready_generation, c.queue, c.priority, c.enqueue_shard, c.lane_seq / 64,
       c.receipt_id, c.claimed_at, c.deadline_at, ARRAY[(c.lane_seq % 64)::smallint], ARRAY[c.effective_priority]
  FROM awa.lease_claims c;
INSERT INTO awa.lease_claim_closures (claim_slot, job_id, run_lease, outcome, closed_at, queue)
SELECT c.claim_slot, c.job_id, c.run_lease, 'materialized', c.materialized_at, c.queue
  FROM awa.lease_claims c WHERE c.materialized_at IS NOT NULL
ON CONFLICT DO NOTHING;
SELECT pg_catalog.setval('awa.receipt_id_seq', greatest(1, (SELECT max(c.receipt_id) FROM awa.lease_claims c)));
ALTER SEQUENCE awa.receipt_id_seq INCREMENT BY 64;
-- The table goes once nothing of 1.0 reads it any more (awa.jobs is redefined below).
ALTER TABLE awa.lease_claims RENAME TO lease_claims_1_0;

-- Every receipt whose ready row is still stored, one row per claimed attempt (the claim
-- batches unnested, each attempt's identity read from its ready row): what the receipts
-- table of 1.0 held, minus materialized_at, plus the block and the batch's receipt_base (its
-- identity, and the order in which closers of several attempts lock). A receipt whose ready
-- row has gone (its queue-ring slot pruned after it closed, its completed job deleted) is
-- not listed. Each ready row is matched with the batch of its block, as in awa._open_receipts
-- (a join on the lane alone paired every ready row of a slot with every batch of its lane).
CREATE VIEW awa.lease_claims AS
    SELECT b.claim_slot, b.receipt_base + u.k - 1 AS receipt_id, r.job_id, r.run_lease + 1 AS run_lease,
           b.ready_slot, b.ready_generation, b.queue, b.priority, b.effective_priorities[u.k] AS effective_priority,
           (r.attempt + 1)::smallint AS attempt, r.max_attempts, r.lane_seq, b.enqueue_shard, b.claimed_at,
           b.deadline_at, b.lane_block, b.receipt_base
      FROM awa.claim_batches b
      JOIN awa.ready_entries r
        ON r.queue = b.queue AND r.priority = b.priority AND r.enqueue_shard = b.enqueue_shard
       AND r.ready_slot = b.ready_slot AND r.ready_generation = b.ready_generation
       AND r.lane_seq / 64 = b.lane_block AND r.lane_seq BETWEEN b.lane_block * 64 AND b.lane_block * 64 + 63
     CROSS JOIN LATERAL (SELECT array_position(b.lane_offsets, (r.lane_seq % 64)::smallint) AS k) u
     WHERE u.k IS NOT NULL;
COMMENT ON VIEW awa.lease_claims IS
    'Receipts mode: one row per recorded attempt (receipt) whose ready row is still stored (awa.claim_batches unnested).';
GRANT SELECT ON awa.lease_claims TO awa_admin;

-- Claim cursors without a hot row. A claim no longer updates its lane's head: it locks the
-- head (FOR UPDATE SKIP LOCKED, as before) and appends a claim mark, the lane's cursor after
-- this claim and the run_at hint of the next waiting row. A lane's cursor is the greater of
-- its head's claim_seq and its latest mark (awa.lane_cursors); maintenance moves the head to
-- the latest mark and deletes the marks it has passed (awa.fold_claim_marks), but not while a
-- long transaction holds back vacuum. So the claim path writes only new rows, and a held
-- snapshot leaves no dead version of a hot row behind (docs/design.md §4, "Claim cursor").
CREATE TABLE awa.claim_marks (
    queue text NOT NULL,
    priority smallint NOT NULL,
    enqueue_shard smallint NOT NULL,
    claim_seq bigint NOT NULL,
    head_run_at timestamptz,
    PRIMARY KEY (queue, priority, enqueue_shard, claim_seq))
    WITH (autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_threshold = 1000);
SELECT pg_catalog.pg_extension_config_dump('awa.claim_marks', '');
COMMENT ON TABLE awa.claim_marks IS
    'One row per claim of a lane: the lane''s cursor after it and the run_at hint of the next row; folded into queue_claim_heads by maintenance.';

-- A lane's marks die with its head: a lane dropped and created again starts from its new
-- head, never from an old mark. (A trigger, not a foreign key: a key would be checked on the
-- caller's snapshot, where a REPEATABLE READ claim may not see a head created since.)
CREATE FUNCTION awa._drop_lane_marks() RETURNS trigger
    LANGUAGE plpgsql VOLATILE
    SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    l record;
BEGIN
    -- A statement per lane, naming its queue: on a Citus cluster a statement over a
    -- distributed table cannot join the trigger's transition table.
    FOR l IN SELECT DISTINCT h.queue, h.priority, h.enqueue_shard FROM dropped_heads h LOOP
        DELETE FROM awa.claim_marks k
         WHERE k.queue = l.queue AND k.priority = l.priority AND k.enqueue_shard = l.enqueue_shard;
    END LOOP;
    RETURN NULL;
END
$$;
REVOKE ALL ON FUNCTION awa._drop_lane_marks() FROM PUBLIC;
COMMENT ON FUNCTION awa._drop_lane_marks() IS 'Internal: delete the claim marks of deleted lane heads (trigger).';
CREATE TRIGGER drop_lane_marks AFTER DELETE ON awa.queue_claim_heads
    REFERENCING OLD TABLE AS dropped_heads FOR EACH STATEMENT EXECUTE FUNCTION awa._drop_lane_marks();

-- Every lane's claim cursor and run_at hint: the head's, or the lane's latest claim mark
-- when it is further. A claim commits its receipts and its mark together, so one snapshot
-- sees both or neither. Deciding under a head lock at any isolation level: awa._lane_cursor.
-- On a Citus cluster awa.citus_setup() replaces it by the same rows in a form Citus routes by
-- queue (the latest marks from a DISTINCT ON subquery, not a lateral one per lane).
CREATE VIEW awa.lane_cursors AS
    SELECT h.queue, h.priority, h.enqueue_shard, greatest(h.claim_seq, m.claim_seq) AS claim_seq,
           CASE WHEN m.claim_seq > h.claim_seq THEN m.head_run_at ELSE h.head_run_at END AS head_run_at
      FROM awa.queue_claim_heads h
      LEFT JOIN LATERAL (
          SELECT k.claim_seq, k.head_run_at FROM awa.claim_marks k
           WHERE k.queue = h.queue AND k.priority = h.priority AND k.enqueue_shard = h.enqueue_shard
           ORDER BY k.claim_seq DESC LIMIT 1) m ON true;
COMMENT ON VIEW awa.lane_cursors IS
    'Claim cursor (claim_seq) and run_at hint of every lane: its head, or its latest claim mark when further.';
GRANT SELECT ON awa.claim_marks, awa.lane_cursors TO awa_admin;
GRANT SELECT ON awa.lane_cursors TO pg_monitor;

-- The open receipts: running attempts of receipts mode. A receipt (awa.lease_claims, one
-- attempt of a claim batch) ends with a closure (fail, retry, snooze, dead letter, cancel,
-- rescue, drop), or, for a success, with its entry in a completion batch alone
-- (awa.completion_batches): complete_jobs writes no closure. (A 1.0 completion ended it
-- with a completed terminal row.) Every closer locks the claim batch of the receipt (FOR
-- UPDATE; closers of several attempts lock their batches in key order) and decides on the
-- latest committed state after the lock, so exactly one wins (docs/design.md §5). A receipt
-- whose ready row is gone (its queue slot pruned, which needs every receipt of the slot
-- ended first; its job deleted) is not open either. A ready row is claimed once, so its
-- attempt (job id, attempt + 1, run_lease + 1) is read from it. A queue dropped and created
-- again numbers its lanes from 1: awa.drop_queue deletes the old queue's claim and
-- completion batches, so that none of them takes a new job's row for its own.
-- Every reader of "running" goes through this view. It starts from the ready rows and finds
-- each one's attempt in the claim batch of its block by position (as the C++ statements do,
-- AWA_RECEIPT_FROM_READY in src/receipt_sql.hpp), so a reader of one job starts from the
-- ready rows' job index; the block's lane_seq range is spelled out too, so a reader of a
-- claim slot starts from its batches and reads each block's ready rows by key. The other
-- tests are plain NOT EXISTS, so a reader of many receipts may join them by hash. `ready`
-- is the whole ready row, for awa.jobs.
CREATE VIEW awa._open_receipts AS
    SELECT b.claim_slot, b.receipt_base + x.k - 1 AS receipt_id, r.job_id, r.run_lease + 1 AS run_lease,
           b.ready_slot, b.ready_generation, b.queue, b.priority, b.effective_priorities[x.k] AS effective_priority,
           (r.attempt + 1)::smallint AS attempt, r.max_attempts, r.lane_seq, b.enqueue_shard,
           b.claimed_at, b.deadline_at, b.lane_block, b.receipt_base, r AS ready
      FROM awa.claim_batches b
      JOIN awa.ready_entries r
        ON r.queue = b.queue AND r.priority = b.priority AND r.enqueue_shard = b.enqueue_shard
       AND r.ready_slot = b.ready_slot AND r.ready_generation = b.ready_generation
       AND r.lane_seq / 64 = b.lane_block AND r.lane_seq BETWEEN b.lane_block * 64 AND b.lane_block * 64 + 63
     CROSS JOIN LATERAL (SELECT array_position(b.lane_offsets, (r.lane_seq % 64)::smallint) AS k) x
     WHERE x.k IS NOT NULL
       AND NOT EXISTS (SELECT 1 FROM awa.done_entries d
                        WHERE d.queue = r.queue AND d.priority = r.priority AND d.enqueue_shard = r.enqueue_shard
                          AND d.lane_seq = r.lane_seq AND d.ready_slot = r.ready_slot AND d.job_id = r.job_id
                          AND d.run_lease = r.run_lease + 1)
       AND NOT EXISTS (SELECT 1 FROM awa.completion_batches f
                        WHERE f.queue = r.queue AND f.priority = r.priority AND f.enqueue_shard = r.enqueue_shard
                          AND f.lane_block = r.lane_seq / 64 AND f.ready_slot = r.ready_slot
                          AND f.ready_generation = r.ready_generation
                          AND (r.lane_seq % 64)::smallint = ANY (f.lane_offsets))
       AND NOT EXISTS (SELECT 1 FROM awa.lease_claim_closures z
                        WHERE z.claim_slot = b.claim_slot AND z.job_id = r.job_id AND z.run_lease = r.run_lease + 1
                          AND z.queue = r.queue);
COMMENT ON VIEW awa._open_receipts IS
    'Internal: receipts of running attempts (no closure, ready row present, no terminal row or completion for the attempt).';
GRANT SELECT ON awa._open_receipts TO awa_admin;

-- Claim batches that hold at least one open receipt (awa._open_receipts). A batch every
-- lane offset of which a completion batch of its block names holds none, and costs one
-- probe; only the others are tested receipt by receipt (OFFSET 0 keeps that test a probe
-- per such batch: joined, it read every receipt of the ring). Asked of a claim slot or a
-- ready slot by prune, it reads the slot's batches, not their receipts: a claim-ring slot
-- of 339 completed batches (10 s of 1,000 jobs/s) took 116 ms through awa._open_receipts,
-- 5 ms here, and the maintenance pass that asked it held back jobs enqueued meanwhile.
-- The probe names its block's lane_seq range on the outer batch: the view's own bound is on
-- its inner batch, so the planner read every ready row of the lane in the slot for each
-- batch tested (37-170 ms a batch, 14-101 s a prune's check of a slot of 500,000 rows; a
-- 64-row range of the primary key now, 0.17 ms).
CREATE VIEW awa._open_claim_batches AS
    SELECT b.* FROM awa.claim_batches b
     WHERE NOT b.lane_offsets <@ ARRAY(
               SELECT o FROM awa.completion_batches f CROSS JOIN LATERAL pg_catalog.unnest(f.lane_offsets) o
                WHERE f.queue = b.queue AND f.priority = b.priority AND f.enqueue_shard = b.enqueue_shard
                  AND f.lane_block = b.lane_block AND f.ready_slot = b.ready_slot
                  AND f.ready_generation = b.ready_generation)
       AND EXISTS (SELECT 1 FROM awa._open_receipts c
                    WHERE c.claim_slot = b.claim_slot AND c.receipt_base = b.receipt_base
                      AND c.queue = b.queue AND c.priority = b.priority AND c.enqueue_shard = b.enqueue_shard
                      AND c.lane_block = b.lane_block AND c.ready_slot = b.ready_slot
                      AND c.lane_seq BETWEEN b.lane_block * 64 AND b.lane_block * 64 + 63
                    OFFSET 0);
COMMENT ON VIEW awa._open_claim_batches IS
    'Internal: claim batches holding at least one open receipt, found batch by batch.';
GRANT SELECT ON awa._open_claim_batches TO awa_admin;

-- A lane's claim cursor on the latest committed state, whatever the caller's isolation
-- level: what an admin path reads after locking the lane's head (no claim can move the
-- cursor then). NULL for an unknown lane.
CREATE FUNCTION awa._lane_cursor(p_queue text, p_priority smallint, p_shard smallint) RETURNS bigint
    AS 'MODULE_PATHNAME', 'awa_lane_cursor'
    LANGUAGE C VOLATILE STRICT PARALLEL UNSAFE
    SET search_path = pg_catalog, pg_temp;
REVOKE ALL ON FUNCTION awa._lane_cursor(text, smallint, smallint) FROM PUBLIC;
COMMENT ON FUNCTION awa._lane_cursor(text, smallint, smallint) IS
    'Internal: a lane''s claim cursor on the latest committed state (after locking its head).';

-- An admin or maintenance path locked lane heads outside a claim (NULL: of any queue): the
-- transaction's end wakes the claims waiting for a held head (awa_shard.claim_wait), as a
-- claim's end does. Nothing without the preload.
CREATE FUNCTION awa._heads_locked(p_queue text) RETURNS void
    AS 'MODULE_PATHNAME', 'awa_heads_locked'
    LANGUAGE C VOLATILE PARALLEL UNSAFE
    SET search_path = pg_catalog, pg_temp;
REVOKE ALL ON FUNCTION awa._heads_locked(text) FROM PUBLIC;
COMMENT ON FUNCTION awa._heads_locked(text) IS
    'Internal: this transaction locked lane heads of the queue (NULL: any) outside a claim; its end wakes waiting claims.';

-- The write slot of a ring ('queue', 'claim' or 'lease') for this transaction: its
-- partitions are locked so prune cannot free the slot before this transaction ends.
CREATE FUNCTION awa._ring_write_slot(p_ring text, OUT slot integer, OUT generation bigint)
    AS 'MODULE_PATHNAME', 'awa_ring_write_slot'
    LANGUAGE C VOLATILE PARALLEL UNSAFE
    SET search_path = pg_catalog, pg_temp;
REVOKE ALL ON FUNCTION awa._ring_write_slot(text) FROM PUBLIC;

-- The live arc of a ring: the slots that can hold rows, as two inclusive ranges (an empty
-- range has lo > hi). Readers that name it let the executor skip the freed partitions.
CREATE FUNCTION awa._ring_live_arc(p_ring text, OUT lo1 integer, OUT hi1 integer, OUT lo2 integer, OUT hi2 integer)
    AS 'MODULE_PATHNAME', 'awa_ring_live_arc'
    LANGUAGE C VOLATILE PARALLEL UNSAFE
    SET search_path = pg_catalog, pg_temp;
REVOKE ALL ON FUNCTION awa._ring_live_arc(text) FROM PUBLIC;

-- A prune freed a slot of a ring in this transaction: a write slot this transaction fenced
-- there is forgotten (its own locks never kept its own prune out), so its next write fences
-- the live slot instead of writing into the freed one.
CREATE FUNCTION awa._ring_slot_freed(p_ring text, p_slot integer) RETURNS void
    AS 'MODULE_PATHNAME', 'awa_ring_slot_freed'
    LANGUAGE C VOLATILE PARALLEL UNSAFE
    SET search_path = pg_catalog, pg_temp;
REVOKE ALL ON FUNCTION awa._ring_slot_freed(text, integer) FROM PUBLIC;

-- Every write to a ring table (rotation, prune, a restore) opens a ring change that closes
-- when its transaction ends; backends use their cached ring cursors only while no change is
-- open and none has closed since they read them (docs/maintenance.md §2). A statement
-- trigger (every statement, TRUNCATE included) and a row trigger (a logical replication
-- apply worker fires row triggers only), both ENABLE ALWAYS so that they fire in replica
-- sessions too; a table without both enabled that way is never cached.
CREATE FUNCTION awa._ring_changed() RETURNS trigger
    AS 'MODULE_PATHNAME', 'awa_ring_changed'
    LANGUAGE C VOLATILE PARALLEL UNSAFE
    SET search_path = pg_catalog, pg_temp;
REVOKE ALL ON FUNCTION awa._ring_changed() FROM PUBLIC;
COMMENT ON FUNCTION awa._ring_changed() IS 'Internal: statement and row trigger on the ring tables; cached ring cursors are not trusted until this transaction ends.';
DO $$
DECLARE
    t text;
BEGIN
    FOREACH t IN ARRAY ARRAY['queue_ring_state', 'queue_ring_slots', 'claim_ring_state', 'claim_ring_slots',
                             'lease_ring_state', 'lease_ring_slots'] LOOP
        EXECUTE format('CREATE TRIGGER ring_changed AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON awa.%I
                            FOR EACH STATEMENT EXECUTE FUNCTION awa._ring_changed()', t);
        EXECUTE format('CREATE TRIGGER ring_row_changed AFTER INSERT OR UPDATE OR DELETE ON awa.%I
                            FOR EACH ROW EXECUTE FUNCTION awa._ring_changed()', t);
        EXECUTE format('ALTER TABLE awa.%I ENABLE ALWAYS TRIGGER ring_changed', t);
        EXECUTE format('ALTER TABLE awa.%I ENABLE ALWAYS TRIGGER ring_row_changed', t);
    END LOOP;
END
$$;

-- Take ACCESS EXCLUSIVE (with p_share: SHARE ROW EXCLUSIVE, which keeps writers out and lets
-- readers in) on every relation named (schema-qualified, quoted), without ever queueing for
-- long: the first try does not wait at all (NOWAIT); later tries, while p_budget_ms lasts,
-- wait at most lock_timeout (10 ms) each and then step out of the lock queue and sleep.
-- Producers and workers never wait on a prune's lock request longer than one try. A try that
-- PostgreSQL finds deadlocked at once (a lock this transaction already holds is awaited by a
-- writer whose own lock this one would wait for) is a refusal too: the caller steps back.
-- Returns whether the locks are held.
CREATE FUNCTION awa._lock_relations_briefly(p_relations text[], p_budget_ms integer, p_share boolean)
    RETURNS boolean
    LANGUAGE plpgsql VOLATILE
    SET search_path = pg_catalog, pg_temp SET lock_timeout = '10ms'
AS $$
DECLARE
    v_deadline timestamptz := clock_timestamp() + make_interval(secs => p_budget_ms / 1000.0);
    v_sql text := 'LOCK TABLE ' || array_to_string(p_relations, ', ')
                  || CASE WHEN p_share THEN ' IN SHARE ROW EXCLUSIVE MODE' ELSE ' IN ACCESS EXCLUSIVE MODE' END;
    v_first boolean := true;
BEGIN
    LOOP
        BEGIN
            EXECUTE v_sql || CASE WHEN v_first THEN ' NOWAIT' ELSE '' END;
            RETURN true;
        EXCEPTION WHEN lock_not_available THEN
            v_first := false;
        WHEN deadlock_detected THEN
            RETURN false;
        END;
        PERFORM pg_sleep(0.002);
        IF clock_timestamp() >= v_deadline THEN
            RETURN false;
        END IF;
    END LOOP;
END
$$;
REVOKE ALL ON FUNCTION awa._lock_relations_briefly(text[], integer, boolean) FROM PUBLIC;
COMMENT ON FUNCTION awa._lock_relations_briefly(text[], integer, boolean) IS 'Internal: take ACCESS EXCLUSIVE (or SHARE ROW EXCLUSIVE) on relations in short tries, never queueing for long.';

-- awa._lock_relations_briefly on ring partitions awa.<table>, for every table named.
CREATE FUNCTION awa._lock_ring_partitions(p_tables text[], p_budget_ms integer, p_share boolean DEFAULT false)
    RETURNS boolean
    LANGUAGE sql VOLATILE
    SET search_path = pg_catalog, pg_temp
    RETURN awa._lock_relations_briefly(ARRAY(SELECT 'awa.' || quote_ident(t) FROM unnest(p_tables) t),
                                       p_budget_ms, p_share);
REVOKE ALL ON FUNCTION awa._lock_ring_partitions(text[], integer, boolean) FROM PUBLIC;

-- Rotation and prune decide on the latest committed ring state, under the ring's cursor
-- row lock: they refuse to run where a statement does not see that state.
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

-- Rotate the queue ring: seal the current slot and make the next one current, when the
-- current slot holds rows and the next slot is free (pruned). Serialised with prune and
-- other rotations by the cursor row lock, never waiting for it.
-- Returns rotated / skipped_idle / skipped_busy / skipped_concurrent.
CREATE OR REPLACE FUNCTION awa.rotate_queue_ring() RETURNS text
    LANGUAGE plpgsql VOLATILE
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp SET jit = off
AS $$
DECLARE
    st awa.queue_ring_state;
    v_next integer;
BEGIN
    PERFORM awa._require_read_committed('rotate_queue_ring');
    -- On a Citus cluster the shared rings are the coordinator's (docs/scale-out.md).
    IF awa._citus_group() <> 0 THEN
        RETURN 'skipped_not_coordinator';
    END IF;
    BEGIN
        SELECT * INTO st FROM awa.queue_ring_state FOR UPDATE NOWAIT;
    EXCEPTION WHEN lock_not_available THEN
        RETURN 'skipped_concurrent';
    END;
    v_next := (st.current_slot + 1) % st.slot_count;
    IF NOT EXISTS (SELECT 1 FROM awa.ready_entries WHERE ready_slot = st.current_slot) THEN
        RETURN 'skipped_idle';
    END IF;
    IF (SELECT s.generation FROM awa.queue_ring_slots s WHERE s.slot = v_next) >= 0
       OR EXISTS (SELECT 1 FROM awa.ready_entries WHERE ready_slot = v_next)
       OR EXISTS (SELECT 1 FROM awa.done_entries WHERE ready_slot = v_next)
       OR EXISTS (SELECT 1 FROM awa.completion_batches WHERE ready_slot = v_next) THEN
        RETURN 'skipped_busy';
    END IF;
    UPDATE awa.queue_ring_state SET current_slot = v_next, generation = st.generation + 1;
    UPDATE awa.queue_ring_slots SET generation = st.generation + 1, moved_xid = NULL, moved_horizons = NULL WHERE slot = v_next;
    RETURN 'rotated';
END
$$;

-- The retention bucket (its ready_slot in done_entries, -2 - bucket) for rows that may go at
-- p_deadline; NULL: the retained partition (-1), kept until retried or deleted. A bucket
-- already expiring at p_deadline, else a free one, else (all 16 in use) the one expiring
-- next after p_deadline, else the latest one, its expiry moved to p_deadline: a row never
-- goes before its deadline, only later when more deadlines are live than there are buckets.
-- Only prune calls it (serialised by the queue ring's cursor row); expiry skips the bucket
-- rows it locks, and it skips those expiry locks (when every one is, the prune steps back:
-- 'skipped_locked').
CREATE FUNCTION awa._retention_bucket(p_deadline timestamptz) RETURNS integer
    LANGUAGE plpgsql VOLATILE
    SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_bucket integer;
BEGIN
    IF p_deadline IS NULL THEN
        RETURN -1;
    END IF;
    SELECT b.bucket INTO v_bucket FROM awa.retention_buckets b
     WHERE b.expires_at = p_deadline ORDER BY b.bucket LIMIT 1 FOR SHARE SKIP LOCKED;
    IF v_bucket IS NULL THEN
        UPDATE awa.retention_buckets b SET expires_at = p_deadline
         WHERE b.bucket = (SELECT f.bucket FROM awa.retention_buckets f WHERE f.expires_at IS NULL
                            ORDER BY f.bucket LIMIT 1 FOR UPDATE SKIP LOCKED)
        RETURNING b.bucket INTO v_bucket;
    END IF;
    IF v_bucket IS NULL THEN
        SELECT b.bucket INTO v_bucket FROM awa.retention_buckets b
         WHERE b.expires_at > p_deadline ORDER BY b.expires_at, b.bucket LIMIT 1 FOR SHARE SKIP LOCKED;
    END IF;
    IF v_bucket IS NULL THEN
        UPDATE awa.retention_buckets b SET expires_at = p_deadline
         WHERE b.bucket = (SELECT l.bucket FROM awa.retention_buckets l WHERE l.expires_at IS NOT NULL
                            ORDER BY l.expires_at DESC, l.bucket LIMIT 1 FOR UPDATE SKIP LOCKED)
        RETURNING b.bucket INTO v_bucket;
    END IF;
    IF v_bucket IS NULL THEN
        -- Every bucket row is locked (by expiry): the prune steps back and tries again.
        RAISE EXCEPTION USING ERRCODE = 'AWA01', MESSAGE = 'skipped_locked';
    END IF;
    RETURN -2 - v_bucket;
END
$$;
REVOKE ALL ON FUNCTION awa._retention_bucket(timestamptz) FROM PUBLIC;
COMMENT ON FUNCTION awa._retention_bucket(timestamptz) IS 'Internal: the retention bucket (ready_slot) for rows that may go at a deadline; -1 (kept) for NULL.';

-- When a row finished at p_finished and kept for p_retention may go: its expiry rounded up
-- to a multiple of the bucket width, a power of two seconds from an eighth to a quarter of
-- the retention (at least 64 s), so a queue's rows share a few buckets and so do queues of
-- similar retentions. NULL when the row has expired by p_now (nothing to keep).
CREATE FUNCTION awa._retention_deadline(p_finished timestamptz, p_retention interval, p_now timestamptz)
    RETURNS timestamptz
    LANGUAGE sql STABLE PARALLEL SAFE
    SET search_path = pg_catalog, pg_temp
    RETURN CASE WHEN p_finished + p_retention > p_now THEN
        to_timestamp((ceil(extract(epoch FROM p_finished + p_retention)
                           / (2 ^ greatest(6, ceil(log(2.0, greatest(extract(epoch FROM p_retention) / 8, 1))))))
                      * (2 ^ greatest(6, ceil(log(2.0, greatest(extract(epoch FROM p_retention) / 8, 1))))))::double precision)
    END;
REVOKE ALL ON FUNCTION awa._retention_deadline(timestamptz, interval, timestamptz) FROM PUBLIC;
COMMENT ON FUNCTION awa._retention_deadline(timestamptz, interval, timestamptz) IS 'Internal: the bucket deadline of a row finished at a time and kept for a retention; NULL when expired.';

-- The finished jobs of a queue slot that outlive it, hydrated with their body (and a
-- completion's result), with the deadline of their bucket (NULL: kept, the default for
-- failed jobs): failed rows (a queue without failed retention keeps them), cancelled rows
-- of a queue with a failed retention, completions (terminal rows and completion batches) of
-- a queue with a completed retention, each only while its retention has not run out at
-- p_now. ready_slot is left to the caller. With p_uncopied, only those without a copy in a
-- retained partition yet (same lane identity and state), tested before they are hydrated:
-- a prune's second read, under the slot's lock, after it copied early.
CREATE FUNCTION awa._retainable(p_slot integer, p_now timestamptz, p_uncopied boolean DEFAULT false)
    RETURNS TABLE (job awa.done_entries, deadline timestamptz)
    LANGUAGE sql STABLE
    SET search_path = pg_catalog, pg_temp SET jit = off
AS $$
    SELECT x, k.deadline
      FROM awa.done_entries d
      LEFT JOIN awa.ready_entries r
        ON r.ready_slot = d.ready_slot AND r.queue = d.queue AND r.priority = d.priority
       AND r.enqueue_shard = d.enqueue_shard AND r.lane_seq = d.lane_seq
      LEFT JOIN awa.queue_meta m ON m.queue = d.queue
     CROSS JOIN LATERAL (SELECT CASE WHEN d.state = 'completed' THEN m.completed_retention
                                     ELSE m.failed_retention END AS retention) t
     CROSS JOIN LATERAL (SELECT awa._retention_deadline(d.finalized_at, t.retention, p_now) AS deadline) k
     CROSS JOIN LATERAL awa._job_row(d, awa._done_job(d, r), NULL) x
     WHERE d.ready_slot = p_slot
       AND ((d.state = 'failed' AND t.retention IS NULL) OR k.deadline IS NOT NULL)
       AND NOT (p_uncopied
                AND EXISTS (SELECT 1 FROM awa.done_entries c
                             WHERE c.ready_slot < 0 AND c.queue = d.queue AND c.priority = d.priority
                               AND c.enqueue_shard = d.enqueue_shard AND c.lane_seq = d.lane_seq
                               AND c.state = d.state))
    UNION ALL
    SELECT x, k.deadline
      FROM awa.completion_batches b
      JOIN awa.queue_meta m ON m.queue = b.queue AND m.completed_retention IS NOT NULL
     CROSS JOIN LATERAL (SELECT awa._retention_deadline(b.finalized_at, m.completed_retention, p_now) AS deadline) k
     CROSS JOIN LATERAL unnest(b.lane_offsets) WITH ORDINALITY AS u(lane_offset, n)
     -- One probe of the ready rows' key per attempt. OFFSET 0 keeps the planner from
     -- flattening the probe into a join on the lane alone, which pairs every ready row of the
     -- slot with every batch of its lane (seen: 20 s for a slot of 21,000 rows and 2,300
     -- batches, on partitions not analyzed yet, with no queue keeping completions).
     CROSS JOIN LATERAL (SELECT e.* FROM awa.ready_entries e
                          WHERE e.queue = b.queue AND e.priority = b.priority AND e.enqueue_shard = b.enqueue_shard
                            AND e.lane_seq = b.lane_block * 64 + u.lane_offset AND e.ready_slot = b.ready_slot
                            AND e.ready_generation = b.ready_generation
                         OFFSET 0) r
     CROSS JOIN LATERAL awa._job_row(NULL::awa.done_entries, awa._job(r),
                                     jsonb_build_object('ready_slot', b.ready_slot, 'ready_generation', b.ready_generation,
                                                        'enqueue_shard', b.enqueue_shard, 'lane_seq', r.lane_seq,
                                                        'state', 'completed', 'attempt', r.attempt + 1,
                                                        'run_lease', r.run_lease + 1, 'attempted_at', b.attempted_at[u.n],
                                                        'finalized_at', b.finalized_at, 'result', b.results[u.n])) x
     WHERE b.ready_slot = p_slot AND k.deadline IS NOT NULL
       AND NOT (p_uncopied
                AND EXISTS (SELECT 1 FROM awa.done_entries c
                             WHERE c.ready_slot < 0 AND c.queue = b.queue AND c.priority = b.priority
                               AND c.enqueue_shard = b.enqueue_shard AND c.lane_seq = b.lane_block * 64 + u.lane_offset
                               AND c.state = 'completed'))
$$;
REVOKE ALL ON FUNCTION awa._retainable(integer, timestamptz, boolean) FROM PUBLIC;
COMMENT ON FUNCTION awa._retainable(integer, timestamptz, boolean) IS 'Internal: the finished jobs of a queue slot its queue keeps past the slot, hydrated, with their bucket deadline.';

-- Copy the finished jobs of a queue slot that outlive it (awa._retainable), with their body
-- and result, to the retained partition (failed jobs kept by default) or to the retention
-- bucket of their deadline, once; returns the rows copied by this call. Once also when a prune
-- calls it twice (early, then under the slot's lock) and the queue's retention changed
-- between the calls: a job with a copy already (same lane identity and state, any retained
-- partition) is not copied again into the bucket of its new deadline. The second call passes
-- p_uncopied, so that it reads and hydrates only what finished since the first (a slot of
-- 140,000 kept completions took 10 s to hydrate again, under the lock).
CREATE FUNCTION awa._retain_finished(p_slot integer, p_uncopied boolean DEFAULT false) RETURNS awa.done_entries[]
    LANGUAGE plpgsql VOLATILE
    SET search_path = pg_catalog, pg_temp SET jit = off
AS $$
DECLARE
    v_now timestamptz := pg_catalog.clock_timestamp();
    v_jobs awa.done_entries[];
    v_job_deadlines timestamptz[];
    v_deadlines timestamptz[];
    v_slots integer[];
    v_copied awa.done_entries[];
BEGIN
    -- One read of the slot's retainable jobs: a retention changed meanwhile must not give
    -- the copies deadlines that have no bucket (they would go to the kept partition).
    SELECT array_agg(r.job), array_agg(r.deadline) INTO v_jobs, v_job_deadlines
      FROM awa._retainable(p_slot, v_now, p_uncopied) r;
    SELECT array_agg(x.deadline ORDER BY x.deadline), array_agg(awa._retention_bucket(x.deadline) ORDER BY x.deadline)
      INTO v_deadlines, v_slots
      FROM (SELECT DISTINCT d.deadline FROM unnest(v_job_deadlines) AS d(deadline) WHERE d.deadline IS NOT NULL) x;
    WITH copied AS (
        INSERT INTO awa.done_entries
        SELECT y.*
          FROM (SELECT v_jobs[i] AS job, v_job_deadlines[i] AS deadline
                  FROM pg_catalog.generate_subscripts(v_jobs, 1) AS g(i)) x
          LEFT JOIN unnest(v_deadlines, v_slots) AS m(deadline, slot) ON m.deadline = x.deadline
         CROSS JOIN LATERAL jsonb_populate_record(x.job, jsonb_build_object('ready_slot', coalesce(m.slot, -1))) y
         WHERE NOT EXISTS (SELECT 1 FROM awa.done_entries k
                            WHERE k.ready_slot < 0 AND k.queue = y.queue AND k.priority = y.priority
                              AND k.enqueue_shard = y.enqueue_shard AND k.lane_seq = y.lane_seq AND k.state = y.state)
        ON CONFLICT DO NOTHING
        RETURNING *)
    SELECT array_agg(c) INTO v_copied FROM copied c;
    RETURN v_copied;
END
$$;
REVOKE ALL ON FUNCTION awa._retain_finished(integer, boolean) FROM PUBLIC;
COMMENT ON FUNCTION awa._retain_finished(integer, boolean) IS 'Internal: copy a queue slot''s finished jobs that outlive it, with body and result, to the retained partition or their retention bucket, once.';

-- A slot whose pending (and retained failed) rows a prune has moved out keeps them, deleted,
-- for the snapshots that do not see the move yet: moved_xid names the moving transaction, and
-- the slot is truncated and freed once every snapshot sees it ended (awa.prune_queue_ring).
ALTER TABLE awa.queue_ring_slots ADD COLUMN moved_xid xid8;
COMMENT ON COLUMN awa.queue_ring_slots.moved_xid IS 'Transaction that moved the slot''s pending rows forward; the slot is truncated once every snapshot sees it ended (NULL: not moved).';
-- On a Citus cluster the move runs on the workers: once it has committed, the coordinator's
-- prune reads each worker's next transaction id into moved_horizons, and truncates once
-- every worker's snapshots have passed it (awa._citus_prune_queue_slot).
ALTER TABLE awa.queue_ring_slots ADD COLUMN moved_horizons jsonb;
COMMENT ON COLUMN awa.queue_ring_slots.moved_horizons IS 'Citus: per worker group, its next transaction id read after the slot''s move committed; NULL until read (or not moved).';
-- On a Citus cluster each worker frees its own shards of a sealed slot, in a transaction of
-- its own (awa._citus_free_local_ring_slot), and notes it here; the coordinator marks the slot
-- free once every worker has. Meanwhile a writer on this node that read the slot as current
-- before it was sealed finds it closed and reads the ring again (src/ring.cpp). Node-local,
-- never distributed; a row of an older generation of its slot means nothing.
CREATE TABLE awa.ring_slot_closures (
    ring text NOT NULL CHECK (ring IN ('queue', 'claim', 'lease')),
    slot integer NOT NULL,
    generation bigint NOT NULL,
    PRIMARY KEY (ring, slot));
GRANT SELECT ON awa.ring_slot_closures TO awa_admin;
COMMENT ON TABLE awa.ring_slot_closures IS 'Citus: the ring slots whose shards on this node are freed, by generation, until the coordinator frees the slot.';

DROP FUNCTION awa.prune_queue_ring(integer);
-- Free a queue slot (a prune): with the writers of the slot kept out (SHARE ROW EXCLUSIVE on
-- its partitions, which readers pass), drop the unique claims of the jobs whose last rows go
-- with it -- every finished job still in the slot (retained ones were moved out, and keep
-- theirs until they expire).
-- Without this a key held in `completed` (the default mask) could never be enqueued again. A
-- claim row another transaction has locked (a delete of the job) is skipped: a prune must not
-- wait with the slot's partitions locked. Only then take ACCESS EXCLUSIVE, the one lock that
-- holds claims and completions of every queue out (their plans lock every ready partition),
-- truncate the partitions and mark the slot free: readers wait for the truncate and the commit
-- alone. Both locks are taken in short tries within p_budget_ms; false when one did not come
-- (the caller steps back, and its rollback undoes the deletes). p_after_move: the slot's rows
-- were moved forward by an earlier prune, and a producer that read the ring before the slot
-- was sealed may have fenced it since and written there (its re-check of the slot's
-- generation passes: a moved slot stays live until freed); so once writers are kept out,
-- look again: pending rows, open attempts or finished jobs to retain in the slot raise AWA01
-- 'written_since_move', and the caller prunes the slot as a first step again (moving them).
CREATE FUNCTION awa._free_queue_slot(p_slot integer, p_budget_ms integer, p_after_move boolean DEFAULT false)
    RETURNS boolean
    LANGUAGE plpgsql VOLATILE
    SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_tables text[] := ARRAY['ready_entries_' || p_slot, 'done_entries_' || p_slot, 'completion_batches_' || p_slot];
BEGIN
    IF NOT awa._lock_ring_partitions(v_tables, p_budget_ms, true) THEN
        RETURN false;
    END IF;
    -- A probe per lane (OFFSET 0 keeps each EXISTS a probe from the lane's cursor) and batch
    -- by batch for open receipts (awa._open_claim_batches): joined on the lane, the planner
    -- paired every ready row of the slot with every claim batch of its lane, and this check
    -- held the slot's locks and its snapshot for 234 s on a slot of 600,000 rows.
    IF p_after_move
       AND (EXISTS (WITH RECURSIVE lanes AS (
                        (SELECT r.queue, r.priority, r.enqueue_shard FROM awa.ready_entries r
                          WHERE r.ready_slot = p_slot
                          ORDER BY r.queue, r.priority, r.enqueue_shard LIMIT 1)
                        UNION ALL
                        SELECT n.queue, n.priority, n.enqueue_shard
                          FROM lanes l
                         CROSS JOIN LATERAL (
                             SELECT r.queue, r.priority, r.enqueue_shard FROM awa.ready_entries r
                              WHERE r.ready_slot = p_slot
                                AND (r.queue, r.priority, r.enqueue_shard) > (l.queue, l.priority, l.enqueue_shard)
                              ORDER BY r.queue, r.priority, r.enqueue_shard LIMIT 1) n)
                    SELECT 1 FROM lanes l
                      LEFT JOIN awa.lane_cursors h
                        ON h.queue = l.queue AND h.priority = l.priority AND h.enqueue_shard = l.enqueue_shard
                     WHERE EXISTS (SELECT 1 FROM awa.ready_entries r
                                    WHERE r.ready_slot = p_slot AND r.queue = l.queue AND r.priority = l.priority
                                      AND r.enqueue_shard = l.enqueue_shard AND r.lane_seq >= coalesce(h.claim_seq, 0)
                                    OFFSET 0))
            OR EXISTS (SELECT 1 FROM awa._open_claim_batches b WHERE b.ready_slot = p_slot)
            OR EXISTS (SELECT 1 FROM awa.leases l WHERE l.ready_slot = p_slot)
            OR EXISTS (SELECT 1 FROM awa._retainable(p_slot, pg_catalog.clock_timestamp()))) THEN
        RAISE EXCEPTION USING ERRCODE = 'AWA01', MESSAGE = 'written_since_move';
    END IF;
    IF EXISTS (SELECT 1 FROM awa.job_unique_claims) THEN
        DELETE FROM awa.job_unique_claims u
         WHERE u.ctid = ANY (ARRAY(
             SELECT c.ctid FROM awa.job_unique_claims c
              WHERE (c.queue, c.job_id) IN (SELECT d.queue, d.job_id FROM awa.done_entries d
                                             WHERE d.ready_slot = p_slot
                                            UNION ALL
                                            SELECT b.queue, b.job_id FROM awa._batch_completions b WHERE b.ready_slot = p_slot)
                FOR UPDATE SKIP LOCKED));
    END IF;
    IF NOT awa._lock_ring_partitions(v_tables, p_budget_ms, false) THEN
        RETURN false;
    END IF;
    EXECUTE format('TRUNCATE awa.%I, awa.%I, awa.%I', 'ready_entries_' || p_slot, 'done_entries_' || p_slot,
                   'completion_batches_' || p_slot);
    UPDATE awa.queue_ring_slots SET generation = -1, moved_xid = NULL, moved_horizons = NULL WHERE slot = p_slot;
    PERFORM awa._ring_slot_freed('queue', p_slot);
    RETURN true;
END
$$;
REVOKE ALL ON FUNCTION awa._free_queue_slot(integer, integer, boolean) FROM PUBLIC;
COMMENT ON FUNCTION awa._free_queue_slot(integer, integer, boolean) IS 'Internal: drop the unique claims of a queue slot''s finished jobs, truncate the slot and mark it free; false when its locks did not come in time (after a move: AWA01 when rows were written there since).';

-- Whether every snapshot of this database sees transaction p_xid as ended (src/ring.cpp:
-- the procarray's horizon, read without waiting): then no reader can still need the rows
-- p_xid moved out of a slot, and the slot may be truncated.
CREATE FUNCTION awa._seen_ended_by_all(p_xid xid8) RETURNS boolean
    AS 'MODULE_PATHNAME', 'awa_seen_ended_by_all'
    LANGUAGE C VOLATILE STRICT PARALLEL UNSAFE
    SET search_path = pg_catalog, pg_temp;
REVOKE ALL ON FUNCTION awa._seen_ended_by_all(xid8) FROM PUBLIC;
COMMENT ON FUNCTION awa._seen_ended_by_all(xid8) IS 'Internal: whether every snapshot of this database sees a transaction as ended.';

-- Whether freeing a sealed queue slot is worth what it copies (D23): its ready rows that no
-- claim reads again (below their lane's cursor) must be at least three times its pending rows
-- (at or after the cursor, or in a lane without a claim head), which a prune copies forward;
-- so a prune copies at most a quarter of the rows it frees, and a pending row is copied a
-- third of a time over its life on average. The lanes of the slot are found by skipping along
-- the lane index; the finished rows are counted, the pending ones only up to a third of them,
-- so a slot that is all backlog costs one probe per lane.
CREATE FUNCTION awa._queue_slot_worth_pruning(p_slot integer) RETURNS boolean
    LANGUAGE plpgsql VOLATILE
    SET search_path = pg_catalog, pg_temp SET jit = off SET plan_cache_mode = force_generic_plan
AS $$
DECLARE
    v_finished bigint;
    v_pending bigint;
BEGIN
    WITH RECURSIVE lanes AS (
        (SELECT r.queue, r.priority, r.enqueue_shard FROM awa.ready_entries r
          WHERE r.ready_slot = p_slot
          ORDER BY r.queue, r.priority, r.enqueue_shard LIMIT 1)
        UNION ALL
        SELECT n.queue, n.priority, n.enqueue_shard
          FROM lanes l
         CROSS JOIN LATERAL (
             SELECT r.queue, r.priority, r.enqueue_shard FROM awa.ready_entries r
              WHERE r.ready_slot = p_slot
                AND (r.queue, r.priority, r.enqueue_shard) > (l.queue, l.priority, l.enqueue_shard)
              ORDER BY r.queue, r.priority, r.enqueue_shard LIMIT 1) n)
    SELECT coalesce(sum(f.n), 0) INTO v_finished
      FROM lanes l
      LEFT JOIN awa.lane_cursors h
        ON h.queue = l.queue AND h.priority = l.priority AND h.enqueue_shard = l.enqueue_shard
     CROSS JOIN LATERAL (
         SELECT count(*) AS n FROM awa.ready_entries r
          WHERE r.ready_slot = p_slot AND r.queue = l.queue AND r.priority = l.priority
            AND r.enqueue_shard = l.enqueue_shard AND r.lane_seq < coalesce(h.claim_seq, 0)) f;
    WITH RECURSIVE lanes AS (
        (SELECT r.queue, r.priority, r.enqueue_shard FROM awa.ready_entries r
          WHERE r.ready_slot = p_slot
          ORDER BY r.queue, r.priority, r.enqueue_shard LIMIT 1)
        UNION ALL
        SELECT n.queue, n.priority, n.enqueue_shard
          FROM lanes l
         CROSS JOIN LATERAL (
             SELECT r.queue, r.priority, r.enqueue_shard FROM awa.ready_entries r
              WHERE r.ready_slot = p_slot
                AND (r.queue, r.priority, r.enqueue_shard) > (l.queue, l.priority, l.enqueue_shard)
              ORDER BY r.queue, r.priority, r.enqueue_shard LIMIT 1) n)
    SELECT count(*) INTO v_pending FROM (
        SELECT 1
          FROM lanes l
          LEFT JOIN awa.lane_cursors h
            ON h.queue = l.queue AND h.priority = l.priority AND h.enqueue_shard = l.enqueue_shard
         CROSS JOIN LATERAL (
             SELECT 1 FROM awa.ready_entries r
              WHERE r.ready_slot = p_slot AND r.queue = l.queue AND r.priority = l.priority
                AND r.enqueue_shard = l.enqueue_shard AND r.lane_seq >= coalesce(h.claim_seq, 0)
              LIMIT v_finished / 3 + 1) p
         LIMIT v_finished / 3 + 1) x;
    RETURN 3 * v_pending <= v_finished;
END
$$;
REVOKE ALL ON FUNCTION awa._queue_slot_worth_pruning(integer) FROM PUBLIC;
COMMENT ON FUNCTION awa._queue_slot_worth_pruning(integer) IS 'Internal: whether a sealed queue slot frees at least three rows for every pending row it would copy.';

-- Prune the oldest sealed queue slot (docs/maintenance.md §2). In two steps when it holds
-- rows a reader may still need: the first moves them out in one transaction (MVCC-safe:
-- delete and insert), the second, in a later call, truncates the slot once every snapshot
-- of the database sees the move as committed (TRUNCATE is not MVCC-safe). The first step:
--   1. lock the ring's cursor row (NOWAIT: a concurrent rotation or prune wins);
--   2. with p_amortised (what maintenance passes), refuse ('skipped_not_worth') unless the
--      slot frees at least three rows for every pending row it copies
--      (awa._queue_slot_worth_pruning), or every slot of the ring is live and the current
--      slot has grown as large as this one (a backlog that pins the ring is then copied
--      once for at least as many rows written since); then remember every lane's claim
--      cursor and refuse when an open attempt (a claim batch with an open receipt, or a
--      lease) still reads a ready row of the slot. These checks hold no lock, and the
--      cheaper comes first: a slot a backlog pins is refused without reading its receipts;
--   3. copy failed terminal rows, with their body, to the retained partition once. Still
--      without a lock: no attempt of the slot is open, so no failed row can be added to it
--      (a claim since step 2 makes step 4 refuse, which undoes the copies). Not when a
--      transaction older than the lock budget holds the slot's partitions: then the copy
--      waits for step 4's lock, so a prune that steps back has copied nothing;
--   4. lock the slot's partitions (awa._lock_ring_partitions: never queued for long), so no
--      writer can add to the slot, and refuse when a claim since step 2 took rows of the
--      slot (their attempts may be open); drop the copies of failed rows that were dead-
--      lettered or deleted between step 3 and the lock, and delete the originals of the
--      retained ones;
--   5. lock the claim heads of the lanes that still have pending rows in the slot (NOWAIT)
--      and move those rows (and any row whose lane has no claim head, which nothing proves
--      finished) into the current slot with their lane identity and lane_seq (delete and
--      insert): claims drain them in the same order, and a claim holding one of those heads
--      makes this prune step back instead. The lanes of the slot are found by skipping along
--      the lane index and each lane's cursor is read once (the heads to lock, a probe each),
--      so the work done under the lock is the lanes, the pending rows and at most one read
--      of the slot's rows, never a product of rows and lanes or batches;
--   6. nothing moved: truncate the slot's partitions and mark it free ('pruned'). Rows
--      moved: remember the moving transaction in the slot ('moved'); the slot stays live
--      (readers and the arc still include it) until the second step.
-- The second step (the oldest sealed slot has moved rows): refuse ('skipped_snapshots')
-- while a snapshot of the database may not see the move; otherwise lock the partitions as
-- in step 4, truncate and mark the slot free ('pruned').
-- Any refusal after step 1 rolls back a subtransaction, which releases every lock taken.
-- Returns pruned / moved / skipped_none_sealed / skipped_running / skipped_not_worth /
-- skipped_snapshots / skipped_locked / skipped_concurrent.
-- Its statements and awa._queue_slot_worth_pruning's run generic plans, which prune the
-- ring's partitions as each plan starts: custom plans were planned again on every call, and
-- a maintenance pass that found the oldest slot not worth pruning spent 3.7 ms of CPU on it
-- (0.6 ms generic; 100,000 jobs waiting in the slot, docs/benchmarks.md).
CREATE FUNCTION awa.prune_queue_ring(p_lock_timeout_ms bigint DEFAULT 1000, p_amortised boolean DEFAULT false)
    RETURNS text
    LANGUAGE plpgsql VOLATILE
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp SET jit = off
    SET plan_cache_mode = force_generic_plan
AS $$
DECLARE
    st awa.queue_ring_state;
    v_slot integer;
    v_moved_by xid8;
    v_cursors awa.lane_cursors[];
    v_copied awa.done_entries[];
    v_copy_early boolean;
    v_reason text;
    v_moved bigint;
    v_retained bigint := 0;
    v_result text := 'pruned';
BEGIN
    PERFORM awa._require(p_lock_timeout_ms IS NULL OR p_amortised IS NULL, 'p_lock_timeout_ms and p_amortised');
    PERFORM awa._require_at_least(p_lock_timeout_ms, 1, 'p_lock_timeout_ms');
    p_lock_timeout_ms := least(p_lock_timeout_ms, 2147483647);  -- lock_timeout's largest value
    PERFORM awa._require_read_committed('prune_queue_ring');
    -- On a Citus cluster the shared rings are the coordinator's (docs/scale-out.md).
    IF awa._citus_group() <> 0 THEN
        RETURN 'skipped_not_coordinator';
    END IF;
    BEGIN
        SELECT * INTO st FROM awa.queue_ring_state FOR UPDATE NOWAIT;
    EXCEPTION WHEN lock_not_available THEN
        RETURN 'skipped_concurrent';
    END;
    SELECT s.slot, s.moved_xid INTO v_slot, v_moved_by FROM awa.queue_ring_slots s
     WHERE s.generation >= 0 AND s.slot <> st.current_slot
     ORDER BY s.generation LIMIT 1;
    IF v_slot IS NULL THEN
        RETURN 'skipped_none_sealed';
    END IF;
    -- On a Citus cluster (here, the coordinator): the same steps, each queue's rows moved on its
    -- worker (awa._citus_prune_queue_slot; docs/scale-out.md).
    IF awa._citus_group() IS NOT NULL THEN
        RETURN awa._citus_prune_queue_slot(v_slot, p_lock_timeout_ms::integer, st.current_slot, st.generation,
                                           coalesce(p_amortised, false));
    END IF;
    IF v_moved_by IS NOT NULL THEN
        -- Second step: the slot's rows that a reader may need were moved by v_moved_by; a
        -- snapshot that does not see that move still reads them here.
        IF NOT awa._seen_ended_by_all(v_moved_by) THEN
            RETURN 'skipped_snapshots';
        END IF;
        BEGIN
            IF NOT awa._free_queue_slot(v_slot, p_lock_timeout_ms::integer, true) THEN
                RAISE EXCEPTION USING ERRCODE = 'AWA01', MESSAGE = 'skipped_locked';
            END IF;
        EXCEPTION WHEN SQLSTATE 'AWA01' THEN
            GET STACKED DIAGNOSTICS v_reason = MESSAGE_TEXT;
            IF v_reason <> 'written_since_move' THEN
                RETURN v_reason;
            END IF;
            -- A stale producer wrote into the slot after the move: prune it as a first step
            -- again (below), which moves those rows forward too.
            v_moved_by := NULL;
        END;
        IF v_moved_by IS NOT NULL THEN
            RETURN 'pruned';
        END IF;
    END IF;
    IF p_amortised
       AND NOT ((SELECT s.generation FROM awa.queue_ring_slots s
                  WHERE s.slot = (st.current_slot + 1) % st.slot_count) >= 0
                AND pg_catalog.pg_relation_size(format('awa.%I', 'ready_entries_' || st.current_slot)::regclass)
                    >= pg_catalog.pg_relation_size(format('awa.%I', 'ready_entries_' || v_slot)::regclass))
       AND NOT awa._queue_slot_worth_pruning(v_slot) THEN
        RETURN 'skipped_not_worth';
    END IF;
    SELECT array_agg(h) INTO v_cursors FROM awa.lane_cursors h;
    IF EXISTS (SELECT 1 FROM awa._open_claim_batches b WHERE b.ready_slot = v_slot)
       OR EXISTS (SELECT 1 FROM awa.leases l WHERE l.ready_slot = v_slot) THEN
        RETURN 'skipped_running';
    END IF;
    BEGIN
        -- Copy early unless a transaction that has already run longer than the lock budget
        -- holds the slot's partitions (or one whose start is not visible, or a prepared
        -- one): the lock would likely not come in time, and a prune that steps back
        -- (skipped_locked) would have copied and rolled back for nothing. Short holders,
        -- such as claims, end long before the budget does.
        v_copy_early := NOT EXISTS (
            SELECT 1 FROM pg_catalog.pg_locks k
              LEFT JOIN pg_catalog.pg_stat_activity a ON a.pid = k.pid
             WHERE k.locktype = 'relation' AND k.database = (SELECT oid FROM pg_catalog.pg_database
                                                            WHERE datname = pg_catalog.current_database())
               AND k.relation IN (format('awa.%I', 'ready_entries_' || v_slot)::regclass,
                                  format('awa.%I', 'done_entries_' || v_slot)::regclass,
                                  format('awa.%I', 'completion_batches_' || v_slot)::regclass)
               AND k.pid IS DISTINCT FROM pg_catalog.pg_backend_pid()
               AND (a.xact_start IS NULL
                    OR a.xact_start < pg_catalog.clock_timestamp()
                                      - pg_catalog.make_interval(secs => p_lock_timeout_ms / 1000.0)));
        IF v_copy_early THEN
            v_copied := awa._retain_finished(v_slot);
        END IF;
        -- SHARE ROW EXCLUSIVE keeps every writer of the slot out (producers that fenced it,
        -- exits writing its terminal rows) and lets readers in: claims and completions of every
        -- queue, whose plans lock every ready partition, go on while pending rows move. Only
        -- the truncate below takes ACCESS EXCLUSIVE.
        IF NOT awa._lock_ring_partitions(ARRAY['ready_entries_' || v_slot, 'done_entries_' || v_slot,
                                               'completion_batches_' || v_slot],
                                         p_lock_timeout_ms::integer, true) THEN
            RAISE EXCEPTION USING ERRCODE = 'AWA01', MESSAGE = 'skipped_locked';
        END IF;
        -- Copied early: what finished since (an exit that wrote a terminal row before the
        -- lock came, such as a cancel) is copied now, once, like the rest.
        IF v_copy_early THEN
            v_copied := v_copied || awa._retain_finished(v_slot, true);
        ELSE
            v_copied := awa._retain_finished(v_slot);
        END IF;
        -- The heads of the lanes that still have pending rows in the slot: a claim can take
        -- rows of the slot only under one of them. A claim holding one makes the prune step
        -- back; once they are held, no claim opens an attempt on a row of the slot.
        -- Per head, its cursor and then one probe of the slot's rows at or past it: OFFSET 0
        -- keeps the EXISTS a probe per head, where a semi-join read the cursor (a probe of the
        -- claim marks) once per ready row of the slot (10 s for a slot of 200,000 rows).
        BEGIN
            PERFORM 1 FROM awa.queue_claim_heads h
             WHERE EXISTS (SELECT 1 FROM awa.ready_entries r
                            WHERE r.queue = h.queue AND r.priority = h.priority
                              AND r.enqueue_shard = h.enqueue_shard AND r.ready_slot = v_slot
                              AND r.lane_seq >= (SELECT c.claim_seq FROM awa.lane_cursors c
                                                  WHERE c.queue = h.queue AND c.priority = h.priority
                                                    AND c.enqueue_shard = h.enqueue_shard)
                           OFFSET 0)
             ORDER BY h.queue, h.priority, h.enqueue_shard
               FOR UPDATE NOWAIT;
        EXCEPTION WHEN lock_not_available THEN
            RAISE EXCEPTION USING ERRCODE = 'AWA01', MESSAGE = 'skipped_locked';
        END;
        PERFORM awa._heads_locked(NULL);
        -- Rows of the slot claimed after the cursors were remembered (read after the heads are
        -- held, so a claim that committed before they were taken is seen): attempts may be open.
        -- A probe per lane whose cursor moved (OFFSET 0: as a semi-join, the planner read every
        -- row of the slot for each such lane).
        IF EXISTS (SELECT 1 FROM awa.lane_cursors h
                     LEFT JOIN unnest(v_cursors) o
                       ON o.queue = h.queue AND o.priority = h.priority AND o.enqueue_shard = h.enqueue_shard
                    WHERE h.claim_seq > coalesce(o.claim_seq, 1)
                      AND EXISTS (SELECT 1 FROM awa.ready_entries r
                                   WHERE r.ready_slot = v_slot AND r.queue = h.queue
                                     AND r.priority = h.priority AND r.enqueue_shard = h.enqueue_shard
                                     AND r.lane_seq >= coalesce(o.claim_seq, 1) AND r.lane_seq < h.claim_seq
                                  OFFSET 0)) THEN
            RAISE EXCEPTION USING ERRCODE = 'AWA01', MESSAGE = 'skipped_running';
        END IF;
        -- Finished jobs dead-lettered, retried or deleted since they were copied: drop their
        -- copies (a completion is still there while its completion batch names it).
        IF v_copied IS NOT NULL AND v_copy_early THEN
            DELETE FROM awa.done_entries k
             USING unnest(v_copied) f
             WHERE k.ready_slot = f.ready_slot AND k.queue = f.queue AND k.priority = f.priority
               AND k.enqueue_shard = f.enqueue_shard AND k.lane_seq = f.lane_seq
               AND NOT EXISTS (SELECT 1 FROM awa.done_entries d
                                WHERE d.ready_slot = v_slot AND d.queue = f.queue AND d.priority = f.priority
                                  AND d.enqueue_shard = f.enqueue_shard AND d.lane_seq = f.lane_seq
                                  AND d.state = f.state)
               AND NOT (f.state = 'completed'
                        AND EXISTS (SELECT 1 FROM awa.completion_batches b
                                     WHERE b.ready_slot = v_slot AND b.queue = f.queue AND b.priority = f.priority
                                       AND b.enqueue_shard = f.enqueue_shard AND b.lane_block = f.lane_seq / 64
                                       AND (f.lane_seq % 64)::smallint = ANY (b.lane_offsets)));
        END IF;
        -- The originals of the retained rows: a reader sees one or the other. A retained
        -- completion's batch goes, with the ready rows of every attempt it names (a receipt
        -- whose ready row is gone is not open, as after the truncate), and so does the ready
        -- row of a retained terminal completion (1.0).
        IF v_copied IS NOT NULL THEN
            DELETE FROM awa.done_entries d
             USING unnest(v_copied) f
             WHERE d.ready_slot = v_slot AND d.queue = f.queue AND d.priority = f.priority
               AND d.enqueue_shard = f.enqueue_shard AND d.lane_seq = f.lane_seq AND d.state = f.state;
            GET DIAGNOSTICS v_retained = ROW_COUNT;
            WITH gone AS (
                DELETE FROM awa.completion_batches b
                 WHERE b.ready_slot = v_slot
                   AND EXISTS (SELECT 1 FROM unnest(v_copied) f
                                WHERE f.state = 'completed' AND f.queue = b.queue AND f.priority = b.priority
                                  AND f.enqueue_shard = b.enqueue_shard AND f.lane_seq / 64 = b.lane_block
                                  AND (f.lane_seq % 64)::smallint = ANY (b.lane_offsets))
                RETURNING b.ready_generation, b.queue, b.priority, b.enqueue_shard, b.lane_block, b.lane_offsets),
            ready AS (
                DELETE FROM awa.ready_entries r
                 USING gone g CROSS JOIN LATERAL unnest(g.lane_offsets) AS o(lane_offset)
                 WHERE r.ready_slot = v_slot AND r.ready_generation = g.ready_generation AND r.queue = g.queue
                   AND r.priority = g.priority AND r.enqueue_shard = g.enqueue_shard
                   AND r.lane_seq = g.lane_block * 64 + o.lane_offset)
            SELECT v_retained + count(*) INTO v_retained FROM gone;
            DELETE FROM awa.ready_entries r
             USING unnest(v_copied) f
             WHERE f.state = 'completed' AND r.ready_slot = v_slot AND r.queue = f.queue
               AND r.priority = f.priority AND r.enqueue_shard = f.enqueue_shard AND r.lane_seq = f.lane_seq
               AND r.job_id = f.job_id;
        END IF;
        -- Whole rows move: only the slot changes (no column is named). Each lane's cursor is
        -- read once (MATERIALIZED): inlined, the planner read it again for every row of the
        -- slot, and under a busy lane (many claim marks not yet folded) a move ran for
        -- minutes, holding back vacuum of every table meanwhile.
        WITH RECURSIVE lanes AS (
            (SELECT r.queue, r.priority, r.enqueue_shard FROM awa.ready_entries r
              WHERE r.ready_slot = v_slot
              ORDER BY r.queue, r.priority, r.enqueue_shard LIMIT 1)
            UNION ALL
            SELECT n.queue, n.priority, n.enqueue_shard
              FROM lanes l
             CROSS JOIN LATERAL (
                 SELECT r.queue, r.priority, r.enqueue_shard FROM awa.ready_entries r
                  WHERE r.ready_slot = v_slot
                    AND (r.queue, r.priority, r.enqueue_shard) > (l.queue, l.priority, l.enqueue_shard)
                  ORDER BY r.queue, r.priority, r.enqueue_shard LIMIT 1) n),
        pending AS MATERIALIZED (
            SELECT l.queue, l.priority, l.enqueue_shard, coalesce(h.claim_seq, 0) AS claim_seq
              FROM lanes l
              LEFT JOIN awa.lane_cursors h
                ON h.queue = l.queue AND h.priority = l.priority AND h.enqueue_shard = l.enqueue_shard),
        moved AS (
            DELETE FROM awa.ready_entries r
             USING pending p
             WHERE r.ready_slot = v_slot AND r.queue = p.queue AND r.priority = p.priority
               AND r.enqueue_shard = p.enqueue_shard AND r.lane_seq >= p.claim_seq
            RETURNING r)
        INSERT INTO awa.ready_entries
        SELECT m.*
          FROM moved p
         CROSS JOIN LATERAL jsonb_populate_record(p.r, jsonb_build_object('ready_slot', st.current_slot,
                                                                        'ready_generation', st.generation)) m;
        GET DIAGNOSTICS v_moved = ROW_COUNT;
        IF v_moved + v_retained > 0 THEN
            -- A snapshot taken before this commits still reads the moved rows here.
            UPDATE awa.queue_ring_slots SET moved_xid = pg_catalog.pg_current_xact_id() WHERE slot = v_slot;
            v_result := 'moved';
        ELSE
            -- Nothing pending and nothing retained: the truncate, the one step that holds
            -- readers out (ACCESS EXCLUSIVE), from its lock to the commit.
            IF NOT awa._free_queue_slot(v_slot, p_lock_timeout_ms::integer) THEN
                RAISE EXCEPTION USING ERRCODE = 'AWA01', MESSAGE = 'skipped_locked';
            END IF;
        END IF;
    EXCEPTION WHEN SQLSTATE 'AWA01' THEN
        GET STACKED DIAGNOSTICS v_reason = MESSAGE_TEXT;
        RETURN v_reason;
    END;
    RETURN v_result;
END
$$;
REVOKE ALL ON FUNCTION awa.prune_queue_ring(bigint, boolean) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION awa.prune_queue_ring(bigint, boolean) TO awa_admin;

-- Free the retention bucket that expired first by p_now (at most one a call): drop the
-- unique claims of its jobs, truncate it whole (no per-row delete, no dead rows left) and
-- mark it free. A bucket prune is filling is skipped (its row is locked); its partition is
-- locked in short tries as prune locks a ring slot's. Returns expired /
-- skipped_none_expired / skipped_locked. p_now is the clock (awa.expire_retention passes
-- now()).
CREATE FUNCTION awa._expire_retention(p_now timestamptz, p_lock_timeout_ms bigint) RETURNS text
    LANGUAGE plpgsql VOLATILE
    SET search_path = pg_catalog, pg_temp SET jit = off
AS $$
DECLARE
    v_bucket integer;
    v_reason text;
BEGIN
    SELECT b.bucket INTO v_bucket FROM awa.retention_buckets b
     WHERE b.expires_at <= p_now ORDER BY b.expires_at, b.bucket LIMIT 1 FOR UPDATE SKIP LOCKED;
    IF v_bucket IS NULL THEN
        RETURN 'skipped_none_expired';
    END IF;
    BEGIN
        IF NOT awa._lock_ring_partitions(ARRAY['done_entries_expiring_' || v_bucket],
                                         least(p_lock_timeout_ms, 2147483647)::integer) THEN
            RAISE EXCEPTION USING ERRCODE = 'AWA01', MESSAGE = 'skipped_locked';
        END IF;
        DELETE FROM awa.job_unique_claims u
         WHERE u.ctid = ANY (ARRAY(
             SELECT c.ctid FROM awa.job_unique_claims c
              WHERE (c.queue, c.job_id) IN (SELECT d.queue, d.job_id FROM awa.done_entries d
                                             WHERE d.ready_slot = -2 - v_bucket)
                FOR UPDATE SKIP LOCKED));
        EXECUTE format('TRUNCATE awa.%I', 'done_entries_expiring_' || v_bucket);
        UPDATE awa.retention_buckets SET expires_at = NULL WHERE bucket = v_bucket;
    EXCEPTION WHEN SQLSTATE 'AWA01' THEN
        GET STACKED DIAGNOSTICS v_reason = MESSAGE_TEXT;
        RETURN v_reason;
    END;
    RETURN 'expired';
END
$$;
REVOKE ALL ON FUNCTION awa._expire_retention(timestamptz, bigint) FROM PUBLIC;
COMMENT ON FUNCTION awa._expire_retention(timestamptz, bigint) IS 'Internal: truncate and free the retention bucket that expired first by a given time.';

-- Free the retention bucket that expired first (docs/maintenance.md, "Retention"); what
-- maintenance runs every pass. Returns expired / skipped_none_expired / skipped_locked.
CREATE FUNCTION awa.expire_retention(p_lock_timeout_ms bigint DEFAULT 1000) RETURNS text
    LANGUAGE plpgsql VOLATILE
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp SET jit = off
AS $$
BEGIN
    PERFORM awa._require(p_lock_timeout_ms IS NULL, 'p_lock_timeout_ms');
    PERFORM awa._require_at_least(p_lock_timeout_ms, 1, 'p_lock_timeout_ms');
    -- Its claims' delete must see every row a prune committed to the bucket before the truncate.
    PERFORM awa._require_read_committed('expire_retention');
    -- On a Citus cluster the shared rings are the coordinator's (docs/scale-out.md).
    IF awa._citus_group() <> 0 THEN
        RETURN 'skipped_not_coordinator';
    END IF;
    RETURN awa._expire_retention(now(), p_lock_timeout_ms);
END
$$;
REVOKE ALL ON FUNCTION awa.expire_retention(bigint) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION awa.expire_retention(bigint) TO awa_admin;
COMMENT ON FUNCTION awa.expire_retention(bigint) IS 'Truncate the retention bucket of finished jobs that expired first, if any. Role: awa_admin.';

-- Rotate the claim ring (receipts) or the lease ring when the current slot holds rows
-- and the next slot is free; same serialisation as the queue ring.
CREATE OR REPLACE FUNCTION awa.rotate_attempt_ring(p_ring text) RETURNS text
    LANGUAGE plpgsql VOLATILE
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp SET jit = off
AS $$
DECLARE
    v_slot integer;
    v_count integer;
    v_gen bigint;
    v_next integer;
BEGIN
    PERFORM awa._require(p_ring IS NULL, 'p_ring');
    PERFORM awa._check_arg(p_ring IN ('claim', 'lease'), 'p_ring must be claim or lease');
    PERFORM awa._require_read_committed('rotate_attempt_ring');
    -- On a Citus cluster the shared rings are the coordinator's (docs/scale-out.md).
    IF awa._citus_group() <> 0 THEN
        RETURN 'skipped_not_coordinator';
    END IF;
    BEGIN
        IF p_ring = 'claim' THEN
            SELECT current_slot, slot_count, generation INTO v_slot, v_count, v_gen
              FROM awa.claim_ring_state FOR UPDATE NOWAIT;
        ELSE
            SELECT current_slot, slot_count, generation INTO v_slot, v_count, v_gen
              FROM awa.lease_ring_state FOR UPDATE NOWAIT;
        END IF;
    EXCEPTION WHEN lock_not_available THEN
        RETURN 'skipped_concurrent';
    END;
    v_next := (v_slot + 1) % v_count;
    IF p_ring = 'claim' THEN
        IF NOT EXISTS (SELECT 1 FROM awa.claim_batches WHERE claim_slot = v_slot) THEN
            RETURN 'skipped_idle';
        END IF;
        IF (SELECT generation FROM awa.claim_ring_slots WHERE slot = v_next) >= 0
           OR EXISTS (SELECT 1 FROM awa.claim_batches WHERE claim_slot = v_next)
           OR EXISTS (SELECT 1 FROM awa.lease_claim_closures WHERE claim_slot = v_next) THEN
            RETURN 'skipped_busy';
        END IF;
        UPDATE awa.claim_ring_state SET current_slot = v_next, generation = v_gen + 1;
        UPDATE awa.claim_ring_slots SET generation = v_gen + 1 WHERE slot = v_next;
    ELSE
        IF NOT EXISTS (SELECT 1 FROM awa.leases WHERE lease_slot = v_slot) THEN
            RETURN 'skipped_idle';
        END IF;
        IF (SELECT generation FROM awa.lease_ring_slots WHERE slot = v_next) >= 0
           OR EXISTS (SELECT 1 FROM awa.leases WHERE lease_slot = v_next) THEN
            RETURN 'skipped_busy';
        END IF;
        UPDATE awa.lease_ring_state SET current_slot = v_next, generation = v_gen + 1;
        UPDATE awa.lease_ring_slots SET generation = v_gen + 1 WHERE slot = v_next;
    END IF;
    RETURN 'rotated';
END
$$;

-- Prune the oldest sealed claim slot whose receipts are all closed, or the oldest sealed
-- lease slot that is empty. The check runs first without locks (a slot that is still in
-- use costs nothing), then again under the partition locks, which no writer can pass.
-- Returns pruned / skipped_none_sealed / skipped_open_receipts / skipped_open_leases /
-- skipped_locked / skipped_concurrent.
DROP FUNCTION awa.prune_attempt_ring(text, integer);
-- Prune the oldest sealed claim slot whose receipts are all closed, or the oldest sealed
-- lease slot that is empty. The check runs first without locks (a slot that is still in
-- use costs nothing), then again under the partition locks, which no writer can pass.
-- Returns pruned / skipped_none_sealed / skipped_open_receipts / skipped_open_leases /
-- skipped_locked / skipped_concurrent.
CREATE FUNCTION awa.prune_attempt_ring(p_ring text, p_lock_timeout_ms bigint DEFAULT 1000) RETURNS text
    LANGUAGE plpgsql VOLATILE
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp SET jit = off
AS $$
DECLARE
    v_current integer;
    v_slot integer;
    v_reason text;
    v_receipts bigint;
BEGIN
    PERFORM awa._require(p_ring IS NULL, 'p_ring');
    PERFORM awa._check_arg(p_ring IN ('claim', 'lease'), 'p_ring must be claim or lease');
    PERFORM awa._require(p_lock_timeout_ms IS NULL, 'p_lock_timeout_ms');
    PERFORM awa._require_at_least(p_lock_timeout_ms, 1, 'p_lock_timeout_ms');
    p_lock_timeout_ms := least(p_lock_timeout_ms, 2147483647);  -- lock_timeout's largest value
    PERFORM awa._require_read_committed('prune_attempt_ring');
    -- On a Citus cluster the shared rings are the coordinator's (docs/scale-out.md).
    IF awa._citus_group() <> 0 THEN
        RETURN 'skipped_not_coordinator';
    END IF;
    BEGIN
        IF p_ring = 'claim' THEN
            SELECT current_slot INTO v_current FROM awa.claim_ring_state FOR UPDATE NOWAIT;
            SELECT slot INTO v_slot FROM awa.claim_ring_slots
             WHERE generation >= 0 AND slot <> v_current ORDER BY generation LIMIT 1;
        ELSE
            SELECT current_slot INTO v_current FROM awa.lease_ring_state FOR UPDATE NOWAIT;
            SELECT slot INTO v_slot FROM awa.lease_ring_slots
             WHERE generation >= 0 AND slot <> v_current ORDER BY generation LIMIT 1;
        END IF;
    EXCEPTION WHEN lock_not_available THEN
        RETURN 'skipped_concurrent';
    END;
    IF v_slot IS NULL THEN
        RETURN 'skipped_none_sealed';
    END IF;
    -- On a Citus cluster each worker frees its own shards of the slot, in a transaction of
    -- its own, with the same tests under its own locks (docs/scale-out.md).
    IF awa._citus_group() IS NOT NULL THEN
        RETURN awa._citus_free_ring_slot(p_ring, v_slot, p_lock_timeout_ms::integer);
    END IF;
    IF p_ring = 'claim' THEN
        -- The receipts of a sealed slot only grow (a claim that took the slot before the
        -- rotation may still commit), and an ended receipt never opens again. So under the
        -- partition locks the prune only compares the slot's count of claim batches with the one it counted
        -- before its test, and steps back if it grew: a receipt that committed since is one
        -- just claimed (a claim appends at least one batch), open in all
        -- likelihood, and testing the slot again there (a probe per receipt, 0.4 s at
        -- 100 000 receipts) would hold every worker for that long.
        v_receipts := (SELECT count(*) FROM awa.claim_batches WHERE claim_slot = v_slot);
        IF awa._claim_slot_has_open_receipts(v_slot) THEN
            RETURN 'skipped_open_receipts';
        END IF;
        BEGIN
            -- The count under SHARE ROW EXCLUSIVE (no claim can add a batch; completions and
            -- readers go on), and ACCESS EXCLUSIVE, which every worker statement on the claim
            -- ring waits for, for the truncate alone.
            IF NOT awa._lock_ring_partitions(
                    ARRAY['claim_batches_' || v_slot, 'lease_claim_closures_' || v_slot], p_lock_timeout_ms::integer, true) THEN
                RAISE EXCEPTION USING ERRCODE = 'AWA01', MESSAGE = 'skipped_locked';
            END IF;
            IF (SELECT count(*) FROM awa.claim_batches WHERE claim_slot = v_slot) <> v_receipts THEN
                RAISE EXCEPTION USING ERRCODE = 'AWA01', MESSAGE = 'skipped_open_receipts';
            END IF;
            IF NOT awa._lock_ring_partitions(
                    ARRAY['claim_batches_' || v_slot, 'lease_claim_closures_' || v_slot], p_lock_timeout_ms::integer) THEN
                RAISE EXCEPTION USING ERRCODE = 'AWA01', MESSAGE = 'skipped_locked';
            END IF;
            EXECUTE format('TRUNCATE awa.%I, awa.%I', 'claim_batches_' || v_slot, 'lease_claim_closures_' || v_slot);
            UPDATE awa.claim_ring_slots SET generation = -1 WHERE slot = v_slot;
            PERFORM awa._ring_slot_freed('claim', v_slot);
        EXCEPTION WHEN SQLSTATE 'AWA01' THEN
            GET STACKED DIAGNOSTICS v_reason = MESSAGE_TEXT;
            RETURN v_reason;
        END;
    ELSE
        IF EXISTS (SELECT 1 FROM awa.leases WHERE lease_slot = v_slot) THEN
            RETURN 'skipped_open_leases';
        END IF;
        BEGIN
            IF NOT awa._lock_ring_partitions(ARRAY['leases_' || v_slot], p_lock_timeout_ms::integer) THEN
                RAISE EXCEPTION USING ERRCODE = 'AWA01', MESSAGE = 'skipped_locked';
            END IF;
            IF EXISTS (SELECT 1 FROM awa.leases WHERE lease_slot = v_slot) THEN
                RAISE EXCEPTION USING ERRCODE = 'AWA01', MESSAGE = 'skipped_open_leases';
            END IF;
            EXECUTE format('TRUNCATE awa.%I', 'leases_' || v_slot);
            UPDATE awa.lease_ring_slots SET generation = -1 WHERE slot = v_slot;
            PERFORM awa._ring_slot_freed('lease', v_slot);
        EXCEPTION WHEN SQLSTATE 'AWA01' THEN
            GET STACKED DIAGNOSTICS v_reason = MESSAGE_TEXT;
            RETURN v_reason;
        END;
    END IF;
    RETURN 'pruned';
END
$$;
REVOKE ALL ON FUNCTION awa.prune_attempt_ring(text, bigint) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION awa.prune_attempt_ring(text, bigint) TO awa_admin;
COMMENT ON FUNCTION awa.prune_attempt_ring(text, bigint) IS 'Reclaim the oldest sealed claim or lease slot when nothing in it is open. Role: awa_admin.';

-- Whether a claim slot holds an open receipt (awa._open_receipts). A completed receipt has
-- no closure, so counting receipts against closures no longer tells.
-- plpgsql, not SQL: Citus cannot plan an SQL function's parameters over distributed tables.
CREATE FUNCTION awa._claim_slot_has_open_receipts(p_slot integer) RETURNS boolean
    LANGUAGE plpgsql VOLATILE
    SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    RETURN EXISTS (SELECT 1 FROM awa._open_claim_batches b WHERE b.claim_slot = p_slot);
END
$$;
REVOKE ALL ON FUNCTION awa._claim_slot_has_open_receipts(integer) FROM PUBLIC;

-- Remove the places of concurrency keys no longer in use (docs/design.md §4, "Flow control"):
-- a place whose attempt's claim slot (or lease slot) has been pruned has not been used since
-- the ring turned past it (a key in use reuses its places within a turn, and a slot is pruned
-- only when every attempt in it has ended), so a key that stops appearing leaves no rows
-- behind. Each call reads the next p_blocks blocks of awa.key_attempts -- on a Citus node, of
-- the shards of it placed there, one after another (none on the coordinator) -- a TID range
-- from where the previous call of this session stopped (at a random block of a random table
-- in a new session), on past the end of a table into the next one (the same on one server)
-- and at most once round. A claim that reuses such a place meanwhile keeps it (the delete
-- rechecks the slot on the updated row), and the rings cannot turn while it runs (their
-- states are share-locked: a rotation meanwhile would put new attempts in a slot outside the
-- live arc read here; while a rotation or prune holds them, the call removes nothing).
-- READ COMMITTED only. Returns how many places it removed.
CREATE FUNCTION awa.prune_key_places(p_blocks bigint DEFAULT 128) RETURNS bigint
    LANGUAGE plpgsql VOLATILE
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp SET jit = off
AS $$
DECLARE
    c record;
    l record;
    v_tables text[];
    v_at text := current_setting('awa_maintenance.key_places_block', true);
    v_i integer;
    v_start_table integer;
    v_start_block bigint;
    v_around boolean := false;
    v_blocks bigint;
    v_end bigint;
    v_from bigint;
    v_to bigint;
    v_left bigint := p_blocks;
    v_count bigint := 0;
    v_deleted bigint;
BEGIN
    PERFORM awa._require(p_blocks IS NULL, 'p_blocks');
    PERFORM awa._require_at_least(p_blocks, 1, 'p_blocks');
    PERFORM awa._require_read_committed('prune_key_places');
    IF awa._citus_group() IS NULL THEN
        v_tables := ARRAY['awa.key_attempts'];
    ELSE
        v_tables := awa._citus_local_shard_names(ARRAY['awa.key_attempts'::regclass]);
        IF v_tables IS NULL THEN
            RETURN 0;
        END IF;
    END IF;
    -- Where this session's previous call stopped ('table:block'; a worker serving several
    -- databases in turns starts a new session each turn), else a random place.
    IF v_at ~ '^[0-9]{1,9}:[0-9]{1,15}$' AND split_part(v_at, ':', 1)::integer BETWEEN 1 AND cardinality(v_tables) THEN
        v_i := split_part(v_at, ':', 1)::integer;
        v_from := split_part(v_at, ':', 2)::bigint;
    ELSE
        v_i := 1 + floor(random() * cardinality(v_tables))::integer;
        v_from := floor(random() * (pg_relation_size(v_tables[v_i]) / current_setting('block_size')::bigint))::bigint;
    END IF;
    v_start_table := v_i;
    v_start_block := v_from;
    -- Tried, never waited for: a prune of a ring holds its state and may wait for a lock
    -- this transaction holds (run_maintenance); the next call removes what this one leaves.
    BEGIN
        PERFORM 1 FROM awa.claim_ring_state FOR KEY SHARE NOWAIT;
        PERFORM 1 FROM awa.lease_ring_state FOR KEY SHARE NOWAIT;
    EXCEPTION WHEN lock_not_available THEN
        RETURN 0;
    END;
    SELECT * INTO c FROM awa._ring_live_arc('claim');
    SELECT * INTO l FROM awa._ring_live_arc('lease');
    LOOP
        v_blocks := pg_relation_size(v_tables[v_i]) / current_setting('block_size')::bigint;
        -- Back at the first table after a round: up to where this call began.
        v_end := CASE WHEN v_around AND v_i = v_start_table THEN least(v_start_block, v_blocks) ELSE v_blocks END;
        v_to := CASE WHEN v_from >= v_end OR v_left >= v_end - v_from THEN greatest(v_end, v_from) ELSE v_from + v_left END;
        IF v_to > v_from THEN
            EXECUTE format($q$
                DELETE FROM %s k
                 WHERE k.ctid >= $1 AND k.ctid < $2
                   AND NOT coalesce(k.claim_slot BETWEEN $3 AND $4 OR k.claim_slot BETWEEN $5 AND $6, false)
                   AND NOT coalesce(k.lease_slot BETWEEN $7 AND $8 OR k.lease_slot BETWEEN $9 AND $10, false)$q$,
                v_tables[v_i])
              USING format('(%s,0)', v_from)::tid, format('(%s,0)', v_to)::tid,
                    c.lo1, c.hi1, c.lo2, c.hi2, l.lo1, l.hi1, l.lo2, l.hi2;
            GET DIAGNOSTICS v_deleted = ROW_COUNT;
            v_count := v_count + v_deleted;
            v_left := v_left - (v_to - v_from);
        END IF;
        IF v_around AND v_i = v_start_table THEN
            v_from := v_to;
            EXIT;
        END IF;
        IF v_to >= v_blocks THEN
            v_i := v_i % cardinality(v_tables) + 1;
            v_from := 0;
            v_around := v_around OR v_i = v_start_table;
        ELSE
            v_from := v_to;
        END IF;
        EXIT WHEN v_left <= 0;
    END LOOP;
    PERFORM set_config('awa_maintenance.key_places_block', v_i || ':' || v_from, false);
    RETURN v_count;
END
$$;
REVOKE ALL ON FUNCTION awa.prune_key_places(bigint) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION awa.prune_key_places(bigint) TO awa_admin;
COMMENT ON FUNCTION awa.prune_key_places(bigint) IS 'Remove the places of concurrency keys whose last attempt''s ring slot was pruned, p_blocks blocks of awa.key_attempts a call; returns how many. Role: awa_admin.';

-- Every periodic task once, in one transaction: the ticks of periodic jobs
-- (awa.run_schedules), promotion, deadline and heartbeat rescue, ring rotations, then at most one prune (queue ring first), so the exclusive
-- locks of a prune are held only from its truncate to this transaction's commit, then the
-- fold of the claim marks (awa.fold_claim_marks). A prune not run in this pass reports
-- 'deferred'. The background worker runs each step in
-- its own transaction instead.
DROP FUNCTION awa.run_maintenance(interval, integer);
CREATE FUNCTION awa.run_maintenance(p_stale_heartbeat interval DEFAULT '5 minutes',
                                               p_batch bigint DEFAULT 1000)
    RETURNS jsonb
    LANGUAGE plpgsql VOLATILE
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp SET jit = off
AS $$
DECLARE
    v_result jsonb;
    v_prune text;
    v_pruned boolean := false;
    v_rescued boolean;
BEGIN
    PERFORM awa._require(p_stale_heartbeat IS NULL OR p_batch IS NULL, 'p_stale_heartbeat and p_batch');
    PERFORM awa._check_arg(p_batch >= 1 AND p_stale_heartbeat > interval '0',
                           'p_batch must be at least 1 and p_stale_heartbeat positive');
    PERFORM awa._check_interval(p_stale_heartbeat, 'p_stale_heartbeat');
    PERFORM awa._check_arg(awa._interval_in_range(p_stale_heartbeat), 'p_stale_heartbeat must have no negative part');
    PERFORM awa._require_read_committed('run_maintenance');
    -- Promotion first, then the schedules: promotion waits for lanes (in lane order) holding
    -- none, and the schedules step waits only for lanes after those (docs/maintenance.md §2).
    v_result := jsonb_build_object('promoted', awa.promote_due(p_batch));
    v_result := v_result || jsonb_build_object('schedules', awa.run_schedules(p_batch));
    -- Both rescues in one pass, in one attempt order (awa._rescue: two passes could deadlock
    -- a worker's completion).
    SELECT v_result || jsonb_build_object('deadline_rescued', r.deadline_rescued, 'heartbeat_rescued', r.heartbeat_rescued),
           r.deadline_rescued + r.heartbeat_rescued > 0
      INTO v_result, v_rescued FROM awa._rescue(p_stale_heartbeat, true, least(p_batch, 2147483647)::integer) r;
    v_result := v_result || jsonb_build_object(
        'queue_ring', awa.rotate_queue_ring(),
        'claim_ring', awa.rotate_attempt_ring('claim'),
        'lease_ring', awa.rotate_attempt_ring('lease'));
    -- No prune in a transaction that rescued: a worker closing one of the rescued attempts
    -- waits for this transaction's closure while holding its ring partitions, which a prune
    -- would then wait for (a deadlock the worker can lose). The next call prunes.
    IF v_rescued THEN
        RETURN v_result || jsonb_build_object('queue_prune', 'deferred', 'claim_prune', 'deferred',
                                              'lease_prune', 'deferred', 'retention', 'deferred',
                                              'key_places', awa.prune_key_places(),
                                              'claim_marks', awa.fold_claim_marks());
    END IF;
    v_prune := awa.prune_queue_ring(50, true);
    v_pruned := v_prune IN ('pruned', 'moved');
    v_result := v_result || jsonb_build_object('queue_prune', v_prune);
    IF v_pruned THEN
        v_prune := 'deferred';
    ELSE
        v_prune := awa.prune_attempt_ring('claim', 50);
        v_pruned := v_prune = 'pruned';
    END IF;
    v_result := v_result || jsonb_build_object('claim_prune', v_prune);
    IF v_pruned THEN
        v_prune := 'deferred';
    ELSE
        v_prune := awa.prune_attempt_ring('lease', 50);
        v_pruned := v_prune = 'pruned';
    END IF;
    v_result := v_result || jsonb_build_object('lease_prune', v_prune);
    -- Expired retention buckets: one truncate, unless a prune above took its locks already.
    IF v_pruned THEN
        v_prune := 'deferred';
    ELSE
        v_prune := awa.expire_retention(50);
    END IF;
    -- Last: the heads it locks stay locked only until this transaction commits.
    RETURN v_result || jsonb_build_object('retention', v_prune, 'key_places', awa.prune_key_places(),
                                          'claim_marks', awa.fold_claim_marks());
END
$$;
REVOKE ALL ON FUNCTION awa.run_maintenance(interval, bigint) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION awa.run_maintenance(interval, bigint) TO awa_admin;
COMMENT ON FUNCTION awa.run_maintenance(interval, bigint) IS 'Every periodic task once (promotion, rescue, rotation, one prune); returns what each did. Role: awa_admin.';

-- The next transaction id the cluster will assign (src/ring.cpp): read after a snapshot, every
-- transaction running at that snapshot has a lower id.
CREATE FUNCTION awa._next_xid() RETURNS xid8
    AS 'MODULE_PATHNAME', 'awa_next_xid'
    LANGUAGE C VOLATILE STRICT PARALLEL UNSAFE
    SET search_path = pg_catalog, pg_temp;
REVOKE ALL ON FUNCTION awa._next_xid() FROM PUBLIC;
COMMENT ON FUNCTION awa._next_xid() IS 'Internal: the next transaction id the cluster will assign.';

-- Stale heartbeat rows of one queue's attempts that are no longer open: a heartbeat that
-- committed after the completion of its attempt, which could not see the uncommitted row and
-- left it behind. Nothing else reads them; without this they would stay for good. At most
-- p_limit rows; how many went. queue = p_queue on every table, so that on a Citus worker the
-- queue's own shards answer it (awa._rescue runs it per queue on every server).
CREATE FUNCTION awa._sweep_stale_attempt_state(p_queue text, p_cutoff timestamptz, p_limit integer)
    RETURNS integer
    LANGUAGE plpgsql VOLATILE
    SET search_path = pg_catalog, pg_temp SET plan_cache_mode = force_custom_plan
AS $$
DECLARE
    v_swept integer;
BEGIN
    DELETE FROM awa.attempt_state a
     WHERE a.ctid = ANY (ARRAY(
         SELECT s.ctid FROM awa.attempt_state s
          WHERE s.queue = p_queue AND s.heartbeat_at < p_cutoff
            AND NOT EXISTS (SELECT 1 FROM awa._open_receipts c
                             WHERE c.job_id = s.job_id AND c.run_lease = s.run_lease AND c.queue = p_queue)
            AND NOT EXISTS (SELECT 1 FROM awa.leases l
                             WHERE l.job_id = s.job_id AND l.run_lease = s.run_lease AND l.queue = p_queue
                               AND l.state IN ('running', 'waiting_external'))
          LIMIT p_limit))
       AND a.queue = p_queue AND a.heartbeat_at < p_cutoff;
    GET DIAGNOSTICS v_swept = ROW_COUNT;
    RETURN v_swept;
END
$$;
REVOKE ALL ON FUNCTION awa._sweep_stale_attempt_state(text, timestamptz, integer) FROM PUBLIC;
COMMENT ON FUNCTION awa._sweep_stale_attempt_state(text, timestamptz, integer) IS 'Internal: delete up to p_limit stale heartbeat rows of a queue''s attempts that are no longer open; how many.';

-- Both rescues in one pass: attempts past their hard deadline (p_deadlines) and attempts
-- whose last heartbeat (or claim) is older than p_stale (unless NULL), up to p_limit of each,
-- taken in ONE order, the order of every exit that closes several attempts in a
-- transaction: receipts first, by their claim batch (receipt_base), then leases by
-- (job_id, run_lease). Two passes, each in that order, could deadlock a completion: the
-- second pass may go back to a lower batch than one the first holds (spec
-- maintenance_vs_complete_order). An attempt in both lists counts as a deadline rescue (one
-- past its deadline that only the heartbeat list reached, the deadline list being full, is
-- rescued as stale, as two passes would have done).
-- A receipt whose claim batch another transaction holds is left for the next pass.
-- Retryable with backoff while attempts remain, failed at the last one (like fail_job).
-- Its statements keep one generic plan: a custom plan of the search below (every partition
-- of the ready, batch and attempt tables) took 10-17 ms to make on every call, 95 % of an
-- idle maintenance pass, and the generic plan runs as fast (regression test
-- maintenance_guarantees; docs/benchmarks.md, "maintenance pass").
-- The deadline search reads claim batches from awa.rescue_progress's watermark on (their
-- deadline index), so a pass costs the batches whose deadline passed since the passes before
-- it and the attempts still open among them, not every completed claim of the ring
-- (regression test rescue_deadline_cost). A pass at READ COMMITTED that gets the progress row
-- (SKIP LOCKED: a concurrent pass keeps it) moves the watermark up to the candidate of an
-- earlier pass once every transaction running at that candidate's snapshot has ended, and
-- leaves its own candidate: its start, or the earliest deadline of an attempt it left open
-- (its batch was busy, or beyond p_limit), with the snapshot it read that under and the next
-- transaction id after it.
-- A deadline pass first asks whether any claim batch with a deadline in its window holds an
-- open receipt (awa._open_claim_batches, by the deadline index) or any running lease is past
-- its deadline; if none, it runs neither the search nor the earliest-deadline read, whose
-- plans start every partition of the ready, batch and attempt tables (8.7 ms a pass in a
-- 1,000 jobs/s cell, the most of any step), and its candidate is its start, read with its
-- snapshot in the same statement as the answer. A heartbeat pass likewise searches only when
-- a claim batch was claimed before its cutoff or a running lease's heartbeat is older.
CREATE FUNCTION awa._rescue(p_stale interval, p_deadlines boolean, p_limit integer,
                            OUT deadline_rescued integer, OUT heartbeat_rescued integer)
    LANGUAGE plpgsql VOLATILE
    SET search_path = pg_catalog, pg_temp SET plan_cache_mode = force_generic_plan
AS $$
DECLARE
    v_now timestamptz := clock_timestamp();
    v_cutoff timestamptz := clock_timestamp() - p_stale;
    v_from timestamptz := '-infinity';
    v_progress awa.rescue_progress;
    v_owner boolean := false;
    v_ended boolean := false;
    v_open_from timestamptz;
    v_open_snapshot pg_snapshot;
    v_open_next xid8;
    r record;
    t awa.taken_attempt;
    v_citus boolean := awa._citus_group() IS NOT NULL;
    v_queue text;
    v_queues text[];
    v_swept integer := 0;
    v_due boolean := false;
    v_leases_due boolean := false;
    v_stale boolean := false;
    v_cursor record;
    v_window record;
    w record;
    v_stale_bases bigint[] := '{}';
    v_stale_jobs bigint[] := '{}';
    v_stale_leases bigint[] := '{}';
BEGIN
    deadline_rescued := 0;
    heartbeat_rescued := 0;
    IF p_deadlines THEN
        -- After v_now, so that a candidate left below is never later than the snapshot it
        -- is read under.
        IF current_setting('transaction_isolation') = 'read committed' THEN
            SELECT * INTO v_progress FROM awa.rescue_progress FOR UPDATE SKIP LOCKED;
            v_owner := FOUND;
        END IF;
        IF NOT v_owner THEN
            SELECT * INTO v_progress FROM awa.rescue_progress;
        END IF;
        v_from := coalesce(v_progress.deadline_watermark, '-infinity');
        -- Every transaction that was running when the candidate was read (those of its
        -- snapshot's list, and any from its xmax up to the next id read after it: ids that
        -- high are not listed) has ended by now, so the search below sees every batch any of
        -- them committed. A range too long to test id by id waits until all of it has ended.
        IF v_owner AND v_progress.candidate_snapshot IS NOT NULL THEN
            SELECT NOT EXISTS (SELECT 1 FROM pg_catalog.pg_snapshot_xip(v_progress.candidate_snapshot) x
                                WHERE NOT pg_catalog.pg_visible_in_snapshot(x, s.cur))
                   AND (pg_catalog.pg_snapshot_xmin(s.cur) >= v_progress.candidate_next
                        OR (s.next - s.xmax <= 10000
                            AND NOT EXISTS (SELECT 1 FROM pg_catalog.generate_series(s.xmax, s.next - 1) g
                                             WHERE NOT pg_catalog.pg_visible_in_snapshot(g::text::xid8, s.cur))))
              INTO v_ended
              FROM (SELECT pg_catalog.pg_current_snapshot() AS cur,
                           pg_catalog.pg_snapshot_xmax(v_progress.candidate_snapshot)::text::bigint AS xmax,
                           v_progress.candidate_next::text::bigint AS next) s;
        END IF;
        -- Anything due: a claim batch with a deadline in the window (by the deadline index)
        -- and then, if so, one with an open receipt (batch by batch: a completed batch costs
        -- one probe; its plan starts the receipt test's partitions, so it is asked second),
        -- or a running lease past its deadline. On one server only (a Citus node reads queue
        -- by queue below).
        -- The snapshot that goes with the candidate is the one of the statement that last
        -- looked at the batches (leases have no candidate).
        IF v_citus THEN
            v_due := true;
        ELSE
            SELECT EXISTS (SELECT 1 FROM awa.claim_batches b
                            WHERE b.deadline_at >= v_from AND b.deadline_at < v_now),
                   EXISTS (SELECT 1 FROM awa.leases l
                            WHERE l.deadline_at IS NOT NULL AND l.deadline_at < v_now AND l.state = 'running'),
                   pg_catalog.pg_current_snapshot()
              INTO v_due, v_leases_due, v_open_snapshot;
            IF v_due AND NOT v_leases_due THEN
                SELECT EXISTS (SELECT 1 FROM awa._open_claim_batches b
                                WHERE b.deadline_at >= v_from AND b.deadline_at < v_now),
                       pg_catalog.pg_current_snapshot()
                  INTO v_due, v_open_snapshot;
            END IF;
            v_due := v_due OR v_leases_due;
        END IF;
    END IF;
    -- On a Citus cluster: this node's queues, one at a time, each in its own statements
    -- (awa._rescue_queue, the deadline search from this node's watermark; docs/scale-out.md,
    -- "Maintenance").
    IF v_citus THEN
        FOR v_queue IN SELECT q FROM awa._citus_local_queues() q LOOP
            SELECT * INTO r FROM awa._rescue_queue(v_queue, p_stale, p_deadlines, p_limit, v_from);
            deadline_rescued := deadline_rescued + r.deadline_rescued;
            heartbeat_rescued := heartbeat_rescued + r.heartbeat_rescued;
        END LOOP;
    ELSE
    -- Anything stale at all: a claim batch claimed before the cutoff (its attempts may be
    -- open) or a running lease whose heartbeat is older.
    IF v_cutoff IS NOT NULL THEN
        v_stale := EXISTS (SELECT 1 FROM awa.claim_batches b WHERE b.claimed_at < v_cutoff)
                   OR EXISTS (SELECT 1 FROM awa.leases l WHERE l.state = 'running' AND l.heartbeat_at < v_cutoff);
    END IF;
    -- The stale attempts of claim batches: at most 500 batches claimed before the cutoff a
    -- pass, from the cursor in awa.rescue_progress on (every batch before the cutoff, in
    -- (claimed_at, claim_slot, receipt_base) order, then from the start again), each asked
    -- first whether it holds an open receipt (awa._open_claim_batches: one probe when all its
    -- attempts have ended), only the open ones receipt by receipt. Reading every batch before
    -- the cutoff on every pass cost minutes once a dead worker's attempt had pinned the claim
    -- ring for the stale interval.
    IF v_stale THEN
        SELECT p.stale_cursor_at AS at, p.stale_cursor_slot AS slot, p.stale_cursor_base AS base
          INTO v_cursor FROM awa.rescue_progress p;
        SELECT x.claimed_at, x.claim_slot, x.receipt_base, x.n INTO v_window
          FROM (SELECT b.claimed_at, b.claim_slot, b.receipt_base, count(*) OVER () AS n
                  FROM (SELECT b.claimed_at, b.claim_slot, b.receipt_base FROM awa.claim_batches b
                         WHERE b.claimed_at < v_cutoff
                           AND (v_cursor.at IS NULL OR (b.claimed_at, b.claim_slot, b.receipt_base)
                                                        > (v_cursor.at, v_cursor.slot, v_cursor.base))
                         ORDER BY 1, 2, 3 LIMIT 500) b) x
         ORDER BY 1 DESC, 2 DESC, 3 DESC LIMIT 1;
        FOR w IN
            SELECT b.claim_slot, b.receipt_base, b.queue, b.priority, b.enqueue_shard, b.lane_block, b.ready_slot
              FROM awa._open_claim_batches b
             WHERE b.claimed_at < v_cutoff
               AND (v_cursor.at IS NULL OR (b.claimed_at, b.claim_slot, b.receipt_base)
                                            > (v_cursor.at, v_cursor.slot, v_cursor.base))
               AND (b.claimed_at, b.claim_slot, b.receipt_base)
                   <= (v_window.claimed_at, v_window.claim_slot, v_window.receipt_base)
        LOOP
            SELECT v_stale_bases || array_agg(c.receipt_base), v_stale_jobs || array_agg(c.job_id),
                   v_stale_leases || array_agg(c.run_lease)
              INTO v_stale_bases, v_stale_jobs, v_stale_leases
              FROM awa._open_receipts c
              LEFT JOIN awa.attempt_state a ON a.job_id = c.job_id AND a.run_lease = c.run_lease AND a.queue = c.queue
             WHERE c.queue = w.queue AND c.priority = w.priority AND c.enqueue_shard = w.enqueue_shard
               AND c.lane_block = w.lane_block AND c.ready_slot = w.ready_slot AND c.claim_slot = w.claim_slot
               AND c.receipt_base = w.receipt_base
               AND coalesce(a.heartbeat_at, c.claimed_at) < v_cutoff;
        END LOOP;
        -- The next pass goes on after this window, or from the start when it reached the end;
        -- it reads the window again while more of it is stale than this pass may take.
        UPDATE awa.rescue_progress p
           SET stale_cursor_at = CASE WHEN v_window.n >= 500 THEN v_window.claimed_at END,
               stale_cursor_slot = CASE WHEN v_window.n >= 500 THEN v_window.claim_slot END,
               stale_cursor_base = CASE WHEN v_window.n >= 500 THEN v_window.receipt_base END
         WHERE p.only_row AND current_setting('transaction_isolation') = 'read committed'
           AND cardinality(v_stale_jobs) <= p_limit
           AND p.only_row IN (SELECT q.only_row FROM awa.rescue_progress q FOR UPDATE SKIP LOCKED);
    END IF;
    IF v_due OR v_stale THEN
    FOR r IN
        WITH deadlines AS (
            SELECT c.receipt_base, c.job_id, c.run_lease FROM awa._open_receipts c
             WHERE p_deadlines AND c.deadline_at >= v_from AND c.deadline_at < v_now
            UNION ALL
            SELECT NULL, l.job_id, l.run_lease FROM awa.leases l
             WHERE p_deadlines AND l.deadline_at IS NOT NULL AND l.deadline_at < v_now AND l.state = 'running'
            ORDER BY 1 NULLS LAST, 2, 3
            LIMIT p_limit),
        stale AS (
            SELECT s.receipt_base, s.job_id, s.run_lease
              FROM ROWS FROM (pg_catalog.unnest(v_stale_bases), pg_catalog.unnest(v_stale_jobs),
                              pg_catalog.unnest(v_stale_leases)) AS s(receipt_base, job_id, run_lease)
            UNION ALL
            SELECT NULL, l.job_id, l.run_lease FROM awa.leases l
             WHERE v_cutoff IS NOT NULL AND l.state = 'running' AND l.heartbeat_at < v_cutoff
            ORDER BY 1 NULLS LAST, 2, 3
            LIMIT p_limit)
        SELECT DISTINCT ON (receipt_base, job_id, run_lease) job_id, run_lease, due_deadline
          FROM (SELECT receipt_base, job_id, run_lease, true AS due_deadline FROM deadlines
                UNION ALL
                SELECT receipt_base, job_id, run_lease, false FROM stale) due
         ORDER BY receipt_base NULLS LAST, job_id, run_lease, due_deadline DESC
    LOOP
        t := awa._take_attempt_unless_busy(r.job_id, r.run_lease,
                                           CASE WHEN r.due_deadline THEN 'deadline_expired' ELSE 'rescued' END);
        CONTINUE WHEN t.job_id IS NULL;
        IF r.due_deadline THEN
            PERFORM awa._rescue_taken(t, 'hard deadline exceeded');
            deadline_rescued := deadline_rescued + 1;
        ELSE
            PERFORM awa._rescue_taken(t, 'heartbeat stale: worker presumed dead');
            heartbeat_rescued := heartbeat_rescued + 1;
        END IF;
    END LOOP;
    END IF;
    END IF;
    IF v_owner THEN
        -- The earliest deadline still open in what this pass searched (its own rescues are
        -- closed now), read together with the snapshot that saw it. On a Citus cluster it is
        -- read queue by queue, in several statements: the snapshot is taken before the first
        -- of them (a transaction that commits during the reads is then one to wait for) and
        -- the next transaction id after the last.
        IF v_citus THEN
            v_open_snapshot := pg_catalog.pg_current_snapshot();
            v_open_from := v_now;
            FOR v_queue IN SELECT q FROM awa._citus_local_queues() q LOOP
                SELECT least(v_open_from, min(c.deadline_at)) INTO v_open_from
                  FROM awa._open_receipts c
                 WHERE c.queue = v_queue AND c.deadline_at >= v_from AND c.deadline_at < v_now;
            END LOOP;
        ELSIF v_due THEN
            SELECT least(min(c.deadline_at), v_now), pg_catalog.pg_current_snapshot()
              INTO v_open_from, v_open_snapshot
              FROM awa._open_receipts c WHERE c.deadline_at >= v_from AND c.deadline_at < v_now;
        ELSE
            -- No open receipt had a deadline in the window when v_open_snapshot was taken.
            v_open_from := v_now;
        END IF;
        v_open_next := awa._next_xid();
        UPDATE awa.rescue_progress p
           SET deadline_watermark = CASE WHEN v_ended
                                         THEN greatest(p.deadline_watermark, least(p.deadline_candidate, v_open_from))
                                         ELSE p.deadline_watermark END,
               deadline_candidate = CASE WHEN v_ended OR p.candidate_snapshot IS NULL
                                         THEN v_open_from ELSE p.deadline_candidate END,
               candidate_snapshot = CASE WHEN v_ended OR p.candidate_snapshot IS NULL
                                         THEN v_open_snapshot ELSE p.candidate_snapshot END,
               candidate_next = CASE WHEN v_ended OR p.candidate_snapshot IS NULL
                                     THEN v_open_next ELSE p.candidate_next END
         WHERE p.only_row;
    END IF;
    IF v_cutoff IS NOT NULL THEN
        -- Stale heartbeat rows of attempts no longer open, queue by queue
        -- (awa._sweep_stale_attempt_state): on a Citus cluster this node's queues; on one
        -- server the queues that have such rows.
        IF v_citus THEN
            v_queues := ARRAY(SELECT q FROM awa._citus_local_queues() q);
        ELSE
            v_queues := ARRAY(SELECT DISTINCT s.queue FROM awa.attempt_state s WHERE s.heartbeat_at < v_cutoff);
        END IF;
        FOREACH v_queue IN ARRAY v_queues LOOP
            EXIT WHEN v_swept >= p_limit;
            v_swept := v_swept + awa._sweep_stale_attempt_state(v_queue, v_cutoff, p_limit - v_swept);
        END LOOP;
    END IF;
END
$$;
REVOKE ALL ON FUNCTION awa._rescue(interval, boolean, integer) FROM PUBLIC;
COMMENT ON FUNCTION awa._rescue(interval, boolean, integer) IS 'Internal: both rescues in one pass, every attempt taken in one order (receipts mode by claim batch, then leases mode by job).';

-- Rescue attempts whose last heartbeat (or claim) is older than p_stale: retryable with
-- backoff while attempts remain, failed at the last one (like fail_job).
DROP FUNCTION awa.rescue_stale_heartbeats(interval, integer);
CREATE FUNCTION awa.rescue_stale_heartbeats(p_stale interval, p_limit bigint DEFAULT 500)
    RETURNS integer
    LANGUAGE plpgsql VOLATILE
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp SET jit = off
AS $$
BEGIN
    PERFORM awa._require(p_stale IS NULL OR p_limit IS NULL, 'p_stale and p_limit');
    PERFORM awa._check_arg(p_stale > interval '0' AND p_limit >= 1, 'p_stale must be positive and p_limit at least 1');
    PERFORM awa._check_interval(p_stale, 'p_stale');
    PERFORM awa._check_arg(awa._interval_in_range(p_stale), 'p_stale must have no negative part');
    RETURN (awa._rescue(p_stale, false, least(p_limit, 2147483647)::integer)).heartbeat_rescued;
END
$$;
REVOKE ALL ON FUNCTION awa.rescue_stale_heartbeats(interval, bigint) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION awa.rescue_stale_heartbeats(interval, bigint) TO awa_admin;
COMMENT ON FUNCTION awa.rescue_stale_heartbeats(interval, bigint) IS 'Take back attempts whose heartbeat is older than p_stale (retryable, or failed at the last attempt). Role: awa_admin.';

-- Rescue attempts past their hard deadline, with the same last-attempt rule.
DROP FUNCTION awa.rescue_expired_deadlines(integer);
CREATE FUNCTION awa.rescue_expired_deadlines(p_limit bigint DEFAULT 500)
    RETURNS integer
    LANGUAGE plpgsql VOLATILE
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp SET jit = off
AS $$
BEGIN
    PERFORM awa._require(p_limit IS NULL, 'p_limit');
    PERFORM awa._require_at_least(p_limit, 1, 'p_limit');
    RETURN (awa._rescue(NULL, true, least(p_limit, 2147483647)::integer)).deadline_rescued;
END
$$;
REVOKE ALL ON FUNCTION awa.rescue_expired_deadlines(bigint) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION awa.rescue_expired_deadlines(bigint) TO awa_admin;
COMMENT ON FUNCTION awa.rescue_expired_deadlines(bigint) IS 'Take back attempts past their hard deadline (retryable, or failed at the last attempt). Role: awa_admin.';

-- A rescued attempt: back to deferred_jobs as retryable with backoff while attempts
-- remain; at its last attempt the job ends as fail_job would leave it (awa._fail_exhausted,
-- defined below with the DLQ setting it reads).
CREATE FUNCTION awa._rescue_taken(t awa.taken_attempt, p_error text) RETURNS void
    LANGUAGE plpgsql VOLATILE
    SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF t.attempt >= t.max_attempts THEN
        PERFORM awa._fail_exhausted(t, p_error);
    ELSE
        PERFORM awa._defer_attempt(t, 'retryable',
            clock_timestamp() + awa.backoff_duration(t.attempt, t.max_attempts), t.attempt,
            awa._append_error(t.errors, p_error, t.attempt, false));
    END IF;
END
$$;
REVOKE ALL ON FUNCTION awa._rescue_taken(awa.taken_attempt, text) FROM PUBLIC;
-- Cancel a job wherever it is live, in this order: an unclaimed ready row (removed under
-- its lane head lock; the cancelled terminal row takes the row's own identity and body),
-- an open attempt (receipts or leases mode alike; closed with outcome
-- 'cancelled'; the terminal row lands on the ready row's shard), a deferred row (its
-- terminal row gets lane_seq = -job_id on shard 0 of the queue ring's write slot: no lane exists).
-- Returns whether it cancelled; notifies channel 'awa:cancel' with the job id.
DROP FUNCTION awa.cancel_job(bigint);
CREATE FUNCTION awa.cancel_job(p_job_id bigint, p_queue text DEFAULT NULL) RETURNS boolean
    LANGUAGE plpgsql VOLATILE
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp SET plan_cache_mode = force_custom_plan
AS $$
DECLARE
    r awa.ready_entries;
    t awa.taken_attempt;
    d awa.deferred_jobs;
BEGIN
    PERFORM awa._require_queue_local(p_queue);  -- on a Citus cluster: delegated by p_queue, or 0A000
    PERFORM awa._require(p_job_id IS NULL, 'p_job_id');
    -- At REPEATABLE READ or SERIALIZABLE the snapshot may predate the claim of a running
    -- job: its open attempt, found on the latest committed state, is taken first. Only
    -- otherwise is the ready row looked at, which raises 40001 if it was claimed since.
    IF pg_catalog.current_setting('transaction_isolation') IN ('repeatable read', 'serializable') THEN
        t := awa._take_open_attempt(p_job_id, 'cancelled', p_queue);
        -- Running in this snapshot but no longer: the attempt ended since (retried, snoozed,
        -- failed...), and where the job is now this snapshot cannot see.
        IF t.job_id IS NULL
           AND (EXISTS (SELECT 1 FROM awa._open_receipts c WHERE c.job_id = p_job_id AND (p_queue IS NULL OR c.queue = p_queue))
                OR EXISTS (SELECT 1 FROM awa.leases l
                            WHERE l.job_id = p_job_id AND (p_queue IS NULL OR l.queue = p_queue)
                              AND l.state IN ('running', 'waiting_external'))) THEN
            RAISE EXCEPTION USING ERRCODE = '40001',
                MESSAGE = 'could not serialize access: the job''s attempt ended after this transaction''s snapshot',
                DETAIL = format('Job %s.', p_job_id),
                HINT = 'Retry the transaction, or run it at READ COMMITTED.';
        END IF;
    END IF;
    IF t.job_id IS NULL THEN
        r := awa._take_unclaimed_ready(p_job_id, p_queue);
    END IF;
    IF t.job_id IS NOT NULL THEN
        PERFORM awa._finish_attempt(t, 'cancelled', t.errors);
    ELSIF r.job_id IS NOT NULL THEN
        PERFORM awa._end_job(awa._job(r), jsonb_build_object('ready_slot', r.ready_slot,
            'ready_generation', r.ready_generation, 'enqueue_shard', r.enqueue_shard, 'lane_seq', r.lane_seq),
            'available', 'cancelled');
    ELSE
        t := awa._take_open_attempt(p_job_id, 'cancelled', p_queue);
        IF t.job_id IS NOT NULL THEN
            PERFORM awa._finish_attempt(t, 'cancelled', t.errors);
        ELSE
            DELETE FROM awa.deferred_jobs j WHERE j.job_id = p_job_id AND (p_queue IS NULL OR j.queue = p_queue)
            RETURNING j.* INTO d;
            IF NOT FOUND THEN
                RETURN false;
            END IF;
            PERFORM awa._end_job(awa._job(d), jsonb_build_object('ready_slot', s.slot,
                'ready_generation', s.generation, 'enqueue_shard', 0, 'lane_seq', -d.job_id), d.state, 'cancelled')
              FROM awa._ring_write_slot('queue') s;
        END IF;
    END IF;
    PERFORM pg_notify('awa:cancel', p_job_id::text);
    RETURN true;
END
$$;
REVOKE ALL ON FUNCTION awa.cancel_job(bigint, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION awa.cancel_job(bigint, text) TO awa_admin;
COMMENT ON FUNCTION awa.cancel_job(bigint, text) IS 'Cancel a live job wherever it is (waiting, running, scheduled); false when it is not live. Role: awa_admin.';

-- Delete a job in any state (1.1: a completion is found through its ready row, its
-- terminal row (1.0) or its completion batch with it).
DROP FUNCTION awa.delete_job(bigint);
CREATE FUNCTION awa.delete_job(p_job_id bigint, p_queue text DEFAULT NULL) RETURNS boolean
    LANGUAGE plpgsql VOLATILE
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp SET plan_cache_mode = force_custom_plan
AS $$
DECLARE
    r awa.ready_entries;
    t awa.taken_attempt;
    v_found boolean := false;
    v_rows bigint;
    v_batch record;
BEGIN
    PERFORM awa._require_queue_local(p_queue);  -- on a Citus cluster: delegated by p_queue, or 0A000
    PERFORM awa._require(p_job_id IS NULL, 'p_job_id');
    r := awa._take_unclaimed_ready(p_job_id, p_queue);
    v_found := r.job_id IS NOT NULL;
    IF NOT v_found THEN
        DELETE FROM awa.deferred_jobs j WHERE j.job_id = p_job_id AND (p_queue IS NULL OR j.queue = p_queue);
        v_found := FOUND;
    END IF;
    IF NOT v_found THEN
        t := awa._take_open_attempt(p_job_id, 'terminal_removed', p_queue);
        v_found := t.job_id IS NOT NULL;
    END IF;
    -- Terminal rows: those the job index holds, then a completion's, through its ready row.
    -- A completion's ready row goes with it: its terminal row is what ended its receipt
    -- (awa._open_receipts), and the ready row alone would make the receipt look open again.
    DELETE FROM awa.done_entries d
     WHERE d.job_id = p_job_id AND (p_queue IS NULL OR d.queue = p_queue)
       AND (d.state <> 'completed' OR d.kind IS NOT NULL);
    GET DIAGNOSTICS v_rows = ROW_COUNT;
    v_found := v_found OR v_rows > 0;
    WITH completion AS (
        DELETE FROM awa.done_entries d USING awa.ready_entries x
         WHERE x.job_id = p_job_id AND (p_queue IS NULL OR x.queue = p_queue) AND d.state = 'completed' AND d.kind IS NULL
           AND d.ready_slot = x.ready_slot AND d.ready_generation = x.ready_generation AND d.queue = x.queue
           AND d.priority = x.priority AND d.enqueue_shard = x.enqueue_shard AND d.lane_seq = x.lane_seq
        RETURNING d.ready_slot, d.queue, d.priority, d.enqueue_shard, d.lane_seq),
    ready AS (
        DELETE FROM awa.ready_entries x USING completion c
         WHERE x.job_id = p_job_id AND (p_queue IS NULL OR x.queue = p_queue) AND x.ready_slot = c.ready_slot
           AND x.queue = c.queue
           AND x.priority = c.priority AND x.enqueue_shard = c.enqueue_shard AND x.lane_seq = c.lane_seq)
    SELECT count(*) INTO v_rows FROM completion;
    v_found := v_found OR v_rows > 0;
    -- A completion in a batch: the job leaves the batch's arrays (the batch goes when it is
    -- left empty), and its ready row goes with it, for the same reason.
    WITH completion AS (
        UPDATE awa.completion_batches b
           SET lane_offsets = b.lane_offsets[:array_position(b.lane_offsets, (x.lane_seq % 64)::smallint) - 1]
                              || b.lane_offsets[array_position(b.lane_offsets, (x.lane_seq % 64)::smallint) + 1:],
               attempted_at = b.attempted_at[:array_position(b.lane_offsets, (x.lane_seq % 64)::smallint) - 1]
                              || b.attempted_at[array_position(b.lane_offsets, (x.lane_seq % 64)::smallint) + 1:],
               results = b.results[:array_position(b.lane_offsets, (x.lane_seq % 64)::smallint) - 1]
                         || b.results[array_position(b.lane_offsets, (x.lane_seq % 64)::smallint) + 1:]
          FROM awa.ready_entries x
         WHERE x.job_id = p_job_id AND (p_queue IS NULL OR x.queue = p_queue)
           AND b.ready_slot = x.ready_slot AND b.ready_generation = x.ready_generation
           AND b.queue = x.queue AND b.priority = x.priority AND b.enqueue_shard = x.enqueue_shard
           AND b.lane_block = x.lane_seq / 64
           AND (x.lane_seq % 64)::smallint = ANY (b.lane_offsets)
        RETURNING b.ready_slot, b.queue, b.priority, b.enqueue_shard, b.lane_block, x.lane_seq),
    ready AS (
        DELETE FROM awa.ready_entries x USING completion c
         WHERE x.job_id = p_job_id AND (p_queue IS NULL OR x.queue = p_queue) AND x.ready_slot = c.ready_slot
           AND x.queue = c.queue
           AND x.priority = c.priority AND x.enqueue_shard = c.enqueue_shard AND x.lane_seq = c.lane_seq)
    SELECT c.ready_slot, c.queue, c.priority, c.enqueue_shard, c.lane_block INTO v_batch FROM completion c;
    IF v_batch.queue IS NOT NULL THEN
        v_found := true;
        DELETE FROM awa.completion_batches b
         WHERE b.queue = v_batch.queue AND b.priority = v_batch.priority
           AND b.enqueue_shard = v_batch.enqueue_shard AND b.lane_block = v_batch.lane_block
           AND b.ready_slot = v_batch.ready_slot AND b.lane_offsets = '{}';
    END IF;
    DELETE FROM awa.dlq_entries e WHERE e.job_id = p_job_id AND (p_queue IS NULL OR e.queue = p_queue);
    GET DIAGNOSTICS v_rows = ROW_COUNT;
    v_found := v_found OR v_rows > 0;
    IF v_found THEN
        DELETE FROM awa.job_unique_claims u WHERE u.job_id = p_job_id AND (p_queue IS NULL OR u.queue = p_queue);
        PERFORM awa._job_finished(p_job_id);
    END IF;
    RETURN v_found;
END
$$;
REVOKE ALL ON FUNCTION awa.delete_job(bigint, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION awa.delete_job(bigint, text) TO awa_admin;
COMMENT ON FUNCTION awa.delete_job(bigint, text) IS 'Delete a job in any state and release its unique claim. Role: awa_admin.';

-- Physical priority aging: waiting ready rows of lanes with priority > 1 move one
-- priority up, always as a prefix of their lane in lane_seq order (from the claim cursor
-- up to the first row younger than p_older_than), at most p_limit rows. Their lane heads
-- are locked (sorted, SKIP LOCKED: lanes being claimed right now are left for the next
-- run), the rows are removed by full identity and re-enqueued at priority - 1 through
-- awa._enqueue_ready in lane order, so the jobs of one key keep their order: keyed rows
-- keep their key's shard, keyless rows take the rotor, within the queue's current width.
-- _awa_original_priority is stamped once. p_queue limits the run to one queue (NULL:
-- every queue; on a Citus cluster p_queue is required, 0A000 without it, and the call must
-- be delegated to the queue's worker). Returns how many rows moved up.
DROP FUNCTION awa.age_waiting_priorities(interval, integer, text);
CREATE FUNCTION awa.age_waiting_priorities(p_older_than interval, p_limit bigint DEFAULT 1000,
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
    PERFORM awa._check_arg(p_older_than >= interval '0', 'p_older_than must not be negative');
    PERFORM awa._check_interval(p_older_than, 'p_older_than');
    PERFORM awa._check_arg(awa._interval_in_range(p_older_than), 'p_older_than must have no negative part');
    PERFORM awa._check_between(p_limit, 1, 100000, 'p_limit');
    IF p_queue IS NOT NULL THEN
        PERFORM awa._check_queue(p_queue, 'p_queue');
    ELSIF awa._citus_group() IS NOT NULL THEN
        -- Every queue at once would lock lane heads and re-enqueue on several workers in one
        -- transaction, which a cluster cannot do (docs/scale-out.md): one queue per call.
        RAISE EXCEPTION 'on a Citus cluster awa.age_waiting_priorities needs p_queue'
            USING ERRCODE = '0A000',
                  DETAIL = 'Aging every queue at once would move jobs of several workers in one transaction.',
                  HINT = 'Call awa.age_waiting_priorities(p_older_than, p_limit, p_queue => ''the queue'') for each queue, alone in its statement.';
    END IF;
    PERFORM awa._require_queue_local(p_queue);
    v_cutoff := clock_timestamp() - p_older_than;
    -- On a Citus cluster (p_queue given, its shards here): the same aging in statements that
    -- each name the queue (docs/scale-out.md).
    IF awa._citus_group() IS NOT NULL THEN
        RETURN awa._age_waiting_queue(p_queue, v_cutoff, p_limit);
    END IF;
    SELECT array_agg(h.queue), array_agg(h.priority), array_agg(h.enqueue_shard)
      INTO v_queues, v_priorities, v_shards
      FROM (SELECT c.queue, c.priority, c.enqueue_shard FROM awa.queue_claim_heads c
             WHERE c.priority > 1 AND (p_queue IS NULL OR c.queue = p_queue)
               AND EXISTS (SELECT 1 FROM awa.lane_cursors k
                             JOIN awa.ready_entries r
                               ON r.queue = k.queue AND r.priority = k.priority
                              AND r.enqueue_shard = k.enqueue_shard AND r.lane_seq >= k.claim_seq
                            WHERE k.queue = c.queue AND k.priority = c.priority
                              AND k.enqueue_shard = c.enqueue_shard AND r.run_at <= v_cutoff)
             ORDER BY c.queue, c.priority, c.enqueue_shard
               FOR UPDATE SKIP LOCKED) h;
    IF v_queues IS NULL THEN
        RETURN 0;
    END IF;
    PERFORM awa._heads_locked(p_queue);
    -- The locked lanes' cursors on the latest committed state: no claim can move them now.
    SELECT array_agg(awa._lane_cursor(l.queue, l.priority, l.enqueue_shard) ORDER BY l.ord) INTO v_claims
      FROM unnest(v_queues, v_priorities, v_shards) WITH ORDINALITY AS l(queue, priority, enqueue_shard, ord);
    WITH waiting AS (
        SELECT r.ready_slot, r.queue, r.priority, r.enqueue_shard, r.lane_seq,
               bool_and(r.run_at <= v_cutoff) OVER (PARTITION BY r.queue, r.priority, r.enqueue_shard
                                                    ORDER BY r.lane_seq) AS in_prefix
          FROM unnest(v_queues, v_priorities, v_shards, v_claims) AS h(queue, priority, enqueue_shard, claim_seq)
          JOIN awa.ready_entries r
            ON r.queue = h.queue AND r.priority = h.priority AND r.enqueue_shard = h.enqueue_shard
           AND r.lane_seq >= h.claim_seq),
    victims AS (
        SELECT w.* FROM waiting w WHERE w.in_prefix
         ORDER BY w.queue, w.priority, w.enqueue_shard, w.lane_seq
         LIMIT p_limit),
    gone AS (
        DELETE FROM awa.ready_entries r USING victims v
         WHERE r.ready_slot = v.ready_slot AND r.queue = v.queue AND r.priority = v.priority
           AND r.enqueue_shard = v.enqueue_shard AND r.lane_seq = v.lane_seq
        RETURNING r AS row_)
    SELECT array_agg(awa._ready_as_deferred(g.row_, (g.row_).queue, ((g.row_).priority - 1)::smallint,
                         jsonb_build_object('_awa_original_priority', (g.row_).priority))
                     ORDER BY (g.row_).queue, (g.row_).priority, (g.row_).enqueue_shard, (g.row_).lane_seq)
      INTO v_rows FROM gone g;
    IF v_rows IS NULL THEN
        RETURN 0;
    END IF;
    RETURN awa._enqueue_ready(v_rows);
END
$$;
REVOKE ALL ON FUNCTION awa.age_waiting_priorities(interval, bigint, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION awa.age_waiting_priorities(interval, bigint, text) TO awa_admin;
COMMENT ON FUNCTION awa.age_waiting_priorities(interval, bigint, text) IS 'Move waiting jobs older than p_older_than one priority up, in lane order. Role: awa_admin.';

-- Record heartbeats of open attempts; returns how many are alive (C, src/attempts.cpp).
DROP FUNCTION awa.heartbeat_jobs(bigint[], bigint[]);
CREATE FUNCTION awa.heartbeat_jobs(p_job_ids bigint[], p_run_leases bigint[], p_queue text DEFAULT NULL)
    RETURNS integer
    AS 'MODULE_PATHNAME', 'awa_heartbeat_jobs'
    LANGUAGE C VOLATILE PARALLEL UNSAFE
    SECURITY DEFINER;
REVOKE ALL ON FUNCTION awa.heartbeat_jobs(bigint[], bigint[], text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION awa.heartbeat_jobs(bigint[], bigint[], text) TO awa_worker, awa_admin;
COMMENT ON FUNCTION awa.heartbeat_jobs(bigint[], bigint[], text) IS 'Record that open attempts are alive; returns how many were open. Role: awa_worker, awa_admin.';

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
DO $$
DECLARE
    t record;
    s integer;
BEGIN
    FOR t IN SELECT * FROM (VALUES ('storage_transition_state', 'singleton'), ('plane_settings', 'singleton'),
                                   ('queue_ring_state', 'singleton'), ('lease_ring_state', 'singleton'),
                                   ('claim_ring_state', 'singleton'), ('queue_ring_slots', 'slot'),
                                   ('lease_ring_slots', 'slot'), ('claim_ring_slots', 'slot'),
                                   ('retention_buckets', 'bucket')) AS v(tbl, key) LOOP
        EXECUTE format('CREATE TRIGGER restore_upsert BEFORE INSERT ON awa.%I FOR EACH ROW '
                       'EXECUTE FUNCTION awa._restore_upsert(%L)', t.tbl, t.key);
        PERFORM pg_catalog.pg_extension_config_dump(format('awa.%I', t.tbl)::regclass, '');
    END LOOP;
    FOR t IN SELECT * FROM (VALUES ('queue_enqueue_heads'), ('queue_claim_heads'), ('deferred_jobs'),
                                   ('dlq_entries'), ('job_unique_claims'), ('attempt_state'),
                                   ('done_entries_retained'), ('job_id_seq'), ('receipt_id_seq')) AS v(tbl) LOOP
        PERFORM pg_catalog.pg_extension_config_dump(format('awa.%I', t.tbl)::regclass, '');
    END LOOP;
    FOR s IN 0..15 LOOP
        PERFORM pg_catalog.pg_extension_config_dump(format('awa.%I', 'ready_entries_' || s)::regclass, '');
        PERFORM pg_catalog.pg_extension_config_dump(format('awa.%I', 'done_entries_' || s)::regclass, '');
        PERFORM pg_catalog.pg_extension_config_dump(format('awa.%I', 'completion_batches_' || s)::regclass, '');
    END LOOP;
    FOR s IN 0..7 LOOP
        PERFORM pg_catalog.pg_extension_config_dump(format('awa.%I', 'leases_' || s)::regclass, '');
        PERFORM pg_catalog.pg_extension_config_dump(format('awa.%I', 'claim_batches_' || s)::regclass, '');
        PERFORM pg_catalog.pg_extension_config_dump(format('awa.%I', 'lease_claim_closures_' || s)::regclass, '');
    END LOOP;
END
$$;

-- Promotion of one queue, run by claims where no maintenance worker serves the database
-- (maintenance.md §1): up to p_limit due scheduled/retryable jobs of p_queue, oldest
-- first, skipping rows another promoter holds; nothing while the queue is paused
-- (C, src/promote.cpp: the claim runs the same code without entering SQL functions).
CREATE INDEX deferred_jobs_queue_due_idx ON awa.deferred_jobs (queue, run_at);
CREATE FUNCTION awa._promote_due_queue(p_queue text, p_limit integer) RETURNS integer
    AS 'MODULE_PATHNAME', 'awa_promote_due_queue'
    LANGUAGE C VOLATILE PARALLEL UNSAFE
    SET search_path = pg_catalog, pg_temp;
REVOKE ALL ON FUNCTION awa._promote_due_queue(text, integer) FROM PUBLIC;

-- How producers fence their reservations (docs/design.md §3): 'registry' (preloaded, an
-- in-flight registry in shared memory) or 'lane_lock' (the lane lock is held to commit).
-- Unlike SHOW awa_shard.reservation_mode, it works before the library is loaded.
CREATE FUNCTION awa.reservation_mode() RETURNS text
    AS 'MODULE_PATHNAME', 'awa_reservation_mode'
    LANGUAGE C STABLE PARALLEL SAFE
    SET search_path = pg_catalog, pg_temp;
REVOKE ALL ON FUNCTION awa.reservation_mode() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION awa.reservation_mode() TO awa_producer, awa_worker, awa_admin, pg_monitor;
COMMENT ON FUNCTION awa.reservation_mode() IS
    'How producers fence their reservations: registry (preloaded, in-flight registry in shared memory) or lane_lock (lane lock held to commit).';

-- Background maintenance needs no setting when preloaded: a launcher serves every database
-- with awa_shard (maintenance.md §1). Installing or updating tells it at once.
CREATE FUNCTION awa._maintenance_wake() RETURNS void
    AS 'MODULE_PATHNAME', 'awa_maintenance_wake'
    LANGUAGE C VOLATILE PARALLEL UNSAFE
    SET search_path = pg_catalog, pg_temp;
REVOKE ALL ON FUNCTION awa._maintenance_wake() FROM PUBLIC;
SELECT awa._maintenance_wake();

-- =========================================================================================
-- The first hour of a user: plain integer literals, queues as objects, job
-- look-ups, dead-lettering of exhausted jobs, a cheap depth, keyless batches spread over
-- the shards, and a comment on every object of the schema (docs/api.md).
-- =========================================================================================

-- Plain integer literals. Arguments that were smallint (priority, max_attempts, shard) are
-- integer: `p_priority => 1` resolves, and typed callers (1::smallint, smallint[]) still do
-- through the implicit casts to integer. The functions are replaced, not overloaded: a
-- second candidate would make calls that lean on defaults ambiguous. Ranges are checked
-- inside (C++: src/validate.cpp), so 65537 is refused, never wrapped.
DROP FUNCTION awa.insert_job_compat(text, text, jsonb, awa.job_state, smallint, smallint, timestamptz, jsonb,
                                    text[], bytea, bit, bytea);
DROP FUNCTION awa.insert_jobs(text, text[], jsonb[], smallint[], timestamptz[], bytea[], smallint[], jsonb[],
                              bytea[], bit[]);
DROP FUNCTION awa.shard_for_enqueue(text, smallint, bytea);
DROP FUNCTION awa.reserve_enqueue_seq(text, smallint, smallint, bigint);
DROP FUNCTION awa.lane_lock_key(text, smallint, smallint);
DROP FUNCTION awa.lane_sequence_name(text, smallint, smallint);
DROP FUNCTION awa.move_queue(bigint, text, smallint);
DROP FUNCTION awa.retry_from_dlq(bigint, text, smallint, timestamptz);
DROP FUNCTION awa._check_priority(smallint, text);

-- Enqueue one job (the reference's 12-argument signature, integer priority and attempts,
-- then the job's concurrency key).
CREATE FUNCTION awa.insert_job_compat(
    p_kind text,
    p_queue text DEFAULT 'default',
    p_args jsonb DEFAULT '{}',
    p_state awa.job_state DEFAULT 'available',
    p_priority bigint DEFAULT 2,
    p_max_attempts bigint DEFAULT 25,
    p_run_at timestamptz DEFAULT NULL,
    p_metadata jsonb DEFAULT '{}',
    p_tags text[] DEFAULT '{}',
    p_unique_key bytea DEFAULT NULL,
    p_unique_states bit(8) DEFAULT NULL,
    p_ordering_key bytea DEFAULT NULL,
    p_concurrency_key text DEFAULT NULL)
    RETURNS awa.job_row
    AS 'MODULE_PATHNAME', 'awa_insert_job_compat_1_1'
    LANGUAGE C VOLATILE PARALLEL UNSAFE
    SECURITY DEFINER;

-- Enqueue a batch into one queue. Arrays are NULL or as long as the batch; a one-element
-- p_kinds is the kind of every job. Keyless rows of a priority share one rotor pick, or
-- with p_spread_keyless are cut into one run per shard. Returns the ids in input order.
CREATE FUNCTION awa.insert_jobs(
    p_queue text,
    p_kinds text[],
    p_args jsonb[] DEFAULT NULL,
    p_priorities bigint[] DEFAULT NULL,
    p_run_ats timestamptz[] DEFAULT NULL,
    p_ordering_keys bytea[] DEFAULT NULL,
    p_max_attempts bigint[] DEFAULT NULL,
    p_metadata jsonb[] DEFAULT NULL,
    p_unique_keys bytea[] DEFAULT NULL,
    p_unique_states bit(8)[] DEFAULT NULL,
    p_spread_keyless boolean DEFAULT false,
    p_concurrency_keys text[] DEFAULT NULL)
    RETURNS bigint[]
    AS 'MODULE_PATHNAME', 'awa_insert_jobs_1_1'
    LANGUAGE C VOLATILE PARALLEL UNSAFE
    SECURITY DEFINER;

-- The routing rule: keyed -> hash mod S; keyless -> rotor, sticky per (queue, priority).
CREATE FUNCTION awa.shard_for_enqueue(p_queue text, p_priority bigint, p_ordering_key bytea DEFAULT NULL)
    RETURNS smallint
    AS 'MODULE_PATHNAME', 'awa_shard_for_enqueue'
    LANGUAGE C VOLATILE PARALLEL UNSAFE
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp SET jit = off;

-- Reserve [start, start + count) of a lane under the lane lock; count <= 0 peeks.
CREATE FUNCTION awa.reserve_enqueue_seq(p_queue text, p_priority bigint, p_enqueue_shard bigint, p_count bigint)
    RETURNS bigint
    AS 'MODULE_PATHNAME', 'awa_reserve_enqueue_seq'
    LANGUAGE C VOLATILE PARALLEL UNSAFE
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp SET jit = off;

-- Name of a lane's sequence: md5 of 'queue:priority:shard' (unchanged by the integer type).
-- The rule of 1.0 (queue_enqueue_seq_ and left(md5('queue:priority:shard'), 32)), in C
-- (src/reserve.cpp) so that the enqueue path and SQL share one text of it.
CREATE FUNCTION awa.lane_sequence_name(p_queue text, p_priority bigint, p_enqueue_shard bigint)
    RETURNS text
    AS 'MODULE_PATHNAME', 'awa_lane_sequence_name'
    LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE
    SET search_path = pg_catalog, pg_temp;

-- Advisory-lock key of a lane (held by every reservation until its transaction ends).
-- The rule of 1.0 (hashtextextended('awa.' || quote_ident(lane_sequence_name(...)), 0)), in C.
CREATE FUNCTION awa.lane_lock_key(p_queue text, p_priority bigint, p_enqueue_shard bigint)
    RETURNS bigint
    AS 'MODULE_PATHNAME', 'awa_lane_lock_key'
    LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE
    SET search_path = pg_catalog, pg_temp;

-- A priority argument: 1 (most urgent) to 4 (23514), NULL allowed (keep the job's own).
CREATE FUNCTION awa._check_priority(p_priority bigint, p_name text) RETURNS void
    LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
    SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    PERFORM awa._check_between(p_priority, awa._limit('min_priority'), awa._limit('max_priority'), p_name, '23514');
END
$$;

-- Move a job's unique claim from queue p_from to queue p_to (unique keys are per queue):
-- 23505 when a live job of p_to holds the key. Nothing when the job holds no claim in p_from
-- or the queue does not change.
CREATE FUNCTION awa._move_unique_claim(p_job_id bigint, p_from text, p_to text) RETURNS void
    LANGUAGE plpgsql VOLATILE
    SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF p_from IS NULL OR p_from = p_to THEN
        RETURN;
    END IF;
    WITH gone AS (DELETE FROM awa.job_unique_claims u WHERE u.queue = p_from AND u.job_id = p_job_id
                  RETURNING u.unique_key)
    INSERT INTO awa.job_unique_claims (unique_key, job_id, queue) SELECT g.unique_key, p_job_id, p_to FROM gone g;
END
$$;
REVOKE ALL ON FUNCTION awa._move_unique_claim(bigint, text, text) FROM PUBLIC;
COMMENT ON FUNCTION awa._move_unique_claim(bigint, text, text) IS 'Internal: move a job''s unique claim to another queue (23505 when a job there holds the key).';

-- Move a scheduled/retryable or unclaimed ready job to another queue (and optionally
-- priority); the destination's current width decides the shard. Same rules as in 1.0:
-- a waiting row is removed under its lane head lock and re-enqueued. A destination that
-- does not exist yet is created, as an enqueue would create it.
-- A call that takes a job out of queue p_from (its routing argument) and puts it into p_to
-- (move_queue, retry_from_dlq): under Citus, p_from must be given and local (the call was
-- delegated to its worker), and p_to must be p_from, since Citus lets a call delegated by a
-- queue touch that queue alone (0A000 otherwise, before anything changes). Nothing on one node.
CREATE FUNCTION awa._require_queue_kept(p_from text, p_to text, p_function text) RETURNS void
    LANGUAGE plpgsql VOLATILE
    SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    PERFORM awa._require_queue_local(p_from);
    IF p_to IS DISTINCT FROM p_from AND awa._citus_group() IS NOT NULL THEN
        RAISE EXCEPTION 'on a Citus cluster %() cannot put a job into another queue', p_function
            USING ERRCODE = '0A000',
                  DETAIL = format('The call runs on the worker of queue %L (p_from_queue), where Citus lets it touch that queue alone.', p_from),
                  HINT = 'Keep the job in its queue (p_queue => p_from_queue: a new priority or run time), or cancel it and enqueue it into the other queue.';
    END IF;
END
$$;
REVOKE ALL ON FUNCTION awa._require_queue_kept(text, text, text) FROM PUBLIC;
COMMENT ON FUNCTION awa._require_queue_kept(text, text, text) IS 'Internal: under Citus, refuse (0A000) a call that would move a job out of its queue or was not delegated by it.';

CREATE FUNCTION awa.move_queue(p_job_id bigint, p_queue text, p_priority bigint DEFAULT NULL,
                               p_from_queue text DEFAULT NULL)
    RETURNS boolean
    LANGUAGE plpgsql VOLATILE
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp SET plan_cache_mode = force_custom_plan
AS $$
DECLARE
    r awa.ready_entries;
    v_priority smallint;
    v_metadata jsonb;
    v_from text;
BEGIN
    PERFORM awa._require(p_job_id IS NULL, 'p_job_id');
    PERFORM awa._check_queue(p_queue, 'p_queue');
    PERFORM awa._check_priority(p_priority, 'p_priority');
    IF p_from_queue IS NOT NULL THEN
        PERFORM awa._check_queue(p_from_queue, 'p_from_queue');
    END IF;
    PERFORM awa._require_queue_kept(p_from_queue, p_queue, 'move_queue');
    SELECT j.queue, j.priority, j.metadata INTO v_from, v_priority, v_metadata FROM awa.deferred_jobs j
     WHERE j.job_id = p_job_id AND (p_from_queue IS NULL OR j.queue = p_from_queue) FOR UPDATE;
    -- Updated in place, so that a cancel, delete or move waiting for the row follows it, with
    -- values computed here (Citus allows no function but an immutable one in a CASE of an
    -- UPDATE). The queue is set only when it changes: on a Citus cluster it is the
    -- distribution column, which an UPDATE may not name (a move there stays in its queue:
    -- _require_queue_kept).
    IF v_from IS NOT NULL THEN
        v_metadata := awa._stamp_metadata(v_metadata,
            CASE WHEN v_from <> p_queue THEN jsonb_build_object('_awa_original_queue', v_from) ELSE '{}' END
            || CASE WHEN v_priority <> coalesce(p_priority, v_priority)
                    THEN jsonb_build_object('_awa_original_priority', v_priority) ELSE '{}' END);
        v_priority := coalesce(p_priority, v_priority);
        IF p_queue = v_from THEN
            UPDATE awa.deferred_jobs j SET priority = v_priority, metadata = v_metadata
             WHERE j.job_id = p_job_id AND j.queue = v_from;
        ELSE
            UPDATE awa.deferred_jobs j SET queue = p_queue, priority = v_priority, metadata = v_metadata
             WHERE j.job_id = p_job_id AND j.queue = v_from;
        END IF;
    END IF;
    IF v_from IS NOT NULL AND FOUND THEN
        PERFORM awa._move_unique_claim(p_job_id, v_from, p_queue);
        IF v_from <> p_queue THEN
            PERFORM awa._job_finished(p_job_id);  -- a waiter that names the old queue: NULL now
        END IF;
        RETURN true;
    END IF;
    r := awa._take_unclaimed_ready(p_job_id, p_from_queue);
    IF r.job_id IS NULL THEN
        RETURN false;
    END IF;
    PERFORM awa._move_unique_claim(p_job_id, r.queue, p_queue);
    IF r.queue <> p_queue THEN
        PERFORM awa._job_finished(p_job_id);
    END IF;
    v_priority := coalesce(p_priority, r.priority);
    PERFORM awa._enqueue_ready(ARRAY[awa._ready_as_deferred(r, p_queue, v_priority,
        CASE WHEN r.queue <> p_queue THEN jsonb_build_object('_awa_original_queue', r.queue) ELSE '{}' END
        || CASE WHEN r.priority <> v_priority THEN jsonb_build_object('_awa_original_priority', r.priority)
                ELSE '{}' END)]);
    RETURN true;
END
$$;

-- Bring a job back from the dead-letter queue, optionally into another queue or priority
-- (attempt restarts at 0, run_lease and ordering key kept; a future p_run_at schedules it).
CREATE FUNCTION awa.retry_from_dlq(p_job_id bigint, p_queue text DEFAULT NULL,
                                   p_priority bigint DEFAULT NULL, p_run_at timestamptz DEFAULT NULL,
                                   p_from_queue text DEFAULT NULL)
    RETURNS boolean
    LANGUAGE plpgsql VOLATILE
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp SET plan_cache_mode = force_custom_plan
AS $$
DECLARE
    x awa.dlq_entries;
    d awa.deferred_jobs;
    v_later boolean := coalesce(p_run_at > clock_timestamp(), false);
BEGIN
    PERFORM awa._require(p_job_id IS NULL, 'p_job_id');
    IF p_queue IS NOT NULL THEN
        PERFORM awa._check_queue(p_queue, 'p_queue');
    END IF;
    PERFORM awa._check_priority(p_priority, 'p_priority');
    PERFORM awa._check_arg(isfinite(p_run_at), 'p_run_at must be a finite timestamp');
    IF p_from_queue IS NOT NULL THEN
        PERFORM awa._check_queue(p_from_queue, 'p_from_queue');
    END IF;
    PERFORM awa._require_queue_kept(p_from_queue, coalesce(p_queue, p_from_queue), 'retry_from_dlq');
    DELETE FROM awa.dlq_entries e WHERE e.job_id = p_job_id AND (p_from_queue IS NULL OR e.queue = p_from_queue)
    RETURNING e.* INTO x;
    IF NOT FOUND THEN
        RETURN false;
    END IF;
    -- The dead letter's job, with attempts restarting and no attempt or end time yet.
    d := awa._job_row(NULL::awa.deferred_jobs, awa._job(x), jsonb_build_object(
        'queue', coalesce(p_queue, x.queue), 'priority', coalesce(p_priority, x.priority), 'attempt', 0,
        'attempted_at', NULL, 'state', 'scheduled',
        'run_at', CASE WHEN v_later THEN p_run_at ELSE clock_timestamp() END,
        'metadata', awa._stamp_metadata(x.metadata,
            CASE WHEN coalesce(p_queue, x.queue) <> x.queue
                 THEN jsonb_build_object('_awa_original_queue', x.queue) ELSE '{}' END)));
    -- Unique keys are per queue: a job that changes queue leaves a claim it held in the old
    -- one, and takes its key in the new one when its new state is in its mask.
    IF d.queue <> x.queue THEN
        PERFORM awa._set_unique_claim(x.job_id, x.unique_key, false, x.queue);
        IF awa.job_state_in_bitmask(d.unique_states, CASE WHEN v_later THEN 'scheduled' ELSE 'available' END::awa.job_state) THEN
            PERFORM awa._set_unique_claim(d.job_id, d.unique_key, true, d.queue);
        END IF;
    END IF;
    IF v_later THEN
        INSERT INTO awa.deferred_jobs SELECT (d).*;
        IF d.queue = x.queue THEN
            PERFORM awa._sync_unique_claim(d.job_id, d.unique_key, d.unique_states, 'failed', 'scheduled', d.queue);
        END IF;
    ELSE
        IF d.queue = x.queue THEN
            PERFORM awa._sync_unique_claim(d.job_id, d.unique_key, d.unique_states, 'failed', 'available', d.queue);
        END IF;
        PERFORM awa._enqueue_ready(ARRAY[d]);
    END IF;
    -- Back in its mask, the job must hold its key. When another live job holds it, the dead
    -- letter stays where it is (23505, as an enqueue of the key would get): a job back without
    -- its claim would leave the key free once the holder's claim goes, for a third job.
    IF d.unique_key IS NOT NULL AND d.unique_states IS NOT NULL
       AND awa.job_state_in_bitmask(d.unique_states, CASE WHEN v_later THEN 'scheduled' ELSE 'available' END::awa.job_state)
       AND NOT EXISTS (SELECT 1 FROM awa.job_unique_claims u
                        WHERE u.queue = d.queue AND u.unique_key = d.unique_key AND u.job_id = d.job_id) THEN
        RAISE EXCEPTION 'duplicate key value violates unique constraint "idx_awa_jobs_unique"'
            USING ERRCODE = '23505',
                  DETAIL = format('Job %s holds the unique key of job %s.',
                                  (SELECT u.job_id FROM awa.job_unique_claims u
                                    WHERE u.queue = d.queue AND u.unique_key = d.unique_key), d.job_id),
                  HINT = 'Retry the dead letter once that job has left the key''s states.';
    END IF;
    RETURN true;
END
$$;

REVOKE ALL ON FUNCTION
    awa.insert_job_compat(text, text, jsonb, awa.job_state, bigint, bigint, timestamptz, jsonb, text[], bytea, bit, bytea, text),
    awa.insert_jobs(text, text[], jsonb[], bigint[], timestamptz[], bytea[], bigint[], jsonb[], bytea[], bit[], boolean, text[]),
    awa.shard_for_enqueue(text, bigint, bytea), awa.reserve_enqueue_seq(text, bigint, bigint, bigint),
    awa.lane_sequence_name(text, bigint, bigint), awa.lane_lock_key(text, bigint, bigint),
    awa._check_priority(bigint, text), awa.move_queue(bigint, text, bigint, text),
    awa.retry_from_dlq(bigint, text, bigint, timestamptz, text)
    FROM PUBLIC;
GRANT EXECUTE ON FUNCTION
    awa.lane_sequence_name(text, bigint, bigint), awa.lane_lock_key(text, bigint, bigint)
    TO awa_producer, awa_worker, awa_admin;
GRANT EXECUTE ON FUNCTION
    awa.insert_job_compat(text, text, jsonb, awa.job_state, bigint, bigint, timestamptz, jsonb, text[], bytea, bit, bytea, text),
    awa.insert_jobs(text, text[], jsonb[], bigint[], timestamptz[], bytea[], bigint[], jsonb[], bytea[], bit[], boolean, text[]),
    awa.shard_for_enqueue(text, bigint, bytea), awa.reserve_enqueue_seq(text, bigint, bigint, bigint)
    TO awa_producer, awa_admin;
GRANT EXECUTE ON FUNCTION
    awa.move_queue(bigint, text, bigint, text), awa.retry_from_dlq(bigint, text, bigint, timestamptz, text)
    TO awa_admin;

-- Exhausted jobs to the DLQ: off by default. plane_settings.dlq_enabled_by_default is the
-- install-wide default (the reference's dlq_enabled_by_default), queue_meta.dlq_enabled
-- the per-queue override (NULL: follow the default).
ALTER TABLE awa.plane_settings ADD COLUMN dlq_enabled_by_default boolean NOT NULL DEFAULT false;
ALTER TABLE awa.queue_meta ADD COLUMN dlq_enabled boolean;

-- Retention per queue (awa.set_queue_retention): NULL is the default.
ALTER TABLE awa.queue_meta ADD COLUMN completed_retention interval, ADD COLUMN failed_retention interval;

-- Whether a queue dead-letters jobs whose last attempt failed (override, else the default).
-- plpgsql, not SQL: Citus cannot plan an SQL function's parameters over distributed tables
-- (the rescue of a job at its last attempt runs it on the queue's worker).
CREATE FUNCTION awa._dlq_enabled(p_queue text) RETURNS boolean
    LANGUAGE plpgsql STABLE
    SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_enabled boolean;
BEGIN
    -- Two statements: on a Citus cluster one statement may not read the queue's shard and a
    -- reference table inside a delegated call.
    SELECT m.dlq_enabled INTO v_enabled FROM awa.queue_meta m WHERE m.queue = p_queue;
    IF v_enabled IS NULL THEN
        SELECT s.dlq_enabled_by_default INTO v_enabled FROM awa.plane_settings s;
    END IF;
    RETURN coalesce(v_enabled, false);
END
$$;

-- An ended attempt (awa.taken_attempt) that was the job's last (failed, rescued or past
-- its deadline): to the DLQ with reason 'max_attempts_exhausted' when its queue
-- dead-letters exhausted jobs, otherwise a failed terminal row on its own lane identity.
-- Either way the job's state is 'failed', its error is appended as terminal and the
-- failure is counted.
CREATE FUNCTION awa._fail_exhausted(t awa.taken_attempt, p_error text) RETURNS void
    LANGUAGE plpgsql VOLATILE
    SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF awa._dlq_enabled(t.queue) THEN
        PERFORM awa._dead_letter(t, awa._append_error(t.errors, p_error, t.attempt, true), 'max_attempts_exhausted');
    ELSE
        PERFORM awa._finish_attempt(t, 'failed', awa._append_error(t.errors, p_error, t.attempt, true));
    END IF;
    PERFORM awa._count_failed(t.queue, t.enqueue_shard);
END
$$;
REVOKE ALL ON FUNCTION awa._dlq_enabled(text), awa._fail_exhausted(awa.taken_attempt, text) FROM PUBLIC;

-- Fail an attempt: retryable with backoff while attempts remain; after the last attempt
-- failed (dead-lettered when the queue says so). Returns the new state, or NULL when the
-- attempt was not open (stale writer).
DROP FUNCTION awa.fail_job(bigint, bigint, text, interval);
CREATE FUNCTION awa.fail_job(p_job_id bigint, p_run_lease bigint, p_error text DEFAULT NULL,
                                        p_retry_in interval DEFAULT NULL, p_queue text DEFAULT NULL)
    RETURNS awa.job_state
    LANGUAGE plpgsql VOLATILE
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp SET jit = off SET enable_seqscan = off
AS $$
DECLARE
    t awa.taken_attempt;
BEGIN
    PERFORM awa._require_queue_local(p_queue);  -- on a Citus cluster: delegated by p_queue, or 0A000
    PERFORM awa._require(p_job_id IS NULL OR p_run_lease IS NULL, 'p_job_id and p_run_lease');
    PERFORM awa._check_arg(NOT p_retry_in < interval '0', 'p_retry_in must not be negative');
    PERFORM awa._check_interval(p_retry_in, 'p_retry_in');
    t := awa._take_attempt(p_job_id, p_run_lease, 'retryable', p_queue);
    IF t.job_id IS NULL THEN
        RETURN NULL;
    END IF;
    IF t.attempt >= t.max_attempts THEN
        PERFORM awa._fail_exhausted(t, coalesce(p_error, 'failed'));
        RETURN 'failed';
    END IF;
    PERFORM awa._defer_attempt(t, 'retryable',
        clock_timestamp() + coalesce(p_retry_in, awa.backoff_duration(t.attempt, t.max_attempts)),
        t.attempt, awa._append_error(t.errors, coalesce(p_error, 'failed'), t.attempt, false));
    RETURN 'retryable';
END
$$;
REVOKE ALL ON FUNCTION awa.fail_job(bigint, bigint, text, interval, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION awa.fail_job(bigint, bigint, text, interval, text) TO awa_worker, awa_admin;
COMMENT ON FUNCTION awa.fail_job(bigint, bigint, text, interval, text)
    IS 'Fail an attempt: retryable with backoff while attempts remain, then failed (dead-lettered when the queue says so). Role: awa_worker, awa_admin.';

-- Queues as objects. A queue is known when it has a settings row (awa.queue_meta), a lane
-- (a producer enqueued into it: implicit creation, as in 1.0), or scheduled, retryable or
-- dead-lettered jobs. Calls that act on a queue by name (pause, resume, purge, drop,
-- set_queue_dlq, list_jobs, queue_depth) raise 42704 for any other name, so a typo is
-- an error instead of a silently created queue.
-- plpgsql, not SQL: Citus cannot plan an SQL function's parameters over distributed tables.
CREATE FUNCTION awa._queue_known(p_queue text) RETURNS boolean
    LANGUAGE plpgsql STABLE
    SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    RETURN EXISTS (SELECT 1 FROM awa.queue_meta m WHERE m.queue = p_queue)
        OR EXISTS (SELECT 1 FROM awa.queue_enqueue_heads h WHERE h.queue = p_queue)
        OR EXISTS (SELECT 1 FROM awa.deferred_jobs j WHERE j.queue = p_queue)
        OR EXISTS (SELECT 1 FROM awa.dlq_entries e WHERE e.queue = p_queue);
END
$$;

-- A queue argument that must name a known queue: 22004 / 23514 as awa._check_queue, then
-- 42704 naming the argument when the queue is unknown.
CREATE FUNCTION awa._require_queue(p_queue text, p_name text) RETURNS void
    LANGUAGE plpgsql STABLE
    SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    PERFORM awa._check_queue(p_queue, p_name);
    IF NOT awa._queue_known(p_queue) THEN
        RAISE EXCEPTION 'queue "%" does not exist', p_queue USING ERRCODE = '42704',
            DETAIL = format('%s names no queue: none has settings, lanes, scheduled or dead-lettered jobs under that name.', p_name),
            HINT = format('Create it with awa.create_queue(%L), or enqueue a job into it.', p_queue);
    END IF;
END
$$;

-- Cheap depth of a queue: lane positions handed out and not yet passed by claim, summed
-- over its lanes (next_seq - claim_seq, as awa.shard_lag.lag). No row is scanned: one
-- sequence read per lane. An upper bound: open reservations and gaps left by rollbacks,
-- cancels and deletes count until a claim passes them.
-- plpgsql, not SQL: Citus cannot plan an SQL function's parameters over distributed tables.
CREATE FUNCTION awa._queue_depth(p_queue text) RETURNS bigint
    LANGUAGE plpgsql STABLE
    SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    RETURN (SELECT coalesce(sum(greatest(awa._lane_next_seq(e.seq_name) - h.claim_seq, 0)), 0)::bigint
              FROM awa.queue_enqueue_heads e
              JOIN awa.lane_cursors h
                ON h.queue = e.queue AND h.priority = e.priority AND h.enqueue_shard = e.enqueue_shard
             WHERE e.queue = p_queue AND h.queue = p_queue);
END
$$;
REVOKE ALL ON FUNCTION awa._queue_known(text), awa._require_queue(text, text), awa._queue_depth(text) FROM PUBLIC;

-- What a worker pool autoscaler polls: the cheap depth of one known queue (42704 otherwise).
CREATE FUNCTION awa.queue_depth(p_queue text) RETURNS bigint
    LANGUAGE plpgsql STABLE
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    PERFORM awa._require_queue(p_queue, 'p_queue');
    RETURN awa._queue_depth(p_queue);
END
$$;

-- Create a queue explicitly: its settings row with the width and the DLQ override. True
-- when this call created the row (also for a queue producers had created implicitly);
-- false when the queue already has these settings; 42710 when it has other ones
-- (a NULL p_dlq_enabled is not compared).
CREATE FUNCTION awa.create_queue(p_queue text, p_enqueue_shards bigint DEFAULT 1,
                                 p_dlq_enabled boolean DEFAULT NULL)
    RETURNS boolean
    LANGUAGE plpgsql VOLATILE
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    m awa.queue_meta;
BEGIN
    PERFORM awa._check_queue(p_queue, 'p_queue');
    PERFORM awa._require(p_enqueue_shards IS NULL, 'p_enqueue_shards');
    PERFORM awa._check_between(p_enqueue_shards, 1, awa._limit('max_enqueue_shards'), 'p_enqueue_shards');
    LOOP
        INSERT INTO awa.queue_meta (queue, enqueue_shards, dlq_enabled)
        VALUES (p_queue, p_enqueue_shards, p_dlq_enabled)
        ON CONFLICT (queue) DO NOTHING;
        IF FOUND THEN
            RETURN true;
        END IF;
        SELECT * INTO m FROM awa.queue_meta q WHERE q.queue = p_queue FOR UPDATE;
        EXIT WHEN FOUND;   -- otherwise a concurrent drop removed it: insert again
    END LOOP;
    IF m.enqueue_shards <> p_enqueue_shards OR (p_dlq_enabled IS NOT NULL AND m.dlq_enabled IS DISTINCT FROM p_dlq_enabled) THEN
        RAISE EXCEPTION 'queue "%" already exists with other settings', p_queue USING ERRCODE = '42710',
            DETAIL = format('It has enqueue_shards = %s and dlq_enabled = %s.', m.enqueue_shards,
                            coalesce(m.dlq_enabled::text, 'NULL (the install default)')),
            HINT = 'Change them with awa.set_enqueue_shards or awa.set_queue_dlq.';
    END IF;
    RETURN false;
END
$$;

-- Set or clear (NULL: the install default) a known queue's DLQ override for exhausted jobs.
-- Returns the previous override.
CREATE FUNCTION awa.set_queue_dlq(p_queue text, p_dlq_enabled boolean) RETURNS boolean
    LANGUAGE plpgsql VOLATILE
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_old boolean;
BEGIN
    PERFORM awa._require_queue(p_queue, 'p_queue');
    SELECT m.dlq_enabled INTO v_old FROM awa.queue_meta m WHERE m.queue = p_queue FOR UPDATE;
    INSERT INTO awa.queue_meta (queue, dlq_enabled) VALUES (p_queue, p_dlq_enabled)
    ON CONFLICT (queue) DO UPDATE SET dlq_enabled = EXCLUDED.dlq_enabled;
    RETURN v_old;
END
$$;

DROP FUNCTION awa.pause_queue(text);
DROP FUNCTION awa.resume_queue(text);

-- How long a known queue's finished jobs stay visible at least (docs/operations.md,
-- "Retention"): p_completed for completed jobs, p_failed for failed and cancelled ones; NULL
-- is the default (completed and cancelled jobs until their ring slot is pruned, failed ones
-- until retried or deleted). Applies to jobs whose ring slot is pruned from now on.
CREATE FUNCTION awa.set_queue_retention(p_queue text, p_completed interval, p_failed interval) RETURNS void
    LANGUAGE plpgsql VOLATILE
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    PERFORM awa._require_queue(p_queue, 'p_queue');
    PERFORM awa._check_arg(p_completed >= interval '0', 'p_completed must not be negative');
    PERFORM awa._check_interval(p_completed, 'p_completed');
    PERFORM awa._check_arg(p_failed >= interval '0', 'p_failed must not be negative');
    PERFORM awa._check_interval(p_failed, 'p_failed');
    -- Not negative as a whole, yet a part of the other sign ('1 month -30 days'): 22023 too.
    PERFORM awa._check_arg(awa._interval_in_range(p_completed), 'p_completed must have no negative part');
    PERFORM awa._check_arg(awa._interval_in_range(p_failed), 'p_failed must have no negative part');
    PERFORM 1 FROM awa.queue_meta m WHERE m.queue = p_queue FOR UPDATE;
    INSERT INTO awa.queue_meta (queue, completed_retention, failed_retention) VALUES (p_queue, p_completed, p_failed)
    ON CONFLICT (queue) DO UPDATE
        SET completed_retention = EXCLUDED.completed_retention, failed_retention = EXCLUDED.failed_retention;
END
$$;
REVOKE ALL ON FUNCTION awa.set_queue_retention(text, interval, interval) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION awa.set_queue_retention(text, interval, interval) TO awa_admin;
COMMENT ON FUNCTION awa.set_queue_retention(text, interval, interval)
    IS 'Set how long a known queue''s completed, and failed or cancelled, jobs stay visible at least (NULL: the default). Role: awa_admin.';

-- Pause a known queue: claims skip it (promotion too); enqueue still works. True when this
-- call paused it, false when it was paused already.
CREATE FUNCTION awa.pause_queue(p_queue text) RETURNS boolean
    LANGUAGE plpgsql VOLATILE
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    PERFORM awa._require_queue(p_queue, 'p_queue');
    INSERT INTO awa.queue_meta AS m (queue, paused, paused_at, paused_by)
    VALUES (p_queue, true, clock_timestamp(), session_user)
    ON CONFLICT (queue) DO UPDATE
       SET paused = true, paused_at = EXCLUDED.paused_at, paused_by = EXCLUDED.paused_by
     WHERE NOT m.paused;
    RETURN FOUND;
END
$$;

-- Resume a known queue. True when this call resumed it, false when it was not paused.
CREATE FUNCTION awa.resume_queue(p_queue text) RETURNS boolean
    LANGUAGE plpgsql VOLATILE
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    PERFORM awa._require_queue(p_queue, 'p_queue');
    UPDATE awa.queue_meta SET paused = false, paused_at = NULL, paused_by = NULL
     WHERE queue = p_queue AND paused;
    RETURN FOUND;
END
$$;

-- The exclusive upper bound of lane_seq below which every reservation of a lane (given by
-- its sequence) has ended: min(lowest reservation still in flight, high-water + 1) in
-- registry mode, no bound in lane-lock mode (docs/design.md §3). A path that moves a claim
-- cursor past rows it did not claim reads it before the statement whose snapshot it relies on.
CREATE FUNCTION awa._lane_claim_bound(p_seq oid) RETURNS bigint
    AS 'MODULE_PATHNAME', 'awa_lane_claim_bound'
    LANGUAGE C VOLATILE PARALLEL UNSAFE
    SET search_path = pg_catalog, pg_temp;
REVOKE ALL ON FUNCTION awa._lane_claim_bound(oid) FROM PUBLIC;
COMMENT ON FUNCTION awa._lane_claim_bound(oid) IS
    'Internal: the lane_seq below which every reservation of a lane has ended (claim bound).';

-- Next value a lane's enqueue sequence will hand out (1 for a fresh lane), for the
-- monitoring views. NULL while drop_queue is dropping the lane: it holds the sequence until
-- it commits, and a reader neither waits for it nor fails once the sequence is gone. SECURITY
-- DEFINER: reading a sequence needs rights a monitoring role does not have.
CREATE OR REPLACE FUNCTION awa._lane_next_seq(p_seq_name text) RETURNS bigint
    AS 'MODULE_PATHNAME', 'awa_lane_next_seq'
    LANGUAGE C STABLE STRICT PARALLEL RESTRICTED
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp;

-- Remove every waiting, scheduled and retryable job of a known queue; returns how many.
-- Running attempts are left to finish (a later failure can bring one back as retryable),
-- dead letters stay. Waiting rows are removed under their lanes' claim heads, locked in
-- lane order, and only at or after the cursor read under the lock (docs/design.md §4), so a job is either
-- claimed or purged, never both. Each lane's cursor then moves past the removed rows, as a
-- claim of them would, but never past a reservation still in flight (its claim bound): the
-- cheap depth drops to what is left.
CREATE FUNCTION awa.purge_queue(p_queue text) RETURNS bigint
    LANGUAGE plpgsql VOLATILE
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp SET jit = off
AS $$
DECLARE
    v_priorities smallint[];
    v_shards smallint[];
    v_next bigint[];
    v_bounds bigint[];
    v_deferred bigint;
    v_ready bigint;
BEGIN
    PERFORM awa._require_queue(p_queue, 'p_queue');
    PERFORM awa._require_read_committed('purge_queue');
    SELECT array_agg(h.priority), array_agg(h.enqueue_shard) INTO v_priorities, v_shards
      FROM (SELECT c.priority, c.enqueue_shard FROM awa.queue_claim_heads c WHERE c.queue = p_queue
             ORDER BY c.priority, c.enqueue_shard FOR UPDATE) h;
    PERFORM awa._heads_locked(p_queue);
    -- Each lane's claim bound, read before the snapshot of the DELETE below: the cursor never
    -- moves past a reservation still in flight (registry mode, docs/design.md §3).
    SELECT array_agg(awa._lane_claim_bound(to_regclass('awa.' || quote_ident(e.seq_name))::oid)
                     ORDER BY l.ord)
      INTO v_bounds
      FROM unnest(v_priorities, v_shards) WITH ORDINALITY AS l(priority, enqueue_shard, ord)
      LEFT JOIN awa.queue_enqueue_heads e
        ON e.queue = p_queue AND e.priority = l.priority AND e.enqueue_shard = l.enqueue_shard;
    -- Deferred rows first: a promotion holding some finishes, and its rows are then waiting rows.
    WITH gone AS (DELETE FROM awa.deferred_jobs j WHERE j.queue = p_queue RETURNING j.job_id),
    released AS (DELETE FROM awa.job_unique_claims u USING gone g WHERE u.queue = p_queue AND u.job_id = g.job_id)
    SELECT count(*) INTO v_deferred FROM gone;
    WITH lanes AS (
        SELECT l.priority, l.enqueue_shard, h.claim_seq, l.bound
          FROM unnest(v_priorities, v_shards, v_bounds) AS l(priority, enqueue_shard, bound)
          JOIN awa.lane_cursors h
            ON h.queue = p_queue AND h.priority = l.priority AND h.enqueue_shard = l.enqueue_shard),
    gone AS (
        DELETE FROM awa.ready_entries r USING lanes l
         WHERE r.queue = p_queue AND r.priority = l.priority AND r.enqueue_shard = l.enqueue_shard
           AND r.lane_seq >= l.claim_seq
        RETURNING r.job_id, r.priority, r.enqueue_shard, r.lane_seq),
    released AS (DELETE FROM awa.job_unique_claims u USING gone g WHERE u.queue = p_queue AND u.job_id = g.job_id),
    per_lane AS (
        SELECT g.priority, g.enqueue_shard,
               least(max(g.lane_seq) + 1, min(l.bound)) AS next_seq, count(*) AS removed
          FROM gone g
          JOIN lanes l ON l.priority = g.priority AND l.enqueue_shard = g.enqueue_shard
         GROUP BY g.priority, g.enqueue_shard)
    SELECT coalesce(sum(p.removed), 0), array_agg(p.priority), array_agg(p.enqueue_shard), array_agg(p.next_seq)
      INTO v_ready, v_priorities, v_shards, v_next
      FROM per_lane p;
    UPDATE awa.queue_claim_heads h SET claim_seq = p.next_seq, head_run_at = NULL
      FROM unnest(v_priorities, v_shards, v_next) AS p(priority, enqueue_shard, next_seq)
     WHERE h.queue = p_queue AND h.priority = p.priority AND h.enqueue_shard = p.enqueue_shard
       AND h.claim_seq < p.next_seq;
    PERFORM awa._job_finished(NULL);
    RETURN v_deferred + v_ready;
END
$$;

-- Drop a known queue: its settings, lanes (head rows and sequences) and every row that
-- names it. Refuses (55000) while it holds live jobs (waiting, scheduled, retryable,
-- running or dead-lettered) unless p_force, which removes them too: running attempts are
-- closed as cancelled, so their workers' completions find nothing. Returns how many live
-- jobs were removed. Lock order: the settings row, then each lane's enqueue lock in lane
-- order (an enqueue in flight finishes first, docs/design.md §3), then the claim heads in lane order. A
-- lane created by a producer while the drop runs is not touched (the queue lives on with
-- it). Lanes are dropped, not left empty, so that the name stops being a known queue.
-- The drop gives way to workers and producers (awa.drop_queue below).
CREATE FUNCTION awa._drop_queue_once(p_queue text, p_force boolean) RETURNS bigint
    LANGUAGE plpgsql VOLATILE
    SET search_path = pg_catalog, pg_temp SET jit = off
AS $$
DECLARE
    v_lane record;
    v_priorities smallint[] := '{}';
    v_shards smallint[] := '{}';
    v_waiting bigint;
    v_deferred bigint;
    v_running bigint;
    v_dlq bigint;
    v_seqs text[];
    v_seq text;
    v_batches bigint[];
BEGIN
    PERFORM awa._require_queue(p_queue, 'p_queue');
    PERFORM awa._require(p_force IS NULL, 'p_force');
    PERFORM awa._require_read_committed('drop_queue');
    -- The queue's periodic jobs go with it, or their next tick would create it again. First,
    -- before any lock a pass's enqueue could wait for: a pass running one of them holds its
    -- row until it commits, and its job is then removed with the queue's others.
    DELETE FROM awa.cron_schedules c WHERE c.queue = p_queue;
    PERFORM 1 FROM awa.queue_meta m WHERE m.queue = p_queue FOR UPDATE;
    FOR v_lane IN SELECT e.priority, e.enqueue_shard FROM awa.queue_enqueue_heads e
                   WHERE e.queue = p_queue ORDER BY e.priority, e.enqueue_shard LOOP
        PERFORM pg_advisory_xact_lock(awa.lane_lock_key(p_queue, v_lane.priority, v_lane.enqueue_shard));
        v_priorities := v_priorities || v_lane.priority;
        v_shards := v_shards || v_lane.enqueue_shard;
    END LOOP;
    PERFORM 1 FROM awa.queue_claim_heads h
      JOIN unnest(v_priorities, v_shards) AS l(priority, enqueue_shard)
        ON h.priority = l.priority AND h.enqueue_shard = l.enqueue_shard
     WHERE h.queue = p_queue
     ORDER BY h.priority, h.enqueue_shard
       FOR UPDATE OF h;
    PERFORM awa._heads_locked(p_queue);

    SELECT count(*) INTO v_waiting
      FROM awa.lane_cursors h
      JOIN unnest(v_priorities, v_shards) AS l(priority, enqueue_shard)
        ON h.priority = l.priority AND h.enqueue_shard = l.enqueue_shard
      JOIN awa.ready_entries r
        ON r.queue = p_queue AND r.priority = h.priority AND r.enqueue_shard = h.enqueue_shard
       AND r.lane_seq >= h.claim_seq
     WHERE h.queue = p_queue;
    SELECT count(*) INTO v_deferred FROM awa.deferred_jobs j WHERE j.queue = p_queue;
    SELECT (SELECT count(*) FROM awa._open_receipts c WHERE c.queue = p_queue)
         + (SELECT count(*) FROM awa.leases l WHERE l.queue = p_queue)
      INTO v_running;
    SELECT count(*) INTO v_dlq FROM awa.dlq_entries e WHERE e.queue = p_queue;
    IF NOT p_force AND v_waiting + v_deferred + v_running + v_dlq > 0 THEN
        RAISE EXCEPTION 'queue "%" is not empty', p_queue USING ERRCODE = '55000',
            DETAIL = format('It holds %s waiting, %s scheduled or retryable, %s running and %s dead-lettered jobs.',
                            v_waiting, v_deferred, v_running, v_dlq),
            HINT = format('Empty it first (awa.purge_queue), or call awa.drop_queue(%L, p_force => true).', p_queue);
    END IF;

    -- The lanes' sequences go first, before anything a worker could wait for is written: a
    -- worker's transaction that read them (every claim walk reads its queue's sequences)
    -- holds them until it ends, and may meanwhile complete jobs of this queue, which would
    -- wait for the cancellations below. Held from here to commit, they make claims and
    -- monitoring pass over the lanes instead of waiting (docs/design.md §4).
    SELECT array_agg(e.seq_name ORDER BY e.priority, e.enqueue_shard) INTO v_seqs
      FROM awa.queue_enqueue_heads e
      JOIN unnest(v_priorities, v_shards) AS l(priority, enqueue_shard)
        ON e.priority = l.priority AND e.enqueue_shard = l.enqueue_shard
     WHERE e.queue = p_queue;
    FOREACH v_seq IN ARRAY coalesce(v_seqs, '{}') LOOP
        EXECUTE format('DROP SEQUENCE IF EXISTS awa.%I', v_seq);
    END LOOP;

    -- Running attempts end as cancelled: a closure for each open receipt, the leases go.
    -- Claim batches in receipt_base order, then leases in (job_id, run_lease) order, like
    -- every exit that closes several attempts (docs/design.md §5), so a completion racing
    -- the drop cannot deadlock with it. The batches are locked first and their receipts
    -- closed by the next statement, whose snapshot sees what a closer that held one of
    -- them committed (awa._open_receipts).
    SELECT array_agg(b.receipt_base ORDER BY b.receipt_base) INTO v_batches
      FROM (SELECT b.receipt_base FROM awa.claim_batches b
             WHERE b.queue = p_queue
               AND b.receipt_base IN (SELECT c.receipt_base FROM awa._open_receipts c WHERE c.queue = p_queue)
             ORDER BY b.receipt_base FOR UPDATE OF b) b;
    WITH closed AS (
        INSERT INTO awa.lease_claim_closures (claim_slot, job_id, run_lease, outcome, queue)
        SELECT c.claim_slot, c.job_id, c.run_lease, 'cancelled', p_queue FROM awa._open_receipts c
         WHERE c.queue = p_queue AND c.receipt_base = ANY (v_batches)
         ORDER BY c.receipt_base, c.job_id, c.run_lease
        ON CONFLICT DO NOTHING
        RETURNING job_id, run_lease),
    lease_keys AS MATERIALIZED (
        SELECT l.lease_slot, l.priority, l.enqueue_shard, l.lane_seq FROM awa.leases l
         WHERE l.queue = p_queue ORDER BY l.job_id, l.run_lease FOR UPDATE OF l),
    leased AS (DELETE FROM awa.leases l USING lease_keys k
                WHERE l.queue = p_queue AND l.priority = k.priority AND l.enqueue_shard = k.enqueue_shard
                  AND l.lane_seq = k.lane_seq AND l.lease_slot = k.lease_slot
               RETURNING l.job_id, l.run_lease),
    ended AS (SELECT job_id, run_lease FROM closed UNION ALL SELECT job_id, run_lease FROM leased),
    heartbeats AS (DELETE FROM awa.attempt_state a USING ended o
                    WHERE a.queue = p_queue AND a.job_id = o.job_id AND a.run_lease = o.run_lease)
    SELECT count(*) INTO v_running FROM ended;

    -- Every row that names the queue, history included (a ready row without its lane would
    -- look pending to prune forever; a claim or completion batch would take the rows of a
    -- queue created again under this name, whose lanes number from 1 again, for its own),
    -- and the unique claims of those jobs. What is returned is what this removed (the counts
    -- above were read before the waits for the heads and the sequences, during which workers
    -- may have completed jobs).
    WITH r AS (
        DELETE FROM awa.ready_entries r
         USING unnest(v_priorities, v_shards) AS l(priority, enqueue_shard)
         WHERE r.queue = p_queue AND r.priority = l.priority AND r.enqueue_shard = l.enqueue_shard
        RETURNING r.job_id, r.priority, r.enqueue_shard, r.lane_seq),
    d AS (
        DELETE FROM awa.done_entries d
         WHERE d.queue = p_queue
           AND (d.lane_seq < 0 OR EXISTS (SELECT 1 FROM unnest(v_priorities, v_shards) AS l(priority, enqueue_shard)
                                          WHERE l.priority = d.priority AND l.enqueue_shard = d.enqueue_shard))
        RETURNING d.job_id),
    b AS (
        DELETE FROM awa.completion_batches b
         USING unnest(v_priorities, v_shards) AS l(priority, enqueue_shard)
         WHERE b.queue = p_queue AND b.priority = l.priority AND b.enqueue_shard = l.enqueue_shard),
    c AS (
        DELETE FROM awa.claim_batches b
         USING unnest(v_priorities, v_shards) AS l(priority, enqueue_shard)
         WHERE b.queue = p_queue AND b.priority = l.priority AND b.enqueue_shard = l.enqueue_shard),
    j AS (DELETE FROM awa.deferred_jobs j WHERE j.queue = p_queue RETURNING j.job_id),
    e AS (DELETE FROM awa.dlq_entries e WHERE e.queue = p_queue RETURNING e.job_id),
    k AS (DELETE FROM awa.key_attempts k WHERE k.queue = p_queue),
    u AS (DELETE FROM awa.job_unique_claims u
           USING (SELECT job_id FROM r UNION SELECT job_id FROM d UNION SELECT job_id FROM j
                  UNION SELECT job_id FROM e) g
           WHERE u.queue = p_queue AND u.job_id = g.job_id)
    SELECT (SELECT count(*) FROM r JOIN awa.lane_cursors h
              ON h.queue = p_queue AND h.priority = r.priority AND h.enqueue_shard = r.enqueue_shard
             WHERE r.lane_seq >= h.claim_seq),
           (SELECT count(*) FROM j), (SELECT count(*) FROM e)
      INTO v_waiting, v_deferred, v_dlq;

    -- The lanes, then the settings row. Dropping a lane's sequence (above) also makes every
    -- backend forget the lane (relcache invalidation), so the next enqueue creates it afresh.
    DELETE FROM awa.queue_claim_heads h
     USING unnest(v_priorities, v_shards) AS l(priority, enqueue_shard)
     WHERE h.queue = p_queue AND h.priority = l.priority AND h.enqueue_shard = l.enqueue_shard;
    DELETE FROM awa.queue_enqueue_heads e
     USING unnest(v_priorities, v_shards) AS l(priority, enqueue_shard)
     WHERE e.queue = p_queue AND e.priority = l.priority AND e.enqueue_shard = l.enqueue_shard;
    DELETE FROM awa.queue_meta m WHERE m.queue = p_queue;
    PERFORM awa._job_finished(NULL);
    RETURN v_waiting + v_deferred + v_running + v_dlq;
END
$$;
REVOKE ALL ON FUNCTION awa._drop_queue_once(text, boolean) FROM PUBLIC;
COMMENT ON FUNCTION awa._drop_queue_once(text, boolean) IS
    'Internal: one try of awa.drop_queue (which retries it after a deadlock or a lock timeout).';

-- awa._drop_queue_once, giving way to the queue's workers and producers. The drop waits for
-- locks they hold (a claim's head, a lane sequence a claim or an enqueue has read, a lane
-- lock, a closure being written), and they may in turn wait for the drop: a worker's
-- transaction that claimed and then enqueues a follow-up job into the queue, a producer's
-- second enqueue, a claim whose head lock follows an update chain to the version the drop
-- has locked (PostgreSQL waits there even under SKIP LOCKED). PostgreSQL checks a waiter for
-- a deadlock once, deadlock_timeout (1 s by default) after it starts waiting, and aborts
-- the waiter that finds the cycle. The drop therefore never waits long: every lock wait of a
-- try is cut at 200 ms (lock_timeout) and a cycle it is part of is detected by itself at
-- 50 ms; either way the try rolls back to its savepoint, releasing everything it took, and
-- the drop tries again after a pause. A worker or producer is thus not aborted, and waits
-- for at most one try of the drop (its lock waits, each under 200 ms, and its deletes).
-- While jobs keep being enqueued into the queue the drop may never hold every lane at once:
-- after 15 s of tries it gives up with 55P03, leaving the queue whole (docs/api.md).
CREATE FUNCTION awa.drop_queue(p_queue text, p_force boolean DEFAULT false) RETURNS bigint
    LANGUAGE plpgsql VOLATILE
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp SET jit = off
    SET deadlock_timeout = '50ms' SET lock_timeout = '200ms'
AS $$
DECLARE
    v_start timestamptz := clock_timestamp();
    v_try integer := 0;
BEGIN
    LOOP
        v_try := v_try + 1;
        BEGIN
            RETURN awa._drop_queue_once(p_queue, p_force);
        EXCEPTION WHEN deadlock_detected OR lock_not_available THEN
            IF clock_timestamp() - v_start > interval '15 seconds' THEN
                RAISE EXCEPTION 'queue "%" could not be dropped: its workers or producers kept its lanes busy', p_queue
                    USING ERRCODE = '55P03',
                          DETAIL = format('The drop gave way to them %s times in %s s; nothing was dropped.',
                                          v_try, round(extract(epoch FROM clock_timestamp() - v_start)::numeric, 1)),
                          HINT = 'Pause the queue (awa.pause_queue) and stop its producers, end any open transaction that changes one of its schedules (the drop removes them), then retry.';
            END IF;
            PERFORM pg_sleep(least(0.02 * v_try, 0.25));
        END;
    END LOOP;
END
$$;

-- What callers see of a job beyond its attributes (not job attributes: read from where they
-- live): the running attempt's progress (awa.attempt_state), the result of its completion
-- (awa.completion_batches).
ALTER TYPE awa.job_row ADD ATTRIBUTE progress jsonb;
ALTER TYPE awa.job_row ADD ATTRIBUTE result jsonb;

-- A job's concurrency key (docs/api.md, "Flow control"): a job attribute, so every table
-- holding jobs carries it and every path that moves a job keeps it (awa.job_template).
ALTER TABLE awa.ready_entries ADD COLUMN concurrency_key text;
ALTER TABLE awa.done_entries ADD COLUMN concurrency_key text;
ALTER TABLE awa.deferred_jobs ADD COLUMN concurrency_key text;
ALTER TABLE awa.dlq_entries ADD COLUMN concurrency_key text;
ALTER TYPE awa.taken_attempt ADD ATTRIBUTE concurrency_key text;
ALTER TYPE awa.job_row ADD ATTRIBUTE concurrency_key text;

-- awa.jobs shows what awa.job_row documents: metadata and tags '{}' and errors '[]' when
-- the job has none (stored as NULL), as insert_job_compat returns them.
CREATE OR REPLACE VIEW awa.jobs AS
    SELECT r.job_id AS id, r.kind, r.queue, r.args, 'available'::awa.job_state AS state, r.priority,
           r.attempt, r.run_lease, r.max_attempts, r.run_at, r.attempted_at, NULL::timestamptz AS finalized_at,
           r.created_at, coalesce(r.metadata, '{}'::jsonb) AS metadata, coalesce(r.tags, '{}'::text[]) AS tags,
           coalesce(r.errors, '[]'::jsonb) AS errors, r.unique_key, r.unique_states, r.ordering_key,
           r.enqueue_shard, r.lane_seq, NULL::jsonb AS progress, NULL::jsonb AS result,
           r.concurrency_key
      FROM awa.ready_entries r
      JOIN awa.lane_cursors h
        ON h.queue = r.queue AND h.priority = r.priority AND h.enqueue_shard = r.enqueue_shard
     WHERE r.lane_seq >= h.claim_seq
    UNION ALL
    SELECT j.job_id, j.kind, j.queue, j.args, j.state, j.priority, j.attempt, j.run_lease, j.max_attempts,
           j.run_at, j.attempted_at, j.finalized_at, j.created_at, coalesce(j.metadata, '{}'::jsonb),
           coalesce(j.tags, '{}'::text[]), coalesce(j.errors, '[]'::jsonb), j.unique_key,
           j.unique_states, j.ordering_key, NULL::smallint, NULL::bigint, NULL::jsonb, NULL::jsonb,
           j.concurrency_key
      FROM awa.deferred_jobs j
    UNION ALL
    SELECT c.job_id, (c.ready).kind, c.queue, (c.ready).args, 'running'::awa.job_state, c.priority, c.attempt,
           c.run_lease, c.max_attempts, (c.ready).run_at, c.claimed_at, NULL::timestamptz, (c.ready).created_at,
           coalesce((c.ready).metadata, '{}'::jsonb), coalesce((c.ready).tags, '{}'::text[]),
           coalesce((c.ready).errors, '[]'::jsonb), (c.ready).unique_key, (c.ready).unique_states,
           (c.ready).ordering_key, c.enqueue_shard, c.lane_seq, (SELECT a.progress FROM awa.attempt_state a WHERE a.job_id = c.job_id AND a.run_lease = c.run_lease AND a.queue = c.queue), NULL::jsonb,
           (c.ready).concurrency_key
      FROM awa._open_receipts c
    UNION ALL
    SELECT l.job_id, r.kind, l.queue, r.args, l.state, l.priority, l.attempt, l.run_lease, l.max_attempts,
           r.run_at, l.attempted_at, NULL::timestamptz, r.created_at, coalesce(r.metadata, '{}'::jsonb),
           coalesce(r.tags, '{}'::text[]), coalesce(r.errors, '[]'::jsonb),
           r.unique_key, r.unique_states, r.ordering_key, l.enqueue_shard, l.lane_seq, (SELECT a.progress FROM awa.attempt_state a WHERE a.job_id = l.job_id AND a.run_lease = l.run_lease AND a.queue = l.queue), NULL::jsonb,
           r.concurrency_key
      FROM awa.leases l
      JOIN awa.ready_entries r
        ON r.ready_slot = l.ready_slot AND r.ready_generation = l.ready_generation AND r.queue = l.queue
       AND r.priority = l.priority AND r.enqueue_shard = l.enqueue_shard AND r.lane_seq = l.lane_seq
     WHERE l.state IN ('running', 'waiting_external')
    UNION ALL
    SELECT d.job_id, coalesce(d.kind, r.kind), d.queue, coalesce(d.args, r.args), d.state, d.priority,
           d.attempt, d.run_lease, coalesce(d.max_attempts, r.max_attempts), coalesce(d.run_at, r.run_at),
           d.attempted_at, d.finalized_at, coalesce(d.created_at, r.created_at),
           coalesce(d.metadata, r.metadata, '{}'::jsonb), coalesce(d.tags, r.tags, '{}'::text[]),
           coalesce(d.errors, r.errors, '[]'::jsonb), coalesce(d.unique_key, r.unique_key),
           coalesce(d.unique_states, r.unique_states), coalesce(d.ordering_key, r.ordering_key),
           CASE WHEN d.lane_seq > 0 THEN d.enqueue_shard END, CASE WHEN d.lane_seq > 0 THEN d.lane_seq END, NULL::jsonb, d.result,
           coalesce(d.concurrency_key, r.concurrency_key)
      FROM awa.done_entries d
      LEFT JOIN awa.ready_entries r
        ON r.ready_slot = d.ready_slot AND r.ready_generation = d.ready_generation AND r.queue = d.queue
       AND r.priority = d.priority AND r.enqueue_shard = d.enqueue_shard AND r.lane_seq = d.lane_seq
       AND r.job_id = d.job_id
     WHERE d.state <> 'completed' OR d.kind IS NOT NULL
    UNION ALL
    -- Completions without a body of their own (1.0): found by id through their ready row.
    SELECT r.job_id, r.kind, d.queue, r.args, d.state, d.priority, d.attempt, d.run_lease, r.max_attempts,
           r.run_at, d.attempted_at, d.finalized_at, r.created_at,
           coalesce(d.metadata, r.metadata, '{}'::jsonb), coalesce(d.tags, r.tags, '{}'::text[]),
           coalesce(d.errors, r.errors, '[]'::jsonb), coalesce(d.unique_key, r.unique_key),
           coalesce(d.unique_states, r.unique_states), coalesce(d.ordering_key, r.ordering_key),
           CASE WHEN d.lane_seq > 0 THEN d.enqueue_shard END, CASE WHEN d.lane_seq > 0 THEN d.lane_seq END, NULL::jsonb, NULL::jsonb,
           coalesce(d.concurrency_key, r.concurrency_key)
      FROM awa.ready_entries r
      JOIN awa.done_entries d
        ON d.ready_slot = r.ready_slot AND d.ready_generation = r.ready_generation AND d.queue = r.queue
       AND d.priority = r.priority AND d.enqueue_shard = r.enqueue_shard AND d.lane_seq = r.lane_seq
       AND d.job_id = r.job_id
     WHERE d.state = 'completed' AND d.kind IS NULL
       AND d.ready_slot >= 0  -- in a ring slot: a retained completion carries its body
    UNION ALL
    -- Completions in a batch: found by id through their ready row, then their lane's block
    -- and their offset in the batch (the attempt is the ready row's, plus one).
    SELECT r.job_id, r.kind, b.queue, r.args, 'completed'::awa.job_state, b.priority,
           (r.attempt + 1)::smallint, r.run_lease + 1, r.max_attempts, r.run_at, b.attempted_at[x.k],
           b.finalized_at, r.created_at, coalesce(r.metadata, '{}'::jsonb), coalesce(r.tags, '{}'::text[]),
           coalesce(r.errors, '[]'::jsonb), r.unique_key, r.unique_states, r.ordering_key, b.enqueue_shard,
           r.lane_seq, NULL::jsonb, b.results[x.k],
           r.concurrency_key
      FROM awa.ready_entries r
      JOIN awa.completion_batches b
        ON b.queue = r.queue AND b.priority = r.priority AND b.enqueue_shard = r.enqueue_shard
       AND b.lane_block = r.lane_seq / 64 AND b.ready_slot = r.ready_slot
       AND b.ready_generation = r.ready_generation
     CROSS JOIN LATERAL (SELECT array_position(b.lane_offsets, (r.lane_seq % 64)::smallint) AS k) x
     WHERE x.k IS NOT NULL
    UNION ALL
    SELECT e.job_id, e.kind, e.queue, e.args, e.state, e.priority, e.attempt, e.run_lease, e.max_attempts,
           e.run_at, e.attempted_at, e.finalized_at, e.created_at, coalesce(e.metadata, '{}'::jsonb),
           coalesce(e.tags, '{}'::text[]), coalesce(e.errors, '[]'::jsonb), e.unique_key,
           e.unique_states, e.ordering_key, NULL::smallint, NULL::bigint, NULL::jsonb, NULL::jsonb,
           e.concurrency_key
      FROM awa.dlq_entries e;

-- 1.0's receipts table, converted to claim batches above, and its partitions.
DROP TABLE awa.lease_claims_1_0;

-- One job by id, in its current state (awa.jobs): one row, or none when the id is unknown
-- or the job's terminal row has been pruned. For producers and workers, who cannot read
-- the tables; it discloses the whole job row to any holder of those roles. Every branch of
-- awa.jobs has an index on the job id; a plan cached while the tables were small must not
-- scan them once they are large (enable_seqscan = off, as on the worker hot path).
CREATE FUNCTION awa.get_job(p_job_id bigint) RETURNS SETOF awa.job_row
    LANGUAGE plpgsql STABLE ROWS 1
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp SET jit = off SET enable_seqscan = off
AS $$
BEGIN
    PERFORM awa._require(p_job_id IS NULL, 'p_job_id');
    RETURN QUERY SELECT j.* FROM awa.jobs j WHERE j.id = p_job_id LIMIT 1;
END
$$;

-- The same, told the job's queue (docs/design.md §12: every statement names its queue); no row when the
-- job is not in that queue.
CREATE FUNCTION awa.get_job(p_queue text, p_job_id bigint) RETURNS SETOF awa.job_row
    LANGUAGE plpgsql STABLE ROWS 1
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp SET jit = off SET enable_seqscan = off
AS $$
DECLARE
    v_sql constant text := 'SELECT j.* FROM awa.jobs j WHERE j.queue = $1 AND j.id = $2 LIMIT 1';
BEGIN
    PERFORM awa._check_queue(p_queue, 'p_queue');
    PERFORM awa._require(p_job_id IS NULL, 'p_job_id');
    -- On a Citus worker that holds the queue, over its own shards (awa._queue_shard_sql).
    RETURN QUERY EXECUTE coalesce(awa._queue_shard_sql(v_sql, p_queue), v_sql) USING p_queue, p_job_id;
END
$$;

-- Jobs of a known queue, optionally of one state, oldest id first, at most p_limit
-- (1..10000). Reads like awa.jobs filtered on the queue: it scans that queue's rows.
CREATE FUNCTION awa.list_jobs(p_queue text, p_state awa.job_state DEFAULT NULL, p_limit bigint DEFAULT 100)
    RETURNS SETOF awa.job_row
    LANGUAGE plpgsql STABLE ROWS 100
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp SET jit = off
AS $$
DECLARE
    v_sql constant text := 'SELECT j.* FROM awa.jobs j WHERE j.queue = $1 AND ($2 IS NULL OR j.state = $2) '
                           'ORDER BY j.id LIMIT $3';
BEGIN
    PERFORM awa._require_queue(p_queue, 'p_queue');
    PERFORM awa._require(p_limit IS NULL, 'p_limit');
    PERFORM awa._check_between(p_limit, 1, 10000, 'p_limit');
    -- On a Citus worker that holds the queue, over its own shards (awa._queue_shard_sql).
    RETURN QUERY EXECUTE coalesce(awa._queue_shard_sql(v_sql, p_queue), v_sql) USING p_queue, p_state, p_limit;
END
$$;

-- One row per known queue: its settings (width, paused, effective DLQ setting, flow-control
-- limits), the cheap depth, exact counts by state (awa.queue_counts_exact: a scan of the
-- queue's rows), the age of its oldest waiting job and its retentions (NULL: the default).
CREATE FUNCTION awa._queues()
    RETURNS TABLE (queue text, enqueue_shards smallint, paused boolean, dlq_enabled boolean, depth bigint,
                   available bigint, scheduled bigint, retryable bigint, running bigint, completed bigint,
                   failed bigint, cancelled bigint, dlq bigint, oldest_waiting_age interval,
                   rate_per_second double precision, rate_burst integer, concurrency_limit integer,
                   completed_retention interval, failed_retention interval, key_concurrency_limit integer,
                   key_rate_per_second double precision, key_rate_burst integer)
    LANGUAGE plpgsql STABLE
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp SET jit = off
AS $$
BEGIN
    -- On a Citus cluster: every worker's rows of its own queues (awa._citus_local_queue_rows),
    -- gathered here; a worker answers for its queues only (docs/scale-out.md).
    -- A worker that does not answer fails the view (58000; awa._citus_gathered_rows).
    IF awa._citus_group() IS NOT NULL THEN
        RETURN QUERY
            SELECT t.* FROM jsonb_to_recordset(awa._citus_gathered_rows('awa.queues', '_citus_local_queue_rows')) AS t(
                queue text, enqueue_shards smallint, paused boolean, dlq_enabled boolean, depth bigint,
                available bigint, scheduled bigint, retryable bigint, running bigint, completed bigint,
                failed bigint, cancelled bigint, dlq bigint, oldest_waiting_age interval,
                rate_per_second double precision, rate_burst integer, concurrency_limit integer,
                completed_retention interval, failed_retention interval, key_concurrency_limit integer,
                   key_rate_per_second double precision, key_rate_burst integer)
             ORDER BY t.queue;
        RETURN;
    END IF;
    RETURN QUERY
    WITH names AS (
        SELECT m.queue FROM awa.queue_meta m
        UNION SELECT h.queue FROM awa.queue_enqueue_heads h
        UNION SELECT j.queue FROM awa.deferred_jobs j
        UNION SELECT e.queue FROM awa.dlq_entries e)
    SELECT n.queue, coalesce(m.enqueue_shards, 1::smallint), coalesce(m.paused, false),
           coalesce(m.dlq_enabled, s.dlq_enabled_by_default), awa._queue_depth(n.queue),
           c.available, c.scheduled, c.retryable, c.running, c.completed, c.failed, c.cancelled, c.dlq,
           (SELECT CASE WHEN min(r.run_at) IS NOT NULL THEN greatest(now() - min(r.run_at), interval '0') END
              FROM awa.lane_cursors h
              JOIN awa.ready_entries r
                ON r.queue = h.queue AND r.priority = h.priority AND r.enqueue_shard = h.enqueue_shard
               AND r.lane_seq >= h.claim_seq
             WHERE h.queue = n.queue AND r.queue = n.queue),
           m.rate_per_second, m.rate_burst, m.concurrency_limit, m.completed_retention, m.failed_retention,
           m.key_concurrency_limit, m.key_rate_per_second, m.key_rate_burst
      FROM names n
      LEFT JOIN awa.queue_meta m ON m.queue = n.queue
     CROSS JOIN awa.plane_settings s
     CROSS JOIN LATERAL awa.queue_counts_exact(n.queue) c;
END
$$;

-- The queues at a glance (admin and pg_monitor). depth is the cheap signal; the counts scan.
CREATE VIEW awa.queues AS
    SELECT queue, enqueue_shards, paused, dlq_enabled, depth, available, scheduled, retryable, running,
           completed, failed, cancelled, dlq, oldest_waiting_age, rate_per_second, rate_burst, concurrency_limit, completed_retention, failed_retention,
           key_concurrency_limit, key_rate_per_second, key_rate_burst
      FROM awa._queues();

REVOKE ALL ON FUNCTION
    awa.queue_depth(text), awa.create_queue(text, bigint, boolean), awa.set_queue_dlq(text, boolean),
    awa.pause_queue(text), awa.resume_queue(text), awa.purge_queue(text), awa.drop_queue(text, boolean),
    awa.get_job(bigint), awa.get_job(text, bigint), awa.list_jobs(text, awa.job_state, bigint), awa._queues()
    FROM PUBLIC;
REVOKE ALL ON awa.queues FROM PUBLIC;
GRANT EXECUTE ON FUNCTION
    awa.create_queue(text, bigint, boolean), awa.set_queue_dlq(text, boolean),
    awa.pause_queue(text), awa.resume_queue(text), awa.purge_queue(text), awa.drop_queue(text, boolean),
    awa.list_jobs(text, awa.job_state, bigint)
    TO awa_admin;
GRANT EXECUTE ON FUNCTION awa.get_job(bigint), awa.get_job(text, bigint) TO awa_producer, awa_worker, awa_admin;
GRANT EXECUTE ON FUNCTION awa.queue_depth(text) TO awa_worker, awa_admin, pg_monitor;
GRANT EXECUTE ON FUNCTION awa._queues() TO awa_admin, pg_monitor;
GRANT SELECT ON awa.queues TO awa_admin, pg_monitor;

-- Retry backoff: attempts below 0 count as 0 (power(2, -2^31) underflowed, 22003).
DROP FUNCTION awa.backoff_duration(integer, integer);
CREATE FUNCTION awa.backoff_duration(p_attempt bigint, p_max_attempts bigint) RETURNS interval
    LANGUAGE sql VOLATILE PARALLEL SAFE
    SET search_path = pg_catalog, pg_temp
    RETURN least(make_interval(secs => power(2, greatest(least(p_attempt, 20), 0)) * (1 + random() * 0.25)), interval '24 hours');
REVOKE ALL ON FUNCTION awa.backoff_duration(bigint, bigint) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION awa.backoff_duration(bigint, bigint) TO awa_producer, awa_worker, awa_admin;
COMMENT ON FUNCTION awa.backoff_duration(bigint, bigint) IS 'Default retry delay: 2^attempt seconds plus up to 25 % jitter, at most 24 hours. Role: all three.';

-- Integer arguments are bigint (1.1): any integer type a driver sends (smallint, integer,
-- bigint, an untyped literal) resolves to the one function of each name.
DROP FUNCTION awa.shard_for_ordering_key(bytea, integer);
CREATE FUNCTION awa.shard_for_ordering_key(key bytea, shards bigint) RETURNS smallint
    AS 'MODULE_PATHNAME', 'awa_shard_for_ordering_key_bytea'
    LANGUAGE C IMMUTABLE PARALLEL SAFE
    SET search_path = pg_catalog, pg_temp;
REVOKE ALL ON FUNCTION awa.shard_for_ordering_key(bytea, bigint) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION awa.shard_for_ordering_key(bytea, bigint) TO awa_producer, awa_worker, awa_admin;
COMMENT ON FUNCTION awa.shard_for_ordering_key(bytea, bigint) IS 'The shard of a key in a queue of `shards` lanes (hash mod shards). Role: all three.';
DROP FUNCTION awa.shard_for_ordering_key(text, integer);
CREATE FUNCTION awa.shard_for_ordering_key(key text, shards bigint) RETURNS smallint
    AS 'MODULE_PATHNAME', 'awa_shard_for_ordering_key_text'
    LANGUAGE C IMMUTABLE PARALLEL SAFE
    SET search_path = pg_catalog, pg_temp;
REVOKE ALL ON FUNCTION awa.shard_for_ordering_key(text, bigint) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION awa.shard_for_ordering_key(text, bigint) TO awa_producer, awa_worker, awa_admin;
COMMENT ON FUNCTION awa.shard_for_ordering_key(text, bigint) IS 'The shard of a text key (UTF-8 bytes) in a queue of `shards` lanes. Role: all three.';
DROP FUNCTION awa.wait_for_jobs(text, integer);
CREATE FUNCTION awa.wait_for_jobs(p_queue text, p_timeout_ms bigint) RETURNS boolean
    AS 'MODULE_PATHNAME', 'awa_wait_for_jobs_1_1'
    LANGUAGE C VOLATILE PARALLEL UNSAFE
    SECURITY DEFINER;
REVOKE ALL ON FUNCTION awa.wait_for_jobs(text, bigint) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION awa.wait_for_jobs(text, bigint) TO awa_worker, awa_admin;
COMMENT ON FUNCTION awa.wait_for_jobs(text, bigint) IS 'Sleep until a producing transaction of the queue commits or the timeout passes. Role: awa_worker, awa_admin.';
DROP FUNCTION awa.promote_due(integer);
CREATE FUNCTION awa.promote_due(p_limit bigint DEFAULT 1000)
    RETURNS integer
    LANGUAGE plpgsql VOLATILE
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp SET jit = off
AS $$
DECLARE
    v_rows awa.deferred_jobs[];
    d awa.deferred_jobs;
    v_queue text;
    v_count integer := 0;
    -- The time, read once: compared with clock_timestamp() itself (volatile, so never an
    -- index bound), every pass read every job not yet due (586,000 of them: 0.2-1.3 s).
    v_now timestamptz := clock_timestamp();
BEGIN
    PERFORM awa._require(p_limit IS NULL, 'p_limit');
    PERFORM awa._require_at_least(p_limit, 1, 'p_limit');
    -- On a Citus cluster: this node's queues, one at a time (docs/scale-out.md, "Maintenance").
    IF awa._citus_group() IS NOT NULL THEN
        -- A queue moved here (or split) first gets back any lane sequence missing here.
        FOR v_queue IN SELECT q FROM awa._citus_local_queues() q LOOP
            PERFORM awa._citus_restore_lane_sequences(v_queue);
            EXIT WHEN v_count >= p_limit;
            v_count := v_count + awa._promote_due_queue(v_queue, least(p_limit - v_count, 2147483647)::integer);
        END LOOP;
        RETURN v_count;
    END IF;
    BEGIN
        WITH due AS (
            SELECT j.job_id, j.queue FROM awa.deferred_jobs j
             WHERE j.run_at <= v_now
               AND NOT EXISTS (SELECT 1 FROM awa.queue_meta m WHERE m.queue = j.queue AND m.paused)
             ORDER BY j.run_at, j.priority, j.job_id
             LIMIT p_limit
             FOR UPDATE SKIP LOCKED),
        moved AS (DELETE FROM awa.deferred_jobs j USING due WHERE j.queue = due.queue AND j.job_id = due.job_id RETURNING j.*)
        SELECT array_agg(m ORDER BY m.run_at, m.priority, m.job_id) INTO v_rows FROM moved m;
        IF v_rows IS NULL THEN
            RETURN 0;
        END IF;
        FOREACH d IN ARRAY v_rows LOOP
            PERFORM awa._sync_unique_claim(d.job_id, d.unique_key, d.unique_states, d.state, 'available', d.queue);
        END LOOP;
        RETURN awa._enqueue_ready(v_rows);
    EXCEPTION WHEN lock_not_available THEN
        NULL;
    END;
    -- A lock the batch needs is held and this transaction does not wait for it: a lane (the
    -- maintenance worker never waits for one, so that a producer's open transaction does not
    -- hold it; or awa_shard.lane_lock_wait), or, past lock_timeout, a unique key another
    -- transaction is taking. Queue by queue instead, a queue that meets such a lock left for
    -- the next pass; the queues oldest due job first, as the batch takes jobs, so that a held
    -- queue does not let queues whose jobs became due later go before the others.
    FOR v_queue IN SELECT j.queue COLLATE "C" FROM awa.deferred_jobs j
                    WHERE j.run_at <= v_now
                      AND NOT EXISTS (SELECT 1 FROM awa.queue_meta m WHERE m.queue = j.queue AND m.paused)
                    GROUP BY 1 ORDER BY min(j.run_at), 1 LOOP
        EXIT WHEN v_count >= p_limit;
        BEGIN
            v_count := v_count + awa._promote_due_queue(v_queue, least(p_limit - v_count, 2147483647)::integer);
        EXCEPTION WHEN lock_not_available THEN
            NULL;
        END;
    END LOOP;
    RETURN v_count;
END
$$;
REVOKE ALL ON FUNCTION awa.promote_due(bigint) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION awa.promote_due(bigint) TO awa_admin;
COMMENT ON FUNCTION awa.promote_due(bigint) IS 'Move due scheduled and retryable jobs to the ready plane; returns how many. Role: awa_admin.';
DROP FUNCTION awa.list_dlq(text, integer);
CREATE FUNCTION awa.list_dlq(p_queue text, p_limit bigint DEFAULT 100) RETURNS SETOF awa.dlq_entries
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
REVOKE ALL ON FUNCTION awa.list_dlq(text, bigint) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION awa.list_dlq(text, bigint) TO awa_admin;
COMMENT ON FUNCTION awa.list_dlq(text, bigint) IS 'Dead letters of a queue (every queue when NULL), newest first. Role: awa_admin.';
DROP FUNCTION awa.set_enqueue_shards(text, integer);
CREATE FUNCTION awa.set_enqueue_shards(p_queue text, p_shards bigint) RETURNS smallint
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
REVOKE ALL ON FUNCTION awa.set_enqueue_shards(text, bigint) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION awa.set_enqueue_shards(text, bigint) TO awa_admin;
COMMENT ON FUNCTION awa.set_enqueue_shards(text, bigint) IS 'Set (creating the queue if needed) a queue''s width 1..64; returns the previous width. Role: awa_admin.';

-- Make a known queue's lanes up front: for each given priority (NULL: all four) and each of
-- the queue's current shards, the lane's heads and sequence, under the lane's lock, in lane
-- order. Returns how many lanes this call created (0 when all existed). The lock of each lane
-- it makes is held until the transaction ends, as a producer's first enqueue into the lane
-- holds it; lanes that exist are not locked.
CREATE FUNCTION awa.create_lanes(p_queue text, p_priorities bigint[] DEFAULT NULL) RETURNS integer
    LANGUAGE plpgsql VOLATILE
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_priority bigint;
    v_shard integer;
    v_new boolean;
    v_created integer := 0;
BEGIN
    PERFORM awa._require_queue(p_queue, 'p_queue');
    IF p_priorities IS NOT NULL THEN
        IF cardinality(p_priorities) = 0 THEN
            RAISE EXCEPTION 'p_priorities must not be empty' USING ERRCODE = '22023',
                HINT = 'Pass NULL to make the lanes of every priority.';
        END IF;
        PERFORM awa._require(array_position(p_priorities, NULL) IS NOT NULL, 'p_priorities element');
        FOREACH v_priority IN ARRAY p_priorities LOOP
            PERFORM awa._check_priority(v_priority, 'p_priorities element');
        END LOOP;
    END IF;
    -- Lanes that exist with their sequence are left alone: no lock is taken on them.
    FOR v_priority, v_shard IN
        SELECT DISTINCT p.priority, s.shard
          FROM unnest(coalesce(p_priorities,
                  ARRAY(SELECT generate_series(awa._limit('min_priority'), awa._limit('max_priority'))::bigint))) p(priority),
               generate_series(0, awa.queue_enqueue_shards(p_queue) - 1) s(shard)
         WHERE NOT EXISTS (SELECT 1 FROM awa.queue_enqueue_heads e
                            WHERE e.queue = p_queue AND e.priority = p.priority AND e.enqueue_shard = s.shard
                              AND to_regclass('awa.' || quote_ident(e.seq_name)) IS NOT NULL)
         ORDER BY 1, 2
    LOOP
        SELECT l.created INTO v_new FROM awa._ensure_lane(p_queue, v_priority::smallint, v_shard::smallint) l;
        v_created := v_created + v_new::integer;
    END LOOP;
    RETURN v_created;
END
$$;
REVOKE ALL ON FUNCTION awa.create_lanes(text, bigint[]) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION awa.create_lanes(text, bigint[]) TO awa_admin;
COMMENT ON FUNCTION awa.create_lanes(text, bigint[])
    IS 'Make a known queue''s lanes (its current shards at the given priorities, NULL: all) before its first jobs; returns how many this call created. Role: awa_admin.';

-- Self-description: every function, table, view, type and sequence of schema awa has a
-- comment (\df+ awa.*, \dt+ awa.*, \dv+ awa.*), checked by test/pgtap/comments.sql so
-- that every later addition needs one too. Public functions name the roles that may call them.
COMMENT ON SCHEMA awa IS 'awa_shard: a sharded, vacuum-aware job queue (docs/api.md).';

-- Producing and routing.
COMMENT ON FUNCTION awa.insert_job_compat(text, text, jsonb, awa.job_state, bigint, bigint, timestamptz, jsonb, text[], bytea, bit, bytea, text)
    IS 'Enqueue one job (the reference''s 12-argument signature, then p_concurrency_key) and return it as awa.job_row. Role: awa_producer, awa_admin.';
COMMENT ON FUNCTION awa.insert_jobs(text, text[], jsonb[], bigint[], timestamptz[], bytea[], bigint[], jsonb[], bytea[], bit[], boolean, text[])
    IS 'Enqueue a batch into one queue; returns the job ids in input order. One-element p_kinds: one kind for every job. p_spread_keyless: spread keyless rows over the shards. p_concurrency_keys: the jobs'' concurrency keys. Role: awa_producer, awa_admin.';
COMMENT ON FUNCTION awa.shard_for_enqueue(text, bigint, bytea)
    IS 'The shard a job of (queue, priority, key) would be enqueued to now in this transaction. Role: awa_producer, awa_admin.';
COMMENT ON FUNCTION awa.reserve_enqueue_seq(text, bigint, bigint, bigint)
    IS 'Reserve a contiguous block of a lane''s numbers under the lane lock (count <= 0: peek). Role: awa_producer, awa_admin.';
COMMENT ON FUNCTION awa.queue_enqueue_shards(text)
    IS 'The width (enqueue_shards) this transaction routes a queue with; 1 without settings. Role: all three.';
COMMENT ON FUNCTION awa.ordering_key_hash(bytea) IS 'The 64-bit ordering-key hash of the key bytes (two''s-complement bigint). Role: all three.';
COMMENT ON FUNCTION awa.ordering_key_hash(text) IS 'The 64-bit ordering-key hash of the UTF-8 bytes of a text key. Role: all three.';
COMMENT ON FUNCTION awa.shard_for_ordering_key(bytea, bigint) IS 'The shard of a key in a queue of `shards` lanes (hash mod shards). Role: all three.';
COMMENT ON FUNCTION awa.shard_for_ordering_key(text, bigint) IS 'The shard of a text key (UTF-8 bytes) in a queue of `shards` lanes. Role: all three.';
COMMENT ON FUNCTION awa.lane_sequence_name(text, bigint, bigint) IS 'Name of a lane''s enqueue sequence in schema awa. Role: all three.';
COMMENT ON FUNCTION awa.lane_lock_key(text, bigint, bigint) IS 'Advisory-lock key of a lane (find lane waits in pg_locks). Role: all three.';

-- Working.
COMMENT ON FUNCTION awa.claim_ready_runtime(text, bigint, double precision, double precision)
    IS 'Claim up to p_max_batch jobs of one lane of a queue, in lane order; starts one attempt each. Role: awa_worker, awa_admin.';
COMMENT ON FUNCTION awa.wait_for_jobs(text, bigint) IS 'Sleep until a producing transaction of the queue commits or the timeout passes. Role: awa_worker, awa_admin.';
COMMENT ON FUNCTION awa.get_job(bigint) IS 'One job by id in its current state (awa.job_row); no row when unknown. Role: awa_producer, awa_worker, awa_admin.';
COMMENT ON FUNCTION awa.get_job(text, bigint) IS 'One job by queue and id in its current state; no row when not in that queue. Role: awa_producer, awa_worker, awa_admin.';
COMMENT ON FUNCTION awa.queue_depth(text)
    IS 'Cheap depth of a known queue for autoscalers: lane positions handed out and not yet claimed (an upper bound of waiting jobs; no scan). Role: awa_worker, awa_admin, pg_monitor.';

-- Queues and administration.
COMMENT ON FUNCTION awa.create_queue(text, bigint, boolean)
    IS 'Create a queue with its width and DLQ override; true when created, false when it exists with these settings. Role: awa_admin.';
COMMENT ON FUNCTION awa.drop_queue(text, boolean)
    IS 'Drop a known queue with its lanes and settings; refuses a queue with live jobs unless p_force. Returns the live jobs removed. Role: awa_admin.';
COMMENT ON FUNCTION awa.purge_queue(text)
    IS 'Remove every waiting, scheduled and retryable job of a known queue (running attempts finish); returns how many. Role: awa_admin.';
COMMENT ON FUNCTION awa.pause_queue(text) IS 'Pause a known queue (claims and promotion skip it); true when this call paused it. Role: awa_admin.';
COMMENT ON FUNCTION awa.resume_queue(text) IS 'Resume a known queue; true when this call resumed it. Role: awa_admin.';
COMMENT ON FUNCTION awa.set_enqueue_shards(text, bigint) IS 'Set (creating the queue if needed) a queue''s width 1..64; returns the previous width. Role: awa_admin.';
COMMENT ON FUNCTION awa.set_queue_dlq(text, boolean)
    IS 'Set a known queue''s override for dead-lettering exhausted jobs (NULL: the install default); returns the previous override. Role: awa_admin.';
COMMENT ON FUNCTION awa.list_jobs(text, awa.job_state, bigint) IS 'Jobs of a known queue, optionally of one state, oldest id first. Role: awa_admin.';
COMMENT ON FUNCTION awa.age_waiting_priorities(interval, bigint, text) IS 'Move waiting jobs older than p_older_than one priority up, in lane order. Role: awa_admin.';
COMMENT ON FUNCTION awa.move_queue(bigint, text, bigint, text) IS 'Move a scheduled, retryable or waiting job to another queue and optionally priority. Role: awa_admin.';
COMMENT ON FUNCTION awa.retry_from_dlq(bigint, text, bigint, timestamptz, text) IS 'Bring a job back from the dead-letter queue (attempt 0), optionally elsewhere or later. Role: awa_admin.';
COMMENT ON FUNCTION awa.list_dlq(text, bigint) IS 'Dead letters of a queue (every queue when NULL), newest first. Role: awa_admin.';
COMMENT ON FUNCTION awa.queue_counts_exact(text) IS 'Exact job counts of one queue by state (scans the queue''s rows). Role: awa_admin, pg_monitor.';
COMMENT ON FUNCTION awa.reset_shard_stats() IS 'Forget the shared-memory per-shard counters of this database; false when not preloaded. Role: awa_admin.';

-- Maintenance.
COMMENT ON FUNCTION awa.promote_due(bigint) IS 'Move due scheduled and retryable jobs to the ready plane; returns how many. Role: awa_admin.';
COMMENT ON FUNCTION awa.rescue_stale_heartbeats(interval, bigint) IS 'Take back attempts whose heartbeat is older than p_stale (retryable, or failed at the last attempt). Role: awa_admin.';
COMMENT ON FUNCTION awa.rescue_expired_deadlines(bigint) IS 'Take back attempts past their hard deadline (retryable, or failed at the last attempt). Role: awa_admin.';
COMMENT ON FUNCTION awa.rotate_queue_ring() IS 'Seal the queue ring''s current slot and start the next one when possible. Role: awa_admin.';
COMMENT ON FUNCTION awa.prune_queue_ring(bigint, boolean) IS 'Reclaim the oldest sealed queue-ring slot (pending rows move forward; the slot is truncated once no snapshot needs them), with p_amortised only when that is worth what it copies. Role: awa_admin.';
COMMENT ON FUNCTION awa.rotate_attempt_ring(text) IS 'Seal the claim or lease ring''s current slot and start the next one when possible. Role: awa_admin.';
COMMENT ON FUNCTION awa.prune_attempt_ring(text, bigint) IS 'Reclaim the oldest sealed claim or lease slot when nothing in it is open. Role: awa_admin.';
COMMENT ON FUNCTION awa.run_maintenance(interval, bigint) IS 'Every periodic task once (periodic jobs, promotion, rescue, rotation, one prune); returns what each did. Role: awa_admin.';

-- Helpers.
COMMENT ON FUNCTION awa.job_state_in_bitmask(bit, awa.job_state) IS 'Whether a unique-state mask holds a state (leftmost bit = scheduled). Role: all three.';
COMMENT ON FUNCTION awa.backoff_duration(bigint, bigint) IS 'Default retry delay: 2^attempt seconds plus up to 25 % jitter, at most 24 hours. Role: all three.';

-- Internal building blocks (no role is granted them; signatures may change).
COMMENT ON FUNCTION awa._append_error(jsonb, text, integer, boolean) IS 'Internal: an errors array with one more {error, attempt, at[, terminal]} entry.';
COMMENT ON FUNCTION awa._check_priority(bigint, text) IS 'Internal: raise 23514 for a priority outside 1..4 (NULL allowed).';
COMMENT ON FUNCTION awa._check_queue(text, text) IS 'Internal: raise 22004 / 23514 for a NULL or badly sized queue name.';
COMMENT ON FUNCTION awa._require_queue(text, text) IS 'Internal: awa._check_queue, then 42704 when the name is no known queue.';
COMMENT ON FUNCTION awa._queue_known(text) IS 'Internal: whether a queue has settings, lanes, scheduled or dead-lettered jobs.';
COMMENT ON FUNCTION awa._queue_depth(text) IS 'Internal: sum over a queue''s lanes of next_seq - claim_seq (no scan).';
COMMENT ON FUNCTION awa._queues() IS 'Internal: the rows of the awa.queues view (security definer).';
COMMENT ON FUNCTION awa._dlq_enabled(text) IS 'Internal: whether a queue dead-letters exhausted jobs (override, else the install default).';
COMMENT ON FUNCTION awa._fail_exhausted(awa.taken_attempt, text) IS 'Internal: end a job whose last attempt failed: the DLQ or a failed terminal row.';
COMMENT ON FUNCTION awa._claim_slot_has_open_receipts(integer) IS 'Internal: whether a claim-ring slot holds an open receipt.';
COMMENT ON FUNCTION awa._count_failed(text, smallint) IS 'Internal: count one terminal failure of a (queue, shard) in shared memory.';
COMMENT ON FUNCTION awa._defer_attempt(awa.taken_attempt, awa.job_state, timestamptz, smallint, jsonb) IS 'Internal: an ended attempt''s job to deferred_jobs (retryable or scheduled).';
COMMENT ON FUNCTION awa._enqueue_ready(awa.deferred_jobs[]) IS 'Internal: put existing jobs back on the ready plane (promotion, DLQ retry, aging, moves).';
COMMENT ON FUNCTION awa._ensure_lane(text, smallint, smallint) IS 'Internal: create a lane''s heads and sequence under the lane lock (cold path of enqueue).';
COMMENT ON FUNCTION awa._finish_attempt(awa.taken_attempt, awa.job_state, jsonb) IS 'Internal: an ended attempt''s terminal row in done_entries, on its own lane identity.';
COMMENT ON FUNCTION awa._lane_next_seq(text) IS 'Internal: next value a lane''s enqueue sequence will hand out (security definer).';
COMMENT ON FUNCTION awa._lock_ring_partitions(text[], integer, boolean) IS 'Internal: take ACCESS EXCLUSIVE (or SHARE ROW EXCLUSIVE) on ring partitions in short tries, never queueing for long.';
COMMENT ON FUNCTION awa._maintenance_wake() IS 'Internal: tell the maintenance launcher that this database has awa_shard.';
COMMENT ON FUNCTION awa._promote_due_queue(text, integer) IS 'Internal: promotion of one queue, run by claims where no maintenance worker serves the database.';
COMMENT ON FUNCTION awa._queue_meta_changed() IS 'Internal: statement and row trigger on queue_meta (ENABLE ALWAYS); this transaction''s next enqueue re-reads widths and limits, and its commit tells every backend to.';
-- A change of queue_meta must make every backend re-read its cached widths and limits at
-- commit, also when made in a replica session (session_replication_role = replica) or applied
-- by logical replication (which fires row triggers only): a row trigger beside the statement
-- trigger, both ENABLE ALWAYS.
CREATE TRIGGER queue_meta_row_changed AFTER INSERT OR UPDATE OR DELETE ON awa.queue_meta
    FOR EACH ROW EXECUTE FUNCTION awa._queue_meta_changed();
ALTER TABLE awa.queue_meta ENABLE ALWAYS TRIGGER queue_meta_changed;
ALTER TABLE awa.queue_meta ENABLE ALWAYS TRIGGER queue_meta_row_changed;
COMMENT ON FUNCTION awa._ready_as_deferred(awa.ready_entries, text, smallint, jsonb) IS 'Internal: a removed ready row as input of awa._enqueue_ready.';
COMMENT ON FUNCTION awa._require(boolean, text) IS 'Internal: raise 22004 naming a NULL argument.';
COMMENT ON FUNCTION awa._require_at_least(bigint, bigint, text) IS 'Internal: raise 22023 for a number below its minimum.';
COMMENT ON FUNCTION awa._require_read_committed(text) IS 'Internal: raise 0A000 outside READ COMMITTED.';
COMMENT ON FUNCTION awa._rescue_taken(awa.taken_attempt, text) IS 'Internal: a rescued attempt: retryable with backoff, or ended at its last attempt.';
COMMENT ON FUNCTION awa._restore_upsert() IS 'Internal: trigger that lets a restored singleton or slot row replace the default one.';
COMMENT ON FUNCTION awa._ring_write_slot(text) IS 'Internal: the write slot of a ring for this transaction, fenced against prune.';
COMMENT ON FUNCTION awa._ring_live_arc(text) IS 'Internal: the live slots of a ring, as two inclusive ranges.';
COMMENT ON FUNCTION awa._ring_slot_freed(text, integer) IS 'Internal: forget a write slot this transaction fenced in a slot it has just freed.';
COMMENT ON FUNCTION awa._shard_lag() IS 'Internal: the rows of the awa.shard_lag view (security definer).';
COMMENT ON FUNCTION awa._shard_stats() IS 'Internal: the shared-memory per-shard counters; empty when not preloaded.';
COMMENT ON FUNCTION awa._shard_stats_from_tables() IS 'Internal: per-shard counters derived from the tables (no preload).';
COMMENT ON FUNCTION awa._stamp_metadata(jsonb, jsonb) IS 'Internal: metadata with provenance keys added where absent.';
COMMENT ON FUNCTION awa._stats_preloaded() IS 'Internal: whether the library is in shared_preload_libraries.';

-- Types.
COMMENT ON TYPE awa.job_state IS 'State of a job; the label order defines the bits of a unique-state mask.';
COMMENT ON TYPE awa.job_row IS 'A job as callers see it: returned by insert_job_compat, get_job and list_jobs; the columns of awa.jobs.';
COMMENT ON TYPE awa.taken_attempt IS 'Internal: an attempt an exit has just ended (taken out of the running set), with its ready row''s body.';

-- Views.
COMMENT ON VIEW awa.jobs IS 'Every job once, in its current state, with the columns of awa.job_row. Reads every table: filter it.';
COMMENT ON VIEW awa.queues IS 'One row per known queue: settings, cheap depth, exact counts by state, age of the oldest waiting job, retentions (NULL: the default).';
COMMENT ON VIEW awa.shard_lag IS 'One row per lane: enqueue and claim cursors, lag, waiting rows, oldest waiting run_at, draining.';
COMMENT ON VIEW awa.shard_stats IS 'Per-(queue, shard) counters: shared memory when preloaded, else derived from the tables.';

-- Tables, settings columns and sequences.
COMMENT ON TABLE awa.queue_meta IS 'Per-queue settings. No row: one shard, not paused, install-default DLQ setting.';
COMMENT ON COLUMN awa.queue_meta.queue IS 'Queue name (1..200 characters).';
COMMENT ON COLUMN awa.queue_meta.paused IS 'Paused queues are neither claimed nor promoted; producers still enqueue.';
COMMENT ON COLUMN awa.queue_meta.paused_at IS 'When the queue was paused.';
COMMENT ON COLUMN awa.queue_meta.paused_by IS 'Session user that paused the queue.';
COMMENT ON COLUMN awa.queue_meta.enqueue_shards IS 'Width S (1..64): 1 = strict FIFO per priority, more = partitioned FIFO per shard.';
COMMENT ON COLUMN awa.queue_meta.completed_retention IS 'How long completed jobs stay visible at least (awa.set_queue_retention); NULL: until their ring slot is pruned.';
COMMENT ON COLUMN awa.queue_meta.failed_retention IS 'How long failed and cancelled jobs stay visible at least (awa.set_queue_retention); NULL: failed ones until retried or deleted, cancelled ones until their ring slot is pruned.';
COMMENT ON COLUMN awa.queue_meta.dlq_enabled IS 'Jobs whose last attempt fails go to the DLQ (true) or end failed (false); NULL follows plane_settings.dlq_enabled_by_default.';
COMMENT ON TABLE awa.plane_settings IS 'Install-wide settings (one row).';
COMMENT ON COLUMN awa.plane_settings.singleton IS 'Always true: the table has one row.';
COMMENT ON COLUMN awa.plane_settings.receipts IS 'true: receipts mode (default), running attempts recorded in claim batches (receipts); false: leases mode, one lease row per running attempt.';
COMMENT ON COLUMN awa.plane_settings.dlq_enabled_by_default IS 'Default of queue_meta.dlq_enabled: dead-letter exhausted jobs (default false).';
COMMENT ON TABLE awa.storage_transition_state IS 'Engine state; migration v017 refuses to run in mixed_transition.';
COMMENT ON TABLE awa.queue_enqueue_heads IS 'One row per lane (queue, priority, enqueue_shard): the name of its enqueue sequence.';
COMMENT ON TABLE awa.queue_ring_state IS 'Queue ring cursor: slot count, current write slot and its generation.';
COMMENT ON TABLE awa.lease_ring_state IS 'Lease ring cursor: slot count, current write slot and its generation.';
COMMENT ON TABLE awa.claim_ring_state IS 'Claim (receipt) ring cursor: slot count, current write slot and its generation.';
COMMENT ON TABLE awa.queue_ring_slots IS 'Generation held by each queue-ring slot (-1: free).';
COMMENT ON TABLE awa.lease_ring_slots IS 'Generation held by each lease-ring slot (-1: free).';
COMMENT ON TABLE awa.claim_ring_slots IS 'Generation held by each claim-ring slot (-1: free).';
COMMENT ON TABLE awa.ready_entries IS 'Jobs put on the ready plane, written once, keyed by lane identity; partitioned by queue-ring slot.';
COMMENT ON TABLE awa.done_entries IS 'Terminal rows (completed, failed, cancelled) on the lane identity of their ready row; partitioned by queue-ring slot.';
COMMENT ON TABLE awa.completion_batches IS 'Completed attempts, one row per (completion call, lane, block of 64 lane_seqs), as parallel arrays; partitioned by queue-ring slot.';
COMMENT ON TABLE awa.done_entries_retained IS 'Failed terminal rows kept across prune, with their body (ready_slot -1).';
COMMENT ON TABLE awa.leases IS 'Running attempts in leases mode; partitioned by lease-ring slot.';
COMMENT ON TABLE awa.claim_batches IS 'Receipts mode: the records (receipts) of running attempts, one row per (claim call, lane, ready slot, block of 64 lane_seqs), as parallel arrays; partitioned by claim-ring slot.';
COMMENT ON TABLE awa.lease_claim_closures IS 'How each receipt ended (one closer wins); partitioned by claim-ring slot.';
COMMENT ON TABLE awa.attempt_state IS 'Heartbeats and progress of running attempts (receipts mode).';
COMMENT ON TABLE awa.deferred_jobs IS 'Scheduled and retryable jobs with their ordering key; promoted to the ready plane when due.';
COMMENT ON TABLE awa.dlq_entries IS 'Dead-lettered jobs with reason, errors and ordering key.';
COMMENT ON TABLE awa.job_unique_claims IS 'At most one live job per unique key and queue.';
COMMENT ON SEQUENCE awa.job_id_seq IS 'Job ids.';
COMMENT ON SEQUENCE awa.receipt_id_seq IS 'Receipt ids: each claim batch takes one value and the 63 after it.';
DO $$
BEGIN
    FOR s IN 0..15 LOOP
        EXECUTE format('COMMENT ON TABLE awa.%I IS %L', 'ready_entries_' || s,
                       format('Partition of awa.ready_entries for queue-ring slot %s.', s));
        EXECUTE format('COMMENT ON TABLE awa.%I IS %L', 'done_entries_' || s,
                       format('Partition of awa.done_entries for queue-ring slot %s.', s));
        EXECUTE format('COMMENT ON TABLE awa.%I IS %L', 'completion_batches_' || s,
                       format('Partition of awa.completion_batches for queue-ring slot %s.', s));
    END LOOP;
    FOR s IN 0..7 LOOP
        EXECUTE format('COMMENT ON TABLE awa.%I IS %L', 'leases_' || s,
                       format('Partition of awa.leases for lease-ring slot %s.', s));
        EXECUTE format('COMMENT ON TABLE awa.%I IS %L', 'claim_batches_' || s,
                       format('Partition of awa.claim_batches for claim-ring slot %s.', s));
        EXECUTE format('COMMENT ON TABLE awa.%I IS %L', 'lease_claim_closures_' || s,
                       format('Partition of awa.lease_claim_closures for claim-ring slot %s.', s));
    END LOOP;
END
$$;

-- =========================================================================================
-- Argument checks and limits, once. The limits are named in src/limits.hpp and
-- reach SQL through awa._limit(name); the regression test `limits` proves that the CHECKs
-- and defaults of the released scripts agree with them. Every plpgsql argument check goes
-- through the helpers: awa._require (22004), awa._check_queue, awa._check_priority,
-- awa._check_between (a range) and awa._check_arg (any other rule, 22023). (The 1.0 exits
-- fail_job_to_dlq, retry_job_after and snooze_job are replaced, through the same helpers,
-- where the lifecycle exits share their code.)
-- =========================================================================================

-- A limit of src/limits.hpp by name (max_enqueue_shards, max_queue_chars, default_priority, ...).
CREATE FUNCTION awa._limit(p_name text) RETURNS integer
    AS 'MODULE_PATHNAME', 'awa_limit'
    LANGUAGE C IMMUTABLE PARALLEL SAFE
    SET search_path = pg_catalog, pg_temp;

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
REVOKE ALL ON FUNCTION awa._limit(text), awa._check_between(bigint, bigint, bigint, text, text),
    awa._check_arg(boolean, text) FROM PUBLIC;
COMMENT ON FUNCTION awa._limit(text) IS 'Internal: a named limit of src/limits.hpp (the C++ side), so SQL states it once.';
COMMENT ON FUNCTION awa._check_between(bigint, bigint, bigint, text, text) IS 'Internal: raise 22023 (or the given SQLSTATE) for a number outside its range.';
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

-- =========================================================================================
-- One definition of a job: awa.job_template names the attributes every job
-- carries, under the same names and types in every table that holds jobs (ready_entries,
-- done_entries, deferred_jobs, dlq_entries) and in awa.taken_attempt and awa.job_row. The
-- C++ list AWA_JOB_COLUMNS (src/job_columns.hpp) is the same list in the same order; the
-- regression test job_definition checks both. Code that moves a job from one table to
-- another goes through the template (awa._job, awa._job_row) and names only the columns
-- the destination adds or changes, so a new attribute travels with no other edit
-- (docs/design.md, "Adding a job attribute").
-- =========================================================================================

CREATE TYPE awa.job_template AS (
    job_id bigint, kind text, queue text, args jsonb, priority smallint, attempt smallint,
    run_lease bigint, max_attempts smallint, run_at timestamptz, attempted_at timestamptz,
    created_at timestamptz, unique_key bytea, unique_states bit(8), ordering_key bytea,
    metadata jsonb, tags text[], errors jsonb, concurrency_key text);

-- The job attributes of any row that has them (a job table's row, awa.taken_attempt), by
-- name; a NULL row gives a job with every attribute NULL.
-- The C++ side of the same definition (AWA_JOB_COLUMNS), for the test that they agree.
CREATE FUNCTION awa._job_columns(OUT attnum integer, OUT name text, OUT type text) RETURNS SETOF record
    AS 'MODULE_PATHNAME', 'awa_job_columns'
    LANGUAGE C IMMUTABLE PARALLEL SAFE
    SET search_path = pg_catalog, pg_temp;
REVOKE ALL ON FUNCTION awa._job_columns() FROM PUBLIC;
COMMENT ON FUNCTION awa._job_columns() IS
    'Internal: the job attributes of the C++ definition (src/job_columns.hpp), in order, to check them against awa.job_template.';

CREATE FUNCTION awa._job(p_row anyelement) RETURNS awa.job_template
    LANGUAGE sql STABLE PARALLEL SAFE
    SET search_path = pg_catalog, pg_temp
AS $$ SELECT jsonb_populate_record(NULL::awa.job_template, coalesce(to_jsonb(p_row), '{}')) $$;

-- A row of p_into's type (a job table's row type or awa.taken_attempt): p_into's own
-- values, overwritten by the job's attributes, then by p_own (the columns the destination
-- adds or changes, by name).
CREATE FUNCTION awa._job_row(p_into anyelement, p_job awa.job_template, p_own jsonb) RETURNS anyelement
    LANGUAGE sql STABLE PARALLEL SAFE
    SET search_path = pg_catalog, pg_temp
AS $$ SELECT jsonb_populate_record(p_into, coalesce(to_jsonb(p_job), '{}') || coalesce(p_own, '{}')) $$;

-- The job of a terminal row: its own attributes; the body it leaves NULL (because the
-- ready row of the same lane identity holds it) from that ready row. attempted_at is the
-- terminal attempt's own.
CREATE FUNCTION awa._done_job(d awa.done_entries, r awa.ready_entries) RETURNS awa.job_template
    LANGUAGE sql STABLE PARALLEL SAFE
    SET search_path = pg_catalog, pg_temp
    RETURN jsonb_populate_record(awa._job(r),
                                 jsonb_strip_nulls(to_jsonb(awa._job(d))) || jsonb_build_object('attempted_at', d.attempted_at));

-- Take the open attempt (job_id, run_lease): close its receipt with p_outcome (exactly
-- one closer wins) or delete its lease. NULL when the attempt is not open (stale writer).
-- The ready row is joined on the full lane identity, shard included; the attempt row's
-- columns override the ready row's where they share a name (lane priority, attempt,
-- run_lease, lane identity), and its claim time is the attempt's attempted_at. C (1.1):
-- the attempt is found on the latest committed state, so a REPEATABLE READ or SERIALIZABLE
-- caller whose snapshot predates the claim still takes it (src/attempts.cpp).
DROP FUNCTION awa._take_attempt(bigint, bigint, text);
CREATE FUNCTION awa._take_attempt(p_job_id bigint, p_run_lease bigint, p_outcome text, p_queue text DEFAULT NULL)
    RETURNS awa.taken_attempt
    AS 'MODULE_PATHNAME', 'awa_take_attempt'
    LANGUAGE C VOLATILE PARALLEL UNSAFE
    SET search_path = pg_catalog, pg_temp;
REVOKE ALL ON FUNCTION awa._take_attempt(bigint, bigint, text, text) FROM PUBLIC;
COMMENT ON FUNCTION awa._take_attempt(bigint, bigint, text, text) IS 'Internal: take the open attempt (job_id, run_lease) out of the running set.';

-- The same for the rescues: a receipt whose claim batch another transaction holds (a closer
-- of one of its jobs, not yet committed) is left for a later pass instead of waited for, so
-- a maintenance pass never waits for a worker's transaction. With p_queue, only an attempt
-- of that queue is open, and every statement carries it (the rescue of one queue on Citus).
CREATE FUNCTION awa._take_attempt_unless_busy(p_job_id bigint, p_run_lease bigint, p_outcome text,
                                              p_queue text DEFAULT NULL)
    RETURNS awa.taken_attempt
    AS 'MODULE_PATHNAME', 'awa_take_attempt_unless_busy'
    LANGUAGE C VOLATILE PARALLEL UNSAFE
    SET search_path = pg_catalog, pg_temp;
REVOKE ALL ON FUNCTION awa._take_attempt_unless_busy(bigint, bigint, text, text) FROM PUBLIC;
COMMENT ON FUNCTION awa._take_attempt_unless_busy(bigint, bigint, text, text) IS
    'Internal: awa._take_attempt, except that an attempt whose claim batch another transaction holds (receipts mode) is left alone (rescues).';

-- Take whatever attempt of a job is open: its newest open receipt, else its newest running
-- lease (C, latest committed state, like awa._take_attempt).
DROP FUNCTION awa._take_open_attempt(bigint, text);
CREATE FUNCTION awa._take_open_attempt(p_job_id bigint, p_outcome text, p_queue text DEFAULT NULL)
    RETURNS awa.taken_attempt
    AS 'MODULE_PATHNAME', 'awa_take_open_attempt'
    LANGUAGE C VOLATILE PARALLEL UNSAFE
    SET search_path = pg_catalog, pg_temp;
REVOKE ALL ON FUNCTION awa._take_open_attempt(bigint, text, text) FROM PUBLIC;
COMMENT ON FUNCTION awa._take_open_attempt(bigint, text, text) IS 'Internal: take whatever attempt of a job is open.';

-- Take (p_hold) or release a job's unique claim on the latest committed state, whatever the
-- caller's isolation level: a release must see a claim row committed after the caller's
-- snapshot (an exit at REPEATABLE READ of a job enqueued since), and a take must not raise
-- 40001 on a conflicting claim it cannot see (C, src/unique_claims.cpp).
CREATE FUNCTION awa._set_unique_claim(p_job_id bigint, p_key bytea, p_hold boolean, p_queue text) RETURNS void
    AS 'MODULE_PATHNAME', 'awa_set_unique_claim'
    LANGUAGE C VOLATILE PARALLEL UNSAFE
    SET search_path = pg_catalog, pg_temp;
REVOKE ALL ON FUNCTION awa._set_unique_claim(bigint, bytea, boolean, text) FROM PUBLIC;
COMMENT ON FUNCTION awa._set_unique_claim(bigint, bytea, boolean, text) IS 'Internal: take or release a job''s unique claim in its queue on the latest committed state.';

-- Whether a bit(8) unique-state mask holds a state (leftmost bit = scheduled): the one rule,
-- in C (src/unique_claims.cpp), shared by enqueue, claims, promotion and every SQL caller.
CREATE OR REPLACE FUNCTION awa.job_state_in_bitmask(p_mask bit(8), p_state awa.job_state) RETURNS boolean
    AS 'MODULE_PATHNAME', 'awa_job_state_in_bitmask'
    LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE
    SET search_path = pg_catalog, pg_temp;

-- Move a job's unique claim with its state: released when the new state leaves the mask,
-- taken when it enters it (a conflicting live claim keeps its key), on the latest committed
-- state (C, src/unique_claims.cpp). The claim is the job's in its queue (unique keys are
-- per queue).
DROP FUNCTION awa._sync_unique_claim(bigint, bytea, bit, awa.job_state, awa.job_state);
CREATE FUNCTION awa._sync_unique_claim(p_job_id bigint, p_key bytea, p_mask bit(8),
                                       p_old awa.job_state, p_new awa.job_state, p_queue text) RETURNS void
    AS 'MODULE_PATHNAME', 'awa_sync_unique_claim'
    LANGUAGE C VOLATILE PARALLEL UNSAFE
    SET search_path = pg_catalog, pg_temp;
REVOKE ALL ON FUNCTION awa._sync_unique_claim(bigint, bytea, bit, awa.job_state, awa.job_state, text) FROM PUBLIC;
COMMENT ON FUNCTION awa._sync_unique_claim(bigint, bytea, bit, awa.job_state, awa.job_state, text) IS 'Internal: move a job''s unique claim in its queue with its state.';

-- Create a lane's heads and sequence if missing, under the lane lock (cold path of enqueue;
-- C, src/reserve.cpp, the same code the reservation runs on a cache miss).
CREATE OR REPLACE FUNCTION awa._ensure_lane(p_queue text, p_priority smallint, p_enqueue_shard smallint,
                                            OUT seq_oid oid, OUT lock_key bigint, OUT created boolean)
    AS 'MODULE_PATHNAME', 'awa_ensure_lane'
    LANGUAGE C VOLATILE STRICT PARALLEL UNSAFE
    SET search_path = pg_catalog, pg_temp;

-- Under Citus, make again the sequence of a lane whose head is on this node without it (after
-- a shard move or split), at the lane's position; only a restore, never waiting for the lane
-- lock (C, src/reserve.cpp). False when the lock is busy, the lane gone or its sequence there.
CREATE FUNCTION awa._restore_lane_sequence(p_queue text, p_priority smallint, p_enqueue_shard smallint)
    RETURNS boolean
    AS 'MODULE_PATHNAME', 'awa_restore_lane_sequence'
    LANGUAGE C VOLATILE STRICT PARALLEL UNSAFE
    SET search_path = pg_catalog, pg_temp;
REVOKE ALL ON FUNCTION awa._restore_lane_sequence(text, smallint, smallint) FROM PUBLIC;
COMMENT ON FUNCTION awa._restore_lane_sequence(text, smallint, smallint) IS 'Internal: under Citus, make again a lane''s missing sequence at its position (after a shard move or split), lock tried.';

-- An ended attempt (awa.taken_attempt) to deferred_jobs (retryable or scheduled) at p_run_at.
CREATE OR REPLACE FUNCTION awa._defer_attempt(t awa.taken_attempt, p_state awa.job_state, p_run_at timestamptz,
                                              p_attempt smallint, p_errors jsonb) RETURNS void
    LANGUAGE plpgsql VOLATILE
    SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    INSERT INTO awa.deferred_jobs
    SELECT x.* FROM awa._job_row(NULL::awa.deferred_jobs, awa._job(t), jsonb_build_object(
        'state', p_state, 'attempt', p_attempt, 'run_at', p_run_at, 'errors', p_errors,
        'finalized_at', CASE WHEN p_state = 'retryable' THEN clock_timestamp() END)) x;
    PERFORM awa._sync_unique_claim(t.job_id, t.unique_key, t.unique_states, 'running', p_state, t.queue);
END
$$;

-- A worker's call naming an attempt: 22004 for a NULL p_job_id or p_run_lease, then the
-- attempt taken with p_outcome (NULL when it is not open).
CREATE FUNCTION awa._take_named_attempt(p_job_id bigint, p_run_lease bigint, p_outcome text,
                                        p_queue text DEFAULT NULL)
    RETURNS awa.taken_attempt
    LANGUAGE plpgsql VOLATILE
    SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    PERFORM awa._require(p_job_id IS NULL, 'p_job_id');
    PERFORM awa._require(p_run_lease IS NULL, 'p_run_lease');
    RETURN awa._take_attempt(p_job_id, p_run_lease, p_outcome, p_queue);
END
$$;

-- An ended attempt (awa.taken_attempt) to the dead-letter queue with p_reason and its
-- errors (ordering key kept).
CREATE FUNCTION awa._dead_letter(t awa.taken_attempt, p_errors jsonb, p_reason text) RETURNS void
    LANGUAGE plpgsql VOLATILE
    SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    INSERT INTO awa.dlq_entries
    SELECT x.* FROM awa._job_row(NULL::awa.dlq_entries, awa._job(t), jsonb_build_object(
        'state', 'failed', 'errors', p_errors, 'finalized_at', clock_timestamp(), 'dlq_reason', p_reason,
        'dlq_at', clock_timestamp(), 'original_run_lease', t.run_lease)) x;
    PERFORM awa._sync_unique_claim(t.job_id, t.unique_key, t.unique_states, 'running', 'failed', t.queue);
    PERFORM awa._job_finished(t.job_id);
END
$$;

-- Fail an attempt straight into the dead-letter queue (ordering key kept).
DROP FUNCTION awa.fail_job_to_dlq(bigint, bigint, text, text);
CREATE FUNCTION awa.fail_job_to_dlq(p_job_id bigint, p_run_lease bigint, p_error text DEFAULT NULL,
                                               p_reason text DEFAULT 'failed', p_queue text DEFAULT NULL)
    RETURNS boolean
    LANGUAGE plpgsql VOLATILE
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp SET jit = off SET enable_seqscan = off
AS $$
DECLARE
    t awa.taken_attempt;
BEGIN
    PERFORM awa._require_queue_local(p_queue);  -- on a Citus cluster: delegated by p_queue, or 0A000
    PERFORM awa._require(p_reason IS NULL, 'p_reason');
    t := awa._take_named_attempt(p_job_id, p_run_lease, 'dlq', p_queue);
    IF t.job_id IS NULL THEN
        RETURN false;
    END IF;
    PERFORM awa._dead_letter(t, awa._append_error(t.errors, coalesce(p_error, p_reason), t.attempt, true), p_reason);
    PERFORM awa._count_failed(t.queue, t.enqueue_shard);
    RETURN true;
END
$$;
REVOKE ALL ON FUNCTION awa.fail_job_to_dlq(bigint, bigint, text, text, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION awa.fail_job_to_dlq(bigint, bigint, text, text, text) TO awa_worker, awa_admin;
COMMENT ON FUNCTION awa.fail_job_to_dlq(bigint, bigint, text, text, text) IS 'End an attempt by moving the job to the dead-letter queue. Role: awa_worker, awa_admin.';

-- End an attempt without an error and put the job back after p_delay: retryable (the
-- attempt is consumed) or, snoozed, scheduled with the attempt given back. False when the
-- attempt was not open (stale writer).
CREATE FUNCTION awa._put_back(p_job_id bigint, p_run_lease bigint, p_delay interval, p_snooze boolean,
                              p_queue text DEFAULT NULL)
    RETURNS boolean
    LANGUAGE plpgsql VOLATILE
    SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    t awa.taken_attempt;
BEGIN
    PERFORM awa._require_queue_local(p_queue);  -- on a Citus cluster: delegated by p_queue, or 0A000
    PERFORM awa._require(p_delay IS NULL, 'p_delay');
    IF p_delay < interval '0' THEN
        RAISE EXCEPTION 'p_delay must not be negative' USING ERRCODE = '22023';
    END IF;
    PERFORM awa._check_interval(p_delay, 'p_delay');
    t := awa._take_named_attempt(p_job_id, p_run_lease, CASE WHEN p_snooze THEN 'snoozed' ELSE 'retryable' END,
                                 p_queue);
    IF t.job_id IS NULL THEN
        RETURN false;
    END IF;
    PERFORM awa._defer_attempt(t, CASE WHEN p_snooze THEN 'scheduled' ELSE 'retryable' END::awa.job_state,
                               clock_timestamp() + p_delay,
                               CASE WHEN p_snooze THEN greatest(t.attempt - 1, 0) ELSE t.attempt END::smallint,
                               t.errors);
    RETURN true;
END
$$;

-- Retry an attempt after p_delay without recording an error (attempt is consumed).
DROP FUNCTION awa.retry_job_after(bigint, bigint, interval);
CREATE FUNCTION awa.retry_job_after(p_job_id bigint, p_run_lease bigint, p_delay interval, p_queue text DEFAULT NULL)
    RETURNS boolean
    LANGUAGE sql VOLATILE
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp SET jit = off SET enable_seqscan = off
    RETURN awa._put_back(p_job_id, p_run_lease, p_delay, false, p_queue);
REVOKE ALL ON FUNCTION awa.retry_job_after(bigint, bigint, interval, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION awa.retry_job_after(bigint, bigint, interval, text) TO awa_worker, awa_admin;
COMMENT ON FUNCTION awa.retry_job_after(bigint, bigint, interval, text) IS 'End an attempt without an error; retryable after p_delay. Role: awa_worker, awa_admin.';

-- Snooze an attempt: scheduled again after p_delay; the attempt is not consumed.
DROP FUNCTION awa.snooze_job(bigint, bigint, interval);
CREATE FUNCTION awa.snooze_job(p_job_id bigint, p_run_lease bigint, p_delay interval, p_queue text DEFAULT NULL)
    RETURNS boolean
    LANGUAGE sql VOLATILE
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp SET jit = off SET enable_seqscan = off
    RETURN awa._put_back(p_job_id, p_run_lease, p_delay, true, p_queue);
REVOKE ALL ON FUNCTION awa.snooze_job(bigint, bigint, interval, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION awa.snooze_job(bigint, bigint, interval, text) TO awa_worker, awa_admin;
COMMENT ON FUNCTION awa.snooze_job(bigint, bigint, interval, text) IS 'Put a running job back as scheduled after p_delay without using up the attempt. Role: awa_worker, awa_admin.';

-- A removed ready row as the input of awa._enqueue_ready, bound for p_queue/p_priority.
CREATE OR REPLACE FUNCTION awa._ready_as_deferred(r awa.ready_entries, p_queue text, p_priority smallint,
                                                  p_stamp jsonb) RETURNS awa.deferred_jobs
    LANGUAGE sql STABLE PARALLEL SAFE
    SET search_path = pg_catalog, pg_temp
    RETURN awa._job_row(NULL::awa.deferred_jobs, awa._job(r), jsonb_build_object(
        'queue', p_queue, 'priority', p_priority, 'metadata', awa._stamp_metadata(r.metadata, p_stamp)));

-- Move a failed terminal job into the dead-letter queue with a reason. The body comes
-- from the done row or, where that is narrow, from the ready row of the same lane
-- identity (shard included). Returns false when the job has no failed terminal row (in
-- p_queue, when given). p_queue is the routing argument on a Citus cluster, where a call
-- without it, or not delegated to the queue's worker, is refused (0A000) before anything
-- is touched (awa._require_queue_local); by id alone it works on one server. Row by row
-- through variables: no statement takes a whole row of a table (Citus would hand the
-- shard's row type to awa._done_job).
-- p_queue (the routing argument on Citus) is a new trailing argument: the 1.0 signature goes.
DROP FUNCTION awa.move_failed_to_dlq(bigint, text);
CREATE FUNCTION awa.move_failed_to_dlq(p_job_id bigint, p_reason text, p_queue text DEFAULT NULL) RETURNS boolean
    LANGUAGE plpgsql VOLATILE
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp SET plan_cache_mode = force_custom_plan
AS $$
DECLARE
    d awa.done_entries;
    r awa.ready_entries;
    j awa.job_template;
    x awa.dlq_entries;
    v_moved boolean := false;
BEGIN
    PERFORM awa._require(p_job_id IS NULL, 'p_job_id');
    PERFORM awa._require(p_reason IS NULL, 'p_reason');
    IF p_queue IS NOT NULL THEN
        PERFORM awa._check_queue(p_queue, 'p_queue');
    END IF;
    PERFORM awa._require_queue_local(p_queue);
    FOR d IN
        DELETE FROM awa.done_entries g
         WHERE g.job_id = p_job_id AND g.state = 'failed' AND (p_queue IS NULL OR g.queue = p_queue)
        RETURNING g.*
    LOOP
        r := NULL;
        SELECT e.* INTO r FROM awa.ready_entries e
         WHERE e.ready_slot = d.ready_slot AND e.ready_generation = d.ready_generation AND e.queue = d.queue
           AND e.priority = d.priority AND e.enqueue_shard = d.enqueue_shard AND e.lane_seq = d.lane_seq;
        j := awa._done_job(d, r);
        x := awa._job_row(NULL::awa.dlq_entries, j, jsonb_build_object(
                 'args', coalesce(j.args, '{}'), 'state', 'failed', 'max_attempts', coalesce(j.max_attempts, 25),
                 'finalized_at', d.finalized_at, 'created_at', coalesce(j.created_at, d.finalized_at),
                 'dlq_reason', p_reason, 'dlq_at', clock_timestamp(), 'original_run_lease', d.run_lease));
        INSERT INTO awa.dlq_entries SELECT (x).*;
        v_moved := true;
    END LOOP;
    RETURN v_moved;
END
$$;
REVOKE ALL ON FUNCTION awa.move_failed_to_dlq(bigint, text, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION awa.move_failed_to_dlq(bigint, text, text) TO awa_admin;
COMMENT ON FUNCTION awa.move_failed_to_dlq(bigint, text, text) IS 'Move a failed terminal job (in p_queue, when given: the routing argument on Citus) into the dead-letter queue. Role: awa_admin.';

-- A job ended where it was live (cancelled, ...): its terminal row with the job's attributes
-- on the lane identity p_lane (ready_slot, ready_generation, enqueue_shard, lane_seq), and
-- its unique claim moved from p_from to p_state.
CREATE FUNCTION awa._end_job(p_job awa.job_template, p_lane jsonb, p_from awa.job_state, p_state awa.job_state)
    RETURNS void
    LANGUAGE plpgsql VOLATILE
    SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    INSERT INTO awa.done_entries
    SELECT x.* FROM awa._job_row(NULL::awa.done_entries, p_job,
        p_lane || jsonb_build_object('state', p_state, 'finalized_at', clock_timestamp())) x;
    PERFORM awa._sync_unique_claim(p_job.job_id, p_job.unique_key, p_job.unique_states, p_from, p_state, p_job.queue);
    PERFORM awa._job_finished(p_job.job_id);
END
$$;

REVOKE ALL ON FUNCTION awa._job(anyelement), awa._job_row(anyelement, awa.job_template, jsonb),
    awa._done_job(awa.done_entries, awa.ready_entries), awa._dead_letter(awa.taken_attempt, jsonb, text),
    awa._put_back(bigint, bigint, interval, boolean, text), awa._take_named_attempt(bigint, bigint, text, text),
    awa._end_job(awa.job_template, jsonb, awa.job_state, awa.job_state) FROM PUBLIC;

COMMENT ON TYPE awa.job_template IS 'The attributes of a job, as every table holding jobs names them (one definition; src/job_columns.hpp is the same list).';
COMMENT ON FUNCTION awa._job(anyelement) IS 'Internal: the job attributes (awa.job_template) of any row that has them, by name.';
COMMENT ON FUNCTION awa._job_row(anyelement, awa.job_template, jsonb) IS 'Internal: a row of a job table''s type from a job and the columns that table adds.';
COMMENT ON FUNCTION awa._done_job(awa.done_entries, awa.ready_entries) IS 'Internal: the job of a terminal row, its NULL body taken from its ready row.';
COMMENT ON FUNCTION awa._dead_letter(awa.taken_attempt, jsonb, text) IS 'Internal: an ended attempt''s job to the dead-letter queue.';
COMMENT ON FUNCTION awa._take_named_attempt(bigint, bigint, text, text) IS 'Internal: 22004 for a NULL job_id or run_lease, then awa._take_attempt.';
COMMENT ON FUNCTION awa._put_back(bigint, bigint, interval, boolean, text) IS 'Internal: retry_job_after and snooze_job: end an attempt and defer the job.';
COMMENT ON FUNCTION awa._end_job(awa.job_template, jsonb, awa.job_state, awa.job_state) IS 'Internal: a job''s terminal row on a lane identity, its unique claim moved.';

-- =========================================================================================
-- Claim cursors without a hot row (awa.claim_marks, awa.lane_cursors above): the readers of
-- a lane's cursor that 1.0 defined, and the fold run by maintenance.
-- =========================================================================================

-- Remove the job's unclaimed ready row, if it has one: lock the claim head of the row's
-- own lane, read the lane's cursor on the latest committed state (awa._lane_cursor: no
-- claim moves it while the head is locked, whatever this transaction's snapshot), re-check
-- lane_seq >= cursor, delete the row by its full identity and return it (NULL when the job
-- has no unclaimed ready row). The cursor is left alone: claim jumps the gap. A concurrent
-- move of the same row to another lane is followed by looking again.
DROP FUNCTION awa._take_unclaimed_ready(bigint);
CREATE FUNCTION awa._take_unclaimed_ready(p_job_id bigint, p_queue text DEFAULT NULL) RETURNS awa.ready_entries
    LANGUAGE plpgsql VOLATILE
    SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    r awa.ready_entries;
    v_cursor bigint;
    v_taken awa.ready_entries;
    v_seen boolean;
BEGIN
    FOR pass IN 1..3 LOOP
        v_seen := false;
        FOR r IN
            SELECT e.* FROM awa.ready_entries e
              JOIN awa.lane_cursors h
                ON h.queue = e.queue AND h.priority = e.priority AND h.enqueue_shard = e.enqueue_shard
             WHERE e.job_id = p_job_id AND e.lane_seq >= h.claim_seq AND (p_queue IS NULL OR e.queue = p_queue)
        LOOP
            v_seen := true;
            PERFORM 1 FROM awa.queue_claim_heads h
             WHERE h.queue = r.queue AND h.priority = r.priority AND h.enqueue_shard = r.enqueue_shard
               FOR UPDATE;
            CONTINUE WHEN NOT FOUND;
            PERFORM awa._heads_locked(r.queue);
            v_cursor := awa._lane_cursor(r.queue, r.priority, r.enqueue_shard);
            CONTINUE WHEN v_cursor IS NULL;
            -- Claimed since this transaction's snapshot: at READ COMMITTED the caller's next
            -- statement sees the attempt; an older snapshot never would (1.0 raised 40001
            -- here too, when the claim updated the head).
            IF r.lane_seq < v_cursor
               AND pg_catalog.current_setting('transaction_isolation') IN ('repeatable read', 'serializable') THEN
                RAISE EXCEPTION USING ERRCODE = '40001',
                    MESSAGE = 'could not serialize access: the job was claimed after this transaction''s snapshot',
                    DETAIL = format('Job %s.', p_job_id),
                    HINT = 'Retry the transaction, or run it at READ COMMITTED.';
            END IF;
            CONTINUE WHEN r.lane_seq < v_cursor;
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
REVOKE ALL ON FUNCTION awa._take_unclaimed_ready(bigint, text) FROM PUBLIC;
COMMENT ON FUNCTION awa._take_unclaimed_ready(bigint, text) IS 'Internal: remove a job''s unclaimed ready row under its lane''s claim-head lock.';

-- Exact counts of one queue by state (available = ready rows at or after their lane's cursor).
CREATE OR REPLACE FUNCTION awa.queue_counts_exact(p_queue text,
    OUT available bigint, OUT scheduled bigint, OUT retryable bigint, OUT running bigint,
    OUT completed bigint, OUT failed bigint, OUT cancelled bigint, OUT dlq bigint)
    LANGUAGE plpgsql STABLE
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp SET jit = off
AS $$
BEGIN
    PERFORM awa._check_queue(p_queue, 'p_queue');
    -- Each lane's cursor read once (MATERIALIZED): inlined, the planner read it again for
    -- every waiting row (four buffers a row, more while the lane's claim marks are many).
    WITH cursors AS MATERIALIZED (
        SELECT h.priority, h.enqueue_shard, h.claim_seq FROM awa.lane_cursors h WHERE h.queue = p_queue)
    SELECT count(*) INTO available
      FROM cursors h
      JOIN awa.ready_entries r
        ON r.queue = p_queue AND r.priority = h.priority AND r.enqueue_shard = h.enqueue_shard
       AND r.lane_seq >= h.claim_seq;
    SELECT count(*) FILTER (WHERE j.state = 'scheduled'), count(*) FILTER (WHERE j.state = 'retryable')
      INTO scheduled, retryable
      FROM awa.deferred_jobs j WHERE j.queue = p_queue;
    SELECT (SELECT count(*) FROM awa._open_receipts c WHERE c.queue = p_queue)
         + (SELECT count(*) FROM awa.leases l
             WHERE l.queue = p_queue AND l.state IN ('running', 'waiting_external'))
      INTO running;
    SELECT count(*) FILTER (WHERE d.state = 'completed'), count(*) FILTER (WHERE d.state = 'failed'),
           count(*) FILTER (WHERE d.state = 'cancelled')
      INTO completed, failed, cancelled
      FROM awa.done_entries d WHERE d.queue = p_queue;
    completed := completed + (SELECT coalesce(sum(cardinality(b.lane_offsets)), 0)
                                FROM awa.completion_batches b WHERE b.queue = p_queue);
    SELECT count(*) INTO dlq FROM awa.dlq_entries e WHERE e.queue = p_queue;
END
$$;

-- One row per lane: enqueue and claim cursors, their distance, the waiting rows and the
-- oldest waiting run_at, and whether the shard is outside the current width (draining).
-- One server (and a Citus install before awa.citus_setup()): every lane, in one statement.
-- On a Citus cluster, once distributed: the lanes of every worker's queues, each worker's
-- rows read queue by queue on its own shards (awa._citus_local_shard_lag_rows) and gathered
-- on the coordinator as awa.queues gathers its rows; on a worker, its own queues' lanes
-- (docs/scale-out.md). A worker that does not answer fails the call (58000): a view that
-- silently left out a worker's lanes would under-report the lag.
CREATE OR REPLACE FUNCTION awa._shard_lag()
    RETURNS TABLE (queue text, priority smallint, enqueue_shard smallint, next_seq bigint,
                   claim_seq bigint, lag bigint, waiting bigint, oldest_run_at timestamptz,
                   enqueue_shards smallint, draining boolean)
    LANGUAGE plpgsql STABLE
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_group integer := awa._citus_group();
BEGIN
    IF v_group IS NULL THEN
        RETURN QUERY
        SELECT e.queue, e.priority, e.enqueue_shard, n.next_seq, h.claim_seq, n.next_seq - h.claim_seq,
               w.waiting, w.oldest_run_at, coalesce(m.enqueue_shards, 1::smallint),
               e.enqueue_shard >= coalesce(m.enqueue_shards, 1::smallint)
          FROM awa.queue_enqueue_heads e
          JOIN awa.lane_cursors h
            ON h.queue = e.queue AND h.priority = e.priority AND h.enqueue_shard = e.enqueue_shard
          LEFT JOIN awa.queue_meta m ON m.queue = e.queue
         CROSS JOIN LATERAL (SELECT awa._lane_next_seq(e.seq_name) AS next_seq) n
         CROSS JOIN LATERAL (
            SELECT count(*) AS waiting, min(r.run_at) AS oldest_run_at
              FROM awa.ready_entries r
             WHERE r.queue = e.queue AND r.priority = e.priority AND r.enqueue_shard = e.enqueue_shard
               AND r.lane_seq >= h.claim_seq) w;
        RETURN;
    END IF;
    RETURN QUERY
    SELECT t.* FROM jsonb_to_recordset(awa._citus_gathered_rows('awa.shard_lag', '_citus_local_shard_lag_rows')) AS t(
        queue text, priority smallint, enqueue_shard smallint, next_seq bigint,
        claim_seq bigint, lag bigint, waiting bigint, oldest_run_at timestamptz,
        enqueue_shards smallint, draining boolean)
     ORDER BY t.queue, t.priority, t.enqueue_shard;
END
$$;

-- Counters derived from the tables of one queue: enqueued = lane positions handed out
-- (next_seq - 1), claimed = positions passed by claim (claim_seq - 1), both including gaps;
-- completed and failed = retained done rows and completion batches. queue = $n on every
-- table, so on a Citus worker the queue's own shards answer it.
CREATE FUNCTION awa._shard_stats_of(p_queue text)
    RETURNS TABLE (queue text, enqueue_shard smallint, enqueued bigint, claimed bigint,
                   completed bigint, failed bigint)
    LANGUAGE plpgsql STABLE
    SET search_path = pg_catalog, pg_temp SET plan_cache_mode = force_custom_plan
AS $$
BEGIN
    RETURN QUERY
    SELECT p_queue, l.enqueue_shard, l.enqueued, l.claimed, coalesce(f.completed, 0)::bigint,
           coalesce(f.failed, 0)::bigint
      FROM (SELECT e.enqueue_shard, sum(awa._lane_next_seq(e.seq_name) - 1)::bigint AS enqueued,
                   sum(h.claim_seq - 1)::bigint AS claimed
              FROM awa.queue_enqueue_heads e
              JOIN awa.lane_cursors h
                ON h.queue = e.queue AND h.priority = e.priority AND h.enqueue_shard = e.enqueue_shard
               AND h.queue = p_queue
             WHERE e.queue = p_queue
             GROUP BY e.enqueue_shard) l
      LEFT JOIN (
            SELECT t.enqueue_shard, sum(t.completed) AS completed, sum(t.failed) AS failed
              FROM (SELECT d.enqueue_shard, count(*) FILTER (WHERE d.state = 'completed') AS completed,
                           count(*) FILTER (WHERE d.state = 'failed') AS failed
                      FROM awa.done_entries d
                     WHERE d.queue = p_queue AND d.lane_seq > 0
                     GROUP BY d.enqueue_shard
                    UNION ALL
                    SELECT b.enqueue_shard, sum(cardinality(b.lane_offsets)), 0
                      FROM awa.completion_batches b
                     WHERE b.queue = p_queue
                     GROUP BY b.enqueue_shard) t
             GROUP BY t.enqueue_shard) f
        ON f.enqueue_shard = l.enqueue_shard;
END
$$;
REVOKE ALL ON FUNCTION awa._shard_stats_of(text) FROM PUBLIC;
COMMENT ON FUNCTION awa._shard_stats_of(text) IS 'Internal: per-shard counters of one queue derived from its tables (no preload).';

-- Counters derived from the tables when the library is not preloaded, every queue with a
-- lane, each read by awa._shard_stats_of.
CREATE OR REPLACE FUNCTION awa._shard_stats_from_tables()
    RETURNS TABLE (queue text, enqueue_shard smallint, enqueued bigint, claimed bigint,
                   completed bigint, failed bigint)
    LANGUAGE sql STABLE
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$
    SELECT s.* FROM (SELECT DISTINCT e.queue FROM awa.queue_enqueue_heads e) q
     CROSS JOIN LATERAL awa._shard_stats_of(q.queue) s
$$;
REVOKE ALL ON FUNCTION awa._shard_stats_from_tables() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION awa._shard_stats_from_tables() TO awa_admin, pg_monitor;
COMMENT ON FUNCTION awa._shard_stats_from_tables() IS 'Internal: per-shard counters derived from the tables (no preload).';

-- The rows of the awa.shard_stats view: this server's shared-memory counters when preloaded,
-- else derived from the tables. On a Citus coordinator, every worker's rows, gathered as
-- awa.queues gathers its rows (the calls of a queue run, delegated, on its worker, and count
-- there); on a worker, its own. A worker that does not answer fails the view (58000).
CREATE FUNCTION awa._shard_stats_rows()
    RETURNS TABLE (queue text, enqueue_shard smallint, enqueued bigint, claimed bigint,
                   completed bigint, failed bigint, since timestamptz, source text)
    LANGUAGE plpgsql STABLE
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF awa._citus_group() IS NOT NULL THEN
        RETURN QUERY
        SELECT t.* FROM jsonb_to_recordset(awa._citus_gathered_rows('awa.shard_stats', '_citus_local_shard_stats_rows')) AS t(
            queue text, enqueue_shard smallint, enqueued bigint, claimed bigint,
            completed bigint, failed bigint, since timestamptz, source text);
    ELSIF awa._stats_preloaded() THEN
        RETURN QUERY
        SELECT s.queue, s.enqueue_shard, s.enqueued, s.claimed, s.completed, s.failed, s.since, 'shared_memory'::text
          FROM awa._shard_stats() s;
    ELSE
        RETURN QUERY
        SELECT t.queue, t.enqueue_shard, t.enqueued, t.claimed, t.completed, t.failed, NULL::timestamptz, 'tables'::text
          FROM awa._shard_stats_from_tables() t;
    END IF;
END
$$;
REVOKE ALL ON FUNCTION awa._shard_stats_rows() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION awa._shard_stats_rows() TO awa_admin, pg_monitor;
COMMENT ON FUNCTION awa._shard_stats_rows() IS 'Internal: the rows of the awa.shard_stats view (security definer; gathered from the workers on a Citus coordinator).';

-- Fold claim marks into the heads, in two steps that never hold a head while deleting:
--   1. delete up to p_limit marks that their lane's head has passed (nothing reads a mark
--      below its head's cursor, so no head is locked for this; a mark level with its head
--      stays until a further one exists, so a claim clearing the hint of its lane's latest
--      mark never meets a fold deleting it);
--   2. for every lane whose latest mark is past its head, and whose head no claim holds
--      (SKIP LOCKED: a claim never waits for this, and a lane skipped now is folded next
--      time), move the head to that mark; its marks are deleted by the next call.
-- A head never moves back. Nothing is done (returns -1) while a transaction of this
-- database (a prepared one included) has held an xid or a snapshot for more than
-- p_defer_secs: rows deleted or updated then stay as dead rows that vacuum cannot remove
-- until it ends, so deleting would free nothing, whereas marks left alone are live rows read
-- by a backward index probe. Returns the number of heads moved.
CREATE FUNCTION awa.fold_claim_marks(p_defer_secs bigint DEFAULT 10, p_limit bigint DEFAULT 10000)
    RETURNS integer
    LANGUAGE plpgsql VOLATILE
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp SET jit = off
AS $$
DECLARE
    v_count integer;
    v_queue text;
BEGIN
    PERFORM awa._require(p_defer_secs IS NULL OR p_limit IS NULL, 'p_defer_secs and p_limit');
    PERFORM awa._check_arg(p_defer_secs >= 0 AND p_limit >= 1,
                           'p_defer_secs must not be negative and p_limit must be at least 1');
    p_defer_secs := least(p_defer_secs, 2147483647);  -- longer than any transaction
    PERFORM awa._require_read_committed('fold_claim_marks');
    IF EXISTS (SELECT 1 FROM pg_catalog.pg_stat_activity a
                WHERE a.datid = (SELECT d.oid FROM pg_catalog.pg_database d
                                  WHERE d.datname = pg_catalog.current_database())
                  AND a.pid <> pg_catalog.pg_backend_pid()
                  AND a.backend_type <> 'autovacuum worker'
                  AND (a.backend_xmin IS NOT NULL OR a.backend_xid IS NOT NULL)
                  AND a.xact_start < pg_catalog.clock_timestamp() - pg_catalog.make_interval(secs => p_defer_secs))
       OR EXISTS (SELECT 1 FROM pg_catalog.pg_prepared_xacts p
                   WHERE p.database = pg_catalog.current_database()
                     AND p.prepared < pg_catalog.clock_timestamp() - pg_catalog.make_interval(secs => p_defer_secs)) THEN
        RETURN -1;
    END IF;
    -- On a Citus cluster: this node's queues, one at a time (docs/scale-out.md, "Maintenance").
    IF awa._citus_group() IS NOT NULL THEN
        v_count := 0;
        FOR v_queue IN SELECT q FROM awa._citus_local_queues() q LOOP
            v_count := v_count + awa._fold_claim_marks_queue(v_queue, p_limit);
        END LOOP;
        RETURN v_count;
    END IF;
    DELETE FROM awa.claim_marks k
     WHERE k.ctid = ANY (ARRAY(
         SELECT m.ctid FROM awa.claim_marks m
           JOIN awa.queue_claim_heads h
             ON h.queue = m.queue AND h.priority = m.priority AND h.enqueue_shard = m.enqueue_shard
          WHERE m.claim_seq < h.claim_seq
          LIMIT p_limit));
    WITH lanes AS (
        SELECT h.queue, h.priority, h.enqueue_shard, m.claim_seq, m.head_run_at
          FROM awa.queue_claim_heads h
         CROSS JOIN LATERAL (
             SELECT k.claim_seq, k.head_run_at FROM awa.claim_marks k
              WHERE k.queue = h.queue AND k.priority = h.priority AND k.enqueue_shard = h.enqueue_shard
              ORDER BY k.claim_seq DESC LIMIT 1) m
         WHERE m.claim_seq > h.claim_seq
         ORDER BY h.queue, h.priority, h.enqueue_shard
           FOR UPDATE OF h SKIP LOCKED),
    moved AS (
        UPDATE awa.queue_claim_heads h SET claim_seq = l.claim_seq, head_run_at = l.head_run_at
          FROM lanes l
         WHERE h.queue = l.queue AND h.priority = l.priority AND h.enqueue_shard = l.enqueue_shard
           AND h.claim_seq < l.claim_seq
        RETURNING 1)
    SELECT count(*) INTO v_count FROM moved;
    IF v_count > 0 THEN
        PERFORM awa._heads_locked(NULL);
    END IF;
    RETURN v_count;
END
$$;
REVOKE ALL ON FUNCTION awa.fold_claim_marks(bigint, bigint) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION awa.fold_claim_marks(bigint, bigint) TO awa_admin;
COMMENT ON FUNCTION awa.fold_claim_marks(bigint, bigint) IS
    'Delete up to p_limit claim marks their head has passed, then move each head no claim holds to its lane''s latest mark; -1 while a long transaction holds back vacuum. Role: awa_admin.';
COMMENT ON TABLE awa.queue_claim_heads IS
    'One row per lane, locked by a claim of the lane: the folded claim cursor claim_seq and its head_run_at hint (awa.lane_cursors adds the claim marks).';

-- The worker entry points whose statements differ between the catalogs name their 1.1
-- symbols (src/catalog_version.hpp); the 1.0 symbols stay in the library for a 1.0
-- catalog only (src/compat_1_0.cpp). Replacing keeps the grants and comments.
CREATE OR REPLACE FUNCTION awa.claim_ready_runtime(
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
    AS 'MODULE_PATHNAME', 'awa_claim_ready_runtime_1_1'
    LANGUAGE C VOLATILE PARALLEL UNSAFE ROWS 10
    SECURITY DEFINER
    SET plan_cache_mode = force_generic_plan SET enable_seqscan = off;

-- complete_jobs gains p_results (a new signature: the 1.0 function goes).
DROP FUNCTION awa.complete_jobs(bigint[], bigint[]);
-- Complete running attempts, storing one result per pair when p_results is given (a NULL
-- element: no result); returns the (job_id, run_lease) pairs this call completed.
CREATE FUNCTION awa.complete_jobs(p_job_ids bigint[], p_run_leases bigint[], p_results jsonb[] DEFAULT NULL,
                                  p_queue text DEFAULT NULL)
    RETURNS TABLE (job_id bigint, run_lease bigint)
    AS 'MODULE_PATHNAME', 'awa_complete_jobs_1_1'
    LANGUAGE C VOLATILE PARALLEL UNSAFE ROWS 10
    SECURITY DEFINER
    SET plan_cache_mode = force_generic_plan SET enable_seqscan = off;
REVOKE ALL ON FUNCTION awa.complete_jobs(bigint[], bigint[], jsonb[], text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION awa.complete_jobs(bigint[], bigint[], jsonb[], text) TO awa_worker, awa_admin;
COMMENT ON FUNCTION awa.complete_jobs(bigint[], bigint[], jsonb[], text) IS 'Complete open attempts (job_id, run_lease), with their results when given; returns the pairs this call completed. Role: awa_worker, awa_admin.';

-- Periodic jobs (docs/api.md, "Periodic jobs"): one row per named schedule, managed by
-- awa.schedule() and friends and read through the awa.schedules view. The maintenance step
-- awa.run_schedules() enqueues the job of a due tick and moves next_run_at in the same
-- transaction, under this row's lock: the row is the fence that makes one job per tick.
-- A configuration table: pg_dump keeps its rows. Its key begins with the queue so that on a
-- Citus cluster it is distributed with the queue's other rows (a tick's enqueue and its
-- update are one worker's transaction); a name is unique install-wide through
-- cron_schedules_name on one server and through awa.schedule's lock on a cluster
-- (docs/scale-out.md, "Periodic jobs").
CREATE TABLE awa.cron_schedules (
    name text NOT NULL,
    cron text NOT NULL,
    timezone text NOT NULL,
    kind text NOT NULL,
    queue text NOT NULL,
    args jsonb NOT NULL,
    priority smallint NOT NULL,
    max_attempts smallint NOT NULL,
    metadata jsonb NOT NULL,
    tags text[] NOT NULL,
    paused boolean NOT NULL DEFAULT false,
    next_run_at timestamptz,
    last_run_at timestamptz,
    last_enqueued_at timestamptz,
    last_job_id bigint,
    ticks_reset_at timestamptz,
    created_at timestamptz NOT NULL DEFAULT pg_catalog.clock_timestamp(),
    updated_at timestamptz NOT NULL DEFAULT pg_catalog.clock_timestamp(),
    CONSTRAINT cron_schedules_pkey PRIMARY KEY (queue, name),
    CONSTRAINT cron_schedules_name_length CHECK (length(name) BETWEEN 1 AND 200));
CREATE UNIQUE INDEX cron_schedules_name ON awa.cron_schedules (name);
CREATE INDEX cron_schedules_due ON awa.cron_schedules (next_run_at) WHERE NOT paused;
SELECT pg_catalog.pg_extension_config_dump('awa.cron_schedules', '');
-- pg_monitor as for awa.schedules, which shows every column: on a Citus cluster the view's
-- reads of the shards are checked against the caller's own privileges.
GRANT SELECT ON awa.cron_schedules TO awa_admin, pg_monitor;
COMMENT ON TABLE awa.cron_schedules IS 'Periodic jobs: one row per schedule (awa.schedule); the maintenance step enqueues their ticks.';
COMMENT ON COLUMN awa.cron_schedules.cron IS 'Five cron fields, an @alias or ''N seconds'' (1..59).';
COMMENT ON COLUMN awa.cron_schedules.timezone IS 'Time zone of the cron fields (a name of pg_timezone_names).';
COMMENT ON COLUMN awa.cron_schedules.next_run_at IS 'The next tick to enqueue; stale while paused (resume computes it again).';
COMMENT ON COLUMN awa.cron_schedules.last_run_at IS 'The tick (run_at) of the last job enqueued.';
COMMENT ON COLUMN awa.cron_schedules.last_enqueued_at IS 'When the last job was enqueued.';
COMMENT ON COLUMN awa.cron_schedules.last_job_id IS 'Id of the last job enqueued.';
COMMENT ON COLUMN awa.cron_schedules.ticks_reset_at IS 'When resume_schedule, or a change of cron or time zone, last set next_run_at to the first tick after that moment (NULL: never); the ticks from there on are owed as after a job enqueued then.';

-- Periodic jobs (docs/api.md, "Periodic jobs"): schedules in awa.cron_schedules, managed by
-- awa_admin; the maintenance step awa.run_schedules() enqueues one job per due tick. Cron
-- expressions are parsed and their ticks computed in C (src/cron.cpp, src/cron_sql.cpp).

-- The first tick of a cron expression in a time zone strictly after p_after; NULL when it
-- matches no date (none in the 400 years after p_after: then none ever) or the tick lies
-- past the last timestamp. 22023 for a bad expression (naming its field) or zone.
CREATE FUNCTION awa._cron_next(p_cron text, p_timezone text, p_after timestamptz)
    RETURNS timestamptz
    AS 'MODULE_PATHNAME', 'awa_cron_next'
    LANGUAGE C STABLE STRICT PARALLEL SAFE
    SET search_path = pg_catalog, pg_temp;
REVOKE ALL ON FUNCTION awa._cron_next(text, text, timestamptz) FROM PUBLIC;
COMMENT ON FUNCTION awa._cron_next(text, text, timestamptz) IS 'Internal: the first tick of a cron expression in a time zone after an instant.';

-- The latest tick in [p_from, p_until], or p_from when none lies after it: after downtime,
-- the one tick a schedule enqueues.
CREATE FUNCTION awa._cron_latest(p_cron text, p_timezone text, p_from timestamptz, p_until timestamptz)
    RETURNS timestamptz
    AS 'MODULE_PATHNAME', 'awa_cron_latest'
    LANGUAGE C STABLE STRICT PARALLEL SAFE
    SET search_path = pg_catalog, pg_temp;
REVOKE ALL ON FUNCTION awa._cron_latest(text, text, timestamptz, timestamptz) FROM PUBLIC;
COMMENT ON FUNCTION awa._cron_latest(text, text, timestamptz, timestamptz) IS 'Internal: the latest tick of a cron expression in a time zone within a stretch of time.';

-- Where and how periodic jobs are managed (awa.schedule and its friends): anywhere on one
-- server, where the unique index on the name keeps names unique and nothing is locked here;
-- on a Citus cluster on the coordinator only, at READ COMMITTED, since there a name is kept
-- unique install-wide by the lock taken here (the table is distributed by queue and cannot
-- hold a unique index on the name alone; docs/scale-out.md, "Periodic jobs"). The lock
-- serialises the admin calls with each other, not with the ticks, which run on the workers
-- (SHARE UPDATE EXCLUSIVE: row locks and updates do not conflict with it). 0A000 otherwise.
CREATE FUNCTION awa._begin_schedule_admin(p_call text) RETURNS void
    LANGUAGE plpgsql VOLATILE
    SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_group integer := awa._citus_group();
BEGIN
    IF v_group <> 0 THEN
        RAISE EXCEPTION 'awa.% manages periodic jobs on the Citus coordinator only', p_call
            USING ERRCODE = 'feature_not_supported',
                  DETAIL = format('This node is a Citus worker (group %s).', v_group),
                  HINT = 'Connect to the coordinator: it keeps schedule names unique across the workers.';
    END IF;
    IF v_group = 0 THEN
        IF current_setting('transaction_isolation') <> 'read committed' THEN
            RAISE EXCEPTION 'awa.% must run at READ COMMITTED isolation on a Citus cluster', p_call
                USING ERRCODE = 'feature_not_supported',
                      HINT = 'Call it in a transaction of its own at READ COMMITTED: the test that a schedule name is free must see every committed schedule.';
        END IF;
        LOCK TABLE awa.cron_schedules IN SHARE UPDATE EXCLUSIVE MODE;
    END IF;
END
$$;
REVOKE ALL ON FUNCTION awa._begin_schedule_admin(text) FROM PUBLIC;
COMMENT ON FUNCTION awa._begin_schedule_admin(text) IS 'Internal: refuse a schedule admin call on a Citus worker (or above READ COMMITTED on a cluster); on a cluster, serialise the admin calls.';

-- The queue of the schedule p_name, with its row locked (FOR UPDATE) by this transaction;
-- NULL when no schedule has that name. A schedule moved to another queue while this call
-- waited for its row is looked up again (at REPEATABLE READ or SERIALIZABLE the lock itself
-- then fails with 40001). Every statement names the row by queue and name (on a Citus
-- cluster, one shard's).
CREATE FUNCTION awa._lock_schedule(p_name text) RETURNS text
    LANGUAGE plpgsql VOLATILE
    SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_queue text;
BEGIN
    FOR v_try IN 1..100 LOOP
        SELECT s.queue INTO v_queue FROM awa.cron_schedules s WHERE s.name = p_name;
        IF NOT FOUND THEN
            RETURN NULL;
        END IF;
        PERFORM FROM awa.cron_schedules s WHERE s.queue = v_queue AND s.name = p_name FOR UPDATE;
        IF FOUND THEN
            RETURN v_queue;
        END IF;
    END LOOP;
    RAISE EXCEPTION 'schedule "%" kept moving under this call', p_name
        USING ERRCODE = 'serialization_failure', HINT = 'Retry the call.';
END
$$;
REVOKE ALL ON FUNCTION awa._lock_schedule(text) FROM PUBLIC;
COMMENT ON FUNCTION awa._lock_schedule(text) IS 'Internal: lock the row of a schedule by name and return its queue (NULL when unknown).';

-- Create or replace the schedule p_name: a job of p_kind in p_queue (with the job
-- attributes of awa.insert_job_compat) at every tick of p_cron in p_timezone. Every
-- argument is checked before anything is written. Replacing keeps the paused flag and the
-- last enqueue; it keeps the next tick when cron and time zone are unchanged, else the next
-- tick is the first after now; a new queue moves the row (on a cluster, to that queue's
-- worker). The kept values are read under the row's lock (awa._lock_schedule), and "now" is
-- read after it: a replacement that waited for a pass enqueueing the schedule's tick keeps
-- the tick the pass stored, and takes none from before its wait. A schedule of the same name
-- created meanwhile by another call is met by the insert's ON CONFLICT and the call starts
-- again, as an upsert would; at REPEATABLE READ or SERIALIZABLE that conflict is a
-- serialization failure (40001). Returns the next tick (NULL while paused).
CREATE FUNCTION awa.schedule(
    p_name text,
    p_cron text,
    p_kind text,
    p_queue text DEFAULT 'default',
    p_args jsonb DEFAULT '{}',
    p_timezone text DEFAULT 'UTC',
    p_priority bigint DEFAULT 2,
    p_max_attempts bigint DEFAULT 25,
    p_metadata jsonb DEFAULT '{}',
    p_tags text[] DEFAULT '{}')
    RETURNS timestamptz
    LANGUAGE plpgsql VOLATILE
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp SET jit = off
AS $$
DECLARE
    v_now timestamptz;
    v_next timestamptz;
    v_old_queue text;
    v_same_ticks boolean;
    v_old_next timestamptz;
    v_paused boolean;
    v_last_run timestamptz;
    v_last_enqueued timestamptz;
    v_last_job bigint;
    v_created timestamptz;
    v_ticks_reset timestamptz;
BEGIN
    PERFORM awa._check_queue(p_name, 'p_name');
    PERFORM awa._require(p_cron IS NULL, 'p_cron');
    PERFORM awa._require(p_kind IS NULL, 'p_kind');
    PERFORM awa._check_queue(p_queue, 'p_queue');
    PERFORM awa._require(p_args IS NULL, 'p_args');
    PERFORM awa._require(p_timezone IS NULL, 'p_timezone');
    PERFORM awa._require(p_priority IS NULL, 'p_priority');
    PERFORM awa._require(p_max_attempts IS NULL, 'p_max_attempts');
    PERFORM awa._require(p_metadata IS NULL, 'p_metadata');
    PERFORM awa._require(p_tags IS NULL, 'p_tags');
    IF length(p_kind) NOT BETWEEN 1 AND awa._limit('max_kind_chars') THEN
        RAISE EXCEPTION 'p_kind must be 1 to % characters long', awa._limit('max_kind_chars')
            USING ERRCODE = '23514', DETAIL = format('The value has %s characters.', length(p_kind));
    END IF;
    PERFORM awa._check_priority(p_priority, 'p_priority');
    PERFORM awa._check_between(p_max_attempts, 1, awa._limit('max_attempts'), 'p_max_attempts', '23514');
    PERFORM awa._check_arg(jsonb_typeof(p_metadata) = 'object', 'p_metadata must be a JSON object');
    PERFORM awa._check_arg(coalesce(array_ndims(p_tags), 1) = 1, 'p_tags must be a one-dimensional array');
    IF cardinality(p_tags) > awa._limit('max_tags') THEN
        RAISE EXCEPTION 'p_tags must hold at most % tags', awa._limit('max_tags')
            USING ERRCODE = '23514', DETAIL = format('The array has %s elements.', cardinality(p_tags));
    END IF;
    IF array_position(p_tags, NULL) IS NOT NULL THEN
        RAISE EXCEPTION 'p_tags must not contain nulls' USING ERRCODE = '22004';
    END IF;
    -- 22023 for a bad expression (naming its field) or an unknown time zone.
    IF awa._cron_next(p_cron, p_timezone, clock_timestamp()) IS NULL THEN
        RAISE EXCEPTION 'cron expression "%" matches no date', p_cron USING ERRCODE = '22023',
            HINT = 'Check the day-of-month and month fields: February has no day 30 or 31.';
    END IF;
    PERFORM awa._begin_schedule_admin('schedule');
    FOR v_try IN 1..100 LOOP
        v_old_queue := awa._lock_schedule(p_name);
        v_same_ticks := NULL; v_old_next := NULL; v_paused := NULL; v_last_run := NULL;
        v_last_enqueued := NULL; v_last_job := NULL; v_created := NULL; v_ticks_reset := NULL;
        IF v_old_queue IS NOT NULL THEN
            SELECT s.cron = p_cron AND s.timezone = p_timezone, s.next_run_at, s.paused, s.last_run_at,
                   s.last_enqueued_at, s.last_job_id, s.created_at, s.ticks_reset_at
              INTO v_same_ticks, v_old_next, v_paused, v_last_run, v_last_enqueued, v_last_job, v_created,
                   v_ticks_reset
              FROM awa.cron_schedules s WHERE s.queue = v_old_queue AND s.name = p_name;
        END IF;
        v_now := clock_timestamp();
        v_next := CASE WHEN v_same_ticks THEN v_old_next ELSE awa._cron_next(p_cron, p_timezone, v_now) END;
        -- New ticks of a schedule that had others are owed from now, as after a resume.
        v_ticks_reset := CASE WHEN v_old_queue IS NULL OR v_same_ticks THEN v_ticks_reset ELSE v_now END;
        IF v_old_queue = p_queue THEN
            UPDATE awa.cron_schedules s
               SET cron = p_cron, timezone = p_timezone, kind = p_kind, args = p_args, priority = p_priority,
                   max_attempts = p_max_attempts, metadata = p_metadata, tags = p_tags, next_run_at = v_next,
                   ticks_reset_at = v_ticks_reset, updated_at = v_now
             WHERE s.queue = p_queue AND s.name = p_name;
            RETURN CASE WHEN v_paused THEN NULL ELSE v_next END;
        END IF;
        IF v_old_queue IS NOT NULL THEN
            DELETE FROM awa.cron_schedules s WHERE s.queue = v_old_queue AND s.name = p_name;
        END IF;
        INSERT INTO awa.cron_schedules
               (name, cron, timezone, kind, queue, args, priority, max_attempts, metadata, tags, paused,
                next_run_at, last_run_at, last_enqueued_at, last_job_id, ticks_reset_at, created_at, updated_at)
        VALUES (p_name, p_cron, p_timezone, p_kind, p_queue, p_args, p_priority, p_max_attempts, p_metadata,
                p_tags, coalesce(v_paused, false), v_next, v_last_run, v_last_enqueued, v_last_job, v_ticks_reset,
                coalesce(v_created, v_now), v_now)
        ON CONFLICT DO NOTHING;
        IF FOUND THEN
            RETURN CASE WHEN v_paused THEN NULL ELSE v_next END;
        END IF;
        -- Another call created the name meanwhile (it was free when looked up): start again.
    END LOOP;
    RAISE EXCEPTION 'schedule "%" kept changing under this call', p_name
        USING ERRCODE = 'serialization_failure', HINT = 'Retry the call.';
END
$$;
REVOKE ALL ON FUNCTION awa.schedule(text, text, text, text, jsonb, text, bigint, bigint, jsonb, text[]) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION awa.schedule(text, text, text, text, jsonb, text, bigint, bigint, jsonb, text[]) TO awa_admin;
COMMENT ON FUNCTION awa.schedule(text, text, text, text, jsonb, text, bigint, bigint, jsonb, text[])
    IS 'Create or replace a periodic job: a job of p_kind at every tick of p_cron in p_timezone; returns the next tick. Role: awa_admin.';

-- Remove a schedule; jobs it enqueued stay. Returns whether it existed.
CREATE FUNCTION awa.unschedule(p_name text)
    RETURNS boolean
    LANGUAGE plpgsql VOLATILE
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp SET jit = off
AS $$
DECLARE
    v_queue text;
BEGIN
    PERFORM awa._require(p_name IS NULL, 'p_name');
    PERFORM awa._begin_schedule_admin('unschedule');
    v_queue := awa._lock_schedule(p_name);
    IF v_queue IS NULL THEN
        RETURN false;
    END IF;
    DELETE FROM awa.cron_schedules s WHERE s.queue = v_queue AND s.name = p_name;
    RETURN true;
END
$$;
REVOKE ALL ON FUNCTION awa.unschedule(text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION awa.unschedule(text) TO awa_admin;
COMMENT ON FUNCTION awa.unschedule(text) IS 'Remove a periodic job (its enqueued jobs stay); returns whether it existed. Role: awa_admin.';

-- Stop enqueueing a schedule's ticks. Returns whether the schedule exists.
CREATE FUNCTION awa.pause_schedule(p_name text)
    RETURNS boolean
    LANGUAGE plpgsql VOLATILE
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp SET jit = off
AS $$
DECLARE
    v_queue text;
    v_now timestamptz;
BEGIN
    PERFORM awa._require(p_name IS NULL, 'p_name');
    PERFORM awa._begin_schedule_admin('pause_schedule');
    v_queue := awa._lock_schedule(p_name);
    IF v_queue IS NULL THEN
        RETURN false;
    END IF;
    v_now := clock_timestamp();
    UPDATE awa.cron_schedules s SET paused = true, updated_at = v_now
     WHERE s.queue = v_queue AND s.name = p_name AND NOT s.paused;
    RETURN true;
END
$$;
REVOKE ALL ON FUNCTION awa.pause_schedule(text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION awa.pause_schedule(text) TO awa_admin;
COMMENT ON FUNCTION awa.pause_schedule(text) IS 'Stop enqueueing a periodic job''s ticks; returns whether it exists. Role: awa_admin.';

-- Enqueue a paused schedule's ticks again, from the first tick after now (read once the
-- schedule's row is locked): ticks that fell while it was paused are not enqueued. Returns
-- whether the schedule exists.
CREATE FUNCTION awa.resume_schedule(p_name text)
    RETURNS boolean
    LANGUAGE plpgsql VOLATILE
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp SET jit = off
AS $$
DECLARE
    v_queue text;
    v_cron text;
    v_timezone text;
    v_now timestamptz;
BEGIN
    PERFORM awa._require(p_name IS NULL, 'p_name');
    PERFORM awa._begin_schedule_admin('resume_schedule');
    v_queue := awa._lock_schedule(p_name);
    IF v_queue IS NULL THEN
        RETURN false;
    END IF;
    -- (Read first: Citus computes no function of a column in an UPDATE.)
    SELECT s.cron, s.timezone INTO v_cron, v_timezone
      FROM awa.cron_schedules s WHERE s.queue = v_queue AND s.name = p_name;
    v_now := clock_timestamp();
    UPDATE awa.cron_schedules s
       SET paused = false, next_run_at = awa._cron_next(v_cron, v_timezone, v_now), ticks_reset_at = v_now,
           updated_at = v_now
     WHERE s.queue = v_queue AND s.name = p_name AND s.paused;
    RETURN true;
END
$$;
REVOKE ALL ON FUNCTION awa.resume_schedule(text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION awa.resume_schedule(text) TO awa_admin;
COMMENT ON FUNCTION awa.resume_schedule(text) IS 'Enqueue a paused periodic job''s ticks again, from the next one after now; returns whether it exists. Role: awa_admin.';

-- The schedules whose next tick has come by p_now, oldest tick first (the caller stops once
-- it has run as many as it may: rows it skips as locked do not count): on one server all of
-- them; on a Citus cluster those in the shards of awa.cron_schedules placed on
-- this node (the schedules of the queues it holds; none on a coordinator without shards),
-- read from those shards themselves, as awa._citus_local_queues reads its shards.
CREATE FUNCTION awa._due_schedules(p_now timestamptz, p_limit bigint DEFAULT NULL,
                                   p_after timestamptz DEFAULT '-infinity')
    RETURNS TABLE (queue text, name text, next_run_at timestamptz)
    LANGUAGE plpgsql VOLATILE
    SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_shards text[];
BEGIN
    IF awa._citus_group() IS NULL THEN
        RETURN QUERY
            SELECT c.queue, c.name, c.next_run_at FROM awa.cron_schedules c
             WHERE NOT c.paused AND c.next_run_at <= p_now AND c.next_run_at > p_after
             ORDER BY c.next_run_at, c.name
             LIMIT p_limit;
        RETURN;
    END IF;
    v_shards := awa._citus_local_shard_names(ARRAY['awa.cron_schedules']::regclass[]);
    IF v_shards IS NULL THEN
        RETURN;
    END IF;
    RETURN QUERY EXECUTE
        'SELECT u.queue, u.name, u.next_run_at FROM (' ||
        (SELECT string_agg(format(
            'SELECT c.queue, c.name, c.next_run_at FROM %s c WHERE NOT c.paused AND c.next_run_at <= $1 AND c.next_run_at > $3', sh),
            ' UNION ALL ')
           FROM unnest(v_shards) sh) ||
        ') u ORDER BY u.next_run_at, u.name LIMIT $2'
      USING p_now, p_limit, p_after;
END
$$;
REVOKE ALL ON FUNCTION awa._due_schedules(timestamptz, bigint, timestamptz) FROM PUBLIC;
COMMENT ON FUNCTION awa._due_schedules(timestamptz, bigint, timestamptz) IS 'Internal: the schedules this node runs (all of them on one server, those of its own shards on a Citus cluster) whose tick is in (p_after, p_now], soonest first, at most p_limit (NULL: all).';

-- The soonest tick after p_after of an unpaused schedule this node runs (awa._due_schedules),
-- NULL when none: the background maintenance worker wakes for it between and during its
-- passes (src/worker.cpp), so a tick is enqueued right after it comes rather than at the next
-- pass. p_after is when the worker's last run of the schedules began: a tick at or before
-- it that is still due (its enqueue failed, or more schedules were due than one run takes)
-- waits for the passes and does not hold back the others' wake.
CREATE FUNCTION awa._next_schedule_tick(p_after timestamptz)
    RETURNS timestamptz
    LANGUAGE sql VOLATILE
    SET search_path = pg_catalog, pg_temp
    RETURN (SELECT d.next_run_at FROM awa._due_schedules('infinity', 1, p_after) d);
REVOKE ALL ON FUNCTION awa._next_schedule_tick(timestamptz) FROM PUBLIC;
COMMENT ON FUNCTION awa._next_schedule_tick(timestamptz) IS 'Internal: the next tick after p_after of a schedule this node runs, for the background worker''s wake.';

-- The maintenance step of periodic jobs: for up to p_limit unpaused schedules whose next
-- tick has come, oldest first, enqueue one job per due tick with run_at = the tick and move
-- next_run_at past the last one, in this transaction and under the schedule's row lock
-- (FOR UPDATE SKIP LOCKED): a concurrent pass skips the row, or sees the moved tick once this
-- one commits, so every tick gets at most one job, whatever crashes or concurrent passes.
-- Which due ticks: if the schedule's previous job (or, before its first, its creation) is
-- less than 10 seconds old, the maintenance kept up and the ticks only came while a pass ran
-- late (a 1-second schedule, a pass a little longer than its interval); if its next tick came
-- after the last background pass of the database began (awa._maintenance_served_since: one
-- that ended less than ten minutes ago), the ticks since only waited for the database's turn
-- (more databases than maintenance workers). Either way each gets its job (at most 600, then
-- the latest); otherwise (downtime) only the latest tick that has come.
-- Each schedule runs in a subtransaction: one whose enqueue fails is reported (WARNING) and
-- stays due, and the pass goes on with the others. In lane-lock mode each enqueue keeps its
-- lane locked to the commit, so the pass runs its schedules in lane order (queue bytes, then
-- priority) and waits for a lane only when it comes after every lane the transaction holds
-- (awa_shard.lane_lock_wait = ordered), as batches and promotion take lanes: two passes, or a
-- pass and a producer that takes its lanes in that order, cannot close a cycle. A schedule
-- whose lane is locked and comes before one the pass holds stays due, quietly, for the next.
-- On a Citus cluster each
-- node runs the schedules of the queues whose shards it holds (awa._due_schedules): the
-- schedule's row is on the queue's worker, so a tick is one transaction on that worker.
-- Every statement names the schedule by queue and name. Returns how many jobs it enqueued.
CREATE FUNCTION awa._maintenance_served_since() RETURNS timestamptz
    AS 'MODULE_PATHNAME', 'awa_maintenance_served_since'
    LANGUAGE C VOLATILE PARALLEL SAFE
    SET search_path = pg_catalog, pg_temp;
REVOKE ALL ON FUNCTION awa._maintenance_served_since() FROM PUBLIC;
COMMENT ON FUNCTION awa._maintenance_served_since() IS 'Internal: when the last background pass of this database that has ended began, if it ended less than ten minutes ago (NULL: none; periodic jobs).';

CREATE FUNCTION awa.run_schedules(p_limit bigint DEFAULT 1000)
    RETURNS integer
    LANGUAGE plpgsql VOLATILE
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp SET jit = off SET awa_shard.lane_lock_wait = ordered
AS $$
DECLARE
    v_now timestamptz := clock_timestamp();
    v_served_since timestamptz := awa._maintenance_served_since();
    v_tick timestamptz;
    v_latest timestamptz;
    v_job bigint;
    v_count integer := 0;
    v_ticks integer;
    v_enqueued_at timestamptz;
    v_error text;
    v_sqlstate text;
    v_detail text;
    v_priority smallint;
    v_queues text[] := '{}';
    v_names text[] := '{}';
    v_priorities smallint[] := '{}';
    d record;
    s record;
BEGIN
    PERFORM awa._require(p_limit IS NULL, 'p_limit');
    PERFORM awa._require_at_least(p_limit, 1, 'p_limit');
    PERFORM awa._require_read_committed('run_schedules');
    -- The schedules of this pass: up to p_limit due ones, oldest first, each locked now (one
    -- another transaction holds is passed over and does not count).
    FOR d IN SELECT due.queue, due.name FROM awa._due_schedules(v_now) due LOOP
        EXIT WHEN cardinality(v_names) >= p_limit;
        SELECT c.priority INTO v_priority
          FROM awa.cron_schedules c
         WHERE c.queue = d.queue AND c.name = d.name AND NOT c.paused AND c.next_run_at <= v_now
           FOR UPDATE SKIP LOCKED;
        CONTINUE WHEN NOT FOUND;
        v_queues := v_queues || d.queue;
        v_names := v_names || d.name;
        v_priorities := v_priorities || v_priority;
    END LOOP;
    -- Then run in lane order (queue bytes, priority), the order batches and promotion lock
    -- lanes in, waiting for a lane only after every lane this transaction holds.
    FOR d IN SELECT u.queue, u.name FROM unnest(v_queues, v_names, v_priorities) AS u(queue, name, priority)
              ORDER BY u.queue COLLATE "C", u.priority, u.name COLLATE "C" LOOP
        -- Each schedule in a subtransaction of its own: one whose job cannot be enqueued is
        -- reported and stays due, and does not hold back the others of the pass.
        BEGIN
            SELECT c.name, c.cron, c.timezone, c.kind, c.queue, c.args, c.priority, c.max_attempts,
                   c.metadata, c.tags, c.next_run_at, coalesce(c.last_enqueued_at, c.created_at) AS last_news,
                   c.ticks_reset_at
              INTO s
              FROM awa.cron_schedules c
             WHERE c.queue = d.queue AND c.name = d.name;
            v_latest := awa._cron_latest(s.cron, s.timezone, s.next_run_at, v_now);
            -- Every due tick when the maintenance kept up: the last job (or the schedule's
            -- creation, or the resume or new ticks its next tick follows) less than 10 seconds
            -- ago, or the tick after the start of the database's last background pass.
            v_tick := CASE WHEN s.last_news > v_now - interval '10 seconds' OR s.next_run_at >= v_served_since
                                OR (s.ticks_reset_at > v_now - interval '10 seconds' AND s.next_run_at > s.ticks_reset_at)
                           THEN s.next_run_at ELSE v_latest END;
            v_ticks := 0;
            LOOP
                SELECT j.id INTO v_job
                  FROM awa.insert_job_compat(s.kind, s.queue, s.args, 'available', s.priority, s.max_attempts, v_tick,
                                             s.metadata || jsonb_build_object('awa_schedule', s.name), s.tags) j;
                v_ticks := v_ticks + 1;
                EXIT WHEN v_tick >= v_latest;
                v_tick := CASE WHEN v_ticks < 600 THEN coalesce(awa._cron_next(s.cron, s.timezone, v_tick), v_latest)
                               ELSE v_latest END;
            END LOOP;
            v_enqueued_at := clock_timestamp();
            UPDATE awa.cron_schedules c
               SET next_run_at = awa._cron_next(s.cron, s.timezone, v_tick), last_run_at = v_tick,
                   last_enqueued_at = v_enqueued_at, last_job_id = v_job
             WHERE c.queue = s.queue AND c.name = s.name;
            v_count := v_count + v_ticks;
        EXCEPTION WHEN OTHERS THEN
            GET STACKED DIAGNOSTICS v_error = MESSAGE_TEXT, v_sqlstate = RETURNED_SQLSTATE, v_detail = PG_EXCEPTION_DETAIL;
            -- Its lane is locked and comes before one this pass holds: due still, for the next pass.
            CONTINUE WHEN v_sqlstate = '55P03' AND v_detail LIKE 'awa\_shard.lane\_lock\_wait is %';
            RAISE WARNING 'awa.run_schedules: schedule "%" of queue "%" was not run: % (SQLSTATE %)',
                d.name, d.queue, v_error, v_sqlstate
                USING HINT = 'Its tick stays due and the next pass tries again; fix the schedule (awa.schedule) or remove it (awa.unschedule).';
        END;
    END LOOP;
    RETURN v_count;
END
$$;
REVOKE ALL ON FUNCTION awa.run_schedules(bigint) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION awa.run_schedules(bigint) TO awa_admin;
COMMENT ON FUNCTION awa.run_schedules(bigint) IS 'Enqueue the due ticks of the periodic jobs (after downtime only the latest of each); returns how many jobs. Role: awa_admin.';

-- The schedules of periodic jobs (docs/api.md, "Periodic jobs"); next_run_at is NULL while
-- a schedule is paused.
CREATE VIEW awa.schedules AS
    SELECT s.name, s.cron, s.timezone, s.kind, s.queue, s.args, s.priority, s.max_attempts,
           s.metadata, s.tags, s.paused,
           CASE WHEN s.paused THEN NULL ELSE s.next_run_at END AS next_run_at,
           s.last_run_at, s.last_enqueued_at, s.last_job_id, s.created_at, s.updated_at
      FROM awa.cron_schedules s;
COMMENT ON VIEW awa.schedules IS 'Periodic jobs: cron, time zone, job template, next tick (NULL while paused), last job enqueued.';
GRANT SELECT ON awa.schedules TO awa_admin, pg_monitor;

-- Background maintenance as the launcher sees it (maintenance.md §1), from shared memory:
-- every database known to have awa_shard, and always this one.
CREATE FUNCTION awa._maintenance_status(
    OUT database name, OUT served_by text, OUT worker_pid integer, OUT last_pass timestamptz,
    OUT passes bigint, OUT last_error text, OUT last_error_at timestamptz)
    RETURNS SETOF record
    AS 'MODULE_PATHNAME', 'awa_maintenance_status'
    LANGUAGE C VOLATILE STRICT PARALLEL SAFE
    SET search_path = pg_catalog, pg_temp;
REVOKE ALL ON FUNCTION awa._maintenance_status() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION awa._maintenance_status() TO awa_admin, pg_monitor;
COMMENT ON FUNCTION awa._maintenance_status() IS 'Internal: the rows of the awa.maintenance_status view (shared memory).';

-- Background maintenance per database (maintenance.md §1): served_by 'worker' while a
-- worker is in it, 'claims' otherwise (between turns; its claims then promote due jobs).
CREATE VIEW awa.maintenance_status AS
    SELECT database, served_by, worker_pid, last_pass, passes, last_error, last_error_at
      FROM awa._maintenance_status();
COMMENT ON VIEW awa.maintenance_status IS 'Background maintenance per database: who serves it (worker or claims), the worker in it now, last pass, passes, last error.';
GRANT SELECT ON awa.maintenance_status TO awa_admin, pg_monitor;

-- Job progress, results, waits for a job, bulk operations (docs/api.md).

-- A JSON value of at most awa._limit('max_result_bytes') bytes (results and progress), else
-- 22023 naming the argument (C, src/validate.cpp).
CREATE FUNCTION awa._check_json_size(p_value jsonb, p_name text) RETURNS void
    AS 'MODULE_PATHNAME', 'awa_check_json_size'
    LANGUAGE C IMMUTABLE PARALLEL SAFE
    SET search_path = pg_catalog, pg_temp;
REVOKE ALL ON FUNCTION awa._check_json_size(jsonb, text) FROM PUBLIC;
COMMENT ON FUNCTION awa._check_json_size(jsonb, text) IS 'Internal: raise 22023 when a JSON value is larger than awa._limit(''max_result_bytes'').';

-- Record the progress of one running attempt (any JSON value, at most
-- awa._limit('max_result_bytes') bytes); it also counts as a heartbeat. True when the attempt
-- is open; a stale run lease changes nothing and returns false. The latest progress is the
-- `progress` of the job (awa.job_row) while the attempt runs; it goes with the attempt. With
-- p_queue, an attempt of another queue is not open (false). C (src/progress.cpp): checks
-- every argument, then one statement on the latest committed state in receipts mode.
CREATE FUNCTION awa.set_progress(p_job_id bigint, p_run_lease bigint, p_progress jsonb, p_queue text DEFAULT NULL)
    RETURNS boolean
    AS 'MODULE_PATHNAME', 'awa_set_progress'
    LANGUAGE C VOLATILE PARALLEL UNSAFE
    SECURITY DEFINER;
REVOKE ALL ON FUNCTION awa.set_progress(bigint, bigint, jsonb, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION awa.set_progress(bigint, bigint, jsonb, text) TO awa_worker, awa_admin;
COMMENT ON FUNCTION awa.set_progress(bigint, bigint, jsonb, text) IS 'Record the progress of a running attempt (also a heartbeat); false when the attempt is not open. Role: awa_worker, awa_admin.';

-- Record the progress of a batch of running attempts in one call: p_progress[k] for attempt
-- (p_job_ids[k], p_run_leases[k]); a NULL element is a heartbeat alone (the stored progress
-- stays). Element k of the result is true when attempt k is open (as awa.set_progress). C
-- (src/progress.cpp), like awa.set_progress.
CREATE FUNCTION awa.set_jobs_progress(p_job_ids bigint[], p_run_leases bigint[], p_progress jsonb[],
                                      p_queue text DEFAULT NULL)
    RETURNS boolean[]
    AS 'MODULE_PATHNAME', 'awa_set_jobs_progress'
    LANGUAGE C VOLATILE PARALLEL UNSAFE
    SECURITY DEFINER;
REVOKE ALL ON FUNCTION awa.set_jobs_progress(bigint[], bigint[], jsonb[], text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION awa.set_jobs_progress(bigint[], bigint[], jsonb[], text) TO awa_worker, awa_admin;
COMMENT ON FUNCTION awa.set_jobs_progress(bigint[], bigint[], jsonb[], text) IS 'Record the progress of a batch of running attempts (also heartbeats); per attempt, false when it is not open. Role: awa_worker, awa_admin.';

-- Record that this transaction finished (or removed) a job, so that its waiters
-- (awa.wait_for_job) wake at commit; NULL: jobs it does not name (purge, drop). C,
-- src/job_wait.cpp: the PL/pgSQL exits call it; C++ exits record their jobs themselves.
CREATE FUNCTION awa._job_finished(p_job_id bigint) RETURNS void
    AS 'MODULE_PATHNAME', 'awa_job_finished'
    LANGUAGE C VOLATILE PARALLEL UNSAFE
    SET search_path = pg_catalog, pg_temp;
REVOKE ALL ON FUNCTION awa._job_finished(bigint) FROM PUBLIC;
COMMENT ON FUNCTION awa._job_finished(bigint) IS 'Internal: wake the waiters of a job this transaction finished or moved to another queue, at commit (NULL: every waiter).';

-- A taken attempt to done_entries on its own lane identity (failed or cancelled).
CREATE OR REPLACE FUNCTION awa._finish_attempt(t awa.taken_attempt, p_state awa.job_state, p_errors jsonb) RETURNS void
    LANGUAGE plpgsql VOLATILE
    SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    INSERT INTO awa.done_entries (ready_slot, ready_generation, job_id, queue, priority, enqueue_shard,
        lane_seq, state, attempt, run_lease, attempted_at, errors)
    VALUES (t.ready_slot, t.ready_generation, t.job_id, t.queue, t.priority, t.enqueue_shard,
        t.lane_seq, p_state, t.attempt, t.run_lease, t.attempted_at, p_errors);
    PERFORM awa._sync_unique_claim(t.job_id, t.unique_key, t.unique_states, 'running', p_state, t.queue);
    PERFORM awa._job_finished(t.job_id);
END
$$;

-- Wait for a job to finish: its row (awa.job_row) as soon as it is completed, failed,
-- cancelled or dead-lettered, or its current row when p_timeout_ms (0..3600000) passes;
-- NULL when no job has the id. Preloaded, it sleeps until the commit that finishes the job
-- (src/job_wait.cpp); otherwise it re-reads the job every 100 ms. Reads the latest committed
-- state whatever the caller's isolation level. For producers, workers and admins (it
-- discloses the job row to any holder of those roles, as get_job does). p_queue: the job's
-- queue (NULL when not in it); the routing argument on a Citus cluster, where a call
-- without it is refused (0A000); by id alone it works on one server.
CREATE FUNCTION awa.wait_for_job(p_job_id bigint, p_timeout_ms bigint, p_queue text DEFAULT NULL) RETURNS awa.job_row
    AS 'MODULE_PATHNAME', 'awa_wait_for_job'
    LANGUAGE C VOLATILE PARALLEL UNSAFE
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp SET jit = off SET enable_seqscan = off;
REVOKE ALL ON FUNCTION awa.wait_for_job(bigint, bigint, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION awa.wait_for_job(bigint, bigint, text) TO awa_producer, awa_worker, awa_admin;
COMMENT ON FUNCTION awa.wait_for_job(bigint, bigint, text) IS 'Wait until a job (of p_queue, when given: the routing argument on Citus) is terminal (or the timeout) and return it; NULL when unknown. Role: awa_producer, awa_worker, awa_admin.';

-- Cancel many jobs of a queue (optionally of one kind, of some live states) with the rule of
-- awa.cancel_job, job by job, at most p_limit (1..10000) jobs a call, oldest lane position
-- first (lanes in (priority, shard) order, the lock order of the claim heads). Bounded: one
-- call is one transaction, and the claim heads of the lanes it cancelled waiting jobs in stay
-- locked until it ends, so a call touches at most p_limit jobs; call it again (in its own
-- transaction) until it returns 0. p_states: NULL = every live state (available, scheduled,
-- retryable, running, waiting_external); terminal states are refused. Returns how many
-- jobs it cancelled.
CREATE FUNCTION awa.cancel_jobs(p_queue text, p_kind text DEFAULT NULL, p_states awa.job_state[] DEFAULT NULL,
                                p_limit bigint DEFAULT 1000) RETURNS bigint
    LANGUAGE plpgsql VOLATILE
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp SET jit = off
AS $$
DECLARE
    v_live CONSTANT awa.job_state[] := ARRAY['available', 'scheduled', 'retryable', 'running', 'waiting_external'];
    v_states awa.job_state[] := coalesce(p_states, v_live);
    v_cancelled bigint := 0;
    v_id bigint;
BEGIN
    PERFORM awa._require_queue(p_queue, 'p_queue');
    PERFORM awa._require(p_limit IS NULL, 'p_limit');
    PERFORM awa._check_between(p_limit, 1, 10000, 'p_limit');
    PERFORM awa._check_arg(coalesce(array_ndims(p_states), 1) = 1 AND array_position(p_states, NULL) IS NULL
                           AND v_states <@ v_live,
                           'p_states may only hold live states (available, scheduled, retryable, running, waiting_external)');
    FOR v_id IN
        SELECT j.id FROM awa.jobs j
         WHERE j.queue = p_queue AND j.state = ANY (v_states) AND (p_kind IS NULL OR j.kind = p_kind)
         ORDER BY j.priority, j.enqueue_shard NULLS LAST, j.lane_seq NULLS LAST, j.id
         LIMIT p_limit
    LOOP
        IF awa.cancel_job(v_id, p_queue) THEN
            v_cancelled := v_cancelled + 1;
        END IF;
    END LOOP;
    RETURN v_cancelled;
END
$$;
REVOKE ALL ON FUNCTION awa.cancel_jobs(text, text, awa.job_state[], bigint) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION awa.cancel_jobs(text, text, awa.job_state[], bigint) TO awa_admin;
COMMENT ON FUNCTION awa.cancel_jobs(text, text, awa.job_state[], bigint) IS 'Cancel up to p_limit live jobs of a queue (optionally of a kind and states) by the rule of cancel_job; returns how many. Role: awa_admin.';

-- Bring failed jobs of a queue (optionally of one kind) back to available, at most p_limit
-- (1..10000) a call, oldest id first: a failed terminal job through the rules of
-- awa.move_failed_to_dlq then awa.retry_from_dlq, a dead letter through retry_from_dlq, so a
-- keyed job goes back to its key's shard and the jobs of one key re-enter their lane in id
-- order. A job whose unique key another live job holds stays where it is (skipped, 23505 of
-- retry_from_dlq absorbed for it alone). Bounded as awa.cancel_jobs: call again until it
-- returns 0. Returns how many jobs it brought back.
CREATE FUNCTION awa.retry_jobs(p_queue text, p_kind text DEFAULT NULL, p_limit bigint DEFAULT 1000) RETURNS bigint
    LANGUAGE plpgsql VOLATILE
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp SET jit = off
AS $$
DECLARE
    v_retried bigint := 0;
    r record;
BEGIN
    PERFORM awa._require_queue(p_queue, 'p_queue');
    PERFORM awa._require(p_limit IS NULL, 'p_limit');
    PERFORM awa._check_between(p_limit, 1, 10000, 'p_limit');
    FOR r IN
        SELECT j.id, EXISTS (SELECT 1 FROM awa.dlq_entries e WHERE e.queue = p_queue AND e.job_id = j.id) AS dead_lettered
          FROM awa.jobs j
         WHERE j.queue = p_queue AND j.state = 'failed' AND (p_kind IS NULL OR j.kind = p_kind)
         ORDER BY j.id
         LIMIT p_limit
    LOOP
        BEGIN
            IF (r.dead_lettered OR awa.move_failed_to_dlq(r.id, 'retry_jobs', p_queue))
               AND awa.retry_from_dlq(r.id, p_from_queue => p_queue) THEN
                v_retried := v_retried + 1;
            END IF;
        EXCEPTION WHEN unique_violation THEN
            NULL;
        END;
    END LOOP;
    RETURN v_retried;
END
$$;
REVOKE ALL ON FUNCTION awa.retry_jobs(text, text, bigint) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION awa.retry_jobs(text, text, bigint) TO awa_admin;
COMMENT ON FUNCTION awa.retry_jobs(text, text, bigint) IS 'Bring up to p_limit failed or dead-lettered jobs of a queue back to available by the rules of retry_from_dlq; returns how many. Role: awa_admin.';

-- Flow control: a rate limit and a concurrency limit per queue, kept with its settings.
ALTER TABLE awa.queue_meta
    ADD COLUMN rate_per_second double precision,
    ADD COLUMN rate_burst integer,
    ADD COLUMN concurrency_limit integer,
    ADD COLUMN key_concurrency_limit integer,
    ADD COLUMN key_rate_per_second double precision,
    ADD COLUMN key_rate_burst integer,
    ADD CONSTRAINT queue_meta_rate_limit CHECK ((rate_per_second IS NULL) = (rate_burst IS NULL)
        AND rate_per_second > 0 AND rate_per_second <= 1e9 AND rate_burst BETWEEN 1 AND 1000000),
    ADD CONSTRAINT queue_meta_concurrency_limit CHECK (concurrency_limit BETWEEN 1 AND 1000000),
    ADD CONSTRAINT queue_meta_key_concurrency_limit CHECK (key_concurrency_limit BETWEEN 1 AND 1000000),
    ADD CONSTRAINT queue_meta_key_rate_limit CHECK ((key_rate_per_second IS NULL) = (key_rate_burst IS NULL)
        AND key_rate_per_second > 0 AND key_rate_per_second <= 1e9 AND key_rate_burst BETWEEN 1 AND 1000000);
COMMENT ON COLUMN awa.queue_meta.rate_per_second IS 'Rate limit (awa.set_rate_limit): claims hand out at most rate_burst + rate_per_second x t jobs in t seconds; NULL: none.';
COMMENT ON COLUMN awa.queue_meta.rate_burst IS 'Bucket size of the rate limit (1..1000000); NULL when the queue has none.';
COMMENT ON COLUMN awa.queue_meta.concurrency_limit IS 'Most running attempts of the queue (awa.set_concurrency_limit, 1..1000000); NULL: no cap.';
COMMENT ON COLUMN awa.queue_meta.key_concurrency_limit IS 'Most running attempts of each concurrency key of the queue (awa.set_concurrency_limit p_per_key => true, 1..1000000); NULL: no per-key cap.';
COMMENT ON COLUMN awa.queue_meta.key_rate_per_second IS 'Per-key rate limit (awa.set_rate_limit p_per_key => true): claims hand out at most key_rate_burst + key_rate_per_second x t jobs of each concurrency key in t seconds; NULL: none.';
COMMENT ON COLUMN awa.queue_meta.key_rate_burst IS 'Bucket size of each key''s rate limit (1..1000000); NULL when the queue has none.';
REVOKE INSERT, UPDATE ON awa.queue_meta FROM awa_admin;
-- awa_admin writes every column but key_concurrency_limit: a per-key limit set by hand would
-- not record the keyed attempts already running (awa.set_concurrency_limit does), and they
-- would escape it until they end.
GRANT INSERT (queue, paused, paused_at, paused_by, enqueue_shards, dlq_enabled, completed_retention, failed_retention,
    rate_per_second, rate_burst, concurrency_limit, key_rate_per_second, key_rate_burst)
    ON awa.queue_meta TO awa_admin;
GRANT UPDATE (queue, paused, paused_at, paused_by, enqueue_shards, dlq_enabled, completed_retention, failed_retention,
    rate_per_second, rate_burst, concurrency_limit, key_rate_per_second, key_rate_burst)
    ON awa.queue_meta TO awa_admin;

-- The places of the keys of queues with a per-key concurrency limit (docs/design.md §4,
-- "Flow control"): a place holds the last attempt a claim of its key started there, taken
-- while that attempt is open (tested as awa._open_receipts, or the lease, tests it), free
-- once it has ended. A claim counts its keys' taken places, puts the attempts it starts in
-- their free places (an update in place: HOT, no index entry, so the table does not churn),
-- adds a place only when none is free and removes the free places it did not need, so a key
-- has at most as many places as it ever ran attempts at once. set_concurrency_limit(...,
-- p_per_key => true) records the attempts already running. Keys compare bytewise (COLLATE
-- "C": no locale's collation routine in the probes; only equality is ever asked of them).
CREATE TABLE awa.key_attempts (
    queue text NOT NULL,
    concurrency_key text COLLATE "C" NOT NULL,
    place integer NOT NULL,
    job_id bigint NOT NULL,
    run_lease bigint NOT NULL,
    priority smallint NOT NULL,
    enqueue_shard smallint NOT NULL,
    lane_seq bigint NOT NULL,
    ready_slot integer NOT NULL,
    ready_generation bigint NOT NULL,
    claim_slot integer,
    lease_slot integer,
    PRIMARY KEY (queue, concurrency_key, place))
    WITH (fillfactor = 80);
SELECT pg_catalog.pg_extension_config_dump('awa.key_attempts', '');
GRANT SELECT ON awa.key_attempts TO awa_admin;
COMMENT ON TABLE awa.key_attempts IS 'Places of the concurrency keys of queues with a per-key concurrency limit: each holds the last attempt a claim of its key started there, taken while that attempt runs; claims reuse the free places of their keys in place.';

-- Flow control (docs/api.md, "Flow control"). Whether claims can keep rate limits: their
-- token buckets live in shared memory, so only when the library is preloaded.
CREATE FUNCTION awa._rate_limits_available() RETURNS boolean
    AS 'MODULE_PATHNAME', 'awa_rate_limits_available'
    LANGUAGE C VOLATILE PARALLEL SAFE
    SET search_path = pg_catalog, pg_temp;
REVOKE ALL ON FUNCTION awa._rate_limits_available() FROM PUBLIC;
COMMENT ON FUNCTION awa._rate_limits_available() IS 'Internal: whether the token buckets of rate limits exist (library preloaded).';

-- The locks claims try for a queue's concurrency keys, taken by set_concurrency_limit in the
-- order given (sorted: two such calls never wait for each other crosswise), each waited for: the claims of those keys in progress end first, and the
-- claims that follow pass those keys over (they never wait) until it commits.
CREATE FUNCTION awa._lock_concurrency_keys(p_queue text, p_keys text[]) RETURNS void
    AS 'MODULE_PATHNAME', 'awa_lock_concurrency_keys'
    LANGUAGE C VOLATILE PARALLEL UNSAFE
    SET search_path = pg_catalog, pg_temp;
REVOKE ALL ON FUNCTION awa._lock_concurrency_keys(text, text[]) FROM PUBLIC;
COMMENT ON FUNCTION awa._lock_concurrency_keys(text, text[]) IS 'Internal: wait for and take the locks claims try for a queue''s concurrency keys.';

-- The running attempts of a queue's keyed jobs, in both modes: open receipts and running leases.
CREATE FUNCTION awa._running_keyed_attempts(p_queue text)
    RETURNS TABLE (concurrency_key text, job_id bigint, run_lease bigint, priority smallint, enqueue_shard smallint,
                   lane_seq bigint, ready_slot integer, ready_generation bigint, claim_slot integer,
                   lease_slot integer)
    LANGUAGE plpgsql STABLE
    SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    RETURN QUERY
    SELECT (c.ready).concurrency_key, c.job_id, c.run_lease, c.priority, c.enqueue_shard, c.lane_seq,
           c.ready_slot, c.ready_generation, c.claim_slot, NULL::integer
      FROM awa._open_receipts c
     WHERE c.queue = p_queue AND (c.ready).concurrency_key IS NOT NULL
    UNION ALL
    SELECT r.concurrency_key, l.job_id, l.run_lease, l.priority, l.enqueue_shard, l.lane_seq,
           l.ready_slot, l.ready_generation, NULL::integer, l.lease_slot
      FROM awa.leases l
      JOIN awa.ready_entries r
        ON r.ready_slot = l.ready_slot AND r.ready_generation = l.ready_generation AND r.queue = l.queue
       AND r.priority = l.priority AND r.enqueue_shard = l.enqueue_shard AND r.lane_seq = l.lane_seq
     WHERE l.queue = p_queue AND l.state IN ('running', 'waiting_external') AND r.concurrency_key IS NOT NULL;
END
$$;
REVOKE ALL ON FUNCTION awa._running_keyed_attempts(text) FROM PUBLIC;
COMMENT ON FUNCTION awa._running_keyed_attempts(text) IS 'Internal: the running attempts of a queue''s keyed jobs (open receipts and running leases).';

-- Set (or remove, p_per_second NULL) a known queue's rate limit: its claims, all backends
-- together, hand out at most p_burst + p_per_second x t jobs over any t seconds; a claim
-- past it returns fewer jobs or none, never waits. With p_per_key, the queue's per-key rate
-- limit instead: that many jobs of each concurrency key (the two limits are independent).
-- Kept in awa.queue_meta (pg_dump keeps it); the token buckets are in shared memory, so
-- setting one needs the library preloaded.
CREATE FUNCTION awa.set_rate_limit(p_queue text, p_per_second double precision, p_burst bigint DEFAULT 1,
                                   p_per_key boolean DEFAULT false) RETURNS void
    LANGUAGE plpgsql VOLATILE
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    PERFORM awa._require_queue(p_queue, 'p_queue');
    PERFORM awa._require(p_per_key IS NULL, 'p_per_key');
    IF p_per_second IS NULL THEN
        IF p_per_key THEN
            UPDATE awa.queue_meta SET key_rate_per_second = NULL, key_rate_burst = NULL
             WHERE queue = p_queue AND key_rate_per_second IS NOT NULL;
        ELSE
            UPDATE awa.queue_meta SET rate_per_second = NULL, rate_burst = NULL
             WHERE queue = p_queue AND rate_per_second IS NOT NULL;
        END IF;
        RETURN;
    END IF;
    IF NOT (p_per_second > 0 AND p_per_second <= 1e9) THEN
        RAISE EXCEPTION 'p_per_second must be greater than 0 and at most 1e9' USING ERRCODE = '22023',
            DETAIL = format('The value is %s.', p_per_second),
            HINT = 'Pass NULL to remove the rate limit; pause the queue to stop its claims.';
    END IF;
    PERFORM awa._require(p_burst IS NULL, 'p_burst');
    IF p_burst NOT BETWEEN 1 AND 1000000 THEN
        RAISE EXCEPTION 'p_burst must be between 1 and 1000000' USING ERRCODE = '22023',
            DETAIL = format('The value is %s.', p_burst);
    END IF;
    IF NOT awa._rate_limits_available() THEN
        RAISE EXCEPTION 'rate limits need awa_shard in shared_preload_libraries' USING ERRCODE = '55000',
            DETAIL = 'The token buckets that all claims of the server share live in shared memory.',
            HINT = 'Add awa_shard to shared_preload_libraries and restart the server.';
    END IF;
    IF p_per_key THEN
        INSERT INTO awa.queue_meta (queue, key_rate_per_second, key_rate_burst) VALUES (p_queue, p_per_second, p_burst)
        ON CONFLICT (queue) DO UPDATE
            SET key_rate_per_second = EXCLUDED.key_rate_per_second, key_rate_burst = EXCLUDED.key_rate_burst;
    ELSE
        INSERT INTO awa.queue_meta (queue, rate_per_second, rate_burst) VALUES (p_queue, p_per_second, p_burst)
        ON CONFLICT (queue) DO UPDATE SET rate_per_second = EXCLUDED.rate_per_second, rate_burst = EXCLUDED.rate_burst;
    END IF;
END
$$;
REVOKE ALL ON FUNCTION awa.set_rate_limit(text, double precision, bigint, boolean) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION awa.set_rate_limit(text, double precision, bigint, boolean) TO awa_admin;
COMMENT ON FUNCTION awa.set_rate_limit(text, double precision, bigint, boolean)
    IS 'Set (NULL p_per_second: remove) a known queue''s rate limit, or with p_per_key each concurrency key''s: at most p_burst + p_per_second x t jobs claimed over t seconds, server-wide. Role: awa_admin.';

-- Set (or remove, p_limit NULL) a known queue's concurrency limit: at most p_limit running
-- attempts, whatever the number and isolation level of the claimers; with p_per_key, at
-- most p_limit running attempts of each concurrency key (the two limits are independent).
-- Claims of a limited queue serialise on a lock of the queue held until they commit and
-- count its running attempts on the latest committed state (docs/design.md §4, "Flow control").
CREATE FUNCTION awa.set_concurrency_limit(p_queue text, p_limit bigint, p_per_key boolean DEFAULT false) RETURNS void
    LANGUAGE plpgsql VOLATILE
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    PERFORM awa._require_queue(p_queue, 'p_queue');
    PERFORM awa._require(p_per_key IS NULL, 'p_per_key');
    -- Each statement must see what the claims it waited for committed.
    PERFORM awa._require_read_committed('set_concurrency_limit');
    IF p_limit IS NULL THEN
        IF p_per_key THEN
            UPDATE awa.queue_meta SET key_concurrency_limit = NULL
             WHERE queue = p_queue AND key_concurrency_limit IS NOT NULL;
            -- After the claims of the keys in progress (they update and delete places too).
            PERFORM awa._lock_concurrency_keys(p_queue, ARRAY(SELECT DISTINCT k.concurrency_key FROM awa.key_attempts k
                                                               WHERE k.queue = p_queue ORDER BY 1));
            DELETE FROM awa.key_attempts WHERE queue = p_queue;
        ELSE
            UPDATE awa.queue_meta SET concurrency_limit = NULL WHERE queue = p_queue AND concurrency_limit IS NOT NULL;
        END IF;
        RETURN;
    END IF;
    IF p_limit NOT BETWEEN 1 AND 1000000 THEN
        RAISE EXCEPTION 'p_limit must be between 1 and 1000000' USING ERRCODE = '22023',
            DETAIL = format('The value is %s.', p_limit),
            HINT = 'Pass NULL to remove the limit; pause the queue to stop its claims.';
    END IF;
    IF p_per_key THEN
        INSERT INTO awa.queue_meta (queue, key_concurrency_limit) VALUES (p_queue, p_limit)
        ON CONFLICT (queue) DO UPDATE SET key_concurrency_limit = EXCLUDED.key_concurrency_limit;
        -- The keyed attempts already running count from now on (claims record the others): each
        -- one not recorded yet takes a new place of its key, after the key's last one, once the
        -- claims of its key in progress have ended (their places are then seen: READ COMMITTED).
        PERFORM awa._lock_concurrency_keys(p_queue, ARRAY(SELECT DISTINCT r.concurrency_key
                                                           FROM awa._running_keyed_attempts(p_queue) r ORDER BY 1));
        INSERT INTO awa.key_attempts (queue, concurrency_key, place, job_id, run_lease, priority, enqueue_shard,
                                      lane_seq, ready_slot, ready_generation, claim_slot, lease_slot)
        SELECT p_queue, x.concurrency_key,
               coalesce((SELECT max(k.place) FROM awa.key_attempts k
                          WHERE k.queue = p_queue AND k.concurrency_key = x.concurrency_key), -1)
                 + row_number() OVER (PARTITION BY x.concurrency_key ORDER BY x.job_id, x.run_lease),
               x.job_id, x.run_lease, x.priority, x.enqueue_shard, x.lane_seq, x.ready_slot, x.ready_generation,
               x.claim_slot, x.lease_slot
          FROM awa._running_keyed_attempts(p_queue) x
         WHERE NOT EXISTS (SELECT 1 FROM awa.key_attempts k
                            WHERE k.queue = p_queue AND k.concurrency_key = x.concurrency_key
                              AND k.job_id = x.job_id AND k.run_lease = x.run_lease);
    ELSE
        INSERT INTO awa.queue_meta (queue, concurrency_limit) VALUES (p_queue, p_limit)
        ON CONFLICT (queue) DO UPDATE SET concurrency_limit = EXCLUDED.concurrency_limit;
    END IF;
END
$$;
REVOKE ALL ON FUNCTION awa.set_concurrency_limit(text, bigint, boolean) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION awa.set_concurrency_limit(text, bigint, boolean) TO awa_admin;
COMMENT ON FUNCTION awa.set_concurrency_limit(text, bigint, boolean)
    IS 'Set (NULL: remove) a known queue''s cap on running attempts (p_per_key: on the running attempts of each concurrency key), exact for any number of claimers. Role: awa_admin.';

-- Scale-out on Citus (docs/scale-out.md): awa.citus_setup(), run on the coordinator.

-- Scale-out by queue on Citus (docs/scale-out.md). Run on the coordinator after
-- CREATE EXTENSION awa_shard (Citus cannot distribute inside an extension script) and again
-- after citus_add_node; each run does only what is not done yet. The per-queue tables are
-- distributed by queue, colocated with awa.queue_meta, so all rows of a queue live on one
-- worker; the install-wide singletons become reference tables; every worker-facing function
-- with a p_queue argument is distributed by it with force_delegation, so a call runs whole
-- on the queue's worker; forced generic plans become custom plans there (Citus routes a
-- statement by the value of its queue); each node's job and receipt ids are drawn from its
-- own range (group id << 48, as Citus does for sequences used on workers); pg_monitor is
-- granted the tables behind awa.jobs and awa.lane_cursors (below). A table that has a
-- unique key without queue is left node-local (a NOTICE names it). Without Citus it raises
-- and changes nothing.
CREATE FUNCTION awa.citus_setup() RETURNS TABLE (step text, object text)
    LANGUAGE plpgsql VOLATILE
    SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_anchor constant regclass := 'awa.queue_meta'::regclass;
    v_per_queue constant text[] := ARRAY[
        'queue_meta', 'queue_enqueue_heads', 'queue_claim_heads', 'claim_marks',
        'ready_entries', 'done_entries', 'completion_batches', 'leases', 'claim_batches',
        'lease_claim_closures', 'attempt_state', 'deferred_jobs', 'dlq_entries',
        'job_unique_claims', 'key_attempts', 'cron_schedules'];
    v_singletons constant text[] := ARRAY[
        'storage_transition_state', 'plane_settings', 'queue_ring_state', 'lease_ring_state',
        'claim_ring_state', 'queue_ring_slots', 'lease_ring_slots', 'claim_ring_slots',
        'retention_buckets'];
    -- awa.rescue_progress (the rescue's watermark) stays node-local: each node rescues the
    -- attempts of its own queues.
    -- Calls with p_queue that are not routed by it: pure helpers (names and keys, no
    -- table) and awa.schedule (run on the coordinator, whose lock keeps schedule names
    -- unique). A call that also has p_from_queue (move_queue, retry_from_dlq: p_queue is the
    -- destination) is routed by the queue the job is in.
    v_not_routed constant text[] := ARRAY['lane_sequence_name', 'lane_lock_key', 'schedule'];
    v_group integer;
    v_rel regclass;
    v_fn regprocedure;
    t text;
    v_granted integer;
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'citus') THEN
        RAISE EXCEPTION 'awa.citus_setup: Citus is not installed in this database'
            USING ERRCODE = 'object_not_in_prerequisite_state',
                  HINT = 'Load citus first in shared_preload_libraries, CREATE EXTENSION citus on every node and add the workers (citus_add_node), then call awa.citus_setup() on the coordinator. Without Citus nothing needs setting up.';
    END IF;
    EXECUTE 'SELECT groupid FROM pg_dist_local_group' INTO v_group;
    IF v_group <> 0 THEN
        RAISE EXCEPTION 'awa.citus_setup: this node is a Citus worker (group %)', v_group
            USING ERRCODE = 'object_not_in_prerequisite_state',
                  HINT = 'Call awa.citus_setup() on the coordinator.';
    END IF;
    -- Triggers of distributed tables (queue_meta, queue_claim_heads) need this setting.
    PERFORM set_config('citus.enable_unsafe_triggers', 'on', true);

    -- 0. pg_monitor reads awa.jobs and awa.lane_cursors on one server through the views, with
    --    their owner's privileges. On a cluster Citus checks the reads of the shards against
    --    the caller's own, so the tables behind those views (and every partition of them) are
    --    granted to pg_monitor before they are distributed: their shards are made with the
    --    grant (a GRANT after that goes to every shard, one statement each).
    v_granted := 0;
    FOR v_rel IN
        WITH RECURSIVE reads(oid) AS (
            SELECT unnest(ARRAY['awa.jobs'::regclass, 'awa.lane_cursors'::regclass])::oid
            UNION
            SELECT d.refobjid FROM reads
              JOIN pg_rewrite w ON w.ev_class = reads.oid
              JOIN pg_depend d ON d.classid = 'pg_rewrite'::regclass AND d.objid = w.oid
                              AND d.refclassid = 'pg_class'::regclass AND d.refobjid <> reads.oid)
        SELECT DISTINCT t.relid::regclass
          FROM reads r
          JOIN pg_class c ON c.oid = r.oid AND c.relkind IN ('r', 'p')
         CROSS JOIN LATERAL (SELECT r.oid UNION SELECT p.relid FROM pg_partition_tree(r.oid) p) t(relid)
         WHERE NOT has_table_privilege('pg_monitor', t.relid, 'SELECT')
    LOOP
        EXECUTE format('GRANT SELECT ON %s TO pg_monitor', v_rel);
        v_granted := v_granted + 1;
    END LOOP;
    IF v_granted > 0 THEN
        step := 'granted to pg_monitor'; object := v_granted || ' tables read by awa.jobs and awa.lane_cursors';
        RETURN NEXT;
    END IF;

    -- 1. Per-queue tables, distributed by queue, colocated with the anchor. A schedule's
    --    name is unique on one server through an index without queue, which cannot be
    --    distributed; on the cluster awa.schedule keeps it unique under its lock.
    IF NOT EXISTS (SELECT 1 FROM pg_dist_partition WHERE logicalrelid = 'awa.cron_schedules'::regclass)
       AND to_regclass('awa.cron_schedules_name') IS NOT NULL THEN
        DROP INDEX awa.cron_schedules_name;
        -- (The workers' copies, made by CREATE EXTENSION there, alike.)
        PERFORM run_command_on_workers(
            'SET citus.enable_ddl_propagation = off; DROP INDEX IF EXISTS awa.cron_schedules_name');
        step := 'schedule names unique by lock'; object := 'awa.cron_schedules'; RETURN NEXT;
    END IF;
    FOREACH t IN ARRAY v_per_queue LOOP
        v_rel := format('awa.%I', t)::regclass;
        CONTINUE WHEN EXISTS (SELECT 1 FROM pg_dist_partition WHERE logicalrelid = v_rel);
        IF NOT EXISTS (SELECT 1 FROM pg_attribute WHERE attrelid = v_rel AND attname = 'queue' AND NOT attisdropped)
           OR EXISTS (SELECT 1 FROM pg_index i
                       WHERE i.indrelid = v_rel AND i.indisunique
                         AND NOT EXISTS (SELECT 1 FROM pg_attribute a
                                          WHERE a.attrelid = v_rel AND a.attname = 'queue'
                                            AND a.attnum = ANY (i.indkey::int2[]))) THEN
            RAISE NOTICE 'awa.citus_setup: % has a unique key without queue; left node-local', v_rel;
            step := 'left node-local'; object := v_rel::text; RETURN NEXT;
            CONTINUE;
        END IF;
        IF v_rel = v_anchor THEN
            PERFORM create_distributed_table(v_rel, 'queue', colocate_with := 'none');
        ELSE
            PERFORM create_distributed_table(v_rel, 'queue', colocate_with := v_anchor::text);
        END IF;
        step := 'distributed by queue'; object := v_rel::text; RETURN NEXT;
    END LOOP;

    -- 2. Install-wide singletons: a copy on every node.
    FOREACH t IN ARRAY v_singletons LOOP
        v_rel := format('awa.%I', t)::regclass;
        CONTINUE WHEN EXISTS (SELECT 1 FROM pg_dist_partition WHERE logicalrelid = v_rel);
        PERFORM create_reference_table(v_rel);
        step := 'reference table'; object := v_rel::text; RETURN NEXT;
    END LOOP;

    -- 3. Worker-facing calls: custom plans instead of forced generic ones on every node, then
    --    distributed by p_queue with force_delegation.
    FOR v_fn IN
        SELECT p.oid::regprocedure FROM pg_proc p
          JOIN pg_depend d ON d.classid = 'pg_proc'::regclass AND d.objid = p.oid AND d.deptype = 'e'
          JOIN pg_extension e ON e.oid = d.refobjid AND e.extname = 'awa_shard'
         WHERE p.pronamespace = 'awa'::regnamespace AND p.prokind = 'f'
           AND 'force_generic_plan' = ANY (SELECT split_part(c, '=', 2) FROM unnest(p.proconfig) c)
    LOOP
        PERFORM run_command_on_all_nodes(format(
            'SET citus.enable_ddl_propagation = off; ALTER FUNCTION %s SET plan_cache_mode = force_custom_plan', v_fn));
        step := 'custom plans'; object := v_fn::text; RETURN NEXT;
    END LOOP;
    FOR v_fn IN
        SELECT p.oid::regprocedure FROM pg_proc p
          JOIN pg_depend d ON d.classid = 'pg_proc'::regclass AND d.objid = p.oid AND d.deptype = 'e'
          JOIN pg_extension e ON e.oid = d.refobjid AND e.extname = 'awa_shard'
         WHERE p.pronamespace = 'awa'::regnamespace AND p.prokind = 'f'
           AND p.proname NOT LIKE '\_%' AND p.proname <> ALL (v_not_routed)
           AND 'p_queue' = ANY (p.proargnames)
           AND NOT EXISTS (SELECT 1 FROM pg_dist_object o
                            WHERE o.classid = 'pg_proc'::regclass AND o.objid = p.oid
                              AND o.distribution_argument_index IS NOT NULL)
         ORDER BY p.oid
    LOOP
        PERFORM create_distributed_function(v_fn,
                    CASE WHEN (SELECT 'p_from_queue' = ANY (proargnames) FROM pg_proc WHERE oid = v_fn)
                         THEN 'p_from_queue' ELSE 'p_queue' END,
                    colocate_with := v_anchor::text, force_delegation := true);
        step := 'delegated by p_queue'; object := v_fn::text; RETURN NEXT;
    END LOOP;

    -- 4. Ids unique across nodes: node group g draws job and receipt ids from
    --    [g << 48, (g + 1) << 48) (group 0, the coordinator, keeps its values).
    PERFORM run_command_on_all_nodes($cmd$
DO $do$
DECLARE
    g bigint := (SELECT groupid FROM pg_dist_local_group);
    s text;
BEGIN
    IF g > 0 THEN
        FOREACH s IN ARRAY ARRAY['awa.job_id_seq', 'awa.receipt_id_seq'] LOOP
            IF (SELECT max_value FROM pg_sequences WHERE format('%I.%I', schemaname, sequencename) = s) <> ((g + 1) << 48) - 1 THEN
                EXECUTE format('ALTER SEQUENCE %s MINVALUE %s MAXVALUE %s START %s RESTART', s, g << 48, ((g + 1) << 48) - 1, g << 48);
            END IF;
        END LOOP;
    END IF;
END
$do$
$cmd$);
    step := 'id ranges'; object := 'awa.job_id_seq, awa.receipt_id_seq'; RETURN NEXT;

    -- 5. awa.lane_cursors in a form Citus routes by queue, on every node: the latest mark of
    --    each lane from a DISTINCT ON subquery joined by queue, where the one-server view
    --    looks it up per lane in a lateral subquery with LIMIT (the same rows: the head's
    --    cursor, or the lane's latest mark when further). Citus sends that lateral subquery
    --    to every shard of the colocation group even for one queue; this form makes a read
    --    of one queue's cursors (queue_counts_exact, queue_depth, awa.jobs of one queue, the
    --    per-queue maintenance) a statement on that queue's shards alone.
    IF EXISTS (SELECT 1 FROM run_command_on_all_nodes(
                   $cmd$SELECT pg_get_viewdef('awa.lane_cursors'::regclass) LIKE '%LATERAL%'$cmd$) r
                WHERE r.result <> 'f') THEN
        PERFORM run_command_on_all_nodes($cmd$
SET citus.enable_ddl_propagation = off;
CREATE OR REPLACE VIEW awa.lane_cursors AS
    SELECT h.queue, h.priority, h.enqueue_shard, greatest(h.claim_seq, m.claim_seq) AS claim_seq,
           CASE WHEN m.claim_seq > h.claim_seq THEN m.head_run_at ELSE h.head_run_at END AS head_run_at
      FROM awa.queue_claim_heads h
      LEFT JOIN (SELECT DISTINCT ON (k.queue, k.priority, k.enqueue_shard)
                        k.queue, k.priority, k.enqueue_shard, k.claim_seq, k.head_run_at
                   FROM awa.claim_marks k
                  ORDER BY k.queue, k.priority, k.enqueue_shard, k.claim_seq DESC) m
        ON m.queue = h.queue AND m.priority = h.priority AND m.enqueue_shard = h.enqueue_shard
$cmd$);
        step := 'lane cursors routed by queue'; object := 'awa.lane_cursors'; RETURN NEXT;
    END IF;
END
$$;
REVOKE ALL ON FUNCTION awa.citus_setup() FROM PUBLIC;
COMMENT ON FUNCTION awa.citus_setup() IS 'On a Citus coordinator: distribute this install by queue (tables, worker-facing calls, id ranges); idempotent, re-run after citus_add_node. Raises without Citus.';

-- Maintenance on a Citus cluster (docs/scale-out.md, "Maintenance"). Once awa.citus_setup()
-- has distributed the install, each node runs maintenance for the queues whose shards it
-- holds, one queue at a time with queue = $n on every statement (Citus runs them on the local
-- shards); the shared rings (reference tables) are rotated, pruned and expired by the
-- coordinator alone, whose "slot empty" tests read every worker. Without Citus, or before
-- awa.citus_setup(), awa._citus_group() is NULL and maintenance is the one-server pass.

-- This node's Citus group (0: the coordinator) once the install is distributed; NULL
-- without Citus or before awa.citus_setup() (C, src/citus.cpp: one cached test without Citus).
CREATE FUNCTION awa._citus_group() RETURNS integer
    AS 'MODULE_PATHNAME', 'awa_citus_group'
    LANGUAGE C VOLATILE PARALLEL UNSAFE
    SET search_path = pg_catalog, pg_temp;
REVOKE ALL ON FUNCTION awa._citus_group() FROM PUBLIC;
COMMENT ON FUNCTION awa._citus_group() IS 'Internal: this node''s Citus group once the install is distributed by awa.citus_setup(), NULL otherwise.';

-- The refusal of an undelegated call, for the PL/pgSQL calls that take p_queue (C,
-- src/citus.cpp, as the C++ entry points check it): under Citus, once distributed, 0A000
-- with a hint unless p_queue is given and its shard is on this node; nothing without Citus.
CREATE FUNCTION awa._require_queue_local(p_queue text) RETURNS void
    AS 'MODULE_PATHNAME', 'awa_require_queue_local'
    LANGUAGE C VOLATILE PARALLEL UNSAFE
    SET search_path = pg_catalog, pg_temp;
REVOKE ALL ON FUNCTION awa._require_queue_local(text) FROM PUBLIC;
COMMENT ON FUNCTION awa._require_queue_local(text) IS 'Internal: under Citus, refuse (0A000) a call whose queue is not given or lives on another node.';

-- A statement over one queue's rows rewritten for this node's shards: the views of awa it
-- names expanded and every distributed table named by its shard holding the queue, when the
-- install is distributed and that shard is on this node; NULL otherwise (C, src/citus.cpp).
-- The PL/pgSQL reads of one queue (get_job, list_jobs) EXECUTE it, so that on the queue's
-- worker they read its shards only, where Citus would send a view's statement to every shard.
CREATE FUNCTION awa._queue_shard_sql(p_sql text, p_queue text) RETURNS text
    AS 'MODULE_PATHNAME', 'awa_queue_shard_sql'
    LANGUAGE C VOLATILE PARALLEL UNSAFE
    SET search_path = pg_catalog, pg_temp;
REVOKE ALL ON FUNCTION awa._queue_shard_sql(text, text) FROM PUBLIC;
COMMENT ON FUNCTION awa._queue_shard_sql(text, text) IS 'Internal: a statement over one queue rewritten for this node''s Citus shards, NULL when they are not here.';

-- The names of the shards of the given distributed tables placed on this node, in shard
-- order; NULL when none is here. Read from Citus' catalog by EXECUTE (it exists only under
-- Citus); the caller has checked awa._citus_group().
CREATE FUNCTION awa._citus_local_shard_names(p_tables regclass[]) RETURNS text[]
    LANGUAGE plpgsql VOLATILE
    SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_shards text[];
BEGIN
    EXECUTE $q$
        SELECT array_agg(pg_catalog.shard_name(s.logicalrelid, s.shardid) ORDER BY s.shardid)
          FROM pg_catalog.pg_dist_shard s
          JOIN pg_catalog.pg_dist_placement p ON p.shardid = s.shardid
          JOIN pg_catalog.pg_dist_local_group g ON g.groupid = p.groupid
         WHERE s.logicalrelid = ANY ($1)$q$
      INTO v_shards USING p_tables;
    RETURN v_shards;
END
$$;
REVOKE ALL ON FUNCTION awa._citus_local_shard_names(regclass[]) FROM PUBLIC;
COMMENT ON FUNCTION awa._citus_local_shard_names(regclass[]) IS 'Internal: the shards of the given distributed tables placed on this node (Citus).';

-- The queues whose shards this node holds: every known queue (settings, lanes, deferred or
-- dead-lettered jobs) in the shards of awa.queue_meta, awa.queue_enqueue_heads,
-- awa.deferred_jobs and awa.dlq_entries placed here, read from those shards themselves (one index probe per queue: an idle backlog costs
-- nothing). Nothing on a node without shards (the coordinator) or without Citus.
CREATE FUNCTION awa._citus_local_queues() RETURNS SETOF text
    LANGUAGE plpgsql VOLATILE
    SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_shards text[];
BEGIN
    IF awa._citus_group() IS NULL THEN
        RETURN;
    END IF;
    v_shards := awa._citus_local_shard_names(ARRAY['awa.queue_meta', 'awa.queue_enqueue_heads',
                                                   'awa.deferred_jobs', 'awa.dlq_entries']::regclass[]);
    IF v_shards IS NULL THEN
        RETURN;
    END IF;
    -- Each shard's distinct queues by skipping along its index on queue.
    RETURN QUERY EXECUTE
        'SELECT DISTINCT q FROM (' ||
        (SELECT string_agg(format(
            'SELECT q FROM (WITH RECURSIVE t(q) AS ('
            '  SELECT min(x.queue) FROM %1$s x '
            '  UNION ALL SELECT (SELECT min(x.queue) FROM %1$s x WHERE x.queue > t.q) FROM t WHERE t.q IS NOT NULL) '
            'SELECT t.q FROM t WHERE t.q IS NOT NULL) s', sh), ' UNION ALL ')
           FROM unnest(v_shards) sh) ||
        ') u ORDER BY q';
END
$$;
REVOKE ALL ON FUNCTION awa._citus_local_queues() FROM PUBLIC;
COMMENT ON FUNCTION awa._citus_local_queues() IS 'Internal: the queues whose shards this Citus node holds (none without Citus).';

-- Both rescues of one queue (awa._rescue on a Citus cluster, once per local queue): the
-- same search, order and outcome as awa._rescue, with queue = p_queue on every statement so
-- that Citus runs it on the queue's shards. The deadline search reads the queue's open
-- receipts from p_from on: this node's watermark (awa.rescue_progress, node-local), which
-- awa._rescue keeps over all of the node's queues as it does on one server.
CREATE FUNCTION awa._rescue_queue(p_queue text, p_stale interval, p_deadlines boolean, p_limit integer,
                                  p_from timestamptz,
                                  OUT deadline_rescued integer, OUT heartbeat_rescued integer)
    LANGUAGE plpgsql VOLATILE
    SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_now timestamptz := clock_timestamp();
    v_cutoff timestamptz := clock_timestamp() - p_stale;
    r record;
    t awa.taken_attempt;
BEGIN
    deadline_rescued := 0;
    heartbeat_rescued := 0;
    FOR r IN
        WITH deadlines AS (
            SELECT c.receipt_base, c.job_id, c.run_lease FROM awa._open_receipts c
             WHERE p_deadlines AND c.queue = p_queue AND c.deadline_at >= p_from AND c.deadline_at < v_now
            UNION ALL
            SELECT NULL, l.job_id, l.run_lease FROM awa.leases l
             WHERE p_deadlines AND l.queue = p_queue AND l.deadline_at IS NOT NULL AND l.deadline_at < v_now
               AND l.state = 'running'
            ORDER BY 1 NULLS LAST, 2, 3
            LIMIT p_limit),
        stale AS (
            SELECT c.receipt_base, c.job_id, c.run_lease FROM awa._open_receipts c
              LEFT JOIN awa.attempt_state a
                ON a.job_id = c.job_id AND a.run_lease = c.run_lease AND a.queue = c.queue AND a.queue = p_queue
             WHERE v_cutoff IS NOT NULL AND c.queue = p_queue AND c.claimed_at < v_cutoff
               AND coalesce(a.heartbeat_at, c.claimed_at) < v_cutoff
            UNION ALL
            SELECT NULL, l.job_id, l.run_lease FROM awa.leases l
             WHERE v_cutoff IS NOT NULL AND l.queue = p_queue AND l.state = 'running' AND l.heartbeat_at < v_cutoff
            ORDER BY 1 NULLS LAST, 2, 3
            LIMIT p_limit)
        SELECT DISTINCT ON (receipt_base, job_id, run_lease) job_id, run_lease, due_deadline
          FROM (SELECT receipt_base, job_id, run_lease, true AS due_deadline FROM deadlines
                UNION ALL
                SELECT receipt_base, job_id, run_lease, false FROM stale) due
         ORDER BY receipt_base NULLS LAST, job_id, run_lease, due_deadline DESC
    LOOP
        t := awa._take_attempt_unless_busy(r.job_id, r.run_lease,
                                           CASE WHEN r.due_deadline THEN 'deadline_expired' ELSE 'rescued' END,
                                           p_queue);
        CONTINUE WHEN t.job_id IS NULL;
        IF r.due_deadline THEN
            PERFORM awa._rescue_taken(t, 'hard deadline exceeded');
            deadline_rescued := deadline_rescued + 1;
        ELSE
            PERFORM awa._rescue_taken(t, 'heartbeat stale: worker presumed dead');
            heartbeat_rescued := heartbeat_rescued + 1;
        END IF;
    END LOOP;
    IF v_cutoff IS NOT NULL THEN
        -- Stale heartbeat rows of attempts no longer open (as awa._rescue), by key.
        DELETE FROM awa.attempt_state a
         WHERE a.queue = p_queue AND a.heartbeat_at < v_cutoff
           AND (a.job_id, a.run_lease) IN (
             SELECT s.job_id, s.run_lease FROM awa.attempt_state s
              WHERE s.queue = p_queue AND s.heartbeat_at < v_cutoff
                AND NOT EXISTS (SELECT 1 FROM awa._open_receipts c
                                 WHERE c.job_id = s.job_id AND c.run_lease = s.run_lease AND c.queue = p_queue)
                AND NOT EXISTS (SELECT 1 FROM awa.leases l
                                 WHERE l.job_id = s.job_id AND l.run_lease = s.run_lease AND l.queue = p_queue
                                   AND l.state IN ('running', 'waiting_external'))
              LIMIT p_limit);
    END IF;
END
$$;
REVOKE ALL ON FUNCTION awa._rescue_queue(text, interval, boolean, integer, timestamptz) FROM PUBLIC;
COMMENT ON FUNCTION awa._rescue_queue(text, interval, boolean, integer, timestamptz) IS 'Internal: both rescues of one queue, every statement in that queue (maintenance on a Citus cluster).';

-- Priority aging of one queue (awa.age_waiting_priorities with p_queue on a Citus cluster):
-- the same lanes, order, prefix rule, limit and re-enqueue, with queue = p_queue on every
-- statement so that Citus runs it on the queue's shards, and no whole row of a table in a
-- statement (Citus would hand the shard's row type to awa._ready_as_deferred).
CREATE FUNCTION awa._age_waiting_queue(p_queue text, p_cutoff timestamptz, p_limit bigint) RETURNS integer
    LANGUAGE plpgsql VOLATILE
    SET search_path = pg_catalog, pg_temp SET plan_cache_mode = force_custom_plan
AS $$
DECLARE
    v_priorities smallint[];
    v_shards smallint[];
    v_claims bigint[];
    v_rows awa.deferred_jobs[];
BEGIN
    -- The lanes with a waiting row old enough, then their heads locked (SKIP LOCKED: lanes
    -- being claimed right now are left for the next run); two statements, since Citus does
    -- not route a locking statement that reads awa.lane_cursors. A lane found but no longer
    -- old enough once locked contributes nothing below (its prefix is empty).
    SELECT array_agg(DISTINCT k.priority), array_agg(DISTINCT k.enqueue_shard)
      INTO v_priorities, v_shards
      FROM awa.lane_cursors k
      JOIN awa.ready_entries r
        ON r.queue = k.queue AND r.priority = k.priority
       AND r.enqueue_shard = k.enqueue_shard AND r.lane_seq >= k.claim_seq
     WHERE k.queue = p_queue AND r.queue = p_queue AND k.priority > 1 AND r.run_at <= p_cutoff;
    IF v_priorities IS NULL THEN
        RETURN 0;
    END IF;
    SELECT array_agg(h.priority), array_agg(h.enqueue_shard)
      INTO v_priorities, v_shards
      FROM (SELECT c.priority, c.enqueue_shard FROM awa.queue_claim_heads c
             WHERE c.queue = p_queue AND c.priority = ANY (v_priorities) AND c.enqueue_shard = ANY (v_shards)
             ORDER BY c.priority, c.enqueue_shard
               FOR UPDATE SKIP LOCKED) h;
    IF v_priorities IS NULL THEN
        RETURN 0;
    END IF;
    PERFORM awa._heads_locked(p_queue);
    -- The locked lanes' cursors on the latest committed state: no claim can move them now.
    SELECT array_agg(awa._lane_cursor(p_queue, l.priority, l.enqueue_shard) ORDER BY l.ord) INTO v_claims
      FROM unnest(v_priorities, v_shards) WITH ORDINALITY AS l(priority, enqueue_shard, ord);
    WITH waiting AS (
        SELECT r.ready_slot, r.priority, r.enqueue_shard, r.lane_seq,
               bool_and(r.run_at <= p_cutoff) OVER (PARTITION BY r.priority, r.enqueue_shard
                                                    ORDER BY r.lane_seq) AS in_prefix
          FROM unnest(v_priorities, v_shards, v_claims) AS h(priority, enqueue_shard, claim_seq)
          JOIN awa.ready_entries r
            ON r.queue = p_queue AND r.priority = h.priority AND r.enqueue_shard = h.enqueue_shard
           AND r.lane_seq >= h.claim_seq),
    victims AS (
        SELECT w.* FROM waiting w WHERE w.in_prefix
         ORDER BY w.priority, w.enqueue_shard, w.lane_seq
         LIMIT p_limit),
    gone AS (
        DELETE FROM awa.ready_entries r USING victims v
         WHERE r.queue = p_queue AND r.ready_slot = v.ready_slot AND r.priority = v.priority
           AND r.enqueue_shard = v.enqueue_shard AND r.lane_seq = v.lane_seq
        RETURNING r.*)
    SELECT array_agg(awa._ready_as_deferred(g::awa.ready_entries, p_queue, (g.priority - 1)::smallint,
                         jsonb_build_object('_awa_original_priority', g.priority))
                     ORDER BY g.priority, g.enqueue_shard, g.lane_seq)
      INTO v_rows FROM gone g;
    IF v_rows IS NULL THEN
        RETURN 0;
    END IF;
    RETURN awa._enqueue_ready(v_rows);
END
$$;
REVOKE ALL ON FUNCTION awa._age_waiting_queue(text, timestamptz, bigint) FROM PUBLIC;
COMMENT ON FUNCTION awa._age_waiting_queue(text, timestamptz, bigint) IS 'Internal: priority aging of one queue, every statement in that queue (awa.age_waiting_priorities on a Citus cluster).';

-- The lanes of one local queue whose sequence is missing on this node (a Citus cluster: the
-- queue's shards were moved here, or the split shard its sequences belonged to was dropped)
-- get it again, past the lane's rows (awa._restore_lane_sequence: a lane whose lock a producer
-- holds is left to that producer, a lane dropped meanwhile stays dropped), so a claim takes
-- their pending jobs before any enqueue has made the sequence again. Returns how many.
CREATE FUNCTION awa._citus_restore_lane_sequences(p_queue text) RETURNS integer
    LANGUAGE plpgsql VOLATILE
    SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    l record;
    v_count integer := 0;
BEGIN
    FOR l IN SELECT e.priority, e.enqueue_shard FROM awa.queue_enqueue_heads e
              WHERE e.queue = p_queue AND to_regclass('awa.' || quote_ident(e.seq_name)) IS NULL
              ORDER BY e.priority, e.enqueue_shard LOOP
        IF awa._restore_lane_sequence(p_queue, l.priority, l.enqueue_shard) THEN
            v_count := v_count + 1;
        END IF;
    END LOOP;
    RETURN v_count;
END
$$;
REVOKE ALL ON FUNCTION awa._citus_restore_lane_sequences(text) FROM PUBLIC;
COMMENT ON FUNCTION awa._citus_restore_lane_sequences(text) IS 'Internal: make again the lane sequences of a local queue missing on this Citus node (after a shard move or split).';

-- awa.fold_claim_marks for one queue (on a Citus cluster, once per local queue): the same two
-- steps with queue = p_queue on every statement. Returns the number of heads moved.
CREATE FUNCTION awa._fold_claim_marks_queue(p_queue text, p_limit bigint) RETURNS integer
    LANGUAGE plpgsql VOLATILE
    SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_count integer;
BEGIN
    DELETE FROM awa.claim_marks k
     WHERE k.queue = p_queue
       AND (k.priority, k.enqueue_shard, k.claim_seq) IN (
         SELECT m.priority, m.enqueue_shard, m.claim_seq FROM awa.claim_marks m
           JOIN awa.queue_claim_heads h
             ON h.queue = m.queue AND h.priority = m.priority AND h.enqueue_shard = m.enqueue_shard
          WHERE m.queue = p_queue AND h.queue = p_queue AND m.claim_seq < h.claim_seq
          LIMIT p_limit);
    WITH lanes AS (
        SELECT h.queue, h.priority, h.enqueue_shard, m.claim_seq, m.head_run_at
          FROM awa.queue_claim_heads h
         CROSS JOIN LATERAL (
             SELECT k.claim_seq, k.head_run_at FROM awa.claim_marks k
              WHERE k.queue = p_queue AND k.priority = h.priority AND k.enqueue_shard = h.enqueue_shard
              ORDER BY k.claim_seq DESC LIMIT 1) m
         WHERE h.queue = p_queue AND m.claim_seq > h.claim_seq
         ORDER BY h.priority, h.enqueue_shard
           FOR UPDATE OF h SKIP LOCKED),
    moved AS (
        UPDATE awa.queue_claim_heads h SET claim_seq = l.claim_seq, head_run_at = l.head_run_at
          FROM lanes l
         WHERE h.queue = p_queue AND l.queue = p_queue AND h.priority = l.priority
           AND h.enqueue_shard = l.enqueue_shard AND h.claim_seq < l.claim_seq
        RETURNING 1)
    SELECT count(*) INTO v_count FROM moved;
    IF v_count > 0 THEN
        PERFORM awa._heads_locked(p_queue);
    END IF;
    RETURN v_count;
END
$$;
REVOKE ALL ON FUNCTION awa._fold_claim_marks_queue(text, bigint) FROM PUBLIC;
COMMENT ON FUNCTION awa._fold_claim_marks_queue(text, bigint) IS 'Internal: awa.fold_claim_marks for one queue (maintenance on a Citus cluster).';

-- A statement once for every group of colocated shards on this node (C, src/citus.cpp): its
-- views of awa expanded and every distributed table named by its shard of the group, for
-- maintenance of this node's own shards that must not leave the node. An empty array where
-- no shard is placed; NULL without Citus or before awa.citus_setup().
CREATE FUNCTION awa._local_shard_sqls(p_sql text) RETURNS text[]
    AS 'MODULE_PATHNAME', 'awa_local_shard_sqls'
    LANGUAGE C VOLATILE PARALLEL UNSAFE
    SET search_path = pg_catalog, pg_temp;
REVOKE ALL ON FUNCTION awa._local_shard_sqls(text) FROM PUBLIC;
COMMENT ON FUNCTION awa._local_shard_sqls(text) IS 'Internal: a statement rewritten for each group of colocated Citus shards on this node.';

-- Whether this node's shards of a ring slot still hold something a reader needs (a Citus
-- worker's part of the slot's prune), the first test that finds something: a queue slot an
-- open attempt on one of its ready rows ('skipped_running'), a pending row -- at or past its
-- lane's claim cursor, or in a lane without a claim head ('skipped_pending') -- or a finished
-- job its queue keeps past the slot: a failed job (kept by default) or one within its queue's
-- retention ('skipped_retained'); a claim slot an open receipt ('skipped_open_receipts'); a
-- lease slot a lease ('skipped_open_leases'). NULL when none. Each test is one statement a
-- group of colocated shards here (awa._local_shard_sqls), stopping at the first that finds;
-- open receipts are asked of the slot's claim batches one by one (awa._open_claim_batches, as
-- on one server: through awa._open_receipts the planner may pair every ready row of a slot
-- with every claim batch of its lane).
-- Each statement is prepared once a session (named by ring, slot, test and shard group; made
-- again if its text changed, as after a split) and run from then on: a worker's free tests
-- the slot twice, the second time holding the slot's locks, which planning every shard group
-- again would prolong.
CREATE FUNCTION awa._citus_local_slot_busy(p_ring text, p_slot integer) RETURNS text
    LANGUAGE plpgsql VOLATILE
    SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_tests text[];
    v_sqls text[];
    v_sql text;
    v_name text;
    v_prepared text;
    v_found boolean;
BEGIN
    -- Pairs of (reason, statement), in the order tested.
    v_tests := CASE p_ring
        WHEN 'queue' THEN ARRAY[
            'skipped_running', format('SELECT 1 FROM awa._open_claim_batches b WHERE b.ready_slot = %s', p_slot),
            'skipped_running', format('SELECT 1 FROM awa.leases l WHERE l.ready_slot = %s', p_slot),
            'skipped_pending', format(
                'SELECT 1 FROM awa.ready_entries r LEFT JOIN awa.lane_cursors h'
                '  ON h.queue = r.queue AND h.priority = r.priority AND h.enqueue_shard = r.enqueue_shard'
                ' WHERE r.ready_slot = %s AND r.lane_seq >= coalesce(h.claim_seq, 0)', p_slot),
            -- What awa._retainable keeps: a failed job of a queue without a failed retention,
            -- or a finished job whose retention has not run out.
            'skipped_retained', format(
                'SELECT 1 FROM awa.done_entries d LEFT JOIN awa.queue_meta m ON m.queue = d.queue'
                ' WHERE d.ready_slot = %s'
                '   AND ((d.state = ''failed'' AND m.failed_retention IS NULL)'
                '        OR d.finalized_at + CASE WHEN d.state = ''completed'' THEN m.completed_retention'
                '                                 ELSE m.failed_retention END > clock_timestamp())', p_slot),
            'skipped_retained', format(
                'SELECT 1 FROM awa.completion_batches b JOIN awa.queue_meta m ON m.queue = b.queue'
                ' WHERE b.ready_slot = %s AND b.finalized_at + m.completed_retention > clock_timestamp()', p_slot)]
        WHEN 'claim' THEN ARRAY[
            'skipped_open_receipts', format('SELECT 1 FROM awa._open_claim_batches b WHERE b.claim_slot = %s', p_slot)]
        ELSE ARRAY[
            'skipped_open_leases', format('SELECT 1 FROM awa.leases l WHERE l.lease_slot = %s', p_slot)] END;
    FOR i IN 1 .. cardinality(v_tests) / 2 LOOP
        v_sqls := coalesce(awa._local_shard_sqls(v_tests[2 * i]), '{}');
        FOR g IN 1 .. cardinality(v_sqls) LOOP
            v_name := format('awa_slot_busy_%s_%s_%s_%s', p_ring, p_slot, i, g);
            v_sql := format('PREPARE %I AS SELECT EXISTS (%s)', v_name, v_sqls[g]);
            SELECT p.statement INTO v_prepared FROM pg_catalog.pg_prepared_statements p WHERE p.name = v_name;
            IF v_prepared IS DISTINCT FROM v_sql THEN
                IF v_prepared IS NOT NULL THEN
                    EXECUTE format('DEALLOCATE %I', v_name);
                END IF;
                EXECUTE v_sql;
            END IF;
            EXECUTE format('EXECUTE %I', v_name) INTO v_found;
            IF v_found THEN
                RETURN v_tests[2 * i - 1];
            END IF;
        END LOOP;
    END LOOP;
    RETURN NULL;
END
$$;
REVOKE ALL ON FUNCTION awa._citus_local_slot_busy(text, integer) FROM PUBLIC;
COMMENT ON FUNCTION awa._citus_local_slot_busy(text, integer) IS 'Internal: what this Citus node''s shards of a ring slot still hold that a reader needs; NULL when nothing.';

-- Lock every claim head of a queue, skipping those another transaction holds (a statement
-- routed to the queue's worker); whether all were locked (awa._citus_move_queue_slot).
CREATE FUNCTION awa._citus_lock_queue_heads(p_queue text) RETURNS boolean
    LANGUAGE plpgsql VOLATILE
    SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_locked bigint;
BEGIN
    PERFORM 1 FROM awa.queue_claim_heads h WHERE h.queue = p_queue
     ORDER BY h.priority, h.enqueue_shard FOR UPDATE SKIP LOCKED;
    GET DIAGNOSTICS v_locked = ROW_COUNT;
    PERFORM awa._heads_locked(p_queue);
    RETURN v_locked = (SELECT count(*) FROM awa.queue_claim_heads h WHERE h.queue = p_queue);
END
$$;
REVOKE ALL ON FUNCTION awa._citus_lock_queue_heads(text) FROM PUBLIC;
COMMENT ON FUNCTION awa._citus_lock_queue_heads(text) IS 'Internal: lock a queue''s claim heads, skipping held ones; whether all were locked (the queue ring''s move on a Citus cluster).';

-- The queue ring's move on a Citus cluster (awa._citus_prune_queue_slot, on the
-- coordinator): the pending rows of a sealed slot (at or past their lane's claim cursor, or
-- in a lane without a claim head) go into the current slot, queue by queue, with their lane
-- identity and lane_seq (only ready_slot and ready_generation change). Every statement names
-- one queue, so Citus runs it on that queue's worker alone; the moves commit with the
-- caller's transaction, on every worker at once. The slot's partitions are share-locked on
-- every node first (no writer adds to the slot; in short tries, as on one server, AWA01
-- 'skipped_locked' when they do not come), then each queue's claim heads, SKIP LOCKED: a
-- queue one of whose heads a claim holds is left for a later prune. (Once a connection to a
-- worker has run a command of the transaction, Citus turns a lock refused on it into an
-- error that aborts the whole transaction, so no lock after the first is asked NOWAIT.)
-- Returns the rows moved. Finished jobs kept past the slot are not moved (docs/scale-out.md,
-- "Maintenance").
CREATE FUNCTION awa._citus_move_queue_slot(p_slot integer, p_to_slot integer, p_to_generation bigint,
                                           p_budget_ms integer)
    RETURNS bigint
    LANGUAGE plpgsql VOLATILE
    SET search_path = pg_catalog, pg_temp SET jit = off
AS $$
DECLARE
    v_queues text[];
    v_locked text[] := '{}';
    v_queue text;
    v_moved bigint := 0;
    v_rows bigint;
    v_cols text;
    v_select text;
    v_pending text;
    v_cursor_priorities smallint[];
    v_cursor_shards smallint[];
    v_cursor_seqs bigint[];
    v_from bigint;
    l record;
BEGIN
    IF NOT awa._lock_ring_partitions(ARRAY['ready_entries_' || p_slot, 'done_entries_' || p_slot,
                                           'completion_batches_' || p_slot], p_budget_ms, true) THEN
        RAISE EXCEPTION USING ERRCODE = 'AWA01', MESSAGE = 'skipped_locked';
    END IF;
    SELECT array_agg(x.queue ORDER BY x.queue) INTO v_queues
      FROM (SELECT DISTINCT r.queue FROM awa.ready_entries r WHERE r.ready_slot = p_slot) x;
    -- A claim can take rows of the slot only under one of these heads: the queues whose
    -- heads are all held move.
    FOREACH v_queue IN ARRAY coalesce(v_queues, '{}') LOOP
        IF awa._citus_lock_queue_heads(v_queue) THEN
            v_locked := v_locked || v_queue;
        END IF;
    END LOOP;
    -- Whole rows are not named (Citus gives them its shards' row types): every column is,
    -- with the new slot and generation.
    SELECT string_agg(quote_ident(a.attname), ', ' ORDER BY a.attnum),
           string_agg(CASE a.attname WHEN 'ready_slot' THEN p_to_slot::text
                                     WHEN 'ready_generation' THEN p_to_generation::text
                                     ELSE 'r.' || quote_ident(a.attname) END, ', ' ORDER BY a.attnum)
      INTO v_cols, v_select
      FROM pg_catalog.pg_attribute a
     WHERE a.attrelid = 'awa.ready_entries'::regclass AND a.attnum > 0 AND NOT a.attisdropped;
    FOREACH v_queue IN ARRAY v_locked LOOP
        -- Literals: every statement is routed by its queue. The heads are held, so the
        -- cursors, the copy and the delete see the same rows. The queue's cursors are read
        -- once and each lane of the slot is moved from its own (a lane without a claim head
        -- from its first row): a cursor read inside the statement was read again for every
        -- row of the slot.
        EXECUTE format('SELECT array_agg(c.priority), array_agg(c.enqueue_shard), array_agg(c.claim_seq)'
                       '  FROM awa.lane_cursors c WHERE c.queue = %L', v_queue)
           INTO v_cursor_priorities, v_cursor_shards, v_cursor_seqs;
        FOR l IN EXECUTE format('SELECT DISTINCT r.priority, r.enqueue_shard FROM awa.ready_entries r'
                                ' WHERE r.queue = %L AND r.ready_slot = %s', v_queue, p_slot) LOOP
            v_from := coalesce((SELECT c.claim_seq
                                  FROM unnest(v_cursor_priorities, v_cursor_shards, v_cursor_seqs)
                                       AS c(priority, enqueue_shard, claim_seq)
                                 WHERE c.priority = l.priority AND c.enqueue_shard = l.enqueue_shard), 0);
            v_pending := format('r.queue = %L AND r.priority = %s AND r.enqueue_shard = %s AND r.ready_slot = %s'
                                ' AND r.lane_seq >= %s', v_queue, l.priority, l.enqueue_shard, p_slot, v_from);
            EXECUTE format('INSERT INTO awa.ready_entries (%s) SELECT %s FROM awa.ready_entries r WHERE %s',
                           v_cols, v_select, v_pending);
            GET DIAGNOSTICS v_rows = ROW_COUNT;
            v_moved := v_moved + v_rows;
            EXECUTE format('DELETE FROM awa.ready_entries r WHERE %s', v_pending);
        END LOOP;
    END LOOP;
    RETURN v_moved;
END
$$;
REVOKE ALL ON FUNCTION awa._citus_move_queue_slot(integer, integer, bigint, integer) FROM PUBLIC;
COMMENT ON FUNCTION awa._citus_move_queue_slot(integer, integer, bigint, integer) IS 'Internal: move a sealed queue slot''s pending rows into the current slot, queue by queue, each queue''s statements on its Citus worker.';

-- Whether every snapshot of this worker sees the moves of a queue slot (awa._citus_prune_queue_slot):
-- p_horizons holds, per Citus group, the next transaction id its node was to assign once the
-- move had committed (awa._next_xid, read in a later prune); a snapshot that does not see the
-- move is older than that and holds back this node's horizon. True on a node without one.
CREATE FUNCTION awa._citus_move_seen(p_horizons jsonb) RETURNS boolean
    LANGUAGE plpgsql VOLATILE
    SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_next text := p_horizons ->> awa._citus_group()::text;
BEGIN
    RETURN v_next IS NULL OR awa._seen_ended_by_all((v_next::numeric - 1)::text::xid8);
END
$$;
REVOKE ALL ON FUNCTION awa._citus_move_seen(jsonb) FROM PUBLIC;
COMMENT ON FUNCTION awa._citus_move_seen(jsonb) IS 'Internal: whether every snapshot of this Citus node sees a queue slot''s move, given the horizons read after it.';

-- A worker's part of freeing a sealed slot of a ring on a Citus cluster (awa._citus_free_ring_slot
-- runs it on every worker, each in a transaction of its own): this node's shards of the slot
-- are truncated once nothing in them is needed, with the locks of one server taken here alone
-- (Citus would send a LOCK or TRUNCATE of a distributed table to every node) and in short
-- tries: SHARE ROW EXCLUSIVE on the slot's partitions and their shards here keeps this node's
-- writers out, the test is made again, the unique claims of the queue slot's finished jobs
-- are dropped (a claim row another transaction holds is skipped), and ACCESS EXCLUSIVE is
-- taken for the truncate alone. The closure is noted (awa.ring_slot_closures): until the
-- coordinator frees the slot, a writer here that read it as current before it was sealed
-- finds it closed and reads the ring again (src/ring.cpp). Returns freed (also when this node
-- had freed it already, or holds no shard), what still holds the slot here
-- (awa._citus_local_slot_busy), skipped_locked, skipped_not_sealed when this node still sees
-- the slot current (or p_generation is a free slot's), or skipped_generation when the slot no
-- longer has p_generation.
CREATE FUNCTION awa._citus_free_local_ring_slot(p_ring text, p_slot integer, p_generation bigint,
                                                p_budget_ms integer) RETURNS text
    LANGUAGE plpgsql VOLATILE
    SET search_path = pg_catalog, pg_temp SET jit = off
AS $$
DECLARE
    v_parents constant text[] := CASE p_ring
        WHEN 'queue' THEN ARRAY['ready_entries_', 'done_entries_', 'completion_batches_']
        WHEN 'claim' THEN ARRAY['claim_batches_', 'lease_claim_closures_']
        ELSE ARRAY['leases_'] END;
    v_partitions text[];
    v_shards text[];
    v_generation bigint;
    v_reason text;
    v_sql text;
    v_shared_at timestamptz;
    v_current boolean;
BEGIN
    PERFORM awa._check_arg(p_ring IN ('queue', 'claim', 'lease'), 'p_ring must be queue, claim or lease');
    EXECUTE format('SELECT s.generation, s.slot = r.current_slot FROM awa.%I s, awa.%I r WHERE s.slot = $1',
                   p_ring || '_ring_slots', p_ring || '_ring_state')
      INTO v_generation, v_current USING p_slot;
    -- This node's own view of the ring: a rotation it has not applied yet (its part of the
    -- two-phase commit still to come) leaves the slot current here, where producers write.
    IF v_current OR p_generation < 0 THEN
        RETURN 'skipped_not_sealed';
    END IF;
    IF v_generation IS DISTINCT FROM p_generation THEN
        RETURN 'skipped_generation';
    END IF;
    IF EXISTS (SELECT 1 FROM awa.ring_slot_closures c
                WHERE c.ring = p_ring AND c.slot = p_slot AND c.generation = p_generation) THEN
        RETURN 'freed';
    END IF;
    -- Without a lock first: a slot still in use costs none.
    v_reason := awa._citus_local_slot_busy(p_ring, p_slot);
    IF v_reason IS NOT NULL THEN
        RETURN v_reason;
    END IF;
    v_partitions := ARRAY(SELECT 'awa.' || quote_ident(t || p_slot) FROM unnest(v_parents) t);
    v_shards := coalesce(awa._citus_local_shard_names(v_partitions::regclass[]), '{}');
    -- This node's locks alone, and its shards named: for this transaction only.
    PERFORM set_config('citus.enable_ddl_propagation', 'off', true);
    PERFORM set_config('citus.enable_manual_changes_to_shards', 'on', true);
    BEGIN
        IF NOT awa._lock_relations_briefly(v_partitions || v_shards, p_budget_ms, true) THEN
            RAISE EXCEPTION USING ERRCODE = 'AWA01', MESSAGE = 'skipped_locked';
        END IF;
        v_shared_at := clock_timestamp();
        v_reason := awa._citus_local_slot_busy(p_ring, p_slot);
        IF v_reason IS NOT NULL THEN
            RAISE EXCEPTION USING ERRCODE = 'AWA01', MESSAGE = v_reason;
        END IF;
        IF p_ring = 'queue' THEN
            FOREACH v_sql IN ARRAY awa._local_shard_sqls(format(
                'DELETE FROM awa.job_unique_claims u WHERE u.ctid = ANY (ARRAY('
                '  SELECT c.ctid FROM awa.job_unique_claims c'
                '   WHERE (c.queue, c.job_id) IN (SELECT d.queue, d.job_id FROM awa.done_entries d WHERE d.ready_slot = %1$s'
                '                                 UNION ALL'
                '                                 SELECT b.queue, b.job_id FROM awa._batch_completions b WHERE b.ready_slot = %1$s)'
                '     FOR UPDATE SKIP LOCKED))', p_slot)) LOOP
                EXECUTE v_sql;
            END LOOP;
        END IF;
        -- The share lock is held for less than half of deadlock_timeout in all: a writer that
        -- read the slot in its transaction waits for it, and had that wait outlasted
        -- deadlock_timeout while this one waited for the writer's read lock, the deadlock
        -- check would cancel the writer (seen under traffic with cancel_job).
        IF NOT awa._lock_relations_briefly(
                v_partitions || v_shards,
                greatest(0, least(p_budget_ms,
                                  extract(epoch FROM current_setting('deadlock_timeout')::interval) * 500
                                  - extract(epoch FROM clock_timestamp() - v_shared_at) * 1000))::integer,
                false) THEN
            RAISE EXCEPTION USING ERRCODE = 'AWA01', MESSAGE = 'skipped_locked';
        END IF;
    EXCEPTION WHEN SQLSTATE 'AWA01' THEN
        GET STACKED DIAGNOSTICS v_reason = MESSAGE_TEXT;
        RETURN v_reason;
    END;
    IF cardinality(v_shards) > 0 THEN
        EXECUTE 'TRUNCATE ' || array_to_string(v_shards, ', ');
    END IF;
    DELETE FROM awa.ring_slot_closures c WHERE c.ring = p_ring AND c.slot = p_slot;
    INSERT INTO awa.ring_slot_closures (ring, slot, generation) VALUES (p_ring, p_slot, p_generation);
    RETURN 'freed';
END
$$;
REVOKE ALL ON FUNCTION awa._citus_free_local_ring_slot(text, integer, bigint, integer) FROM PUBLIC;
COMMENT ON FUNCTION awa._citus_free_local_ring_slot(text, integer, bigint, integer) IS 'Internal: a Citus worker''s part of freeing a sealed ring slot: truncate this node''s shards of it under local locks once nothing there is needed.';

-- Free a sealed slot of a ring on a Citus cluster (the coordinator's prunes): every worker
-- frees its own shards of the slot, each in a transaction of its own
-- (awa._citus_free_local_ring_slot over run_command_on_workers, whose connections are not
-- this transaction's), and once all have, the slot is marked free here. So no lock is ever
-- asked over a connection of this transaction, where Citus would turn a refusal into an
-- error that aborts it ("failure on connection marked as essential"); this transaction must
-- not have read the slot's shards before (the worker's locks would wait for its own).
-- Returns pruned, skipped_not_sealed (the slot is the current one or free: nothing is
-- asked), or the first reason a worker gave, in this order: skipped_worker_error (a worker
-- failed or is down: no move is tried either), skipped_not_sealed (a worker still sees the
-- slot current: its rotation has not reached it), skipped_running, skipped_open_receipts,
-- skipped_open_leases, skipped_pending, skipped_retained, skipped_locked, skipped_generation.
CREATE FUNCTION awa._citus_free_ring_slot(p_ring text, p_slot integer, p_budget_ms integer) RETURNS text
    LANGUAGE plpgsql VOLATILE
    SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_generation bigint;
    v_reasons text[];
    v_failures text;
BEGIN
    EXECUTE format('SELECT s.generation FROM awa.%I s, awa.%I r WHERE s.slot = $1 AND s.slot <> r.current_slot',
                   p_ring || '_ring_slots', p_ring || '_ring_state')
      INTO v_generation USING p_slot;
    IF v_generation IS NULL OR v_generation < 0 THEN
        RETURN 'skipped_not_sealed';
    END IF;
    EXECUTE $q$SELECT array_agg(CASE WHEN w.success THEN w.result ELSE 'skipped_worker_error' END),
                      string_agg(w.nodename || ':' || w.nodeport || ': ' || w.result, '; ') FILTER (WHERE NOT w.success)
                 FROM pg_catalog.run_command_on_workers($1) w$q$
      INTO v_reasons, v_failures
      USING format('SELECT awa._citus_free_local_ring_slot(%L, %s, %s, %s)', p_ring, p_slot, v_generation, p_budget_ms);
    IF v_failures IS NOT NULL THEN
        RAISE WARNING 'awa_shard: freeing slot % of the % ring failed on a worker: %', p_slot, p_ring, v_failures;
    END IF;
    IF EXISTS (SELECT 1 FROM unnest(v_reasons) r WHERE r <> 'freed') THEN
        RETURN (SELECT r FROM unnest(v_reasons) r WHERE r <> 'freed'
                 ORDER BY array_position(ARRAY['skipped_worker_error', 'skipped_not_sealed', 'skipped_running',
                                               'skipped_open_receipts', 'skipped_open_leases', 'skipped_pending',
                                               'skipped_retained', 'skipped_locked', 'skipped_generation'], r) NULLS LAST
                 LIMIT 1);
    END IF;
    EXECUTE format('UPDATE awa.%I SET generation = -1%s WHERE slot = $1 AND generation = $2',
                   p_ring || '_ring_slots', CASE WHEN p_ring = 'queue' THEN ', moved_xid = NULL, moved_horizons = NULL' ELSE '' END)
      USING p_slot, v_generation;
    PERFORM awa._ring_slot_freed(p_ring, p_slot);
    RETURN 'pruned';
END
$$;
REVOKE ALL ON FUNCTION awa._citus_free_ring_slot(text, integer, integer) FROM PUBLIC;
COMMENT ON FUNCTION awa._citus_free_ring_slot(text, integer, integer) IS 'Internal: free a sealed ring slot on a Citus cluster: each worker truncates its own shards of it in a transaction of its own, then the slot is marked free.';

-- The queue ring's prune on a Citus cluster (awa.prune_queue_ring on the coordinator;
-- docs/scale-out.md, "Maintenance"), in steps as on one server:
--   1. the workers free their shards of the slot (awa._citus_free_ring_slot) once nothing
--      in them is needed; the slot is freed once all have ('pruned');
--   2. a slot whose pending rows keep it ('skipped_pending') has them moved into the current
--      slot, on their workers, in this transaction (awa._citus_move_queue_slot), and is
--      marked moved ('moved'); with p_amortised only once the ring is full (the slot after
--      the current one is live), so a backlog is copied at most once a turn of the ring;
--      finished jobs kept past the slot are not moved, so they keep it ('skipped_retained');
--   3. a later call reads each worker's next transaction id ('skipped_snapshots'): every
--      xid the move used on a worker is below it;
--   4. once every worker's snapshots have passed it (awa._citus_move_seen, on every worker),
--      step 1 again (rows written there since by a producer that read the ring before the
--      slot was sealed are moved again).
-- Returns pruned / moved / skipped_snapshots / skipped_running / skipped_pending /
-- skipped_retained / skipped_locked / skipped_not_sealed / skipped_generation /
-- skipped_worker_error.
CREATE FUNCTION awa._citus_prune_queue_slot(p_slot integer, p_budget_ms integer, p_to_slot integer,
                                            p_to_generation bigint, p_amortised boolean) RETURNS text
    LANGUAGE plpgsql VOLATILE
    SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_reason text;
    v_moved_by xid8;
    v_horizons jsonb;
    v_moved bigint;
BEGIN
    SELECT s.moved_xid, s.moved_horizons INTO v_moved_by, v_horizons
      FROM awa.queue_ring_slots s WHERE s.slot = p_slot;
    IF v_moved_by IS NOT NULL THEN
        IF v_horizons IS NULL THEN
            EXECUTE $q$SELECT jsonb_object_agg(split_part(w.result, ':', 1), split_part(w.result, ':', 2))
                         FILTER (WHERE w.success), bool_and(w.success)
                         FROM pg_catalog.run_command_on_workers(
                                  'SELECT awa._citus_group() || '':'' || awa._next_xid()') w$q$
              INTO v_horizons, v_reason;
            IF v_reason::boolean THEN
                UPDATE awa.queue_ring_slots SET moved_horizons = v_horizons WHERE slot = p_slot;
            END IF;
            RETURN 'skipped_snapshots';
        END IF;
        EXECUTE 'SELECT bool_and(w.success AND w.result = ''t'') FROM pg_catalog.run_command_on_workers($1) w'
          INTO v_reason USING format('SELECT awa._citus_move_seen(%L)', v_horizons);
        IF NOT v_reason::boolean THEN
            RETURN 'skipped_snapshots';
        END IF;
    END IF;
    -- First, before this transaction reads anything of the slot on a worker.
    v_reason := awa._citus_free_ring_slot('queue', p_slot, p_budget_ms);
    IF v_reason <> 'skipped_pending'
       OR (p_amortised
           AND (SELECT s.generation FROM awa.queue_ring_slots s
                 WHERE s.slot = (p_to_slot + 1) % (SELECT st.slot_count FROM awa.queue_ring_state st)) < 0) THEN
        RETURN v_reason;
    END IF;
    BEGIN
        v_moved := awa._citus_move_queue_slot(p_slot, p_to_slot, p_to_generation, p_budget_ms);
    EXCEPTION WHEN SQLSTATE 'AWA01' THEN
        GET STACKED DIAGNOSTICS v_reason = MESSAGE_TEXT;
        RETURN v_reason;
    END;
    IF v_moved > 0 THEN
        -- A snapshot on a worker that does not see this move still reads the rows here.
        UPDATE awa.queue_ring_slots SET moved_xid = pg_catalog.pg_current_xact_id(), moved_horizons = NULL
         WHERE slot = p_slot;
        RETURN 'moved';
    END IF;
    -- Nothing moved (claims held the heads of every queue with pending rows): a later call.
    RETURN v_reason;
END
$$;
REVOKE ALL ON FUNCTION awa._citus_prune_queue_slot(integer, integer, integer, bigint, boolean) FROM PUBLIC;
COMMENT ON FUNCTION awa._citus_prune_queue_slot(integer, integer, integer, bigint, boolean) IS 'Internal: the queue ring''s prune on a Citus cluster: free the oldest sealed slot on every worker, or move its pending rows forward and free it once no snapshot of a worker needs them.';

-- Cross-queue views on a Citus cluster (docs/scale-out.md, "Views and counts"). The rows of
-- awa.queues for the queues whose shards this node holds (awa._citus_local_queues), as a
-- JSON array: each row is read with queue = $n on every statement, so Citus answers it from
-- the local shards; the lane sequences (the cheap depth) exist only here.
CREATE FUNCTION awa._citus_local_queue_rows() RETURNS jsonb
    LANGUAGE plpgsql STABLE
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp SET jit = off
AS $$
DECLARE
    v_rows jsonb := '[]';
    v_queue text;
    v_row jsonb;
    c record;
    v_depth bigint;
    v_oldest interval;
BEGIN
    -- One statement per function call: a statement over one queue's shards that also calls a
    -- function reading them would be sent to the shard whole, and that nested read refused.
    FOR v_queue IN SELECT q FROM awa._citus_local_queues() q LOOP
        SELECT * INTO c FROM awa.queue_counts_exact(v_queue);
        v_depth := awa._queue_depth(v_queue);
        SELECT CASE WHEN min(r.run_at) IS NOT NULL THEN greatest(now() - min(r.run_at), interval '0') END
          INTO v_oldest
          FROM awa.lane_cursors h
          JOIN awa.ready_entries r
            ON r.queue = h.queue AND r.priority = h.priority AND r.enqueue_shard = h.enqueue_shard
           AND r.lane_seq >= h.claim_seq
         WHERE h.queue = v_queue AND r.queue = v_queue;
        SELECT to_jsonb(x) INTO v_row FROM (
            SELECT v_queue AS queue, coalesce(m.enqueue_shards, 1::smallint) AS enqueue_shards,
                   coalesce(m.paused, false) AS paused,
                   coalesce(m.dlq_enabled, (SELECT s.dlq_enabled_by_default FROM awa.plane_settings s)) AS dlq_enabled,
                   v_depth AS depth,
                   c.available, c.scheduled, c.retryable, c.running, c.completed, c.failed, c.cancelled, c.dlq,
                   v_oldest AS oldest_waiting_age,
                   m.rate_per_second, m.rate_burst, m.concurrency_limit, m.completed_retention, m.failed_retention,
                   m.key_concurrency_limit, m.key_rate_per_second, m.key_rate_burst
              FROM (SELECT) one
              LEFT JOIN awa.queue_meta m ON m.queue = v_queue) x;
        v_rows := v_rows || jsonb_build_array(v_row);
    END LOOP;
    RETURN v_rows;
END
$$;
REVOKE ALL ON FUNCTION awa._citus_local_queue_rows() FROM PUBLIC;
COMMENT ON FUNCTION awa._citus_local_queue_rows() IS 'Internal: the awa.queues rows of the queues whose shards this Citus node holds, as a JSON array.';

-- The awa.shard_lag rows of one queue: awa._shard_lag's statement with queue = p_queue on
-- every table, so that Citus runs it on the queue's shards alone (the next value of the lane
-- sequence is read in the target list: Citus does not push down a lateral subquery without
-- FROM next to awa.lane_cursors).
CREATE FUNCTION awa._shard_lag_of(p_queue text)
    RETURNS TABLE (queue text, priority smallint, enqueue_shard smallint, next_seq bigint,
                   claim_seq bigint, lag bigint, waiting bigint, oldest_run_at timestamptz,
                   enqueue_shards smallint, draining boolean)
    LANGUAGE plpgsql STABLE
    SET search_path = pg_catalog, pg_temp SET plan_cache_mode = force_custom_plan
AS $$
BEGIN
    RETURN QUERY
    SELECT x.queue, x.priority, x.enqueue_shard, x.next_seq, x.claim_seq, x.next_seq - x.claim_seq,
           x.waiting, x.oldest_run_at, x.enqueue_shards, x.enqueue_shard >= x.enqueue_shards
      FROM (SELECT e.queue, e.priority, e.enqueue_shard, awa._lane_next_seq(e.seq_name) AS next_seq,
                   h.claim_seq, w.waiting, w.oldest_run_at, coalesce(m.enqueue_shards, 1::smallint) AS enqueue_shards
              FROM awa.queue_enqueue_heads e
              JOIN awa.lane_cursors h
                ON h.queue = e.queue AND h.priority = e.priority AND h.enqueue_shard = e.enqueue_shard
               AND h.queue = p_queue
              LEFT JOIN awa.queue_meta m ON m.queue = e.queue AND m.queue = p_queue
             CROSS JOIN LATERAL (
                SELECT count(*) AS waiting, min(r.run_at) AS oldest_run_at
                  FROM awa.ready_entries r
                 WHERE r.queue = e.queue AND r.priority = e.priority AND r.enqueue_shard = e.enqueue_shard
                   AND r.lane_seq >= h.claim_seq AND r.queue = p_queue) w
             WHERE e.queue = p_queue) x;
END
$$;
REVOKE ALL ON FUNCTION awa._shard_lag_of(text) FROM PUBLIC;
COMMENT ON FUNCTION awa._shard_lag_of(text) IS 'Internal: the awa.shard_lag rows of one queue (on a Citus worker, for awa._citus_local_shard_lag_rows).';

-- The awa.shard_lag rows of the queues whose shards this node holds, as a JSON array: each
-- queue's lanes read with queue = $n on every statement (awa._shard_lag_of), so Citus
-- answers them from the local shards; the lane sequences exist only here.
CREATE FUNCTION awa._citus_local_shard_lag_rows() RETURNS jsonb
    LANGUAGE plpgsql STABLE
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp SET jit = off
AS $$
DECLARE
    v_rows jsonb := '[]';
    v_queue text;
BEGIN
    FOR v_queue IN SELECT q FROM awa._citus_local_queues() q LOOP
        v_rows := v_rows || coalesce((SELECT jsonb_agg(to_jsonb(l)) FROM awa._shard_lag_of(v_queue) l), '[]');
    END LOOP;
    RETURN v_rows;
END
$$;
REVOKE ALL ON FUNCTION awa._citus_local_shard_lag_rows() FROM PUBLIC;
COMMENT ON FUNCTION awa._citus_local_shard_lag_rows() IS 'Internal: the awa.shard_lag rows of the queues whose shards this Citus node holds, as a JSON array.';

-- The rows of a cross-queue view on a Citus node, as one JSON array: on a worker, its own
-- queues' rows (p_local_rows, the name of a node-local function returning them); on the
-- coordinator, every worker's answer to that function, gathered with run_command_on_workers.
-- A worker that does not answer fails the view (58000, its error as the detail): a view that
-- silently left out a worker's queues would under-report them.
CREATE FUNCTION awa._citus_gathered_rows(p_view text, p_local_rows text) RETURNS jsonb
    LANGUAGE plpgsql STABLE
    SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_rows jsonb := '[]';
    v_node record;
BEGIN
    IF awa._citus_group() <> 0 THEN
        EXECUTE format('SELECT awa.%I()', p_local_rows) INTO v_rows;
        RETURN v_rows;
    END IF;
    FOR v_node IN EXECUTE 'SELECT nodename, nodeport, success, result FROM pg_catalog.run_command_on_workers($1)'
                  USING format('SELECT awa.%I()', p_local_rows) LOOP
        IF NOT v_node.success THEN
            RAISE EXCEPTION '%: worker %:% did not answer', p_view, v_node.nodename, v_node.nodeport
                USING ERRCODE = '58000', DETAIL = v_node.result;
        END IF;
        v_rows := v_rows || v_node.result::jsonb;
    END LOOP;
    RETURN v_rows;
END
$$;
REVOKE ALL ON FUNCTION awa._citus_gathered_rows(text, text) FROM PUBLIC;
COMMENT ON FUNCTION awa._citus_gathered_rows(text, text) IS 'Internal: a cross-queue view''s rows on a Citus node (a worker''s own, or every worker''s on the coordinator), as a JSON array; 58000 when a worker does not answer.';

-- The awa.shard_stats rows of this Citus node, as a JSON array: its shared-memory counters
-- (the delegated calls of its queues run here), or, without the preload, each of its
-- queues' counters derived from its own shards (awa._shard_stats_of; the lane sequences
-- exist only here).
CREATE FUNCTION awa._citus_local_shard_stats_rows() RETURNS jsonb
    LANGUAGE plpgsql STABLE
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp SET jit = off
AS $$
DECLARE
    v_rows jsonb := '[]';
    v_queue text;
BEGIN
    IF awa._stats_preloaded() THEN
        RETURN coalesce((SELECT jsonb_agg(to_jsonb(s) || '{"source": "shared_memory"}') FROM awa._shard_stats() s), '[]');
    END IF;
    FOR v_queue IN SELECT q FROM awa._citus_local_queues() q LOOP
        v_rows := v_rows || coalesce((SELECT jsonb_agg(to_jsonb(s) || '{"since": null, "source": "tables"}')
                                        FROM awa._shard_stats_of(v_queue) s), '[]');
    END LOOP;
    RETURN v_rows;
END
$$;
REVOKE ALL ON FUNCTION awa._citus_local_shard_stats_rows() FROM PUBLIC;
COMMENT ON FUNCTION awa._citus_local_shard_stats_rows() IS 'Internal: the awa.shard_stats rows of this Citus node (its shared-memory counters, or its queues'' counters from its shards), as a JSON array.';

-- Per-(queue, enqueue_shard) counters: from shared memory when preloaded (since server
-- start or the last awa.reset_shard_stats(), source 'shared_memory'), otherwise derived
-- from the tables (since the lanes were created, source 'tables', since NULL); on a Citus
-- coordinator, every worker's (awa._shard_stats_rows).
CREATE OR REPLACE VIEW awa.shard_stats AS
    SELECT queue, enqueue_shard, enqueued, claimed, completed, failed, since, source
      FROM awa._shard_stats_rows();

-- The grants noted at the start on objects the update replaced (see there).
DO $awa_update_grants$
DECLARE
    v_statements text;
BEGIN
    SELECT pg_catalog.string_agg(DISTINCT pg_catalog.format('GRANT %s ON %s %s TO %s%s;', g->>'privilege_type',
                                  CASE g->>'kind' WHEN 'function' THEN 'FUNCTION' ELSE 'TABLE' END, n.name,
                                  CASE WHEN (g->>'grantee')::oid = 0 THEN 'PUBLIC'
                                       ELSE pg_catalog.quote_ident(pg_catalog.pg_get_userbyid((g->>'grantee')::oid)) END,
                                  CASE WHEN (g->>'is_grantable')::boolean THEN ' WITH GRANT OPTION' ELSE '' END), E'\n')
      INTO v_statements
      FROM pg_catalog.jsonb_array_elements(pg_catalog.current_setting('awa_update.grants')::jsonb) g
     CROSS JOIN LATERAL (
           SELECT pg_catalog.format('awa.%I(%s)', p.proname, pg_catalog.oidvectortypes(p.proargtypes)) AS name
             FROM pg_catalog.pg_proc p
            WHERE g->>'kind' = 'function' AND p.pronamespace = 'awa'::pg_catalog.regnamespace AND p.proname = g->>'name'
              AND NOT EXISTS (SELECT 1 FROM pg_catalog.pg_proc o WHERE o.oid = (g->>'oid')::oid)
           UNION ALL
           SELECT 'awa.' || pg_catalog.quote_ident(c.relname)
             FROM pg_catalog.pg_class c
            WHERE g->>'kind' = 'table' AND c.relnamespace = 'awa'::pg_catalog.regnamespace AND c.relname = g->>'name'
              AND NOT EXISTS (SELECT 1 FROM pg_catalog.pg_class o WHERE o.oid = (g->>'oid')::oid)) n;
    IF v_statements IS NOT NULL THEN
        RAISE WARNING 'the update replaced functions or tables on which roles of this database held grants; it does not give them again'
            USING DETAIL = E'To give them again, run:\n' || v_statements,
                  HINT = 'See docs/upgrade.md, "Grants of your own roles".';
    END IF;
END
$awa_update_grants$;
