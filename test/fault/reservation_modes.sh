#!/usr/bin/env bash
# Live test of the two reservation modes (docs/design.md §3) on servers whose settings the
# shared test server cannot have:
#   1. without preload (lane-lock mode): every isolation spec runs, and those whose waits
#      differ by mode (with an expected/<spec>_1.out) must match their lane-lock output;
#   2. preloaded with a registry of two fixed entries: the specs of the reservation fence
#      give their registry output while the registry is full (each spec's sessions take
#      more entries than two); PREPARE TRANSACTION of a producer is refused with 0A000 and
#      leaves nothing behind, with the registry free and with it full, other prepared
#      transactions work, a producer that finds the registry full registers in its
#      overflow list (no error, no lane lock held: a second producer of the lane does not
#      wait, and the lane stays fenced), a terminated producer frees its entry, and
#      awa_shard.reservation_slots = 0 selects lane-lock mode, where PREPARE of a producer is
#      refused too, whether its enqueue sent a NOTIFY or not.
# Run as the postgres user from the work tree; prints "reservation_modes: N passed, M failed".
TEST=reservation_modes; . "$(dirname "$0")/lib.sh"
PGXS_DIR=${PGXS_DIR:-/usr/lib/postgresql/15/lib/pgxs}
here=$(pwd)
cleanup() { jobs -p | xargs -r kill 2>/dev/null; drop_server; }
new_server modes 57000

