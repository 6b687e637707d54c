"""Errors raised by the skiplock client."""

from __future__ import annotations

import psycopg


class SkiplockError(Exception):
    """Base class of the errors this package raises itself."""


class InvalidArgument(SkiplockError, ValueError):
    """A skiplock function rejected an argument (SQLSTATE 22023).

    ``parameter`` is the SQL parameter's name as the function reported it in the
    error's COLUMN field (``max_jobs``, or ``kinds[2]`` for an element of an
    array argument), so a program can tell which argument was wrong without
    parsing ``message``.
    """

    def __init__(self, parameter: str | None, message: str):
        super().__init__(message)
        self.parameter = parameter
        self.message = message


def translate(err: psycopg.Error) -> Exception:
    """The exception to raise for a database error: InvalidArgument for 22023, else err."""
    if err.sqlstate == "22023":
        return InvalidArgument(err.diag.column_name, err.diag.message_primary or str(err))
    return err


class JobNotHeld(SkiplockError):
    """The job is no longer held at this attempt (the Go driver's ErrNotHeld, Node's
    JobNotHeldError): its lease expired and it was taken back, maybe by another worker,
    or an operator cancelled it. Raised by ``Job.step`` and ``Job.progress`` when the
    fenced jobs_checkpoint or jobs_progress refused the call; nothing was recorded. A
    handler may let it propagate: the worker's own fenced outcome is then refused too,
    and counted in ``worker.stats.fenced``.
    """

    def __init__(self, job_id: int, attempt: int, what: str):
        super().__init__(f"{what} of job {job_id} attempt {attempt} refused: the job is no longer held")
        self.job_id = job_id
        self.attempt = attempt


class UnknownJob(SkiplockError, LookupError):
    """No job has this id (never enqueued, or already pruned by retention). Raised by
    ``Client.wait``."""

    def __init__(self, job_id: int):
        super().__init__(f"unknown job {job_id}")
        self.job_id = job_id


class WaitTimeout(SkiplockError, TimeoutError):
    """``Client.wait`` gave up: the job had not finished (done, dead or cancelled) when
    ``timeout`` seconds passed. It says nothing about the job, which may still finish."""

    def __init__(self, job_id: int, timeout: float, state: str | None):
        super().__init__(f"job {job_id} not finished after {timeout:g}s (state {state})")
        self.job_id = job_id
        self.timeout = timeout
        self.state = state
