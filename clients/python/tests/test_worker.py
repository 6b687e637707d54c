"""Worker: results, failures with tracebacks, timeouts, fencing, slots, signals."""

import os
import signal
import threading
import time
from datetime import datetime, timedelta, timezone

import psycopg
import pytest

import skiplock
from helpers import states, wait_for


def worker(client, handlers, queue, slots=2, **kw):
    kw.setdefault("poll_interval", 0.05)
    kw.setdefault("maintain_interval", None)
    return skiplock.Worker(client, handlers, {queue: slots}, **kw)


def job_row(conn, job_id):
    return conn.execute("SELECT state::text, attempts, max_attempts, last_error, run_at FROM jobs WHERE id = %s",
                        (job_id,)).fetchone()


def test_results_snooze_cancel_retry_at(client, conn, queue):
    later = datetime.now(timezone.utc) + timedelta(hours=2)
    outcomes = {
        "snooze-return": lambda job: skiplock.Snooze(timedelta(hours=1)),
        "snooze-raise": lambda job: (_ for _ in ()).throw(skiplock.Snooze(3600)),
        "cancel": lambda job: skiplock.Cancel("not wanted"),
        "retry-at": lambda job: skiplock.RetryAt(later, "upstream busy"),
    }
    ids = {kind: client.enqueue(kind, queue=queue) for kind in outcomes}
    w = worker(client, outcomes, queue, slots=4).start()
    try:
        wait_for(lambda: states(conn, queue).get("running", 0) == 0 and w.stats.snoozed + w.stats.cancelled
                 + w.stats.failed == 4, 10, "four outcomes")
    finally:
        w.stop(wait=True)
    for kind in ("snooze-return", "snooze-raise"):
        state, attempts, max_attempts, last_error, run_at = job_row(conn, ids[kind])
        assert (state, max_attempts, last_error) == ("queued", 6, None)
        assert run_at > datetime.now(timezone.utc) + timedelta(minutes=59)
    assert job_row(conn, ids["cancel"])[0::3] == ("cancelled", "not wanted")
    assert job_row(conn, ids["retry-at"])[3:] == ("upstream busy", later)
    assert (w.stats.snoozed, w.stats.cancelled, w.stats.failed) == (2, 1, 1)


def test_exception_recorded_with_traceback(client, conn, queue):
    def explode(job):
        raise RuntimeError(f"kaboom {job.payload['n']}")

    job_id = client.enqueue("explode", {"n": 7}, queue=queue, max_attempts=1)
    unknown = client.enqueue("nobody-handles-this", queue=queue, max_attempts=1)
    w = worker(client, {"explode": explode}, queue).start()
    try:
        wait_for(lambda: states(conn, queue) == {"dead": 2}, 10, "both jobs dead")
    finally:
        w.stop(wait=True)
    err = job_row(conn, job_id)[3]
    assert err.startswith("Traceback (most recent call last):")
    assert "in explode" in err and "RuntimeError: kaboom 7" in err
    assert "no handler for kind 'nobody-handles-this'" in job_row(conn, unknown)[3]


def test_timeout_fails_job_and_tells_handler(client, conn, queue):
    told = threading.Event()

    def hang(job):
        told.set() if job.cancelled.wait(10) else None

    job_id = client.enqueue("hang", queue=queue, max_attempts=1)
    w = worker(client, {"hang": hang}, queue, timeout=0.2).start()
    try:
        wait_for(lambda: states(conn, queue) == {"dead": 1}, 10, "the job timed out")
        assert told.wait(5)
    finally:
        w.stop(wait=True)
    assert "timed out" in job_row(conn, job_id)[3]
    assert w.stats.timed_out == 1 and w.stats.completed == 0


