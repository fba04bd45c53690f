#!/usr/bin/env bash
# Live test of awa.wait_for_job on two servers, one with the library preloaded (condition
# variables signalled at the finishing commit) and one without (the waiter re-reads the job).
# Three callers wait for one running job; once all three sleep (their wait event), a
# completion commits: each returns the completed job with its result. A waiter for another
# job is not ended by that commit and returns its job at its own timeout, still available.
# Cancelling a wait (pg_cancel_backend) ends it with 57014. A job moved to another queue
# ends the wait of a caller that names its old queue (NULL). Only states and results are
# asserted. Run as the postgres user; prints "job_wait: N passed, M failed".
TEST=job_wait; . "$(dirname "$0")/lib.sh"

# until_asleep N: wait until N sessions sleep in wait_for_job (at most a minute).
until_asleep() {
  wait_for postgres 60 "SELECT count(*) >= $1 FROM pg_stat_activity WHERE state = 'active'
                         AND wait_event_type = 'Extension' AND query LIKE '%awa.wait_for_job(%'" t
}

run_case() {
  local mode="$1" preload="$2" job other lease i
  drop_server
  new_server jobwait 59000
  start_server "-c shared_preload_libraries='$preload'" || { cat "$dir/log"; failed=$((failed+1)); return; }
  q postgres -c "CREATE EXTENSION awa_shard" || { failed=$((failed+1)); return; }
  job=$(q postgres -c "SELECT id FROM awa.insert_job_compat('k', 'jw')")
  other=$(q postgres -c "SELECT id FROM awa.insert_job_compat('k', 'jw_other')")
  lease=$(q postgres -c "SELECT run_lease FROM awa.claim_ready_runtime('jw', 1)")

  for i in 1 2 3; do
    q postgres -c "SELECT state || ' ' || result::text FROM awa.wait_for_job($job, 600000)" > "$dir/waiter_$i" 2>&1 &
    bg+=($!)
  done
  # The other job's waiter times out (5 s) after the completion below, in its current state.
  q postgres -c "SELECT state FROM awa.wait_for_job($other, 5000)" > "$dir/waiter_other" 2>&1 &
  bg+=($!)
  until_asleep 4; check "$mode: four waiters asleep" "$?" "0"
  q postgres -c "SELECT count(*) FROM awa.complete_jobs(ARRAY[$job]::bigint[], ARRAY[$lease]::bigint[],
                                                        ARRAY['{\"n\": 7}']::jsonb[])" >/dev/null
  wait "${bg[@]}"; bg=()
  for i in 1 2 3; do check "$mode: waiter $i returns the completed job" "$(cat "$dir/waiter_$i")" 'completed {"n": 7}'; done
  check "$mode: the waiter of another job returns it at its timeout" "$(cat "$dir/waiter_other")" "available"

  # Cancelling a sleeping wait ends it with 57014.
  q postgres -v VERBOSITY=sqlstate -c "SELECT awa.wait_for_job($other, 600000)" > "$dir/waiter_cancel" 2>&1 &
  bg+=($!)
  until_asleep 1; check "$mode: the waiter to cancel is asleep" "$?" "0"
  q postgres -c "SELECT pg_cancel_backend(pid) FROM pg_stat_activity WHERE query LIKE '%awa.wait_for_job($other, 600000)%'
                   AND pid <> pg_backend_pid()" >/dev/null
  wait "${bg[@]}"; bg=()
  check "$mode: a cancelled wait ends with 57014" "$(grep -o '57014' "$dir/waiter_cancel")" "57014"

  # A job moved to another queue (move_queue) is gone from the queue its waiter names: the
  # waiter returns NULL at once, not at its 10-minute timeout (polled up to 15 s here).
  local moved
  moved=$(q postgres -c "SELECT id FROM awa.insert_job_compat('k', 'jw_from')")
  q postgres -c "SELECT coalesce(state::text, 'gone') FROM awa.wait_for_job($moved, 600000, 'jw_from')" > "$dir/waiter_moved" 2>&1 &
  bg+=($!)
  until_asleep 1; check "$mode: the waiter of the job to move is asleep" "$?" "0"
  q postgres -c "SELECT awa.move_queue($moved, 'jw_to')" >/dev/null
  local returned=yes
  wait_for postgres 15 "SELECT count(*) FROM pg_stat_activity WHERE query LIKE '%awa.wait_for_job($moved, 600000%' AND pid <> pg_backend_pid()" 0 \
    || { returned=no; q postgres -c "SELECT pg_cancel_backend(pid) FROM pg_stat_activity WHERE query LIKE '%awa.wait_for_job($moved, 600000%'
                                       AND pid <> pg_backend_pid()" >/dev/null; }
  wait "${bg[@]}"; bg=()
  check "$mode: a waiter in the job's old queue returns when the job moves" "$returned" yes
  check "$mode: ... with no job (NULL: not in that queue)" "$(cat "$dir/waiter_moved")" gone
}

run_case preloaded awa_shard
run_case not_preloaded ''
summary
[ "$failed" -eq 0 ]
