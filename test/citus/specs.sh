#!/usr/bin/env bash
# test/citus/specs.sh [SPEC...] — run single-node isolation specs (test/specs) through the
# coordinator of a running Citus cluster (test/citus/cluster.sh, AWA_CITUS_WORK), against the
# same expected outputs (test/expected) as on one node. Without arguments, the specs listed in
# test/citus/specs.list. Every call a spec makes names its queue and runs alone in its
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

if [ $# -gt 0 ]; then specs=("$@")
else mapfile -t specs < <(grep -vE '^\s*(#|$)' "$here/specs.list"); fi

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

out=$work/specs; rm -rf "$out"; mkdir -p "$out"
[ "$(id -u)" = 0 ] && chown postgres: "$out"
(cd "$out" && "$isolation_regress" --use-existing --dbname="$db" --host="$work/sock" --port="$(cat "$work/port")" \
   --user=postgres --inputdir="$root/test" --outputdir="$out" "${specs[@]}") > "$out/run.log" 2>&1
passed=0; failed=0
for s in "${specs[@]}"; do
  if grep -qE "^(test|not ok [0-9]+ +-|ok [0-9]+ +-) *$s +\.\.\. ok|^test $s +\.\.\. ok" "$out/run.log"; then
    passed=$((passed + 1)); echo "ok - $s passes through the coordinator"
  else
    failed=$((failed + 1)); echo "not ok - $s through the coordinator"
    sed -n "/^diff .*\/$s\.out /,/^diff /p" "$out/regression.diffs" 2>/dev/null | head -n 60
  fi
done
echo "citus specs: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