def test_timeout_recorded_after_connection_loss(client, db_url, conn, queue):
    # The timeout's jobs_fail blocks on a row lock the test holds and its backend is
    # terminated: it is retried on a new connection and recorded once.
    proceed = threading.Event()
    job_id = client.enqueue("hang", queue=queue, max_attempts=1)
    w = worker(client, {"hang": lambda job: proceed.wait(20)}, queue, timeout=2).start()
    blocker = psycopg.connect(db_url)
    try:
        wait_for(lambda: states(conn, queue) == {"running": 1}, 10, "the job running")
        blocker.execute("SELECT 1 FROM jobs WHERE id = %s FOR UPDATE", (job_id,))
        wait_for(lambda: conn.execute(
            """SELECT pg_terminate_backend(pid) FROM pg_stat_activity
               WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE '%%jobs_fail(%%'""").fetchall(),
            10, "a blocked jobs_fail to terminate")
        blocker.commit()
        wait_for(lambda: states(conn, queue) == {"dead": 1}, 20, "the timeout recorded")
    finally:
        proceed.set()
        blocker.close()
        w.stop(wait=True)
    assert conn.execute("SELECT jsonb_array_length(errors) FROM jobs WHERE id = %s", (job_id,)).fetchone() == (1,)
    assert w.stats.timed_out == 1 and w.stats.failed == 1 and w.stats.fenced == 0


def test_only_connection_errors_are_retried():
    # A broken connection, a server restarting or terminating the backend, a serialization
    # failure: retried. A server error of another class (program limit, object state, a
    # statement timeout) or a bad argument: not, else the job's slot stays taken until shutdown.
    from skiplock.worker import _retryable

    for err in (
        psycopg.OperationalError("connection lost"),
        psycopg.errors.lookup("08006")(),
        psycopg.errors.lookup("57P01")(),
        psycopg.errors.lookup("53300")(),
        psycopg.errors.lookup("40001")(),
        psycopg.errors.lookup("40P01")(),
    ):
        assert _retryable(err), repr(err)
    for err in (
        psycopg.errors.lookup("54000")(),
        psycopg.errors.lookup("55000")(),
        psycopg.errors.lookup("57014")(),
        psycopg.errors.lookup("22023")(),
        psycopg.errors.lookup("42501")(),
        ValueError("not a database error"),
    ):
        assert not _retryable(err), repr(err)


def test_fenced_result_counted_not_retried(client, conn, queue, caplog):
    started, release = threading.Event(), threading.Event()

    def slow(job):
        started.set()
        release.wait(10)

    job_id = client.enqueue("slow", queue=queue)
    w = worker(client, {"slow": slow}, queue, heartbeat_interval=60).start()
    try:
        assert started.wait(10)
        assert client.cancel(job_id) is True  # an operator cancels it while it runs
        release.set()
        wait_for(lambda: w.stats.fenced == 1, 10, "the fenced completion counted")
    finally:
        w.stop(wait=True)
    assert job_row(conn, job_id)[0] == "cancelled"
    assert w.stats.completed == 0
    assert any("no longer held" in r.getMessage() for r in caplog.records)


def test_heartbeat_finds_lost_job_and_tells_handler(client, conn, queue):
    started, told = threading.Event(), threading.Event()

    def slow(job):
        started.set()
        if job.cancelled.wait(10):
            told.set()

    job_id = client.enqueue("slow", queue=queue)
    w = worker(client, {"slow": slow}, queue, heartbeat_interval=0.05).start()
    try:
        assert started.wait(10)
        client.cancel(job_id)
        assert told.wait(5)
    finally:
        w.stop(wait=True)
    assert w.stats.lost == 1 and w.stats.fenced == 0  # its late result is not even sent


def test_claims_sized_to_free_slots(client, conn, queue):
    lock = threading.Lock()
    now_running, most = [0], [0]

    def handle(job):
        with lock:
            now_running[0] += 1
            most[0] = max(most[0], now_running[0])
        try:
            time.sleep(0.02)
        finally:
            with lock:
                now_running[0] -= 1

    client.enqueue_many(["k"] * 30, queues=[queue] * 30)
    w = worker(client, {"k": handle}, queue, slots=3).start()
    try:
        wait_for(lambda: states(conn, queue) == {"done": 30}, 20, "all done")
    finally:
        w.stop(wait=True)
    assert 1 < most[0] <= 3
    assert w.stats.claimed == 30 and w.stats.completed == 30 and w.stats.failed == 0


