#!/usr/bin/env bash
# bench/per_key_limit.sh — what a per-key concurrency limit costs a claim (docs/api.md,
# "Per-key limits and order"). Runs against an existing server with the extension installed
# (PGHOST/PGPORT/PGUSER as for psql; the user must be able to create a database), in a fresh
# database pk_bench, with pgbench from PGBIN. Side by side, in alternating rounds:
#  1. claim cost at batch 10: queue pk_none (no limit) vs pk_key (per-key concurrency limit
#     1000, never reached) vs pk_rate (per-key rate limit of 1e9/s, burst 1000000, never
#     reached; needs the preload), each ROUNDS x CLAIMS x 10 jobs and 1000 more (never run
#     out) over 1000 keys on one lane; one client
#     claims 10 and completes them per transaction; reports the claim statement's median
#     latency (pgbench -r: its commit included) over ROUNDS rounds and the ratios; where
#     pg_stat_statements is preloaded, also the claim's own server time (its mean execution
#     time, commit excluded), median of the rounds, and its ratios.
#  2. unaffected keys while one key is at its cap: hol_none (S = 4, COLD 'cold' jobs over 200
#     keys routed off the 'hot' key's shard, key = ordering key, no limit) vs hol_room (the
#     same jobs, per-key limit 10, no key at its cap) vs hol_cap (the same plus 2000 'hot'
#     jobs on their own shard queued first, per-key limit 10, 10 'hot' attempts left running,
#     so every claim meets the capped lane first and passes it over; the cold keys never
#     reach 10); 2 clients each run TXS transactions that claim 10 and complete them; reports
#     completed jobs/s (median of ROUNDS) and the ratios: hol_cap against hol_none (what the
#     limit and the capped key cost together) and against hol_room (what the capped key
#     costs).
# Usage: PGBIN=/usr/lib/postgresql/15/bin bench/per_key_limit.sh
set -euo pipefail
PGBIN=${PGBIN:-/usr/lib/postgresql/15/bin}
ROUNDS=${ROUNDS:-5}; TXS=${TXS:-500}; CLAIMS=${CLAIMS:-300}
COLD=$(( (ROUNDS * 2 * TXS * 10 + 19999) / 20000 * 20000 + 20000 ))  # cold jobs per queue: never run out
HOT=$(( ROUNDS * CLAIMS * 10 + 1000 ))  # jobs per claim-cost queue: never run out
db=pk_bench
psql() { "$PGBIN/psql" -X -q -v ON_ERROR_STOP=1 "$@"; }
quiet() { psql "$@" >/dev/null; }
quiet -d postgres -c "DROP DATABASE IF EXISTS $db WITH (FORCE)" -c "CREATE DATABASE $db"
quiet -d $db -v cold=$COLD -v hot=$HOT <<'SQL'
CREATE EXTENSION awa_shard;
SELECT awa.create_queue(q, 1) FROM unnest(ARRAY['pk_none', 'pk_key', 'pk_rate']) q;
SELECT cardinality(awa.insert_jobs(q, ARRAY['k'],
         p_concurrency_keys => ARRAY(SELECT 'k' || (i % 1000) FROM generate_series(1, :hot) i)))
  FROM unnest(ARRAY['pk_none', 'pk_key', 'pk_rate']) q;
SELECT awa.set_concurrency_limit('pk_key', 1000, p_per_key => true);
SELECT awa.set_rate_limit('pk_rate', 1e9, 1000000, p_per_key => true);
SELECT awa.create_queue(q, 4) FROM unnest(ARRAY['hol_none', 'hol_room', 'hol_cap']) q;
CREATE TABLE cold_keys AS
  SELECT k FROM (SELECT 'c' || i AS k FROM generate_series(1, 2000) i) c
   WHERE awa.shard_for_enqueue('hol_cap', 2, convert_to(k, 'UTF8')) <> awa.shard_for_enqueue('hol_cap', 2, 'hot'::bytea)
   LIMIT 200;
SELECT cardinality(awa.insert_jobs('hol_cap', ARRAY['k'], p_ordering_keys => array_fill('hot'::bytea, ARRAY[2000]),
                                   p_concurrency_keys => array_fill('hot'::text, ARRAY[2000])));
SELECT cardinality(awa.insert_jobs(q, ARRAY['k'], p_ordering_keys => x.ok, p_concurrency_keys => x.ck))
  FROM unnest(ARRAY['hol_none', 'hol_room', 'hol_cap']) q, generate_series(1, :cold / 20000) g,
       (SELECT array_agg(convert_to(k, 'UTF8') ORDER BY o) AS ok, array_agg(k ORDER BY o) AS ck
          FROM (SELECT k, random() AS o FROM cold_keys, generate_series(1, 100)) y) x;
