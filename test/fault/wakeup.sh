#!/usr/bin/env bash
# Live test of awa.wait_for_jobs on two servers, one with the library preloaded (condition
# variables signalled at commit) and one without (sleep-and-check). A waiter must wake up
# when a producer commits into its queue, must not wake up for another queue or for a
# rolled-back enqueue, and must return false at its timeout. Run as the postgres user;
# prints "wakeup: N passed, M failed".
TEST=wakeup; . "$(dirname "$0")/lib.sh"

run_case() {
  local mode="$1" preload="$2"
  drop_server   # the previous case's
  new_server wake 59000
  start_server "-c shared_preload_libraries='$preload' -c max_prepared_transactions=2" || { cat "$dir/log"; failed=$((failed+1)); return; }
  q postgres -c "CREATE EXTENSION awa_shard" || { failed=$((failed+1)); return; }

  # 1. Nothing arrives: false at the timeout (not earlier than ~the timeout).
  local t0 t1 r
  t0=$(now_ms); r=$(q postgres -c "SELECT awa.wait_for_jobs('wq', 700)"); t1=$(now_ms)
  check "$mode: empty queue times out with false" "$r" "f"
  check "$mode: the timeout is honoured" "$(( t1 - t0 >= 650 ))" "1"

  # 2. A commit into the queue wakes the waiter with true (a timeout returns false). A commit
  #    into another queue and a rolled-back enqueue come first; the marker file is written
  #    only after them, just before the commit into this queue, so a waiter that one of them
  #    woke returns before the marker exists. Ordered by the marker, not timed.
  rm -f "$dir/wq_next"
  ( sleep 1; q postgres -c "SELECT awa.insert_job_compat('k', 'otherq')" >/dev/null;
    q postgres -c "BEGIN; SELECT awa.insert_job_compat('k', 'wq'); ROLLBACK" >/dev/null;
    sleep 0.5; touch "$dir/wq_next"; q postgres -c "SELECT awa.insert_job_compat('k', 'wq')" >/dev/null ) &
  r=$(q postgres -c "SELECT awa.wait_for_jobs('wq', 30000)")
  local woke_after_marker=no; [ -e "$dir/wq_next" ] && woke_after_marker=yes
  wait
  check "$mode: a committed enqueue wakes the waiter (true, not the timeout's false)" "$r" "t"
  check "$mode: not woken by a commit into another queue or a rollback" "$woke_after_marker" "yes"

  # 3. Work already there: true, with nothing committing meanwhile (the timeout gives false).
  r=$(q postgres -c "SELECT awa.wait_for_jobs('wq', 30000)")
  check "$mode: visible work returns true" "$r" "t"

  [ "$mode" = preloaded ] || return 0
  # 4. A commit wakes as many sleepers as it brought work for, one per lane it added rows to
  #    (a claim takes one lane's rows): with three workers asleep, one job wakes one (true),
  #    the other two sleep on to their timeout (false); two jobs in two lanes wake two; three
  #    jobs in one lane wake one. Counted, not timed.
  q postgres -c "SELECT awa.create_queue('cq', 2)" >/dev/null
  local k0 k1 n i out jobs
  k0=$(q postgres -c "SELECT g FROM generate_series(1, 100) g WHERE awa.shard_for_enqueue('cq', 2, convert_to(g::text, 'UTF8')) = 0 LIMIT 1")
  k1=$(q postgres -c "SELECT g FROM generate_series(1, 100) g WHERE awa.shard_for_enqueue('cq', 2, convert_to(g::text, 'UTF8')) = 1 LIMIT 1")
  for n in 1 2 3; do
    case $n in
      1) jobs="ARRAY['k']" ;;
      2) jobs="ARRAY['k', 'k'], p_ordering_keys => ARRAY[convert_to('$k0', 'UTF8'), convert_to('$k1', 'UTF8')]" ;;
      3) jobs="ARRAY['k', 'k', 'k'], p_ordering_keys => ARRAY[convert_to('$k0', 'UTF8'), convert_to('$k0', 'UTF8'), convert_to('$k0', 'UTF8')]" ;;
    esac
    out="$dir/sleepers$n"
    for i in 1 2 3; do ( q postgres -c "SELECT awa.wait_for_jobs('cq', 4000)" > "$out.$i" ) & done
    wait_for postgres 10 "SELECT count(*) FROM pg_stat_activity WHERE wait_event = 'Extension' AND query LIKE '%wait_for_jobs(''cq''%'" 3 \
      || give_up "the three sleepers did not go to sleep"
    q postgres -c "SELECT cardinality(awa.insert_jobs('cq', $jobs))" >/dev/null
    wait
    check "$mode: a commit of $n job(s) in $(( n == 2 ? 2 : 1 )) lane(s) wakes $(( n == 2 ? 2 : 1 )) of 3 sleepers" \
      "$(cat "$out".* | grep -c '^t$')" "$(( n == 2 ? 2 : 1 ))"
    q postgres -c "SELECT count(*) FROM awa.claim_ready_runtime('cq', 100)" >/dev/null
    q postgres -c "SELECT count(*) FROM awa.claim_ready_runtime('cq', 100)" >/dev/null
  done

  # 4b. A claim that leaves rows in its lane wakes one more sleeper, one that empties it none:
  #     two sleepers; ten jobs in one lane wake one; then a claim of 4 wakes the other (two
  #     true), where a claim of all ten leaves it asleep (one true, one false).
  local batch expect
  for batch in 4 100; do
    for i in 1 2; do ( q postgres -c "SELECT awa.wait_for_jobs('cq', 4000)" > "$dir/relay$batch.$i" ) & done
    wait_for postgres 10 "SELECT count(*) FROM pg_stat_activity WHERE wait_event = 'Extension' AND query LIKE '%wait_for_jobs(''cq''%'" 2 \
      || give_up "the two sleepers did not go to sleep"
    q postgres -c "SELECT cardinality(awa.insert_jobs('cq', array_fill('k'::text, ARRAY[10])))" >/dev/null
    wait_for postgres 10 "SELECT count(*) FROM pg_stat_activity WHERE wait_event = 'Extension' AND query LIKE '%wait_for_jobs(''cq''%'" 1 \
      || give_up "ten jobs in one lane did not wake exactly one of two sleepers"
    q postgres -c "SELECT count(*) FROM awa.claim_ready_runtime('cq', $batch)" >/dev/null
    wait
    expect=$(( batch == 4 ? 2 : 1 ))
    check "$mode: after a claim of $batch of 10 jobs in one lane, $expect of 2 sleepers woken" \
      "$(cat "$dir"/relay$batch.* | grep -c '^t$')" "$expect"
    q postgres -c "SELECT count(*) FROM awa.claim_ready_runtime('cq', 100)" >/dev/null
  done

  # 4c. The first job of a new lane wakes its sleeper. The producer makes the lane's sequence
  #     in its transaction and holds it until its locks are released, after its commit; a
  #     sleeper woken before then read the lane as empty and slept to its timeout (about one
  #     round in ten). Sixty new queues, one sleeper each, one job each: every sleeper true.
  local woke=0
  for i in $(seq 1 60); do
    q postgres -c "SELECT awa.create_queue('nq$i', 2)" >/dev/null
    ( q postgres -c "SELECT awa.wait_for_jobs('nq$i', 3000)" > "$dir/newlane.$i" ) &
    wait_for postgres 10 "SELECT count(*) FROM pg_stat_activity WHERE wait_event = 'Extension' AND query LIKE '%wait_for_jobs(''nq$i''%'" 1 \
      || give_up "the sleeper of nq$i did not go to sleep"
    q postgres -c "SELECT cardinality(awa.insert_jobs('nq$i', ARRAY['k']))" >/dev/null
    wait
    [ "$(cat "$dir/newlane.$i")" = t ] && woke=$((woke+1))
  done
  check "$mode: the first job of a new lane wakes its sleeper (60 new queues)" "$woke" 60

  # 4d. A wait cancelled inside a transaction that then PREPAREs leaves the sleeper list: with
  #     a sleeper S asleep first, session B waits in a transaction, is cancelled by its
  #     statement_timeout (psql's ON_ERROR_ROLLBACK keeps the transaction), PREPAREs and stays
  #     connected; the next job must wake S. Before, B's entry stayed listed, took the
  #     wake-up, and S slept to its timeout (2 of 2 rounds).
  q postgres -c "SELECT awa.create_queue('pq', 1)" >/dev/null
  local spid bpid prepared_woke=0
  for i in 1 2; do
    ( q postgres -c "SELECT awa.wait_for_jobs('pq', 4000)" > "$dir/prep.$i" ) & spid=$!
    wait_for postgres 10 "SELECT count(*) FROM pg_stat_activity WHERE wait_event = 'Extension' AND query LIKE '%wait_for_jobs(''pq''%'" 1 \
      || give_up "the sleeper of pq did not go to sleep"
    ( printf '%s\n' '\set ON_ERROR_ROLLBACK on' "BEGIN;" "SET LOCAL statement_timeout = 300;" \
        "SELECT awa.wait_for_jobs('pq', 60000);" "PREPARE TRANSACTION 'pw$i';" '\! sleep 5' | \
        "$PGBIN/psql" -h "$dir" -p "$port" -X -q -d postgres >/dev/null 2>&1 ) & bpid=$!
    wait_for postgres 10 "SELECT count(*) FROM pg_prepared_xacts WHERE gid = 'pw$i'" 1 \
      || give_up "session B did not prepare"
    q postgres -c "SELECT cardinality(awa.insert_jobs('pq', ARRAY['k']))" >/dev/null
    wait "$spid"
    [ "$(cat "$dir/prep.$i")" = t ] && prepared_woke=$((prepared_woke+1))
    wait "$bpid"
    q postgres -c "ROLLBACK PREPARED 'pw$i'" >/dev/null
    q postgres -c "SELECT count(*) FROM awa.claim_ready_runtime('pq', 10)" >/dev/null
  done
  check "$mode: a wait cancelled in a prepared transaction leaves the list (the next job wakes the sleeper)" "$prepared_woke" 2

  # 4e. A worker that its queue's rate limit holds back (a job waits, no token for days)
  #     sees the limit removed while it sleeps: nothing wakes it for that, but it reads the
  #     limits again at least every second, so it returns (true: the job is there) well
  #     before its 60 s timeout; before, it slept the whole timeout.
  q postgres -c "SELECT awa.create_queue('hq', 1)" >/dev/null
  q postgres -c "SELECT awa.set_rate_limit('hq', 1e-6, 1)" >/dev/null
  q postgres -c "SELECT cardinality(awa.insert_jobs('hq', ARRAY['k', 'k']))" >/dev/null
  q postgres -c "SELECT count(*) FROM awa.claim_ready_runtime('hq', 10)" >/dev/null
  ( q postgres -c "SELECT awa.wait_for_jobs('hq', 60000)" > "$dir/held" 2>&1 ) &
  wait_for postgres 10 "SELECT count(*) FROM pg_stat_activity WHERE wait_event = 'Extension' AND query LIKE '%wait_for_jobs(''hq''%'" 1 \
    || give_up "the worker held back by the rate limit did not go to sleep"
  q postgres -c "SELECT awa.set_rate_limit('hq', NULL)" >/dev/null
  local returned=yes
  wait_for postgres 15 "SELECT count(*) FROM pg_stat_activity WHERE query LIKE '%wait_for_jobs(''hq''%' AND state = 'active' AND pid <> pg_backend_pid()" 0 \
    || { returned=no; q postgres -c "SELECT pg_cancel_backend(pid) FROM pg_stat_activity WHERE query LIKE '%wait_for_jobs(''hq''%' AND pid <> pg_backend_pid()" >/dev/null; }
  wait
  check "$mode: a worker held back by a rate limit returns soon after it is removed" "$returned" yes
  check "$mode: ... with the job it may now claim (true)" "$(cat "$dir/held")" t

  # 5. No lost wake-up when producers and workers race: four workers loop (wait with a long
  #    timeout, then claim up to 3), four producers commit 60 single jobs each, some of them
  #    rolled back after reserving. Every committed job is claimed while the workers' waits
  #    are far from their timeout, and no wait timed out.
  q postgres -c "SELECT awa.create_queue('rq', 4)" >/dev/null
  rm -f "$dir/stop"
  local pids=()
  for i in 1 2 3 4; do
    ( while [ ! -f "$dir/stop" ]; do
        q postgres -c "SELECT awa.wait_for_jobs('rq', 30000)" >> "$dir/waits.$i" || break
        q postgres -c "SELECT count(*) FROM awa.claim_ready_runtime('rq', 3)" >> "$dir/claims.$i" || break
      done ) & pids+=($!)
  done
  for i in 1 2 3 4; do
    ( for j in $(seq 1 60); do
        if [ $(( (i + j) % 7 )) = 0 ]; then
          q postgres -c "BEGIN; SELECT awa.insert_jobs('rq', ARRAY['x']); ROLLBACK" >/dev/null
        fi
        q postgres -c "SELECT awa.insert_jobs('rq', ARRAY['k'])" >/dev/null
      done ) &
  done
  wait_for postgres 20 "SELECT coalesce(sum(claimed), 0) FROM awa._shard_stats() WHERE queue = 'rq'" 240
  check "$mode: racing producers and workers: every committed job claimed" \
    "$(q postgres -c "SELECT coalesce(sum(claimed), 0) FROM awa._shard_stats() WHERE queue = 'rq'")" 240
  touch "$dir/stop"
  q postgres -c "SELECT pg_cancel_backend(pid) FROM pg_stat_activity WHERE query LIKE '%wait_for_jobs(''rq''%' AND pid <> pg_backend_pid()" >/dev/null
  wait
  check "$mode: racing producers and workers: no wait reached its timeout" "$(cat "$dir"/waits.* | grep -c '^f$')" "0"
}

run_case preloaded awa_shard
run_case not_preloaded ''
summary
[ "$failed" -eq 0 ]
