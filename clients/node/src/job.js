// Job: a claimed job, as jobs_claim returned it, with the calls a handler makes about its own
// job while it holds it (step, progress), each fenced by the job's attempt.

import { JobNotHeldError } from './errors.js';

/**
 * A job claimed with jobs_claim. Fields: id, queue, kind, payload, attempt, maxAttempts,
 * priority, runAt, leaseExpiresAt, createdAt, meta, parentResults and checkpoints.
 *
 * parentResults is null for a job without parents; else an object of the parents' results,
 * keyed by step name for a workflow step and by the parent's id (as text) for a job enqueued
 * with dependsOn. checkpoints is null until a step of the job saved a value; then an object
 * step name -> saved value.
 */
export class Job {
  // The Client that claimed the job, for step and progress; private, so that the job logs and
  // compares as its fields.
  #client;

  constructor(client, r) {
    this.#client = client;
    this.id = toId(r.id);
    this.queue = r.queue;
    this.kind = r.kind;
    this.payload = r.payload;
    this.attempt = r.attempt;
    this.maxAttempts = r.max_attempts;
    this.priority = r.priority;
    this.runAt = r.run_at;
    this.leaseExpiresAt = r.lease_expires_at;
    this.createdAt = r.created_at;
    this.meta = r.meta ?? null;
    this.parentResults = r.parent_results ?? null;
    this.checkpoints = r.checkpoints ?? null;
  }

  /**
   * Runs `fn` (sync or async) once across the job's attempts: when an earlier attempt saved
   * step `name`, returns its saved value without running fn; else runs fn, saves what it
   * returned with jobs_checkpoint and returns it. The value is returned as JSON gives it back
   * (a Date becomes its ISO string, undefined null), the same on the attempt that ran fn as
   * on a retry. Throws JobNotHeldError when the job is no longer held (its value is not
   * saved), and what fn throws (nothing is saved; a retry runs fn again).
   */
  async step(name, fn) {
    if (typeof name !== 'string') throw new TypeError('skiplock: job.step needs a step name (a string)');
    if (typeof fn !== 'function') throw new TypeError(`skiplock: job.step ${JSON.stringify(name)} needs a function`);
    if (this.checkpoints !== null && Object.hasOwn(this.checkpoints, name)) return this.checkpoints[name];
    const value = JSON.parse(JSON.stringify(await fn()) ?? 'null');
    if (!(await this.#client.checkpoint(this.id, this.attempt, name, value))) {
      throw new JobNotHeldError(this.id, this.attempt);
    }
    this.checkpoints = { ...this.checkpoints, [name]: value };
    return value;
  }

  /**
   * Records `value` (anything JSON can hold; undefined clears it) as the job's progress with
   * jobs_progress, for Client.get and jobs_list to show. Throws JobNotHeldError when the job
   * is no longer held.
   */
  async progress(value) {
    if (!(await this.#client.progress(this.id, this.attempt, value))) {
      throw new JobNotHeldError(this.id, this.attempt);
    }
  }
}

/** toId is a bigint id pg returned (as text) as a JavaScript number; null and undefined stay. */
export const toId = (v) => (v === null || v === undefined ? v : Number(v));
