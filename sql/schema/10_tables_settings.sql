-- Settings: the engine state, the install-wide settings and the per-queue settings. Every
-- table that holds settings, lanes, cursors or jobs is marked for pg_dump (backups,
-- docs/operations.md): pg_dump keeps the data of extension tables only where they are
-- marked as configuration.

-- Engine state; migration v017 refuses to run while it is 'mixed_transition'.
CREATE TABLE awa.storage_transition_state (
    singleton boolean PRIMARY KEY DEFAULT true CHECK (singleton),
    state text NOT NULL DEFAULT 'active'
        CHECK (state IN ('canonical', 'prepared', 'mixed_transition', 'active')),
    current_engine text NOT NULL DEFAULT 'queue_storage',
    details jsonb NOT NULL DEFAULT '{}',
    updated_at timestamptz NOT NULL DEFAULT now());
INSERT INTO awa.storage_transition_state (singleton) VALUES (true);
SELECT pg_catalog.pg_extension_config_dump('awa.storage_transition_state', '');
GRANT SELECT ON awa.storage_transition_state TO awa_admin;
COMMENT ON TABLE awa.storage_transition_state IS 'Engine state; migration v017 refuses to run in mixed_transition.';

-- Install-wide settings: receipts (default) or leases for running attempts, and whether
-- exhausted jobs go to the DLQ (the reference's dlq_enabled_by_default; off by default).
CREATE TABLE awa.plane_settings (
    singleton boolean PRIMARY KEY DEFAULT true CHECK (singleton),
    receipts boolean NOT NULL DEFAULT true,
    dlq_enabled_by_default boolean NOT NULL DEFAULT false);
INSERT INTO awa.plane_settings (singleton) VALUES (true);
SELECT pg_catalog.pg_extension_config_dump('awa.plane_settings', '');
GRANT SELECT ON awa.plane_settings TO awa_admin;
COMMENT ON TABLE awa.plane_settings IS 'Install-wide settings (one row).';
COMMENT ON COLUMN awa.plane_settings.singleton IS 'Always true: the table has one row.';
COMMENT ON COLUMN awa.plane_settings.receipts IS 'true: receipts mode (default), running attempts recorded in claim batches (receipts); false: leases mode, one lease row per running attempt.';
COMMENT ON COLUMN awa.plane_settings.dlq_enabled_by_default IS 'Default of queue_meta.dlq_enabled: dead-letter exhausted jobs (default false).';

-- Per-queue settings. No row means one shard, not paused, and the install's DLQ default
-- (dlq_enabled NULL: follow plane_settings.dlq_enabled_by_default).
CREATE TABLE awa.queue_meta (
    queue text PRIMARY KEY,
    paused boolean NOT NULL DEFAULT false,
    paused_at timestamptz,
    paused_by text,
    enqueue_shards smallint NOT NULL DEFAULT 1,
    dlq_enabled boolean,
    completed_retention interval,
    failed_retention interval,
    rate_per_second double precision,
    rate_burst integer,
    concurrency_limit integer,
    key_concurrency_limit integer,
    key_rate_per_second double precision,
    key_rate_burst integer,
    CONSTRAINT queue_meta_queue_length CHECK (length(queue) BETWEEN 1 AND 200),
    CONSTRAINT queue_meta_enqueue_shards_range CHECK (enqueue_shards BETWEEN 1 AND 64),
    CONSTRAINT queue_meta_rate_limit CHECK ((rate_per_second IS NULL) = (rate_burst IS NULL)
        AND rate_per_second > 0 AND rate_per_second <= 1e9 AND rate_burst BETWEEN 1 AND 1000000),
    CONSTRAINT queue_meta_concurrency_limit CHECK (concurrency_limit BETWEEN 1 AND 1000000),
    CONSTRAINT queue_meta_key_concurrency_limit CHECK (key_concurrency_limit BETWEEN 1 AND 1000000),
    CONSTRAINT queue_meta_key_rate_limit CHECK ((key_rate_per_second IS NULL) = (key_rate_burst IS NULL)
        AND key_rate_per_second > 0 AND key_rate_per_second <= 1e9 AND key_rate_burst BETWEEN 1 AND 1000000));
SELECT pg_catalog.pg_extension_config_dump('awa.queue_meta', '');
GRANT SELECT, DELETE ON awa.queue_meta TO awa_admin;
-- awa_admin writes every column but key_concurrency_limit: a per-key limit set by hand would
-- not record the keyed attempts already running (awa.set_concurrency_limit does), and they
-- would escape it until they end.
GRANT INSERT (queue, paused, paused_at, paused_by, enqueue_shards, dlq_enabled, completed_retention, failed_retention,
    rate_per_second, rate_burst, concurrency_limit, key_rate_per_second, key_rate_burst)
    ON awa.queue_meta TO awa_admin;
GRANT UPDATE (queue, paused, paused_at, paused_by, enqueue_shards, dlq_enabled, completed_retention, failed_retention,
    rate_per_second, rate_burst, concurrency_limit, key_rate_per_second, key_rate_burst)
    ON awa.queue_meta TO awa_admin;
COMMENT ON TABLE awa.queue_meta IS 'Per-queue settings. No row: one shard, not paused, install-default DLQ setting.';
COMMENT ON COLUMN awa.queue_meta.queue IS 'Queue name (1..200 characters).';
COMMENT ON COLUMN awa.queue_meta.paused IS 'Paused queues are neither claimed nor promoted; producers still enqueue.';
COMMENT ON COLUMN awa.queue_meta.paused_at IS 'When the queue was paused.';
COMMENT ON COLUMN awa.queue_meta.paused_by IS 'Session user that paused the queue.';
COMMENT ON COLUMN awa.queue_meta.enqueue_shards IS 'Width S (1..64): 1 = strict FIFO per priority, more = partitioned FIFO per shard.';
COMMENT ON COLUMN awa.queue_meta.completed_retention IS 'How long completed jobs stay visible at least (awa.set_queue_retention); NULL: until their ring slot is pruned.';
COMMENT ON COLUMN awa.queue_meta.failed_retention IS 'How long failed and cancelled jobs stay visible at least (awa.set_queue_retention); NULL: failed ones until retried or deleted, cancelled ones until their ring slot is pruned.';
COMMENT ON COLUMN awa.queue_meta.dlq_enabled IS 'Jobs whose last attempt fails go to the DLQ (true) or end failed (false); NULL follows plane_settings.dlq_enabled_by_default.';
COMMENT ON COLUMN awa.queue_meta.rate_per_second IS 'Rate limit (awa.set_rate_limit): claims hand out at most rate_burst + rate_per_second x t jobs in t seconds; NULL: none.';
COMMENT ON COLUMN awa.queue_meta.rate_burst IS 'Bucket size of the rate limit (1..1000000); NULL when the queue has none.';
COMMENT ON COLUMN awa.queue_meta.concurrency_limit IS 'Most running attempts of the queue (awa.set_concurrency_limit, 1..1000000); NULL: no cap.';
COMMENT ON COLUMN awa.queue_meta.key_concurrency_limit IS 'Most running attempts of each concurrency key of the queue (awa.set_concurrency_limit p_per_key => true, 1..1000000); NULL: no per-key cap.';
COMMENT ON COLUMN awa.queue_meta.key_rate_per_second IS 'Per-key rate limit (awa.set_rate_limit p_per_key => true): claims hand out at most key_rate_burst + key_rate_per_second x t jobs of each concurrency key in t seconds; NULL: none.';
COMMENT ON COLUMN awa.queue_meta.key_rate_burst IS 'Bucket size of each key''s rate limit (1..1000000); NULL when the queue has none.';
