// Worker: the Go driver's worker loop in JavaScript. What runs concurrently, all on the one
// event loop:
//   - the fetch loop (fetchLoop): waits for a wake-up (a jobs_ready notification for one of
//     its queues, the poll timer, a freed slot) and claims, per queue, as many jobs as that
//     queue has free slots;
//   - the listener: a dedicated pg connection that LISTENs on jobs_ready and reconnects after
//     losing its connection (then wakes the fetch loop, since notifications were missed);
//   - one promise per running job: the handler, given an AbortSignal that fires on timeout, on
//     losing the job, and at the end of the shutdown grace period;
//   - the completer: successes are completed in batches with jobs_complete_many, with the
//     handlers' results, retrying connection errors until shutdown;
//   - the heartbeat timer: jobs_heartbeat_many for every running job each heartbeatInterval,
//     until its handler returns and its completion is recorded (also after its signal fired);
//     a job missing from the answer is aborted with JobNotHeldError;
//   - the maintenance timer: jobs_maintain every maintainInterval.
// Every fenced call that finds the job no longer held (false, NULL, an id missing from a
// _many result) is counted in stats.fenced and logged, never retried.

import os from 'node:os';
import pg from 'pg';
import { Client, storableText, unstorable } from './client.js';
import {
  Cancel, JobNotHeldError, JobTimeoutError, RetryAt, ShutdownError, Snooze,
} from './errors.js';

export const LEASE_DEFAULT = 5 * 60 * 1000;
export const JOB_TIMEOUT_DEFAULT = 60 * 1000;
export const POLL_INTERVAL_DEFAULT = 1000;
export const MAINTAIN_INTERVAL_DEFAULT = 5000;
export const SHUTDOWN_TIMEOUT_DEFAULT = 10 * 1000;
export const COMPLETE_BATCH_DELAY_DEFAULT = 2;
export const COMPLETE_BATCH_SIZE_DEFAULT = 100;
export const SLOTS_DEFAULT = 10;
// The most jobs one call of a batch handler gets by default (the Go driver's BatchMaxJobsDefault).
export const BATCH_MAX_JOBS_DEFAULT = 100;

/**
 * new Batch(fn, {maxJobs, maxWait}): a batch handler, given as the value of a kind in the
 * Worker's handlers. fn(jobs, {signal}) gets up to maxJobs (default BATCH_MAX_JOBS_DEFAULT)
 * jobs of the kind that one queue of the worker claimed together, and with maxWait (ms; 0,
 * the default, is no waiting; below lease / 2) also those its later claims bring before the
 * batch is full or maxWait has passed since its first job was claimed. Each job holds a slot
 * of its queue while it waits and runs (a batch never holds more jobs than the queue has
 * slots), is heartbeated, and keeps its own attempt and outcome. fn resolving to undefined
 * completes every job; to an array with one entry per job settles each job on its own, read
 * as a handler's return value (a value: done with that result; Snooze, Cancel, RetryAt; an
 * Error: a failed attempt); throwing (or a Snooze, Cancel or RetryAt) gives every job of the
 * batch that outcome. signal fires on timeout and shutdown, and once every job is lost.
 */
export class Batch {
  constructor(fn, { maxJobs = BATCH_MAX_JOBS_DEFAULT, maxWait = 0 } = {}) {
    if (typeof fn !== 'function') throw new TypeError('skiplock: Batch needs a function');
    if (!Number.isInteger(maxJobs) || maxJobs < 1) throw new RangeError('skiplock: Batch maxJobs must be a positive integer');
    if (typeof maxWait !== 'number' || !(maxWait >= 0)) throw new RangeError('skiplock: Batch maxWait must be a non-negative number of ms');
    this.fn = fn;
    this.maxJobs = maxJobs;
    this.maxWait = maxWait;
  }
}
// After the shutdown grace period fires the handlers' signals, stop() waits this long more
// for them before it abandons those that ignore their signal (as the Go driver does).
export const SHUTDOWN_ABANDON_AFTER = 5000;
// A completion batch, or a failure, snooze or cancellation, that fails with a connection error
// is retried with this backoff until the final flush of shutdown, which makes one last attempt
// of at most COMPLETE_FINAL_TIMEOUT.
const COMPLETE_RETRY_MIN = 50;
const COMPLETE_RETRY_MAX = 2000;
const COMPLETE_FINAL_TIMEOUT = 5000;

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

