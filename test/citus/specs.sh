#!/usr/bin/env bash
# test/citus/specs.sh [--regress|--isolation] [SUITE...] — run single-node suites through the
# coordinator of a running Citus cluster (test/citus/cluster.sh, AWA_CITUS_WORK), against the
# same expected outputs as on one node: the isolation specs of test/citus/specs.list
# (test/specs, test/expected) and the pg_regress suites of test/citus/regress.list (sql/,
# expected/). With arguments, only those suites of the kind given (isolation by default).
# A list line may name settings after the suite (name=value ...): Citus does not carry a
# session's SET to the worker that runs a delegated call, so what a suite's sessions SET on
# one node is set on the workers for that suite (ALTER SYSTEM), as users set such settings in
# the workers' configuration, and reset after it. Every call a suite makes names its queue
# and runs alone in its statement, so Citus delegates it to the queue's worker; concurrency
# promises are then kept on the workers, and the isolation tester sees a session wait for a
# lock held on a worker through Citus's distributed wait graph. For the run, the workers stop
# relaying the commands they send (citus.log_remote_commands, which the suite's cluster turns
# on) and the coordinator's isolation tester uses Citus's lock-wait test; both are put back at
# the end. Prints "ok - ..." or "not ok - ..." per suite (with the diff) and ends with
# "citus specs: N passed, M failed"; exits non-zero when a suite failed.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
PG_CONFIG=${PG_CONFIG:-$(command -v pg_config)}
export AWA_CITUS_WORK=${AWA_CITUS_WORK:-/tmp/awa_citus}
work=$AWA_CITUS_WORK
db=${AWA_CITUS_DB:-awa}
pgxs="$("$PG_CONFIG" --pkglibdir)/pgxs/src/test"
cluster() { "$here/cluster.sh" "$@"; }

# lines: "kind suite [name=value ...]", kind isolation or regress.
lines=()
listed() { grep -vE '^\s*(#|$)' "$here/$2" | sed "s/^/$1 /"; }
# A suite named on the command line, with the settings its list line gives it.
named() { local line; line=$(grep -E "^$2( |$)" "$here/$3" 2>/dev/null | head -n 1); echo "$1 ${line:-$2}"; }
case "${1:-}" in
  --regress) shift; for a in "$@"; do lines+=("$(named regress "$a" regress.list)"); done;;
  --isolation) shift; for a in "$@"; do lines+=("$(named isolation "$a" specs.list)"); done;;
  *) for a in "$@"; do lines+=("$(named isolation "$a" specs.list)"); done;;
esac
if [ ${#lines[@]} -eq 0 ]; then
  mapfile -t lines < <(listed isolation specs.list; [ -f "$here/regress.list" ] && listed regress regress.list)
fi

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

# The workers' settings for one suite (ALTER SYSTEM SET name = 'value' ..., or RESET name ...).
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
# One run of pg_isolation_regress or pg_regress (KIND) for suites of one set of settings, in
# DIR; each suite must match its main expected output (the cluster is preloaded: a variant
# for a server without preload does not count).
run_suites() {
  local kind=$1 dir=$2; shift 2
  local tool=$pgxs/isolation/pg_isolation_regress inputdir=$root/test expected=$root/test/expected
  if [ "$kind" = regress ]; then tool=$pgxs/regress/pg_regress; inputdir=$root; expected=$root/expected; fi
  mkdir -p "$dir"
  # From the tree's root: the pg_regress suites include files by paths relative to it.
  (cd "$root" && "$tool" --use-existing --dbname="$db" --host="$work/sock" --port="$(cat "$work/port")" \
     --user=postgres --inputdir="$inputdir" --outputdir="$dir" "$@") > "$dir/run.log" 2>&1
  local s
  for s in "$@"; do
    if grep -qE "^test $s +\.\.\. ok" "$dir/run.log" && cmp -s "$dir/results/$s.out" "$expected/$s.out"; then
      passed=$((passed + 1)); echo "ok - $kind $s passes through the coordinator"
    else
      failed=$((failed + 1)); echo "not ok - $kind $s through the coordinator"
      if [ -f "$dir/results/$s.out" ]; then diff -U3 "$expected/$s.out" "$dir/results/$s.out" | head -n 60
      else tail -n 5 "$dir/run.log"; fi
    fi
  done
}
declare -A plain=()
i=0
for line in "${lines[@]}"; do
  read -r -a words <<< "$line"
  if [ ${#words[@]} -eq 2 ]; then plain[${words[0]}]+=" ${words[1]}"; continue; fi
  i=$((i + 1))
  worker_settings SET "${words[@]:2}"
  run_suites "${words[0]}" "$out/set$i" "${words[1]}"
  worker_settings RESET "${words[@]:2}"
done
for kind in isolation regress; do
  # shellcheck disable=SC2086 # a list of names
  [ -n "${plain[$kind]:-}" ] && run_suites "$kind" "$out/$kind" ${plain[$kind]}
done
echo "citus specs: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
