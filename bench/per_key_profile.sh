#!/usr/bin/env bash
# bench/per_key_profile.sh — where a per-key claim's backend CPU goes, in µs per claim of 10,
# from a `perf record -g` of one pgbench client running bench/per_key_cpu.sh's cycle (claim 10
# of 1000 keys on one lane, complete them). Use it beside per_key_cpu.sh: that one times the
# whole, this one names the parts, so that a change of a few µs in one function shows even
# when the machine's other work hides it in the timing. Run bench/per_key_cpu.sh first (it
# makes the database pk_cpu); each run here takes about SECS × 800 × 10 jobs of QUEUE. Runs
# as root (perf) against PGHOST/PGPORT/PGUSER; pgbench from PGBIN. To compare builds,
# alternate them on one server (install, restart) and run this each time.
# Usage: QUEUE=pk_key SECS=10 bench/per_key_profile.sh [function ...]
set -euo pipefail
PGBIN=${PGBIN:-/usr/lib/postgresql/15/bin}; QUEUE=${QUEUE:-pk_key}; SECS=${SECS:-10}
db=pk_cpu
[ $# -gt 0 ] || set -- awa::claim_ready_runtime awa::complete_jobs awa::key_window_room \
  awa::count_key_attempts_direct awa::record_key_attempts_direct awa::memo_lookup
command -v perf >/dev/null || { echo "perf is needed (apt-get install linux-perf)"; exit 2; }
w=$(mktemp -d); trap 'rm -rf $w' EXIT
cat > $w/cycle.sql <<S
SELECT coalesce(quote_literal(array_agg(job_id)), '''{}''') AS ids, coalesce(quote_literal(array_agg(run_lease)), '''{}''') AS leases FROM awa.claim_ready_runtime('$QUEUE', 10) \gset
SELECT count(*) FROM awa.complete_jobs(:ids::bigint[], :leases::bigint[]);
S
left=$("$PGBIN/psql" -X -d $db -Atc "SELECT (awa.queue_counts_exact('$QUEUE')).available")
(( left >= (SECS + 6) * 1000 * 10 )) || { echo "$QUEUE has $left jobs left: add jobs (bench/per_key_cpu.sh JOBS=...)"; exit 2; }
"$PGBIN/pgbench" -n -c 1 -T 3 -f $w/cycle.sql $db >/dev/null 2>&1   # warm: the keys' places remembered
"$PGBIN/pgbench" -n -c 1 -T $(( SECS + 3 )) -f $w/cycle.sql $db > $w/run.out 2>&1 &
sleep 1.5
pid=$("$PGBIN/psql" -X -d $db -Atc "SELECT pid FROM pg_stat_activity WHERE application_name = 'pgbench' AND datname = '$db' LIMIT 1")
perf record -F 4999 -g -p "$pid" -o $w/perf.data -- sleep "$SECS" >/dev/null 2>&1
wait
tps=$(grep -o 'tps = [0-9.]*' $w/run.out | awk '{print $3}')
echo "machine: $(nproc) cores, $(uname -r); queue $QUEUE, one client, claim 10 + complete, ${SECS}s sampled at 4999 Hz, $tps cycles/s"
# Samples whose stack holds each function, as µs per cycle (a sample is 200 µs of CPU).
perf script -i $w/perf.data -F ip,sym 2>/dev/null | python3 -c '
import sys
funcs, secs, tps = sys.argv[3:], float(sys.argv[1]), float(sys.argv[2])
hits = dict.fromkeys(funcs, 0); stack = []; total = 0
def flush():
    global total
    if stack:
        total += 1
        for f in funcs:
            if any(s.startswith(f) for s in stack): hits[f] += 1
    stack.clear()
for line in sys.stdin:
    line = line.strip()
    if not line: flush()
    else: stack.append(line.split(None, 1)[-1])
flush()
cycles = tps * secs
print(f"all: {total * 200 / cycles:.1f} µs per cycle")
for f in funcs: print(f"{f}: {hits[f] * 200 / cycles:.1f} µs per cycle")
' "$SECS" "$tps" "$@"
