"""Worker: the Go driver's worker loop for Python handlers.

Concurrency model: one OS thread per running job, at most ``slots`` of them
per queue, plus four helper threads (LISTEN, heartbeats and timeouts, batched
completion, maintenance). Threads rather than asyncio because psycopg's
blocking API and ordinary blocking handler code (ORMs, HTTP clients, CPU work
in C extensions) then work unchanged; an asyncio worker would force every
handler to be a coroutine and a single blocking call would stall every job. A
thread cannot be interrupted, so a handler learns it should stop (timeout,
lost lease, shutdown) from ``job.cancelled``, a threading.Event.
"""

from __future__ import annotations

import json
import logging
import os
import queue as queuelib
import select
import signal
import socket
import threading
import time
import traceback
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, Callable, Mapping

import psycopg
from psycopg.types.json import Jsonb

from .client import Client, Job, _unstorable, storable_text
from .errors import InvalidArgument
from .results import Cancel, RetryAt, Snooze

log = logging.getLogger("skiplock.worker")

Handler = Callable[[Job], Any]

# The most jobs one call of a batch handler gets by default (the Go driver's BatchMaxJobsDefault).
BATCH_MAX_JOBS_DEFAULT = 100


class Batch:
    """A batch handler, given as the value of a kind in Worker's ``handlers``: ``fn``
    gets a list of up to ``max_jobs`` jobs of the kind that one queue of the worker
    claimed together, and with ``max_wait`` (a timedelta or seconds; 0, the default, is
    no waiting) also those its later claims bring before the batch is full or
    ``max_wait`` has passed since its first job was claimed. Each job holds a slot of
    its queue while it waits and runs (so a batch never holds more jobs than the queue
    has slots), its lease is heartbeated, and it keeps its own attempt and outcome.

    What ``fn`` returns: None completes every job (without a result); a list with one
    entry per job settles each job on its own, read as a handler's return value would
    be (a value: done with that result; Snooze, Cancel, RetryAt; an exception instance:
    a failed attempt recording it). Raising (or returning Snooze, Cancel or RetryAt)
    gives every job of the batch that outcome, as a handler raising it would have.
    """

    def __init__(self, fn: Callable[[list[Job]], Any], *, max_jobs: int = BATCH_MAX_JOBS_DEFAULT,
                 max_wait: timedelta | float = 0):
        if not callable(fn):
            raise TypeError("Batch: fn must be callable")
        if max_jobs < 1:
            raise ValueError("Batch: max_jobs must be at least 1")
        self.fn = fn
        self.max_jobs = max_jobs
        self.max_wait = _seconds(max_wait)
        if self.max_wait < 0:
            raise ValueError("Batch: max_wait must not be negative")


class _Batch:
    """Jobs of one batch kind gathered for one call of its handler (Worker._gather)."""

    def __init__(self, handler: Batch, key: tuple[str, str], size: int):
        self.handler = handler
        self.key = key
        self.size = size
        self.opened = time.monotonic()
        self.full = threading.Event()
        self.exs: list[_Execution] = []

# The Go driver's defaults (driver/config.go), so both kinds of worker behave alike.
SLOTS_DEFAULT = 10
LEASE_DEFAULT = timedelta(minutes=5)
TIMEOUT_DEFAULT = timedelta(minutes=1)
POLL_INTERVAL_DEFAULT = timedelta(seconds=1)
MAINTAIN_INTERVAL_DEFAULT = timedelta(seconds=5)
SHUTDOWN_TIMEOUT_DEFAULT = timedelta(seconds=10)
# How long shutdown waits for handlers told to stop before abandoning them.
SHUTDOWN_ABANDON_AFTER = 5.0
COMPLETE_BATCH_DELAY_DEFAULT = timedelta(milliseconds=2)
COMPLETE_BATCH_SIZE_DEFAULT = 100
# A completion batch, or a failure, snooze or cancellation, that fails with a connection error
# is retried with this backoff (seconds) until shutdown, which makes one last attempt, as the
# Go driver does.
COMPLETE_RETRY_MIN = 0.05
COMPLETE_RETRY_MAX = 2.0
# The most jobs one claim takes, never more than the free slots (the Go driver's BatchSizeDefault).
CLAIM_BATCH_MAX = 1000


