"""Client: one method per skiplock SQL function (docs/sql-api.md)."""

from __future__ import annotations

import re
import select
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Callable, Iterator, Mapping, Sequence

import psycopg
from psycopg.rows import dict_row
from psycopg.types.json import Jsonb

from .errors import InvalidArgument, JobNotHeld, UnknownJob, WaitTimeout, translate

Lease = timedelta | str

# How often Client.wait reads jobs_result when no notification comes (the contract's 1 s).
WAIT_POLL_INTERVAL_DEFAULT = timedelta(seconds=1)
# The states jobs_result reports for a job that will not run again by itself.
FINISHED_STATES = frozenset({"done", "dead", "cancelled"})


@dataclass
class Job:
    """A claimed job: one row of jobs_claim (type jobs_claimed).

    ``attempt`` is the fencing token every later call about the job passes.
    ``cancelled`` is set by a Worker when the handler should stop early: its
    timeout passed, the job was lost (a heartbeat found it no longer held) or
    shutdown's grace period ran out. Python cannot interrupt a thread, so a
    long handler should check it (``job.cancelled.wait(0)`` or ``is_set()``).

    ``parent_results`` holds the results of the jobs this one depended on
    (``depends_on``), decoded from JSON: a dict keyed by the parent's step name
    in a workflow (``enqueue_workflow``), else by the parent's id as a string;
    None for a job without parents. ``checkpoints`` is the dict of values its
    earlier attempts saved with ``step`` ({} when none).
    """

    id: int
    queue: str
    kind: str
    payload: Any
    priority: int
    max_attempts: int
    run_at: datetime
    created_at: datetime
    attempt: int
    lease_expires_at: datetime
    meta: Any = None
    parent_results: Any = None
    checkpoints: dict = field(default_factory=dict)
    cancelled: threading.Event = field(default_factory=threading.Event, repr=False, compare=False)
    # The client that claimed the job, for step and progress.
    _client: "Client | None" = field(default=None, repr=False, compare=False)

    def step(self, name: str, fn: Callable[[], Any], *, conn: psycopg.Connection | None = None) -> Any:
        """Runs ``fn()`` once across the job's attempts: Client.step with this job and the
        client that claimed it. Raises JobNotHeld when the job is no longer held."""
        return self._claimer("step").step(self, name, fn, conn=conn)

    def progress(self, value: Any, *, conn: psycopg.Connection | None = None) -> None:
        """Records ``value`` (JSON) as the job's progress (jobs_progress), shown by
        Client.get and jobs_list; each call replaces the last. Raises JobNotHeld when the
        job is no longer held, and then nothing was recorded."""
        if not self._claimer("progress").progress(self.id, self.attempt, value, conn=conn):
            raise JobNotHeld(self.id, self.attempt, "progress")

    def _claimer(self, what: str) -> "Client":
        if self._client is None:
            raise RuntimeError(f"Job.{what}: the job was not claimed by a Client; call Client.{what} instead")
        return self._client


# A lone surrogate: what Python decodes an undecodable byte to (errors="surrogateescape", as
# os.fsdecode and sys.stderr do), and what UTF-8 cannot encode.
_SURROGATE = re.compile("[\ud800-\udfff]")


def storable_text(text: str) -> str:
    """``text`` as PostgreSQL accepts a text parameter: lone surrogates (undecodable bytes)
    become U+FFFD and NUL characters are dropped, as the Go driver does. fail and cancel
    pass the error through it, so a traceback holding either is recorded rather than
    refused (psycopg raises before sending, and the job would wait out its lease)."""
    if "\x00" in text:
        text = text.replace("\x00", "")
    return _SURROGATE.sub("\ufffd", text)


def _unstorable(text: str) -> str | None:
    """Why PostgreSQL would refuse text as a text parameter, or None when it would not."""
    if "\x00" in text:
        return "must not contain NUL"
    if _SURROGATE.search(text):
        return "must be valid UTF-8 (it holds a lone surrogate, an undecodable byte)"
    return None


