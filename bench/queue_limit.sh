#!/usr/bin/env bash
# bench/queue_limit.sh — what a queue-wide limit costs a claim (docs/api.md, "Flow control").
# Runs against an existing server with the extension installed (PGHOST/PGPORT/PGUSER as for
# psql; the user must be able to create a database), in a fresh database ql_bench, with
# pgbench from PGBIN. Four queues of one lane, ROUNDS x CLAIMS x 10 jobs each and 1000 more
# (never run out): q_none (no limit), q_conc (concurrency limit 1000, never reached), q_rate
# (rate limit 1e9/s, burst 1000000, never reached; needs the preload), q_cap (concurrency
# limit 10: every claim of 10 fills it, so the queue is at its cap until the completion that
# follows). In alternating rounds one client
# claims 10 and completes them per transaction, CLAIMS times per queue; reports the claim
# statement's median latency (pgbench -r: its commit included) over ROUNDS rounds and the
# ratios to q_none; where pg_stat_statements is preloaded, also the claim's own server time
# (its mean execution time, commit excluded), median of the rounds, and its ratios. The claim
# and completion batches of every queue accumulate in the rings between two rotations of the
# background maintenance, which is what a count reads.
# Usage: PGBIN=/usr/lib/postgresql/15/bin bench/queue_limit.sh
set -euo pipefail
PGBIN=${PGBIN:-/usr/lib/postgresql/15/bin}
ROUNDS=${ROUNDS:-5}; CLAIMS=${CLAIMS:-300}
JOBS=$(( ROUNDS * CLAIMS * 10 + 1000 ))
queues="q_none q_conc q_rate q_cap"
db=ql_bench
psql() { "$PGBIN/psql" -X -q -v ON_ERROR_STOP=1 "$@"; }
quiet() { psql "$@" >/dev/null; }
quiet -d postgres -c "DROP DATABASE IF EXISTS $db WITH (FORCE)" -c "CREATE DATABASE $db"
quiet -d $db -v jobs=$JOBS <<'SQL'
CREATE EXTENSION awa_shard;
SELECT awa.create_queue(q, 1) FROM unnest(ARRAY['q_none', 'q_conc', 'q_rate', 'q_cap']) q;
SELECT cardinality(awa.insert_jobs(q, array_fill('k'::text, ARRAY[:jobs])))
  FROM unnest(ARRAY['q_none', 'q_conc', 'q_rate', 'q_cap']) q;
SELECT awa.set_concurrency_limit('q_conc', 1000);
SELECT awa.set_rate_limit('q_rate', 1e9, 1000000);
SELECT awa.set_concurrency_limit('q_cap', 10);
SQL
stmts=$(psql -d $db -Atc "SELECT current_setting('shared_preload_libraries') ~ 'pg_stat_statements'")
[ "$stmts" = t ] && quiet -d $db -c "CREATE EXTENSION IF NOT EXISTS pg_stat_statements"
# The claim's mean server time (µs) since the last reset of pg_stat_statements.
claim_us() { psql -d $db -Atc "SELECT round((sum(total_exec_time) / sum(calls) * 1000)::numeric, 1) FROM pg_stat_statements WHERE query ~ 'claim_ready_runtime' AND dbid = (SELECT oid FROM pg_database WHERE datname = current_database())"; }
w=$(mktemp -d); trap 'rm -rf $w' EXIT
for q in $queues; do
  cat > $w/$q.sql <<S
SELECT coalesce(quote_literal(array_agg(job_id)), '''{}''') AS ids, coalesce(quote_literal(array_agg(run_lease)), '''{}''') AS leases FROM awa.claim_ready_runtime('$q', 10) \gset
SELECT count(*) FROM awa.complete_jobs(:ids::bigint[], :leases::bigint[]);
S
done
median() { sort -n | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }
echo "machine: $(nproc) cores, $(uname -r); rounds $ROUNDS, $CLAIMS claims of 10 per queue per round, $JOBS jobs per queue"
for r in $(seq 1 $ROUNDS); do
  for q in $queues; do
    [ "$stmts" = t ] && quiet -d $db -c "SELECT pg_stat_statements_reset()"
    "$PGBIN/pgbench" -n -r -c 1 -t $CLAIMS -f $w/$q.sql $db 2>/dev/null \
      | awk '/quote_literal/ {print $1}' >> $w/$q.lat
    [ "$stmts" = t ] && claim_us >> $w/$q.us
  done
done
a=$(median < $w/q_none.lat)
line="claim of 10, ms (median of rounds): no limit $a"
for q in q_conc q_rate q_cap; do b=$(median < $w/$q.lat); line="$line, $q $b ($(echo "scale=3; $b / $a" | bc) x)"; done
echo "$line"
for q in $queues; do echo "  rounds $q: $(tr '\n' ' ' < $w/$q.lat)"; done
if [ "$stmts" = t ]; then
  a=$(median < $w/q_none.us)
  line="claim of 10, server time in µs (pg_stat_statements, median of rounds): no limit $a"
  for q in q_conc q_rate q_cap; do b=$(median < $w/$q.us); line="$line, $q $b ($(echo "scale=3; $b / $a" | bc) x)"; done
  echo "$line"
  for q in $queues; do echo "  rounds $q: $(tr '\n' ' ' < $w/$q.us)"; done
fi
psql -d $db -Atc "SELECT 'running in q_cap at the end: ' || count(*) FROM awa.jobs WHERE queue = 'q_cap' AND state = 'running'"
