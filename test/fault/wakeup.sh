#!/usr/bin/env bash
# Live test of awa.wait_for_jobs on two servers, one with the library preloaded (condition
# variables signalled at commit) and one without (sleep-and-check). A waiter must wake up
# soon after a producer commits into its queue, must not wake up for another queue or for a
# rolled-back enqueue, and must return false at its timeout. Run as the postgres user;
# prints "wakeup: N passed, M failed".
TEST=wakeup; . "$(dirname "$0")/lib.sh"

run_case() {
  local mode="$1" preload="$2"
  drop_server   # the previous case's
  new_server wake 59000
  start_server "-c shared_preload_libraries='$preload'" || { cat "$dir/log"; failed=$((failed+1)); return; }
  q postgres -c "CREATE EXTENSION awa_shard" || { failed=$((failed+1)); return; }

  # 1. Nothing arrives: false at the timeout (not earlier than ~the timeout).
  local t0 t1 r
  t0=$(now_ms); r=$(q postgres -c "SELECT awa.wait_for_jobs('wq', 700)"); t1=$(now_ms)
  check "$mode: empty queue times out with false" "$r" "f"
  check "$mode: the timeout is honoured" "$(( t1 - t0 >= 650 ))" "1"

  # 2. A commit into the queue 1 s into a 8 s wait wakes the waiter with true, well before 8 s.
  ( sleep 1; q postgres -c "SELECT awa.insert_job_compat('k', 'otherq')" >/dev/null;
    q postgres -c "BEGIN; SELECT awa.insert_job_compat('k', 'wq'); ROLLBACK" >/dev/null;
    sleep 0.5; q postgres -c "SELECT awa.insert_job_compat('k', 'wq')" >/dev/null ) &
  t0=$(now_ms); r=$(q postgres -c "SELECT awa.wait_for_jobs('wq', 8000)"); t1=$(now_ms)
  wait
  check "$mode: a committed enqueue wakes the waiter" "$r" "t"
  check "$mode: woken within 3 s, not at the timeout" "$(( t1 - t0 < 3000 ))" "1"
  check "$mode: not woken before the commit into this queue (other queue, rollback)" "$(( t1 - t0 >= 1400 ))" "1"

  # 3. Work already there: true at once.
  t0=$(now_ms); r=$(q postgres -c "SELECT awa.wait_for_jobs('wq', 5000)"); t1=$(now_ms)
  check "$mode: visible work returns true at once" "$r$(( t1 - t0 < 1000 ))" "t1"
}

run_case preloaded awa_shard
run_case not_preloaded ''
summary
[ "$failed" -eq 0 ]
