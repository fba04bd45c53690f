#!/usr/bin/env bash
# Live test: the statements of a claim, a completion, a heartbeat and a progress report
# prepare only the live partitions of the rings (a completion, a heartbeat and a report in
# receipts mode run none over the ring tables). Their generic plans name every partition of
# the tables they read; the live arcs, passed as parameters, let the executor prune the others
# at start-up (a completion that prepared all 8 claim-batch and all 16 ready partitions spent
# a good part of its CPU there). With the queue and claim rings turned once (live slots 0 and
# 1), the plans auto_explain logs for every statement these calls run must name no partition
# of slot 2 or later, except the lease partitions a DELETE lists as its result relations. Run
# as the postgres user; prints "hot_path_plans: N passed, M failed".
TEST=hot_path_plans; . "$(dirname "$0")/lib.sh"
new_server plans 58900
start_server -c shared_preload_libraries=awa_shard -c awa_shard.maintenance=off || give_up "server did not start"
q postgres -c "CREATE EXTENSION awa_shard" >/dev/null || give_up "CREATE EXTENSION failed"

# Slot 0 of both rings holds rows, then each ring turns once: the live arcs are slots 0 and 1.
q postgres >/dev/null <<'SQL' || give_up "setup failed"
SELECT awa.set_enqueue_shards('plans_q', 2);
SELECT cardinality(awa.insert_jobs('plans_q', array_fill('old'::text, ARRAY[4])));
SELECT count(*) FROM awa.claim_ready_runtime('plans_q', 2, 0, 0);
SELECT awa.rotate_queue_ring(), awa.rotate_attempt_ring('claim');
SELECT cardinality(awa.insert_jobs('plans_q', array_fill('new'::text, ARRAY[40])));
SQL
check "queue and claim rings live on slots 0 and 1" \
  "$(q postgres -c "SELECT (SELECT string_agg(slot::text, ',' ORDER BY slot) FROM awa.queue_ring_slots WHERE generation >= 0) || ' ' || (SELECT string_agg(slot::text, ',' ORDER BY slot) FROM awa.claim_ring_slots WHERE generation >= 0)")" \
  "0,1 0,1"

# The log lines one psql session adds (plans of every nested statement, no ANALYZE).
logged() {
  local from; from=$(wc -l <"$dir/log")
  q postgres >/dev/null <<SQL || echo "session failed" >&2
LOAD 'auto_explain';
SET auto_explain.log_min_duration = 0;
SET auto_explain.log_nested_statements = on;
$1
SQL
  tail -n +"$((from + 1))" "$dir/log"
}
# Partitions of the ring tables outside slots 0 and 1 named in a log excerpt (sorted, distinct).
outside_arc() {
  grep -oE '\b(ready_entries|done_entries|completion_batches|claim_batches|lease_claim_closures)_[0-9]+\b' \
    | awk -F_ '$NF >= 2' | sort -u | tr '\n' ' '
}

