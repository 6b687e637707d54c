"""The parity rows of docs/clients.md, one test each, named after the row."""

import threading
import time
from collections import Counter
from datetime import timedelta

import psycopg
import pytest

import skiplock
from helpers import states, wait_for


def test_rolled_back_enqueue_leaves_nothing(client, db_url, conn, queue):
    with psycopg.connect(db_url) as tx:
        job_id = client.enqueue("email", {"to": "a@example.com"}, queue=queue, conn=tx)
        many = client.enqueue_many(["email", "email"], queues=[queue, queue], conn=tx)
        tx.rollback()
    assert client.get(job_id) is None
    assert all(client.get(i) is None for i in many)
    assert states(conn, queue) == {}
    # and a committed one is there, as the control
    with psycopg.connect(db_url) as tx:
        job_id = client.enqueue("email", queue=queue, conn=tx)
    assert client.get(job_id)["state"] == "queued"


def test_eight_workers_claim_each_job_once(client, conn, queue):
    n = 300
    client.enqueue_many(["count"] * n, [{"i": i} for i in range(n)], queues=[queue] * n)
    seen = Counter()
    lock = threading.Lock()

    def handle(job):
        with lock:
            seen[job.id] += 1

    workers = [skiplock.Worker(client, {"count": handle}, {queue: 4}, name=f"w{i}", poll_interval=0.05,
                               maintain_interval=None) for i in range(8)]
    for w in workers:
        w.start()
    try:
        wait_for(lambda: states(conn, queue) == {"done": n}, 60, "all jobs done")
    finally:
        for w in workers:
            w.stop()
        for w in workers:
            w.stop(wait=True)
    assert len(seen) == n
    assert set(seen.values()) == {1}
    assert sum(w.stats.completed for w in workers) == n
    assert sum(1 for w in workers if w.stats.claimed) > 1, "the claims should be spread over workers"
    assert sum(w.stats.fenced for w in workers) == 0


def test_stale_holder_complete_returns_false(client, conn, queue):
    job_id = client.enqueue("slow", queue=queue)
    [stale] = client.claim("stale-worker", queues=[queue], lease=timedelta(milliseconds=10))
    time.sleep(0.05)
    assert client.requeue_expired() >= 1
    [fresh] = client.claim("fresh-worker", queues=[queue])
    assert fresh.id == job_id and fresh.attempt == stale.attempt + 1

    assert client.complete(stale.id, stale.attempt) is False
    assert client.complete_many([stale.id], [stale.attempt]) == []
    assert client.fail(stale.id, stale.attempt, "late") is None
    assert client.heartbeat(stale.id, stale.attempt) is False
    row = conn.execute("SELECT state::text, lease_holder, attempts FROM jobs WHERE id = %s", (job_id,)).fetchone()
    assert row == ("running", "fresh-worker", 2)
    assert client.complete(fresh.id, fresh.attempt) is True


def test_notify_wakes_idle_worker_within_50ms(client, queue):
    started = {}
    ran = threading.Event()

    def handle(job):
        started[job.id] = time.monotonic()
        ran.set()

    # A poll of a minute: only the notification can wake the worker in time.
    w = skiplock.Worker(client, {"ping": handle}, {queue: 1}, poll_interval=60, maintain_interval=None).start()
    try:
        assert w.listening.wait(10)
        time.sleep(0.2)  # let the first (empty) claim finish, so the worker is idle
        # The best of three: the promise is the wake-up by notification (the poll is a minute
        # away), not the scheduling of a loaded machine, which one try alone would measure.
        latencies = []
        with skiplock.Client(client.conninfo) as producer:
            producer.get(0)  # open the producer's connection before the clock starts
            for _ in range(3):
                ran.clear()
                t0 = time.monotonic()
                job_id = producer.enqueue("ping", queue=queue)
                assert ran.wait(5)
                latencies.append(started[job_id] - t0)
                time.sleep(0.2)  # the worker's claim after the job finds nothing: idle again
        assert min(latencies) < 0.050, f"worker woke {[round(x * 1000, 1) for x in latencies]} ms after the enqueues"
    finally:
        w.stop(wait=True)


