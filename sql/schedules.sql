-- Periodic jobs (docs/api.md, "Periodic jobs"): cron ticks in real time zones (PostgreSQL's
-- zone data; the tick search itself is unit-tested in test/unit/cron_tests.cpp), bad
-- expressions (22023 naming the field), create/replace/pause/resume/unschedule, the view,
-- and the maintenance step: one job per tick however often it runs, and after downtime only
-- the latest missed tick. Nothing here depends on how long a statement takes: "downtime" is
-- a stored next tick set in the past, and every tick asserted is fixed or bracketed by
-- clock readings taken around the step.
-- Schedules are database-wide and every maintenance pass runs them: a database of our own.
SELECT current_database() AS home \gset
CREATE DATABASE awa_schedules;
ALTER DATABASE awa_schedules SET awa_shard.maintenance = off;
\c awa_schedules
SET client_min_messages = warning;
CREATE EXTENSION awa_shard;
RESET client_min_messages;
SET timezone = 'UTC';
\set ECHO none
\i sql/sqlstate_of.psql
\set ECHO all

-- Ticks across daylight-saving changes, in the zone's wall-clock time and in UTC.
-- Berlin 2026: 02:00-02:59 skipped on 29 March, repeated on 25 October. New York 2026:
-- skipped on 8 March, 01:00-01:59 repeated on 1 November. A fixed-time schedule (minute and
-- hour fields without '*') runs a skipped time at the end of the gap and a repeated time
-- once; a schedule with '*' in the minute or hour field skips the gap and runs both times.
SELECT c.expr, c.zone, c.after, n AS next_utc, n AT TIME ZONE c.zone AS next_local
  FROM (VALUES
    ('30 2 * * *', 'Europe/Berlin', '2026-03-28 12:00+00'::timestamptz),
    ('30 2 * * *', 'Europe/Berlin', '2026-03-29 01:00+00'),
    ('30 * * * *', 'Europe/Berlin', '2026-03-29 00:30+00'),
    ('30 2 * * *', 'Europe/Berlin', '2026-10-24 12:00+00'),
    ('30 2 * * *', 'Europe/Berlin', '2026-10-25 00:30+00'),
    ('30 * * * *', 'Europe/Berlin', '2026-10-25 00:30+00'),
    ('30 * * * *', 'Europe/Berlin', '2026-10-25 01:30+00'),
    ('30 2 * * *', 'America/New_York', '2026-03-07 12:00+00'),
    ('30 1 * * *', 'America/New_York', '2026-10-31 12:00+00'),
    ('30 1 * * *', 'America/New_York', '2026-11-01 05:30+00'),
    ('30 * * * *', 'America/New_York', '2026-11-01 05:30+00'),
    ('0 9 * * mon-fri', 'Asia/Kolkata', '2026-01-09 04:00+00'),
    ('@daily', 'europe/berlin', '2026-02-28 23:00+00'),
    ('0 0 29 2 *', 'UTC', '2026-01-01 00:00+00'),
    ('0 0 13 * fri', 'UTC', '2026-01-03 00:00+00'),
    ('15 seconds', 'Europe/Berlin', '2026-03-29 00:59:50.5+00'))
    AS c(expr, zone, after)
 CROSS JOIN LATERAL awa._cron_next(c.expr, c.zone, c.after) n;
-- The latest tick of a stretch: what a schedule enqueues after downtime.
SELECT awa._cron_latest('*/5 * * * *', 'UTC', '2026-01-01 00:00+00', '2026-03-01 10:07:59+00') AS latest_5min,
       awa._cron_latest('@weekly', 'America/New_York', '2020-01-05 05:00+00', '2026-12-03 12:00+00') AS latest_weekly,
       awa._cron_latest('0 12 * * *', 'UTC', '2026-01-01 12:00+00', '2026-01-02 11:59+00') AS none_later;
-- Matches no date: NULL (awa.schedule refuses it).
SELECT awa._cron_next('0 0 31 2 *', 'UTC', '2026-01-01') AS feb_31;

