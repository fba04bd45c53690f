#!/usr/bin/env bash
# Live test: no read misses a committed pending job while prunes run (docs/maintenance.md §2,
# "No read misses a job"). One session rotates and prunes the queue ring in a loop (explicit
# prunes: every sealed slot's pending rows move forward, the worst case), producers enqueue
# jobs and record their ids in the same transaction (beside a backlog of 20,000), and readers
# look committed jobs up by id with awa.get_job and through awa.jobs, each in one statement whose snapshot
# also shows the recorded id: a job whose id it sees is committed and pending (nobody claims),
# so every look-up must find it. With the prune's move and truncate in one transaction,
# get_job missed 287 of ~4,300 look-ups in 30 s.
# Run as the postgres user; prints "prune_readers: N passed, M failed".
TEST=prune_readers; . "$(dirname "$0")/lib.sh"
LOAD_SECS=${LOAD_SECS:-20}
new_server preaders 58000
start_server -c shared_preload_libraries=awa_shard -c awa_shard.maintenance=off \
  -c fsync=off -c synchronous_commit=off -c full_page_writes=off || give_up "server did not start"
"$PGBIN/createdb" -h "$dir" -p "$port" readers || give_up "createdb failed"
q readers >/dev/null <<'SQL' || give_up "setup failed"
CREATE EXTENSION awa_shard;
SELECT awa.create_queue('pr_q', 4);
CREATE TABLE public.produced (id bigint PRIMARY KEY);
CREATE TABLE public.lookups (via text NOT NULL, found boolean NOT NULL);
CREATE TABLE public.maint (result text NOT NULL);
-- A backlog: every prune of its slot moves it, holding the slot's locks meanwhile, so readers
-- queue behind the prune and read right after its commit with a snapshot taken before it.
INSERT INTO public.produced SELECT unnest(awa.insert_jobs('pr_q', array_fill('b'::text, ARRAY[20000]), p_spread_keyless => true));
SQL
mkdir -p "$dir/logs"
end=$(( $(date +%s) + LOAD_SECS ))

# Producers: a job and its recorded id in one transaction.
for p in 1 2; do
  ( while [ "$(date +%s)" -lt "$end" ]; do
      echo "INSERT INTO public.produced SELECT id FROM awa.insert_job_compat('k', 'pr_q');"
    done | q readers >/dev/null 2>>"$dir/logs/producer.err" ) &
  bg+=($!)
done
# Maintenance: rotate and prune as fast as it can.
( while [ "$(date +%s)" -lt "$end" ]; do
    echo "INSERT INTO public.maint SELECT awa.rotate_queue_ring(); INSERT INTO public.maint SELECT awa.prune_queue_ring(50);"
  done | q readers >/dev/null 2>>"$dir/logs/maint.err" ) &
bg+=($!)
# Readers: one statement picks a recorded id and looks the job up with the same snapshot.
for via in get_job get_job jobs; do
  case $via in
    get_job)   look="EXISTS (SELECT 1 FROM awa.get_job(p.id) j WHERE j.state = 'available')" ;;
    jobs)      look="EXISTS (SELECT 1 FROM awa.jobs j WHERE j.id = p.id AND j.state = 'available')" ;;
  esac
  ( while [ "$(date +%s)" -lt "$end" ]; do
      echo "INSERT INTO public.lookups SELECT '$via', $look FROM (SELECT id FROM public.produced WHERE id >= (SELECT min(id) + (random() * (max(id) - min(id)))::bigint FROM public.produced) ORDER BY id LIMIT 1) p;"
    done | q readers >/dev/null 2>>"$dir/logs/reader.err" ) &
  bg+=($!)
done
wait "${bg[@]}" 2>/dev/null; bg=()

errs=$(cat "$dir"/logs/*.err | grep -c 'ERROR')
check "no producer, reader or maintenance call failed" "$errs" "0"
[ "$errs" -gt 0 ] && head -n 5 "$dir"/logs/*.err
stats=$(q readers -F ' ' -c "SELECT (SELECT count(*) FROM public.produced), (SELECT count(*) FROM public.lookups),
                                    (SELECT count(*) FROM public.maint WHERE result = 'moved'),
                                    (SELECT count(*) FROM public.maint WHERE result = 'pruned')")
read -r n_prod n_look n_moved n_pruned <<<"$stats"
check "the load ran (jobs, look-ups, moves and truncates)" \
  "$(( ${n_prod:-0} >= 100 && ${n_look:-0} >= 300 && ${n_moved:-0} >= 3 && ${n_pruned:-0} >= 3 ))" "1"
for via in get_job jobs; do
  check "every look-up through $via found its committed pending job" \
    "$(q readers -c "SELECT count(*) FILTER (WHERE NOT found) FROM public.lookups WHERE via = '$via'")" "0"
done
check "every produced job is still available, once" \
  "$(q readers -c "SELECT count(*) || '/' || count(DISTINCT j.id) FROM awa.jobs j JOIN public.produced p ON p.id = j.id WHERE j.state = 'available'")" \
  "$n_prod/$n_prod"
echo "produced $n_prod, look-ups $n_look, prunes: $n_moved moved, $n_pruned pruned"
summary
[ "$failed" -eq 0 ]
