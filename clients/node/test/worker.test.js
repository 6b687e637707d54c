// The Worker beyond the parity rows: results, errors, timeouts, fencing, slots, batching.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import {
  Batch, Cancel, JobNotHeldError, JobTimeoutError, RetryAt, Worker, cancel, retryAt, snooze,
} from '../src/index.js';
import {
  newClient, newConn, queueName, recordingLogger, sleep, statesOf, waitFor,
} from './helpers.js';

// startWorker starts a worker on one queue with quick timers and stops it when the test ends.
function startWorker(t, client, queue, handlers, options = {}) {
  const worker = new Worker(client, {
    queues: { [queue]: 2 }, pollInterval: 50, maintainInterval: -1, handleSignals: false, handlers, ...options,
  });
  worker.start();
  return worker;
}

async function finalState(client, id, wanted) {
  return waitFor(`job ${id} ${wanted.join(' or ')}`, async () => {
    const job = await client.get(id);
    return wanted.includes(job.state) ? job : null;
  });
}

test('a thrown error is recorded with its stack through jobs_fail', async (t) => {
  const client = newClient(t);
  const queue = queueName('throw');
  const logger = recordingLogger();
  const events = [];
  const id = await client.enqueue('explode', { x: 1 }, { queue, maxAttempts: 1 });
  const worker = startWorker(t, client, queue, {
    explode: async (job) => { throw new TypeError(`bad payload ${job.payload.x}`); },
  }, { logger, onEvent: (e) => events.push(e) });
  const job = await finalState(client, id, ['dead']);
  await worker.stop();
  assert.match(job.lastError, /^TypeError: bad payload 1\n\s+at /);
  assert.match(job.lastError, /worker\.test\.js/);
  assert.equal(worker.stats.failed, 1);
  assert.deepEqual(events.map((e) => [e.type, e.state]), [['failed', 'dead']]);
  assert.match(logger.lines.warn.join('\n'), /attempt 1 failed; now dead: bad payload 1/);
});

test('a thrown value that cannot be made a string is still recorded through jobs_fail', async (t) => {
  // String() throws for an object without a prototype, or whose toString throws: the failure
  // is still recorded (it was lost until the lease expired).
  const client = newClient(t);
  const queue = queueName('nostring');
  const ids = await client.enqueueMany(['bare', 'badstring'].map((kind) => ({ kind, queue, maxAttempts: 1 })));
  const worker = startWorker(t, client, queue, {
    bare: async () => { throw Object.create(null); },
    badstring: async () => { throw { toString() { throw new Error('toString exploded'); } }; },
  }, { queues: { [queue]: 2 } });
  for (const id of ids) {
    const job = await finalState(client, id, ['dead']);
    assert.match(job.lastError, /could not be made a string/);
  }
  await worker.stop();
  assert.equal(worker.stats.failed, 2);
  assert.equal(worker.stats.errors, 0);
});

test('Snooze, Cancel and RetryAt results, returned or thrown', async (t) => {
  const client = newClient(t);
  const queue = queueName('results');
  const retryTime = new Date(Date.now() + 3600_000);
  const ids = await client.enqueueMany(['snooze', 'cancel', 'retry', 'thrown-snooze', 'unknown-kind']
    .map((kind) => ({ kind, queue })));
  const worker = startWorker(t, client, queue, {
    snooze: async () => snooze(60_000),
    cancel: async () => cancel('not worth trying again'),
    retry: async () => retryAt(retryTime, 'upstream down'),
    'thrown-snooze': async () => { throw snooze(60_000); },
  }, { queues: { [queue]: 5 } });
  // Each job starts queued, so wait for the worker's records before reading the states.
  await waitFor('all recorded', () => worker.stats.snoozed === 2 && worker.stats.cancelled === 2 && worker.stats.failed === 1);
  await worker.stop();
  const [s, c, r, ts, u] = await Promise.all(ids.map((id) => client.get(id)));
  assert.deepEqual([s, c, r, ts, u].map((j) => j.state), ['queued', 'cancelled', 'queued', 'queued', 'cancelled']);
  for (const j of [s, ts]) {
    assert.equal(j.maxAttempts, 6); // a snooze spends no attempt
    assert.ok(j.runAt > new Date(Date.now() + 50_000));
    assert.equal(j.lastError, null);
  }
  assert.match(c.lastError, /not worth trying again/);
  assert.equal(r.runAt.getTime(), retryTime.getTime());
  assert.match(r.lastError, /RetryAt: upstream down/);
  assert.match(u.lastError, /no handler for kind "unknown-kind"/);
  assert.ok(new Cancel('x') instanceof Error && new RetryAt(new Date()) instanceof Error);
});

