"""Workflows: depends_on and parent_results, enqueue_workflow, results, wait, step and progress."""

import threading
import time
from datetime import datetime, timezone

import pytest

import skiplock
from helpers import states, wait_for


def worker(client, handlers, queue, slots=4, **kw):
    kw.setdefault("poll_interval", 0.05)
    kw.setdefault("maintain_interval", None)
    return skiplock.Worker(client, handlers, {queue: slots}, **kw)


def test_fan_in_child_gets_parent_results(client, queue):
    # Three parents return results through the worker's batched completion; the child,
    # waiting until all three are done, gets them keyed by parent id.
    parents = [client.enqueue("parent", {"n": n}, queue=queue) for n in (1, 2, 3)]
    child = client.enqueue("child", queue=queue, depends_on=parents, notify_finished=True)
    assert client.get(child)["state"] == "waiting"
    seen = []

    def sum_parents(job):
        seen.append(job.parent_results)
        return sum(r["double"] for r in job.parent_results.values())

    w = worker(client, {"parent": lambda job: {"double": 2 * job.payload["n"]}, "child": sum_parents}, queue).start()
    try:
        got = client.wait(child, timeout=20)
    finally:
        w.stop(wait=True)
    assert seen == [{str(p): {"double": 2 * n} for p, n in zip(parents, (1, 2, 3))}]
    assert got == {"state": "done", "result": 12, "last_error": None}
    assert client.get(child)["depends_on"] == parents
    assert client.get(parents[0])["result"] == {"double": 2}


def test_complete_and_complete_many_record_results(client, queue):
    parents = client.enqueue_many(["p"] * 3, queues=[queue] * 3)
    child = client.enqueue("c", queue=queue, depends_on=parents)
    jobs = client.claim("w", 10, queues=[queue])
    assert sorted(j.id for j in jobs) == sorted(parents)  # the child waits for them
    assert all(j.parent_results is None and j.checkpoints == {} for j in jobs)
    first, second, third = sorted(jobs, key=lambda j: j.id)
    assert client.complete(first.id, first.attempt, {"i": 0}) is True
    assert client.claim("w", queues=[queue]) == []  # two parents left
    done = client.complete_many([second.id, third.id], [second.attempt, third.attempt], [["a"], None])
    assert sorted(done) == [second.id, third.id]
    assert client.result(first.id) == {"state": "done", "result": {"i": 0}, "last_error": None}
    assert client.result(third.id) == {"state": "done", "result": None, "last_error": None}
    assert client.result(-1) is None
    [c] = client.claim("w", queues=[queue])
    assert c.id == child
    assert c.parent_results[str(first.id)] == {"i": 0} and c.parent_results[str(second.id)] == ["a"]
    assert c.parent_results.get(str(third.id)) is None


def test_enqueue_workflow_runs_steps_in_order(client, queue):
    steps = [
        {"name": "fetch", "kind": "fetch", "queue": queue, "payload": {"page": "p"}},
        {"name": "left", "kind": "half", "queue": queue, "depends_on": ["fetch"], "payload": {"side": "l"}},
        {"name": "right", "kind": "half", "queue": queue, "depends_on": ["fetch"], "payload": {"side": "r"},
         "run_at": datetime.now(timezone.utc)},
        {"name": "join", "kind": "join", "queue": queue, "depends_on": ["left", "right"], "notify_finished": True},
    ]
    ids = client.enqueue_workflow(steps)
    assert sorted(ids) == ["fetch", "join", "left", "right"]
    assert {client.get(i)["workflow_id"] for i in ids.values()} == {min(ids.values())}
    assert client.get(ids["join"])["state"] == "waiting"
    order = []
    handlers = {
        "fetch": lambda job: order.append("fetch") or job.payload["page"],
        "half": lambda job: order.append(job.payload["side"]) or job.parent_results["fetch"] + "-" + job.payload["side"],
        "join": lambda job: order.append("join") or job.parent_results,
    }
    w = worker(client, handlers, queue).start()
    try:
        got = client.wait(ids["join"], timeout=20)
    finally:
        w.stop(wait=True)
    assert got["state"] == "done"
    assert got["result"] == {"left": "p-l", "right": "p-r"}
    assert order[0] == "fetch" and order[3] == "join" and sorted(order[1:3]) == ["l", "r"]


