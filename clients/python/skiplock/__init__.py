"""skiplock: a Python client and worker for the skiplock PostgreSQL job queue.

The queue's rules live in skiplock's SQL functions; ``Client`` is one method per
function and ``Worker`` is the worker loop of the Go driver (LISTEN plus poll,
claims sized to free slots, batched completion, heartbeats, fencing, per-job
timeouts and graceful shutdown), which records a handler's return value as
its job's result. Workflows: enqueue's depends_on, enqueue_workflow,
Client.wait, Job.step and Job.progress. See README.md beside this package.
"""

from .client import Client, Job
from .errors import InvalidArgument, JobNotHeld, SkiplockError, UnknownJob, WaitTimeout
from .results import Cancel, RetryAt, Snooze

__all__ = ["Client", "Job", "InvalidArgument", "JobNotHeld", "SkiplockError", "UnknownJob", "WaitTimeout",
           "Snooze", "Cancel", "RetryAt"]

from .worker import Batch, Worker, WorkerStats  # noqa: E402

__all__ += ["Batch", "Worker", "WorkerStats"]
