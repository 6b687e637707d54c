// Client: one method per skiplock SQL function. Every statement is a call to a jobs_*
// function with named arguments; options left undefined are not sent, so the SQL defaults
// (documented in docs/sql-api.md) apply.

import pg from 'pg';
import { InvalidArgumentError, UnknownJobError, WaitTimeoutError, wrapError } from './errors.js';
import { Job, toId } from './job.js';

/** How often Client.wait reads the job's state when no notification came. */
export const WAIT_POLL_INTERVAL_DEFAULT = 1000;

// The states jobs_result reports for a job that will not run again by itself.
const FINISHED = ['done', 'dead', 'cancelled'];

// Interval arguments are given in milliseconds.
const interval = (n) => `make_interval(secs => $${n}::float8 / 1000)`;

/**
 * storableText returns text as PostgreSQL accepts a text parameter, as the Go driver does:
 * NUL characters dropped (the server refuses them with 22021, a permanent error, and the
 * job's outcome would wait out its lease) and lone surrogates made U+FFFD (pg would encode
 * them so anyway). fail and cancel pass the error through it; anything but a string is
 * returned as it is.
 */
export function storableText(text) {
  if (typeof text !== 'string') return text;
  return text.replaceAll('\0', '').toWellFormed();
}

// errorText is the text recorded for error: an Error's stack (or its string), else error.
const errorText = (error) => storableText(error instanceof Error ? (error.stack ?? String(error)) : error);

// json is value's JSON text for a jsonb parameter; undefined (not sent) for undefined.
const json = (value) => (value === undefined ? undefined : JSON.stringify(value));

// The keys of enqueue's options that jobs_enqueue_many has no arguments for.
const SINGLE_ONLY = ['dependsOn', 'onParentFailure', 'notifyFinished'];

// A workflow step's fields and their names in jobs_enqueue_workflow's steps.
const STEP_FIELDS = {
  name: 'name',
  kind: 'kind',
  payload: 'payload',
  queue: 'queue',
  runAt: 'run_at',
  priority: 'priority',
  maxAttempts: 'max_attempts',
  concurrencyKey: 'concurrency_key',
  meta: 'meta',
  dependsOn: 'depends_on',
  onParentFailure: 'on_parent_failure',
  notifyFinished: 'notify_finished',
};

// Args builds a named-argument list: add(name, value, expr) appends `name => expr($n)` only
// when value is not undefined.
// unstorable says why PostgreSQL would refuse (NUL) or pg would silently change (a lone
// surrogate, encoded as U+FFFD) text, or returns null.
export function unstorable(text) {
  if (text.includes('\0')) return 'must not contain NUL';
  if (!text.isWellFormed()) return 'must be well-formed UTF-16 (it holds a lone surrogate)';
  return null;
}

// checkStorable throws InvalidArgumentError for a text argument, or an element of a text
// array, that unstorable refuses, named as the SQL functions name a bad parameter (kinds[2]
// for the second element).
function checkStorable(name, value) {
  const items = typeof value === 'string' ? [[name, value]]
    : Array.isArray(value) ? value.map((v, i) => [`${name}[${i + 1}]`, v]) : [];
  for (const [param, v] of items) {
    const problem = typeof v === 'string' ? unstorable(v) : null;
    if (problem) throw new InvalidArgumentError(`skiplock: ${param} ${problem}`, param);
  }
}

// noDbIn throws when opts holds db: complete and completeMany once took {db} as their third
// argument, and a call written so would silently run outside the caller's transaction.
function noDbIn(method, opts) {
  if (opts && Object.hasOwn(opts, 'db')) {
    throw new TypeError(`skiplock: ${method}'s options come before {db}: ${method}(..., {}, { db })`);
  }
}

class Args {
  constructor() {
    this.parts = [];
    this.values = [];
  }
  add(name, value, expr = (n) => `$${n}`) {
    if (value === undefined) return this;
    checkStorable(name, value);
    this.values.push(value);
    this.parts.push(`${name} => ${expr(this.values.length)}`);
    return this;
  }
  toString() {
    return this.parts.join(', ');
  }
}

