#!/usr/bin/env bash
# test/citus/specs.sh [SPEC...] — run single-node isolation specs (test/specs) through the
# coordinator of a running Citus cluster (test/citus/cluster.sh, AWA_CITUS_WORK), against the
# same expected outputs (test/expected) as on one node. Without arguments, the specs listed in
# test/citus/specs.list. A line there may name settings after the spec (name=value ...): Citus
# does not carry a session's SET to the worker that runs a delegated call, so what the spec's
# sessions SET on one node is set on the workers for that spec (ALTER SYSTEM), as users set
# such settings in the workers' configuration, and reset after it. Every call a spec makes names its queue and runs alone in its
# statement, so Citus delegates it to the queue's worker; concurrency promises are then kept
# on the workers, and the tester sees a session wait for a lock held on a worker through
# Citus's distributed wait graph. For the run, the workers stop relaying the commands they
# send (citus.log_remote_commands, which the suite's cluster turns on) and the coordinator's
# isolation tester uses Citus's lock-wait test; both are put back at the end.
# Prints "ok - ..." or "not ok - ..." per spec (with the diff) and ends with
# "citus specs: N passed, M failed"; exits non-zero when a spec failed.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
PG_CONFIG=${PG_CONFIG:-$(command -v pg_config)}
export AWA_CITUS_WORK=${AWA_CITUS_WORK:-/tmp/awa_citus}
work=$AWA_CITUS_WORK
db=${AWA_CITUS_DB:-awa}
isolation_regress="$("$PG_CONFIG" --pkglibdir)/pgxs/src/test/isolation/pg_isolation_regress"
cluster() { "$here/cluster.sh" "$@"; }

# lines: "spec [name=value ...]"
if [ $# -gt 0 ]; then lines=("$@")
else mapfile -t lines < <(grep -vE '^\s*(#|$)' "$here/specs.list"); fi

set_remote_log() {
  for n in 1 2; do
    cluster psql "$n" -c "ALTER SYSTEM $1" -c "SELECT pg_reload_conf()" >/dev/null
  done
}
restore() {
  cluster psql 0 -c "SELECT citus_internal.restore_isolation_tester_func()" >/dev/null 2>&1
  set_remote_log "RESET citus.log_remote_commands"
}
set_remote_log "SET citus.log_remote_commands = off"
cluster psql 0 -c "SELECT citus_internal.restore_isolation_tester_func()" >/dev/null 2>&1  # left by a killed run
cluster psql 0 -c "SELECT citus_internal.replace_isolation_tester_func()" >/dev/null || exit 1
trap restore EXIT

# The workers' settings for one spec (ALTER SYSTEM SET name = 'value' ..., or RESET name ...).
worker_settings() {
  local verb=$1 kv n; shift
  for n in 1 2; do
    for kv in "$@"; do
      if [ "$verb" = SET ]; then cluster psql "$n" -c "ALTER SYSTEM SET ${kv%%=*} = '${kv#*=}'" >/dev/null
      else cluster psql "$n" -c "ALTER SYSTEM RESET ${kv%%=*}" >/dev/null; fi
    done
    cluster psql "$n" -c "SELECT pg_reload_conf()" >/dev/null
  done
}
out=$work/specs; rm -rf "$out"; mkdir -p "$out"
passed=0; failed=0
# A run of pg_isolation_regress for the specs of one set of settings: plain specs together.
run_specs() {
  local dir=$1; shift
  mkdir -p "$dir"
  (cd "$dir" && "$isolation_regress" --use-existing --dbname="$db" --host="$work/sock" --port="$(cat "$work/port")" \
     --user=postgres --inputdir="$root/test" --outputdir="$dir" "$@") > "$dir/run.log" 2>&1
  local s
  for s in "$@"; do
    if grep -qE "^test $s +\.\.\. ok" "$dir/run.log"; then
      passed=$((passed + 1)); echo "ok - $s passes through the coordinator"
    else
      failed=$((failed + 1)); echo "not ok - $s through the coordinator"
      sed -n "/^diff .*\/$s\.out /,/^diff /p" "$dir/regression.diffs" 2>/dev/null | head -n 60
    fi
  done
}
plain=(); i=0
for line in "${lines[@]}"; do
  read -r -a words <<< "$line"
  if [ ${#words[@]} -eq 1 ]; then plain+=("${words[0]}"); continue; fi
  i=$((i + 1))
  worker_settings SET "${words[@]:1}"
  run_specs "$out/set$i" "${words[0]}"
  worker_settings RESET "${words[@]:1}"
done
[ ${#plain[@]} -gt 0 ] && run_specs "$out/plain" "${plain[@]}"
echo "citus specs: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
