"""Helpers shared by the test files."""

import time


def wait_for(cond, timeout=10.0, what="condition"):
    """Polls cond every 10 ms until it is true; fails the test after timeout seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return
        time.sleep(0.01)
    raise AssertionError(f"timed out waiting for {what}")


def states(conn, queue):
    """{state: count} of the queue's jobs."""
    rows = conn.execute("SELECT state::text, count(*) FROM jobs WHERE queue = %s GROUP BY state", (queue,)).fetchall()
    return dict(rows)