/**
 * A skiplock client over a pg Pool.
 *
 * new Client(pool | connectionString | poolConfig). A string or config makes a Pool the client
 * owns and close() ends; a Pool you pass stays yours.
 *
 * Every method takes a last argument `{db}`: a pg Client (or Pool) to run the call on instead of
 * the client's pool. Pass the pg Client of your own open transaction to make the call part of
 * it: a job enqueued that way commits or rolls back with your writes.
 *
 * Ids are returned as JavaScript numbers (exact up to 2^53).
 */
export class Client {
  constructor(source) {
    if (source instanceof pg.Pool) {
      this.pool = source;
      this.ownsPool = false;
    } else if (typeof source === 'string') {
      this.pool = new pg.Pool({ connectionString: source });
      this.ownsPool = true;
    } else if (source && typeof source === 'object') {
      this.pool = new pg.Pool(source);
      this.ownsPool = true;
    } else {
      throw new TypeError('skiplock: Client needs a pg.Pool, a connection string or a pool config');
    }
    // An idle pooled connection that dies must not crash the process.
    if (this.ownsPool) this.pool.on('error', () => {});
  }

  /** Ends the pool if the client made it. */
  async close() {
    if (this.ownsPool) await this.pool.end();
  }

  async call(fn, text, values, db) {
    try {
      return await (db ?? this.pool).query(text, values);
    } catch (err) {
      throw wrapError(fn, err);
    }
  }

  /**
   * jobs_enqueue. opts: queue, runAt (Date), delay (ms from the database's now(), instead of
   * runAt), priority, maxAttempts, uniqueKey, concurrencyKey, meta, dependsOn (the ids of the
   * parent jobs: the job waits until they are all done), onParentFailure ('cancel', the SQL
   * default, or 'run': what becomes of the job when a parent goes dead or is cancelled),
   * notifyFinished (NOTIFY jobs_finished when the job is done, dead or cancelled, for
   * wait). Returns the job's id.
   */
  async enqueue(kind, payload, opts = {}, { db } = {}) {
    const a = new Args()
      .add('kind', kind)
      .add('payload', payload === undefined ? undefined : JSON.stringify(payload), (n) => `$${n}::jsonb`)
      .add('queue', opts.queue)
      .add('run_at', opts.runAt, (n) => `$${n}::timestamptz`)
      .add('run_at', opts.runAt === undefined ? opts.delay : undefined, (n) => `now() + ${interval(n)}`)
      .add('priority', opts.priority)
      .add('max_attempts', opts.maxAttempts)
      .add('unique_key', opts.uniqueKey)
      .add('concurrency_key', opts.concurrencyKey)
      .add('meta', opts.meta === undefined ? undefined : JSON.stringify(opts.meta), (n) => `$${n}::jsonb`)
      .add('depends_on', opts.dependsOn, (n) => `$${n}::bigint[]`)
      .add('on_parent_failure', opts.onParentFailure)
      .add('notify_finished', opts.notifyFinished);
    const res = await this.call('jobs_enqueue', `SELECT jobs_enqueue(${a}) AS id`, a.values, db);
    return toId(res.rows[0].id);
  }

  /**
   * jobs_enqueue_many: jobs is an array of {kind, payload, queue, runAt, priority, maxAttempts,
   * uniqueKey, concurrencyKey, meta}. A field no job sets is not sent; a field some jobs set
   * gets the SQL default for the others. Returns the ids in input order. jobs_enqueue_many
   * takes no dependsOn, onParentFailure or notifyFinished: a job with one is a TypeError
   * (use enqueue or enqueueWorkflow).
   */
  async enqueueMany(jobs, { db } = {}) {
    const single = jobs.flatMap((j) => SINGLE_ONLY.filter((f) => j[f] !== undefined));
    if (single.length > 0) {
      throw new TypeError(`skiplock: enqueueMany cannot set ${single[0]} (jobs_enqueue_many has no such argument); use enqueue or enqueueWorkflow`);
    }
    const col = (f, dflt) => (jobs.some((j) => j[f] !== undefined) ? jobs.map((j) => j[f] ?? dflt) : undefined);
    const json = (f, dflt) => {
      const c = col(f, dflt);
      return c && c.map((v) => (v === null ? null : JSON.stringify(v)));
    };
    const a = new Args()
      .add('kinds', jobs.map((j) => j.kind), (n) => `$${n}::text[]`)
      .add('payloads', json('payload', {}), (n) => `$${n}::jsonb[]`)
      .add('queues', col('queue', 'default'), (n) => `$${n}::text[]`)
      // A job without runAt is due at the database's now(), like jobs_enqueue's default.
      .add('run_ats', col('runAt', null), (n) =>
        `(SELECT array_agg(coalesce(r, now()) ORDER BY i) FROM unnest($${n}::timestamptz[]) WITH ORDINALITY AS t(r, i))`)
      .add('priorities', col('priority', 0), (n) => `$${n}::int[]`)
      .add('max_attempts', col('maxAttempts', 5), (n) => `$${n}::int[]`)
      .add('unique_keys', col('uniqueKey', null), (n) => `$${n}::text[]`)
      .add('concurrency_keys', col('concurrencyKey', null), (n) => `$${n}::text[]`)
      .add('metas', json('meta', null), (n) => `$${n}::jsonb[]`);
    const res = await this.call('jobs_enqueue_many', `SELECT id FROM jobs_enqueue_many(${a}) AS id`, a.values, db);
    return res.rows.map((r) => toId(r.id));
  }

