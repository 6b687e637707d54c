// Client: one method per skiplock SQL function. Every statement is a call to a jobs_*
// function with named arguments; options left undefined are not sent, so the SQL defaults
// (documented in docs/sql-api.md) apply.

import pg from 'pg';
import { InvalidArgumentError, wrapError } from './errors.js';

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

const toId = (v) => (v === null || v === undefined ? v : Number(v));

function jobFromRow(r) {
  return {
    id: toId(r.id),
    queue: r.queue,
    kind: r.kind,
    payload: r.payload,
    attempt: r.attempt,
    maxAttempts: r.max_attempts,
    priority: r.priority,
    runAt: r.run_at,
    leaseExpiresAt: r.lease_expires_at,
    createdAt: r.created_at,
    meta: r.meta ?? null,
  };
}

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
   * runAt), priority, maxAttempts, uniqueKey, concurrencyKey, meta. Returns the job's id.
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
      .add('meta', opts.meta === undefined ? undefined : JSON.stringify(opts.meta), (n) => `$${n}::jsonb`);
    const res = await this.call('jobs_enqueue', `SELECT jobs_enqueue(${a}) AS id`, a.values, db);
    return toId(res.rows[0].id);
  }

  /**
   * jobs_enqueue_many: jobs is an array of {kind, payload, queue, runAt, priority, maxAttempts,
   * uniqueKey, concurrencyKey, meta}. A field no job sets is not sent; a field some jobs set
   * gets the SQL default for the others. Returns the ids in input order.
   */
  async enqueueMany(jobs, { db } = {}) {
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
   * jobs_claim: {worker (required), maxJobs, queues (array), lease (ms)}. Returns the claimed
   * jobs: {id, queue, kind, payload, attempt, maxAttempts, priority, runAt, leaseExpiresAt,
   * createdAt, meta}.
   */
  async claim({ worker, maxJobs, queues, lease } = {}, { db } = {}) {
    const a = new Args()
      .add('worker', worker === undefined ? null : worker)
      .add('max_jobs', maxJobs)
      .add('queues', queues, (n) => `$${n}::text[]`)
      .add('lease', lease, interval);
    const res = await this.call('jobs_claim', `SELECT * FROM jobs_claim(${a})`, a.values, db);
    return res.rows.map(jobFromRow);
  }

  /** jobs_complete: true when completed, false when the caller no longer holds the job. */
  async complete(id, attempt, { db } = {}) {
    const res = await this.call('jobs_complete', 'SELECT jobs_complete(id => $1, attempt => $2) AS ok', [id, attempt], db);
    return res.rows[0].ok;
  }

  /** jobs_complete_many: returns the ids completed; a pair no longer held is missing. */
  async completeMany(ids, attempts, { db } = {}) {
    const res = await this.call('jobs_complete_many',
      'SELECT id FROM jobs_complete_many(ids => $1::bigint[], attempts => $2::int[]) AS id', [ids, attempts], db);
    return res.rows.map((r) => toId(r.id));
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
   * jobs_get: {state, attempts, maxAttempts, runAt, lastError, createdAt, finishedAt, meta},
   * or null for an unknown id.
   */
  async get(id, { db } = {}) {
    const res = await this.call('jobs_get', 'SELECT * FROM jobs_get(id => $1)', [id], db);
    const r = res.rows[0];
    if (!r) return null;
    return {
      state: r.state, attempts: r.attempts, maxAttempts: r.max_attempts, runAt: r.run_at,
      lastError: r.last_error, createdAt: r.created_at, finishedAt: r.finished_at, meta: r.meta ?? null,
    };
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
