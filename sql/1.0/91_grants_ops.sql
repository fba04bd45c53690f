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