  /**
   * jobs_enqueue_workflow: steps is an array of {name, kind, payload, queue, runAt, priority,
   * maxAttempts, concurrencyKey, meta, dependsOn (the names of the steps it waits for),
   * onParentFailure, notifyFinished}; name and kind are required. Any other field (a typo,
   * or uniqueKey, which steps do not take) is a TypeError: jobs_enqueue_workflow would
   * ignore it. The steps commit together and share one workflowId, the id of the first step
   * inserted (parents are inserted before their children). Returns {name: id}.
   */
  async enqueueWorkflow(steps, { db } = {}) {
    if (!Array.isArray(steps)) throw new TypeError('skiplock: enqueueWorkflow needs an array of steps');
    const spec = steps.map((s, i) => {
      const step = {};
      for (const [f, v] of Object.entries(s ?? {})) {
        if (!Object.hasOwn(STEP_FIELDS, f)) {
          throw new TypeError(`skiplock: enqueueWorkflow: step ${i} has ${f}, which is not a step field (${Object.keys(STEP_FIELDS).join(', ')})`);
        }
        // NUL or a lone surrogate would reach jsonb as an escape it refuses.
        const problem = typeof v === 'string' ? unstorable(v) : null;
        if (problem) throw new InvalidArgumentError(`skiplock: steps: step ${i}'s ${f} ${problem}`, 'steps');
        step[STEP_FIELDS[f]] = v;
      }
      return step;
    });
    const res = await this.call('jobs_enqueue_workflow',
      'SELECT name, id FROM jobs_enqueue_workflow(steps => $1::jsonb)', [JSON.stringify(spec)], db);
    return Object.fromEntries(res.rows.map((r) => [r.name, toId(r.id)]));
  }

  /**
   * jobs_publish: adds one job per subscription of topic (fan-out), of the subscription's kind
   * in its queue, all with this payload and opts {runAt, delay (ms, by the database's clock),
   * priority, maxAttempts, concurrencyKey, meta}. Returns their ids in the order of the
   * subscriptions by queue, then kind; [] for a topic without subscribers. Pass {db} (a client
   * inside the caller's transaction) to publish atomically with the caller's own writes.
   */
  async publish(topic, payload, opts = {}, { db } = {}) {
    const a = new Args()
      .add('topic', topic === undefined ? null : topic)
      .add('payload', payload === undefined ? undefined : JSON.stringify(payload), (n) => `$${n}::jsonb`)
      .add('run_at', opts.runAt, (n) => `$${n}::timestamptz`)
      .add('run_at', opts.runAt === undefined ? opts.delay : undefined, (n) => `now() + ${interval(n)}`)
      .add('priority', opts.priority)
      .add('max_attempts', opts.maxAttempts)
      .add('concurrency_key', opts.concurrencyKey)
      .add('meta', opts.meta === undefined ? undefined : JSON.stringify(opts.meta), (n) => `$${n}::jsonb`);
    const res = await this.call('jobs_publish', `SELECT jobs_publish(${a}) AS ids`, a.values, db);
    return res.rows[0].ids.map(toId);
  }

