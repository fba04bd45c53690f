#!/usr/bin/env bash
# Live test of examples/psql/worker.sh: the heartbeat loop of a batch, sleep included, ends
# with the batch. After its last batch (MAX_BATCHES) or a batch that fails (a psql error under
# set -e) the worker exits at once, even with a long HEARTBEAT_SECS, and leaves no process
# behind holding its output open. Run as the postgres user; prints "example_worker: N passed, M failed".
# WORKER=path runs another copy of the script (to show that a broken one fails this test).
TEST=example_worker; . "$(dirname "$0")/lib.sh"
here="$(cd "$(dirname "$0")/../.." && pwd)"
WORKER=${WORKER:-$here/examples/psql/worker.sh}

new_server exw 57000
start_server || give_up "the server did not start"
q postgres -c "CREATE EXTENSION awa_shard" -c "CREATE ROLE exw_worker LOGIN" -c "GRANT awa_worker TO exw_worker" \
  || give_up "set-up failed"

# Run the worker in its own session with its output on a pipe, as a caller capturing it would:
# the pipe closes only when every process holding it (a stray heartbeat sleep too) has ended.
# A heartbeat sleep that held the pipe would keep it open for HEARTBEAT_SECS (37 s): the
# checks compare with that length, not with how fast this machine is.
# Sets elapsed (ms until the pipe closed), rc (the worker's exit status) and left (processes of
# its session still running once the worker itself has exited).
run_worker() {
  local name=$1; shift
  rm -f "$dir/sid" "$dir/rc" "$dir/done"
  ( ( env PGHOST="$dir" PGPORT="$port" PGUSER=exw_worker PGDATABASE=postgres QUEUE=exq HEARTBEAT_SECS=37 "$@" \
        setsid bash -c 'echo $$ > "$0"; bash "$1"; echo $? > "$0.rc"' "$dir/sid" "$WORKER" 2>&1 | cat > "$dir/$name.out" );
    echo done > "$dir/done" ) &
  local runner=$! t0; t0=$(now_ms)
  for _ in $(seq 1 450); do [ -s "$dir/done" ] && break; sleep 0.1; done
  elapsed=$(( $(now_ms) - t0 ))
  for _ in $(seq 1 50); do [ -s "$dir/sid.rc" ] && break; sleep 0.1; done
  rc=$(cat "$dir/sid.rc" 2>/dev/null || echo none)
  local sid; sid=$(cat "$dir/sid" 2>/dev/null)
  # Live processes only: a dead child not yet reaped (state Z) holds nothing open.
  left=$(ps -o pid=,stat= -s "$sid" 2>/dev/null | awk -v s="$sid" '$1 != s && $2 !~ /^Z/' | wc -l)
  [ -n "$sid" ] && kill -- -"$sid" 2>/dev/null   # what a broken worker left behind (its own session only)
  wait "$runner" 2>/dev/null
}

# 1. A batch, then MAX_BATCHES ends the worker: exit 0 at once. Two jobs succeed, one fails (a
#    fail_job round trip, so the batch lasts long enough for the heartbeat's sleep to have started).
q postgres -c "SELECT awa.insert_jobs('exq', ARRAY['ok'], p_args => ARRAY['{\"n\": 1}', '{\"n\": 2}']::jsonb[])" \
          -c "SELECT awa.insert_job_compat('once', 'exq', '{\"fail\": true}', p_max_attempts => 1)" >/dev/null
run_worker last_batch MAX_BATCHES=1
check "last batch: the worker exits 0" "$rc" "0"
check "last batch: the output closed before the 37 s heartbeat sleep could end (no sleep holds it)" "$(( elapsed < 37000 ))" "1"
check "last batch: nothing of the worker left running" "$left" "0"
check "last batch: two jobs completed, one failed" \
      "$(q postgres -c "SELECT completed || ',' || failed FROM awa.queue_counts_exact('exq')")" "2,1"

# 2. A batch that fails: the job fails and awa.fail_job is refused (a psql error, set -e).
q postgres -c "REVOKE EXECUTE ON FUNCTION awa.fail_job(bigint, bigint, text, interval, text) FROM awa_worker" \
          -c "SELECT awa.insert_job_compat('bad', 'exq', '{\"fail\": true}')" >/dev/null
run_worker failing_batch MAX_BATCHES=0
check "failing batch: the worker exits non-zero" "$([ "$rc" != 0 ] && [ "$rc" != none ] && echo yes)" "yes"
check "failing batch: the output closed before the 37 s heartbeat sleep could end" "$(( elapsed < 37000 ))" "1"
check "failing batch: nothing of the worker left running" "$left" "0"
check "failing batch: the psql error is shown" "$(grep -c 'permission denied for function fail_job' "$dir/failing_batch.out")" "1"

summary
[ "$failed" -eq 0 ]
