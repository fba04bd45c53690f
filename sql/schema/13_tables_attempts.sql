-- Running attempts: leases (leases mode), claim batches (receipts, the default) and their
-- closures, heartbeats. Partitioned by lease-ring and claim-ring slot.

-- Running attempts in leases mode (and attempts materialised for long jobs).
CREATE TABLE awa.leases (
    lease_slot integer NOT NULL,
    lease_generation bigint NOT NULL,
    ready_slot integer NOT NULL,
    ready_generation bigint NOT NULL,
    job_id bigint NOT NULL,
    queue text NOT NULL,
    state awa.job_state NOT NULL DEFAULT 'running',
    priority smallint NOT NULL,
    effective_priority smallint NOT NULL,
    attempt smallint NOT NULL DEFAULT 1,
    run_lease bigint NOT NULL DEFAULT 1,
    max_attempts smallint NOT NULL DEFAULT 25,
    lane_seq bigint NOT NULL,
    enqueue_shard smallint NOT NULL DEFAULT 0,
    heartbeat_at timestamptz,
    deadline_at timestamptz,
    attempted_at timestamptz,
    callback_id uuid,
    callback_timeout_at timestamptz,
    PRIMARY KEY (queue, priority, enqueue_shard, lane_seq, lease_slot))
    PARTITION BY LIST (lease_slot);
CREATE INDEX leases_job_idx ON awa.leases (job_id, run_lease);
CREATE INDEX leases_deadline_idx ON awa.leases (deadline_at) WHERE deadline_at IS NOT NULL;
GRANT SELECT ON awa.leases TO awa_admin;
COMMENT ON TABLE awa.leases IS 'Running attempts in leases mode; partitioned by lease-ring slot.';

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
CREATE INDEX claim_batches_block_idx ON awa.claim_batches (queue, priority, enqueue_shard, lane_block, ready_slot);
CREATE INDEX claim_batches_deadline_idx ON awa.claim_batches (deadline_at) WHERE deadline_at IS NOT NULL;
GRANT SELECT ON awa.claim_batches TO awa_admin;
COMMENT ON TABLE awa.claim_batches IS 'Receipts mode: the records (receipts) of running attempts, one row per (claim call, lane, ready slot, block of 64 lane_seqs), as parallel arrays; partitioned by claim-ring slot.';

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

-- Closure evidence of a receipt: completed, rescued, deadline_expired, retryable, ...
-- Every key of a table holding job or attempt rows contains the queue (docs/design.md,
-- "Keys"), so that a distributed engine can place a queue's rows on one node; it comes last
-- where look-ups by id alone (a call without its queue) must keep using the key.
CREATE TABLE awa.lease_claim_closures (
    claim_slot integer NOT NULL,
    job_id bigint NOT NULL,
    run_lease bigint NOT NULL,
    outcome text NOT NULL,
    closed_at timestamptz NOT NULL DEFAULT clock_timestamp(),
    queue text NOT NULL,
    PRIMARY KEY (claim_slot, job_id, run_lease, queue))
    PARTITION BY LIST (claim_slot);
GRANT SELECT ON awa.lease_claim_closures TO awa_admin;
COMMENT ON TABLE awa.lease_claim_closures IS 'How each receipt ended (one closer wins); partitioned by claim-ring slot.';

-- The attempt-ring partitions: 8 lease-ring slots of leases, 8 claim-ring slots of claim
-- batches and their closures.
DO $$
BEGIN
    FOR s IN 0..7 LOOP
        EXECUTE format('CREATE TABLE awa.%I PARTITION OF awa.leases FOR VALUES IN (%s) WITH (fillfactor = 50)', 'leases_' || s, s);
        EXECUTE format('CREATE TABLE awa.%I PARTITION OF awa.lease_claim_closures FOR VALUES IN (%s)', 'lease_claim_closures_' || s, s);
        EXECUTE format('CREATE TABLE awa.%I PARTITION OF awa.claim_batches FOR VALUES IN (%s)', 'claim_batches_' || s, s);
        EXECUTE format('GRANT SELECT ON awa.%I, awa.%I, awa.%I TO awa_admin',
                       'leases_' || s, 'lease_claim_closures_' || s, 'claim_batches_' || s);
        PERFORM pg_catalog.pg_extension_config_dump(format('awa.%I', 'leases_' || s)::regclass, '');
        PERFORM pg_catalog.pg_extension_config_dump(format('awa.%I', 'claim_batches_' || s)::regclass, '');
        PERFORM pg_catalog.pg_extension_config_dump(format('awa.%I', 'lease_claim_closures_' || s)::regclass, '');
        EXECUTE format('COMMENT ON TABLE awa.%I IS %L', 'leases_' || s,
                       format('Partition of awa.leases for lease-ring slot %s.', s));
        EXECUTE format('COMMENT ON TABLE awa.%I IS %L', 'claim_batches_' || s,
                       format('Partition of awa.claim_batches for claim-ring slot %s.', s));
        EXECUTE format('COMMENT ON TABLE awa.%I IS %L', 'lease_claim_closures_' || s,
                       format('Partition of awa.lease_claim_closures for claim-ring slot %s.', s));
    END LOOP;
END
$$;

-- Heartbeats and progress of running attempts (receipts mode writes here, not to leases).
CREATE TABLE awa.attempt_state (
    job_id bigint NOT NULL,
    run_lease bigint NOT NULL,
    heartbeat_at timestamptz,
    progress jsonb,
    updated_at timestamptz NOT NULL DEFAULT clock_timestamp(),
    queue text NOT NULL,
    PRIMARY KEY (job_id, run_lease, queue))
    WITH (fillfactor = 80);
SELECT pg_catalog.pg_extension_config_dump('awa.attempt_state', '');
GRANT SELECT ON awa.attempt_state TO awa_admin;
COMMENT ON TABLE awa.attempt_state IS 'Heartbeats and progress of running attempts (receipts mode).';

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
