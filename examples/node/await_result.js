#!/usr/bin/env node
// Enqueue one job and wait in the server for its outcome (Node.js, node-postgres).
//
// awa.wait_for_job(job_id, timeout_ms) returns the job once it is completed, failed,
// dead-lettered or cancelled, or its current row at the timeout; `result` is what the worker
// passed to awa.complete_jobs(..., p_results). A worker reports progress with
// awa.set_progress(job_id, run_lease, progress), visible as `progress` meanwhile.
//
// Connection: DATABASE_URL or the usual PG* variables. The role needs awa_producer.
// Usage: QUEUE=emails TIMEOUT_MS=30000 node await_result.js
'use strict';
const { Client } = require('pg');

const QUEUE = process.env.QUEUE || 'default';
const TIMEOUT_MS = Number(process.env.TIMEOUT_MS || 30000);

async function main() {
  const db = new Client({ connectionString: process.env.DATABASE_URL });
  await db.connect();
  // Each query outside BEGIN commits on its own: the worker sees the job at once.
  const { rows: [job] } = await db.query(
    'SELECT id FROM awa.insert_job_compat($1, $2, $3)', ['send_email', QUEUE, { to: 'a@b.c' }]);
  const { rows: [row] } = await db.query(
    'SELECT state, result, errors, progress FROM awa.wait_for_job($1, $2)', [job.id, TIMEOUT_MS]);
  if (row.state === 'completed') console.log(`job ${job.id} completed: result ${JSON.stringify(row.result)}`);
  else if (row.state === 'failed' || row.state === 'cancelled') console.log(`job ${job.id} ${row.state}: errors ${JSON.stringify(row.errors)}`);
  else console.log(`job ${job.id} still ${row.state} after ${TIMEOUT_MS} ms (progress ${JSON.stringify(row.progress)})`);
  await db.end();
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