def test_complete_tx_commits_effect_and_completion_together(client, db_url, conn, queue):
    conn.execute("CREATE TABLE IF NOT EXISTS py_effects (job_id bigint PRIMARY KEY)")
    w = None

    def handle(job):
        with psycopg.connect(db_url) as tx:
            tx.execute("INSERT INTO py_effects VALUES (%s)", (job.id,))
            assert w.complete_tx(job, tx)

    ids = client.enqueue_many(["fx"] * 5, queues=[queue] * 5)
    w = worker(client, {"fx": handle}, queue).start()
    try:
        wait_for(lambda: states(conn, queue) == {"done": 5}, 10, "all done")
    finally:
        w.stop(wait=True)
    assert conn.execute("SELECT count(*) FROM py_effects WHERE job_id = ANY(%s)", (ids,)).fetchone() == (5,)
    assert w.stats.completed == 5 and w.stats.fenced == 0


def test_claimed_after_stop_is_given_back(client, conn, queue):
    job_id = client.enqueue("k", queue=queue)
    w = worker(client, {"k": lambda job: None}, queue)
    [job] = client.claim(w.name, queues=[queue])
    w.stop()  # shutdown began between the claim and the start
    w._start(job)
    assert job_row(conn, job_id)[:2] == ("queued", 1)
    assert w.stats.given_back == 1


def test_run_stops_on_sigterm(client, conn, queue):
    done = []
    client.enqueue("k", queue=queue)
    w = worker(client, {"k": lambda job: done.append(job.id)}, queue)
    threading.Timer(1.0, os.kill, (os.getpid(), signal.SIGTERM)).start()
    before = signal.getsignal(signal.SIGTERM)
    w.run()  # returns once SIGTERM has drained it
    assert signal.getsignal(signal.SIGTERM) is before
    assert len(done) == 1 and states(conn, queue) == {"done": 1}


def test_periodic_maintain_requeues_expired(client, conn, queue):
    job_id = client.enqueue("k", queue=queue)
    client.claim("dead-worker", queues=[queue], lease=timedelta(milliseconds=1))
    w = skiplock.Worker(client, {"k": lambda job: None}, {queue: 1}, poll_interval=0.05, maintain_interval=0.1).start()
    try:
        wait_for(lambda: states(conn, queue) == {"done": 1}, 10, "the expired job taken back and done")
    finally:
        w.stop(wait=True)
    assert job_row(conn, job_id)[1] == 2


def test_worker_rejects_bad_config(client):
    with pytest.raises(ValueError):
        skiplock.Worker(client, {}, {"q": 1})
    with pytest.raises(ValueError):
        skiplock.Worker(client, {"k": print}, {"q": 0})
    with pytest.raises(ValueError):
        skiplock.Worker(client, {"k": print}, lease=0)
    with pytest.raises(ValueError):
        skiplock.Worker(client, {"k": print}, timeout=0)
    with pytest.raises(ValueError, match="name must not contain NUL"):
        skiplock.Worker(client, {"k": print}, name="w\x00")
    with pytest.raises(ValueError, match="queues"):
        skiplock.Worker(client, {"k": print}, {"q\udcff": 1})
    # jobs_claim refuses a worker name longer than 200 bytes: every claim would fail.
    with pytest.raises(ValueError, match="name must be at most 200 bytes"):
        skiplock.Worker(client, {"k": print}, name="\u00e9" * 101)


def test_stop_before_run_returns_at_once(client, queue):
    w = worker(client, {"k": lambda job: None}, queue)
    w.stop(wait=True)
    w.run()  # returns at once: it was stopped


def test_shutdown_timeout_releases_or_completes(client, conn, queue):
    started = threading.Barrier(3)

    def gives_up(job):
        started.wait(5)
        job.cancelled.wait(10)
        raise RuntimeError("stopped by shutdown")

    def finishes(job):
        started.wait(5)
        job.cancelled.wait(10)

    released = client.enqueue("gives_up", queue=queue)
    finished = client.enqueue("finishes", queue=queue)
    w = worker(client, {"gives_up": gives_up, "finishes": finishes}, queue, shutdown_timeout=0.2).start()
    started.wait(10)
    t0 = time.monotonic()
    w.stop(wait=True)
    assert time.monotonic() - t0 < 3
    # released: queued again, ready now, no error recorded, no attempt spent
    state, attempts, max_attempts, last_error, _ = job_row(conn, released)
    assert (state, attempts, max_attempts, last_error) == ("queued", 1, 6, None)
    assert job_row(conn, finished)[0] == "done"
    assert w.stats.given_back == 1 and w.stats.completed == 1 and w.stats.failed == 0


