"""What a handler may return (or raise) instead of finishing normally.

A handler that returns None completes its job; one that raises any other
exception fails it (the traceback is recorded by jobs_fail and the job retries
after jobs_backoff until its attempts run out). These three say something else,
like the Go driver's JobSnooze, JobCancel and retry-at results. Each is an
exception, so a handler may either ``return`` or ``raise`` it.
"""

from __future__ import annotations

from datetime import datetime, timedelta


class Snooze(Exception):
    """Put the job back to run again after ``delay`` (jobs_snooze).

    A snooze is not a failure: it records no error and does not use up an
    attempt (jobs_snooze raises max_attempts).
    """

    def __init__(self, delay: timedelta | float):
        if not isinstance(delay, timedelta):
            delay = timedelta(seconds=delay)
        if delay < timedelta(0):
            raise ValueError("Snooze: delay must not be negative")
        super().__init__(f"snooze {delay}")
        self.delay = delay


class Cancel(Exception):
    """Give up on the job for good: it becomes cancelled with ``reason`` as its error
    (the worker's form of jobs_cancel)."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


class RetryAt(Exception):
    """Fail this attempt with ``error`` and retry at ``when`` instead of after the
    backoff (jobs_fail's retry_at). On the last attempt the job is dead all the same."""

    def __init__(self, when: datetime, error: str = "retry requested"):
        if when.tzinfo is None:
            raise ValueError("RetryAt: when must be timezone-aware")
        super().__init__(error)
        self.when = when
        self.error = error
