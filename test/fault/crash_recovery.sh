#!/usr/bin/env bash
# Fault test: crash the server (immediate stop = no shutdown checkpoint) while producers hold
# lane locks and workers hold claims, restart, and check that nothing committed is lost or
# duplicated, that lane numbering continues (a gap is allowed: sequences pre-log values),
# that uncommitted work left no trace, and that every lane still drains.
# Background maintenance is off: the checks count terminal rows, which prune may reclaim
# (maintenance under load is maintenance_stress.sh's subject).
# Run as the postgres user from the work tree; prints "fault: N passed, M failed".
TEST=fault; . "$(dirname "$0")/lib.sh"
psql_q() { q fault "$@"; }
start() { start_server -c shared_preload_libraries=awa_shard -c awa_shard.maintenance=off; }

new_server fault 58000
start || give_up "the server did not start"
"$PGBIN/createdb" -h "$dir" -p "$port" fault
psql_q -c "CREATE EXTENSION awa_shard; INSERT INTO awa.queue_meta (queue, enqueue_shards) VALUES ('crash', 4)"

# Committed work: 40 jobs over 4 shards (keyed), 10 of them claimed and completed.
psql_q -c "SELECT count(*) FROM (SELECT awa.insert_job_compat('k', 'crash', p_ordering_key => convert_to('key-' || g, 'UTF8')) FROM generate_series(1, 40) g) s" >/dev/null
psql_q -c "SELECT count(*) FROM awa.complete_jobs((SELECT array_agg(job_id) FROM awa.claim_ready_runtime('crash', 10, 0, 0)), array_fill(1::bigint, ARRAY[10]))" >/dev/null
done_before=$(psql_q -c "SELECT count(*) FROM awa._terminal_attempts WHERE queue = 'crash'")
max_before=$(psql_q -c "SELECT max(lane_seq) FROM awa.ready_entries WHERE queue = 'crash' AND enqueue_shard = awa.shard_for_ordering_key(convert_to('key-1','UTF8'), 4)")

# In flight at the crash: a producer holding a lane lock with 5 uncommitted rows, and a
# worker holding a claim it never completes.
( printf "BEGIN;\nSELECT awa.insert_jobs('crash', array_fill('ghost'::text, ARRAY[5]), p_ordering_keys => array_fill(convert_to('key-1','UTF8'), ARRAY[5]));\nSELECT pg_sleep(30);\n" | "$PGBIN/psql" -h "$dir" -p "$port" -X -q -d fault >/dev/null 2>&1 & )
( printf "BEGIN;\nSELECT count(*) FROM awa.claim_ready_runtime('crash', 5, 0, 0);\nSELECT pg_sleep(30);\n" | "$PGBIN/psql" -h "$dir" -p "$port" -X -q -d fault >/dev/null 2>&1 & )
sleep 2
"$PGBIN/pg_ctl" -D "$dir/data" -m immediate stop >/dev/null
start || give_up "the server did not restart"

check "no uncommitted row survives" "$(psql_q -c "SELECT count(*) FROM awa.ready_entries WHERE kind = 'ghost'")" "0"
check "committed terminal rows survive" "$(psql_q -c "SELECT count(*) FROM awa._terminal_attempts WHERE queue = 'crash'")" "$done_before"
check "the uncommitted claim left no receipt" "$(psql_q -c "SELECT count(*) FROM awa.lease_claims")" "10"
check "no receipt is open" "$(psql_q -c "SELECT count(*) FROM awa._open_receipts")" "0"

# New work after the restart continues the lane past every number used before.
psql_q -c "SELECT awa.insert_job_compat('after', 'crash', p_ordering_key => convert_to('key-1','UTF8'))" >/dev/null
check "lane numbering continues past the crash" "$(psql_q -c "SELECT min(lane_seq) > $max_before FROM awa.ready_entries WHERE kind = 'after'")" "t"

# Drain everything: each committed job exactly once.
for _ in $(seq 1 40); do
  n=$(psql_q -c "WITH c AS (SELECT job_id, run_lease FROM awa.claim_ready_runtime('crash', 10, 0, 0)) SELECT count(*) FROM awa.complete_jobs((SELECT coalesce(array_agg(job_id), '{}') FROM c), (SELECT coalesce(array_agg(run_lease), '{}') FROM c))")
  [ "$n" = "0" ] && break
done
check "every committed job completed exactly once" "$(psql_q -c "SELECT count(*) || '/' || count(DISTINCT job_id) FROM awa._terminal_attempts WHERE queue = 'crash'")" "41/41"
check "no lane is left with waiting rows" "$(psql_q -c "SELECT count(*) FROM awa.ready_entries r JOIN awa.lane_cursors h USING (queue, priority, enqueue_shard) WHERE r.queue = 'crash' AND r.lane_seq >= h.claim_seq")" "0"

summary
[ "$failed" -eq 0 ]
