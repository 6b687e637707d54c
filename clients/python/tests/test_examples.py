"""The cross-language test's Python programs, run as the exec engineer's test runs them."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psycopg

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
ENV = dict(os.environ, PYTHONPATH=str(EXAMPLES.parent))


def test_crosslang_examples_do_each_job_once(db_url, conn, queue):
    out = subprocess.run([sys.executable, EXAMPLES / "crosslang_enqueue.py", db_url, queue, "50"],
                         env=ENV, capture_output=True, text=True, timeout=60, check=True)
    assert out.stdout.strip() == "50"
    # The workers run until the jobs are done (then SIGTERM, which drains them), not for a
    # fixed time: on a loaded machine starting Python alone can take seconds.
    workers = [subprocess.Popen([sys.executable, EXAMPLES / "crosslang_worker.py", db_url, queue, f"py-{i}", "120"],
                                env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
               for i in range(2)]
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline and conn.execute(
            "SELECT count(*) FROM jobs WHERE queue = %s AND state <> 'done'", (queue,)).fetchone()[0] > 0:
        time.sleep(0.1)
    for w in workers:
        w.send_signal(signal.SIGTERM)
    outputs = [w.communicate(timeout=60) for w in workers]
    assert [w.returncode for w in workers] == [0, 0], outputs
    states = dict(conn.execute("SELECT state::text, count(*) FROM jobs WHERE queue = %s GROUP BY 1", (queue,)).fetchall())
    assert states == {"done": 50}, outputs
    effects = conn.execute(
        "SELECT count(*), count(DISTINCT e.job_id) FROM crosslang_effects e JOIN jobs j ON j.id = e.job_id"
        " WHERE j.queue = %s AND e.language = 'python'", (queue,)).fetchone()
    assert effects == (50, 50)
    assert sum(int(o.split("completed=")[1].split()[0]) for o, _ in outputs) == 50, outputs


def test_crosslang_worker_drains_on_sigterm(db_url, queue):
    with psycopg.connect(db_url, autocommit=True) as watch:
        def listeners() -> int:
            return watch.execute("SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
                                 " AND query ILIKE 'LISTEN%%jobs_ready%%'").fetchone()[0]
        before = listeners()
        w = subprocess.Popen([sys.executable, EXAMPLES / "crosslang_worker.py", db_url, queue, "py-term", "60"],
                             env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        # Its LISTEN comes after run() installed the signal handlers (a fixed sleep was too
        # short for Python's start on a loaded machine: the signal killed it first).
        deadline = time.monotonic() + 30
        while listeners() <= before and time.monotonic() < deadline and w.poll() is None:
            time.sleep(0.05)
    t0 = time.monotonic()
    w.send_signal(signal.SIGTERM)
    out, err = w.communicate(timeout=30)
    assert w.returncode == 0, err
    assert time.monotonic() - t0 < 5
    assert out.startswith("py-term: claimed=0 completed=0")
