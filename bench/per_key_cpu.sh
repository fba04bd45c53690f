#!/usr/bin/env bash
# bench/per_key_cpu.sh — the backend CPU a per-key concurrency limit adds to a worker's cycle
# (claim 10 jobs, complete them), measured with `perf stat -e task-clock` on the pgbench
# backend, so that the machine's other work weighs less than in wall-clock rates. Runs
# against an existing server with the extension installed (PGHOST/PGPORT/PGUSER as for
# psql; the user must be able to create a database), as root (perf), with pgbench from
# PGBIN. In a fresh database pk_cpu: queue pk_none (no limit) and pk_key (per-key limit
# 1000, never reached), JOBS jobs each over 1000 keys on one lane; after a warm-up pass over
# the keys, one client runs each queue for SECS seconds and the backend's task-clock is read
# over the middle of the run; cycles come from pg_stat_database.xact_commit (two
# transactions per cycle). Prints µs of backend CPU per cycle per queue and their ratio.
# To compare builds, alternate them on one server (install, restart) and run this each time.
# Usage: PGBIN=/usr/lib/postgresql/15/bin bench/per_key_cpu.sh
set -euo pipefail
PGBIN=${PGBIN:-/usr/lib/postgresql/15/bin}; JOBS=${JOBS:-200000}; SECS=${SECS:-6}
db=pk_cpu
psql() { "$PGBIN/psql" -X -q -v ON_ERROR_STOP=1 "$@"; }
command -v perf >/dev/null || { echo "perf is needed (apt-get install linux-perf)"; exit 2; }
psql -d postgres -c "DROP DATABASE IF EXISTS $db WITH (FORCE)" -c "CREATE DATABASE $db" >/dev/null
psql -d $db -v jobs=$JOBS >/dev/null <<'SQL'
CREATE EXTENSION awa_shard;
SELECT awa.create_queue(q, 1) FROM unnest(ARRAY['pk_none', 'pk_key']) q;
SELECT sum(cardinality(awa.insert_jobs(q, ARRAY['k'],
         p_concurrency_keys => ARRAY(SELECT 'k' || (i % 1000) FROM generate_series(1, least(:jobs, 100000)) i))))
  FROM unnest(ARRAY['pk_none', 'pk_key']) q, generate_series(1, greatest(:jobs / 100000, 1));
SELECT awa.set_concurrency_limit('pk_key', 1000, p_per_key => true);
SQL
w=$(mktemp -d); trap 'rm -rf $w' EXIT
for q in pk_none pk_key; do
  cat > $w/$q.sql <<S
SELECT coalesce(quote_literal(array_agg(job_id)), '''{}''') AS ids, coalesce(quote_literal(array_agg(run_lease)), '''{}''') AS leases FROM awa.claim_ready_runtime('$q', 10) \gset
SELECT count(*) FROM awa.complete_jobs(:ids::bigint[], :leases::bigint[]);
S
  "$PGBIN/pgbench" -n -c 1 -t 300 -f $w/$q.sql $db >/dev/null 2>&1   # warm-up: one pass over the keys
done
commits() { psql -d $db -Atc "SELECT xact_commit FROM pg_stat_database WHERE datname = '$db'"; }
echo "machine: $(nproc) cores, $(uname -r); $JOBS jobs per queue over 1000 keys, one client, claim 10 + complete, ${SECS}s per queue"
declare -A us
for q in pk_none pk_key; do
  "$PGBIN/pgbench" -n -c 1 -T $SECS -f $w/$q.sql $db > $w/run.out 2>&1 &
  sleep 1
  pid=$(psql -d $db -Atc "SELECT pid FROM pg_stat_activity WHERE application_name = 'pgbench' AND datname = '$db' LIMIT 1")
  a=$(commits)
  perf stat -e task-clock -p "$pid" -o $w/stat.out -- sleep $(( SECS - 2 )) >/dev/null 2>&1
  z=$(commits)
  wait
  cpu=$(awk '/task-clock/ {gsub(",", "", $1); print int($1 * 1000)}' $w/stat.out)
  cycles=$(( (z - a - 1) / 2 ))
  us[$q]=$(( cpu / cycles ))
  echo "$q: ${us[$q]} µs of backend CPU per cycle ($cycles cycles)"
done
echo "per-key limit / no limit: $(echo "scale=2; ${us[pk_key]} / ${us[pk_none]}" | bc)"
