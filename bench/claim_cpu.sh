#!/usr/bin/env bash
# bench/claim_cpu.sh — the backend CPU of a claim and of a completion on a backlog, from
# perf samples of the pgbench backend attributed to awa.claim_ready_runtime and
# awa.complete_jobs (their call stacks), so that the machine's other work weighs less than in
# wall-clock rates or in the backend's whole task-clock. Runs against an existing server with
# the extension installed (PGHOST/PGPORT/PGUSER as for psql; the user must be able to create a
# database), as root (perf), with pgbench from PGBIN. In a fresh database claim_cpu: queue
# cpu_q (one lane, no limit) with JOBS jobs; one client claims BATCH and completes them per
# cycle for SECS seconds, sampled at 2000 Hz over all but the first 2 s. Prints µs of backend
# CPU per cycle in the claim, in the completion and in all. To compare builds, alternate them
# on one server (install, restart) and run this each time.
# Usage: PGBIN=/usr/lib/postgresql/15/bin JOBS=800000 bench/claim_cpu.sh
set -euo pipefail
PGBIN=${PGBIN:-/usr/lib/postgresql/15/bin}; JOBS=${JOBS:-800000}; SECS=${SECS:-14}; BATCH=${BATCH:-10}
db=claim_cpu
psql() { "$PGBIN/psql" -X -q -v ON_ERROR_STOP=1 "$@"; }
command -v perf >/dev/null || { echo "perf is needed (apt-get install linux-perf)"; exit 2; }
psql -d postgres -c "DROP DATABASE IF EXISTS $db WITH (FORCE)" -c "CREATE DATABASE $db" >/dev/null
psql -d $db -v jobs=$JOBS >/dev/null <<'SQL'
CREATE EXTENSION awa_shard;
SELECT awa.create_queue('cpu_q', 1);
SELECT sum(cardinality(awa.insert_jobs('cpu_q', ARRAY['k'], p_args => ARRAY(SELECT '{}'::jsonb FROM generate_series(1, least(:jobs, 100000))))))
  FROM generate_series(1, greatest(:jobs / 100000, 1));
CHECKPOINT;
SQL
w=$(mktemp -d); trap 'rm -rf $w' EXIT
cat > $w/cycle.sql <<S
SELECT coalesce(quote_literal(array_agg(job_id)), '''{}''') AS ids, coalesce(quote_literal(array_agg(run_lease)), '''{}''') AS leases FROM awa.claim_ready_runtime('cpu_q', $BATCH) \gset
SELECT count(*) FROM awa.complete_jobs(:ids::bigint[], :leases::bigint[]);
S
commits() { psql -d $db -Atc "SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()"; }
"$PGBIN/pgbench" -n -c 1 -T "$SECS" -f $w/cycle.sql $db >/dev/null 2>&1 &
bench=$!
sleep 2
pid=$(psql -d $db -Atc "SELECT pid FROM pg_stat_activity WHERE application_name = 'pgbench' AND datname = current_database() LIMIT 1")
c0=$(commits)
perf record -F 2000 -g -p "$pid" -o $w/perf.data -- sleep $((SECS - 3)) >/dev/null 2>&1
c1=$(commits)
wait $bench
perf script -i $w/perf.data -F ip,sym 2>/dev/null > $w/stacks.txt
left=$(psql -d $db -Atc "SELECT count(*) FROM awa.jobs WHERE queue = 'cpu_q' AND state = 'available'")
echo "machine: $(nproc) cores, $(uname -r); $JOBS jobs on one lane ($left left after), one client, claim $BATCH + complete, ${SECS}s"
# Two transactions per cycle; the two reads of the counter add two.
python3 - "$w/stacks.txt" "$(( (c1 - c0 - 2) / 2 ))" <<'PY'
import sys
path, cycles = sys.argv[1], max(int(sys.argv[2]), 1)
stacks, cur = [], []
for line in open(path):
    line = line.strip()
    if not line:
        if cur: stacks.append(cur); cur = []
        continue
    parts = line.split(None, 1); cur.append(parts[1] if len(parts) > 1 else parts[0])
if cur: stacks.append(cur)
us = lambda fn: sum(1 for s in stacks if any(f.startswith(fn) for f in s)) * 500.0 / cycles
print(f"cycles {cycles}: claim {us('awa::claim_ready_runtime'):.1f} µs, completion {us('awa::complete_jobs'):.1f} µs, "
      f"all {len(stacks) * 500.0 / cycles:.1f} µs of backend CPU per cycle")
PY
