"""Client: one method per SQL function, named arguments passed through."""

import threading
from contextlib import contextmanager
from datetime import datetime, timedelta, timezone

import psycopg
import pytest

import skiplock
from helpers import states


def row(conn, job_id, cols):
    return conn.execute(f"SELECT {cols} FROM jobs WHERE id = %s", (job_id,)).fetchone()


def test_enqueue_passes_every_option(client, conn, queue):
    at = datetime.now(timezone.utc) + timedelta(hours=1)
    job_id = client.enqueue("email", {"to": "x"}, queue=queue, run_at=at, priority=-3, max_attempts=2,
                            unique_key="u1", concurrency_key="acme", meta={"trace": "t"})
    assert row(conn, job_id, "kind, payload, queue, run_at, priority, max_attempts, unique_key, concurrency_key, meta") == (
        "email", {"to": "x"}, queue, at, -3, 2, "u1", "acme", {"trace": "t"})
    # unique_key: the live job's id comes back
    assert client.enqueue("email", queue=queue, unique_key="u1") == job_id


def test_enqueue_defaults_and_delay(client, conn, queue):
    job_id = client.enqueue("plain", queue=queue)
    assert row(conn, job_id, "payload, priority, max_attempts, unique_key, meta") == ({}, 0, 5, None, None)
    later = client.enqueue("later", queue=queue, delay=timedelta(minutes=10))
    assert row(conn, later, "run_at - created_at")[0] == timedelta(minutes=10)
    with pytest.raises(ValueError):
        client.enqueue("x", run_at=datetime.now(timezone.utc), delay=timedelta(1))


def test_enqueue_many_keeps_input_order(client, conn, queue):
    ids = client.enqueue_many(["a", "b", "c"], [{"n": 1}, {"n": 2}, {"n": 3}], queues=[queue] * 3,
                              priorities=[3, 2, 1], unique_keys=[None, "k", None], metas=[None, {"m": 1}, None])
    assert len(ids) == 3
    got = [row(conn, i, "kind, payload, priority, unique_key, meta") for i in ids]
    assert got == [("a", {"n": 1}, 3, None, None), ("b", {"n": 2}, 2, "k", {"m": 1}), ("c", {"n": 3}, 1, None, None)]
    assert client.enqueue_many([], queues=[]) == []


def test_claim_complete_get(client, queue):
    job_id = client.enqueue("k", {"a": 1}, queue=queue, meta={"x": 1})
    [job] = client.claim("w", 5, queues=[queue], lease=timedelta(minutes=1))
    assert (job.id, job.kind, job.queue, job.payload, job.attempt, job.meta) == (job_id, "k", queue, {"a": 1}, 1, {"x": 1})
    assert client.claim("w", queues=[queue]) == []
    assert client.heartbeat(job.id, job.attempt, lease="10 minutes") is True
    assert client.heartbeat_many([job.id], [job.attempt]) == {job.id: True}
    assert client.complete(job.id, job.attempt) is True
    got = client.get(job_id)
    assert got["state"] == "done" and got["attempts"] == 1 and got["finished_at"] is not None
    assert client.get(-1) is None


def test_complete_many_returns_the_held(client, queue):
    client.enqueue_many(["k"] * 3, queues=[queue] * 3)
    jobs = client.claim("w", 3, queues=[queue])
    done = client.complete_many([j.id for j in jobs] + [jobs[0].id], [j.attempt for j in jobs] + [99])
    assert sorted(done) == sorted(j.id for j in jobs)


def test_fail_snooze_cancel_retry(client, conn, queue):
    job_id = client.enqueue("k", queue=queue, max_attempts=1)
    [job] = client.claim("w", queues=[queue])
    assert client.fail(job.id, job.attempt, "boom") == "dead"
    assert client.retry(job_id) is True
    [job] = client.claim("w", queues=[queue])
    at = datetime.now(timezone.utc) + timedelta(hours=1)
    assert client.snooze(job.id, job.attempt, at) is True
    assert row(conn, job_id, "state::text, run_at") == ("queued", at)
    conn.execute("UPDATE jobs SET run_at = now() WHERE id = %s", (job_id,))
    [job] = client.claim("w", queues=[queue])
    assert client.snooze(job.id, job.attempt, delay=timedelta(0)) is True
    [job] = client.claim("w", queues=[queue])
    assert client.cancel(job.id, job.attempt, "never") is True
    assert row(conn, job_id, "state::text, last_error") == ("cancelled", "never")
    assert client.retry(job_id) is True
    assert client.cancel(job_id) is True  # the operator's form
    assert client.cancel(job_id) is False
    with pytest.raises(ValueError):
        client.cancel(job_id, 1)
    with pytest.raises(ValueError):
        client.snooze(job_id, 1)


