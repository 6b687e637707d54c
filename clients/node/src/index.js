// skiplock for Node: a thin client over skiplock's SQL functions and a worker with the Go
// driver's contract. See README.md in this folder; index.d.ts declares the same API.
export { Client, WAIT_POLL_INTERVAL_DEFAULT } from './client.js';
export { Job } from './job.js';
export {
  Worker, Batch, BATCH_MAX_JOBS_DEFAULT, LEASE_DEFAULT, JOB_TIMEOUT_DEFAULT, POLL_INTERVAL_DEFAULT, MAINTAIN_INTERVAL_DEFAULT,
  SHUTDOWN_TIMEOUT_DEFAULT, COMPLETE_BATCH_DELAY_DEFAULT, COMPLETE_BATCH_SIZE_DEFAULT, SLOTS_DEFAULT,
} from './worker.js';
export {
  InvalidArgumentError, JobTimeoutError, JobNotHeldError, ShutdownError, WaitTimeoutError, UnknownJobError,
  Snooze, Cancel, RetryAt, snooze, cancel, retryAt,
} from './errors.js';