def _seconds(value: timedelta | float | None) -> float | None:
    if value is None:
        return None
    if isinstance(value, timedelta):
        return value.total_seconds()
    return float(value)


@dataclass
class WorkerStats:
    """Counters of what became of the jobs this worker ran.

    ``fenced`` counts results the database refused because the job was no
    longer this worker's (its lease expired and it was taken back, or an
    operator cancelled it): never retried, only counted and logged. ``lost``
    counts jobs a heartbeat found no longer held while their handler ran.
    """

    claimed: int = 0
    completed: int = 0
    failed: int = 0
    snoozed: int = 0
    cancelled: int = 0
    timed_out: int = 0
    fenced: int = 0
    lost: int = 0
    given_back: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def add(self, name: str, n: int = 1) -> None:
        with self._lock:
            setattr(self, name, getattr(self, name) + n)


class _Execution:
    """One running job: its deadline and whether its outcome has been decided.

    ``settled`` is set exactly once, by whichever comes first: the handler's
    result, its timeout, a heartbeat that found the job lost, or the handler
    completing the job in its own transaction (Worker.complete_tx).
    """

    def __init__(self, job: Job, deadline: float | None):
        self.job = job
        self.deadline = deadline
        self.settled = False
        # shutdown: the shutdown timeout passed while the handler ran; an exception it then
        # raises releases the job (no attempt spent) instead of failing it.
        self.shutdown = False
        self.lock = threading.Lock()

    def settle(self) -> bool:
        with self.lock:
            if self.settled:
                return False
            self.settled = True
            return True