// retryable reports whether a failed call may succeed if repeated, as the Go driver's
// retryable does: no SQLSTATE (connection lost, network or socket errors), a connection
// exception (08), insufficient resources (53), an administrator shutdown or restart
// (57P01-57P03), a serialization failure or deadlock (40001, 40P01).
export function retryable(err) {
  const code = err?.code;
  if (typeof code !== 'string' || !/^[0-9A-Z]{5}$/.test(code)) return true;
  return /^(08|53)/.test(code) || ['57P01', '57P02', '57P03', '40001', '40P01'].includes(code);
}

// thrownText is the text jobs_fail records for what a handler threw: an Error's stack, else
// String(value). String throws for an object without a prototype or whose toString throws;
// the failure is recorded all the same (else it waited out the lease), with a text saying so.
function thrownText(error) {
  try {
    return error instanceof Error ? (error.stack ?? String(error)) : String(error);
  } catch (err) {
    return `a thrown value (${Object.prototype.toString.call(error)}) that could not be made a string: ${err?.message ?? 'unknown error'}`;
  }
}

// within rejects when promise takes longer than ms.
function within(promise, ms, what) {
  let timer;
  const deadline = new Promise((_, reject) => { timer = setTimeout(() => reject(new Error(`${what} timed out after ${ms} ms`)), ms); });
  return Promise.race([promise, deadline]).finally(() => clearTimeout(timer));
}

/**
 * new Worker(client, options)
 *
 * options:
 *   handlers          {kind: async (job, {signal, complete}) => result}. Required. A handler
 *                     that returns normally completes its job (in a batch), and what it
 *                     returned (anything JSON can hold; undefined for none) becomes the job's
 *                     result; one that throws fails it through jobs_fail with the error's
 *                     stack. Returning or throwing Snooze, Cancel or RetryAt snoozes, cancels
 *                     or retries the job at a time. `signal` fires on timeout
 *                     (JobTimeoutError), when the job is lost (JobNotHeldError) and at the end
 *                     of the shutdown grace period (ShutdownError). `complete(db, result)`
 *                     calls jobs_complete on `db`, the pg Client of the handler's own
 *                     transaction, so the handler's writes and the completion (with result)
 *                     commit together; it returns false when the job is no longer held (roll
 *                     back then), and what the handler returns after it is not stored. A job
 *                     (src/job.js) has step and progress; a JobNotHeldError they throw ends
 *                     the run as lost. A job of a kind without a handler is cancelled.
 *   queues            {name: slots}: the queues to work and how many jobs of each may run at
 *                     once. Defaults to {default: 10}.
 *   name              the worker's name in lease_holder. Defaults to host:pid:random.
 *   lease             ms each claim and heartbeat leases a job for. Defaults to 5 minutes.
 *   heartbeatInterval ms between heartbeats. Defaults to lease / 3.
 *   timeout           ms a job may run before its signal fires. Defaults to 1 minute;
 *                     -1 means no timeout.
 *   pollInterval      ms between claims when nothing wakes the worker. Defaults to 1000.
 *   listen            LISTEN on jobs_ready for immediate wake-ups. Defaults to true.
 *   maintainInterval  ms between jobs_maintain rounds. Defaults to 5000; -1 disables them.
 *   shutdownTimeout   ms that stop() waits for running jobs before aborting them (they are
 *                     then given back with jobs_snooze(now())). Defaults to 10000. A handler
 *                     still running SHUTDOWN_ABANDON_AFTER (5 s) later is abandoned.
 *   completeBatchDelay, completeBatchSize: a batch of completions is sent when it has
 *                     completeBatchSize jobs or is completeBatchDelay ms old. Defaults to 2
 *                     ms and 100.
 *   handleSignals     stop gracefully on SIGTERM and SIGINT while run() runs. Defaults to true.
 *   logger            an object with info, warn and error methods. Defaults to console.
 *   onEvent           called with {type, job, state, error} after each job's outcome is
 *                     recorded (type: completed, failed, snoozed, cancelled, lost).
 */
