#!/usr/bin/env bash
# Live test: background maintenance waits while a pg_restore session is connected to its
# database (src/worker.cpp, restore_connected), so that a restore not made in one
# transaction (pg_restore -j cannot be) never shows a pass the database in parts.
# 1. A session named pg_restore connected to a database with the extension: the database's
#    pass count stays put across several intervals, a LOG line says why, and passes resume
#    once the session has gone; another database is served meanwhile.
# 2. A database holding running attempts (receipts), waiting and finished jobs is dumped
#    and restored with pg_restore -j 2 (not in one transaction) while maintenance runs every
#    20 ms: every job comes back in its state, and the running attempts complete with their
#    run_lease.
# 3. With a long interval (60 s) the worker runs a schedule's ticks in its sleep between
#    passes: a pg_restore session that connects then stops the ticks too (no job enqueued
#    while it is connected), and ticks resume within a second or so once it has gone, not a
#    whole interval later.
# 4. A pg_restore session connected for 12 s (longer than the 10 s a schedule's ticks count as
#    late, not lost): the first pass after it enqueues the latest tick only, none of the ticks
#    that came while it was connected (a restore's schedules hold the source's next ticks;
#    every tick since the last pass before the restore would be a burst of jobs).
# 5. Maintenance switched off for the database (its own setting) for 12 s, then
#    run_maintenance: one job, the latest tick, not one per second of the gap.
# Run as the postgres user; prints "restore_guard: N passed, M failed".
TEST=restore_guard; . "$(dirname "$0")/lib.sh"
new_server restore 59100
cat >> "$dir/data/postgresql.conf" <<CONF
shared_preload_libraries = 'awa_shard'
awa_shard.maintenance_interval = 20
fsync = off
lc_messages = 'C'
CONF
start_server || give_up "the server did not start"

for db in guarded other src; do
  q postgres -c "CREATE DATABASE $db" >/dev/null || give_up "CREATE DATABASE $db failed"
  q "$db" -c "CREATE EXTENSION awa_shard" >/dev/null || give_up "CREATE EXTENSION in $db failed"
done
passes() { q "$1" -c "SELECT coalesce((SELECT passes FROM awa.maintenance_status WHERE database = current_database()), 0)"; }
wait_for guarded 30 "SELECT (SELECT passes FROM awa.maintenance_status WHERE database = current_database()) > 2" t \
  || give_up "maintenance did not serve the database"

# 1. A session named pg_restore holds the database: no pass until it goes.
PGAPPNAME=pg_restore "$PGBIN/psql" -h "$dir" -p "$port" -X -q -d guarded -c "SELECT pg_sleep(30)" >/dev/null 2>&1 &
bg+=($!)
wait_for guarded 10 "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'pg_restore'" 1 || give_up "no pg_restore session"
sleep 0.5   # the pass running when it connected ends
held=$(passes guarded); other_before=$(passes other)
sleep 1.5   # 75 intervals
check "no pass of the database while pg_restore is connected" "$(passes guarded)" "$held"
check "another database is served meanwhile" "$(( $(passes other) > other_before ))" "1"
check "the wait is logged" "$(( $(grep -c 'waits while pg_restore is connected to it' "$dir/log") >= 1 ))" "1"
q postgres -c "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name = 'pg_restore'" >/dev/null
stop_background; bg=()
check "passes resume once pg_restore has gone" \
  "$(wait_for guarded 10 "SELECT (SELECT passes FROM awa.maintenance_status WHERE database = current_database()) > $held" t && echo resumed)" "resumed"

# 2. pg_restore -j 2, maintenance running: nothing lost.
q src >/dev/null <<'SQL' || give_up "filling src failed"
SELECT awa.insert_jobs('rg', array_fill('k'::text, ARRAY[40]));
SELECT count(*) FROM awa.complete_jobs(ARRAY(SELECT job_id FROM awa.claim_ready_runtime('rg', 10) ORDER BY job_id),
                                       ARRAY(SELECT 1::bigint FROM generate_series(1, 10)));