def test_enqueue_workflow_bad_steps_and_cancel_workflow(client, conn, queue):
    with pytest.raises(skiplock.InvalidArgument) as e:
        client.enqueue_workflow([{"name": "a", "kind": "k", "queue": queue, "depends_on": ["nobody"]}])
    assert e.value.parameter == "steps"
    with pytest.raises(skiplock.InvalidArgument) as e:
        client.enqueue_workflow([{"name": "a", "kind": "k", "queue": queue, "depends_on": ["a"]}])
    assert e.value.parameter == "steps"
    assert states(conn, queue) == {}
    ids = client.enqueue_workflow([
        {"name": "a", "kind": "k", "queue": queue},
        {"name": "b", "kind": "k", "queue": queue, "depends_on": ["a"]},
    ])
    assert states(conn, queue) == {"queued": 1, "waiting": 1}
    workflow_id = client.get(ids["b"])["workflow_id"]
    assert client.cancel_workflow(workflow_id) == 2
    assert states(conn, queue) == {"cancelled": 2}
    assert client.cancel_workflow(workflow_id) == 0


def test_on_parent_failure(client, conn, queue):
    parent = client.enqueue("p", queue=queue, max_attempts=1)
    with pytest.raises(skiplock.InvalidArgument) as e:
        client.enqueue("c", queue=queue, depends_on=[parent], on_parent_failure="explode")
    assert e.value.parameter == "on_parent_failure"
    assert "on_parent_failure" in e.value.message
    cancelled = client.enqueue("c", queue=queue, depends_on=[parent])  # 'cancel', the default
    runs = client.enqueue("c", queue=queue, depends_on=[parent], on_parent_failure="run")
    [job] = client.claim("w", queues=[queue])
    assert client.fail(job.id, job.attempt, "boom") == "dead"
    assert client.get(cancelled)["state"] == "cancelled"
    assert client.get(runs)["state"] == "queued"


def test_wait_returns_result_of_job_finished_by_worker(client, queue):
    started, release = threading.Event(), threading.Event()

    def add(job):
        started.set()
        release.wait(10)
        return {"sum": job.payload["a"] + job.payload["b"]}

    job_id = client.enqueue("add", {"a": 2, "b": 3}, queue=queue, notify_finished=True)
    w = worker(client, {"add": add}, queue).start()
    try:
        assert started.wait(10)
        t0 = time.monotonic()
        threading.Timer(0.3, release.set).start()  # finishes while wait waits
        # A poll interval of a minute: only the notification can end the wait in time.
        got = client.wait(job_id, timeout=30, poll_interval=60)
        elapsed = time.monotonic() - t0
    finally:
        release.set()
        w.stop(wait=True)
    assert got == {"state": "done", "result": {"sum": 5}, "last_error": None}
    assert 0.3 <= elapsed < 10


def test_wait_returns_dead_and_polls_for_unannounced_ends(client, queue):
    dead = client.enqueue("explode", queue=queue, max_attempts=1, notify_finished=True)
    w = worker(client, {"explode": lambda job: 1 / 0}, queue).start()
    try:
        got = client.wait(dead, timeout=20)
    finally:
        w.stop(wait=True)
    assert got["state"] == "dead" and got["result"] is None and "ZeroDivisionError" in got["last_error"]
    # Without notify_finished nothing announces the end: the poll finds it.
    quiet = client.enqueue("quiet", queue=queue)
    [job] = client.claim("w", queues=[queue])
    threading.Timer(0.3, client.complete, (job.id, job.attempt, "ok")).start()
    assert client.wait(quiet, timeout=10, poll_interval=0.05)["result"] == "ok"


def test_wait_times_out_with_typed_error(client, queue):
    job_id = client.enqueue("nobody", queue=queue, notify_finished=True)
    t0 = time.monotonic()
    with pytest.raises(skiplock.WaitTimeout) as e:
        client.wait(job_id, timeout=0.3, poll_interval=0.1)
    assert 0.3 <= time.monotonic() - t0 < 5
    assert (e.value.job_id, e.value.state) == (job_id, "queued")
    assert isinstance(e.value, TimeoutError)
    with pytest.raises(skiplock.UnknownJob) as e:
        client.wait(-1, timeout=1)
    assert e.value.job_id == -1
    with pytest.raises(ValueError):
        client.wait(job_id, timeout=-1)