  /**
   * jobs_subscribe (an operator's call, for jobs_admin): each later publish of topic adds a job
   * of kind to queue. true when the subscription is new, false when it existed already.
   */
  async subscribe(topic, queue, kind, { db } = {}) {
    const a = new Args().add('topic', topic ?? null).add('queue', queue ?? null).add('kind', kind ?? null);
    const res = await this.call('jobs_subscribe', `SELECT jobs_subscribe(${a}) AS ok`, a.values, db);
    return res.rows[0].ok;
  }

  /**
   * jobs_unsubscribe (for jobs_admin): later publishes of topic add no job for queue and kind;
   * jobs already published stay. true when one was removed.
   */
  async unsubscribe(topic, queue, kind, { db } = {}) {
    const a = new Args().add('topic', topic ?? null).add('queue', queue ?? null).add('kind', kind ?? null);
    const res = await this.call('jobs_unsubscribe', `SELECT jobs_unsubscribe(${a}) AS ok`, a.values, db);
    return res.rows[0].ok;
  }

  /** jobs_cancel_workflow: cancels the workflow's jobs not yet finished; returns how many. */
  async cancelWorkflow(workflowId, { db } = {}) {
    const res = await this.call('jobs_cancel_workflow', 'SELECT jobs_cancel_workflow(workflow_id => $1) AS n',
      [workflowId], db);
    return res.rows[0].n;
  }

  /**
   * jobs_claim: {worker (required), maxJobs, queues (array), lease (ms)}. Returns the claimed
   * jobs, each a Job (src/job.js): {id, queue, kind, payload, attempt, maxAttempts, priority,
   * runAt, leaseExpiresAt, createdAt, meta, parentResults, checkpoints} with step and
   * progress.
   */
  async claim({ worker, maxJobs, queues, lease } = {}, { db } = {}) {
    const a = new Args()
      .add('worker', worker === undefined ? null : worker)
      .add('max_jobs', maxJobs)
      .add('queues', queues, (n) => `$${n}::text[]`)
      .add('lease', lease, interval);
    const res = await this.call('jobs_claim', `SELECT * FROM jobs_claim(${a})`, a.values, db);
    return res.rows.map((r) => new Job(this, r));
  }

  /**
   * jobs_complete: opts.result (anything JSON can hold; undefined stores none) becomes the
   * job's result, for jobs_result, wait and its children's parentResults. true when completed,
   * false when the caller no longer holds the job.
   */
  async complete(id, attempt, opts = {}, { db } = {}) {
    noDbIn('complete', opts);
    const a = new Args().add('id', id).add('attempt', attempt).add('result', json(opts.result), (n) => `$${n}::jsonb`);
    const res = await this.call('jobs_complete', `SELECT jobs_complete(${a}) AS ok`, a.values, db);
    return res.rows[0].ok;
  }

  /**
   * jobs_complete_many: opts.results, when given, holds each job's result in the order of ids
   * (undefined for none). Returns the ids completed; a pair no longer held is missing.
   */
  async completeMany(ids, attempts, opts = {}, { db } = {}) {
    noDbIn('completeMany', opts);
    const results = opts.results?.some((r) => r !== undefined)
      ? ids.map((_, i) => json(opts.results[i]) ?? null) : undefined;
    const a = new Args().add('ids', ids, (n) => `$${n}::bigint[]`).add('attempts', attempts, (n) => `$${n}::int[]`)
      .add('results', results, (n) => `$${n}::jsonb[]`);
    const res = await this.call('jobs_complete_many', `SELECT id FROM jobs_complete_many(${a}) AS id`, a.values, db);
    return res.rows.map((r) => toId(r.id));
  }

  /**
   * jobs_checkpoint: saves value (anything JSON can hold; undefined is saved as null) as step
   * `step` of the held job, for job.step to find on a later attempt. true when saved, false
   * when the caller no longer holds the job.
   */
  async checkpoint(id, attempt, step, value, { db } = {}) {
    const a = new Args().add('id', id).add('attempt', attempt).add('step', step)
      .add('value', json(value) ?? 'null', (n) => `$${n}::jsonb`);
    const res = await this.call('jobs_checkpoint', `SELECT jobs_checkpoint(${a}) AS ok`, a.values, db);
    return res.rows[0].ok;
  }