export class Worker {
  constructor(client, options = {}) {
    if (!(client instanceof Client)) throw new TypeError('skiplock: Worker needs a skiplock Client');
    if (!options.handlers || typeof options.handlers !== 'object') {
      throw new TypeError('skiplock: Worker options.handlers must map kinds to functions');
    }
    this.client = client;
    this.handlers = options.handlers;
    this.queues = options.queues ?? { default: SLOTS_DEFAULT };
    for (const [q, n] of Object.entries(this.queues)) {
      if (!Number.isInteger(n) || n < 1) throw new RangeError(`skiplock: queues.${q} must be a positive integer of slots`);
    }
    // The name is a text parameter of jobs_claim; a hostname is only bytes to the kernel.
    this.name = options.name ?? `${storableText(os.hostname())}:${process.pid}:${Math.random().toString(36).slice(2, 8)}`;
    // Text jobs_claim would refuse: fail here, not in every claim of the fetch loop.
    for (const [what, text] of [['name', this.name], ...Object.keys(this.queues).map((q) => [`queues.${q}`, q])]) {
      const problem = typeof text === 'string' ? unstorable(text) : null;
      if (problem) throw new RangeError(`skiplock: Worker options.${what} ${problem}`);
    }
    // jobs_claim refuses an empty name or one longer than 200 bytes: every claim would fail.
    if (typeof this.name === 'string' && (this.name === '' || Buffer.byteLength(this.name) > 200)) {
      throw new RangeError('skiplock: Worker options.name must be a non-empty string of at most 200 bytes');
    }
    this.lease = options.lease ?? LEASE_DEFAULT;
    for (const [kind, h] of Object.entries(this.handlers)) {
      if (h instanceof Batch && h.maxWait >= this.lease / 2) {
        throw new RangeError(`skiplock: Worker options.handlers.${kind}.maxWait must be below lease / 2`);
      }
    }
    this.heartbeatInterval = options.heartbeatInterval ?? Math.floor(this.lease / 3);
    this.timeout = options.timeout ?? JOB_TIMEOUT_DEFAULT;
    this.pollInterval = options.pollInterval ?? POLL_INTERVAL_DEFAULT;
    this.listen = options.listen ?? true;
    this.maintainInterval = options.maintainInterval ?? MAINTAIN_INTERVAL_DEFAULT;
    this.shutdownTimeout = options.shutdownTimeout ?? SHUTDOWN_TIMEOUT_DEFAULT;
    this.completeBatchDelay = options.completeBatchDelay ?? COMPLETE_BATCH_DELAY_DEFAULT;
    this.completeBatchSize = options.completeBatchSize ?? COMPLETE_BATCH_SIZE_DEFAULT;
    this.handleSignals = options.handleSignals ?? true;
    this.logger = options.logger ?? console;
    this.onEvent = options.onEvent ?? (() => {});

    this.stats = { claimed: 0, completed: 0, failed: 0, snoozed: 0, cancelled: 0, fenced: 0, errors: 0 };
    this.running = new Map(); // id -> execution
    this.openBatches = new Map(); // queue NUL kind -> the batch still taking jobs (gather)
    this.stoppingPromise = new Promise((resolve) => { this.resolveStopping = resolve; });
    this.busy = Object.fromEntries(Object.keys(this.queues).map((q) => [q, 0]));
    this.pending = []; // completions waiting for the next batch
    this.flushTimer = null;
    this.flushing = Promise.resolve();
    this.finalFlush = false; // set by shutdown: a failing batch gets one last attempt
    this.finalFlushStarted = new Promise((resolve) => { this.startFinalFlush = resolve; });
    this.stopping = false;
    this.started = false;
    this.wakeResolve = null;
    this.woken = false;
    this.timers = [];
    this.heartbeating = false;
    this.listener = null;
    this.done = null;
    /** Resolves once the worker listens (with listen) and has made its first claims. */
    this.ready = new Promise((resolve) => { this.readyResolve = resolve; });
  }

  /**
   * Runs until stop() or, with handleSignals, SIGTERM/SIGINT; resolves once shutdown is over.
   */
  async run() {
    this.start();
    const onSignal = () => { this.stop(); };
    if (this.handleSignals) {
      process.on('SIGTERM', onSignal);
      process.on('SIGINT', onSignal);
    }
    try {
      await this.done;
    } finally {
      if (this.handleSignals) {
        process.off('SIGTERM', onSignal);
        process.off('SIGINT', onSignal);
      }
    }
  }

