#!/usr/bin/env bash
# Live test of background maintenance with no settings at all (preloaded only): the
# launcher serves every database that has awa_shard, and only those; a due job is promoted
# and the ring turns with nobody calling maintenance; the workers show in pg_stat_activity;
# DROP EXTENSION and DROP DATABASE work at once and leave no error in the log; after a
# crash the launcher is back and maintenance resumes. Then more databases than workers and
# slots (docs/maintenance.md §1, sizing): every database gets turns from a pool of two
# workers in four slots, its due job promoted and its ring turned; a pool larger than the
# free slots is said once in the log; a database without a worker is shown served by
# claims and its claims promote its due jobs; one that waits far longer than its turn (the
# one worker held up elsewhere) is said once in the log.
# Run as the postgres user; prints "launcher: N passed, M failed".
TEST=launcher; . "$(dirname "$0")/lib.sh"
new_server launcher 56000
# Only the library is configured; the interval is shortened so the test runs quickly.
cat >> "$dir/data/postgresql.conf" <<CONF
shared_preload_libraries = 'awa_shard'
awa_shard.maintenance_interval = 200
lc_messages = 'C'
fsync = off
CONF
start_server || give_up "the server did not start"
# A due job, and a finished job so the ring can turn: maintenance must promote and rotate.
seed() {
  q "$1" >/dev/null <<'SQL'
SELECT awa.insert_job_compat('due', 'lq', p_state => 'scheduled', p_run_at => now() - interval '1 second');
SELECT awa.insert_job_compat('done', 'lq_done');
SELECT awa.complete_jobs(array_agg(job_id), array_agg(run_lease)) FROM awa.claim_ready_runtime('lq_done', 10, 0, 0);
SQL
}

for db in one two plain; do q postgres -c "CREATE DATABASE $db"; done
q one -c "CREATE EXTENSION awa_shard"; q two -c "CREATE EXTENSION awa_shard"
seed one; seed two
check "the launcher runs, with a clear name" \
  "$(q postgres -c "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'awa_shard launcher'")" "1"
wait_for one 10 "SELECT state FROM awa.jobs WHERE kind = 'due'" available; check "database one: the due job is promoted" "$?" "0"
wait_for two 10 "SELECT state FROM awa.jobs WHERE kind = 'due'" available; check "database two: the due job is promoted" "$?" "0"
wait_for one 10 "SELECT generation > 0 FROM awa.queue_ring_state" t; check "database one: the ring turned" "$?" "0"
seen=0; for i in $(seq 1 50); do
  n=$(q postgres -c "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'awa_shard maintenance' AND datname IN ('one', 'two')")
  [ "$n" -gt 0 ] && { seen=1; break; }; sleep 0.05; done
check "maintenance workers show in pg_stat_activity" "$seen" "1"
sleep 1
check "a database without awa_shard is left alone (at most one probe a minute)" \
  "$(grep -c 'awa_shard maintenance plain' "$dir/log")" "0"

# A database that installs the extension later is served without a restart.
q plain -c "CREATE EXTENSION awa_shard"; seed plain
wait_for plain 10 "SELECT state FROM awa.jobs WHERE kind = 'due'" available; check "a database that installs awa_shard later is served" "$?" "0"

# DROP EXTENSION and DROP DATABASE: at once, and quietly.
errors_before=$(grep -cE 'ERROR|FATAL' "$dir/log"); fatal_before=$(grep -c 'FATAL:  database [0-9]* does not exist' "$dir/log")
q one -c "DROP EXTENSION awa_shard"; check "DROP EXTENSION succeeds" "$?" "0"
# DROP DATABASE waits up to 5 s for other sessions to leave, then fails ("being accessed by
# other users"): its success shows that maintenance let go of the database.
q postgres -c "DROP DATABASE two"; rc=$?
check "DROP DATABASE succeeds (maintenance does not hold the database)" "$rc" "0"
sleep 2
# A pass that was starting just as the database went away cannot connect: at most one
# FATAL "database ... does not exist" line for the dropped database, and nothing else.
fatal_drop=$(( $(grep -c 'FATAL:  database [0-9]* does not exist' "$dir/log") - fatal_before ))
check "no error in the log after the drops (at most one failed connection to the dropped database)" \
  "$(( $(grep -cE 'ERROR|FATAL' "$dir/log") - errors_before - fatal_drop ))/$(( fatal_drop <= 1 ))" "0/1"