def test_worker_runs_once(client, queue):
    w = worker(client, {"k": lambda job: None}, queue).start()
    try:
        with pytest.raises(RuntimeError):
            w.start()
    finally:
        w.stop(wait=True)


def test_completion_retried_through_a_short_outage(client, conn, queue):
    """A completion batch failing with connection errors for a few seconds (a server restart)
    is retried, not dropped, and the job keeps heartbeating meanwhile: with a 1 s lease and a
    3 s outage it ends done at its first attempt, completed once."""
    real = client.complete_many
    outage_until = time.monotonic() + 3
    calls = []

    def flaky(ids, attempts, **kw):
        calls.append(ids)
        if time.monotonic() < outage_until:
            raise psycopg.OperationalError("server closed the connection unexpectedly")
        return real(ids, attempts, **kw)

    client.complete_many = flaky
    job_id = client.enqueue("k", {}, queue=queue)
    ran = []
    w = skiplock.Worker(client, {"k": lambda job: ran.append(job.id)}, {queue: 1}, poll_interval=0.05,
                        maintain_interval=None, lease=timedelta(seconds=1),
                        heartbeat_interval=timedelta(milliseconds=200)).start()
    try:
        wait_for(lambda: ran, what="the handler ran")
        time.sleep(2)  # inside the outage, past the 1 s lease
        expired = conn.execute("SELECT lease_expires_at < now() FROM jobs WHERE id = %s", (job_id,)).fetchone()[0]
        assert not expired, "the lease lapsed while the completion was retried"
        wait_for(lambda: conn.execute("SELECT state::text FROM jobs WHERE id = %s", (job_id,)).fetchone()[0] == "done",
                 timeout=10, what="the job done")
    finally:
        w.stop(wait=True)
    attempts = conn.execute("SELECT attempts FROM jobs WHERE id = %s", (job_id,)).fetchone()[0]
    assert (attempts, ran, w.stats.completed) == (1, [job_id], 1)
    assert len(calls) > 3


def test_completion_statement_error_not_retried(client, conn, queue):
    calls = []

    def broken(ids, attempts, **kw):
        calls.append(ids)
        raise psycopg.errors.UndefinedFunction("function jobs_complete_many does not exist")

    client.complete_many = broken
    job_id = client.enqueue("k", {}, queue=queue)
    w = skiplock.Worker(client, {"k": lambda job: None}, {queue: 1}, poll_interval=0.05, maintain_interval=None).start()
    try:
        wait_for(lambda: calls, what="the completion")
        time.sleep(0.5)
    finally:
        w.stop(wait=True)
    assert len(calls) == 1
    assert conn.execute("SELECT state::text FROM jobs WHERE id = %s", (job_id,)).fetchone()[0] == "running"


def test_batch_max_wait_gathers_later_claims(client, conn, queue):
    """With max_wait, jobs claimed after the batch opened join it."""
    calls = []
    first = client.enqueue("gather", {"n": 0}, queue=queue)
    w = skiplock.Worker(client, {"gather": skiplock.Batch(lambda jobs: calls.append(len(jobs)), max_jobs=3, max_wait=5)},
                        {queue: 10}, poll_interval=0.05, maintain_interval=None).start()
    try:
        wait_for(lambda: conn.execute("SELECT state::text FROM jobs WHERE id = %s", (first,)).fetchone()[0] == "running",
                 10, "first job claimed")
        started = time.monotonic()
        client.enqueue("gather", {"n": 1}, queue=queue)
        client.enqueue("gather", {"n": 2}, queue=queue)
        wait_for(lambda: states(conn, queue) == {"done": 3}, 10, "three jobs done")
        assert time.monotonic() - started < 4  # the full batch did not wait for max_wait
    finally:
        w.stop(wait=True)
    assert calls == [3]