# 1. Lane-lock mode: every isolation spec, against its lane-lock output where the output
#    differs by mode (expected/<spec>_1.out, which starts with the mode) and its only output
#    otherwise.
mkdir -p "$dir/iso/specs" "$dir/iso/expected"
specs=""; alternates=0
for spec in test/specs/*.spec; do
  name=$(basename "$spec" .spec)
  cp "$spec" "$dir/iso/specs/"
  if [ -f "test/expected/${name}_1.out" ]; then
    cp "test/expected/${name}_1.out" "$dir/iso/expected/$name.out"
    # A spec whose output differs by the reservation mode shows the mode (other _1 outputs
    # differ by preload for other reasons, e.g. rate limits).
    grep -q '^lane_lock' "test/expected/${name}_1.out" && alternates=$((alternates + 1))
  else
    cp "test/expected/$name.out" "$dir/iso/expected/$name.out"
  fi
  specs="$specs $name"
done
grep -v '^shared_preload_libraries' test/postgresql.conf > "$dir/nopreload.conf"
(cd "$dir/iso" && "$PGXS_DIR/src/test/isolation/pg_isolation_regress" --temp-instance="$dir/iso/tmp" \
  --temp-config="$dir/nopreload.conf" --inputdir=. --outputdir=out --bindir="$PGBIN" \
  --load-extension=awa_shard $specs) > "$dir/iso.log" 2>&1
for name in $specs; do
  r=$(grep -E "^(test| )? *$name +\.\.\." "$dir/iso.log" | grep -oE '\.\.\. *[a-zA-Z]+' | awk '{print $2}')
  check "lane-lock mode: spec $name" "$r" "ok"
done
[ -f "$dir/iso/out/regression.diffs" ] && head -n 80 "$dir/iso/out/regression.diffs"
check "lane-lock mode: the mode-dependent specs ran in lane-lock mode" \
  "$(grep -l '^lane_lock' "$dir"/iso/out/results/*.out 2>/dev/null | wc -l)" "$alternates"

# 2. Registry mode with two fixed entries.
#    The fence's specs (those with a lane-lock output, the enqueue and reserve specs, and the
#    claim's gap jump) on a server whose registry they fill: the registry output, unchanged.
mkdir -p "$dir/full/specs" "$dir/full/expected"
full_specs=""
for spec in test/specs/*.spec; do
  name=$(basename "$spec" .spec)
  case "$name" in
    enqueue_*|reserve_*|claim_gap_then_cancel) ;;
    *) [ -f "test/expected/${name}_1.out" ] || continue ;;
  esac
  cp "$spec" "$dir/full/specs/"; cp "test/expected/$name.out" "$dir/full/expected/"
  full_specs="$full_specs $name"
done
{ cat test/postgresql.conf; echo "awa_shard.reservation_slots = 2"; } > "$dir/full.conf"
(cd "$dir/full" && "$PGXS_DIR/src/test/isolation/pg_isolation_regress" --temp-instance="$dir/full/tmp" \
  --temp-config="$dir/full.conf" --inputdir=. --outputdir=out --bindir="$PGBIN" \
  --load-extension=awa_shard $full_specs) > "$dir/full.log" 2>&1
for name in $full_specs; do
  r=$(grep -E "^(test| )? *$name +\.\.\." "$dir/full.log" | grep -oE '\.\.\. *[a-zA-Z]+' | awk '{print $2}')
  check "registry of two entries: spec $name" "$r" "ok"
done
[ -f "$dir/full/out/regression.diffs" ] && head -n 80 "$dir/full/out/regression.diffs"

start() {
  start_server -c shared_preload_libraries=awa_shard -c awa_shard.maintenance=off \
    -c awa_shard.reservation_slots=$1 -c max_prepared_transactions=2
}
start 2 || give_up "the server did not start"
# Every statement below runs in database modes.
qm() { q modes "$@"; }
"$PGBIN/createdb" -h "$dir" -p "$port" modes
qm -c "CREATE EXTENSION awa_shard" -c "INSERT INTO awa.queue_meta (queue, enqueue_shards) VALUES ('m', 1), ('m2', 1), ('m3', 1), ('m4', 1)"
# Every lane exists before the checks (the first use of a lane holds its lock to commit).
for x in m m2 m3 m4; do qm -c "SELECT awa._ensure_lane('$x', 2::smallint, 0::smallint)" >/dev/null; done
check "registry mode: SHOW" "$(qm -c 'SHOW awa_shard.reservation_mode')" "registry"
check "registry mode: awa.reservation_mode()" "$(qm -c 'SELECT awa.reservation_mode()')" "registry"

# PREPARE TRANSACTION of a producer is refused (0A000) and rolls the enqueue back.
out=$(qm -c "BEGIN" -c "SELECT awa.insert_job_compat('prepared', 'm')" -c "PREPARE TRANSACTION 'p1'" 2>&1)
check "PREPARE of a producer fails with 0A000" "$(echo "$out" | grep -c 'cannot prepare a transaction that reserved lane sequence numbers')" "1"
check "the refused PREPARE left no job" "$(qm -c "SELECT count(*) FROM awa.ready_entries WHERE kind = 'prepared'")" "0"
check "the refused PREPARE left no prepared transaction" "$(qm -c "SELECT count(*) FROM pg_prepared_xacts")" "0"
check "a prepared transaction that did not enqueue works" \
  "$(qm -c "BEGIN" -c "SELECT 1" -c "PREPARE TRANSACTION 'p2'" -c "COMMIT PREPARED 'p2'" -c "SELECT count(*) FROM pg_prepared_xacts")" "1
0"
qm -c "SELECT awa.insert_job_compat('after_prepare', 'm')" >/dev/null
check "the lane drains after a refused PREPARE" "$(qm -c "SELECT string_agg(kind, ',') FROM awa.claim_ready_runtime('m', 10)")" "after_prepare"

# Registry full: two open producers on m2 and m3 take both entries; a third on m registers
# in its overflow list (no error) and holds no lock, so a fourth producer on m does not wait
# for it, and a claim takes nothing from m until the third commits.
hold() { # hold NAME QUEUE SECONDS: enqueue one job and keep the transaction open
  printf "BEGIN;\nSELECT awa.insert_job_compat('%s', '%s');\nSELECT pg_sleep(%s);\nCOMMIT;\n" "$1" "$2" "$3" |
    "$PGBIN/psql" -h "$dir" -p "$port" -X -q -d modes >/dev/null 2>&1 &
}
hold h2 m2 4; hold h3 m3 4; sleep 1
check "two entries in use" "$(qm -c "SELECT count(*) FROM pg_stat_activity WHERE query LIKE 'SELECT pg_sleep%'")" "2"
hold fallback m 3; sleep 0.5
out=$(qm -c "SET lock_timeout = '300ms'" -c "SELECT kind FROM awa.insert_job_compat('behind_fallback', 'm')" 2>&1)
check "registry full: a second producer of the lane does not wait" "$out" "behind_fallback"
check "registry full: the overflowed reservation fences its lane" "$(qm -c "SELECT count(*) FROM awa.claim_ready_runtime('m', 10)")" "0"
# PREPARE of a producer while the registry is full: refused, as with the registry free.
out=$(qm -c "BEGIN" -c "SELECT awa.insert_job_compat('prepared_full', 'm2')" -c "PREPARE TRANSACTION 'p3'" 2>&1)
check "registry full: PREPARE of a producer fails with 0A000" "$(echo "$out" | grep -c 'cannot prepare a transaction that reserved lane sequence numbers')" "1"
check "registry full: the refused PREPARE left no prepared transaction" "$(qm -c "SELECT count(*) FROM pg_prepared_xacts")" "0"
sleep 4
check "registry full: every held job committed" "$(qm -c "SELECT count(*) FROM awa.ready_entries WHERE kind IN ('h2', 'h3', 'fallback')")" "3"
check "registry full: the overflowed job is claimed first, then the one behind it" "$(qm -c "SELECT string_agg(kind, ',' ORDER BY lane_seq) FROM awa.claim_ready_runtime('m', 10)")" "fallback,behind_fallback"
check "registry full: the refused PREPARE left no job" "$(qm -c "SELECT count(*) FROM awa.ready_entries WHERE kind = 'prepared_full'")" "0"
check "registry full: the log has no error but the refused PREPAREs" "$(grep 'ERROR' "$dir/log" | grep -vc 'cannot prepare')" "0"

# A producer terminated while its reservation is in flight frees its entry: the claim then
# jumps the reservation it will never commit.
printf "BEGIN;\nSELECT awa.insert_job_compat('killed', 'm4');\nSELECT pg_sleep(30);\n" |
  "$PGBIN/psql" -h "$dir" -p "$port" -X -q -d modes >/dev/null 2>&1 &
sleep 1
qm -c "SELECT awa.insert_job_compat('after_killed', 'm4')" >/dev/null
check "an open reservation fences the lane" "$(qm -c "SELECT count(*) FROM awa.claim_ready_runtime('m4', 10)")" "0"
qm -c "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE query LIKE 'SELECT pg_sleep(30)%'" >/dev/null; sleep 1
check "a terminated producer frees its entry" "$(qm -c "SELECT string_agg(kind, ',') FROM awa.claim_ready_runtime('m4', 10)")" "after_killed"

# reservation_slots = 0 selects lane-lock mode on a preloaded server.
"$PGBIN/pg_ctl" -D "$dir/data" -m fast stop >/dev/null; start 0 || cat "$dir/log"
check "reservation_slots = 0: lane-lock mode" "$(qm -c 'SELECT awa.reservation_mode()')" "lane_lock"
# PREPARE of a producer in lane-lock mode: refused too, notified or not.
for interval in 0 -1; do
  out=$(qm -c "SET awa_shard.notify_interval = $interval" -c "BEGIN" -c "SELECT awa.insert_job_compat('prepared_lane_lock', 'm')" -c "PREPARE TRANSACTION 'p4'" 2>&1)
  check "lane-lock mode (notify_interval $interval): PREPARE of a producer fails with 0A000" "$(echo "$out" | grep -c 'cannot prepare a transaction that reserved lane sequence numbers')" "1"
done
check "lane-lock mode: the refused PREPAREs left no prepared transaction" "$(qm -c "SELECT count(*) FROM pg_prepared_xacts")" "0"
hold held m 2; sleep 0.5
out=$(qm -c "SET lock_timeout = '300ms'" -c "SELECT awa.insert_job_compat('behind', 'm')" 2>&1)
check "lane-lock mode: a second producer waits for the first" "$(echo "$out" | grep -c 'canceling statement due to lock timeout')" "1"
wait

summary
[ "$failed" -eq 0 ]
