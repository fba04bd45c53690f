#!/usr/bin/env bash
# Live test of periodic jobs with more databases than maintenance workers (docs/api.md,
# "Which due ticks"): one maintenance worker (awa_shard.max_maintenance_workers = 1) serves
# three databases in turns of ten passes, so each database waits about 20 s between its
# turns, longer than the 10 s catch-up that counts as downtime. Each database has a
# one-second schedule. The wait is for a turn, not downtime: every tick gets exactly one job,
# late, and none is lost. Checks that the run met such waits (more than 10 s between two
# enqueues of a database), then that each schedule's ticks follow one another second by second, one
# job each. Then, with the worker serving the databases in turns again, maintenance is turned
# off server-wide for 12 s: the databases waiting for their turn stop being served too, so a
# run_maintenance in each then enqueues the latest tick only, not one per second since that
# database's last pass. Run as the postgres user; prints "schedules_turns: N passed, M failed".
TEST=schedules_turns; . "$(dirname "$0")/lib.sh"

new_server turns 58000
start_server -c shared_preload_libraries=awa_shard -c awa_shard.max_maintenance_workers=1 -c fsync=off \
  || give_up "the server did not start"
for d in t1 t2 t3; do
  "$PGBIN/createdb" -h "$dir" -p "$port" $d || give_up "createdb $d failed"
  q $d -c "CREATE EXTENSION awa_shard" -c "SELECT awa.schedule('every_second', '1 second', 'tick', 'turn_q')" \
    >/dev/null || give_up "scheduling in $d failed"
done
# Until each database has waited more than 10 s between two enqueues of its jobs (a turn
# missed; at most 120 s), and then a turn more to catch up.
late() { q "$1" -c "SELECT count(*) FROM (SELECT created_at - lag(created_at) OVER (ORDER BY created_at, id) AS wait
                                            FROM awa.jobs WHERE queue = 'turn_q') w WHERE wait > interval '10 seconds'" 2>/dev/null || echo 0; }
deadline=$(( $(date +%s) + 120 ))
while [ "$(date +%s)" -lt "$deadline" ]; do
  n=0; for d in t1 t2 t3; do [ "$(late $d)" -gt 0 ] && n=$((n+1)); done
  [ "$n" -eq 3 ] && break
  sleep 1
done
sleep 25
# Freeze: no maintenance while the jobs are counted.
"$PGBIN/pg_ctl" -D "$dir/data" -m fast stop >/dev/null
start_server -c shared_preload_libraries=awa_shard -c awa_shard.maintenance=off || give_up "the server did not restart"

for d in t1 t2 t3; do
  r=$(q $d -c "SELECT count(*) || '|' || count(*) FILTER (WHERE gap <> interval '1 second')
                      || '|' || (count(*) - count(DISTINCT run_at)) || '|' || count(*) FILTER (WHERE run_at <> date_trunc('second', run_at))
                 FROM (SELECT run_at, run_at - lag(run_at) OVER (ORDER BY run_at) AS gap
                         FROM awa.jobs WHERE queue = 'turn_q') g")
  check "$d: waited for its turn (more than 10 s between two enqueues)" "$([ "$(late $d)" -gt 0 ] && echo yes)" "yes"
  check "$d: at least 25 ticks" "$([ "${r%%|*}" -ge 25 ] && echo yes || echo "${r%%|*}")" "yes"
  check "$d: no tick missed, none twice, each on its second (gaps|twice|off)" "${r#*|}" "0|0|0"
  check "$d: the schedule's next tick is one second after its last" \
    "$(q $d -c "SELECT count(*) FROM awa.cron_schedules WHERE next_run_at <> last_run_at + interval '1 second'")" "0"
done

# Maintenance off server-wide while two of the databases wait for their turn.
"$PGBIN/pg_ctl" -D "$dir/data" -m fast stop >/dev/null
start_server -c shared_preload_libraries=awa_shard -c awa_shard.max_maintenance_workers=1 -c fsync=off \
  || give_up "the server did not restart"
for d in t1 t2 t3; do
  wait_for $d 120 "SELECT coalesce((SELECT passes FROM awa.maintenance_status WHERE database = current_database()), 0) > 0" t \
    || give_up "$d was not served after the restart"
done
q postgres -c "ALTER SYSTEM SET awa_shard.maintenance = off" -c "SELECT pg_reload_conf()" >/dev/null
wait_for postgres 30 "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'awa_shard maintenance'" 0 \
  || give_up "the worker did not leave"
sleep 12
for d in t1 t2 t3; do
  check "$d: maintenance off 12 s, then run_maintenance: the latest tick only" \
    "$(q $d -c "SELECT (awa.run_maintenance())->>'schedules'")" "1"
done
summary
[ "$failed" -eq 0 ]
