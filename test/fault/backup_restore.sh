#!/usr/bin/env bash
# Live test of backups: a database holding jobs in every state (waiting on several shards,
# running on a receipt and on a lease, completed, failed in a ring slot and retained,
# retryable, scheduled, dead-lettered, cancelled), with a turned ring and a sealed slot, and
# periodic jobs (one with a past enqueue, one paused), is
# dumped with pg_dump -Fc and restored with pg_restore, and dumped as plain SQL and restored
# with psql. The restored database has every job in its state with its id, the lanes and
# their claim cursors, the ring state, the settings, the schedules with their next and last
# ticks; the restored schedules enqueue a due tick once; no job id or lane_seq is handed out
# twice; waiting jobs drain in lane order; open attempts finish. Each restore runs in one
# transaction, as docs/operations.md §6 asks. Background maintenance is off so that the
# source stays as it was dumped and the two can be compared row by row. Run as the postgres user;
# prints "backup_restore: N passed, M failed".
TEST=backup_restore; . "$(dirname "$0")/lib.sh"
new_server backup 57000
start_server -c shared_preload_libraries=awa_shard -c awa_shard.maintenance=off || give_up "the server did not start"

q postgres -c "CREATE DATABASE src" || exit 1
q src >/dev/null <<'SQL' || exit 1
CREATE EXTENSION awa_shard;
SELECT awa.set_enqueue_shards('b_keyed', 4);
UPDATE awa.queue_meta SET paused = false WHERE queue = 'b_keyed';
-- Slot 0: finished work and one retained failure, then the ring turns.
SELECT awa.insert_job_compat('old', 'b_old') FROM generate_series(1, 3);
SELECT awa.insert_job_compat('fatal', 'b_fail', p_max_attempts => 1::smallint);
SELECT awa.complete_jobs(array_agg(job_id), array_agg(run_lease)) FROM awa.claim_ready_runtime('b_old', 10, 0, 0);
SELECT awa.fail_job(job_id, run_lease, 'fatal') FROM awa.claim_ready_runtime('b_fail', 1, 0, 0);
SELECT awa.rotate_queue_ring();
SELECT awa.prune_queue_ring();
SELECT awa.insert_job_compat('fatal2', 'b_fail', p_max_attempts => 1::smallint);
SELECT awa.fail_job(job_id, run_lease, 'fatal2') FROM awa.claim_ready_runtime('b_fail', 1, 0, 0);
SELECT awa.rotate_queue_ring();
-- Waiting jobs: keyed on 4 shards, keyless, a paused queue.
SELECT awa.insert_job_compat('wait', 'b_keyed', jsonb_build_object('n', n), p_ordering_key => ('k' || n)::bytea)
  FROM generate_series(1, 12) n;
SELECT awa.insert_jobs('b_plain', array_fill('wait'::text, ARRAY[5]));
SELECT awa.insert_job_compat('paused', 'b_paused');
SELECT awa.pause_queue('b_paused');
-- Running: two receipts; a lease.
CREATE TABLE public.open_attempts AS SELECT job_id, run_lease FROM awa.claim_ready_runtime('b_plain', 2, 0, 0);
UPDATE awa.plane_settings SET receipts = false;
SELECT awa.insert_job_compat('leased', 'b_lease');
INSERT INTO public.open_attempts SELECT job_id, run_lease FROM awa.claim_ready_runtime('b_lease', 1, 0, 0);
UPDATE awa.plane_settings SET receipts = true;
-- Deferred, DLQ, cancelled, unique.
SELECT awa.insert_job_compat('later', 'b_def', p_run_at => now() + interval '1 day');
SELECT awa.insert_job_compat('retry', 'b_def', p_state => 'retryable', p_run_at => now() + interval '1 hour');
SELECT awa.insert_job_compat('poison', 'b_dlq');
SELECT awa.fail_job_to_dlq(job_id, run_lease, 'poison') FROM awa.claim_ready_runtime('b_dlq', 1, 0, 0);
SELECT awa.cancel_job((awa.insert_job_compat('cancel_me', 'b_plain')).id);
SELECT awa.insert_job_compat('unique', 'b_uniq', p_unique_key => '\x01');
-- Periodic jobs: one that has enqueued a tick, one paused.
SELECT awa.schedule('b_nightly', '30 2 * * *', 'nightly', 'b_sched', '{"n": 1}', p_timezone => 'Europe/Berlin',
                    p_priority => 3, p_max_attempts => 5, p_metadata => '{"m": 1}', p_tags => ARRAY['t']);