# Crash: kill -9 a backend; the postmaster reinitialises, the launcher comes back.
q plain -c "SELECT pg_sleep(30)" >/dev/null 2>&1 &
sleep 0.5
victim=$(q postgres -c "SELECT pid FROM pg_stat_activity WHERE query LIKE 'SELECT pg_sleep(30)%' LIMIT 1")
kill -9 "$victim"; wait 2>/dev/null
wait_for postgres 30 "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'awa_shard launcher'" 1
check "the launcher is back after a crash" "$?" "0"
q plain -c "SELECT awa.insert_job_compat('after_crash', 'lq', p_state => 'scheduled', p_run_at => now() - interval '1 second')" >/dev/null
wait_for plain 20 "SELECT state FROM awa.jobs WHERE kind = 'after_crash'" available; check "maintenance resumes after the crash" "$?" "0"

# One database switched off by its own setting (ALTER DATABASE ... SET awa_shard.maintenance
# = off): no pass runs there any more and no worker stays, claims there promote their due
# jobs themselves, and RESET gives it back its maintenance within a minute.
q postgres -c "CREATE DATABASE own_off" && q own_off -c "CREATE EXTENSION awa_shard" && seed own_off
wait_for own_off 10 "SELECT served_by FROM awa.maintenance_status WHERE database = 'own_off'" worker
check "switched off: served by a worker before" "$?" "0"
q postgres -c "ALTER DATABASE own_off SET awa_shard.maintenance = off"
wait_for postgres 10 "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'awa_shard maintenance' AND datname = 'own_off'" 0
check "switched off: its worker leaves" "$?" "0"
before=$(q plain -c "SELECT passes FROM awa.maintenance_status WHERE database = 'own_off'")
sleep 2
check "switched off: no more passes (2 s, ten intervals)" \
  "$(q plain -c "SELECT passes > 0 FROM awa.maintenance_status WHERE database = 'own_off'"),$(q plain -c "SELECT passes FROM awa.maintenance_status WHERE database = 'own_off'")" "t,$before"
check "switched off: its claims promote due jobs, the view says so" \
  "$(q own_off -c "SELECT awa.insert_job_compat('own_due', 'oq', p_state => 'scheduled', p_run_at => now() - interval '1 second') IS NOT NULL" >/dev/null;
     q own_off -c "SELECT count(*) FROM awa.claim_ready_runtime('oq', 10, 0, 0)"),$(q own_off -c "SELECT served_by FROM awa.maintenance_status WHERE database = current_database()")" "1,claims"
q plain -c "SELECT awa.insert_job_compat('others_kept', 'lq', p_state => 'scheduled', p_run_at => now() - interval '1 second')" >/dev/null
wait_for plain 10 "SELECT state FROM awa.jobs WHERE kind = 'others_kept'" available
check "switched off in one database: the others keep their maintenance" "$?" "0"
q postgres -c "ALTER DATABASE own_off RESET awa_shard.maintenance"
wait_for own_off 75 "SELECT served_by FROM awa.maintenance_status WHERE database = 'own_off'" worker
check "switched on again (RESET): served by a worker within a minute" "$?" "0"
q postgres -c "DROP DATABASE own_off" >/dev/null

# A producer that creates a lane and keeps its transaction open (a long import into a new
# queue) holds the lane's lock to its commit: the worker does not wait behind it, so no client
# transaction holds a worker of the shared pool. Another queue's due job is promoted meanwhile,
# the passes go on, and the held queue's job is promoted once the producer has ended.
q postgres -c "CREATE DATABASE lanes" && q lanes -c "CREATE EXTENSION awa_shard"
q lanes -c "SELECT awa.insert_job_compat('held_due', 'new_lane_q', p_state => 'scheduled', p_run_at => now() + interval '1 second')" \
  -c "SELECT awa.insert_job_compat('free_due', 'free_q', p_state => 'scheduled', p_run_at => now() + interval '1 second')" >/dev/null