  /** Starts the loops without waiting; stop() ends them. */
  start() {
    if (this.started) return;
    this.started = true;
    let finish;
    this.done = new Promise((resolve) => { finish = resolve; });
    this.stopped = new Promise((resolve) => { this.stopResolve = resolve; });
    if (this.heartbeatInterval > 0) {
      this.timers.push(setInterval(() => this.heartbeat().catch((e) => this.logError('heartbeat', e)), this.heartbeatInterval));
    }
    if (this.maintainInterval > 0) {
      this.timers.push(setInterval(() => this.client.maintain().catch((e) => this.logError('maintain', e)), this.maintainInterval));
    }
    const listening = this.listen ? this.connectListener() : Promise.resolve();
    this.fetchLoopDone = listening.then(() => this.fetchLoop());
    this.stopped.then(() => this.shutdown()).then(finish, (e) => { this.logError('shutdown', e); finish(); });
  }

  /**
   * Graceful shutdown: stop claiming, let running jobs finish within shutdownTimeout, then
   * abort the rest (given back with jobs_snooze(now())), flush completions. Safe to call twice.
   */
  async stop() {
    if (!this.started) return;
    if (!this.stopping) {
      this.stopping = true;
      this.resolveStopping();
      this.wake();
      this.stopResolve();
    }
    await this.done;
  }

  async shutdown() {
    await this.fetchLoopDone;
    this.readyResolve();
    if (this.listener) {
      const l = this.listener;
      this.listener = null;
      await l.end().catch(() => {});
    }
    const all = () => Promise.allSettled([...this.running.values()].map((ex) => ex.settled));
    if (this.running.size > 0) {
      let timer;
      const grace = this.shutdownTimeout < 0 ? null
        : new Promise((resolve) => { timer = setTimeout(resolve, this.shutdownTimeout, 'timeout'); });
      const outcome = await Promise.race([all().then(() => 'done'), grace].filter(Boolean));
      clearTimeout(timer);
      if (outcome === 'timeout') {
        for (const ex of this.running.values()) ex.controller.abort(new ShutdownError());
        // A handler that ignores its signal must not hold shutdown forever: its job is
        // abandoned (it runs again after its lease expires).
        let abandon;
        const late = new Promise((resolve) => { abandon = setTimeout(resolve, SHUTDOWN_ABANDON_AFTER, 'abandon'); });
        const ended = await Promise.race([all().then(() => 'done'), late]);
        clearTimeout(abandon);
        if (ended === 'abandon') {
          for (const ex of this.running.values()) {
            if (ex.returned) continue;
            this.logger.error?.(`skiplock: abandoning job ${ex.job.id} (${ex.job.kind}) attempt ${ex.job.attempt}: its handler ignored its signal for ${SHUTDOWN_ABANDON_AFTER} ms; it runs again after its lease expires`);
          }
        }
      }
    }
    for (const t of this.timers) clearInterval(t);
    this.timers = [];
    this.finalFlush = true;
    this.startFinalFlush();
    await this.flush();
  }

  // wake makes the fetch loop claim now.
  wake() {
    this.woken = true;
    if (this.wakeResolve) {
      const r = this.wakeResolve;
      this.wakeResolve = null;
      r();
    }
  }

  async waitForWake(ms) {
    if (this.woken) {
      this.woken = false;
      return;
    }
    let timer;
    await new Promise((resolve) => {
      this.wakeResolve = resolve;
      timer = setTimeout(resolve, ms);
    });
    clearTimeout(timer);
    this.wakeResolve = null;
    this.woken = false;
  }

