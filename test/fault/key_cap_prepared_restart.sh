#!/usr/bin/env bash
# Live test of the capped-lane memory of per-key concurrency limits (src/key_caps.cpp) across
# a restart with a prepared exit: the attempt of key K (cap 1) is completed in a prepared
# transaction, the server restarts, or a backend crashes and the server resets its shared
# memory (the prepared transaction is recovered either way), session B claims
# and remembers the lane at K's cap, then the prepared exit is committed. B's next claim must
# take K's next job at once. Before, the restart lost the memory's list of prepared exits: the
# commit stamped nothing and B passed the lane over for up to a second. Run as the postgres
# user; prints "key_cap_prepared_restart: N passed, M failed".
TEST=key_cap_prepared_restart; . "$(dirname "$0")/lib.sh"
new_server keyprep 58700
cat >> "$dir/data/postgresql.conf" <<CONF
shared_preload_libraries = 'awa_shard'
awa_shard.maintenance = off
max_prepared_transactions = 4
fsync = off
CONF
start_server || give_up "the server did not start"
# round RESTART: the prepared exit, RESTART ("restart": pg_ctl restart; "crash": a backend
# killed, so the server resets its shared memory without restarting), then session B.
round() {
  local how="$1" m="m_$1" job lease pid
  q postgres >/dev/null <<SQL || give_up "setup failed"
SELECT awa.create_queue('$m', 1);
SELECT awa.set_concurrency_limit('$m', 1, p_per_key => true);
SELECT cardinality(awa.insert_jobs('$m', ARRAY['k', 'k', 'k'], p_concurrency_keys => ARRAY['K', 'K', 'K']));
SQL
  read -r job lease <<<"$(q postgres -F ' ' -c "SELECT job_id, run_lease FROM awa.claim_ready_runtime('$m', 1)")"
  q postgres -c "BEGIN" -c "SELECT count(*) FROM awa.complete_jobs(ARRAY[$job]::bigint[], ARRAY[$lease]::bigint[])" \
    -c "PREPARE TRANSACTION 'pe_$how'" >/dev/null || give_up "the exit could not be prepared"
  if [ "$how" = restart ]; then
    "$PGBIN/pg_ctl" -D "$dir/data" -m fast -w restart -o "-p $port -k $dir -c lc_messages=C" -l "$dir/log" >/dev/null \
      || give_up "the server did not restart"
  else
    ( q postgres -c "SELECT pg_sleep(60)" >/dev/null 2>&1 ) &
    wait_for postgres 10 "SELECT count(*) FROM pg_stat_activity WHERE query = 'SELECT pg_sleep(60)'" 1 \
      || give_up "the session to kill did not start"
    pid=$(q postgres -c "SELECT pid FROM pg_stat_activity WHERE query = 'SELECT pg_sleep(60)'")
    kill -9 "$pid"; wait
    sleep 1
    wait_for postgres 30 "SELECT 1" 1 || give_up "the server did not come back after the crash"
  fi
  check "$how: the prepared exit is recovered" "$(q postgres -c "SELECT count(*) FROM pg_prepared_xacts WHERE gid = 'pe_$how'")" 1

  # Session B stays open: its memory is its own.
  coproc B { "$PGBIN/psql" -h "$dir" -p "$port" -X -A -t -q -d postgres 2>&1; }
  check "$how: B: nothing while K's attempt runs (the lane is remembered at K's cap)" \
    "$(ask_b "SELECT count(*) FROM awa.claim_ready_runtime('$m', 1);")" 0
  q postgres -c "COMMIT PREPARED 'pe_$how'" >/dev/null
  check "$how: K runs nothing after the prepared exit commits" \
    "$(q postgres -c "SELECT count(*) FROM awa.jobs WHERE queue = '$m' AND state = 'running'")" 0
  check "$how: B: K's next job at once" "$(ask_b "SELECT count(*) FROM awa.claim_ready_runtime('$m', 1);")" 1
  echo '\q' >&"${B[1]}"; wait "$B_PID" 2>/dev/null
}
ask_b() { echo "$1" >&"${B[1]}"; local line; read -r -t 20 line <&"${B[0]}"; echo "$line"; }

q postgres -c "CREATE EXTENSION awa_shard" >/dev/null || give_up "CREATE EXTENSION failed"
round restart
round crash
summary
