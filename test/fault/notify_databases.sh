#!/usr/bin/env bash
# Live test: the NOTIFY throttle is kept per database. Two databases on one server each have
# a queue named same_q; a producer in database b commits first, then one in database a,
# well within awa_shard.notify_interval (5 s here). The listener in database a must still
# hear its own database's notification (1.0 keyed the throttle by queue name only, so b's
# commit suppressed a's). Also: a second enqueue in a inside the interval is throttled.
# Run as the postgres user; prints "notify_databases: N passed, M failed".
TEST=notify_databases; . "$(dirname "$0")/lib.sh"
new_server notify 55000
start_server -c shared_preload_libraries=awa_shard -c awa_shard.maintenance=off -c awa_shard.notify_interval=5000 \
  || give_up "the server did not start"
for db in a b; do q postgres -c "CREATE DATABASE $db"; q "$db" -c "CREATE EXTENSION awa_shard"; done

# The listener in a: psql reports notifications after each command it runs.
"$PGBIN/psql" -h "$dir" -p "$port" -X -q -d a > "$dir/listener.out" 2>&1 <<'SQL' &
LISTEN "awa:same_q";
SELECT pg_sleep(1.5);
SELECT 1;
SQL
listener=$!
sleep 0.5
q b -c "SELECT awa.insert_job_compat('k', 'same_q')" >/dev/null
q a -c "SELECT awa.insert_job_compat('k', 'same_q')" >/dev/null
q a -c "SELECT awa.insert_job_compat('k', 'same_q')" >/dev/null
wait "$listener"
check "database a hears its own enqueue although database b's same_q just notified" \
  "$(grep -c 'Asynchronous notification "awa:same_q"' "$dir/listener.out")" "1"
summary
[ "$failed" -eq 0 ]