class Worker:
    """Runs handlers for claimed jobs until stopped.

    ``handlers`` maps a job kind to a function taking the Job. What it returns
    completes the job (batched through jobs_complete_many) with that value as the
    job's result (JSON; None records no result), unless it returns or raises
    Snooze, Cancel or RetryAt; any other exception, or a result that is not JSON,
    fails the job with its traceback as the error (jobs_fail; retried after
    jobs_backoff until the attempts run out). A result the database refuses (over
    its size limit) fails the job with the database's message, and holds up no
    other job of its batch. ``queues`` maps a queue name to its slots, the most of
    its jobs run at once (default {"default": SLOTS_DEFAULT}).

    Durations accept a timedelta or seconds. ``timeout`` bounds one handler's
    run (None: no timeout); when it passes, ``job.cancelled`` is set and the
    job is failed at once with a timeout error, whatever the handler does later.
    ``heartbeat_interval`` defaults to a third of ``lease``. ``shutdown_timeout``
    None waits for running handlers without limit (see _shutdown for the rest).
    ``maintain_interval`` None disables the periodic jobs_maintain.
    """

    def __init__(self, client: Client, handlers: Mapping[str, Handler],
                 queues: Mapping[str, int] | None = None, *, name: str | None = None,
                 lease: timedelta | float = LEASE_DEFAULT,
                 timeout: timedelta | float | None = TIMEOUT_DEFAULT,
                 poll_interval: timedelta | float = POLL_INTERVAL_DEFAULT,
                 heartbeat_interval: timedelta | float | None = None,
                 shutdown_timeout: timedelta | float = SHUTDOWN_TIMEOUT_DEFAULT,
                 maintain_interval: timedelta | float | None = MAINTAIN_INTERVAL_DEFAULT,
                 complete_batch_delay: timedelta | float = COMPLETE_BATCH_DELAY_DEFAULT,
                 complete_batch_size: int = COMPLETE_BATCH_SIZE_DEFAULT):
        self.client = client
        self.handlers = dict(handlers)
        self.queues = dict(queues) if queues is not None else {"default": SLOTS_DEFAULT}
        for q, slots in self.queues.items():
            if slots < 1:
                raise ValueError(f"Worker: queues[{q!r}] must be at least 1 slot")
        if not self.handlers:
            raise ValueError("Worker: handlers must name at least one kind")
        for kind, h in self.handlers.items():
            if isinstance(h, Batch) and h.max_wait >= _seconds(lease) / 2:
                raise ValueError(f"Worker: handlers[{kind!r}].max_wait must be below half of lease")
        # The name is a text parameter of jobs_claim; a hostname is only bytes to the kernel.
        self.name = name or f"{storable_text(socket.gethostname())}-{os.getpid()}-py"
        # Text jobs_claim would be refused: fail here, not in every claim of the fetch loop.
        for what, text in [("name", self.name), *((f"queues[{q!r}]", q) for q in self.queues)]:
            if problem := _unstorable(text):
                raise ValueError(f"Worker: {what} {problem}")
        if len(self.name.encode()) > 200:
            raise ValueError(f"Worker: name must be at most 200 bytes, got {len(self.name.encode())}")
        self.lease = timedelta(seconds=_seconds(lease))
        if self.lease <= timedelta(0):
            raise ValueError("Worker: lease must be positive")
        self.timeout = _seconds(timeout)
        if self.timeout is not None and self.timeout <= 0:
            raise ValueError("Worker: timeout must be positive, or None for no timeout")
        self.poll_interval = _seconds(poll_interval)
        if self.poll_interval <= 0:
            raise ValueError("Worker: poll_interval must be positive")
        self.heartbeat_interval = _seconds(heartbeat_interval) or self.lease.total_seconds() / 3
        self.shutdown_timeout = _seconds(shutdown_timeout)
        self.maintain_interval = _seconds(maintain_interval)
        self.complete_batch_delay = _seconds(complete_batch_delay)
        self.complete_batch_size = complete_batch_size
        self.stats = WorkerStats()
        # listening is set once LISTEN jobs_ready is in place (tests wait for it).
        self.listening = threading.Event()

        self._stopping = threading.Event()  # stop claiming
        self._closing = threading.Event()  # handlers are done or abandoned: stop the helpers
        self._stopped = threading.Event()
        self._wake = threading.Event()
        self._lock = threading.Lock()
        self._busy = {q: 0 for q in self.queues}
        self._more = {q: False for q in self.queues}
        self._running: dict[int, _Execution] = {}
        # Jobs whose handler succeeded, waiting for their completion to be written: they keep
        # heartbeating meanwhile, so a completion retried through an outage keeps its lease.
        self._completing: dict[int, Job] = {}
        self._job_threads: set[threading.Thread] = set()
        # The batch of each (queue, kind) of a batch handler still taking jobs (_gather).
        self._open: dict[tuple[str, str], _Batch] = {}
        self._completions: queuelib.Queue = queuelib.Queue()
        self._thread: threading.Thread | None = None
        self._ran = False

    # -- public -----------------------------------------------------------

    def run(self) -> None:
        """Works jobs until stop(), SIGTERM or SIGINT, then shuts down gracefully:
        stops claiming, waits up to shutdown_timeout for running handlers, flushes
        completions. Signal handlers are installed only when called from the main thread."""
        self._claim_run()
        previous = {}
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGTERM, signal.SIGINT):
                previous[sig] = signal.signal(sig, lambda *_: self.stop())
        try:
            self._run()
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)

    def start(self) -> "Worker":
        """Runs the worker in a background thread; stop(wait=True) ends it."""
        self._claim_run()
        self._thread = threading.Thread(target=self._run, name=f"skiplock-worker-{self.name}", daemon=True)
        self._thread.start()
        return self

    def _claim_run(self) -> None:
        with self._lock:
            if self._ran:
                raise RuntimeError("Worker: already run; a worker runs once, make a new one to run again")
            self._ran = True

    def stop(self, wait: bool = False) -> None:
        """Asks the worker to shut down gracefully; with wait, until it has (from
        another thread than run()'s). Before run() or start(), they then return at once."""
        self._stopping.set()
        self._wake.set()
        with self._lock:
            ran = self._ran
        if wait and ran:
            self._stopped.wait()

    def complete_tx(self, job: Job, conn: psycopg.Connection, result: Any = None) -> bool:
        """Completes the job inside the caller's transaction, so its effects and the
        completion commit together (exactly-once effects), with ``result`` (JSON; None
        records none) as its result. Returns False when the job is no longer this
        worker's: then roll back. The worker then does not complete the job again, and
        what the handler returns later is ignored; if the caller's transaction rolls
        back anyway, the job's lease lapses and it is run again."""
        ex = self._running.get(job.id)
        if ex is None or ex.job.attempt != job.attempt or not ex.settle():
            self.stats.add("fenced")
            log.warning("skiplock: job %d attempt %d is no longer held; not completing it", job.id, job.attempt)
            return False
        try:
            ok = self.client.complete(job.id, job.attempt, result, conn=conn)
        except BaseException:
            with ex.lock:
                ex.settled = False  # nothing was recorded: the handler's outcome decides
            raise
        self.stats.add("completed" if ok else "fenced")
        if not ok:
            log.warning("skiplock: complete of job %d attempt %d was fenced: the job is no longer held",
                        job.id, job.attempt)
        return ok

    # -- the loop ----------------------------------------------------------

    def _run(self) -> None:
        helpers = [
            threading.Thread(target=self._listen, name="skiplock-listen", daemon=True),
            threading.Thread(target=self._heartbeat_loop, name="skiplock-heartbeat", daemon=True),
            threading.Thread(target=self._complete_loop, name="skiplock-complete", daemon=True),
        ]
        if self.maintain_interval:
            helpers.append(threading.Thread(target=self._maintain_loop, name="skiplock-maintain", daemon=True))
        for t in helpers:
            t.start()
        try:
            self._fetch_loop()
        finally:
            self._shutdown(helpers)
            self._stopped.set()

    def _fetch_loop(self) -> None:
        while not self._stopping.is_set():
            self._wake.clear()
            try:
                for q, slots in self.queues.items():
                    with self._lock:
                        free = slots - self._busy[q]
                    if free <= 0 or self._stopping.is_set():
                        continue
                    want = min(free, CLAIM_BATCH_MAX)
                    try:
                        jobs = self.client.claim(self.name, want, queues=[q], lease=self.lease)
                    except Exception:
                        log.exception("skiplock: claim from queue %r failed; trying again in %.1fs", q, self.poll_interval)
                        continue
                    self.stats.add("claimed", len(jobs))
                    with self._lock:
                        self._more[q] = len(jobs) == want
                    # Batches start after the whole claim is gathered: its jobs of a kind go together.
                    opened = [b for b in (self._start(job) for job in jobs) if b is not None]
                    for b in opened:
                        self._start_batch(b)
            except Exception:
                log.exception("skiplock: fetch loop error; trying again in %.1fs", self.poll_interval)
            self._wake.wait(self.poll_interval)

    def _start(self, job: Job) -> "_Batch | None":
        """Starts the job on a thread of its own, or, for a batch kind, adds it to its
        batch; returns a batch it opened, for the caller to start (_start_batch)."""
        if self._stopping.is_set():
            # Claimed but not started when shutdown began: give it back now rather
            # than let it wait out its lease.
            try:
                if self.client.snooze(job.id, job.attempt, delay=timedelta(0)):
                    self.stats.add("given_back")
            except Exception:
                log.exception("skiplock: could not give back job %d", job.id)
            return None
        handler = self.handlers.get(job.kind)
        if isinstance(handler, Batch):
            return self._gather(job, handler)
        deadline = time.monotonic() + self.timeout if self.timeout else None
        ex = _Execution(job, deadline)
        t = threading.Thread(target=self._execute, args=(ex,), name=f"skiplock-job-{job.id}", daemon=True)
        with self._lock:
            self._busy[job.queue] += 1
            self._running[job.id] = ex
            self._job_threads.add(t)
        t.start()
        return None

    def _gather(self, job: Job, handler: Batch) -> "_Batch | None":
        """Adds a job of a batch kind to its queue's open batch of the kind, or opens one
        (returned, for the caller to start). The job holds its slot from now on."""
        key = (job.queue, job.kind)
        ex = _Execution(job, None)  # the deadline starts with the handler's call
        with self._lock:
            self._busy[job.queue] += 1
            self._running[job.id] = ex
            b = self._open.get(key)
            if b is not None:
                b.exs.append(ex)
                if len(b.exs) >= b.size:
                    del self._open[key]
                    b.full.set()
                return None
            b = _Batch(handler, key, min(handler.max_jobs, self.queues[job.queue]))
            b.exs.append(ex)
            if b.size > 1:
                self._open[key] = b
            else:
                b.full.set()
            return b

    def _start_batch(self, b: _Batch) -> None:
        t = threading.Thread(target=self._execute_batch, args=(b,), name=f"skiplock-batch-{b.key[1]}", daemon=True)
        with self._lock:
            self._job_threads.add(t)
        t.start()

    def _execute_batch(self, b: _Batch) -> None:
        """Waits up to max_wait since the batch opened for it to fill (or for shutdown),
        closes it, calls the handler once and settles each job on its own."""
        exs: list[_Execution] = []
        try:
            end = b.opened + b.handler.max_wait
            while not b.full.is_set() and not self._stopping.is_set() and time.monotonic() < end:
                b.full.wait(min(0.02, max(end - time.monotonic(), 0)))
            with self._lock:
                if self._open.get(b.key) is b:
                    del self._open[b.key]
                exs = list(b.exs)
            deadline = time.monotonic() + self.timeout if self.timeout else None
            for ex in exs:
                ex.deadline = deadline
            try:
                returned = b.handler.fn([ex.job for ex in exs])
                if returned is None:
                    outcomes = [_Success(None)] * len(exs)
                elif isinstance(returned, (Snooze, Cancel, RetryAt)):
                    outcomes = [returned] * len(exs)
                else:
                    returned = list(returned)
                    if len(returned) != len(exs):
                        raise ValueError(f"skiplock: the batch handler returned {len(returned)} outcomes for {len(exs)} jobs")
                    outcomes = [self._batch_outcome(ex, r) for ex, r in zip(exs, returned)]
            except (Snooze, Cancel, RetryAt) as r:
                outcomes = [r] * len(exs)
            except BaseException:
                error = traceback.format_exc()
                outcomes = [_Release() if ex.shutdown else _Failure(error) for ex in exs]
            for ex, outcome in zip(exs, outcomes):
                self._settle(ex, outcome)
        finally:
            more = False
            with self._lock:
                for ex in exs:
                    self._busy[ex.job.queue] -= 1
                    if self._running.get(ex.job.id) is ex:
                        del self._running[ex.job.id]
                    more = more or self._more[ex.job.queue]
                self._job_threads.discard(threading.current_thread())
            if more:
                self._wake.set()

    @staticmethod
    def _batch_outcome(ex: _Execution, r: Any) -> Any:
        """One entry of a batch handler's list, as the outcome _settle records."""
        if isinstance(r, (Snooze, Cancel, RetryAt)):
            return r
        if isinstance(r, BaseException):
            if ex.shutdown:
                return _Release()
            return _Failure("".join(traceback.format_exception(r)))
        try:
            return _Success(_encode_result(r))
        except TypeError:
            return _Failure(traceback.format_exc())

    def _execute(self, ex: _Execution) -> None:
        job = ex.job
        try:
            handler = self.handlers.get(job.kind)
            try:
                if handler is None:
                    raise LookupError(f"skiplock: no handler for kind {job.kind!r}")
                result = handler(job)
                if not isinstance(result, (Snooze, Cancel, RetryAt)):
                    result = _Success(_encode_result(result))
            except (Snooze, Cancel, RetryAt) as r:
                result = r
            except BaseException:
                result = _Release() if ex.shutdown else _Failure(traceback.format_exc())
            self._settle(ex, result)
        finally:
            with self._lock:
                self._busy[job.queue] -= 1
                if self._running.get(job.id) is ex:
                    del self._running[job.id]
                self._job_threads.discard(threading.current_thread())
                more = self._more[job.queue]
            if more:
                self._wake.set()

    def _settle(self, ex: _Execution, result: Any) -> None:
        job = ex.job
        if not ex.settle():
            log.debug("skiplock: result of job %d attempt %d ignored: already settled (timed out, lost or completed by its handler)",
                     job.id, job.attempt)
            return
        c = self.client
        try:
            if isinstance(result, Snooze):
                self._record("snoozed", job, self._outcome("jobs_snooze", job, lambda: c.snooze(job.id, job.attempt, delay=result.delay)))
            elif isinstance(result, Cancel):
                self._record("cancelled", job, self._outcome("jobs_cancel", job, lambda: c.cancel(job.id, job.attempt, result.reason)))
            elif isinstance(result, RetryAt):
                self._record("failed", job, self._outcome("jobs_fail", job,
                             lambda: c.fail(job.id, job.attempt, result.error, retry_at=result.when)) is not None)
            elif isinstance(result, _Failure):
                self._record("failed", job, self._outcome("jobs_fail", job, lambda: c.fail(job.id, job.attempt, result.error)) is not None)
            elif isinstance(result, _Release):
                self._record("given_back", job, self._outcome("jobs_snooze", job, lambda: c.snooze(job.id, job.attempt, delay=timedelta(0))))
            else:
                with self._lock:
                    self._completing[job.id] = job
                self._completions.put((job, result.result))
        except Exception:
            log.exception("skiplock: recording the outcome of job %d failed; its lease will lapse and it will run again",
                          job.id)

    def _outcome(self, function: str, job: Job, call: Callable[[], Any]) -> Any:
        """Runs call, the fenced call that records job's outcome (jobs_fail, jobs_snooze or
        jobs_cancel), as the Go driver records outcomes: retried through connection errors
        (_retrying), since the call is fenced and repeating it is safe. Any other error is
        raised: the job runs again once its lease expires."""
        return self._retrying(f"{function} of job {job.id}", call)

    def _retrying(self, what: str, call: Callable[[], Any]) -> Any:
        """Runs call; a connection error (a lost connection, a server restart: _retryable) is
        retried with a capped backoff until shutdown closes the helpers, then one last
        attempt is made. Any other error, or the last attempt's, is raised."""
        delay = COMPLETE_RETRY_MIN
        while True:
            last = self._closing.is_set()
            try:
                return call()
            except Exception as e:
                if last or not _retryable(e):
                    raise
                log.warning("skiplock: %s failed; retrying in %.2fs: %s", what, delay, e)
                self._closing.wait(delay)
                delay = min(delay * 2, COMPLETE_RETRY_MAX)

    def _record(self, what: str, job: Job, held: bool) -> None:
        if held:
            self.stats.add(what)
        else:
            self.stats.add("fenced")
            log.warning("skiplock: job %d attempt %d was no longer held; its result (%s) was refused",
                        job.id, job.attempt, what)

    # -- helpers -------------------------------------------------------------

    def _listen(self) -> None:
        """LISTEN jobs_ready on a connection of its own; a notification for one of our
        queues wakes the fetch loop. The poll covers anything a notification misses."""
        while not self._stopping.is_set():
            try:
                with self.client.connect(autocommit=True) as conn:
                    conn.execute("LISTEN jobs_ready")
                    self.listening.set()
                    self._wake.set()  # notifications sent while we were not listening are lost
                    pg = conn.pgconn
                    while not self._stopping.is_set():
                        ready, _, _ = select.select([conn.fileno()], [], [], 0.2)
                        if not ready:
                            continue
                        pg.consume_input()
                        if pg.status != psycopg.pq.ConnStatus.OK:
                            raise psycopg.OperationalError("listen connection lost")
                        while (n := pg.notifies()) is not None:
                            if n.extra.decode() in self.queues:
                                self._wake.set()
            except Exception:
                self.listening.clear()
                log.exception("skiplock: LISTEN connection failed; reconnecting")
                self._stopping.wait(self.poll_interval)
        self.listening.clear()

    def _heartbeat_loop(self) -> None:
        next_beat = time.monotonic() + self.heartbeat_interval
        while not self._closing.wait(0.02):
            now = time.monotonic()
            with self._lock:
                running = [ex for ex in self._running.values() if not ex.settled]
            for ex in running:
                if ex.deadline is not None and now >= ex.deadline:
                    self._time_out(ex)
            if now >= next_beat:
                next_beat = now + self.heartbeat_interval
                with self._lock:
                    completing = list(self._completing.values())
                self._heartbeat([ex for ex in running if not ex.settled], completing)

    def _idle(self) -> bool:
        with self._lock:
            return not self._job_threads

    def _time_out(self, ex: _Execution) -> None:
        if not ex.settle():
            return
        job = ex.job
        job.cancelled.set()
        self.stats.add("timed_out")
        log.warning("skiplock: job %d (%s) timed out after %.3fs", job.id, job.kind, self.timeout)
        # On a thread of its own: retrying the failure through a lost connection must not hold
        # up the heartbeats of the other jobs.
        threading.Thread(target=self._record_timeout, args=(job,), name=f"skiplock-timeout-{job.id}", daemon=True).start()

    def _record_timeout(self, job: Job) -> None:
        error = f"job timed out after {self.timeout}s"
        try:
            self._record("failed", job, self._outcome("jobs_fail", job, lambda: self.client.fail(job.id, job.attempt, error)) is not None)
        except Exception:
            log.exception("skiplock: recording the timeout of job %d failed", job.id)

    def _heartbeat(self, running: list[_Execution], completing: list[Job]) -> None:
        if not running and not completing:
            return
        jobs = [ex.job for ex in running] + completing
        try:
            held = self.client.heartbeat_many([j.id for j in jobs], [j.attempt for j in jobs], lease=self.lease)
        except Exception:
            log.exception("skiplock: heartbeat failed; trying again at the next beat")
            return
        for ex in running:
            if ex.job.id not in held and ex.settle():
                ex.job.cancelled.set()
                self.stats.add("lost")
                log.warning("skiplock: job %d attempt %d is no longer held (lease expired or cancelled); its handler was told to stop",
                            ex.job.id, ex.job.attempt)

    def _complete_loop(self) -> None:
        while True:
            try:
                first = self._completions.get(timeout=0.1)
            except queuelib.Empty:
                continue
            if first is None:
                self._drain_completions()
                return
            batch = [first]
            deadline = time.monotonic() + self.complete_batch_delay
            while len(batch) < self.complete_batch_size:
                left = deadline - time.monotonic()
                try:
                    item = self._completions.get(timeout=max(left, 0)) if left > 0 else self._completions.get_nowait()
                except queuelib.Empty:
                    break
                if item is None:
                    self._flush(batch)
                    self._drain_completions()
                    return
                batch.append(item)
            self._flush(batch)

    def _drain_completions(self) -> None:
        batch = []
        while True:
            try:
                item = self._completions.get_nowait()
            except queuelib.Empty:
                break
            if item is not None:
                batch.append(item)
        for i in range(0, len(batch), self.complete_batch_size):
            self._flush(batch[i:i + self.complete_batch_size])

    def _flush(self, batch: list[tuple[Job, Jsonb | None]]) -> None:
        """Completes one batch of (job, result). A failed batch changed nothing (one
        statement) and its jobs are done, so a connection error (a server restart, a lost
        connection) is retried, the jobs heartbeating meanwhile, until shutdown closes the
        helpers; then one last attempt is made. A result the database refuses (a data
        error, SQLSTATE class 22: over the size limit) fails the whole statement, so the
        batch is then completed job by job (_complete_one). Any other error drops the
        batch: its jobs run again after their lease expires."""
        if not batch:
            return
        jobs = [job for job, _ in batch]
        results = [result for _, result in batch]
        # results only when some job has one: a batch without any sends what it always did.
        kw = {"results": results} if any(r is not None for r in results) else {}
        try:
            try:
                done = set(self._retrying(f"jobs_complete_many of {len(batch)} jobs",
                                          lambda: self.client.complete_many([j.id for j in jobs], [j.attempt for j in jobs], **kw)))
            except Exception as e:
                if _refused_data(e):
                    for job, result in batch:
                        self._complete_one(job, result)
                    return
                log.exception("skiplock: jobs_complete_many of %d jobs failed; they run again after their lease expires",
                              len(batch))
                return
            for job in jobs:
                self._record("completed", job, job.id in done)
        finally:
            with self._lock:
                for job in jobs:
                    self._completing.pop(job.id, None)

    def _complete_one(self, job: Job, result: Jsonb | None) -> None:
        """Completes one job of a batch the database refused: with jobs_complete, or, when
        its own result is what was refused, fails it with the database's message (fenced
        jobs_fail), as a handler's exception would."""
        try:
            try:
                held = self._retrying(f"jobs_complete of job {job.id}",
                                      lambda: self.client.complete(job.id, job.attempt, result))
                self._record("completed", job, held)
            except Exception as e:
                if not _refused_data(e):
                    raise
                log.warning("skiplock: the result of job %d was refused; failing the attempt: %s", job.id, e)
                error = f"skiplock: the job's result was refused: {e}"
                self._record("failed", job, self._outcome("jobs_fail", job,
                             lambda: self.client.fail(job.id, job.attempt, error)) is not None)
        except Exception:
            log.exception("skiplock: completing job %d failed; it runs again after its lease expires", job.id)

    def _maintain_loop(self) -> None:
        refused = False
        while not self._stopping.wait(self.maintain_interval):
            try:
                self.client.maintain()
            except psycopg.errors.InsufficientPrivilege:
                if not refused:
                    log.warning("skiplock: jobs_maintain refused (not jobs_admin); another process must call it")
                    refused = True
            except Exception:
                log.exception("skiplock: jobs_maintain failed")

    def _shutdown(self, helpers: list[threading.Thread]) -> None:
        """The Go driver's shutdown (driver.Client.Run): claiming has stopped; wait up to
        shutdown_timeout for running handlers (heartbeats go on meanwhile), then set
        job.cancelled and wait SHUTDOWN_ABANDON_AFTER more. A handler that then returns
        None completes its job; one that raises has its job released (jobs_snooze to now,
        no attempt spent). A handler still running after that is abandoned: its job runs
        again once its lease expires. Finally the pending completions are flushed."""
        self._stopping.set()
        if not self._wait_idle(self.shutdown_timeout):
            with self._lock:
                left = list(self._running.values())
            log.warning("skiplock: %d handlers still running after the shutdown timeout; telling them to stop", len(left))
            for ex in left:
                ex.shutdown = True
                ex.job.cancelled.set()
            if not self._wait_idle(SHUTDOWN_ABANDON_AFTER):
                log.warning("skiplock: abandoning %d handlers that ignore job.cancelled; their jobs run again after their lease expires",
                            len(self._job_threads))
        self._closing.set()
        self._completions.put(None)
        for t in helpers:
            t.join(timeout=10)

    def _wait_idle(self, timeout: float | None) -> bool:
        deadline = time.monotonic() + timeout if timeout is not None else None
        while not self._idle():
            if deadline is not None and time.monotonic() >= deadline:
                return False
            time.sleep(0.01)
        return True


