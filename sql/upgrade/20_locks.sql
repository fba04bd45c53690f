
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
