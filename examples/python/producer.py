#!/usr/bin/env python3
"""A job producer in Python with psycopg2.

Interpreter: Debian's /usr/bin/python3 after `apt-get install python3-psycopg2`, or any other
Python 3 that has psycopg2 installed (`<that python> -m pip install psycopg2-binary`).

Enqueues jobs into QUEUE three ways:
  - awa.insert_job_compat without a key: the rotor spreads jobs over the queue's shards;
  - awa.insert_job_compat with an ordering key: every job of a key lands on that key's shard,
    so the key's jobs are dispatched in enqueue order (docs/design.md, ordering contract);
  - awa.insert_jobs: a batch in one call (one lane reservation per lane, ids in input order).

Keys are bytes: a str key is hashed as its UTF-8 encoding (key.encode()), exactly as
awa.shard_for_ordering_key(text, S) does on the server.

Connection: DATABASE_URL or the usual PG* variables. The role needs awa_producer.
Usage: QUEUE=emails COUNT=100 /usr/bin/python3 examples/python/producer.py
"""
import os

import psycopg2
from psycopg2.extras import Json

QUEUE = os.environ.get("QUEUE", "default")
COUNT = int(os.environ.get("COUNT", "10"))


def main():
    conn = psycopg2.connect(os.environ.get("DATABASE_URL", ""))
    cur = conn.cursor()

    # 1. Keyless, one job per transaction ("with conn" commits at the end of the block).
    for i in range(COUNT):
        with conn:
            cur.execute(
                "SELECT id, enqueue_shard, lane_seq FROM awa.insert_job_compat(%s, %s, %s)",
                ("send_email", QUEUE, Json({"n": i})))
            print("keyless job %s -> shard %s, lane_seq %s" % cur.fetchone())

    # 2. Keyed: all jobs of one customer share a shard and keep their enqueue order.
    for i in range(COUNT):
        customer = f"customer-{i % 3}"
        with conn:
            cur.execute(
                "SELECT id, enqueue_shard FROM awa.insert_job_compat("
                "  %s, %s, %s, p_ordering_key => %s)",
                ("send_email", QUEUE, Json({"customer": customer, "step": i}), customer.encode()))
            job_id, shard = cur.fetchone()
            print(f"keyed job {job_id} ({customer}) -> shard {shard}")

    # 3. A batch in one call. Optional arrays are NULL or as long as the kinds; a NULL key
    #    element means "no key"; priority 1 is claimed before 2; {"sleep": s} makes a slow job.
    kinds = ["send_email"] * COUNT
    args = [Json({"batch_item": i, "sleep": 0.2 if i == 0 else 0}) for i in range(COUNT)]
    priorities = [1 if i == 0 else 2 for i in range(COUNT)]
    keys = [f"customer-{i % 3}".encode() if i % 2 == 0 else None for i in range(COUNT)]
    with conn:
        cur.execute(
            "SELECT awa.insert_jobs(%s, %s::text[], p_args => %s::jsonb[],"
            "  p_priorities => %s::int[], p_ordering_keys => %s::bytea[])",
            (QUEUE, kinds, args, priorities, keys))
        ids = cur.fetchone()[0]
        print(f"batch of {len(ids)} jobs: ids {ids[0]} .. {ids[-1]}")
    conn.close()


if __name__ == "__main__":
    main()