-- Bad input: 22023 naming the field (or the zone), checked before anything is written.
SELECT pg_temp.sqlstate_of(format('SELECT awa.schedule(%L, %L, %L)', 'bad', c, 'k'))
  FROM unnest(ARRAY['61 * * * *', '* 24 * * *', '* * 0 * *', '* * * 13 *', '* * * * 8', 'mon * * * *',
                    '* * * jan-foo *', '*/0 * * * *', '30-10 * * * *', '* * * *', '@reboot', '60 seconds',
                    '0 seconds', '', '0 0 31 2 *', '0 0 30 2 *']) c;
SELECT pg_temp.sqlstate_of($$SELECT awa.schedule('bad', '* * * * *', 'k', p_timezone => 'Mars/Olympus')$$);
-- A POSIX zone string PostgreSQL accepts but whose offset moves back 12 hours at once: the tick
-- search allows for 4 (every zone of pg_timezone_names fits); a plain offset string is fine.
SELECT pg_temp.sqlstate_of($$SELECT awa.schedule('bad', '0 * * * *', 'k', p_timezone => 'AAA0BBB-12,J1/0,J341/19')$$);
SELECT awa._cron_next('0 * * * *', 'UTC+3', '2026-01-01 00:30+00') AS plain_offset_next;
SELECT pg_temp.sqlstate_of($$SELECT awa.schedule('bad', NULL, 'k')$$);
SELECT pg_temp.sqlstate_of($$SELECT awa.schedule('', '* * * * *', 'k')$$);
SELECT pg_temp.sqlstate_of($$SELECT awa.schedule('bad', '* * * * *', '')$$);
SELECT pg_temp.sqlstate_of($$SELECT awa.schedule('bad', '* * * * *', 'k', p_queue => NULL)$$);
SELECT pg_temp.sqlstate_of($$SELECT awa.schedule('bad', '* * * * *', 'k', p_priority => 9)$$);
SELECT pg_temp.sqlstate_of($$SELECT awa.schedule('bad', '* * * * *', 'k', p_max_attempts => 0)$$);
SELECT pg_temp.sqlstate_of($$SELECT awa.schedule('bad', '* * * * *', 'k', p_metadata => '[]')$$);
SELECT pg_temp.sqlstate_of($$SELECT awa.schedule('bad', '* * * * *', 'k', p_tags => ARRAY['a', NULL])$$);
SELECT pg_temp.sqlstate_of($$SELECT awa._cron_next('1 2 3', 'UTC', now())$$);
SELECT pg_temp.sqlstate_of($$SELECT awa.run_schedules(0)$$);
SELECT count(*) AS schedules_after_bad_input FROM awa.cron_schedules;

-- Create: the first tick after now (far ahead here, so no pass below enqueues it unasked).
SELECT awa.schedule('yearly', '@yearly', 'report', 'sched_q', '{"kind": "annual"}') > now() AS next_is_ahead;
SELECT awa.schedule('hourly', '0 * * * *', 'tick', 'sched_q', p_timezone => 'Europe/Berlin', p_priority => 1,
                    p_max_attempts => 3, p_metadata => '{"team": "ops"}', p_tags => ARRAY['cron']) > now()
       AS next_is_ahead;
SELECT awa.schedule('fast', '5 seconds', 'ping', 'sched_q') > now() AS next_is_ahead;
SELECT awa.pause_schedule('fast') AS paused_fast;
SELECT name, cron, timezone, kind, queue, args, priority, max_attempts, metadata, tags, paused,
       next_run_at IS NOT NULL AS has_next, last_run_at, last_enqueued_at, last_job_id
  FROM awa.schedules ORDER BY name;
-- The view's next tick is the stored one, NULL while paused.
SELECT s.name, s.next_run_at IS NOT DISTINCT FROM (CASE WHEN c.paused THEN NULL ELSE c.next_run_at END) AS same
  FROM awa.schedules s JOIN awa.cron_schedules c USING (name) ORDER BY 1;
SELECT next_run_at = date_trunc('year', now() AT TIME ZONE 'UTC') AT TIME ZONE 'UTC' + interval '1 year'
       AS yearly_next_is_next_new_year
  FROM awa.schedules WHERE name = 'yearly';

