#!/usr/bin/env bash
# test/citus/cluster.sh start|stop|psql N [args] — a Citus coordinator and two workers on one
# machine, for the Citus suite (test/citus/run.sh) and by hand.
#
# Env: PG_CONFIG (the PostgreSQL that has Citus and awa_shard installed), AWA_CITUS_WORK (work
# directory, default /tmp/awa_citus), AWA_CITUS_PORT (coordinator port; the workers take the
# next two; default chosen from a free range), AWA_CITUS_DB (database, default awa),
# AWA_CITUS_AS_USERS=1 (durability and background maintenance at their defaults; the suite
# turns them off).
# Nodes listen on unix sockets in $work/sock and on localhost; servers run as the `postgres`
# OS user when called as root. Node 0 is the coordinator, 1 and 2 the workers.
#
# start: initdb, shared_preload_libraries = 'citus,awa_shard', max_prepared_transactions > 0,
#   CREATE EXTENSION citus on every node, the coordinator's host, citus_add_node for the
#   workers, then CREATE EXTENSION awa_shard on the coordinator (Citus propagates it to the
#   workers) and awa.citus_setup().
set -euo pipefail
PG_CONFIG=${PG_CONFIG:-$(command -v pg_config)}
bin=$("$PG_CONFIG" --bindir)
work=${AWA_CITUS_WORK:-/tmp/awa_citus}
db=${AWA_CITUS_DB:-awa}
sock=$work/sock

as_pg() {
  if [ "$(id -u)" = 0 ]; then su postgres -s /bin/bash -c "$*"; else bash -c "$*"; fi
}
port_of() { echo $(( $(cat "$work/port") + $1 )); }
# psql on node N (0 coordinator, 1..2 workers), quiet, unaligned, stop on error.
node_psql() {
  local n=$1; shift
  "$bin/psql" -h "$sock" -p "$(port_of "$n")" -U postgres -d "$db" -X -q -A -t -v ON_ERROR_STOP=1 "$@"
}

start() {
  mkdir -p "$work"
  if [ -f "$work/port" ] && as_pg "$bin/pg_ctl -D '$work/n0' status" >/dev/null 2>&1; then
    echo "cluster already running in $work"; return 0
  fi
  rm -rf "$work"/n0 "$work"/n1 "$work"/n2 "$sock"; mkdir -p "$sock"
  local base=${AWA_CITUS_PORT:-}
  if [ -z "$base" ]; then
    for try in $(seq 1 20); do
      base=$((58000 + (RANDOM % 600) * 3))
      ss -ltn 2>/dev/null | grep -qE ":($base|$((base + 1))|$((base + 2)))\b" || break
    done
  fi
  echo "$base" > "$work/port"
  [ "$(id -u)" = 0 ] && chown -R postgres: "$work"
  for n in 0 1 2; do
    as_pg "$bin/initdb -D '$work/n$n' -A trust -U postgres >/dev/null"
    cat >> "$work/n$n/postgresql.conf" <<CONF
port = $((base + n))
listen_addresses = 'localhost'
unix_socket_directories = '$sock'
shared_preload_libraries = 'citus,awa_shard'
max_prepared_transactions = 20
max_locks_per_transaction = 1024
max_connections = 60
lc_messages = 'C'
citus.node_conninfo = 'sslmode=disable'
CONF
    # The suite's nodes skip durability and the background maintenance (each test runs the
    # passes it checks), and Citus's timed drop of a move's or split's old shards (each test
    # drops them where it checks what follows: citus_cleanup_orphaned_resources; a move drops
    # them first itself); AWA_CITUS_AS_USERS=1 keeps the defaults, as users run a server
    # (fsync, synchronous_commit, full_page_writes on; maintenance on), for measurements.
    if [ -z "${AWA_CITUS_AS_USERS:-}" ]; then
      printf "fsync = off\nsynchronous_commit = off\nfull_page_writes = off\nawa_shard.maintenance = off\n" \
        >> "$work/n$n/postgresql.conf"
      echo "citus.defer_shard_delete_interval = -1" >> "$work/n$n/postgresql.conf"
    fi
    # Workers report every command they send to another node (a NOTICE the coordinator
    # relays to its client): the suite counts them (docs/scale-out.md, "Measured").
    [ "$n" -gt 0 ] && echo "citus.log_remote_commands = on" >> "$work/n$n/postgresql.conf"
    as_pg "$bin/pg_ctl -D '$work/n$n' -l '$work/n$n.log' -w start >/dev/null" || { cat "$work/n$n.log"; exit 1; }
    as_pg "$bin/createdb -h '$sock' -p $((base + n)) -U postgres $db"
    node_psql "$n" -c "CREATE EXTENSION citus"
  done
  node_psql 0 -c "SELECT citus_set_coordinator_host('localhost', $base)" >/dev/null
  node_psql 0 -c "SELECT citus_add_node('localhost', $((base + 1)))" >/dev/null
  node_psql 0 -c "SELECT citus_add_node('localhost', $((base + 2)))" >/dev/null
  node_psql 0 -c "CREATE EXTENSION awa_shard" 
  node_psql 0 -c "SELECT awa.citus_setup()" >/dev/null
  echo "cluster up in $work: coordinator port $base, workers $((base + 1)) and $((base + 2)), database $db"
}

stop() {
  for n in 0 1 2; do
    [ -d "$work/n$n" ] && as_pg "$bin/pg_ctl -D '$work/n$n' -m fast stop >/dev/null 2>&1" || true
  done
  echo "cluster stopped"
}

case "${1:-}" in
  start) start;;
  stop) stop;;
  psql) shift; node_psql "$@";;
  *) echo "usage: $0 start|stop|psql N [psql args]"; exit 2;;
esac
