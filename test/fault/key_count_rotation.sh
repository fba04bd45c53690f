#!/usr/bin/env bash
# Live test of a per-key concurrency count against a turn of the queue ring (docs/design.md
# §4, "Flow control"): a claim reads the queue ring's live arc when it locks its lane, and
# counts its keys' running attempts later, under the keys' locks. Meanwhile the ring may turn,
# and another claim of the same key may start an attempt whose ready row is in the new slot;
# that attempt's place must count. The claim is held at that point with gdb (a breakpoint
# where it reads its lane's window, after the arc) while the other sessions turn the ring and
# claim. Before, the count tested the place on the arc read before the turn, found no ready
# row, took the place as free and claimed: key K ran twice under a cap of 1. Run as the
# postgres user (gdb attaches to the server's backend, which it owns); prints
# "key_count_rotation: N passed, M failed".
TEST=key_count_rotation; . "$(dirname "$0")/lib.sh"
command -v gdb >/dev/null || give_up "gdb is needed (apt-get install gdb)"
new_server keyrot 58500
cat >> "$dir/data/postgresql.conf" <<CONF
shared_preload_libraries = 'awa_shard'
awa_shard.maintenance = off
fsync = off
CONF
start_server || give_up "the server did not start"
q postgres -c "CREATE EXTENSION awa_shard" >/dev/null || give_up "CREATE EXTENSION failed"

for path in direct statement; do
  # The direct count reads the places itself; a trigger on awa.key_attempts sends the count
  # and the record to their statements instead (the other path, with the same arcs).
  q postgres >/dev/null <<SQL || give_up "setup failed"
SELECT awa.create_queue('g_$path', 1);
SELECT awa.set_concurrency_limit('g_$path', 1, p_per_key => true);
SELECT awa.insert_job_compat('k', 'g_$path', p_priority => 2, p_concurrency_key => 'K');
SQL
  if [ $path = statement ]; then
    q postgres -c "CREATE FUNCTION public.noop() RETURNS trigger LANGUAGE plpgsql AS 'BEGIN RETURN NEW; END';
                   CREATE TRIGGER noop BEFORE UPDATE ON awa.key_attempts FOR EACH ROW EXECUTE FUNCTION public.noop()" >/dev/null \
      || give_up "the trigger could not be made"
  fi
  cat > "$dir/steps.sh" <<STEPS
#!/usr/bin/env bash
# While the first claim is held: a row in the current slot, a turn of the ring, the key's next
# job (priority 1: its own lane) in the new slot, and a second claim that starts it.
psql() { "$PGBIN/psql" -h "$dir" -p "$port" -X -A -t -q -d postgres "\$@"; }
psql -c "SELECT awa.insert_job_compat('f', 'filler_$path')" > "$dir/steps.out"
psql -c "SELECT awa.rotate_queue_ring()" >> "$dir/steps.out"
psql -c "SELECT awa.insert_job_compat('k', 'g_$path', p_priority => 1, p_concurrency_key => 'K')" >> "$dir/steps.out"
psql -c "SELECT count(*) FROM awa.claim_ready_runtime('g_$path', 1)" > "$dir/second.out"
STEPS
  chmod +x "$dir/steps.sh"
  # The first claim: its session sleeps first, so that gdb can attach to its backend.
  ( q postgres -c "SELECT pg_sleep(1.5)" -c "SELECT count(*) FROM awa.claim_ready_runtime('g_$path', 1)" > "$dir/first.out" 2>&1 ) &
  first=$!
  wait_for postgres 10 "SELECT count(*) FROM pg_stat_activity WHERE query = 'SELECT pg_sleep(1.5)'" 1 \
    || give_up "the first claim's session did not start"
  pid=$(q postgres -c "SELECT pid FROM pg_stat_activity WHERE query = 'SELECT pg_sleep(1.5)'")
  gdb -p "$pid" -batch -ex 'break awa::lane_window_keys' -ex continue -ex "shell $dir/steps.sh" -ex detach \
    > "$dir/gdb.out" 2>&1
  wait "$first"
  check "$path: gdb held the claim where it reads its window" "$(grep -c '^Breakpoint 1.*lane_window_keys' "$dir/gdb.out")" 1
  check "$path: the ring turned while the claim was held" "$(sed -n 2p "$dir/steps.out")" rotated
  check "$path: the second claim started the key's other job" "$(cat "$dir/second.out")" 1
  check "$path: the held claim counts that attempt and takes nothing (cap 1)" "$(tail -n 1 "$dir/first.out")" 0
  check "$path: key K runs once" \
    "$(q postgres -c "SELECT count(*) FROM awa.jobs WHERE queue = 'g_$path' AND concurrency_key = 'K' AND state = 'running'")" 1
  [ $path = statement ] && q postgres -c "DROP TRIGGER noop ON awa.key_attempts" >/dev/null
done
summary
