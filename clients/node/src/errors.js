// Errors the client raises, and the results a handler returns (or throws) to tell the worker
// what became of its job other than success or failure.

/**
 * A bad argument to a skiplock SQL function (SQLSTATE 22023, invalid_parameter_value).
 * `parameter` is the name the function reported in the error's COLUMN field, such as
 * "max_jobs" or "kinds[2]", so a program can tell which argument was wrong without parsing
 * the message.
 */
export class InvalidArgumentError extends Error {
  constructor(message, parameter, cause) {
    super(message, { cause });
    this.name = 'InvalidArgumentError';
    this.code = '22023';
    this.parameter = parameter;
  }
}

/** The reason a job's AbortSignal fires when the job ran past its timeout. */
export class JobTimeoutError extends Error {
  constructor(timeoutMs) {
    super(`job timed out after ${timeoutMs} ms`);
    this.name = 'JobTimeoutError';
  }
}

/**
 * The reason a job's AbortSignal fires when the worker learnt that it no longer holds the job
 * (a heartbeat found it re-claimed, cancelled or finished): stop, another worker may run it.
 * job.step and job.progress throw it when jobs_checkpoint or jobs_progress finds the job no
 * longer held. `id` and `attempt` name the job and the attempt that lost it.
 */
export class JobNotHeldError extends Error {
  constructor(id, attempt) {
    super(`job ${id} is no longer held at attempt ${attempt}`);
    this.name = 'JobNotHeldError';
    this.id = id;
    this.attempt = attempt;
  }
}

/**
 * Client.wait's error when the job has not finished (done, dead or cancelled) within the
 * timeout: the job may still finish later. `id` and `timeoutMs` say which wait gave up.
 */
export class WaitTimeoutError extends Error {
  constructor(id, timeoutMs) {
    super(`job ${id} did not finish within ${timeoutMs} ms`);
    this.name = 'WaitTimeoutError';
    this.id = id;
    this.timeoutMs = timeoutMs;
  }
}

/** Client.wait's error when no job has the id (never enqueued, or pruned since it finished). */
export class UnknownJobError extends Error {
  constructor(id) {
    super(`unknown job ${id}`);
    this.name = 'UnknownJobError';
    this.id = id;
  }
}

/**
 * The reason a job's AbortSignal fires when the worker shuts down and the job did not finish
 * within the grace period. The worker gives the job back with jobs_snooze(now()): interrupted,
 * not failed, so it spends no attempt.
 */
export class ShutdownError extends Error {
  constructor() {
    super('worker is shutting down');
    this.name = 'ShutdownError';
  }
}

/** A handler's result: put the job back for `delayMs` with jobs_snooze, spending no attempt. */
export class Snooze {
  constructor(delayMs = 0) {
    this.delayMs = Math.max(0, delayMs);
  }
}

/** A handler's result: the job can never succeed; cancel it (jobs_cancel's worker form). */
export class Cancel extends Error {
  constructor(reason = 'cancelled by handler') {
    super(typeof reason === 'string' ? reason : String(reason?.message ?? reason), {
      cause: reason instanceof Error ? reason : undefined,
    });
    this.name = 'Cancel';
  }
}

/** A handler's result: this attempt failed; retry at `at` instead of after jobs_backoff's delay. */
export class RetryAt extends Error {
  constructor(at, reason = 'retry requested by handler') {
    super(typeof reason === 'string' ? reason : String(reason?.message ?? reason), {
      cause: reason instanceof Error ? reason : undefined,
    });
    this.name = 'RetryAt';
    this.at = at instanceof Date ? at : new Date(at);
  }
}

/** snooze(ms) is `new Snooze(ms)`, to return or throw from a handler. */
export const snooze = (delayMs) => new Snooze(delayMs);
/** cancel(reason) is `new Cancel(reason)`. */
export const cancel = (reason) => new Cancel(reason);
/** retryAt(at, reason) is `new RetryAt(at, reason)`. */
export const retryAt = (at, reason) => new RetryAt(at, reason);

// wrapError turns a pg error from the SQL function `fn` into this package's errors: 22023
// becomes an InvalidArgumentError naming the parameter; anything else keeps its code and
// gains the function's name.
export function wrapError(fn, err) {
  if (err?.code === '22023') {
    return new InvalidArgumentError(err.message, err.column ?? null, err);
  }
  const wrapped = new Error(`skiplock: ${fn} failed: ${err?.message ?? err}`, { cause: err });
  if (err?.code) wrapped.code = err.code;
  return wrapped;
}