def test_step_runs_once_across_attempts(client, queue):
    calls, seen = [], []

    def charge():
        calls.append("charge")
        return {"charge": "ch_1"}

    def pay(job):
        seen.append((job.attempt, dict(job.checkpoints)))
        charged = job.step("charge", charge)
        job.step("log", lambda: calls.append("log"))  # None: saved as JSON null, still run once
        if job.attempt == 1:
            raise skiplock.RetryAt(datetime.now(timezone.utc), "crashed after the steps")
        return charged

    job_id = client.enqueue("pay", queue=queue, notify_finished=True)
    w = worker(client, {"pay": pay}, queue).start()
    try:
        got = client.wait(job_id, timeout=20)
    finally:
        w.stop(wait=True)
    assert calls == ["charge", "log"]
    assert seen == [(1, {}), (2, {"charge": {"charge": "ch_1"}, "log": None})]
    assert (got["state"], got["result"]) == ("done", {"charge": "ch_1"})  # last_error: the first attempt's


def test_step_that_raises_saves_nothing(client, queue):
    client.enqueue("k", queue=queue)
    [job] = client.claim("w", queues=[queue])
    with pytest.raises(RuntimeError):
        job.step("s", lambda: (_ for _ in ()).throw(RuntimeError("no")))
    assert job.checkpoints == {}
    assert job.step("s", lambda: 7) == 7
    assert job.step("s", lambda: 8) == 7
    assert job.checkpoints == {"s": 7}


def test_progress_is_visible_while_the_job_runs(client, queue):
    reported, release = threading.Event(), threading.Event()

    def report(job):
        job.progress({"done": 3, "of": 10})
        reported.set()
        release.wait(10)

    job_id = client.enqueue("report", queue=queue)
    w = worker(client, {"report": report}, queue).start()
    try:
        assert reported.wait(10)
        got = client.get(job_id)
        assert (got["state"], got["progress"]) == ("running", {"done": 3, "of": 10})
    finally:
        release.set()
        w.stop(wait=True)


def test_step_and_progress_of_a_lost_job_raise_job_not_held(client, queue):
    job_id = client.enqueue("k", queue=queue)
    [job] = client.claim("w", queues=[queue])
    assert client.cancel(job_id) is True  # an operator cancels it while it runs
    ran = []
    with pytest.raises(skiplock.JobNotHeld) as e:
        job.step("s", lambda: ran.append(1) or 7)
    assert (e.value.job_id, e.value.attempt) == (job_id, 1)
    assert ran == [1] and job.checkpoints == {}
    with pytest.raises(skiplock.JobNotHeld):
        job.progress(50)
    assert client.progress(job_id, 1, 50) is False
    assert client.checkpoint(job_id, 1, "s", 7) is False
    assert client.get(job_id)["progress"] is None


def test_worker_fails_a_result_that_is_not_json_or_refused(client, conn, queue):
    # A result json cannot encode fails its own job with a traceback; one the database refuses
    # (over 1 MB) fails its own job, and the job completed in the same batch is done.
    big = client.enqueue("big", queue=queue, max_attempts=1)
    small = client.enqueue("small", queue=queue, max_attempts=1)
    odd = client.enqueue("odd", queue=queue, max_attempts=1)
    handlers = {"big": lambda job: "x" * (2 << 20), "small": lambda job: "fine", "odd": lambda job: object()}
    w = worker(client, handlers, queue, complete_batch_delay=0.5).start()
    try:
        wait_for(lambda: states(conn, queue) == {"dead": 2, "done": 1}, 20, "the three outcomes")
    finally:
        w.stop(wait=True)
    assert client.result(small) == {"state": "done", "result": "fine", "last_error": None}
    assert "result" in client.result(big)["last_error"]
    assert "must be JSON" in client.result(odd)["last_error"]
    assert (w.stats.completed, w.stats.failed) == (1, 2)
