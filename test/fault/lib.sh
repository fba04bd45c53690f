# test/fault/lib.sh — what the live-server tests share. Each test sets TEST (the name of its
# summary line) and sources this file; test/run skips it, since it is no test itself.
#   TEST=launcher; . "$(dirname "$0")/lib.sh"
# Run as the postgres user: servers refuse to run as root.
set -uo pipefail
PGBIN=${PGBIN:-/usr/lib/postgresql/15/bin}
passed=0; failed=0
dir=""; port=""

# One check: NAME, got, expected.
check() { if [ "$2" = "$3" ]; then passed=$((passed+1)); else failed=$((failed+1)); echo "not ok - $1: expected '$3', got '$2'"; fi; }

# The line test/run counts: "<TEST>: N passed, M failed".
summary() { echo "$TEST: $passed passed, $failed failed"; }

# Stop before the checks could finish: the reason, the end of the server log, one failure more.
give_up() {
  [ -n "${1:-}" ] && echo "$1"
  [ -n "$dir" ] && [ -f "$dir/log" ] && tail -n 20 "$dir/log"
  failed=$((failed+1)); summary; exit 1
}

# new_server PREFIX PORT_BASE: a fresh directory $dir (/tmp/awa_PREFIX.*), a port $port in
# [PORT_BASE, PORT_BASE + 900) and a cluster in $dir/data (trust authentication).
new_server() {
  dir=$(mktemp -d "/tmp/awa_$1.XXXXXX"); port=$(( $2 + RANDOM % 900 ))
  "$PGBIN/initdb" -D "$dir/data" -A trust >/dev/null || give_up "initdb failed"
}

# start_server [OPTIONS]: start it with its socket in $dir, messages in English, then OPTIONS
# (e.g. "-c shared_preload_libraries=awa_shard"); settings may also be in $dir/data/postgresql.conf.
start_server() { "$PGBIN/pg_ctl" -D "$dir/data" -o "-p $port -k $dir -c lc_messages=C $*" -l "$dir/log" -w start >/dev/null; }

# Stop the server at once and remove its directory (KEEP_DIR=1 keeps it, logs included).
drop_server() {
  [ -n "$dir" ] || return 0
  "$PGBIN/pg_ctl" -D "$dir/data" -m immediate stop >/dev/null 2>&1
  if [ -n "${KEEP_DIR:-}" ]; then echo "kept $dir"; else rm -rf "$dir"; fi
}

# start_preloaded DB: start the server preloaded with the extension (maintenance off, fsync off)
# and create the database DB.
start_preloaded() {
  cat >> "$dir/data/postgresql.conf" <<EOF
shared_preload_libraries = 'awa_shard'
awa_shard.maintenance = off
fsync = off
lc_messages = 'C'
EOF
  start_server || give_up "the server did not start"
  q postgres -c "CREATE DATABASE $1" >/dev/null || give_up "CREATE DATABASE $1 failed"
}

# Background processes a test started and wants ended at exit: bg+=($!).
bg=()
stop_background() { [ ${#bg[@]} -gt 0 ] || return 0; local p; for p in "${bg[@]}"; do kill "$p" 2>/dev/null; done; wait 2>/dev/null; }

# At exit; a test that starts more than this redefines it.
cleanup() { stop_background; drop_server; }
trap cleanup EXIT

# q DB [PSQL ARGS]: psql on the server, unaligned tuples only, stopping at the first error.
q() { local db="$1"; shift; "$PGBIN/psql" -h "$dir" -p "$port" -X -A -t -q -v ON_ERROR_STOP=1 -d "$db" "$@"; }

# wait_for DB SECONDS QUERY VALUE: wait until QUERY in DB returns VALUE (status 1 at the timeout).
wait_for() { local i; for i in $(seq 1 $(( $2 * 10 ))); do [ "$(q "$1" -c "$3" 2>/dev/null)" = "$4" ] && return 0; sleep 0.1; done; return 1; }

# Milliseconds since the epoch.
now_ms() { date +%s%3N; }