test('a job past its timeout has its signal fired and is failed', async (t) => {
  const client = newClient(t);
  const queue = queueName('timeout');
  const id = await client.enqueue('slow', {}, { queue, maxAttempts: 1 });
  let reason = null;
  const worker = startWorker(t, client, queue, {
    slow: (job, { signal }) => new Promise((_, reject) => {
      signal.addEventListener('abort', () => { reason = signal.reason; reject(signal.reason); }, { once: true });
    }),
  }, { timeout: 100 });
  const job = await finalState(client, id, ['dead']);
  await worker.stop();
  assert.ok(reason instanceof JobTimeoutError);
  assert.match(job.lastError, /^JobTimeoutError: job timed out after 100 ms/);
});

test('a handler past its timeout keeps heartbeating its lease until it returns', async (t) => {
  // The Go driver heartbeats a job until its handler returns: a lapsed lease while the
  // handler still runs would let another worker run the job at the same time.
  const client = newClient(t);
  const db = await newConn(t);
  const queue = queueName('timeout-hb');
  const id = await client.enqueue('slow', {}, { queue });
  const worker = startWorker(t, client, queue, { slow: async () => { await sleep(2500); } },
    { lease: 1000, heartbeatInterval: 200, timeout: 300 });
  t.after(() => worker.stop());
  await waitFor('running', async () => (await client.get(id)).state === 'running');
  await sleep(1800); // the handler still runs, past its timeout; the lease is 1 s
  const r = await db.query('SELECT lease_expires_at < now() AS expired FROM jobs WHERE id = $1', [id]);
  const other = await client.claim({ worker: 'thief', maxJobs: 1, queues: [queue], lease: 60000 });
  assert.equal(r.rows[0].expired, false, 'the lease lapsed while the handler still ran');
  assert.equal(other.length, 0, 'another worker claimed the job while the first still ran it');
});

test('shutdown abandons a handler that ignores its signal 5 s after firing it', async (t) => {
  const client = newClient(t);
  const queue = queueName('abandon');
  const id = await client.enqueue('stuck', {}, { queue });
  let release;
  const stuck = new Promise((r) => { release = r; });
  t.after(() => release());
  const logger = recordingLogger();
  const worker = startWorker(t, client, queue, { stuck: async () => { await stuck; } },
    { shutdownTimeout: 200, timeout: -1, logger });
  await waitFor('running', async () => (await client.get(id)).state === 'running');
  const res = await Promise.race([worker.stop().then(() => 'stopped'), sleep(8000).then(() => 'hung')]);
  release();
  await worker.stop();
  assert.equal(res, 'stopped');
  assert.ok(logger.lines.error.some((m) => m.includes(`abandoning job ${id} (stuck)`)), logger.lines.error.join('\n'));
});

test('a completion batch failing with connection errors for a few seconds is retried', async (t) => {
  // A server restart must not drop the completion (the job would run again when its lease
  // expires): connection errors are retried until shutdown, as the Go driver does.
  const client = newClient(t);
  const queue = queueName('complete-outage');
  const real = client.completeMany.bind(client);
  const until = Date.now() + 3000;
  let calls = 0;
  client.completeMany = async (...a) => {
    calls += 1;
    if (Date.now() < until) throw Object.assign(new Error('Connection terminated unexpectedly'), { code: '57P01' });
    return real(...a);
  };
  const id = await client.enqueue('k', {}, { queue });
  let ran = 0;
  const worker = startWorker(t, client, queue, { k: async () => { ran += 1; } }, { logger: recordingLogger() });
  const job = await finalState(client, id, ['done']);
  await worker.stop();
  assert.equal(job.attempts, 1);
  assert.equal(ran, 1);
  assert.equal(worker.stats.completed, 1);
  assert.ok(calls > 5, `completeMany called ${calls} times`);
});

test('a completion batch failing with a statement error is not retried', async (t) => {
  const client = newClient(t);
  const queue = queueName('complete-bad');
  let calls = 0;
  client.completeMany = async () => {
    calls += 1;
    throw Object.assign(new Error('function jobs_complete_many does not exist'), { code: '42883' });
  };
  const id = await client.enqueue('k', {}, { queue });
  const logger = recordingLogger();
  const worker = startWorker(t, client, queue, { k: async () => {} }, { logger });
  await waitFor('the failed completion', () => logger.lines.error.length > 0);
  await worker.stop();
  assert.equal(calls, 1);
  assert.equal((await client.get(id)).state, 'running');
});

