#!/usr/bin/python3
"""Works jobs of kind "crosslang" for the cross-language test.

usage: crosslang_worker.py DATABASE_URL QUEUE WORKER_NAME SECONDS

Each job is completed in the same transaction that inserts (job id, attempt,
'python') into crosslang_effects, so a job whose completion is fenced leaves no
effect row: the table then holds exactly one row per job done, whoever did it.
It runs for SECONDS (or until SIGTERM/SIGINT), then shuts down gracefully and
prints its counters on one line. Run it with clients/python on PYTHONPATH.
"""

import logging
import sys
import threading

import psycopg

import skiplock

CREATE = """CREATE TABLE IF NOT EXISTS crosslang_effects (
    job_id   bigint  NOT NULL,
    attempt  integer NOT NULL,
    language text    NOT NULL,
    PRIMARY KEY (job_id, attempt)
)"""


class _Fenced(Exception):
    """Rolls back the effect of a job that is no longer ours."""


def main() -> int:
    if len(sys.argv) != 5:
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        return 2
    url, queue, name, seconds = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4])
    logging.basicConfig(level=logging.WARNING, format=f"{name}: %(message)s")
    with psycopg.connect(url) as conn, conn.transaction():
        # Workers started together would race in CREATE TABLE IF NOT EXISTS (a unique violation
        # or "type already exists"): the lock lets one create it and the others see it.
        conn.execute("SELECT pg_advisory_xact_lock(hashtext('crosslang_effects'))")
        conn.execute(CREATE)

    client = skiplock.Client(url)
    local = threading.local()
    worker = None

    def handle(job: skiplock.Job) -> None:
        conn = getattr(local, "conn", None)
        if conn is None or conn.closed:
            conn = local.conn = psycopg.connect(url)
        try:
            with conn.transaction():
                conn.execute("INSERT INTO crosslang_effects (job_id, attempt, language) VALUES (%s, %s, 'python')",
                             (job.id, job.attempt))
                if not worker.complete_tx(job, conn):
                    raise _Fenced
        except _Fenced:
            pass

    worker = skiplock.Worker(client, {"crosslang": handle}, {queue: 4}, name=name,
                             poll_interval=0.2, shutdown_timeout=10)
    timer = threading.Timer(seconds, worker.stop)
    timer.daemon = True
    timer.start()
    worker.run()  # returns after SECONDS, or sooner on SIGTERM/SIGINT
    timer.cancel()
    client.close()
    s = worker.stats
    print(f"{name}: claimed={s.claimed} completed={s.completed} failed={s.failed} fenced={s.fenced} lost={s.lost}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
