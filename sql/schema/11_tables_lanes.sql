-- Lanes: one enqueue head and one claim head per (queue, priority, enqueue_shard), and the
-- claim marks that move a lane's claim cursor without updating a hot row.

-- One row per lane (queue, priority, enqueue_shard); seq_name is the lane's sequence.
CREATE TABLE awa.queue_enqueue_heads (
    queue text NOT NULL,
    priority smallint NOT NULL,
    enqueue_shard smallint NOT NULL DEFAULT 0,
    seq_name text NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (queue, priority, enqueue_shard))
    WITH (fillfactor = 50);
SELECT pg_catalog.pg_extension_config_dump('awa.queue_enqueue_heads', '');
GRANT SELECT ON awa.queue_enqueue_heads TO awa_admin;
COMMENT ON TABLE awa.queue_enqueue_heads IS 'One row per lane (queue, priority, enqueue_shard): the name of its enqueue sequence.';

-- The claim cursor of each lane: the lowest lane_seq not yet claimed or proven absent.
-- head_run_at is a hint written by the claim that moved the cursor: run_at of the ready
-- row at claim_seq when it was visible then (NULL: unknown, the claim walk looks it up).
CREATE TABLE awa.queue_claim_heads (
    queue text NOT NULL,
    priority smallint NOT NULL,
    enqueue_shard smallint NOT NULL DEFAULT 0,
    claim_seq bigint NOT NULL DEFAULT 1,
    head_run_at timestamptz,
    PRIMARY KEY (queue, priority, enqueue_shard))
    WITH (fillfactor = 50, autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_threshold = 200);
SELECT pg_catalog.pg_extension_config_dump('awa.queue_claim_heads', '');
GRANT SELECT ON awa.queue_claim_heads TO awa_admin;
COMMENT ON TABLE awa.queue_claim_heads IS
    'One row per lane, locked by a claim of the lane: the folded claim cursor claim_seq and its head_run_at hint (awa.lane_cursors adds the claim marks).';

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
GRANT SELECT ON awa.claim_marks TO awa_admin;