q lanes -c "BEGIN" -c "SELECT awa.insert_job_compat('import', 'new_lane_q')" -c "SELECT pg_sleep(600)" >/dev/null 2>&1 &
bg+=($!)
wait_for lanes 20 "SELECT state FROM awa.jobs WHERE kind = 'free_due'" available
check "a producer holds a new lane: another queue's due job is promoted" "$?" "0"
before=$(q lanes -c "SELECT passes FROM awa.maintenance_status WHERE database = 'lanes'")
waiting=0; for i in $(seq 1 20); do
  waiting=$(( waiting + $(q postgres -c "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'awa_shard maintenance' AND datname = 'lanes' AND wait_event_type = 'Lock'") ))
  sleep 0.1; done
check "... the worker never waits for the lane (20 samples)" "$waiting" "0"
check "... its passes go on" "$(q lanes -c "SELECT passes > $before FROM awa.maintenance_status WHERE database = 'lanes'")" "t"
check "... and the held queue's job waits for the producer" "$(q lanes -c "SELECT state FROM awa.jobs WHERE kind = 'held_due'")" "scheduled"
q postgres -c "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = 'lanes' AND query LIKE '%pg_sleep(600)%'" >/dev/null
wait_for lanes 20 "SELECT state FROM awa.jobs WHERE kind = 'held_due'" available
check "... which is promoted once the producer has ended" "$?" "0"
q postgres -c "DROP DATABASE lanes WITH (FORCE)" >/dev/null

# A database whose settings name a role or a session user (ALTER DATABASE ... SET role or
# session_authorization, which its owner may do): the worker still runs as the bootstrap
# superuser and promotes its due job, with no error. $1: the database, $2: the setting, $3: the
# statement that gives this test's own sessions back their superuser.
served_despite() {
  q postgres -c "CREATE DATABASE $1 OWNER db_owner_role" -c "ALTER DATABASE $1 SET $2 = 'db_owner_role'" >/dev/null 2>&1
  q "$1" -c "$3" -c "CREATE EXTENSION awa_shard" >/dev/null
  q "$1" -c "$3" -c "SELECT awa.insert_job_compat('set_due', 'sq', p_state => 'scheduled', p_run_at => now() - interval '1 second')" >/dev/null
  wait_for "$1" 20 "$3; SELECT state FROM awa.jobs WHERE kind = 'set_due'" available
  check "a database that sets $2: the worker promotes its due job" "$?" "0"
  check "... and logs no permission error" "$(grep -c 'permission denied for schema awa' "$dir/log")" "0"
  q postgres -c "DROP DATABASE $1 WITH (FORCE)" >/dev/null
}
q postgres -c "CREATE ROLE db_owner_role" >/dev/null
served_despite roled role "SET ROLE NONE"
served_despite sauth session_authorization "SET SESSION AUTHORIZATION DEFAULT"

# A producer's open transaction that takes the unique key a due job carries: the worker waits
# for it at most its step's lock timeout, promotes the other queues' due jobs, and the held
# job once the producer has ended (no worker of the pool held by a client transaction).
q postgres -c "CREATE DATABASE ukeys" && q ukeys -c "CREATE EXTENSION awa_shard"
q ukeys -c "SELECT awa.insert_job_compat('warm', 'uq')" \
  -c "SELECT awa.insert_job_compat('key_due', 'uq', '{}', 'scheduled', 2, 25, now() + interval '1 second', '{}', '{}', '\\x4b', '01000000')" \
  -c "SELECT awa.insert_job_compat('free_due', 'free_uq', p_state => 'scheduled', p_run_at => now() + interval '1 second')" >/dev/null
q ukeys -c "BEGIN" -c "SELECT awa.insert_job_compat('key_holder', 'uq', '{}', 'available', 2, 25, NULL, '{}', '{}', '\\x4b', '01000000')" \
  -c "SELECT pg_sleep(600)" >/dev/null 2>&1 &