  async fetchLoop() {
    while (!this.stopping) {
      for (const [queue, slots] of Object.entries(this.queues)) {
        if (this.stopping) break;
        const free = slots - this.busy[queue];
        if (free <= 0) continue;
        let jobs;
        try {
          jobs = await this.client.claim({ worker: this.name, maxJobs: free, queues: [queue], lease: this.lease });
        } catch (err) {
          this.logError('claim', err);
          await sleep(Math.min(this.pollInterval, 1000));
          continue;
        }
        if (this.stopping) {
          // Claimed but never started: give them back at once.
          await Promise.allSettled(jobs.map((j) => this.client.snooze(j.id, j.attempt, { delay: 0 })));
          break;
        }
        this.stats.claimed += jobs.length;
        // Batches start once the whole claim is gathered: its jobs of a kind go together.
        const opened = [];
        for (const job of jobs) {
          const b = this.execute(job);
          if (b) opened.push(b);
        }
        for (const b of opened) this.executeBatch(b);
      }
      this.readyResolve();
      if (this.stopping) break;
      // Either every free slot is taken (a finished job wakes us) or nothing more is ready
      // (a notification or the poll does).
      await this.waitForWake(this.pollInterval);
    }
  }

  async connectListener() {
    const ownConfig = { ...this.client.pool.options };
    let backoff = 100;
    while (!this.stopping) {
      const conn = new pg.Client(ownConfig);
      try {
        await conn.connect();
        conn.on('notification', (msg) => {
          if (msg.channel === 'jobs_ready' && Object.hasOwn(this.queues, msg.payload)) this.wake();
        });
        conn.on('error', (err) => this.logError('listen', err));
        conn.on('end', () => {
          if (this.listener === conn && !this.stopping) {
            this.listener = null;
            this.logger.warn?.('skiplock: listener connection lost; reconnecting');
            this.connectListener();
          }
        });
        await conn.query('LISTEN jobs_ready');
        if (this.stopping) {
          await conn.end().catch(() => {});
          return;
        }
        this.listener = conn;
        // Notifications sent while we were not listening are lost: look now.
        this.wake();
        return;
      } catch (err) {
        this.logError('listen', err);
        await conn.end().catch(() => {});
        await sleep(backoff);
        backoff = Math.min(backoff * 2, 5000);
      }
    }
  }

  // execute runs job with its handler, or, for a kind with a Batch handler, adds it to the
  // queue's open batch of the kind (gather); it returns a batch it opened, for the caller to
  // start with executeBatch.
  execute(job) {
    const handler = this.handlers[job.kind];
    if (handler instanceof Batch) return this.gather(job, handler);
    const controller = new AbortController();
    const ex = { job, controller, completedInTx: false, returned: false, settled: null };
    this.running.set(job.id, ex);
    this.busy[job.queue] += 1;
    let timer = null;
    if (this.timeout > 0) {
      timer = setTimeout(() => controller.abort(new JobTimeoutError(this.timeout)), this.timeout);
    }
    const complete = async (db, result) => {
      const ok = await this.client.complete(job.id, job.attempt, { result }, { db });
      if (ok) ex.completedInTx = true;
      return ok;
    };
    ex.settled = (async () => {
      let result;
      let error = null;
      try {
        const handler = this.handlers[job.kind];
        if (typeof handler !== 'function') {
          error = new Cancel(`no handler for kind ${JSON.stringify(job.kind)}`);
        } else {
          result = await handler(job, { signal: controller.signal, complete });
        }
      } catch (err) {
        error = err ?? new Error('handler threw a nullish value');
      }
      ex.returned = true;
      if (timer) clearTimeout(timer);
      try {
        await this.settle(ex, result, error);
      } catch (err) {
        this.logError(`record the outcome of job ${job.id}`, err);
      }
    })().finally(() => {
      this.running.delete(job.id);
      this.busy[job.queue] -= 1;
      this.wake();
    });
  }

  // gather adds a job of a Batch kind to its queue's open batch of the kind, or opens one and
  // returns it. The job holds its slot, and heartbeats, from now on.
  gather(job, handler) {
    const ex = { job, controller: new AbortController(), completedInTx: false, returned: false, settled: null };
    this.running.set(job.id, ex);
    this.busy[job.queue] += 1;
    const key = `${job.queue}\u0000${job.kind}`;
    const open = this.openBatches.get(key);
    if (open) {
      open.exs.push(ex);
      if (open.run) ex.settled = open.run;
      if (open.exs.length >= open.size) {
        this.openBatches.delete(key);
        open.fill();
      }
      return null;
    }
    const b = { handler, key, size: Math.min(handler.maxJobs, this.queues[job.queue]), opened: Date.now(), exs: [ex] };
    b.full = new Promise((resolve) => { b.fill = resolve; });
    if (b.size > 1) this.openBatches.set(key, b);
    else b.fill();
    return b;
  }

