#!/usr/bin/env node
// A job worker in Node.js with node-postgres (npm install, then node worker.js).
//
// Loop: claim a batch (awa.claim_ready_runtime) -> report its progress in one call
// (awa.set_jobs_progress) -> run each job in lane order -> complete the successes in one
// call (awa.complete_jobs), fail the others (awa.fail_job). A timer
// heartbeats the held jobs (awa.heartbeat_jobs) on a second connection while they run, so
// long jobs are not rescued as dead. When nothing was claimed, the worker sleeps in the
// server until a producer commits (awa.wait_for_jobs) instead of polling.
//
// Connection: DATABASE_URL or the usual PG* variables. The role needs awa_worker.
// Usage: QUEUE=emails node worker.js        (Ctrl-C stops after the current batch)
'use strict';
const { Client } = require('pg');

const QUEUE = process.env.QUEUE || 'default';
const BATCH = Number(process.env.BATCH || 10); // jobs per claim (1..10000)
const DEADLINE_SECS = Number(process.env.DEADLINE_SECS || 300); // hard deadline (0 = none)
const HEARTBEAT_MS = Number(process.env.HEARTBEAT_SECS || 10) * 1000;
const EXIT_WHEN_IDLE = process.env.EXIT_WHEN_IDLE === '1'; // exit when a 1 s wait brings nothing

// The work itself. Replace with yours: throwing fails the job (the message is recorded).
async function handleJob(kind, args) {
  if (args.fail) throw new Error('asked to fail');
  if (args.sleep) await new Promise((resolve) => setTimeout(resolve, args.sleep * 1000));
  console.log(`${kind}: ${JSON.stringify(args)}`);
}

async function main() {
  const connectionString = process.env.DATABASE_URL; // undefined: PG* variables
  const db = new Client({ connectionString });
  const hb = new Client({ connectionString });
  await db.connect();
  await hb.connect();

  let stopping = false;
  process.on('SIGINT', () => { stopping = true; });
  process.on('SIGTERM', () => { stopping = true; });

  // job_id (as text: bigint) -> run_lease of the jobs this worker holds.
  let held = new Map();
  let beating = false;
  const timer = setInterval(async () => {
    if (held.size === 0 || beating) return;
    beating = true;
    try {
      await hb.query('SELECT awa.heartbeat_jobs($1::bigint[], $2::bigint[])', [[...held.keys()], [...held.values()]]);
    } catch (err) {
      console.error(`heartbeat failed: ${err.message}`);
    } finally {
      beating = false;
    }
  }, HEARTBEAT_MS);

  while (!stopping) {
    // One lane's ready jobs in enqueue (lane) order; each row is now a running attempt.
    // bigint columns arrive as strings in node-postgres; pass them back unchanged.
    const { rows: jobs } = await db.query(
      'SELECT job_id, run_lease, kind, args, attempt, max_attempts FROM awa.claim_ready_runtime($1, $2, $3, 0)',
      [QUEUE, BATCH, DEADLINE_SECS]);
    if (jobs.length === 0) {
      const { rows } = await db.query('SELECT awa.wait_for_jobs($1, 1000) AS woken', [QUEUE]);
      if (!rows[0].woken && EXIT_WHEN_IDLE) break;
      continue;
    }

    held = new Map(jobs.map((j) => [j.job_id, j.run_lease]));
    // Progress of the whole batch in one call (also a heartbeat), one value per job: its place
    // in the batch, shown by awa.get_job and awa.wait_for_job while the attempt runs. Element k
    // of the answer is false when attempt k is no longer open.
    await db.query('SELECT awa.set_jobs_progress($1::bigint[], $2::bigint[], $3::jsonb[])',
      [jobs.map((j) => j.job_id), jobs.map((j) => j.run_lease),
        jobs.map((j, k) => JSON.stringify({ position: k + 1, of: jobs.length }))]);
    const doneIds = [];
    const doneRunLeases = [];
    for (const job of jobs) {
      try {
        await handleJob(job.kind, job.args);
        doneIds.push(job.job_id);
        doneRunLeases.push(job.run_lease);
      } catch (err) {
        // retryable with backoff while attempts remain, then failed; null = stale attempt
        const { rows } = await db.query('SELECT awa.fail_job($1, $2, $3) AS state',
          [job.job_id, job.run_lease, String(err.message || err)]);
        console.log(`job ${job.job_id} attempt ${job.attempt}/${job.max_attempts} failed: ${err.message} -> ${rows[0].state}`);
        held.delete(job.job_id);
      }
    }
    if (doneIds.length > 0) {
      // Returns the attempts this call completed (a stale or repeated one is skipped).
      const { rowCount } = await db.query('SELECT job_id FROM awa.complete_jobs($1::bigint[], $2::bigint[])',
        [doneIds, doneRunLeases]);
      if (rowCount !== doneIds.length) {
        console.log(`${doneIds.length - rowCount} attempts were no longer open (rescued meanwhile?)`);
      }
    }
    held = new Map();
  }

  clearInterval(timer);
  await hb.end();
  await db.end();
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
