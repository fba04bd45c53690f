#!/usr/bin/env bash
# Live test of background maintenance with no settings at all (preloaded only): the
# launcher serves every database that has awa_shard, and only those; a due job is promoted
# and the ring turns with nobody calling maintenance; the workers show in pg_stat_activity;
# DROP EXTENSION and DROP DATABASE work at once and leave no error in the log; after a
# crash the launcher is back and maintenance resumes. Run as the postgres user; prints
# "launcher: N passed, M failed".
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

[ "$failed" -gt 0 ] && grep -E 'ERROR|FATAL|awa_shard' "$dir/log" | tail -15
summary
[ "$failed" -eq 0 ]