CREATE TABLE public.open_attempts AS SELECT job_id, run_lease FROM awa.claim_ready_runtime('rg', 5);
SQL
state_counts() { q "$1" -c "SELECT string_agg(state || '=' || n, ' ' ORDER BY state) FROM (SELECT state::text, count(*) AS n FROM awa.jobs GROUP BY 1) s"; }
src_counts=$(state_counts src)
"$PGBIN/pg_dump" -h "$dir" -p "$port" -Fc -f "$dir/src.dump" src || give_up "pg_dump failed"
q postgres -c "CREATE DATABASE dst" >/dev/null
"$PGBIN/pg_restore" -h "$dir" -p "$port" -j 2 -d dst "$dir/src.dump" 2>"$dir/restore.err"
check "pg_restore -j 2: no error" "$(grep -c 'error' "$dir/restore.err" | tr -d ' ')" "0"
sleep 0.5   # passes in the restored database
check "pg_restore -j 2: every job back in its state" "$(state_counts dst)" "$src_counts"
check "pg_restore -j 2: the running attempts complete with their run_lease" \
  "$(q dst -c "SELECT count(*) FROM awa.complete_jobs((SELECT array_agg(job_id) FROM public.open_attempts),
                                                    (SELECT array_agg(run_lease) FROM public.open_attempts))")" "5"
# 3. Ticks in the sleep between passes, in the one database left (a worker each).
q postgres -c "DROP DATABASE src WITH (FORCE)" -c "DROP DATABASE dst WITH (FORCE)" -c "DROP DATABASE other WITH (FORCE)" >/dev/null
q guarded >/dev/null <<'SQL' || give_up "the schedule could not be made"
SELECT awa.create_queue('tk');
SELECT awa.schedule('every_second', '1 seconds', 'tick', 'tk');
SQL
q postgres -c "ALTER SYSTEM SET awa_shard.maintenance_interval = '60s'" -c "SELECT pg_reload_conf()" >/dev/null
ticks() { q guarded -c "SELECT count(*) FROM awa.jobs WHERE queue = 'tk'"; }
sleep 0.5   # the setting read, a last 20 ms pass run: the worker sleeps for a minute from here
first=$(ticks)
wait_for guarded 10 "SELECT count(*) > $first + 1 FROM awa.jobs WHERE queue = 'tk'" t || give_up "the schedule did not tick in the sleep"
PGAPPNAME=pg_restore "$PGBIN/psql" -h "$dir" -p "$port" -X -q -d guarded -c "SELECT pg_sleep(30)" >/dev/null 2>&1 &
bg+=($!)
wait_for guarded 10 "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'pg_restore'" 1 || give_up "no pg_restore session"
sleep 1.2   # a tick run when it connected ends
held=$(ticks)
sleep 3.5   # three ticks or more
check "no tick in the sleep while pg_restore is connected" "$(ticks)" "$held"
q postgres -c "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name = 'pg_restore'" >/dev/null
stop_background; bg=()
check "ticks resume soon after pg_restore has gone (not an interval later)" \
  "$(wait_for guarded 10 "SELECT count(*) > $held FROM awa.jobs WHERE queue = 'tk'" t && echo resumed)" "resumed"
# 4. A longer restore: downtime for the schedule, the latest tick only.
sleep 2     # ticks again, one a second
PGAPPNAME=pg_restore "$PGBIN/psql" -h "$dir" -p "$port" -X -q -d guarded -c "SELECT pg_sleep(60)" >/dev/null 2>&1 &
bg+=($!)
wait_for guarded 10 "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'pg_restore'" 1 || give_up "no pg_restore session"
sleep 1.2   # a tick run when it connected ends
t_held=$(q guarded -c "SELECT clock_timestamp()"); held=$(ticks)
sleep 12
t_end=$(q guarded -c "SELECT clock_timestamp()")
q postgres -c "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name = 'pg_restore'" >/dev/null
stop_background; bg=()
wait_for guarded 10 "SELECT count(*) > $held FROM awa.jobs WHERE queue = 'tk'" t || give_up "no tick after the long restore"
check "after a 12 s restore: none of the ticks that came during it enqueued (the latest only)" \
  "$(q guarded -c "SELECT count(*) FROM awa.jobs WHERE queue = 'tk' AND run_at > '$t_held' AND run_at < timestamptz '$t_end' - interval '1 second'")" "0"

# 5. Maintenance switched off for the database, then one run_maintenance: the latest tick only.
q postgres -c "ALTER SYSTEM RESET awa_shard.maintenance_interval" -c "SELECT pg_reload_conf()" \
  -c "ALTER DATABASE guarded SET awa_shard.maintenance = off" >/dev/null
wait_for guarded 70 "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'awa_shard maintenance' AND datname = 'guarded'" 0 \
  || give_up "the worker did not leave the database"
sleep 1.2   # a pass under way ends
off=$(ticks)
sleep 12
check "maintenance off for 12 s, then run_maintenance: one job (the latest tick)" \
  "$(q guarded -c "SELECT (awa.run_maintenance())->>'schedules'")" "1"
check "  and the ticks of the gap are not enqueued" "$(( $(ticks) - off ))" "1"
summary
[ "$failed" -eq 0 ]
