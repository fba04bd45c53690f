-- Idle-in-transaction cell, SKIP LOCKED baseline producer: :batch jobs per transaction
-- (offered rate set by pgbench --rate).
INSERT INTO bench.skipq (kind) SELECT 'k' FROM generate_series(1, :batch::int);
