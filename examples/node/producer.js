#!/usr/bin/env node
// A job producer in Node.js with node-postgres.
//
// Enqueues jobs into QUEUE three ways:
//  - awa.insert_job_compat without a key: the rotor spreads jobs over the queue's shards;
//  - awa.insert_job_compat with an ordering key: every job of a key lands on that key's shard,
//    so the key's jobs are dispatched in enqueue order (docs/design.md, ordering contract);
//  - awa.insert_jobs: a batch in one call (one lane reservation per lane, ids in input order).
// Keys are bytea: pass a Buffer; Buffer.from(str, 'utf8') hashes like
// awa.shard_for_ordering_key(text, S) on the server.
//
// Connection: DATABASE_URL or the usual PG* variables. The role needs awa_producer.
// Usage: QUEUE=emails COUNT=100 node producer.js
'use strict';
const { Client } = require('pg');

const QUEUE = process.env.QUEUE || 'default';
const COUNT = Number(process.env.COUNT || 10);

async function main() {
  const db = new Client({ connectionString: process.env.DATABASE_URL });
  await db.connect();

  // 1. Keyless, one job per transaction (each query outside BEGIN commits on its own).
  for (let i = 0; i < COUNT; i++) {
    const { rows } = await db.query(
      'SELECT id, enqueue_shard, lane_seq FROM awa.insert_job_compat($1, $2, $3)',
      ['send_email', QUEUE, { n: i }]);
    console.log(`keyless job ${rows[0].id} -> shard ${rows[0].enqueue_shard}, lane_seq ${rows[0].lane_seq}`);
  }

  // 2. Keyed: all jobs of one customer share a shard and keep their enqueue order.
  for (let i = 0; i < COUNT; i++) {
    const customer = `customer-${i % 3}`;
    const { rows } = await db.query(
      'SELECT id, enqueue_shard FROM awa.insert_job_compat($1, $2, $3, p_ordering_key => $4)',
      ['send_email', QUEUE, { customer, step: i }, Buffer.from(customer, 'utf8')]);
    console.log(`keyed job ${rows[0].id} (${customer}) -> shard ${rows[0].enqueue_shard}`);
  }

  // 3. A batch in one call (and one transaction). Optional arrays are NULL or as long as the
  //    kinds; a null key element means "no key"; priority 1 is claimed before priority 2.
  const kinds = Array.from({ length: COUNT }, () => 'send_email');
  const args = Array.from({ length: COUNT }, (_, i) => JSON.stringify({ batch_item: i }));
  const priorities = Array.from({ length: COUNT }, (_, i) => (i === 0 ? 1 : 2));
  const keys = Array.from({ length: COUNT }, (_, i) => (i % 2 === 0 ? Buffer.from(`customer-${i % 3}`, 'utf8') : null));
  const { rows } = await db.query(
    `SELECT awa.insert_jobs($1, $2::text[], p_args => $3::jsonb[], p_priorities => $4::int[],
                            p_ordering_keys => $5::bytea[]) AS ids`,
    [QUEUE, kinds, args, priorities, keys]);
  const ids = rows[0].ids;
  console.log(`batch of ${ids.length} jobs: ids ${ids[0]} .. ${ids[ids.length - 1]}`);
  await db.end();
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