SELECT awa.set_concurrency_limit(q, 10, p_per_key => true) FROM unnest(ARRAY['hol_room', 'hol_cap']) q;
SELECT count(*) AS hot_running FROM awa.claim_ready_runtime('hol_cap', 10);
SQL
stmts=$(psql -d $db -Atc "SELECT current_setting('shared_preload_libraries') ~ 'pg_stat_statements'")
[ "$stmts" = t ] && quiet -d $db -c "CREATE EXTENSION IF NOT EXISTS pg_stat_statements"
# The claim's mean server time (µs) since the last reset of pg_stat_statements.
claim_us() { psql -d $db -Atc "SELECT round((sum(total_exec_time) / sum(calls) * 1000)::numeric, 1) FROM pg_stat_statements WHERE query ~ 'claim_ready_runtime' AND dbid = (SELECT oid FROM pg_database WHERE datname = current_database())"; }
w=$(mktemp -d); trap 'rm -rf $w' EXIT
for q in pk_none pk_key pk_rate hol_none hol_room hol_cap; do
  cat > $w/$q.sql <<S
SELECT coalesce(quote_literal(array_agg(job_id)), '''{}''') AS ids, coalesce(quote_literal(array_agg(run_lease)), '''{}''') AS leases FROM awa.claim_ready_runtime('$q', 10) \gset
SELECT count(*) FROM awa.complete_jobs(:ids::bigint[], :leases::bigint[]);
S
done
median() { sort -n | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }
echo "machine: $(nproc) cores, $(uname -r); rounds $ROUNDS, $CLAIMS claims per round, $HOT jobs per claim-cost queue, $TXS transactions per client per round, $COLD cold jobs per queue"
for r in $(seq 1 $ROUNDS); do
  for q in pk_none pk_key pk_rate; do
    [ "$stmts" = t ] && quiet -d $db -c "SELECT pg_stat_statements_reset()"
    "$PGBIN/pgbench" -n -r -c 1 -t $CLAIMS -f $w/$q.sql $db 2>/dev/null \
      | awk '/quote_literal/ {print $1}' >> $w/$q.lat
    [ "$stmts" = t ] && claim_us >> $w/$q.us
  done
  for q in hol_none hol_room hol_cap; do
    before=$(psql -d $db -Atc "SELECT count(*) FROM awa.jobs WHERE queue = '$q' AND state = 'completed'")
    start=$(date +%s.%N)
    "$PGBIN/pgbench" -n -c 2 -j 2 -t $TXS -f $w/$q.sql $db >/dev/null 2>&1
    end=$(date +%s.%N)
    after=$(psql -d $db -Atc "SELECT count(*) FROM awa.jobs WHERE queue = '$q' AND state = 'completed'")
    echo "scale=1; ($after - $before) / ($end - $start)" | bc >> $w/$q.tps
  done
done
a=$(median < $w/pk_none.lat); b=$(median < $w/pk_key.lat); e=$(median < $w/pk_rate.lat)
echo "claim of 10, ms (median of rounds): no limit $a, per-key limit $b, ratio $(echo "scale=3; $b / $a" | bc)"
echo "  per-key rate limit $e, ratio $(echo "scale=3; $e / $a" | bc)"
echo "  rounds: none $(tr '\n' ' ' < $w/pk_none.lat)| per-key $(tr '\n' ' ' < $w/pk_key.lat)| per-key rate $(tr '\n' ' ' < $w/pk_rate.lat)"
if [ "$stmts" = t ]; then
  a=$(median < $w/pk_none.us); b=$(median < $w/pk_key.us); e=$(median < $w/pk_rate.us)
  echo "claim of 10, server time in µs (pg_stat_statements, median of rounds): no limit $a, per-key limit $b, ratio $(echo "scale=3; $b / $a" | bc), per-key rate limit $e, ratio $(echo "scale=3; $e / $a" | bc)"
fi
c=$(median < $w/hol_none.tps); d=$(median < $w/hol_cap.tps); f=$(median < $w/hol_room.tps)
echo "unaffected keys, jobs/s (median): no limit $c, limit with no key at its cap $f, one key at its cap $d"
echo "  ratios: capped / no limit $(echo "scale=3; $d / $c" | bc), capped / no key at its cap $(echo "scale=3; $d / $f" | bc)"
echo "  rounds: none $(tr '\n' ' ' < $w/hol_none.tps)| room $(tr '\n' ' ' < $w/hol_room.tps)| capped $(tr '\n' ' ' < $w/hol_cap.tps)"
psql -d $db -Atc "SELECT 'hot running: ' || count(*) FROM awa.jobs WHERE queue = 'hol_cap' AND concurrency_key = 'hot' AND state = 'running'"
