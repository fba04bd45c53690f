#!/usr/bin/env bash
# Live test of periodic jobs (docs/api.md, "Periodic jobs"): 100 one-second schedules run by
# the background maintenance of a preloaded server with no settings, across a clean restart
# and a crash (immediate stop), then with passes 15 s apart (the worker wakes for each tick
# between its passes), beside a schedule whose enqueue always fails and one made while the
# worker sleeps, and, in a database of their own, a schedule re-declared and one made in a
# transaction held open across the worker's runs. Every tick gets at most one job, run_at on the tick; each schedule's
# ticks follow one another second by second, except across a stop longer than the
# documented catch-up (10 s since the schedule's previous job: only the latest tick then);
# the schedules' last enqueue matches their jobs. Prints the enqueue delay (created_at -
# run_at) as information only. Run as the postgres user; prints
# "schedules_live: N passed, M failed".
TEST=schedules_live; . "$(dirname "$0")/lib.sh"
start() { start_server -c shared_preload_libraries=awa_shard "$@"; }

new_server schedules 58000
start || give_up "the server did not start"
"$PGBIN/createdb" -h "$dir" -p "$port" live
q live -c "CREATE EXTENSION awa_shard" \
       -c "SELECT count(awa.schedule('tick-' || n, '1 second', 'tick', 'live_q', jsonb_build_object('n', n)))
             FROM generate_series(1, 100) n" >/dev/null || give_up "scheduling failed"
"$PGBIN/createdb" -h "$dir" -p "$port" live2
q live2 -c "CREATE EXTENSION awa_shard" -c "SELECT awa.schedule('x', '1 second', 'tick', 'solo_q')" >/dev/null \
  || give_up "scheduling in live2 failed"

jobs() { q live -c "SELECT count(*) FROM awa.jobs WHERE queue = 'live_q'" 2>/dev/null || echo 0; }
# Wait (at most 60 s) until N more jobs than now have been enqueued.
wait_more() {
  local want=$(( $(jobs) + $1 )) i
  for i in $(seq 1 600); do [ "$(jobs)" -ge "$want" ] && return 0; sleep 0.1; done
  give_up "fewer than $want jobs after 60 s"
}

wait_more 300
"$PGBIN/pg_ctl" -D "$dir/data" -m fast stop >/dev/null
start || give_up "the server did not restart"
wait_more 300
"$PGBIN/pg_ctl" -D "$dir/data" -m immediate stop >/dev/null
start || give_up "the server did not restart after the crash"
wait_more 300
# A schedule whose enqueue always fails (a kind longer than allowed): it stays due and is
# reported at every pass, and must not hold back the others' ticks.
q live -c "SELECT awa.schedule('broken', '@hourly', 'tick', 'live_q')" \
       -c "UPDATE awa.cron_schedules SET kind = repeat('k', 300), next_run_at = date_trunc('hour', now()) WHERE name = 'broken'" \
  >/dev/null || give_up "the broken schedule could not be made"