def _check_storable(function: str, args: Sequence["_Arg"]) -> None:
    """Raises InvalidArgument for a text argument (or element of a text array) that
    PostgreSQL would refuse, named as the SQL functions name a bad parameter (``kinds[2]``
    for the second element); psycopg would raise a DataError or UnicodeEncodeError."""
    for a in args:
        values = [(a.name, a.value)] if isinstance(a.value, str) else (
            [(f"{a.name}[{i}]", v) for i, v in enumerate(a.value, 1)] if isinstance(a.value, list) else [])
        for name, v in values:
            problem = _unstorable(v) if isinstance(v, str) else None
            if problem:
                raise InvalidArgument(name, f"{function}: {name} {problem}")


_JOB_FIELDS = frozenset(f for f in Job.__dataclass_fields__ if f not in ("cancelled", "_client"))


class _Arg:
    """One named SQL argument: the value and the SQL that receives it (with its cast)."""

    __slots__ = ("name", "value", "sql")

    def __init__(self, name: str, value: Any, cast: str, sql: str | None = None):
        self.name = name
        self.value = value
        self.sql = sql or f"%({name})s::{cast}"


def _jsonb(value: Any) -> Any:
    """value as a jsonb parameter; None (SQL NULL, not sent) stays None, and a value already
    wrapped (the worker's pre-encoded results) is sent as it is."""
    if value is None or isinstance(value, Jsonb):
        return value
    return Jsonb(value)


def _seconds(value: timedelta | float | None) -> float | None:
    if value is None:
        return None
    if isinstance(value, timedelta):
        return value.total_seconds()
    return float(value)


def _workflow_step(step: Any) -> Any:
    """A step of enqueue_workflow as JSON: a datetime run_at becomes ISO 8601 text (which
    the SQL reads as timestamptz, a naive one in the session's time zone, as enqueue's
    run_at); everything else is sent as given, for the SQL to judge."""
    if isinstance(step, Mapping) and isinstance(step.get("run_at"), datetime):
        step = {**step, "run_at": step["run_at"].isoformat()}
    return step


class _ConnCache:
    """A few idle autocommit connections to one conninfo, shared by threads.

    It saves a connection per call without a dependency on psycopg_pool; a
    connection that fails is dropped rather than reused.
    """

    def __init__(self, conninfo: str, keep: int = 4):
        self._conninfo = conninfo
        self._keep = keep
        self._idle: list[psycopg.Connection] = []
        self._lock = threading.Lock()
        self._closed = False

    @contextmanager
    def connection(self) -> Iterator[psycopg.Connection]:
        with self._lock:
            conn = self._idle.pop() if self._idle else None
        if conn is None or conn.closed:
            conn = psycopg.connect(self._conninfo, autocommit=True)
        ok = False
        try:
            yield conn
            ok = True
        finally:
            keep = False
            if ok and not conn.closed and conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE:
                with self._lock:
                    if not self._closed and len(self._idle) < self._keep:
                        self._idle.append(conn)
                        keep = True
            if not keep:
                conn.close()

    def close(self) -> None:
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
        for conn in idle:
            conn.close()