def test_heartbeats_keep_job_past_lease(client, conn, queue):
    job_id = client.enqueue("long", queue=queue)
    requeued = []
    stop = threading.Event()

    def reaper():
        # What jobs_maintain does in production, much more often than usual.
        while not stop.is_set():
            requeued.append(client.requeue_expired())
            stop.wait(0.05)

    def handle(job):
        time.sleep(1.5)  # three times the lease

    w = skiplock.Worker(client, {"long": handle}, {queue: 1}, lease=0.5, heartbeat_interval=0.1,
                        poll_interval=0.05, maintain_interval=None).start()
    r = threading.Thread(target=reaper)
    r.start()
    try:
        wait_for(lambda: states(conn, queue) == {"done": 1}, 20, "the long job done")
    finally:
        stop.set()
        r.join()
        w.stop(wait=True)
    row = client.get(job_id)
    assert row["attempts"] == 1 and row["last_error"] is None
    assert w.stats.completed == 1 and w.stats.lost == 0 and w.stats.fenced == 0


def test_invalid_argument_names_parameter(client, queue):
    with pytest.raises(skiplock.InvalidArgument) as e:
        client.claim("w", 0, queues=[queue])
    assert e.value.parameter == "max_jobs"
    assert "max_jobs" in str(e.value)
    with pytest.raises(skiplock.InvalidArgument) as e:
        client.enqueue("", queue=queue)
    assert e.value.parameter == "kind"
    with pytest.raises(skiplock.InvalidArgument) as e:
        client.enqueue_many(["a", ""], queues=[queue, queue])
    assert e.value.parameter == "kinds[2]"
    with pytest.raises(skiplock.InvalidArgument) as e:
        client.heartbeat(1, 1, lease=timedelta(0))
    assert e.value.parameter == "lease"
    assert isinstance(e.value, ValueError)


def test_graceful_shutdown_loses_nothing(client, conn, queue):
    n = 60
    ids = client.enqueue_many(["work"] * n, queues=[queue] * n)
    ran = Counter()
    lock = threading.Lock()

    def handle(job):
        time.sleep(0.05)
        with lock:
            ran[job.id] += 1

    w = skiplock.Worker(client, {"work": handle}, {queue: 4}, poll_interval=0.05, maintain_interval=None,
                        shutdown_timeout=10).start()
    wait_for(lambda: len(ran) >= 8, 20, "some jobs done")
    w.stop(wait=True)
    first = dict(ran)
    # Nothing is left running or half-done: each job ran and is done, or never ran and is queued.
    after = states(conn, queue)
    assert "running" not in after, after
    done = {r[0] for r in conn.execute("SELECT id FROM jobs WHERE queue = %s AND state = 'done'", (queue,))}
    assert done == set(first), "every handler that ran was completed, and only those"
    assert after.get("queued", 0) == n - len(done)
    assert w.stats.completed == len(done)

    # A second worker finishes the rest; every job ran exactly once.
    w2 = skiplock.Worker(client, {"work": handle}, {queue: 8}, poll_interval=0.05, maintain_interval=None).start()
    try:
        wait_for(lambda: states(conn, queue) == {"done": n}, 30, "the rest done")
    finally:
        w2.stop(wait=True)
    assert set(ran) == set(ids) and set(ran.values()) == {1}


def test_unstorable_error_text_is_recorded(client, conn, queue):
    # A traceback holding NUL and an undecodable byte (a lone surrogate, as os.fsdecode
    # gives): psycopg refuses both, so unsanitised the outcome was lost until the lease expired.
    def fail(job):
        raise ValueError("bad \x00 byte \udcff")

    def give_up(job):
        raise skiplock.Cancel("gave up on \x00 \udcff")

    failed = client.enqueue("fail", queue=queue, max_attempts=1)
    cancelled = client.enqueue("give_up", queue=queue, max_attempts=5)
    w = skiplock.Worker(client, {"fail": fail, "give_up": give_up}, {queue: 2}, lease=60,
                        poll_interval=0.05, maintain_interval=None).start()
    try:
        wait_for(lambda: states(conn, queue) == {"dead": 1, "cancelled": 1}, 10, "both outcomes recorded")
    finally:
        w.stop(wait=True)
    row = client.get(failed)
    assert row["attempts"] == 1
    assert "ValueError: bad  byte \ufffd" in row["last_error"] and "\x00" not in row["last_error"]
    row = client.get(cancelled)
    assert row["attempts"] == 1 and row["last_error"] == "gave up on  \ufffd"
    assert w.stats.failed == 1 and w.stats.cancelled == 1