test('a job cancelled while it runs is aborted, and its result fenced, counted and logged', async (t) => {
  const client = newClient(t);
  const queue = queueName('lost');
  const logger = recordingLogger();
  const [aborted, late] = await client.enqueueMany([{ kind: 'watch', queue }, { kind: 'ignore', queue }]);
  let reason = null;
  let release;
  const released = new Promise((resolve) => { release = resolve; });
  const worker = startWorker(t, client, queue, {
    // Honours its signal: the heartbeat that finds the job gone aborts it.
    watch: (job, { signal }) => new Promise((_, reject) => {
      signal.addEventListener('abort', () => { reason = signal.reason; reject(signal.reason); }, { once: true });
    }),
    // Ignores it and returns success after the operator cancelled it: the completion is fenced.
    ignore: async () => { await released; },
  }, { heartbeatInterval: 50, logger });
  await finalState(client, aborted, ['running']);
  await finalState(client, late, ['running']);
  assert.equal(await client.cancel(aborted), true);
  assert.equal(await client.cancel(late), true);
  await waitFor('the abort', () => reason !== null);
  assert.ok(reason instanceof JobNotHeldError);
  release();
  await waitFor('both fenced', () => worker.stats.fenced === 2);
  await worker.stop();
  assert.equal(worker.stats.completed, 0);
  assert.equal(worker.stats.failed, 0);
  assert.equal((await client.get(aborted)).state, 'cancelled');
  assert.equal((await client.get(late)).state, 'cancelled');
  assert.equal(logger.lines.warn.filter((l) => /no longer held/.test(l)).length, 2);
});

test('per-queue slots bound how many jobs run, and claims never exceed free slots', async (t) => {
  const client = newClient(t);
  const conn = await newConn(t);
  const qa = queueName('slots-a');
  const qb = queueName('slots-b');
  await client.enqueueMany([...Array(12)].flatMap(() => [{ kind: 'k', queue: qa }, { kind: 'k', queue: qb }]));
  const now = { [qa]: 0, [qb]: 0 };
  const peak = { [qa]: 0, [qb]: 0 };
  const runningInDb = { [qa]: 0, [qb]: 0 };
  const worker = startWorker(t, client, qa, {
    k: async (job) => {
      now[job.queue] += 1;
      peak[job.queue] = Math.max(peak[job.queue], now[job.queue]);
      // Jobs this worker claimed but did not start would show up here as running.
      const res = await client.pool.query("SELECT count(*)::int AS n FROM jobs WHERE queue = $1 AND state = 'running'", [job.queue]);
      runningInDb[job.queue] = Math.max(runningInDb[job.queue], res.rows[0].n);
      await sleep(15);
      now[job.queue] -= 1;
    },
  }, { queues: { [qa]: 3, [qb]: 1 } });
  await waitFor('all done', async () => (await statesOf(conn, qa)).done === 12 && (await statesOf(conn, qb)).done === 12);
  await worker.stop();
  assert.deepEqual(peak, { [qa]: 3, [qb]: 1 });
  assert.ok(runningInDb[qa] <= 3 && runningInDb[qb] <= 1, JSON.stringify(runningInDb));
});

test('successes are completed in batches with jobs_complete_many', async (t) => {
  const client = newClient(t);
  const conn = await newConn(t);
  const queue = queueName('batch');
  const batches = [];
  const completeMany = client.completeMany.bind(client);
  client.completeMany = (ids, attempts, opts) => { batches.push(ids.length); return completeMany(ids, attempts, opts); };
  await client.enqueueMany([...Array(50)].map(() => ({ kind: 'k', queue })));
  const worker = startWorker(t, client, queue, { k: async () => {} }, {
    queues: { [queue]: 50 }, completeBatchDelay: 20,
  });
  await waitFor('all done', async () => (await statesOf(conn, queue)).done === 50);
  await worker.stop();
  assert.equal(batches.reduce((a, b) => a + b, 0), 50);
  assert.ok(Math.max(...batches) > 1, `batches: ${batches}`);
  assert.equal(worker.stats.completed, 50);
});

test('complete(db) commits the handler\'s writes and the completion together', async (t) => {
  const client = newClient(t);
  const conn = await newConn(t);
  const queue = queueName('intx');
  const table = `effects_${process.pid}`;
  await conn.query(`CREATE TABLE ${table} (job_id bigint PRIMARY KEY)`);
  const [good, bad] = await client.enqueueMany([{ kind: 'good', queue }, { kind: 'bad', queue, maxAttempts: 1 }]);
  const inTx = (fail) => async (job, { complete }) => {
    const db = await client.pool.connect();
    try {
      await db.query('BEGIN');
      await db.query(`INSERT INTO ${table} VALUES ($1)`, [job.id]);
      assert.equal(await complete(db), true);
      if (fail) throw new Error('failed after completing, before commit');
      await db.query('COMMIT');
    } catch (err) {
      await db.query('ROLLBACK');
      throw err;
    } finally {
      db.release();
    }
  };
  const worker = startWorker(t, client, queue, { good: inTx(false), bad: inTx(true) });
  await finalState(client, good, ['done']);
  const b = await finalState(client, bad, ['dead']);
  await worker.stop();
  assert.match(b.lastError, /failed after completing/);
  const rows = (await conn.query(`SELECT job_id FROM ${table}`)).rows.map((r) => Number(r.job_id));
  assert.deepEqual(rows, [good]);
  assert.equal(worker.stats.completed, 1);
  assert.equal(worker.stats.fenced, 0);
});