class Client:
    """A thin wrapper over skiplock's SQL functions.

    ``Client(source)`` takes a conninfo string (``"postgresql://..."``; the
    client keeps a few connections of its own), a psycopg ``Connection``
    (shared by all calls under a lock; each call runs in its own transaction,
    or in a savepoint when the connection is inside one), or a
    ``psycopg_pool.ConnectionPool`` (anything whose ``connection()`` is a
    context manager giving a connection).

    Every method takes ``conn=``: the caller's connection, used as it is, so
    the call is part of the caller's open transaction and commits or rolls
    back with the caller's own writes. Arguments left ``None`` are not sent,
    so the SQL function's default applies. An argument the function rejects
    raises ``InvalidArgument`` naming the parameter.
    """

    def __init__(self, source: str | psycopg.Connection | Any):
        self._conninfo: str | None = None
        self._conn: psycopg.Connection | None = None
        self._conn_lock = threading.Lock()
        self._pool: Any = None
        if isinstance(source, str):
            self._conninfo = source
            self._pool = _ConnCache(source)
            self._owns_pool = True
        elif isinstance(source, psycopg.Connection):
            self._conn = source
            self._owns_pool = False
        elif hasattr(source, "connection"):
            self._pool = source
            self._owns_pool = False
        else:
            raise TypeError("Client: source must be a conninfo string, a psycopg.Connection or a pool")

    @property
    def conninfo(self) -> str | None:
        """The conninfo the client was made from, if any (a Worker needs one to LISTEN)."""
        if self._conninfo is not None:
            return self._conninfo
        if self._conn is not None:
            return self._conn.info.dsn
        return getattr(self._pool, "conninfo", None)

    def connect(self, **kwargs: Any) -> psycopg.Connection:
        """A new connection of its own to the client's database (for LISTEN)."""
        conninfo = self.conninfo
        if not conninfo:
            raise ValueError("Client: no conninfo to open a dedicated connection with")
        if self._conn is not None and self._conn.pgconn.password:
            kwargs.setdefault("password", self._conn.pgconn.password.decode())
        return psycopg.connect(conninfo, **kwargs)

    def close(self) -> None:
        """Closes the connections the client opened itself (not a connection or pool it was given)."""
        if self._owns_pool:
            self._pool.close()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # -- plumbing ---------------------------------------------------------

    @contextmanager
    def _connection(self, conn: psycopg.Connection | None) -> Iterator[psycopg.Connection]:
        if conn is not None:
            yield conn
        elif self._conn is not None:
            with self._conn_lock, self._conn.transaction():
                yield self._conn
        else:
            with self._pool.connection() as pooled:
                yield pooled

    def _call(self, function: str, args: Sequence[_Arg], conn: psycopg.Connection | None,
              *, scalar: bool, many: bool) -> Any:
        given = [a for a in args if a.value is not None]
        _check_storable(function, given)
        call = f"{function}({', '.join(f'{a.name} => {a.sql}' for a in given)})"
        sql = f"SELECT {call}" if scalar else f"SELECT * FROM {call}"
        params = {a.name: a.value for a in given}
        try:
            with self._connection(conn) as c:
                with c.cursor(row_factory=dict_row) as cur:
                    cur.execute(sql, params)
                    rows = cur.fetchall()
        except psycopg.Error as err:
            raise translate(err) from err
        if scalar:
            values = [next(iter(r.values())) for r in rows]
            return values if many else (values[0] if values else None)
        return rows if many else (rows[0] if rows else None)

    # -- producers --------------------------------------------------------

    def enqueue(self, kind: str, payload: Any = None, *, queue: str | None = None,
                run_at: datetime | None = None, delay: timedelta | None = None,
                priority: int | None = None, max_attempts: int | None = None,
                unique_key: str | None = None, concurrency_key: str | None = None,
                meta: dict | None = None, depends_on: Sequence[int] | None = None,
                on_parent_failure: str | None = None, notify_finished: bool | None = None,
                conn: psycopg.Connection | None = None) -> int:
        """jobs_enqueue: adds one job and returns its id (or, with a unique_key a live
        job holds, that job's id). ``delay`` is run_at = now() + delay, counted by the
        server's clock; give run_at or delay, not both.

        ``depends_on`` lists the ids of parent jobs: the job waits (state 'waiting')
        until all are done, and its handler gets their results as ``job.parent_results``.
        ``on_parent_failure`` says what happens when a parent ends dead or cancelled:
        'cancel' (the SQL default) cancels this job too, 'run' runs it anyway. With
        ``notify_finished`` True, the job's end (done, dead or cancelled) is announced on
        the jobs_finished channel, which ``wait`` listens to. Defaults to False."""
        if run_at is not None and delay is not None:
            raise ValueError("enqueue: give run_at or delay, not both")
        args = [
            _Arg("kind", kind, "text"),
            _Arg("payload", _jsonb(payload), "jsonb"),
            _Arg("queue", queue, "text"),
            _Arg("run_at", run_at, "timestamptz"),
            _Arg("run_at", delay, "", sql="now() + %(run_at)s::interval"),
            _Arg("priority", priority, "integer"),
            _Arg("max_attempts", max_attempts, "integer"),
            _Arg("unique_key", unique_key, "text"),
            _Arg("concurrency_key", concurrency_key, "text"),
            _Arg("meta", _jsonb(meta), "jsonb"),
            _Arg("depends_on", None if depends_on is None else list(depends_on), "bigint[]"),
            _Arg("on_parent_failure", on_parent_failure, "text"),
            _Arg("notify_finished", notify_finished, "boolean"),
        ]
        return self._call("jobs_enqueue", args, conn, scalar=True, many=False)

    def enqueue_many(self, kinds: Sequence[str], payloads: Sequence[Any] | None = None, *,
                     queues: Sequence[str] | None = None, run_ats: Sequence[datetime] | None = None,
                     priorities: Sequence[int] | None = None, max_attempts: Sequence[int] | None = None,
                     unique_keys: Sequence[str | None] | None = None,
                     concurrency_keys: Sequence[str | None] | None = None,
                     metas: Sequence[dict | None] | None = None,
                     conn: psycopg.Connection | None = None) -> list[int]:
        """jobs_enqueue_many: adds len(kinds) jobs in one statement and returns their ids
        in input order. Every other list is None (the default for every job) or as long as kinds."""
        args = [
            _Arg("kinds", list(kinds), "text[]"),
            _Arg("payloads", None if payloads is None else [_jsonb(p) for p in payloads], "jsonb[]"),
            _Arg("queues", None if queues is None else list(queues), "text[]"),
            _Arg("run_ats", None if run_ats is None else list(run_ats), "timestamptz[]"),
            _Arg("priorities", None if priorities is None else list(priorities), "integer[]"),
            _Arg("max_attempts", None if max_attempts is None else list(max_attempts), "integer[]"),
            _Arg("unique_keys", None if unique_keys is None else list(unique_keys), "text[]"),
            _Arg("concurrency_keys", None if concurrency_keys is None else list(concurrency_keys), "text[]"),
            _Arg("metas", None if metas is None else [_jsonb(m) for m in metas], "jsonb[]"),
        ]
        return self._call("jobs_enqueue_many", args, conn, scalar=True, many=True)

    def enqueue_workflow(self, steps: Sequence[Mapping[str, Any]], *,
                         conn: psycopg.Connection | None = None) -> dict[str, int]:
        """jobs_enqueue_workflow: adds the steps of a workflow in one statement and returns
        {step name: job id} in the order the function returned them.

        Each step is a dict with "name" and "kind" (required) and any of "payload",
        "queue", "priority", "max_attempts", "run_at" (a datetime, or ISO 8601 text),
        "concurrency_key", "meta", "notify_finished", "on_parent_failure" and
        "depends_on", a list of the names of other steps; a step's handler gets its
        parents' results keyed by their names. Parents are inserted before their children,
        and every step's workflow_id (Client.get) is the id of the first one inserted;
        cancel_workflow takes it. A bad step, or a cycle, raises InvalidArgument naming
        "steps", and adds nothing."""
        arg = _Arg("steps", Jsonb([_workflow_step(s) for s in steps]), "jsonb")
        rows = self._call("jobs_enqueue_workflow", [arg], conn, scalar=False, many=True)
        return {r["name"]: r["id"] for r in rows}

    def publish(self, topic: str, payload: Any = None, *, run_at: datetime | None = None,
                delay: timedelta | None = None, priority: int | None = None,
                max_attempts: int | None = None, concurrency_key: str | None = None,
                meta: dict | None = None, conn: psycopg.Connection | None = None) -> list[int]:
        """jobs_publish: adds one job per subscription of ``topic`` (fan-out), of the
        subscription's kind in its queue, all with this payload and these options, and
        returns their ids in the order of the subscriptions by queue, then kind; [] for a
        topic without subscribers. Pass ``conn`` (in a transaction) to publish atomically
        with the caller's own writes. ``delay`` is run_at = now() + delay, counted by the
        server's clock; give run_at or delay, not both."""
        if run_at is not None and delay is not None:
            raise ValueError("publish: give run_at or delay, not both")
        args = [
            _Arg("topic", topic, "text"),
            _Arg("payload", _jsonb(payload), "jsonb"),
            _Arg("run_at", run_at, "timestamptz"),
            _Arg("run_at", delay, "", sql="now() + %(run_at)s::interval"),
            _Arg("priority", priority, "integer"),
            _Arg("max_attempts", max_attempts, "integer"),
            _Arg("concurrency_key", concurrency_key, "text"),
            _Arg("meta", _jsonb(meta), "jsonb"),
        ]
        return list(self._call("jobs_publish", args, conn, scalar=True, many=False))

    def subscribe(self, topic: str, queue: str, kind: str, *,
                  conn: psycopg.Connection | None = None) -> bool:
        """jobs_subscribe (an operator's call, for jobs_admin): each later publish of
        ``topic`` adds a job of ``kind`` to ``queue``. True when the subscription is new,
        False when it existed already."""
        args = [_Arg("topic", topic, "text"), _Arg("queue", queue, "text"), _Arg("kind", kind, "text")]
        return bool(self._call("jobs_subscribe", args, conn, scalar=True, many=False))

    def unsubscribe(self, topic: str, queue: str, kind: str, *,
                    conn: psycopg.Connection | None = None) -> bool:
        """jobs_unsubscribe (for jobs_admin): later publishes of ``topic`` add no job for
        ``queue`` and ``kind``; jobs already published stay. True when one was removed."""
        args = [_Arg("topic", topic, "text"), _Arg("queue", queue, "text"), _Arg("kind", kind, "text")]
        return bool(self._call("jobs_unsubscribe", args, conn, scalar=True, many=False))

    def cancel_workflow(self, workflow_id: int, *, conn: psycopg.Connection | None = None) -> int:
        """jobs_cancel_workflow: cancels every unfinished job of the workflow (running
        ones too: their holders' results are then refused) and returns how many."""
        args = [_Arg("workflow_id", workflow_id, "bigint")]
        return self._call("jobs_cancel_workflow", args, conn, scalar=True, many=False)

    def get(self, id: int, *, conn: psycopg.Connection | None = None) -> dict | None:
        """jobs_get: the job's state, attempts, max_attempts, run_at, last_error,
        created_at, finished_at, meta, result, progress, workflow_id and depends_on as
        a dict; None for an unknown or pruned id."""
        return self._call("jobs_get", [_Arg("id", id, "bigint")], conn, scalar=False, many=False)

    def result(self, id: int, *, conn: psycopg.Connection | None = None) -> dict | None:
        """jobs_result: {"state", "result", "last_error"} of the job, whether or not it
        has finished (result is None until it is done, and when its handler returned
        None); None for an unknown or pruned id."""
        row = self._call("jobs_result", [_Arg("id", id, "bigint")], conn, scalar=False, many=False)
        if row is not None:
            row["state"] = str(row["state"])
        return row

    def wait(self, id: int, *, timeout: timedelta | float | None = None,
             poll_interval: timedelta | float = WAIT_POLL_INTERVAL_DEFAULT) -> dict:
        """Waits until the job has finished (done, dead or cancelled) and returns its
        jobs_result row, {"state", "result", "last_error"}.

        On a connection of its own (``connect``: the client needs a conninfo, as a Worker
        does), it LISTENs on jobs_finished before its
        first read of jobs_result, so no finish is missed; then it reads again at each
        notification naming the job, or every ``poll_interval`` (default 1 s) for a job
        enqueued without ``notify_finished``, whose end is not announced. ``timeout``
        (seconds or a timedelta) bounds the wait; None, the default, waits without limit.
        Raises WaitTimeout when the timeout passes first (the job may still finish) and
        UnknownJob when no job has the id."""
        limit = _seconds(timeout)
        poll = _seconds(poll_interval)
        if limit is not None and limit < 0:
            raise ValueError("wait: timeout must not be negative")
        if poll is None or poll <= 0:
            raise ValueError("wait: poll_interval must be positive")
        deadline = None if limit is None else time.monotonic() + limit
        key = str(id)
        notified = threading.Event()

        def on_notify(n: psycopg.Notify) -> None:
            if n.channel == "jobs_finished" and n.payload == key:
                notified.set()

        with self.connect(autocommit=True) as listener:
            # Notifications psycopg reads while a query runs go to the handler; those read
            # while waiting, by _await_notification.
            listener.add_notify_handler(on_notify)
            listener.execute("LISTEN jobs_finished")
            while True:
                notified.clear()
                row = self.result(id, conn=listener)
                if row is None:
                    raise UnknownJob(id)
                if row["state"] in FINISHED_STATES:
                    return row
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    raise WaitTimeout(id, limit, row["state"])
                _await_notification(listener, on_notify, notified, poll if left is None else min(poll, left))

    # -- workers ----------------------------------------------------------

    def claim(self, worker: str, max_jobs: int | None = None, *, queues: Sequence[str] | None = None,
              lease: Lease | None = None, conn: psycopg.Connection | None = None) -> list[Job]:
        """jobs_claim: leases up to max_jobs ready jobs to ``worker``, best first."""
        args = [
            _Arg("worker", worker, "text"),
            _Arg("max_jobs", max_jobs, "integer"),
            _Arg("queues", None if queues is None else list(queues), "text[]"),
            _Arg("lease", lease, "interval"),
        ]
        rows = self._call("jobs_claim", args, conn, scalar=False, many=True)
        # Only the columns Job knows, so a later skiplock that adds one breaks nothing.
        jobs = []
        for row in rows:
            fields = {k: v for k, v in row.items() if k in _JOB_FIELDS}
            fields["checkpoints"] = fields.get("checkpoints") or {}
            jobs.append(Job(**fields, _client=self))
        return jobs

    def complete(self, id: int, attempt: int, result: Any = None, *,
                 conn: psycopg.Connection | None = None) -> bool:
        """jobs_complete: True when the job was running at that attempt and is now done,
        with ``result`` (JSON; None records no result) as its result; False when it was
        no longer held (fenced), and nothing changed."""
        args = [_Arg("id", id, "bigint"), _Arg("attempt", attempt, "integer"), _Arg("result", _jsonb(result), "jsonb")]
        return bool(self._call("jobs_complete", args, conn, scalar=True, many=False))

    def complete_many(self, ids: Sequence[int], attempts: Sequence[int], results: Sequence[Any] | None = None, *,
                      conn: psycopg.Connection | None = None) -> list[int]:
        """jobs_complete_many: completes the (id, attempt) pairs still held and returns
        their ids; an id missing from the result was no longer held. ``results`` is None
        (no job gets a result) or as long as ids, None for a job without one."""
        args = [
            _Arg("ids", list(ids), "bigint[]"),
            _Arg("attempts", list(attempts), "integer[]"),
            _Arg("results", None if results is None else [_jsonb(r) for r in results], "jsonb[]"),
        ]
        return self._call("jobs_complete_many", args, conn, scalar=True, many=True)

    def checkpoint(self, id: int, attempt: int, step: str, value: Any, *,
                   conn: psycopg.Connection | None = None) -> bool:
        """jobs_checkpoint: saves ``value`` (JSON; None is saved as JSON null) under
        ``step`` in the job's checkpoints, which later attempts get as
        ``job.checkpoints``. False when the job is no longer held, and nothing was saved."""
        args = [
            _Arg("id", id, "bigint"),
            _Arg("attempt", attempt, "integer"),
            _Arg("step", step, "text"),
            _Arg("value", Jsonb(value), "jsonb"),
        ]
        return bool(self._call("jobs_checkpoint", args, conn, scalar=True, many=False))

    def step(self, job: Job, name: str, fn: Callable[[], Any], *,
             conn: psycopg.Connection | None = None) -> Any:
        """Runs ``fn()`` at most once across the job's attempts, as long as it returns:
        when an earlier attempt saved a value under ``name`` (``job.checkpoints``), returns
        that value without calling fn; else calls fn, saves what it returns with
        jobs_checkpoint, remembers it in ``job.checkpoints`` and returns it.

        The value must be JSON; a retry gets it back as JSON decodes it (a tuple comes
        back a list). Raises JobNotHeld, without saving, when the job is no longer held
        at ``job.attempt``: fn has then run for nothing. An exception from fn saves nothing,
        so the next attempt calls fn again. With ``conn``, the value is saved in the
        caller's transaction, so fn's own writes there commit with it, or neither."""
        if name in job.checkpoints:
            return job.checkpoints[name]
        value = fn()
        if not self.checkpoint(job.id, job.attempt, name, value, conn=conn):
            raise JobNotHeld(job.id, job.attempt, f"step {name!r}")
        job.checkpoints[name] = value
        return value

    def progress(self, id: int, attempt: int, progress: Any, *,
                 conn: psycopg.Connection | None = None) -> bool:
        """jobs_progress: records ``progress`` (JSON; None is JSON null) as the running job's
        progress, replacing the last; False when the job is no longer held."""
        args = [_Arg("id", id, "bigint"), _Arg("attempt", attempt, "integer"), _Arg("progress", Jsonb(progress), "jsonb")]
        return bool(self._call("jobs_progress", args, conn, scalar=True, many=False))

    def fail(self, id: int, attempt: int, error: str, *, retry_at: datetime | None = None,
             conn: psycopg.Connection | None = None) -> str | None:
        """jobs_fail: records the failure and returns the job's new state ('queued' to
        retry, 'dead' when out of attempts), or None when the job was no longer held."""
        args = [
            _Arg("id", id, "bigint"),
            _Arg("attempt", attempt, "integer"),
            _Arg("error", storable_text(error) if isinstance(error, str) else error, "text"),
            _Arg("retry_at", retry_at, "timestamptz"),
        ]
        state = self._call("jobs_fail", args, conn, scalar=True, many=False)
        return None if state is None else str(state)

    def heartbeat(self, id: int, attempt: int, *, lease: Lease | None = None,
                  conn: psycopg.Connection | None = None) -> bool:
        """jobs_heartbeat: extends the lease; False when the job is no longer held."""
        args = [_Arg("id", id, "bigint"), _Arg("attempt", attempt, "integer"), _Arg("lease", lease, "interval")]
        return bool(self._call("jobs_heartbeat", args, conn, scalar=True, many=False))

    def heartbeat_many(self, ids: Sequence[int], attempts: Sequence[int], *, lease: Lease | None = None,
                       conn: psycopg.Connection | None = None) -> dict[int, bool]:
        """jobs_heartbeat_many: {id: extended} for the jobs still held. extended is False
        when another session had the row locked (call again at the next beat); an id
        missing from the result is no longer held."""
        args = [
            _Arg("ids", list(ids), "bigint[]"),
            _Arg("attempts", list(attempts), "integer[]"),
            _Arg("lease", lease, "interval"),
        ]
        rows = self._call("jobs_heartbeat_many", args, conn, scalar=False, many=True)
        return {r["id"]: r["extended"] for r in rows}

    def snooze(self, id: int, attempt: int, run_at: datetime | None = None, *,
               delay: timedelta | None = None, conn: psycopg.Connection | None = None) -> bool:
        """jobs_snooze: puts the running job back to run at run_at (or now() + delay)
        without using up an attempt; False when the job is no longer held."""
        if (run_at is None) == (delay is None):
            raise ValueError("snooze: give exactly one of run_at or delay")
        args = [
            _Arg("id", id, "bigint"),
            _Arg("attempt", attempt, "integer"),
            _Arg("run_at", run_at, "timestamptz"),
            _Arg("run_at", delay, "", sql="now() + %(run_at)s::interval"),
        ]
        return bool(self._call("jobs_snooze", args, conn, scalar=True, many=False))

    def cancel(self, id: int, attempt: int | None = None, error: str | None = None, *,
               conn: psycopg.Connection | None = None) -> bool:
        """jobs_cancel. With only ``id`` the operator's form: cancels the unfinished job
        whoever holds it. With ``attempt`` and ``error`` the worker's form, fenced like
        fail. True when the job was cancelled."""
        if (attempt is None) != (error is None):
            raise ValueError("cancel: give both attempt and error (worker's form) or neither (operator's form)")
        if isinstance(error, str):
            error = storable_text(error)
        args = [_Arg("id", id, "bigint"), _Arg("attempt", attempt, "integer"), _Arg("error", error, "text")]
        return bool(self._call("jobs_cancel", args, conn, scalar=True, many=False))

    def retry(self, id: int, *, conn: psycopg.Connection | None = None) -> bool:
        """jobs_retry: gives a dead or cancelled job another run, now."""
        return bool(self._call("jobs_retry", [_Arg("id", id, "bigint")], conn, scalar=True, many=False))

    # -- operators --------------------------------------------------------

    def stats(self, *, conn: psycopg.Connection | None = None) -> list[dict]:
        """jobs_stats: one dict per (queue, state) with jobs and oldest_ready_age."""
        return self._call("jobs_stats", [], conn, scalar=False, many=True)

    def requeue_expired(self, *, conn: psycopg.Connection | None = None) -> int:
        """jobs_requeue_expired: takes back running jobs whose lease expired; returns how many."""
        return self._call("jobs_requeue_expired", [], conn, scalar=True, many=False)

    def maintain(self, max_jobs: int | None = None, *, conn: psycopg.Connection | None = None) -> dict:
        """jobs_maintain: one bounded round of housekeeping (expired leases, retention)."""
        return self._call("jobs_maintain", [_Arg("max_jobs", max_jobs, "integer")], conn, scalar=False, many=False)


def _await_notification(conn: psycopg.Connection, on_notify: Callable[[psycopg.Notify], None],
                        notified: threading.Event, seconds: float) -> None:
    """Waits up to ``seconds`` on the idle listening connection until ``notified`` is set,
    passing each notification that arrives to on_notify (psycopg only dispatches those it
    reads during a query)."""
    pg = conn.pgconn
    end = time.monotonic() + seconds
    while not notified.is_set():
        left = end - time.monotonic()
        if left <= 0:
            return
        ready, _, _ = select.select([conn.fileno()], [], [], left)
        if not ready:
            return
        pg.consume_input()
        if pg.status != psycopg.pq.ConnStatus.OK:
            raise psycopg.OperationalError("wait: the listening connection was lost")
        while (n := pg.notifies()) is not None:
            on_notify(psycopg.Notify(n.relname.decode(), n.extra.decode(), n.be_pid))