bg+=($!)
wait_for ukeys 20 "SELECT state FROM awa.jobs WHERE kind = 'free_due'" available
check "a producer holds a due job's unique key: another queue's due job is promoted" "$?" "0"
before=$(q ukeys -c "SELECT passes FROM awa.maintenance_status WHERE database = 'ukeys'")
sleep 1
check "... the passes go on" "$(q ukeys -c "SELECT passes > $before FROM awa.maintenance_status WHERE database = 'ukeys'")" "t"
q postgres -c "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = 'ukeys' AND query LIKE '%pg_sleep(600)%'" >/dev/null
wait_for ukeys 20 "SELECT state FROM awa.jobs WHERE kind = 'key_due'" available
check "... and the held job is promoted once the producer has ended" "$?" "0"
q postgres -c "DROP DATABASE ukeys WITH (FORCE)" >/dev/null

# The launcher killed and started again by the postmaster: a worker it had started keeps its
# database; the new launcher starts no second one there (one database to serve: no turns).
q postgres -c "ALTER SYSTEM SET awa_shard.maintenance_database = 'plain'" -c "SELECT pg_reload_conf()" >/dev/null
wait_for postgres 20 "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'awa_shard maintenance' AND datname = 'plain'" 1
check "one database served: one worker there" "$?" "0"
q postgres -c "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE backend_type = 'awa_shard launcher'" >/dev/null
wait_for postgres 30 "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'awa_shard launcher'" 1
check "the launcher is started again" "$?" "0"
most=0; for i in $(seq 1 40); do
  n=$(q postgres -c "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'awa_shard maintenance' AND datname = 'plain'")
  [ "$n" -gt "$most" ] && most=$n; sleep 0.25; done
check "... and no second worker joins the first (10 s)" "$most" "1"
q postgres -c "ALTER SYSTEM RESET awa_shard.maintenance_database" -c "SELECT pg_reload_conf()" >/dev/null

# More databases than workers: 4 background-worker slots (the launcher and logical
# replication's launcher take two), a pool of 2, and 7 databases with awa_shard (plain,
# m1..m6). Counts only; the deadlines are generous.
"$PGBIN/pg_ctl" -D "$dir/data" -m fast -w stop >/dev/null
cat >> "$dir/data/postgresql.conf" <<CONF
max_worker_processes = 4
awa_shard.max_maintenance_workers = 2
CONF
start_server || give_up "the server did not restart with 4 worker slots"
many="m1 m2 m3 m4 m5 m6"; served_dbs="'plain', 'm1', 'm2', 'm3', 'm4', 'm5', 'm6'"
for db in $many; do q postgres -c "CREATE DATABASE $db"; q "$db" -c "CREATE EXTENSION awa_shard"; seed "$db"; done
# Sample the maintenance workers while the pool turns: never more than the pool.
( most=0; for i in $(seq 1 150); do
    n=$(q postgres -c "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'awa_shard maintenance'")
    [ "${n:-0}" -gt "$most" ] && most=$n; sleep 0.05; done; echo "$most" > "$dir/most_workers" ) &
sampler=$!; bg+=($sampler)
promoted=0; turned=0
for db in $many; do
  wait_for "$db" 60 "SELECT state FROM awa.jobs WHERE kind = 'due'" available && promoted=$((promoted+1))
done
for db in plain $many; do
  wait_for "$db" 60 "SELECT generation > 0 FROM awa.queue_ring_state" t && turned=$((turned+1))
done
check "7 databases, 2 workers: every database's due job is promoted" "$promoted" "6"
check "7 databases, 2 workers: every database's ring turns" "$turned" "7"
# A turn is ten passes: twelve passes each means every database had at least two turns.
wait_for m1 120 "SELECT count(*) FROM awa.maintenance_status WHERE database IN ($served_dbs) AND passes >= 12" 7
check "7 databases, 2 workers: every database has had at least 12 passes (awa.maintenance_status)" "$?" "0"
check "7 databases, 2 workers: at most 2 are served by a worker at a time, the others by claims" \
  "$(q m1 -c "SELECT count(*) FILTER (WHERE served_by = 'worker') <= 2 AND count(*) FILTER (WHERE served_by IN ('worker', 'claims')) = 7
                FROM awa.maintenance_status WHERE database IN ($served_dbs)")" "t"
