
-- Step 6, receipts and the unsharded holds. A receipt records its lane's shard so it
-- completes and is rescued onto the right lane; its key (claim_slot, job_id, run_lease)
-- does not change, job_id being unique. deferred_jobs and dlq_entries stay unsharded and
-- keep a job's ordering key so promotion and DLQ retry route it back to its key's shard.
ALTER TABLE awa.lease_claims ADD COLUMN IF NOT EXISTS enqueue_shard smallint NOT NULL DEFAULT 0;
ALTER TABLE awa.deferred_jobs ADD COLUMN IF NOT EXISTS ordering_key bytea;
ALTER TABLE awa.dlq_entries ADD COLUMN IF NOT EXISTS ordering_key bytea;
