#!/usr/bin/env bash
# bench/schedule_ticks.sh — how soon after its tick a one-second schedule's job is enqueued,
# idle and under load (docs/api.md, "Periodic jobs"). Runs against an existing server with the
# extension installed and preloaded (PGHOST/PGPORT/PGUSER as for psql; a superuser: it reads
# commit timestamps), in a fresh database st_bench, with pgbench from PGBIN.
#  - N (100) schedules '1 second' into queue st_ticks, run by the server's background
#    maintenance at its settings (nothing else calls run_schedules).
#  - Phases of SECS (60) seconds each: idle (nothing else runs), then load: CLIENTS (4)
#    pgbench clients each enqueueing 10 jobs into queue st_work (S = 8), claiming 10 and
#    completing them, one statement each, as fast as they can, in the same database (so its
#    maintenance pass also promotes, rotates and prunes for that queue).
#  - An observer session polls every 100 ms and records each tick job as it first sees it:
#    its run_at (the tick), created_at (its insert) and, when the server has
#    track_commit_timestamp = on, the commit time of its insert.
#  - Per phase: ticks expected (N x whole seconds of the phase), jobs seen, ticks with two
#    jobs, ticks missing, and the delay from tick to commit (or, without commit timestamps, to
#    insert): p50, p99, max, and the share within 1 s (issue goal: every tick within 1 s).
# Usage: PGBIN=/usr/lib/postgresql/15/bin bench/schedule_ticks.sh
set -euo pipefail
PGBIN=${PGBIN:-/usr/lib/postgresql/15/bin}
N=${N:-100}; SECS=${SECS:-60}; CLIENTS=${CLIENTS:-4}
db=st_bench
psql() { "$PGBIN/psql" -X -q -v ON_ERROR_STOP=1 "$@"; }
quiet() { psql "$@" >/dev/null; }
[ "$(psql -d postgres -Atc "SELECT current_setting('shared_preload_libraries') ~ 'awa_shard'")" = t ] \
  || { echo "schedule_ticks: awa_shard must be preloaded (the background maintenance runs the schedules)" >&2; exit 1; }
commit_ts=$(psql -d postgres -Atc "SELECT current_setting('track_commit_timestamp')::boolean")
quiet -d postgres -c "DROP DATABASE IF EXISTS $db WITH (FORCE)" -c "CREATE DATABASE $db"
quiet -d $db -v n=$N <<'SQL'
CREATE EXTENSION awa_shard;
SELECT awa.create_queue('st_work', 8);
SELECT cardinality(awa.insert_jobs('st_work', array_fill('k'::text, ARRAY[20000])));
CREATE SCHEMA bench;
CREATE TABLE bench.seen (job_id bigint PRIMARY KEY, schedule text, run_at timestamptz, created_at timestamptz,
                         committed_at timestamptz, seen_at timestamptz);
-- Poll every 100 ms until p_until; each tick job is recorded once, as first seen.
CREATE PROCEDURE bench.observe(p_until timestamptz) LANGUAGE plpgsql AS $$
DECLARE
    v_commit_ts boolean := current_setting('track_commit_timestamp')::boolean;
BEGIN
    WHILE clock_timestamp() < p_until LOOP
        INSERT INTO bench.seen
        SELECT r.job_id, r.metadata->>'awa_schedule', r.run_at, r.created_at,
               CASE WHEN v_commit_ts THEN pg_xact_commit_timestamp(r.xmin) END, clock_timestamp()
          FROM awa.ready_entries r
         WHERE r.queue = 'st_ticks' AND r.metadata ? 'awa_schedule'
        ON CONFLICT (job_id) DO NOTHING;
        COMMIT;
        PERFORM pg_sleep(0.1);
    END LOOP;
END
$$;
SELECT count(awa.schedule('tick-' || n, '1 second', 'tick', 'st_ticks', jsonb_build_object('n', n)))
  FROM generate_series(1, :n) n;
SQL
w=$(mktemp -d); trap 'rm -rf $w' EXIT
cat > $w/load.sql <<'S'
SELECT 1 FROM awa.insert_jobs('st_work', array_fill('k'::text, ARRAY[10]));
SELECT coalesce(quote_literal(array_agg(job_id)), '''{}''') AS ids, coalesce(quote_literal(array_agg(run_lease)), '''{}''') AS leases FROM awa.claim_ready_runtime('st_work', 10) \gset
SELECT count(*) FROM awa.complete_jobs(:ids::bigint[], :leases::bigint[]);
S
echo "machine: $(nproc) cores, $(uname -r), load average $(cut -d' ' -f1-3 /proc/loadavg)"
echo "server: $(psql -d $db -Atc "SELECT 'maintenance ' || current_setting('awa_shard.maintenance') || ', interval ' || current_setting('awa_shard.maintenance_interval') || ', fsync ' || current_setting('fsync') || ', synchronous_commit ' || current_setting('synchronous_commit') || ', track_commit_timestamp ' || current_setting('track_commit_timestamp')")"
echo "workload: $N one-second schedules; phases of $SECS s: idle, then $CLIENTS pgbench clients enqueueing, claiming and completing 10 jobs a transaction on st_work (S = 8)"
sleep 3   # let the schedules' first ticks pass
declare -A from to tps
for phase in idle load; do
  from[$phase]=$(psql -d $db -Atc "SELECT date_trunc('second', clock_timestamp()) + interval '1 second'")
  psql -d $db -c "CALL bench.observe(clock_timestamp() + interval '$((SECS + 4)) seconds')" &
  obs=$!
  if [ $phase = load ]; then
    tps[$phase]=$("$PGBIN/pgbench" -n -c $CLIENTS -j $CLIENTS -T $SECS -f $w/load.sql $db 2>/dev/null \
                  | awk '/^tps/ {print $3}')
  else
    sleep $SECS
  fi
  to[$phase]=$(psql -d $db -Atc "SELECT date_trunc('second', clock_timestamp()) - interval '1 second'")
  wait $obs
done
by=created_at; [ "$commit_ts" = t ] && by=committed_at
for phase in idle load; do
  psql -d $db -At -F ' ' -v from="${from[$phase]}" -v to="${to[$phase]}" -v n=$N <<SQL | sed "s/^/$phase: /"
WITH s AS (SELECT * FROM bench.seen WHERE run_at BETWEEN :'from' AND :'to'),
     d AS (SELECT extract(epoch FROM $by - run_at) AS delay FROM s)
SELECT 'ticks expected ' || :n * (extract(epoch FROM :'to'::timestamptz - :'from'::timestamptz)::int + 1)
       || ', jobs ' || (SELECT count(*) FROM s)
       || ', ticks with two jobs ' || (SELECT count(*) - count(DISTINCT (schedule, run_at)) FROM s)
       || ', delay tick -> ' || '$by' || ' (s): p50 ' || round(percentile_cont(0.5) WITHIN GROUP (ORDER BY delay)::numeric, 3)
       || ', p99 ' || round(percentile_cont(0.99) WITHIN GROUP (ORDER BY delay)::numeric, 3)
       || ', max ' || round(max(delay)::numeric, 3)
       || ', within 1 s ' || round(100.0 * count(*) FILTER (WHERE delay <= 1) / count(*), 2) || ' %'
  FROM d;
SQL
done
echo "load: ${tps[load]} transactions/s of enqueue 10 + claim 10 + complete"