test('stop is safe to call twice and before start; options are checked', async (t) => {
  const client = newClient(t);
  const queue = queueName('stop');
  const worker = new Worker(client, { queues: { [queue]: 1 }, handlers: {}, handleSignals: false });
  await worker.stop();
  worker.start();
  await worker.ready;
  await Promise.all([worker.stop(), worker.stop()]);
  await worker.stop();
  assert.throws(() => new Worker({}, { handlers: {} }), TypeError);
  assert.throws(() => new Worker(client, {}), TypeError);
  assert.throws(() => new Worker(client, { handlers: {}, queues: { q: 0 } }), /queues\.q/);
  assert.throws(() => new Worker(client, { handlers: {}, name: 'w\0' }), /options\.name must not contain NUL/);
  assert.throws(() => new Worker(client, { handlers: {}, queues: { 'q\0': 1 } }), /options\.queues\.q/);
  assert.throws(() => new Worker(client, { handlers: {}, name: '' }), /options\.name must be a non-empty string of at most 200 bytes/);
  assert.throws(() => new Worker(client, { handlers: {}, name: '\u00e9'.repeat(101) }), /options\.name must be a non-empty/);
});

test('jobs claimed but not started at shutdown are given back', async (t) => {
  // Drive the fetch loop by hand: stop arrives while a claim is in flight.
  const client = newClient(t);
  const queue = queueName('giveback');
  const [id] = await client.enqueueMany([{ kind: 'k', queue }]);
  let worker;
  let stopped;
  const claim = client.claim.bind(client);
  client.claim = async (...args) => {
    const jobs = await claim(...args);
    if (jobs.length > 0) stopped = { done: worker.stop() };
    return jobs;
  };
  let ran = false;
  worker = startWorker(t, client, queue, { k: async () => { ran = true; } });
  await waitFor('the claim', () => stopped);
  await stopped.done;
  assert.equal(ran, false);
  const job = await client.get(id);
  assert.equal(job.state, 'queued');
  assert.equal(job.attempts, 1);
  assert.equal(job.maxAttempts, 6);
});

test('the listener reconnects after losing its connection, and notifications wake the worker again', async (t) => {
  const client = newClient(t);
  const admin = await newConn(t);
  const queue = queueName('relisten');
  const logger = recordingLogger();
  const started = [];
  const worker = startWorker(t, client, queue, { ping: async (job) => { started.push(job.id); } }, {
    pollInterval: 60000, // only a notification can wake it within the test's deadline
    logger,
  });
  await worker.ready;
  const pid = worker.listener.processID;
  await admin.query('SELECT pg_terminate_backend($1)', [pid]);
  await waitFor('a new listener', () => worker.listener && worker.listener.processID !== pid);
  await sleep(20); // past the wake-up the reconnect itself makes
  const id = await client.enqueue('ping', {}, { queue });
  await waitFor('the job started by a notification', () => started.includes(id), 5000);
  await worker.stop();
  assert.match(logger.lines.warn.join('\n'), /listener connection lost/);
});

test('a batch with maxWait gathers jobs claimed later', async (t) => {
  const client = newClient(t);
  const queue = queueName('gather');
  const calls = [];
  const first = await client.enqueue('gather', { n: 0 }, { queue });
  const worker = startWorker(t, client, queue, {
    gather: new Batch(async (jobs) => { calls.push(jobs.length); }, { maxJobs: 3, maxWait: 5000 }),
  }, { queues: { [queue]: 10 } });
  t.after(() => worker.stop());
  await waitFor('first job claimed', async () => (await client.get(first)).state === 'running');
  const started = Date.now();
  await client.enqueue('gather', { n: 1 }, { queue });
  await client.enqueue('gather', { n: 2 }, { queue });
  await waitFor('three jobs done', async () => worker.stats.completed === 3);
  assert.ok(Date.now() - started < 4000, 'the full batch did not wait for maxWait');
  await worker.stop();
  assert.deepEqual(calls, [3]);
});