  /**
   * jobs_progress: records progress (anything JSON can hold; undefined clears it) for the held
   * job, shown by get. true when recorded, false when the caller no longer holds the job.
   */
  async progress(id, attempt, progress, { db } = {}) {
    const a = new Args().add('id', id).add('attempt', attempt)
      .add('progress', json(progress) ?? null, (n) => `$${n}::jsonb`);
    const res = await this.call('jobs_progress', `SELECT jobs_progress(${a}) AS ok`, a.values, db);
    return res.rows[0].ok;
  }

  /**
   * jobs_fail: records the failed attempt with `error` (text, or an Error whose stack is
   * stored); opts.retryAt (Date) overrides jobs_backoff. Returns the job's new state
   * ('queued' or 'dead'), or null when the caller no longer holds the job.
   */
  async fail(id, attempt, error, { retryAt } = {}, { db } = {}) {
    const a = new Args().add('id', id).add('attempt', attempt).add('error', errorText(error))
      .add('retry_at', retryAt, (n) => `$${n}::timestamptz`);
    const res = await this.call('jobs_fail', `SELECT jobs_fail(${a})::text AS state`, a.values, db);
    return res.rows[0].state;
  }

  /** jobs_heartbeat: opts.lease in ms. true when extended, false when no longer held. */
  async heartbeat(id, attempt, { lease } = {}, { db } = {}) {
    const a = new Args().add('id', id).add('attempt', attempt).add('lease', lease, interval);
    const res = await this.call('jobs_heartbeat', `SELECT jobs_heartbeat(${a}) AS ok`, a.values, db);
    return res.rows[0].ok;
  }

  /** jobs_heartbeat_many: returns [{id, extended}] for the jobs still held. */
  async heartbeatMany(ids, attempts, { lease } = {}, { db } = {}) {
    const a = new Args().add('ids', ids, (n) => `$${n}::bigint[]`).add('attempts', attempts, (n) => `$${n}::int[]`)
      .add('lease', lease, interval);
    const res = await this.call('jobs_heartbeat_many', `SELECT id, extended FROM jobs_heartbeat_many(${a})`, a.values, db);
    return res.rows.map((r) => ({ id: toId(r.id), extended: r.extended }));
  }

  /**
   * jobs_snooze: puts a held job back, ready at opts.runAt (Date) or after opts.delay ms from
   * the database's now() (0 when neither is given). true when snoozed, false when not held.
   */
  async snooze(id, attempt, { runAt, delay } = {}, { db } = {}) {
    const a = new Args().add('id', id).add('attempt', attempt);
    if (runAt !== undefined) a.add('run_at', runAt, (n) => `$${n}::timestamptz`);
    else a.add('run_at', delay ?? 0, (n) => `now() + ${interval(n)}`);
    const res = await this.call('jobs_snooze', `SELECT jobs_snooze(${a}) AS ok`, a.values, db);
    return res.rows[0].ok;
  }

  /**
   * jobs_cancel: the operator's form cancel(id), or the worker's fenced form
   * cancel(id, {attempt, error}). true when cancelled.
   */
  async cancel(id, { attempt, error } = {}, { db } = {}) {
    const a = new Args().add('id', id);
    if (attempt !== undefined || error !== undefined) {
      a.add('attempt', attempt ?? null).add('error', errorText(error ?? null));
    }
    const res = await this.call('jobs_cancel', `SELECT jobs_cancel(${a}) AS ok`, a.values, db);
    return res.rows[0].ok;
  }

  /** jobs_retry: gives a dead or cancelled job another run now. true when it did. */
  async retry(id, { db } = {}) {
    const res = await this.call('jobs_retry', 'SELECT jobs_retry(id => $1) AS ok', [id], db);
    return res.rows[0].ok;
  }

  /**
   * jobs_get: {state, attempts, maxAttempts, runAt, lastError, createdAt, finishedAt, meta,
   * result, progress, workflowId, dependsOn}, or null for an unknown id.
   */
  async get(id, { db } = {}) {
    const res = await this.call('jobs_get', 'SELECT * FROM jobs_get(id => $1)', [id], db);
    const r = res.rows[0];
    if (!r) return null;
    return {
      state: r.state, attempts: r.attempts, maxAttempts: r.max_attempts, runAt: r.run_at,
      lastError: r.last_error, createdAt: r.created_at, finishedAt: r.finished_at, meta: r.meta ?? null,
      result: r.result ?? null, progress: r.progress ?? null, workflowId: toId(r.workflow_id) ?? null,
      dependsOn: r.depends_on ? r.depends_on.map(Number) : null,
    };
  }

