#!/usr/bin/env bash
# bench/queue_cap.sh — a queue with a concurrency limit and more workers than the limit, or a
# limit no claim reaches (docs/design.md §4, "At the cap without a count", "The limit lock
# ends at PRE_COMMIT"). Runs against an existing server with the extension installed
# (PGHOST/PGPORT/PGUSER as for psql; the user must be able to create a database), in a fresh
# database qc_bench, with pgbench from PGBIN. Queue qc: SHARDS lanes (default 1), 100000
# jobs spread over them, concurrency limit LIMIT (`none`: no limit, the reference). WORKERS
# clients each claim 1 job, hold it JOB_MS ms (a pgbench \sleep, outside any transaction),
# complete it, for SECS seconds. Reports completed jobs/s, the ideal (LIMIT / JOB_MS, or
# WORKERS / JOB_MS without a limit), and where pg_stat_statements is preloaded the claim's
# mean server time (commit excluded). Run it against two builds on one server (install,
# restart) and alternate, ROUNDS rounds each; compare medians.
# Usage: PGBIN=/usr/lib/postgresql/15/bin WORKERS=8 LIMIT=4 JOB_MS=50 SHARDS=1 bench/queue_cap.sh
set -euo pipefail
PGBIN=${PGBIN:-/usr/lib/postgresql/15/bin}
WORKERS=${WORKERS:-8}; LIMIT=${LIMIT:-4}; SHARDS=${SHARDS:-1}; JOB_MS=${JOB_MS:-50}; SECS=${SECS:-20}; ROUNDS=${ROUNDS:-3}
db=qc_bench
psql() { "$PGBIN/psql" -X -q -v ON_ERROR_STOP=1 "$@"; }
w=$(mktemp -d); trap 'rm -rf $w' EXIT
cat > $w/worker.sql <<S
SELECT coalesce(quote_literal(array_agg(job_id)), '''{}''') AS ids, coalesce(quote_literal(array_agg(run_lease)), '''{}''') AS leases FROM awa.claim_ready_runtime('qc', 1) \gset
\sleep $JOB_MS ms
SELECT count(*) FROM awa.complete_jobs(:ids::bigint[], :leases::bigint[]);
S
ideal=$([ "$LIMIT" = none ] && echo "$(( WORKERS * 1000 / JOB_MS )) (no limit)" || echo $(( LIMIT * 1000 / JOB_MS )))
echo "machine: $(nproc) cores, $(uname -r); $WORKERS workers, $SHARDS lanes, limit $LIMIT, jobs of $JOB_MS ms, $SECS s a round, $ROUNDS rounds; ideal $ideal jobs/s"
for r in $(seq 1 $ROUNDS); do
  psql -d postgres -c "DROP DATABASE IF EXISTS $db WITH (FORCE)" -c "CREATE DATABASE $db" >/dev/null
  psql -d $db -v shards=$SHARDS >/dev/null <<'SQL'
CREATE EXTENSION awa_shard;
SELECT awa.create_queue('qc', :shards);
SELECT cardinality(awa.insert_jobs('qc', array_fill('k'::text, ARRAY[100000]), p_spread_keyless => true));
SQL
  [ "$LIMIT" = none ] || psql -d $db -c "SELECT awa.set_concurrency_limit('qc', $LIMIT)" >/dev/null
  stmts=$(psql -d $db -Atc "SELECT current_setting('shared_preload_libraries') ~ 'pg_stat_statements'")
  [ "$stmts" = t ] && psql -d $db -c "CREATE EXTENSION IF NOT EXISTS pg_stat_statements" -c "SELECT pg_stat_statements_reset()" >/dev/null
  "$PGBIN/pgbench" -n -c $WORKERS -j 2 -T $SECS -f $w/worker.sql $db >/dev/null 2>&1
  done_jobs=$(psql -d $db -Atc "SELECT count(*) FROM awa.jobs WHERE queue = 'qc' AND state = 'completed'")
  us=-
  [ "$stmts" = t ] && us=$(psql -d $db -Atc "SELECT round((sum(total_exec_time) / sum(calls) * 1000)::numeric, 1) FROM pg_stat_statements WHERE query ~ 'claim_ready_runtime' AND dbid = (SELECT oid FROM pg_database WHERE datname = current_database())")
  echo "round $r: $(( done_jobs / SECS )) jobs/s, claim $us µs (mean server time)"
done
psql -d postgres -c "DROP DATABASE IF EXISTS $db WITH (FORCE)" >/dev/null