wait "$sampler"
check "never more maintenance workers at once than the pool (2)" "$(( $(cat "$dir/most_workers") <= 2 ))" "1"
check "a pool that fits its slots never misses a slot" "$(grep -c 'no background worker slot' "$dir/log")" "0"

# A pool larger than the free slots (2 free, pool 5): said once; the databases still take turns.
q postgres -c "ALTER SYSTEM SET awa_shard.max_maintenance_workers = 5" -c "SELECT pg_reload_conf()" >/dev/null
before=$(q m1 -c "SELECT min(passes) FROM awa.maintenance_status WHERE database IN ($served_dbs)")
wait_for m1 120 "SELECT min(passes) >= $before + 12 FROM awa.maintenance_status WHERE database IN ($served_dbs)" t
check "pool larger than the free slots: every database keeps getting passes" "$?" "0"
check "pool larger than the free slots: the log says so once" "$(grep -c 'no background worker slot is free' "$dir/log")" "1"

# One worker, held up in m1 (its pass waits for a table lock an admin holds): the others get no pass; each is
# shown served by claims, a claim there promotes the queue's due job itself, and each is
# logged once when it has waited twice a round of turns (shorter passes: a shorter round).
q postgres -c "ALTER SYSTEM SET awa_shard.max_maintenance_workers = 1" -c "ALTER SYSTEM SET awa_shard.maintenance_interval = 50" \
  -c "SELECT pg_reload_conf()" >/dev/null
q m1 -c "BEGIN" -c "LOCK TABLE awa.cron_schedules IN ACCESS EXCLUSIVE MODE" -c "SELECT pg_sleep(600)" >/dev/null 2>&1 &
bg+=($!)
wait_for postgres 60 "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'awa_shard maintenance' AND datname = 'm1' AND wait_event_type = 'Lock'" 1
check "the one worker is held up in m1" "$?" "0"
wait_for m1 60 "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'awa_shard maintenance'" 1
check "and it is the only maintenance worker" "$?" "0"
q m2 -c "SELECT awa.insert_job_compat('due_unserved', 'lq2', p_state => 'scheduled', p_run_at => now() - interval '1 second')" >/dev/null
wait_for m2 60 "SELECT served_by FROM awa.maintenance_status WHERE database = 'm2'" claims
check "a database without passes is shown served by claims" "$?" "0"
check "no worker promoted its due job meanwhile" "$(q m2 -c "SELECT state FROM awa.jobs WHERE kind = 'due_unserved'")" "scheduled"
check "a claim there promotes the due job itself and claims it" \
  "$(q m2 -c "SELECT string_agg(kind, ',') FROM awa.claim_ready_runtime('lq2', 10, 0, 0)")" "due_unserved"
wait_for m1 30 "SELECT count(*) FROM awa.maintenance_status WHERE database IN ('plain', 'm2', 'm3', 'm4', 'm5', 'm6') AND served_by = 'claims'" 6
check "every database the worker cannot reach is shown served by claims" "$?" "0"
for db in plain m2 m3 m4 m5 m6; do
  for i in $(seq 1 600); do grep -q "database \"$db\" has had no maintenance pass" "$dir/log" && break; sleep 0.1; done; done
sleep 1
said=""; for db in plain m2 m3 m4 m5 m6; do said="$said$(grep -c "database \"$db\" has had no maintenance pass" "$dir/log")"; done
check "the log says once per database that it has no pass (at most once an hour)" "$said" "111111"
q postgres -c "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = 'm1' AND query LIKE '%pg_sleep(600)%'" >/dev/null
wait_for m2 60 "SELECT served_by FROM awa.maintenance_status WHERE database = 'm2'" worker
check "released, the one worker serves m2 again" "$?" "0"
again=0; for i in $(seq 1 100); do grep -q 'database "m2" has maintenance passes again' "$dir/log" && { again=1; break; }; sleep 0.1; done
check "and the log says that m2 has passes again" "$again" "1"

[ "$failed" -gt 0 ] && grep -E 'ERROR|FATAL|awa_shard' "$dir/log" | tail -15
summary
[ "$failed" -eq 0 ]
