#!/usr/bin/env python3
"""A job worker in Python with psycopg2.

Interpreter: Debian's /usr/bin/python3 after `apt-get install python3-psycopg2`, or any other
Python 3 that has psycopg2 installed (`<that python> -m pip install psycopg2-binary`).

Loop: claim a batch (awa.claim_ready_runtime) -> report its progress in one call
(awa.set_jobs_progress) -> run each job in lane order -> complete the successes in one call
(awa.complete_jobs), fail the others (awa.fail_job). A heartbeat
thread keeps the claimed jobs alive (awa.heartbeat_jobs) while they run, so long jobs are
not rescued as dead. When nothing was claimed, the worker sleeps in the server until a
producer commits (awa.wait_for_jobs) instead of polling.

Connection: DATABASE_URL (a libpq URI or "key=value" string) or the usual PG* variables.
The role needs awa_worker:  GRANT awa_worker TO my_worker_role;

Usage: QUEUE=emails /usr/bin/python3 examples/python/worker.py     (Ctrl-C stops after the batch)
"""
import json
import os
import signal
import threading
import time

import psycopg2

QUEUE = os.environ.get("QUEUE", "default")
BATCH = int(os.environ.get("BATCH", "10"))                  # jobs per claim (1..10000)
DEADLINE_SECS = float(os.environ.get("DEADLINE_SECS", "300"))  # hard deadline (0 = none)
HEARTBEAT_SECS = float(os.environ.get("HEARTBEAT_SECS", "10"))
EXIT_WHEN_IDLE = os.environ.get("EXIT_WHEN_IDLE") == "1"   # exit when a 1 s wait brings nothing


def handle_job(kind, args):
    """The work itself. Replace with yours: raising fails the job (the message is recorded)."""
    if args.get("fail"):
        raise RuntimeError("asked to fail")
    time.sleep(float(args.get("sleep", 0)))
    print(f"{kind}: {json.dumps(args)}", flush=True)


class Heartbeat(threading.Thread):
    """Heartbeats the jobs currently held by the worker, on its own connection."""

    def __init__(self, dsn):
        super().__init__(daemon=True)
        self.conn = psycopg2.connect(dsn)
        self.conn.autocommit = True
        self.lock = threading.Lock()
        self.held = {}  # job_id -> run_lease
        self.stop = threading.Event()

    def hold(self, jobs):
        with self.lock:
            self.held = dict(jobs)

    def release(self, job_id):
        with self.lock:
            self.held.pop(job_id, None)

    def run(self):
        while not self.stop.wait(HEARTBEAT_SECS):
            with self.lock:
                ids, run_leases = list(self.held), list(self.held.values())
            if ids:
                with self.conn.cursor() as cur:
                    cur.execute("SELECT awa.heartbeat_jobs(%s::bigint[], %s::bigint[])", (ids, run_leases))


def main():
    dsn = os.environ.get("DATABASE_URL", "")
    conn = psycopg2.connect(dsn)
    conn.autocommit = True  # every call below is its own transaction
    heartbeat = Heartbeat(dsn)
    heartbeat.start()

    stopping = False

    def request_stop(signum, frame):
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGINT, request_stop)
    signal.signal(signal.SIGTERM, request_stop)

    cur = conn.cursor()
    while not stopping:
        # One lane's ready jobs, in enqueue (lane) order; each row is now a running attempt.
        cur.execute(
            "SELECT job_id, run_lease, kind, args, attempt, max_attempts"
            "  FROM awa.claim_ready_runtime(%s, %s, %s, 0)",
            (QUEUE, BATCH, DEADLINE_SECS))
        jobs = cur.fetchall()
        if not jobs:
            cur.execute("SELECT awa.wait_for_jobs(%s, 1000)", (QUEUE,))
            if not cur.fetchone()[0] and EXIT_WHEN_IDLE:
                break
            continue

        heartbeat.hold((job_id, run_lease) for job_id, run_lease, *_ in jobs)
        # Progress of the whole batch in one call (also a heartbeat), one value per job: its
        # place in the batch, shown by awa.get_job and awa.wait_for_job while the attempt runs.
        # Element k of the answer is False when attempt k is no longer open.
        cur.execute("SELECT awa.set_jobs_progress(%s::bigint[], %s::bigint[], %s::jsonb[])",
                    ([job[0] for job in jobs], [job[1] for job in jobs],
                     [json.dumps({"position": k + 1, "of": len(jobs)}) for k in range(len(jobs))]))
        done_ids, done_run_leases = [], []
        for job_id, run_lease, kind, args, attempt, max_attempts in jobs:
            try:
                handle_job(kind, args)
                done_ids.append(job_id)
                done_run_leases.append(run_lease)
            except Exception as exc:  # the job failed, not the worker
                # retryable with backoff while attempts remain, then failed; None = stale attempt
                cur.execute("SELECT awa.fail_job(%s, %s, %s)", (job_id, run_lease, str(exc)))
                print(f"job {job_id} attempt {attempt}/{max_attempts} failed: {exc} -> {cur.fetchone()[0]}",
                      flush=True)
                heartbeat.release(job_id)
        if done_ids:
            # Returns the attempts this call completed (a stale or repeated one is skipped).
            cur.execute("SELECT job_id FROM awa.complete_jobs(%s::bigint[], %s::bigint[])",
                        (done_ids, done_run_leases))
            completed = len(cur.fetchall())
            if completed != len(done_ids):
                print(f"{len(done_ids) - completed} attempts were no longer open (rescued meanwhile?)",
                      flush=True)
        heartbeat.hold([])

    heartbeat.stop.set()
    conn.close()


if __name__ == "__main__":
    main()
