#!/usr/bin/env bash
# test/citus/measure.sh — per-call cost of the hot calls on a running Citus cluster
# (test/citus/cluster.sh start) against the same call made directly on the queue's worker,
# and, when a plain server is given (PLAIN_HOST/PLAIN_PORT, awa_shard without Citus), on it.
# One client, SECS seconds per measurement (default 10), pgbench; prints one line per case:
#   <call> <where> <calls/s> <ms/call>
# Numbers are of this machine at the time of the run: compare them with each other only.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
PG_CONFIG=${PG_CONFIG:-$(command -v pg_config)}
bin=$("$PG_CONFIG" --bindir)
work=${AWA_CITUS_WORK:-/tmp/awa_citus}
db=${AWA_CITUS_DB:-awa}
secs=${SECS:-10}
port0=$(cat "$work/port")
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT; chmod 755 "$tmp"
as_pg() { if [ "$(id -u)" = 0 ]; then su postgres -s /bin/bash -c "$*"; else bash -c "$*"; fi; }

# The queue measured lives on worker 1 (found by its placement).
queue=""
for i in $(seq 1 40); do
  p=$("$here/cluster.sh" psql 0 -c "SELECT nodeport FROM pg_dist_shard_placement WHERE shardid = get_shard_id_for_distribution_column('awa.queue_meta', 'bench$i')")
  if [ "$p" = $((port0 + 1)) ]; then queue=bench$i; break; fi
done
[ -n "$queue" ] || { echo "no queue on worker 1"; exit 1; }

# The suite's logging of remote commands (cluster.sh) is off while measuring.
for n in 1 2; do
  "$here/cluster.sh" psql $n -c "ALTER SYSTEM SET citus.log_remote_commands = off" -c "SELECT pg_reload_conf()" >/dev/null
done
restore() {
  for n in 1 2; do
    "$here/cluster.sh" psql $n -c "ALTER SYSTEM RESET citus.log_remote_commands" -c "SELECT pg_reload_conf()" >/dev/null 2>&1
  done
  rm -rf "$tmp"
}
trap restore EXIT

echo "SELECT awa.insert_jobs('$queue', '{bench}');" > "$tmp/enqueue.sql"
echo "SELECT job_id FROM awa.claim_ready_runtime('$queue', 1);" > "$tmp/claim.sql"
# Enough ready jobs for the claims (one insert_jobs call of 1000, repeated).
fill="SELECT awa.insert_jobs('$queue', '{bench}', p_args => ARRAY[$(printf "'{}'::jsonb,%.0s" $(seq 1 1000) | sed 's/,$//')])"

run() { # label host port script
  local out
  out=$(as_pg "$bin/pgbench -n -c 1 -T $secs -f '$tmp/$4.sql' -h '$2' -p $3 -U postgres $db" 2>&1)
  echo "$out" | awk -v call="$4" -v where="$1" '/^tps = /{tps=$3} /latency average/{lat=$4} END {printf "%-8s %-22s %9.0f calls/s %7.3f ms/call\n", call, where, tps, lat}'
}
for target in "coordinator (delegated)|$work/sock|$port0" "worker (direct)|$work/sock|$((port0 + 1))" \
              ${PLAIN_PORT:+"plain server|$PLAIN_HOST|$PLAIN_PORT"}; do
  IFS='|' read -r label host port <<< "$target"
  if [ "$label" = "plain server" ]; then
    as_pg "$bin/psql -h '$host' -p $port -U postgres -d $db -X -q -c \"$fill\" -c \"$fill\" -c \"$fill\"" >/dev/null
  else
    for k in 1 2 3; do "$here/cluster.sh" psql 0 -c "$fill" >/dev/null 2>&1; done
  fi
  run "$label" "$host" "$port" enqueue
  run "$label" "$host" "$port" claim
done