def test_fail_with_retry_at(client, conn, queue):
    job_id = client.enqueue("k", queue=queue)
    [job] = client.claim("w", queues=[queue])
    at = datetime.now(timezone.utc) + timedelta(minutes=5)
    assert client.fail(job.id, job.attempt, "later", retry_at=at) == "queued"
    assert row(conn, job_id, "run_at, last_error") == (at, "later")


def test_stats_requeue_expired_maintain(client, queue):
    client.enqueue_many(["k"] * 2, queues=[queue] * 2)
    client.claim("w", 1, queues=[queue], lease=timedelta(microseconds=1))
    mine = [s for s in client.stats() if s["queue"] == queue]
    assert {s["state"]: s["jobs"] for s in mine} == {"queued": 1, "running": 1}
    assert client.requeue_expired() >= 1
    assert isinstance(client.maintain(), dict)


def test_client_on_a_connection(db_url, queue):
    with psycopg.connect(db_url) as shared:
        c = skiplock.Client(shared)
        job_id = c.enqueue("k", queue=queue)
        # each call committed on its own, so another session sees it
        with skiplock.Client(db_url) as other:
            assert other.get(job_id)["state"] == "queued"
        with pytest.raises(skiplock.InvalidArgument):
            c.enqueue("k", queue="")
        assert c.get(job_id) is not None  # the failed call did not poison the connection
        assert c.conninfo


class TinyPool:
    """Stands in for psycopg_pool.ConnectionPool: connection() commits on success."""

    def __init__(self, url):
        self.conninfo = url
        self.lock = threading.Lock()
        self.conn = psycopg.connect(url)

    @contextmanager
    def connection(self):
        with self.lock:
            with self.conn.transaction():
                yield self.conn


def test_client_on_a_pool(db_url, queue):
    pool = TinyPool(db_url)
    c = skiplock.Client(pool)
    job_id = c.enqueue("k", queue=queue)
    with skiplock.Client(db_url) as other:
        assert other.get(job_id)["state"] == "queued"
    c.close()  # not ours: stays open
    assert not pool.conn.closed
    pool.conn.close()


def test_caller_transaction_commits_with_the_job(client, db_url, conn, queue):
    conn.execute("CREATE TABLE IF NOT EXISTS py_orders (id serial PRIMARY KEY, job_id bigint)")
    with psycopg.connect(db_url) as tx:
        job_id = client.enqueue("ship", queue=queue, conn=tx)
        tx.execute("INSERT INTO py_orders (job_id) VALUES (%s)", (job_id,))
        # not visible outside until commit
        assert client.get(job_id) is None
    assert client.get(job_id)["state"] == "queued"
    assert conn.execute("SELECT count(*) FROM py_orders WHERE job_id = %s", (job_id,)).fetchone() == (1,)


def test_invalid_argument_in_callers_transaction(client, db_url, queue):
    with psycopg.connect(db_url) as tx:
        with pytest.raises(skiplock.InvalidArgument) as e:
            client.enqueue("k", queue=queue, max_attempts=0, conn=tx)
        assert e.value.parameter == "max_attempts"
        assert e.value.message.startswith("jobs_enqueue: max_attempts")
        tx.rollback()


def test_other_errors_pass_through(client, queue):
    with pytest.raises(psycopg.Error) as e:
        client.get("not a number")
    assert not isinstance(e.value, skiplock.InvalidArgument)


def test_bad_source():
    with pytest.raises(TypeError):
        skiplock.Client(42)


def test_unstorable_text_argument_names_parameter(client, conn, queue):
    # Text PostgreSQL refuses (NUL, or a lone surrogate: an undecodable byte) is an
    # InvalidArgument naming the parameter, as the SQL functions name theirs, and sends nothing.
    cases = [
        (lambda: client.enqueue("k\x00", queue=queue), "kind"),
        (lambda: client.enqueue("k", queue=queue + "\udcff"), "queue"),
        (lambda: client.enqueue("k", queue=queue, unique_key="\x00"), "unique_key"),
        (lambda: client.enqueue_many(["a", "b\x00"], queues=[queue, queue]), "kinds[2]"),
        (lambda: client.claim("w\udcff", queues=[queue]), "worker"),
    ]
    for call, parameter in cases:
        with pytest.raises(skiplock.InvalidArgument) as e:
            call()
        assert e.value.parameter == parameter
        assert parameter in str(e.value)
    assert states(conn, queue) == {}