def test_outcome_retried_after_connection_loss(client, db_url, conn, queue):
    # Each outcome call blocks on a row lock the test holds, and its backend is terminated
    # while it waits: the worker must retry it on a new connection and record it exactly once.
    outcomes = {"fail": "jobs_fail", "snooze": "jobs_snooze", "cancel": "jobs_cancel"}

    proceed = threading.Event()

    def fail(job):
        proceed.wait(20)
        raise RuntimeError("failed once")

    def snooze(job):
        proceed.wait(20)
        raise skiplock.Snooze(timedelta(hours=1))

    def cancel(job):
        proceed.wait(20)
        raise skiplock.Cancel("cancelled once")

    ids = {kind: client.enqueue(kind, queue=queue, max_attempts=1) for kind in outcomes}
    blocker = psycopg.connect(db_url)
    w = skiplock.Worker(client, {"fail": fail, "snooze": snooze, "cancel": cancel}, {queue: 3}, lease=60,
                        poll_interval=0.05, maintain_interval=None).start()
    try:
        wait_for(lambda: states(conn, queue) == {"running": 3}, 10, "the three jobs running")
        # (claims skip locked rows: lock them only once they are running)
        blocker.execute("SELECT 1 FROM jobs WHERE id = ANY(%s) FOR UPDATE", (list(ids.values()),))
        proceed.set()
        for function in outcomes.values():
            killed = []

            def kill_blocked():
                killed.extend(conn.execute(
                    """SELECT pg_terminate_backend(pid) FROM pg_stat_activity
                       WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE %s""",
                    (f"%{function}(%",)).fetchall())
                return killed

            wait_for(kill_blocked, 10, f"a blocked {function} to terminate")
        blocker.commit()
        wait_for(lambda: states(conn, queue) == {"dead": 1, "queued": 1, "cancelled": 1}, 20, "every outcome recorded")
    finally:
        blocker.close()
        w.stop(wait=True)
    rows = {kind: conn.execute("SELECT attempts, max_attempts, jsonb_array_length(errors) FROM jobs WHERE id = %s",
                               (i,)).fetchone() for kind, i in ids.items()}
    # one failure entry each; a snooze recorded twice would have raised max_attempts twice
    assert rows == {"fail": (1, 1, 1), "snooze": (1, 2, 0), "cancel": (1, 1, 1)}
    assert (w.stats.failed, w.stats.snoozed, w.stats.cancelled, w.stats.fenced) == (1, 1, 1, 0)


def test_publish_fans_out_one_job_per_subscription(client, db_url, conn, queue):
    topic = queue + "-topic"
    other = queue + "-b"
    assert client.subscribe(topic, queue, "receipt") is True
    assert client.subscribe(topic, queue, "receipt") is False
    assert client.subscribe(topic, other, "charge") is True
    ids = client.publish(topic, {"order": 7}, priority=3, concurrency_key="c1")
    assert len(ids) == 2
    rows = [conn.execute("SELECT queue, kind, payload, priority, concurrency_key FROM jobs WHERE id = %s",
                         (i,)).fetchone() for i in ids]
    # in the order of the subscriptions: queue, then kind
    assert rows == [(queue, "receipt", {"order": 7}, 3, "c1"), (other, "charge", {"order": 7}, 3, "c1")]
    assert client.publish(queue + "-nobody") == []
    # in the caller's transaction: a rollback leaves no job
    with psycopg.connect(db_url) as tx:
        rolled_back = client.publish(topic, conn=tx)
        tx.rollback()
    assert len(rolled_back) == 2 and all(client.get(i) is None for i in rolled_back)
    assert client.unsubscribe(topic, other, "charge") is True
    assert client.unsubscribe(topic, other, "charge") is False
    assert len(client.publish(topic)) == 1
    with pytest.raises(skiplock.InvalidArgument) as e:
        client.publish(topic, max_attempts=0)
    assert e.value.parameter == "max_attempts"


