#!/usr/bin/env python3
"""Enqueue one job and wait in the server for its outcome (Python, psycopg2).

awa.wait_for_job(job_id, timeout_ms) returns the job once it is completed, failed,
dead-lettered or cancelled, or its current row at the timeout; `result` is what the worker
passed to awa.complete_jobs(..., p_results). A worker reports progress with
awa.set_progress(job_id, run_lease, progress), visible as `progress` meanwhile.

Connection: DATABASE_URL or the usual PG* variables. The role needs awa_producer.
Usage: QUEUE=emails TIMEOUT_MS=30000 /usr/bin/python3 examples/python/await_result.py
"""
import os

import psycopg2
from psycopg2.extras import Json

QUEUE = os.environ.get("QUEUE", "default")
TIMEOUT_MS = int(os.environ.get("TIMEOUT_MS", "30000"))


def main():
    conn = psycopg2.connect(os.environ.get("DATABASE_URL", ""))
    conn.autocommit = True  # the enqueue must commit before a worker can see the job
    cur = conn.cursor()
    cur.execute("SELECT id FROM awa.insert_job_compat(%s, %s, %s)", ("send_email", QUEUE, Json({"to": "a@b.c"})))
    job_id = cur.fetchone()[0]
    # One statement, its own transaction: the server sleeps until the finishing commit.
    cur.execute("SELECT state, result, errors, progress FROM awa.wait_for_job(%s, %s)", (job_id, TIMEOUT_MS))
    state, result, errors, progress = cur.fetchone()
    if state == "completed":
        print(f"job {job_id} completed: result {result}")
    elif state in ("failed", "cancelled"):
        print(f"job {job_id} {state}: errors {errors}")
    else:
        print(f"job {job_id} still {state} after {TIMEOUT_MS} ms (progress {progress})")
    conn.close()


if __name__ == "__main__":
    main()