  // executeBatch waits up to maxWait since the batch opened for it to fill (or for shutdown),
  // closes it, calls its handler once and settles each job on its own.
  executeBatch(b) {
    const run = (async () => {
      const wait = b.handler.maxWait - (Date.now() - b.opened);
      if (wait > 0 && !this.stopping) {
        let timer;
        await Promise.race([b.full, new Promise((resolve) => { timer = setTimeout(resolve, wait); }), this.stoppingPromise]);
        clearTimeout(timer);
      }
      if (this.openBatches.get(b.key) === b) this.openBatches.delete(b.key);
      const exs = b.exs;
      // The batch's signal: a timeout or shutdown (which fire every job's signal), or every
      // job of the batch lost.
      const controller = new AbortController();
      let lost = 0;
      for (const ex of exs) {
        ex.controller.signal.addEventListener('abort', () => {
          const reason = ex.controller.signal.reason;
          if (!(reason instanceof JobNotHeldError)) controller.abort(reason);
          else if (++lost === exs.length) controller.abort(reason);
        }, { once: true });
      }
      let timer = null;
      if (this.timeout > 0) {
        timer = setTimeout(() => {
          const err = new JobTimeoutError(this.timeout);
          for (const ex of exs) ex.controller.abort(err);
        }, this.timeout);
      }
      let outcomes;
      try {
        const returned = await b.handler.fn(exs.map((ex) => ex.job), { signal: controller.signal });
        if (returned === undefined || returned === null) {
          outcomes = exs.map(() => ({ result: undefined, error: null }));
        } else if (returned instanceof Snooze || returned instanceof Cancel || returned instanceof RetryAt) {
          outcomes = exs.map(() => ({ result: undefined, error: returned }));
        } else if (!Array.isArray(returned) || returned.length !== exs.length) {
          throw new Error(`skiplock: the batch handler must return undefined or an array of ${exs.length} outcomes, got ${Array.isArray(returned) ? `${returned.length} outcomes` : typeof returned}`);
        } else {
          outcomes = returned.map((r) => (r instanceof Error ? { result: undefined, error: r } : { result: r, error: null }));
        }
      } catch (err) {
        const error = err ?? new Error('handler threw a nullish value');
        outcomes = exs.map(() => ({ result: undefined, error }));
      }
      if (timer) clearTimeout(timer);
      await Promise.all(exs.map(async (ex, i) => {
        ex.returned = true;
        try {
          await this.settle(ex, outcomes[i].result, outcomes[i].error);
        } catch (err) {
          this.logError(`record the outcome of job ${ex.job.id}`, err);
        }
      }));
    })().finally(() => {
      for (const ex of b.exs) {
        if (this.running.get(ex.job.id) === ex) this.running.delete(ex.job.id);
        this.busy[ex.job.queue] -= 1;
      }
      this.wake();
    });
    for (const ex of b.exs) ex.settled = run;
    b.run = run; // for the jobs that join later (gather)
  }

  // settle records what the handler's run decided, with the fenced call that fits it.
  async settle(ex, result, error) {
    const { job, controller } = ex;
    const reason = controller.signal.aborted ? controller.signal.reason : null;
    if (error === null && result instanceof Snooze) error = result;
    if (error === null && (result instanceof Cancel || result instanceof RetryAt)) error = result;
    if (error === null && ex.completedInTx) return this.emit('completed', job, 'done');
    if (reason instanceof JobNotHeldError) return this.fenced(job, 'run', reason);
    // job.step or job.progress found the job lost: there is nothing to record.
    if (error instanceof JobNotHeldError && error.id === job.id && error.attempt === job.attempt) {
      return this.fenced(job, 'run', error);
    }
    if (error === null) {
      // A result JSON cannot hold fails the attempt here, not the batch it would be sent in.
      try {
        JSON.stringify(result);
        return this.enqueueCompletion(ex, result);
      } catch (err) {
        error = new Error(`the handler's result cannot be stored as JSON: ${err?.message ?? err}`, { cause: err });
      }
    }
    if (reason instanceof ShutdownError) {
      // Interrupted, not failed: release it without spending an attempt.
      return this.held(job, 'snoozed', 'queued',
        await this.outcome('jobs_snooze', job, () => this.client.snooze(job.id, job.attempt, { delay: 0 })));
    }
    if (error instanceof Snooze) {
      return this.held(job, 'snoozed', 'queued',
        await this.outcome('jobs_snooze', job, () => this.client.snooze(job.id, job.attempt, { delay: error.delayMs })));
    }
    if (error instanceof Cancel) {
      return this.held(job, 'cancelled', 'cancelled', await this.outcome('jobs_cancel', job,
        () => this.client.cancel(job.id, { attempt: job.attempt, error: error.stack ?? error.message })));
    }
    let text = thrownText(error);
    if (reason instanceof JobTimeoutError && error !== reason) text = `${reason.message}\n${text}`;
    return this.failed(job, error, text, error instanceof RetryAt ? error.at : undefined);
  }