-- Replace with the same cron and zone keeps the next tick; a new cron computes it again.
SELECT next_run_at AS yearly_next FROM awa.cron_schedules WHERE name = 'yearly' \gset
UPDATE awa.cron_schedules SET next_run_at = next_run_at + interval '1 second' WHERE name = 'yearly';
SELECT awa.schedule('yearly', '@yearly', 'report2', 'sched_q', '{"v": 2}')
       = :'yearly_next'::timestamptz + interval '1 second' AS kept_next;
SELECT kind, args FROM awa.schedules WHERE name = 'yearly';
SELECT awa.schedule('yearly', '@annually', 'report2', 'sched_q', '{"v": 2}') = :'yearly_next'::timestamptz
       AS recomputed_next;
-- Replacing keeps a schedule paused.
SELECT awa.schedule('fast', '5 seconds', 'ping', 'sched_q', '{"v": 2}') IS NULL AS still_paused_returns_null;
SELECT paused FROM awa.schedules WHERE name = 'fast';
-- A new queue moves the schedule: one row per name whatever its queue, with its paused flag,
-- next tick and creation time kept; moved back, the same again. A second row of the same
-- name in another queue is refused by the table itself (23505).
SELECT created_at AS fast_created, next_run_at AS fast_next FROM awa.cron_schedules WHERE name = 'fast' \gset
SELECT awa.schedule('fast', '5 seconds', 'ping', 'sched_q2', '{"v": 2}') IS NULL AS moved_still_paused;
SELECT count(*) AS rows_named_fast, min(queue) AS queue, bool_and(paused) AS paused,
       bool_and(created_at = :'fast_created') AS created_kept, bool_and(next_run_at = :'fast_next') AS next_kept
  FROM awa.cron_schedules WHERE name = 'fast';
SELECT next_run_at AS yearly_next2 FROM awa.cron_schedules WHERE name = 'yearly' \gset
SELECT awa.schedule('yearly', '@annually', 'report2', 'sched_q2', '{"v": 2}') = :'yearly_next2'::timestamptz
       AS moved_kept_next;
SELECT awa.schedule('yearly', '@annually', 'report2', 'sched_q', '{"v": 2}') = :'yearly_next2'::timestamptz
       AS moved_back_kept_next;
SELECT awa.schedule('fast', '5 seconds', 'ping', 'sched_q', '{"v": 2}') IS NULL AS moved_back_still_paused;
SELECT queue, count(*) OVER () AS schedules FROM awa.cron_schedules WHERE name IN ('fast', 'yearly') ORDER BY name;
SELECT pg_temp.sqlstate_of($$INSERT INTO awa.cron_schedules (name, cron, timezone, kind, queue, args, priority,
                                                             max_attempts, metadata, tags)
                             VALUES ('fast', '5 seconds', 'UTC', 'k', 'other_q', '{}', 2, 25, '{}', '{}')$$);

-- Nothing is due yet: the step enqueues nothing.
SELECT awa.run_schedules() AS enqueued;