# Run twice in one session: the second call runs the kept generic plans.
claim_log=$(logged "SELECT count(*) FROM awa.claim_ready_runtime('plans_q', 5, 0, 0);
SELECT count(*) FROM awa.claim_ready_runtime('plans_q', 5, 0, 0);")
check "the claims were logged" "$(grep -c 'Query Text: SELECT count(\*) FROM awa.claim_ready_runtime' <<<"$claim_log")" "2"
# The drain, the probes, the head lock and the heads read run without statements
# (docs/design.md §4, "Direct drain"): no statement of a claim reads a ready row or writes an attempt.
check "a claim runs no statement over the ready rows or the claim ring" \
  "$(grep 'Query Text' <<<"$claim_log" | grep -cE 'ready_entries|claim_batches|INSERT INTO awa.claim_marks|queue_claim_heads')" "0"
check "a claim prepares no ring partition outside the live arcs" "$(outside_arc <<<"$claim_log")" ""

# The pairs to complete, read before the logged session (that read scans every partition).
q postgres -c "CREATE TABLE public.pairs AS SELECT job_id, run_lease, row_number() OVER (ORDER BY job_id) AS n FROM awa.lease_claims WHERE queue = 'plans_q'" >/dev/null
complete_log=$(logged "SELECT array_agg(job_id) AS ids, array_agg(run_lease) AS leases FROM public.pairs WHERE n <= 3 \\gset
SELECT count(*) FROM awa.complete_jobs(:'ids', :'leases');
SELECT array_agg(job_id) AS ids, array_agg(run_lease) AS leases FROM public.pairs WHERE n BETWEEN 4 AND 6 \\gset
SELECT count(*) FROM awa.complete_jobs(:'ids', :'leases');")
check "the completions were logged" "$(grep -c 'Query Text: SELECT count(\*) FROM awa.complete_jobs' <<<"$complete_log")" "2"
# Receipts are found, locked and completed without statements (docs/design.md §5, "Direct
# completion"): no statement of a completion reads or writes the ring tables.
check "a completion runs no statement over the ring tables" \
  "$(grep 'Query Text' <<<"$complete_log" | grep -cE 'ready_entries|claim_batches|completion_batches|done_entries')" "0"
check "a completion prepares no ring partition outside the live arcs" "$(outside_arc <<<"$complete_log")" ""
heartbeat_log=$(logged "SELECT array_agg(job_id) AS ids, array_agg(run_lease) AS leases FROM public.pairs WHERE n BETWEEN 7 AND 9 \\gset
SELECT awa.heartbeat_jobs(:'ids', :'leases');
SELECT awa.heartbeat_jobs(:'ids', :'leases');")
check "the heartbeats were logged" "$(grep -c 'Query Text: SELECT awa.heartbeat_jobs' <<<"$heartbeat_log")" "2"
# Receipts are found and their attempt_state rows inserted, then updated in place, without
# statements (docs/design.md §5): no statement of a heartbeat reads or writes those tables.
check "a heartbeat runs no statement over the ring tables or attempt_state" \
  "$(grep 'Query Text' <<<"$heartbeat_log" | grep -cE 'ready_entries|claim_batches|completion_batches|attempt_state')" "0"
check "the heartbeats wrote their attempts' rows" \
  "$(q postgres -c "SELECT count(*) FROM awa.attempt_state s JOIN public.pairs p USING (job_id, run_lease) WHERE p.n BETWEEN 7 AND 9 AND s.heartbeat_at IS NOT NULL")" "3"
check "a heartbeat prepares no ring partition outside the live arcs" "$(outside_arc <<<"$heartbeat_log")" ""
progress_log=$(logged "SELECT array_agg(job_id) AS ids, array_agg(run_lease) AS leases, array_agg('{\"done\": 1}'::jsonb) AS progress FROM public.pairs WHERE n BETWEEN 7 AND 9 \\gset
SELECT awa.set_jobs_progress(:'ids', :'leases', :'progress');
SELECT awa.set_jobs_progress(:'ids', :'leases', :'progress');
SELECT awa.set_progress((:'ids'::bigint[])[1], (:'leases'::bigint[])[1], '{\"done\": 2}');")
check "the progress reports were logged" "$(grep -cE 'Query Text: SELECT awa.set_(jobs_)?progress' <<<"$progress_log")" "3"
check "a progress report runs no statement over the ring tables or attempt_state" \
  "$(grep 'Query Text' <<<"$progress_log" | grep -cE 'ready_entries|claim_batches|completion_batches|attempt_state')" "0"
check "a progress report prepares no ring partition outside the live arcs" "$(outside_arc <<<"$progress_log")" ""
check "the progress reports found their attempts open" \
  "$(q postgres -c "SELECT count(*) FROM awa.jobs WHERE queue = 'plans_q' AND state = 'running' AND progress IS NOT NULL")" "3"
check "the completions completed their jobs" \
  "$(q postgres -c "SELECT count(*) FROM awa.jobs WHERE queue = 'plans_q' AND state = 'completed'")" "6"
summary
[ "$failed" -eq 0 ]
