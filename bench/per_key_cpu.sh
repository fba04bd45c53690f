#!/usr/bin/env bash
# bench/per_key_cpu.sh — the backend CPU a per-key concurrency limit adds to a worker's cycle
# (claim 10 jobs, complete them), measured with `perf stat -e task-clock` on the pgbench
# backend, so that the machine's other work weighs less than in wall-clock rates. Runs
# against an existing server with the extension installed (PGHOST/PGPORT/PGUSER as for
# psql; the user must be able to create a database), as root (perf), with pgbench from
# PGBIN. In a fresh database pk_cpu: queue pk_none (no limit) and pk_key (per-key limit
# 1000, never reached), JOBS jobs each over 1000 keys on one lane; after a warm-up pass over
# the keys, ROUNDS rounds, each running one client on each queue for SECS seconds, the two
# queues in turn and the first of them alternating between rounds: both queues share the
# rings, which fill as the rounds go, so the queue run second in every round would pay for
# the first one's batches (a fixed order made the limit look 5 to 8 % dearer per cycle).
# The backend's task-clock is read over the middle of each run; cycles come from
# pg_stat_database.xact_commit (two transactions per cycle). Prints per round the µs of
# backend CPU per cycle of each queue and their ratio, and the medians; with
# pg_stat_statements preloaded, also the claim statement's mean server time (its commit
# excluded) per run and the median ratio. To compare builds, alternate them on one server
# (install, restart) and run this each time.
# Usage: PGBIN=/usr/lib/postgresql/15/bin ROUNDS=3 bench/per_key_cpu.sh
set -euo pipefail
PGBIN=${PGBIN:-/usr/lib/postgresql/15/bin}; ROUNDS=${ROUNDS:-3}; SECS=${SECS:-6}
JOBS=${JOBS:-$(( (ROUNDS * SECS * 15000 + 20000 + 99999) / 100000 * 100000 ))}  # never run out
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
stmts=$(psql -d $db -Atc "SELECT current_setting('shared_preload_libraries') ~ 'pg_stat_statements'")
[ "$stmts" = t ] && psql -d $db -c "CREATE EXTENSION IF NOT EXISTS pg_stat_statements" >/dev/null
# The claim's mean server time (µs) since the last reset of pg_stat_statements.
claim_us() { psql -d $db -Atc "SELECT round((sum(total_exec_time) / sum(calls) * 1000)::numeric, 1) FROM pg_stat_statements WHERE query ~ 'claim_ready_runtime' AND dbid = (SELECT oid FROM pg_database WHERE datname = current_database())"; }
w=$(mktemp -d); trap 'rm -rf $w' EXIT
for q in pk_none pk_key; do
  cat > $w/$q.sql <<S
SELECT coalesce(quote_literal(array_agg(job_id)), '''{}''') AS ids, coalesce(quote_literal(array_agg(run_lease)), '''{}''') AS leases FROM awa.claim_ready_runtime('$q', 10) \gset
SELECT count(*) FROM awa.complete_jobs(:ids::bigint[], :leases::bigint[]);
S
  "$PGBIN/pgbench" -n -c 1 -t 300 -f $w/$q.sql $db >/dev/null 2>&1   # warm-up: one pass over the keys
done
commits() { psql -d $db -Atc "SELECT xact_commit FROM pg_stat_database WHERE datname = '$db'"; }
median() { sort -n | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }
echo "machine: $(nproc) cores, $(uname -r); $JOBS jobs per queue over 1000 keys, one client, claim 10 + complete, $ROUNDS rounds of ${SECS}s per queue, order alternating"
for r in $(seq 1 "$ROUNDS"); do
  if (( r % 2 )); then order="pk_none pk_key"; else order="pk_key pk_none"; fi
  declare -A us=() st=()
  for q in $order; do
    [ "$stmts" = t ] && psql -d $db -Atc "SELECT pg_stat_statements_reset()" >/dev/null
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
    echo "${us[$q]}" >> $w/$q.us
    if [ "$stmts" = t ]; then st[$q]=$(claim_us); echo "${st[$q]}" >> $w/$q.st; fi
  done
  ratio=$(echo "scale=3; ${us[pk_key]} / ${us[pk_none]}" | bc); echo "$ratio" >> $w/ratio
  line="round $r ($order): pk_none ${us[pk_none]} µs, pk_key ${us[pk_key]} µs of backend CPU per cycle, ratio $ratio"
  if [ "$stmts" = t ]; then
    sr=$(echo "scale=3; ${st[pk_key]} / ${st[pk_none]}" | bc); echo "$sr" >> $w/sratio
    line="$line; claim's server time ${st[pk_none]} / ${st[pk_key]} µs, ratio $sr"
  fi
  echo "$line"
done
echo "median: pk_none $(median < $w/pk_none.us) µs, pk_key $(median < $w/pk_key.us) µs of backend CPU per cycle; per-key limit / no limit $(median < $w/ratio) (median of the rounds' ratios)"
[ "$stmts" = t ] && echo "median: claim's server time pk_none $(median < $w/pk_none.st) µs, pk_key $(median < $w/pk_key.st) µs; ratio $(median < $w/sratio)"
exit 0