  // failed records a failed attempt of job with jobs_fail: error (what the handler threw),
  // text (what to store), retryAt (a Date, or undefined for jobs_backoff's delay).
  async failed(job, error, text, retryAt) {
    const state = await this.outcome('jobs_fail', job, () => this.client.fail(job.id, job.attempt, text, { retryAt }));
    if (state === null) return this.fenced(job, 'fail', error);
    this.stats.failed += 1;
    // A retry is routine; a job out of attempts deserves attention.
    const log = state === 'dead' ? this.logger.warn : this.logger.info;
    log?.call(this.logger, `skiplock: job ${job.id} (${job.kind}) attempt ${job.attempt} failed; now ${state}: ${error?.message ?? text}`);
    this.emit('failed', job, state, error);
  }

  // outcome runs call, the fenced call that records job's outcome (jobs_fail, jobs_snooze or
  // jobs_cancel), as the Go driver records outcomes: retried through connection errors
  // (retrying), since the call is fenced and repeating it is safe. Any other error is thrown:
  // the job runs again once its lease expires. The job stays in this.running meanwhile, so it
  // keeps heartbeating.
  outcome(fn, job, call) {
    return this.retrying(fn, `${fn} of job ${job.id}`, call);
  }

  // retrying runs call, a call of the SQL function fn (what says on what): a connection error
  // is retried with a capped backoff until the final flush of shutdown, which makes one last
  // attempt, bounded by COMPLETE_FINAL_TIMEOUT. Any other error, or the last attempt's, is
  // thrown.
  async retrying(fn, what, call) {
    let delay = COMPLETE_RETRY_MIN;
    for (;;) {
      const last = this.finalFlush;
      try {
        return await (last ? within(call(), COMPLETE_FINAL_TIMEOUT, fn) : call());
      } catch (err) {
        if (last || !retryable(err)) throw err;
        this.stats.errors += 1;
        this.logger.warn?.(`skiplock: ${what} failed; retrying in ${delay} ms: ${err?.message ?? err}`);
        let timer;
        await Promise.race([new Promise((resolve) => { timer = setTimeout(resolve, delay); }), this.finalFlushStarted]);
        clearTimeout(timer);
        delay = Math.min(delay * 2, COMPLETE_RETRY_MAX);
      }
    }
  }

  held(job, type, state, ok) {
    if (!ok) return this.fenced(job, type, null);
    this.stats[type] += 1;
    this.emit(type, job, state);
  }

  fenced(job, what, error) {
    this.stats.fenced += 1;
    this.logger.warn?.(`skiplock: job ${job.id} attempt ${job.attempt} is no longer held; its ${what} result was not recorded`);
    this.emit('lost', job, null, error);
  }

  emit(type, job, state, error = null) {
    if (type === 'completed') this.stats.completed += 1;
    try {
      this.onEvent({ type, job, state, error });
    } catch (err) {
      this.logError('onEvent', err);
    }
  }

  // The completer: successes wait up to completeBatchDelay ms (or until completeBatchSize of
  // them) and are completed with one jobs_complete_many. The job's slot stays busy until its
  // completion is recorded, so shutdown and slot counts see it.
  enqueueCompletion(ex, result) {
    return new Promise((resolve) => {
      this.pending.push({ ex, result, resolve });
      if (this.pending.length >= this.completeBatchSize) this.flush();
      else if (!this.flushTimer) this.flushTimer = setTimeout(() => this.flush(), this.completeBatchDelay);
    });
  }