# Passes 15 s apart: the worker wakes for each tick between its passes, so the ticks still
# come second by second (a pass alone would enqueue only the latest tick, 15 s apart).
"$PGBIN/pg_ctl" -D "$dir/data" -m fast stop >/dev/null
start -c awa_shard.maintenance_interval=15s || give_up "the server did not restart with passes 15 s apart"
sparse_from=$(q live -c "SELECT date_trunc('second', clock_timestamp()) + interval '2 seconds'")
wait_more 300
# A schedule made while the worker sleeps between two passes gets its first tick too.
late_at=$(q live -c "SELECT clock_timestamp()")
q live -c "SELECT awa.schedule('late', '1 second', 'tick', 'live_late')" >/dev/null || give_up "scheduling late failed"
wait_more 300
late=$(q live -c "SELECT count(*) || '|' || (min(run_at) = date_trunc('second', '$late_at'::timestamptz) + interval '1 second')
                         || '|' || count(*) FILTER (WHERE gap <> interval '1 second')
                    FROM (SELECT run_at, run_at - lag(run_at) OVER (ORDER BY run_at) AS gap
                            FROM awa.jobs WHERE queue = 'live_late') g")
# In live2, whose only schedules are these (no other tick wakes its worker), right after a
# pass: schedule x re-declared (same cron and args) and schedule held made, in a transaction
# held open 3 s across the worker's runs (a run skips a held row and cannot see an uncommitted
# one). Their due ticks are tried again a second after the run that left them, not at the next
# pass 15 s later, when they would be more than 10 s late, count as a downtime, and all but
# the latest be lost.
passes() { q live2 -c "SELECT passes FROM awa.maintenance_status WHERE database = 'live2'"; }
p0=$(passes)
for i in $(seq 1 300); do [ "$(passes)" != "$p0" ] && break; sleep 0.1; done
held=$(q live2 -c "BEGIN" -c "SELECT awa.schedule('x', '1 second', 'tick', 'solo_q')" \
         -c "SELECT awa.schedule('held', '1 second', 'tick', 'solo_q')" -c "SELECT pg_sleep(3)" -c "COMMIT") \
  || give_up "the held transaction failed"
held_first=$(echo "$held" | sed -n 2p)
sleep 16
solo=$(q live2 -c "SELECT ((SELECT min(run_at) FROM awa.jobs WHERE queue = 'solo_q' AND metadata->>'awa_schedule' = 'held')
                           = '$held_first'::timestamptz)
                          || '|' || count(*) FILTER (WHERE gap IS NULL) || '|' || count(*) FILTER (WHERE gap <> interval '1 second')
                     FROM (SELECT run_at - lag(run_at) OVER (PARTITION BY metadata->>'awa_schedule' ORDER BY run_at) AS gap
                             FROM awa.jobs WHERE queue = 'solo_q' AND run_at >= '$held_first'::timestamptz - interval '3 seconds') g")
sparse=$(q live -c "SELECT count(*) || '|' || count(*) FILTER (WHERE gap <> interval '1 second')
                      FROM (SELECT run_at - lag(run_at) OVER (PARTITION BY metadata->>'awa_schedule' ORDER BY run_at) AS gap
                              FROM awa.jobs WHERE queue = 'live_q' AND run_at >= '$sparse_from') g WHERE gap IS NOT NULL")
# Freeze: no maintenance while the jobs are counted.
"$PGBIN/pg_ctl" -D "$dir/data" -m fast stop >/dev/null
start -c awa_shard.maintenance=off || give_up "the server did not start for the checks"

check "every schedule enqueued jobs before and after both stops" \
  "$(q live -c "SELECT count(*) FROM (SELECT metadata->>'awa_schedule' AS s, count(*) AS n FROM awa.jobs
                 WHERE queue = 'live_q' GROUP BY 1) x WHERE n >= 6")" "100"
check "no tick has two jobs" \
  "$(q live -c "SELECT count(*) - count(DISTINCT (metadata->>'awa_schedule', run_at)) FROM awa.jobs WHERE queue = 'live_q'")" "0"
check "every run_at is a whole second (the tick)" \
  "$(q live -c "SELECT count(*) FROM awa.jobs WHERE queue = 'live_q' AND run_at <> date_trunc('second', run_at)")" "0"
check "every job carries its schedule's args" \
  "$(q live -c "SELECT count(*) FROM awa.jobs WHERE queue = 'live_q' AND 'tick-' || (args->>'n') <> metadata->>'awa_schedule'")" "0"
# Consecutive ticks of a schedule are 1 s apart; a longer gap is allowed only where the
# previous job was more than 10 s old when the pass came (a stop longer than the catch-up).
gaps=$(q live -c "SELECT count(*) FILTER (WHERE gap > interval '1 second' AND gap <= interval '11 seconds'),
                         count(*) FILTER (WHERE gap > interval '11 seconds')
                    FROM (SELECT run_at - lag(run_at) OVER (PARTITION BY metadata->>'awa_schedule' ORDER BY run_at) AS gap
                            FROM awa.jobs WHERE queue = 'live_q') g")
check "no tick missed except across a stop longer than the catch-up (short gaps, long gaps: $gaps)" "${gaps%%|*}" "0"
check "passes 15 s apart: consecutive ticks one second apart (ticks after the first, ticks off)" \
  "$([ "${sparse%%|*}" -ge 200 ] && echo "${sparse#*|}" || echo "only ${sparse%%|*} ticks")" "0"
check "a schedule made between two passes: its first tick and every one after (jobs|first tick|gaps)" \
  "$([ "${late%%|*}" -ge 2 ] && echo "${late#*|}" || echo "$late")" "true|0"
check "held open across runs: held's first tick is the one it was given, x and held tick every second (first tick|schedules|gaps)" \
  "$solo" "true|2|0"
check "the broken schedule enqueued nothing and stays due" \
  "$(q live -c "SELECT count(*) FROM awa.cron_schedules WHERE name = 'broken' AND last_job_id IS NULL AND next_run_at <= now()")" "1"
check "each schedule's last enqueue is its latest job" \
  "$(q live -c "SELECT count(*) FROM awa.cron_schedules s
                  LEFT JOIN LATERAL (SELECT j.id, j.run_at FROM awa.jobs j
                                      WHERE j.queue = s.queue AND j.metadata->>'awa_schedule' = s.name
                                      ORDER BY j.run_at DESC LIMIT 1) l ON true
                 WHERE (s.last_job_id, s.last_run_at) IS DISTINCT FROM (l.id, l.run_at)")" "0"
check "each schedule's next tick is one second after its last" \
  "$(q live -c "SELECT count(*) FROM awa.cron_schedules WHERE next_run_at <> last_run_at + interval '1 second'")" "0"
echo "# enqueue delay (created_at - run_at) over $(jobs) jobs: $(q live -c "SELECT 'p50 ' || round(extract(epoch FROM percentile_cont(0.5) WITHIN GROUP (ORDER BY created_at - run_at))::numeric, 3)
  || ' s, p99 ' || round(extract(epoch FROM percentile_cont(0.99) WITHIN GROUP (ORDER BY created_at - run_at))::numeric, 3)
  || ' s, max ' || round(extract(epoch FROM max(created_at - run_at))::numeric, 3) || ' s' FROM awa.jobs WHERE queue = 'live_q'")"
summary
[ "$failed" -eq 0 ]