  /** jobs_result: {state, result, lastError} of the job, or null for an unknown id. */
  async result(id, { db } = {}) {
    const res = await this.call('jobs_result',
      'SELECT state::text AS state, result, last_error FROM jobs_result(id => $1)', [id], db);
    const r = res.rows[0];
    return r ? { state: r.state, result: r.result ?? null, lastError: r.last_error } : null;
  }

  /**
   * Waits until the job is done, dead or cancelled, and returns its jobs_result: {state,
   * result, lastError}. It LISTENs on jobs_finished on a connection of its own (made with the
   * pool's settings, ended before it returns), then reads jobs_result, and reads again on each
   * notification naming the job or every opts.pollInterval ms (defaults to
   * WAIT_POLL_INTERVAL_DEFAULT, 1 s): a job enqueued without notifyFinished is found by the
   * poll. opts.timeout: ms to wait; throws WaitTimeoutError past it. Defaults to -1, no
   * timeout. Throws UnknownJobError when no job has the id.
   */
  async wait(id, { timeout = -1, pollInterval = WAIT_POLL_INTERVAL_DEFAULT } = {}) {
    if (typeof timeout !== 'number' || Number.isNaN(timeout)) {
      throw new RangeError('skiplock: wait options.timeout must be a number of ms (-1 for none)');
    }
    if (typeof pollInterval !== 'number' || !(pollInterval > 0)) {
      throw new RangeError('skiplock: wait options.pollInterval must be a positive number of ms');
    }
    const deadline = timeout >= 0 ? Date.now() + timeout : Infinity;
    const conn = new pg.Client({ ...this.pool.options });
    let notified = false;
    let wake = null;
    conn.on('notification', (msg) => {
      if (msg.channel !== 'jobs_finished' || msg.payload !== String(id)) return;
      notified = true;
      wake?.();
    });
    // A lost connection: the next read fails with it.
    conn.on('error', () => wake?.());
    try {
      try {
        await conn.connect();
        // Before the first read, so that a finish after it is never missed.
        await conn.query('LISTEN jobs_finished');
      } catch (err) {
        throw wrapError('wait', err);
      }
      for (;;) {
        notified = false;
        const r = await this.result(id, { db: conn });
        if (r === null) throw new UnknownJobError(id);
        if (FINISHED.includes(r.state)) return r;
        const left = deadline - Date.now();
        if (left <= 0) throw new WaitTimeoutError(id, timeout);
        if (notified) continue;
        let timer;
        await new Promise((resolve) => {
          wake = resolve;
          timer = setTimeout(resolve, Math.min(pollInterval, left));
        });
        clearTimeout(timer);
        wake = null;
      }
    } finally {
      await conn.end().catch(() => {});
    }
  }

  /** jobs_stats: [{queue, state, jobs, oldestReadyAge}] (oldestReadyAge in ms or null). */
  async stats({ db } = {}) {
    const res = await this.call('jobs_stats',
      'SELECT queue, state::text AS state, jobs, extract(epoch FROM oldest_ready_age) * 1000 AS age FROM jobs_stats()', [], db);
    return res.rows.map((r) => ({ queue: r.queue, state: r.state, jobs: Number(r.jobs), oldestReadyAge: r.age === null ? null : Number(r.age) }));
  }

  /** jobs_requeue_expired: how many expired leases were taken back. */
  async requeueExpired({ db } = {}) {
    const res = await this.call('jobs_requeue_expired', 'SELECT jobs_requeue_expired() AS n', [], db);
    return res.rows[0].n;
  }

  /** jobs_maintain: one round of housekeeping; {ran, requeued, prunedDone, prunedCancelled, prunedDead, more}. */
  async maintain({ maxJobs } = {}, { db } = {}) {
    const a = new Args().add('max_jobs', maxJobs);
    const res = await this.call('jobs_maintain', `SELECT * FROM jobs_maintain(${a})`, a.values, db);
    const r = res.rows[0];
    return {
      ran: r.ran, requeued: r.requeued, prunedDone: r.pruned_done, prunedCancelled: r.pruned_cancelled,
      prunedDead: r.pruned_dead, more: r.more,
    };
  }
}