  flush() {
    if (this.flushTimer) {
      clearTimeout(this.flushTimer);
      this.flushTimer = null;
    }
    const batch = this.pending.splice(0);
    if (batch.length === 0) return this.flushing;
    this.flushing = this.flushing.then(() => this.completeBatch(batch));
    return this.flushing;
  }

  // A failed batch changed nothing (one statement) and its jobs are done: a connection error
  // is retried until the final flush of shutdown (the jobs keep heartbeating meanwhile, since
  // they stay in this.running), which makes one last bounded attempt. A batch with results
  // refused otherwise (a result over jobs_complete's limit, or holding text jsonb refuses)
  // is completed job by job, so that only the job whose result was refused fails.
  async completeBatch(batch) {
    const results = batch.some((b) => b.result !== undefined) ? { results: batch.map((b) => b.result) } : {};
    let done;
    try {
      done = new Set(await this.retrying('jobs_complete_many', `jobs_complete_many of ${batch.length} jobs`,
        () => this.client.completeMany(batch.map((b) => b.ex.job.id), batch.map((b) => b.ex.job.attempt), results)));
    } catch (err) {
      if (results.results && !retryable(err)) return this.completeEach(batch, err);
      this.logError(`complete (${batch.length} jobs run again after their lease expires)`, err);
      for (const { resolve } of batch) resolve();
      return;
    }
    for (const { ex, resolve } of batch) {
      if (done.has(ex.job.id)) this.emit('completed', ex.job, 'done');
      else this.fenced(ex.job, 'complete', null);
      resolve();
    }
  }

  // completeEach completes the jobs of a batch refused with error one by one with
  // jobs_complete: a job whose result is refused with a data exception (SQLSTATE class 22)
  // fails its attempt with jobs_fail, saying why; any other error leaves the job to run again
  // after its lease expires.
  async completeEach(batch, error) {
    this.logger.warn?.(`skiplock: jobs_complete_many of ${batch.length} jobs with results failed; completing them one by one: ${error?.message ?? error}`);
    for (const { ex, result, resolve } of batch) {
      const { job } = ex;
      try {
        const ok = await this.retrying('jobs_complete', `jobs_complete of job ${job.id}`,
          () => this.client.complete(job.id, job.attempt, { result }));
        if (ok) this.emit('completed', job, 'done');
        else this.fenced(job, 'complete', null);
      } catch (err) {
        if (typeof err?.code === 'string' && err.code.startsWith('22')) {
          const refused = new Error(`the handler's result was refused: ${err.message}`, { cause: err });
          await this.failed(job, refused, thrownText(refused), undefined)
            .catch((e) => this.logError(`record the outcome of job ${job.id}`, e));
        } else {
          this.logError(`complete job ${job.id} (it runs again after its lease expires)`, err);
        }
      }
      resolve();
    }
  }

  async heartbeat() {
    // A slow round must not overlap the next one.
    if (this.heartbeating) return;
    this.heartbeating = true;
    try {
      await this.heartbeatRound();
    } finally {
      this.heartbeating = false;
    }
  }

  async heartbeatRound() {
    // A handler whose signal fired for a timeout or shutdown may still be running: it keeps
    // its lease until it returns, or another worker could run the job at the same time.
    const exs = [...this.running.values()].filter((ex) => !(ex.controller.signal.reason instanceof JobNotHeldError) && !ex.completedInTx);
    if (exs.length === 0) return;
    const rows = await this.client.heartbeatMany(exs.map((ex) => ex.job.id), exs.map((ex) => ex.job.attempt), { lease: this.lease });
    const held = new Set(rows.map((r) => r.id));
    for (const ex of exs) {
      // A job that finished meanwhile is missing too: only abort those still running.
      if (!held.has(ex.job.id) && this.running.get(ex.job.id) === ex && !ex.completedInTx) {
        ex.controller.abort(new JobNotHeldError(ex.job.id, ex.job.attempt));
      }
    }
  }

  logError(what, err) {
    this.stats.errors += 1;
    this.logger.error?.(`skiplock: ${what} failed: ${err?.message ?? err}`);
  }
}