def _retryable(err: BaseException) -> bool:
    """Whether a failed call may succeed if repeated, as the Go driver's retryable: a lost
    connection or a server shutting down or restarting (psycopg.OperationalError: SQLSTATE
    classes 08, 53, 57P01-57P03), a serialization failure or deadlock (40001, 40P01), as the
    Node client's retryable. An OperationalError without a SQLSTATE is the client's own (the
    connection broke); one the server sent with another code (54000, 55000, 57014, ...) is not
    retried: it would hold the job's slot until shutdown."""
    code = getattr(err, "sqlstate", None) or ""
    if not code:
        return isinstance(err, psycopg.OperationalError)
    return code[:2] in ("08", "53") or code in ("57P01", "57P02", "57P03", "40001", "40P01")


def _refused_data(err: BaseException) -> bool:
    """Whether the database refused a value sent to it (SQLSTATE class 22, data exception:
    a result over jobs_complete's size limit is 22023, which the client raises as
    InvalidArgument)."""
    if isinstance(err, InvalidArgument):
        return True
    return (getattr(err, "sqlstate", None) or "").startswith("22")


def _identity(text: str) -> str:
    return text


def _encode_result(value: Any) -> Jsonb | None:
    """A handler's return value as the jsonb the worker completes its job with, encoded in
    the handler's thread: a value that is not JSON (an object json cannot encode, NaN or an
    infinity, which PostgreSQL refuses) then fails its own job with a traceback, not the
    completion batch it would have joined. None is no result."""
    if value is None:
        return None
    try:
        text = json.dumps(value, allow_nan=False)
    except (TypeError, ValueError) as e:
        raise TypeError(f"skiplock: the handler's return value, the job's result, must be JSON: {e}") from e
    return Jsonb(text, dumps=_identity)


class _Success:
    """A handler's return value: the job is done, with this result (None: no result)."""

    def __init__(self, result: Jsonb | None):
        self.result = result


class _Release:
    """The exception of a handler told to stop by shutdown: give the job back, unfailed."""


class _Failure:
    """A handler's exception, as the traceback text jobs_fail records."""

    def __init__(self, error: str):
        self.error = error


__all__ = ["Worker", "WorkerStats", "Handler", "Batch", "BATCH_MAX_JOBS_DEFAULT"]