-- Downtime: the yearly schedule's stored tick is 25 years old. One pass enqueues ONE job,
-- for the latest tick that has come (this year's 1 January), not one per missed year; a
-- second pass for the same tick enqueues nothing. Clock readings bracket the pass. (The
-- schedule was made moments ago and has no job yet: made long ago, as after real downtime.)
UPDATE awa.cron_schedules SET next_run_at = '2001-01-01 00:00+00', created_at = '2000-06-01 00:00+00'
 WHERE name = 'yearly';
SELECT clock_timestamp() AS t0 \gset
SELECT awa.run_schedules() AS enqueued;
SELECT clock_timestamp() AS t1 \gset
SELECT awa.run_schedules() AS enqueued_again;
SELECT (awa.run_maintenance())->>'schedules' AS enqueued_by_run_maintenance;
SELECT count(*) AS yearly_jobs FROM awa.jobs WHERE queue = 'sched_q' AND metadata->>'awa_schedule' = 'yearly';
SELECT j.kind, j.args, j.state, j.priority, j.max_attempts, j.metadata, j.tags,
       j.run_at = date_trunc('year', j.run_at AT TIME ZONE 'UTC') AT TIME ZONE 'UTC' AS run_at_is_new_year,
       j.run_at > :'t0'::timestamptz - interval '1 year' AND j.run_at <= :'t1'::timestamptz AS run_at_is_latest_tick,
       s.last_job_id = j.id AS last_job, s.last_run_at = j.run_at AS last_run,
       s.last_enqueued_at BETWEEN :'t0'::timestamptz AND :'t1'::timestamptz AS last_enqueued,
       s.next_run_at = j.run_at + interval '1 year' AS next_is_following_tick
  FROM awa.jobs j JOIN awa.schedules s ON s.last_job_id = j.id
 WHERE s.name = 'yearly';

-- The same through awa.run_maintenance() (no background worker needed), for an hourly
-- schedule in Berlin three days behind: one job, on the hour, within the last hour.
UPDATE awa.cron_schedules SET next_run_at = date_trunc('hour', now()) - interval '3 days',
       created_at = now() - interval '4 days' WHERE name = 'hourly';
SELECT clock_timestamp() AS t0 \gset
SELECT (awa.run_maintenance())->>'schedules' AS enqueued_by_run_maintenance;
SELECT clock_timestamp() AS t1 \gset
SELECT (awa.run_maintenance())->>'schedules' AS enqueued_again;
SELECT count(*) AS hourly_jobs,
       bool_and(j.run_at = date_trunc('hour', j.run_at)) AS on_the_hour,
       bool_and(j.run_at > :'t0'::timestamptz - interval '1 hour' AND j.run_at <= :'t1'::timestamptz) AS latest_tick,
       bool_and(j.kind = 'tick' AND j.priority = 1 AND j.max_attempts = 3 AND j.tags = ARRAY['cron']
                AND j.metadata = '{"team": "ops", "awa_schedule": "hourly"}') AS template
  FROM awa.jobs j WHERE j.queue = 'sched_q' AND j.metadata->>'awa_schedule' = 'hourly';

-- Paused: due ticks are not enqueued; resuming starts from the first tick after now (the
-- ticks that fell while paused are not enqueued).
UPDATE awa.cron_schedules SET next_run_at = now() - interval '1 day' WHERE name = 'fast';
SELECT awa.run_schedules() AS enqueued_while_paused;
SELECT awa.resume_schedule('fast') AS resumed, awa.resume_schedule('fast') AS resumed_again;
SELECT paused, next_run_at > :'t1'::timestamptz AS next_after_resume,
       extract(epoch FROM next_run_at)::numeric % 5 = 0 AS on_a_5_second_tick
  FROM awa.schedules WHERE name = 'fast';
SELECT awa.pause_schedule('fast') AS paused, awa.pause_schedule('fast') AS paused_again;
SELECT count(*) AS fast_jobs FROM awa.jobs WHERE queue = 'sched_q' AND metadata->>'awa_schedule' = 'fast';

-- 'N seconds' after downtime: one job, on a multiple of N seconds since the epoch.
SELECT awa.resume_schedule('fast') AS resumed;
UPDATE awa.cron_schedules SET next_run_at = now() - interval '1 day', created_at = now() - interval '2 days'
 WHERE name = 'fast';
SELECT clock_timestamp() AS t0 \gset
SELECT awa.run_schedules() AS enqueued;
SELECT count(*) AS fast_jobs,
       bool_and(extract(epoch FROM j.run_at)::numeric % 5 = 0) AS on_a_5_second_tick,
       bool_and(j.run_at > :'t0'::timestamptz - interval '5 seconds') AS latest_tick
  FROM awa.jobs j WHERE j.queue = 'sched_q' AND j.metadata->>'awa_schedule' = 'fast';

-- A pass that ran late, not downtime: the schedule's previous job was enqueued less than 10
-- seconds before the pass (here: a stored time ahead of the clock, so that no pause of this
-- test can make it older). Every due tick gets its job, in order, 5 seconds apart from the
-- stored next tick up to the latest; the next tick is the one after it.
SELECT coalesce(max(id), 0) AS before_id FROM awa.jobs \gset
UPDATE awa.cron_schedules SET next_run_at = next_run_at - interval '15 seconds',
       last_enqueued_at = now() + interval '1 hour' WHERE name = 'fast';
SELECT next_run_at AS first_tick FROM awa.cron_schedules WHERE name = 'fast' \gset
SELECT clock_timestamp() AS t0 \gset
SELECT awa.run_schedules() >= 3 AS enqueued_every_due_tick;
SELECT count(*) >= 3 AS jobs, min(j.run_at) = :'first_tick'::timestamptz AS from_stored_tick,
       max(j.run_at) > :'t0'::timestamptz - interval '5 seconds' AS up_to_latest,
       count(DISTINCT j.run_at) = count(*) AS each_once,
       max(j.run_at) - min(j.run_at) = (count(*) - 1) * interval '5 seconds' AS every_5_seconds,
       (SELECT s.last_run_at = max(j.run_at) AND s.next_run_at = max(j.run_at) + interval '5 seconds'
          FROM awa.schedules s WHERE s.name = 'fast') AS schedule_moved
  FROM awa.jobs j WHERE j.id > :before_id AND j.metadata->>'awa_schedule' = 'fast';
-- The same due ticks when the previous job is 11 seconds old: downtime, the latest only.
SELECT coalesce(max(id), 0) AS before_id FROM awa.jobs \gset
UPDATE awa.cron_schedules SET next_run_at = next_run_at - interval '15 seconds',
       last_enqueued_at = now() - interval '11 seconds' WHERE name = 'fast';
SELECT clock_timestamp() AS t0 \gset
SELECT awa.run_schedules() AS enqueued_after_downtime;
SELECT count(*) AS jobs, bool_and(j.run_at > :'t0'::timestamptz - interval '5 seconds') AS latest_tick
  FROM awa.jobs j WHERE j.id > :before_id AND j.metadata->>'awa_schedule' = 'fast';

-- The step refuses to decide on an old snapshot.
BEGIN ISOLATION LEVEL REPEATABLE READ;
SELECT pg_temp.sqlstate_of('SELECT awa.run_schedules()');
ROLLBACK;

-- 'fast' is paused from here: its next 5-second tick may come at any moment, and a pass that
-- ran it too would count it with the ones below.
SELECT awa.pause_schedule('fast') AS fast_paused;

-- A schedule whose job cannot be enqueued (its stored kind made too long by hand here) does
-- not hold back the others of the pass: it is reported (WARNING), enqueues nothing and stays
-- due; the other one is run. A schedule made moments ago whose first tick is late gets every
-- tick since it was made (here the hour's only one), as one whose last job is recent would.
SELECT awa.schedule('broken', '@hourly', 'k', 'sched_q') IS NOT NULL AS broken_made,
       awa.schedule('fine', '@hourly', 'k', 'sched_q') IS NOT NULL AS fine_made;
UPDATE awa.cron_schedules SET kind = repeat('k', 300), next_run_at = date_trunc('hour', now()) WHERE name = 'broken';
UPDATE awa.cron_schedules SET next_run_at = date_trunc('hour', now()) WHERE name = 'fine';
SELECT awa.run_schedules() AS enqueued;
SELECT name, next_run_at = date_trunc('hour', now()) AS still_due, last_job_id IS NOT NULL AS ran
  FROM awa.cron_schedules WHERE name IN ('broken', 'fine') ORDER BY name;
SELECT count(*) FILTER (WHERE metadata->>'awa_schedule' = 'broken') AS broken_jobs,
       count(*) FILTER (WHERE metadata->>'awa_schedule' = 'fine') AS fine_jobs
  FROM awa.jobs WHERE queue = 'sched_q';
SELECT awa.unschedule('broken') AS broken_removed, awa.unschedule('fine') AS fine_removed;
-- A one-second schedule made 3 seconds ago whose first pass comes only now: every tick since
-- (each once), not only the latest as after downtime.
SELECT awa.schedule('newborn', '1 seconds', 'k', 'sched_q') IS NOT NULL AS newborn_made;
UPDATE awa.cron_schedules SET created_at = created_at - interval '3 seconds',
       next_run_at = date_trunc('second', created_at) - interval '2 seconds' WHERE name = 'newborn';
SELECT awa.run_schedules() >= 3 AS every_tick_since_made;
SELECT count(*) >= 3 AS jobs, count(*) = count(DISTINCT run_at) AS each_once
  FROM awa.jobs WHERE queue = 'sched_q' AND metadata->>'awa_schedule' = 'newborn';
SELECT awa.unschedule('newborn') AS newborn_removed;
-- Resumed 4 seconds ago, after a pause longer than 10 seconds (its last job is old), and run
-- only now: every tick since the resume, not only the latest as after downtime; the ticks of
-- the pause are not enqueued. The same for new ticks given by a change of cron.
SELECT awa.schedule('resumed', '1 seconds', 'k', 'sched_q') IS NOT NULL AS resumed_made,
       awa.pause_schedule('resumed') AS resumed_paused;
UPDATE awa.cron_schedules SET created_at = now() - interval '1 hour', last_enqueued_at = now() - interval '30 minutes'
 WHERE name = 'resumed';
SELECT awa.resume_schedule('resumed') AS resumed_again;
UPDATE awa.cron_schedules SET ticks_reset_at = ticks_reset_at - interval '4 seconds',
       next_run_at = awa._cron_next(cron, timezone, ticks_reset_at - interval '4 seconds') WHERE name = 'resumed';
SELECT ticks_reset_at AS resumed_at FROM awa.cron_schedules WHERE name = 'resumed' \gset
SELECT awa.run_schedules() >= 4 AS every_tick_since_resumed;
SELECT count(*) >= 4 AS jobs, count(*) = count(DISTINCT run_at) AS each_once,
       min(run_at) > :'resumed_at'::timestamptz AS none_of_the_pause
  FROM awa.jobs WHERE queue = 'sched_q' AND metadata->>'awa_schedule' = 'resumed';
SELECT awa.schedule('resumed', '2 seconds', 'k', 'sched_q') IS NOT NULL AS retimed;
SELECT ticks_reset_at > :'resumed_at'::timestamptz AS new_ticks_reset,
       next_run_at > ticks_reset_at AS next_after_reset
  FROM awa.cron_schedules WHERE name = 'resumed';
SELECT ticks_reset_at AS retimed_at FROM awa.cron_schedules WHERE name = 'resumed' \gset
SELECT awa.schedule('resumed', '2 seconds', 'k2', 'sched_q') IS NOT NULL AS same_ticks_kept;
SELECT ticks_reset_at = :'retimed_at'::timestamptz AS reset_kept FROM awa.cron_schedules WHERE name = 'resumed';
SELECT awa.unschedule('resumed') AS resumed_removed;

-- drop_queue takes the queue's schedules with it: their next tick would create it again.
SELECT awa.schedule('to_drop', '1 seconds', 'k', 'sched_drop') IS NOT NULL AS to_drop_made,
       awa.schedule('kept', '@yearly', 'k', 'sched_q') IS NOT NULL AS kept_made;
UPDATE awa.cron_schedules SET next_run_at = now() - interval '1 second' WHERE name = 'to_drop';
SELECT awa.run_schedules() >= 1 AS enqueued_before_drop;
SELECT awa.drop_queue('sched_drop', true) >= 1 AS dropped_its_jobs;
SELECT name, queue FROM awa.schedules WHERE name IN ('to_drop', 'kept') ORDER BY 1;
SELECT pg_sleep(1.1);
SELECT awa.run_schedules() >= 0 AS ran_after_drop;
SELECT (SELECT count(*) FROM awa.queues WHERE queue = 'sched_drop') AS sched_drop_queues,
       (SELECT count(*) FROM awa.jobs WHERE queue = 'sched_drop') AS sched_drop_jobs;
SELECT awa.unschedule('kept') AS kept_removed;

-- Unschedule: the schedule goes, its jobs stay; unknown names answer false.
SELECT awa.unschedule('hourly') AS removed, awa.unschedule('hourly') AS removed_again;
SELECT awa.pause_schedule('nope') AS pause_unknown, awa.resume_schedule('nope') AS resume_unknown;
SELECT pg_temp.sqlstate_of($$SELECT awa.unschedule(NULL)$$);
SELECT name FROM awa.schedules ORDER BY 1;
SELECT count(*) AS hourly_jobs_kept FROM awa.jobs WHERE queue = 'sched_q' AND metadata->>'awa_schedule' = 'hourly';

\c :home
DROP DATABASE awa_schedules;
