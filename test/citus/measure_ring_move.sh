#!/usr/bin/env bash
# test/citus/measure_ring_move.sh — what the queue ring's prune costs when a sealed slot holds a
# backlog, on a running Citus cluster (test/citus/cluster.sh start) and, when a plain server is
# given (PLAIN_HOST/PLAIN_PORT, awa_shard without Citus), on it: JOBS pending jobs (default
# 20000) in one sealed slot, on one queue of each worker (on the plain server, two queues);
# the prune that moves them, the one that reads the workers' horizons (the cluster only) and
# the one that truncates the slot, ROUNDS rounds (default 3), milliseconds as psql's \timing
# reports them. Numbers are of this machine at the time of the run: compare them with each
# other only.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
PG_CONFIG=${PG_CONFIG:-$(command -v pg_config)}
bin=$("$PG_CONFIG" --bindir)
work=${AWA_CITUS_WORK:-/tmp/awa_citus}
jobs=${JOBS:-20000}
rounds=${ROUNDS:-3}
port0=$(cat "$work/port")

# One queue on each worker (found by its placement).
queues=""
for want in 1 2; do
  for i in $(seq 1 40); do
    p=$("$here/cluster.sh" psql 0 -c "SELECT nodeport FROM pg_dist_shard_placement WHERE shardid = get_shard_id_for_distribution_column('awa.queue_meta', 'ringmove$i')")
    if [ "$p" = $((port0 + want)) ]; then queues="$queues ringmove$i"; break; fi
  done
done
set -- $queues
[ $# = 2 ] || { echo "no queue found on each worker"; exit 1; }
qa=$1 qb=$2

cluster() { "$here/cluster.sh" psql 0 -c '\timing on' -c "$1" 2>/dev/null; }
plain() { "$bin/psql" -h "$PLAIN_HOST" -p "$PLAIN_PORT" -U postgres -d "${PLAIN_DB:-postgres}" -X -q -A -t -c '\timing on' -c "$1"; }
# ms of one call: "<result> <ms>"
timed() { "$@" | awk '/^Time:/ {t=$2; next} {r=$0} END {print r, t}'; }

# round WHERE: fill a fresh slot with the backlog, seal it, prune until it is freed.
round() {
  local run=$1 q
  $run "SELECT awa.rotate_queue_ring()" >/dev/null
  for q in $qa $qb; do
    $run "SELECT awa.create_queue('$q')" >/dev/null
    $run "SELECT awa.pause_queue('$q')" >/dev/null
    # One call a statement: Citus delegates a call made alone in its statement.
    for k in $(seq 1 $((jobs / 2000))); do
      $run "SELECT awa.insert_jobs('$q', array_fill('rm'::text, ARRAY[1000]))" >/dev/null
    done
  done
  $run "SELECT awa.rotate_queue_ring()" >/dev/null
  local steps=""
  for i in $(seq 1 20); do
    local r; r=$(timed $run "SELECT awa.prune_queue_ring()")
    steps="$steps ${r// /=}"
    case "$r" in pruned*) break;; skipped_snapshots*|moved*) ;; *) break;; esac
  done
  echo "$steps"
  for q in $qa $qb; do $run "SELECT awa.purge_queue('$q')" >/dev/null 2>&1 || true; done
}

echo "# ring move: $jobs pending jobs in one sealed slot, $rounds rounds; $(nproc) cores, $(uname -m)"
for r in $(seq 1 "$rounds"); do
  echo "cluster round $r:$(round cluster)"
  if [ -n "${PLAIN_HOST:-}" ]; then echo "plain   round $r:$(round plain)"; fi
done