-- (Its tick a day late and the schedule as old: a downtime, so one job, the latest tick's.)
UPDATE awa.cron_schedules SET next_run_at = now() - interval '1 day', created_at = now() - interval '2 days'
 WHERE name = 'b_nightly';
SELECT awa.run_schedules();
SELECT awa.schedule('b_hourly', '@hourly', 'hourly', 'b_sched');
SELECT awa.pause_schedule('b_hourly');
SQL

# What must come back: every job, lanes and cursors, next ids, ring, settings.
snapshot() {
  q "$1" -c "SELECT id, state, kind, queue, priority, enqueue_shard, lane_seq, args, attempt, run_lease, errors
               FROM awa.jobs ORDER BY id" \
         -c "SELECT h.queue, h.priority, h.enqueue_shard, h.claim_seq, awa._lane_next_seq(e.seq_name)
               FROM awa.lane_cursors h JOIN awa.queue_enqueue_heads e USING (queue, priority, enqueue_shard)
              ORDER BY 1, 2, 3" \
         -c "SELECT current_slot, generation FROM awa.queue_ring_state" \
         -c "SELECT slot, generation FROM awa.queue_ring_slots ORDER BY slot" \
         -c "SELECT current_slot, generation FROM awa.claim_ring_state" \
         -c "SELECT receipts FROM awa.plane_settings" \
         -c "SELECT queue, paused, enqueue_shards FROM awa.queue_meta ORDER BY queue" \
         -c "SELECT unique_key, job_id FROM awa.job_unique_claims ORDER BY 1" \
         -c "SELECT s.*, c.next_run_at FROM awa.schedules s JOIN awa.cron_schedules c USING (name) ORDER BY name"
}
snapshot src > "$dir/src.snap" || exit 1
jobs_src=$(q src -c "SELECT count(*) FROM awa.jobs")
next_id_src=$(q src -c "SELECT last_value FROM awa.job_id_seq")

restore_check() {
  local how="$1" db="$2"
  snapshot "$db" > "$dir/$db.snap" 2>"$dir/$db.err"
  check "$how: every job, lane, cursor, ring slot and setting is back ($jobs_src jobs)" \
    "$(diff "$dir/src.snap" "$dir/$db.snap" >/dev/null && echo same || { diff "$dir/src.snap" "$dir/$db.snap" | head -5; echo differs; })" "same"
  # New jobs take fresh ids and continue their lanes.
  check "$how: a new job gets a fresh id" \
    "$(q "$db" -c "SELECT (awa.insert_job_compat('new', 'b_plain')).id > $next_id_src")" "t"
  check "$how: the lane continues after its last lane_seq" \
    "$(q "$db" -c "SELECT (SELECT max(lane_seq) FROM awa.jobs WHERE queue = 'b_plain' AND kind = 'new')
                        > (SELECT max(lane_seq) FROM awa.jobs WHERE queue = 'b_plain' AND kind <> 'new')")" "t"
  # Open attempts finish with their run_lease.
  check "$how: open attempts (receipts and a lease) complete" \
    "$(q "$db" -c "SELECT count(*) FROM awa.complete_jobs((SELECT array_agg(job_id) FROM public.open_attempts),
                                                      (SELECT array_agg(run_lease) FROM public.open_attempts))")" "3"
  # Waiting jobs drain in lane order, each once.
  check "$how: the 12 keyed jobs drain, each once, in lane order per shard" \
    "$(q "$db" -c "CREATE TEMP TABLE c AS SELECT * FROM awa.claim_ready_runtime('b_keyed', 100, 0, 0) LIMIT 0;
                   DO \$\$ BEGIN FOR i IN 1..200 LOOP
                       INSERT INTO c SELECT * FROM awa.claim_ready_runtime('b_keyed', 2, 0, 0);
                       EXIT WHEN (SELECT count(*) FROM c) >= 12;
                       IF NOT FOUND THEN PERFORM pg_sleep(0.02); END IF;
                   END LOOP; END \$\$;
                   SELECT count(*) || '/' || count(DISTINCT job_id) || '/' ||
                          bool_and(lane_seq > prev) FROM (SELECT job_id, lane_seq,
                          lag(lane_seq, 1, 0::bigint) OVER (PARTITION BY enqueue_shard ORDER BY ctid) AS prev FROM c) o")" "12/12/true"
  check "$how: the unique key still holds" \
    "$(q "$db" -c "DO \$\$ BEGIN PERFORM awa.insert_job_compat('unique', 'b_uniq', p_unique_key => '\x01');
                              RAISE EXCEPTION 'duplicate accepted'; EXCEPTION WHEN unique_violation THEN NULL; END \$\$;
                   SELECT 'held'")" "held"
  # The schedule's tick made due (an hour ago) after a downtime (its previous job a day old):
  # the latest tick that has come is enqueued, once. With its previous job seconds old (the
  # source's), every due tick would be, and a real tick of the last hour (01:30 UTC) made two.
  check "$how: a restored schedule enqueues its due tick once" \
    "$(q "$db" -c "UPDATE awa.cron_schedules SET next_run_at = now() - interval '1 hour', last_enqueued_at = now() - interval '1 day'
                   WHERE name = 'b_nightly'" \
              -c "SELECT awa.run_schedules()" -c "SELECT awa.run_schedules()" \
              -c "SELECT count(*) FROM awa.jobs WHERE queue = 'b_sched'" | tr '\n' ' ')" "1 0 2 "
  check "$how: the paused schedule stays paused" \
    "$(q "$db" -c "SELECT paused FROM awa.schedules WHERE name = 'b_hourly'")" "t"
  check "$how: maintenance runs on the restored rings" \
    "$(q "$db" -c "SELECT awa.run_maintenance() ? 'queue_prune'")" "t"
}

# 1. Custom format, pg_restore into a new database.
"$PGBIN/pg_dump" -h "$dir" -p "$port" -Fc -f "$dir/src.dump" src || exit 1
q postgres -c "CREATE DATABASE via_restore"
"$PGBIN/pg_restore" -h "$dir" -p "$port" --single-transaction -d via_restore "$dir/src.dump" 2>"$dir/restore.err"
check "pg_restore: no error" "$(grep -c 'error' "$dir/restore.err")" "0"
[ -s "$dir/restore.err" ] && head -5 "$dir/restore.err"
restore_check "pg_dump -Fc | pg_restore" via_restore

# 2. Plain SQL through psql.
q postgres -c "CREATE DATABASE via_psql"
"$PGBIN/pg_dump" -h "$dir" -p "$port" src | "$PGBIN/psql" -h "$dir" -p "$port" -X -q --single-transaction -d via_psql >/dev/null 2>"$dir/psql.err"
check "pg_dump | psql: no error" "$(grep -c 'ERROR' "$dir/psql.err")" "0"
[ -s "$dir/psql.err" ] && head -5 "$dir/psql.err"
restore_check "pg_dump | psql" via_psql

summary
[ "$failed" -eq 0 ]