def test_debounce_replaces_queued_job(client, conn, queue):
    first = client.enqueue("reindex", {"rev": 1}, queue=queue, unique_key="doc-7",
                           on_duplicate="replace", delay=timedelta(minutes=1))
    again = client.enqueue("reindex", {"rev": 2}, queue=queue, unique_key="doc-7",
                           on_duplicate="replace", delay=timedelta(hours=1), priority=3)
    assert again == first
    with conn.cursor() as cur:
        cur.execute("""SELECT payload, priority, state::text, run_at > now() + interval '50 minutes'
                       FROM jobs WHERE id = %s""", (first,))
        assert cur.fetchone() == ({"rev": 2}, 3, "queued", True)
    # keep (the default) changes nothing; the batch form replaces per element.
    assert client.enqueue("reindex", {"rev": 3}, queue=queue, unique_key="doc-7") == first
    ids = client.enqueue_many(["reindex"], [{"rev": 4}], queues=[queue], unique_keys=["doc-7"],
                              on_duplicates=["replace"])
    assert ids == [first]
    with conn.cursor() as cur:
        cur.execute("SELECT payload FROM jobs WHERE id = %s", (first,))
        assert cur.fetchone()[0] == {"rev": 4}
    assert states(conn, queue) == {"queued": 1}


def test_throttle_holds_key_after_finish(client, conn, queue):
    first = client.enqueue("digest", queue=queue, unique_key="daily", unique_for=timedelta(hours=1))
    client.cancel(first)
    assert client.enqueue("digest", queue=queue, unique_key="daily", unique_for=timedelta(hours=1)) == first
    assert client.enqueue_many(["digest"], queues=[queue], unique_keys=["daily"],
                               unique_fors=[timedelta(hours=1)]) == [first]
    assert states(conn, queue) == {"cancelled": 1}
    with pytest.raises(skiplock.InvalidArgument) as e:
        client.enqueue("digest", queue=queue, unique_for=timedelta(hours=1))
    assert e.value.parameter == "unique_for"


def test_batch_handler_settles_each_job(client, conn, queue):
    """A batch handler gets up to max_jobs jobs claimed together; each job keeps its own
    outcome (done with its result, failed, cancelled), and raising fails every job."""
    calls = []

    def each(jobs):
        calls.append([j.id for j in jobs])
        out = []
        for j in jobs:
            n = j.payload["n"]
            out.append(RuntimeError(f"odd {n}") if n == 1 else skiplock.Cancel("not wanted") if n == 3 else n * 2)
        return out

    def all_fail(jobs):
        raise RuntimeError("the bulk call failed")

    conn.execute("UPDATE jobs_settings SET backoff_base = '1 hour', backoff_cap = greatest(backoff_cap, '1 hour')")
    ids = [client.enqueue("each", {"n": n}, queue=queue) for n in range(6)]
    dead = [client.enqueue("all", {"n": n}, queue=queue, max_attempts=1) for n in range(3)]
    handlers = {"each": skiplock.Batch(each, max_jobs=4), "all": skiplock.Batch(all_fail)}
    w = skiplock.Worker(client, handlers, {queue: 10}, poll_interval=0.05, maintain_interval=None).start()
    try:
        wait_for(lambda: states(conn, queue).get("running", 0) == 0 and w.stats.completed + w.stats.failed
                 + w.stats.cancelled == 9, 10, "nine outcomes")
    finally:
        w.stop(wait=True)
    assert all(1 <= len(c) <= 4 for c in calls) and max(len(c) for c in calls) == 4
    assert Counter(i for c in calls for i in c) == Counter(ids)
    for n, job_id in enumerate(ids):
        state, attempts, last_error, result = conn.execute(
            "SELECT state::text, attempts, last_error, (SELECT result FROM jobs_result(id)) FROM jobs WHERE id = %s",
            (job_id,)).fetchone()
        if n == 1:
            assert (state, attempts) == ("queued", 1) and "odd 1" in last_error
        elif n == 3:
            assert (state, last_error) == ("cancelled", "not wanted")
        else:
            assert (state, attempts, last_error, result) == ("done", 1, None, n * 2)
    for job_id in dead:
        state, last_error = conn.execute("SELECT state::text, last_error FROM jobs WHERE id = %s", (job_id,)).fetchone()
        assert state == "dead" and "the bulk call failed" in last_error

