// The parity rows of docs/clients.md: the behaviours every skiplock client must have, each in
// a test named after its row.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Batch, Cancel, InvalidArgumentError, Snooze, Worker } from '../src/index.js';
import {
  newClient, newConn, queueName, recordingLogger, short, sleep, statesOf, waitFor,
} from './helpers.js';

test('rolled_back_enqueue_leaves_nothing', async (t) => {
  const client = newClient(t);
  const conn = await newConn(t);
  const queue = queueName('rollback');

  await conn.query('BEGIN');
  const id = await client.enqueue('email', { to: 'a@example.com' }, { queue }, { db: conn });
  await client.enqueueMany([{ kind: 'email', queue }, { kind: 'email', queue }], { db: conn });
  // Inside the transaction the job exists; outside it does not yet.
  assert.equal((await client.get(id, { db: conn })).state, 'queued');
  assert.equal(await client.get(id), null);
  await conn.query('ROLLBACK');

  assert.equal(await client.get(id), null);
  assert.deepEqual(await statesOf(conn, queue), {});
  assert.deepEqual(await client.claim({ worker: 'w', queues: [queue], maxJobs: 10 }), []);

  // The same enqueue committed is there: the rollback, not the call, left nothing.
  await conn.query('BEGIN');
  const kept = await client.enqueue('email', {}, { queue }, { db: conn });
  await conn.query('COMMIT');
  assert.equal((await client.get(kept)).state, 'queued');
});

test('eight_workers_claim_each_job_once', async (t) => {
  const n = short ? 200 : 1000;
  const queue = queueName('eight');
  const producer = newClient(t);
  const conn = await newConn(t);
  const ids = await producer.enqueueMany(Array.from({ length: n }, (_, i) => ({ kind: 'count', queue, payload: { i } })));
  assert.equal(ids.length, n);

  const runs = new Map(); // id -> how many times a handler ran it
  const byWorker = [];
  const workers = [];
  for (let w = 0; w < 8; w++) {
    byWorker.push(0);
    const worker = new Worker(newClient(t, 3), {
      name: `eight-${w}`,
      queues: { [queue]: 4 },
      handleSignals: false,
      pollInterval: 50,
      maintainInterval: -1,
      handlers: {
        count: async (job) => {
          runs.set(job.id, (runs.get(job.id) ?? 0) + 1);
          byWorker[w] += 1;
          await sleep(Math.random() * 2);
        },
      },
    });
    worker.start();
    workers.push(worker);
  }
  await waitFor('every job done', async () => (await statesOf(conn, queue)).done === n, 60000);
  await Promise.all(workers.map((w) => w.stop()));

  assert.equal(runs.size, n);
  for (const id of ids) assert.equal(runs.get(id), 1, `job ${id} ran ${runs.get(id)} times`);
  const res = await conn.query('SELECT count(*)::int AS n FROM jobs WHERE queue = $1 AND attempts <> 1', [queue]);
  assert.equal(res.rows[0].n, 0, 'a job was claimed more than once');
  assert.equal(workers.reduce((s, w) => s + w.stats.claimed, 0), n);
  assert.equal(workers.reduce((s, w) => s + w.stats.fenced, 0), 0);
  t.diagnostic(`jobs per worker: ${byWorker.join(' ')}`);
});

test('stale_holder_complete_returns_false', async (t) => {
  const client = newClient(t);
  const queue = queueName('stale');
  const id = await client.enqueue('slow', {}, { queue });

  const [stale] = await client.claim({ worker: 'stale-holder', queues: [queue], lease: 10 });
  assert.equal(stale.attempt, 1);
  await sleep(50); // past the 10 ms lease
  await waitFor('the expired lease taken back', async () => (await client.get(id)).state === 'queued'
    || (await client.requeueExpired()) < 0);
  const [fresh] = await client.claim({ worker: 'new-holder', queues: [queue] });
  assert.equal(fresh.id, id);
  assert.equal(fresh.attempt, 2);

  // Every fenced call of the stale holder says no and changes nothing.
  assert.equal(await client.complete(id, stale.attempt), false);
  assert.deepEqual(await client.completeMany([id], [stale.attempt]), []);
  assert.equal(await client.heartbeat(id, stale.attempt), false);
  assert.equal(await client.fail(id, stale.attempt, 'late failure'), null);
  assert.equal(await client.snooze(id, stale.attempt), false);
  assert.equal(await client.cancel(id, { attempt: stale.attempt, error: 'late cancel' }), false);
  const job = await client.get(id);
  assert.equal(job.state, 'running');
  assert.equal(job.attempts, 2);
  assert.equal(job.finishedAt, null);

  // The worker turns the same answer into a count and a log line, never a retry.
  const logger = recordingLogger();
  const worker = new Worker(client, { queues: { [queue]: 1 }, handlers: {}, handleSignals: false, logger });
  await worker.settle({ job: stale, controller: new AbortController(), completedInTx: false }, undefined, null);
  await worker.flush();
  assert.equal(worker.stats.fenced, 1);
  assert.equal(worker.stats.completed, 0);
  assert.match(logger.lines.warn.join('\n'), /no longer held/);

  assert.equal(await client.complete(id, fresh.attempt), true);
  assert.equal((await client.get(id)).state, 'done');
});

test('notify_wakes_idle_worker_within_50ms', async (t) => {
  const client = newClient(t);
  const producer = newClient(t);
  const queue = queueName('notify');
  const started = [];
  let onStart = null;
  const worker = new Worker(client, {
    queues: { [queue]: 1 },
    pollInterval: 60000, // only a notification can wake it within the test's deadlines
    maintainInterval: -1,
    handleSignals: false,
    handlers: { ping: async () => { started.push(performance.now()); onStart?.(); } },
  });
  worker.start();
  await worker.ready;

  const rounds = short ? 10 : 30;
  const latencies = [];
  for (let i = 0; i < rounds; i++) {
    await sleep(5); // idle again
    const startedNow = new Promise((resolve) => { onStart = resolve; });
    await producer.enqueue('ping', {}, { queue });
    const committed = performance.now(); // autocommit: the call's return is the commit
    let timer;
    await Promise.race([startedNow, new Promise((_, reject) => {
      timer = setTimeout(() => reject(new Error('job not started within 5 s: no notification woke the worker')), 5000);
    })]);
    clearTimeout(timer);
    latencies.push(Math.max(0, started.at(-1) - committed));
  }
  await worker.stop();
  latencies.sort((a, b) => a - b);
  const p50 = latencies[Math.floor(rounds / 2)];
  t.diagnostic(`enqueue commit -> handler start, ${rounds} jobs: p50 ${p50.toFixed(1)} ms, max ${latencies.at(-1).toFixed(1)} ms`);
  assert.ok(p50 < 50, `p50 latency ${p50.toFixed(1)} ms, want < 50 ms`);
});

test('heartbeats_keep_job_past_lease', async (t) => {
  const client = newClient(t);
  const conn = await newConn(t);
  const queue = queueName('heartbeat');
  const lease = 600;
  const id = await client.enqueue('long', {}, { queue });
  let runs = 0;
  let stopRequeue = false;
  const worker = new Worker(client, {
    queues: { [queue]: 1 },
    lease,
    heartbeatInterval: 100,
    pollInterval: 50,
    maintainInterval: -1,
    handleSignals: false,
    handlers: {
      long: async (job, { signal }) => {
        runs += 1;
        await sleep(lease * 4); // four leases long
        assert.equal(signal.aborted, false, `signal fired: ${signal.reason}`);
      },
    },
  });
  worker.start();
  // Meanwhile someone keeps taking back expired leases, as every worker's maintenance does.
  const requeuer = (async () => {
    while (!stopRequeue) {
      await client.requeueExpired();
      await sleep(50);
    }
  })();
  await waitFor('job done', async () => (await client.get(id)).state === 'done', 20000);
  stopRequeue = true;
  await requeuer;
  await worker.stop();
  const job = await client.get(id);
  assert.equal(job.attempts, 1, 'the job was taken back and claimed again');
  assert.equal(runs, 1);
  assert.equal(worker.stats.completed, 1);
  assert.equal(worker.stats.fenced, 0);
  const res = await conn.query('SELECT finished_at - started_at > $1::int * interval \'1 ms\' AS past FROM jobs WHERE id = $2', [lease, id]);
  assert.equal(res.rows[0].past, true);
});

test('invalid_argument_names_parameter', async (t) => {
  const client = newClient(t);
  const queue = queueName('invalid');
  const cases = [
    ['max_jobs', () => client.claim({ worker: 'w', maxJobs: 0 })],
    ['worker', () => client.claim({ worker: '' })],
    ['lease', () => client.claim({ worker: 'w', lease: 0 })],
    ['kind', () => client.enqueue('', {}, { queue })],
    ['max_attempts', () => client.enqueue('k', {}, { queue, maxAttempts: 0 })],
    ['kinds[2]', () => client.enqueueMany([{ kind: 'k', queue }, { kind: null, queue }])],
    ['attempt', () => client.complete(1, null)],
    ['run_at', () => client.snooze(1, 1, { runAt: 'infinity' })],
  ];
  for (const [parameter, call] of cases) {
    await assert.rejects(call, (err) => {
      assert.ok(err instanceof InvalidArgumentError, `${parameter}: got ${err}`);
      assert.ok(err instanceof Error);
      assert.equal(err.code, '22023');
      assert.equal(err.parameter, parameter);
      assert.match(err.message, new RegExp(parameter.replace(/[[\]]/g, '\\$&')));
      return true;
    });
  }
  // Nothing of the refused calls was added.
  assert.deepEqual(await statesOf(client.pool, queue), {});
});

test('graceful_shutdown_loses_nothing', async (t) => {
  const client = newClient(t);
  const conn = await newConn(t);
  const queue = queueName('shutdown');
  const n = 40;
  const ids = await client.enqueueMany(Array.from({ length: n }, (_, i) => ({ kind: 'work', queue, payload: { i } })));
  const stuck = await client.enqueue('stuck', {}, { queue, priority: -1 }); // claimed first
  const finished = new Set();
  let startedCount = 0;
  const worker = new Worker(client, {
    queues: { [queue]: 4 },
    shutdownTimeout: 300,
    pollInterval: 50,
    handleSignals: true,
    handlers: {
      work: async (job) => {
        startedCount += 1;
        await sleep(30);
        finished.add(job.id);
      },
      // Runs until the grace period ends and its signal fires.
      stuck: (job, { signal }) => new Promise((_, reject) => {
        signal.addEventListener('abort', () => reject(signal.reason), { once: true });
      }),
    },
  });
  const running = worker.run();
  await waitFor('some jobs done', () => finished.size >= 8);
  process.kill(process.pid, 'SIGTERM'); // the worker's handler takes it, not the default exit
  await running;

  // Every job the handler finished is done (completions flushed), every other one is back in
  // the queue (never started, or given back), none is still running or lost.
  const states = await statesOf(conn, queue);
  assert.equal(states.running, undefined, `jobs left running: ${JSON.stringify(states)}`);
  assert.equal(states.done, finished.size);
  assert.equal((states.done ?? 0) + (states.queued ?? 0), n + 1);
  assert.ok(finished.size < n, 'the shutdown came too late to test anything');
  const stuckJob = await client.get(stuck);
  assert.equal(stuckJob.state, 'queued', 'the job interrupted by shutdown was not given back');
  assert.equal(stuckJob.maxAttempts, 6, 'giving back spent an attempt (jobs_snooze raises max_attempts)');
  assert.equal(stuckJob.lastError, null);
  assert.equal(worker.stats.fenced, 0);
  assert.ok(startedCount >= finished.size);

  // A second worker finishes the rest; together every job ran to completion exactly once.
  const again = new Set();
  const second = new Worker(client, {
    queues: { [queue]: 4 },
    pollInterval: 50,
    handleSignals: false,
    handlers: {
      work: async (job) => {
        assert.ok(!finished.has(job.id), `job ${job.id} ran again after it was done`);
        again.add(job.id);
      },
      stuck: async () => {},
    },
  });
  second.start();
  await waitFor('the rest done', async () => (await statesOf(conn, queue)).done === n + 1);
  await second.stop();
  assert.equal(finished.size + again.size, n);
  for (const id of ids) assert.ok(finished.has(id) !== again.has(id));
});

test('unstorable_error_text_is_recorded', async (t) => {
  // A stack holding NUL (which the server refuses) and a lone surrogate: unsanitised, the
  // outcome was lost until the lease expired.
  const client = newClient(t);
  const conn = await newConn(t);
  const queue = queueName('unstorable');
  const failed = await client.enqueue('fail', {}, { queue, maxAttempts: 1 });
  const cancelled = await client.enqueue('giveUp', {}, { queue, maxAttempts: 5 });
  const worker = new Worker(client, {
    queues: { [queue]: 2 },
    handleSignals: false,
    lease: 60000,
    pollInterval: 50,
    maintainInterval: -1,
    handlers: {
      fail: async () => { throw new Error('bad \0 byte \uD800'); },
      giveUp: async () => { throw new Cancel('gave up on \0 \uD800'); },
    },
  });
  worker.start();
  try {
    await waitFor('both outcomes recorded', async () => {
      const s = await statesOf(conn, queue);
      return s.dead === 1 && s.cancelled === 1;
    });
  } finally {
    await worker.stop();
  }
  const f = await client.get(failed);
  assert.equal(f.attempts, 1);
  assert.ok(f.lastError.startsWith('Error: bad  byte \uFFFD\n'), f.lastError);
  const c = await client.get(cancelled);
  assert.equal(c.attempts, 1);
  assert.ok(c.lastError.includes('gave up on  \uFFFD'), c.lastError);
  assert.equal(worker.stats.failed, 1);
  assert.equal(worker.stats.cancelled, 1);
});

test('outcome_retried_after_connection_loss', async (t) => {
  // Each outcome call blocks on a row lock the test holds, and its backend is terminated
  // while it waits: the worker must retry it on a new connection and record it exactly once.
  const client = newClient(t);
  const conn = await newConn(t);
  const blocker = await newConn(t);
  const queue = queueName('outcome-retry');
  const outcomes = { fail: 'jobs_fail', snooze: 'jobs_snooze', cancel: 'jobs_cancel' };
  let proceed;
  const proceeding = new Promise((resolve) => { proceed = resolve; });
  const ids = {};
  for (const kind of Object.keys(outcomes)) ids[kind] = await client.enqueue(kind, {}, { queue, maxAttempts: 1 });
  const worker = new Worker(client, {
    queues: { [queue]: 3 },
    handleSignals: false,
    lease: 60000,
    pollInterval: 50,
    maintainInterval: -1,
    logger: recordingLogger(),
    handlers: {
      fail: async () => { await proceeding; throw new Error('failed once'); },
      snooze: async () => { await proceeding; return new Snooze(3600000); },
      cancel: async () => { await proceeding; throw new Cancel('cancelled once'); },
    },
  });
  worker.start();
  try {
    await waitFor('the three jobs running', async () => (await statesOf(conn, queue)).running === 3);
    // (claims skip locked rows: lock them only once they are running)
    await blocker.query('BEGIN');
    await blocker.query('SELECT 1 FROM jobs WHERE id = ANY($1) FOR UPDATE', [Object.values(ids)]);
    proceed();
    for (const fn of Object.values(outcomes)) {
      await waitFor(`a blocked ${fn} to terminate`, async () => (await conn.query(
        `SELECT pg_terminate_backend(pid) FROM pg_stat_activity
         WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE $1`, [`%${fn}(%`])).rowCount > 0);
    }
    await blocker.query('COMMIT');
    await waitFor('every outcome recorded', async () => {
      const s = await statesOf(conn, queue);
      return s.dead === 1 && s.queued === 1 && s.cancelled === 1;
    }, 20000);
  } finally {
    await worker.stop();
  }
  const rows = {};
  for (const [kind, id] of Object.entries(ids)) {
    const r = await conn.query('SELECT attempts, max_attempts, jsonb_array_length(errors) AS errors FROM jobs WHERE id = $1', [id]);
    rows[kind] = [r.rows[0].attempts, r.rows[0].max_attempts, r.rows[0].errors];
  }
  // one failure entry each; a snooze recorded twice would have raised max_attempts twice
  assert.deepEqual(rows, { fail: [1, 1, 1], snooze: [1, 2, 0], cancel: [1, 1, 1] });
  assert.deepEqual([worker.stats.failed, worker.stats.snoozed, worker.stats.cancelled, worker.stats.fenced], [1, 1, 1, 0]);
});

test('publish_fans_out_one_job_per_subscription', async (t) => {
  const client = newClient(t);
  const conn = await newConn(t);
  const queue = queueName('publish');
  const other = `${queue}-b`;
  const topic = `${queue}-topic`;
  assert.equal(await client.subscribe(topic, queue, 'receipt'), true);
  assert.equal(await client.subscribe(topic, queue, 'receipt'), false);
  assert.equal(await client.subscribe(topic, other, 'charge'), true);

  const ids = await client.publish(topic, { order: 7 }, { priority: 3, concurrencyKey: 'c1' });
  assert.equal(ids.length, 2);
  assert.ok(ids.every((id) => typeof id === 'number'));
  const rows = [];
  for (const id of ids) {
    const res = await conn.query('SELECT queue, kind, payload, priority, concurrency_key FROM jobs WHERE id = $1', [id]);
    rows.push(res.rows[0]);
  }
  // In the order of the subscriptions: queue, then kind.
  assert.deepEqual(rows, [
    { queue, kind: 'receipt', payload: { order: 7 }, priority: 3, concurrency_key: 'c1' },
    { queue: other, kind: 'charge', payload: { order: 7 }, priority: 3, concurrency_key: 'c1' },
  ]);
  assert.deepEqual(await client.publish(`${queue}-nobody`), []);

  // In the caller's transaction: a rollback leaves no job.
  await conn.query('BEGIN');
  const rolledBack = await client.publish(topic, {}, {}, { db: conn });
  await conn.query('ROLLBACK');
  assert.equal(rolledBack.length, 2);
  for (const id of rolledBack) assert.equal(await client.get(id), null);

  assert.equal(await client.unsubscribe(topic, other, 'charge'), true);
  assert.equal(await client.unsubscribe(topic, other, 'charge'), false);
  assert.equal((await client.publish(topic)).length, 1);
  await assert.rejects(client.publish(topic, {}, { maxAttempts: 0 }), (err) => {
    assert.ok(err instanceof InvalidArgumentError, `got ${err}`);
    assert.equal(err.parameter, 'max_attempts');
    return true;
  });
});

test('debounce_replaces_queued_job', async (t) => {
  const client = newClient(t);
  const conn = await newConn(t);
  const queue = queueName('debounce');
  const opts = (delay) => ({ queue, uniqueKey: 'doc-7', onDuplicate: 'replace', delay });
  const first = await client.enqueue('reindex', { rev: 1 }, opts(60_000));
  const again = await client.enqueue('reindex', { rev: 2 }, { ...opts(3_600_000), priority: 3 });
  assert.equal(again, first);
  const row = async () => (await conn.query(
    `SELECT payload, priority, state::text AS state, run_at > now() + interval '50 minutes' AS later
     FROM jobs WHERE id = $1`, [first])).rows[0];
  assert.deepEqual(await row(), { payload: { rev: 2 }, priority: 3, state: 'queued', later: true });
  // keep (the default) changes nothing; the batch form replaces per job.
  assert.equal(await client.enqueue('reindex', { rev: 3 }, { queue, uniqueKey: 'doc-7' }), first);
  assert.deepEqual(await client.enqueueMany([
    { kind: 'reindex', payload: { rev: 4 }, queue, uniqueKey: 'doc-7', onDuplicate: 'replace', runAt: new Date(Date.now() + 3_600_000) },
  ]), [first]);
  assert.deepEqual((await row()).payload, { rev: 4 });
  assert.deepEqual(await statesOf(conn, queue), { queued: 1 });
});

test('throttle_holds_key_after_finish', async (t) => {
  const client = newClient(t);
  const conn = await newConn(t);
  const queue = queueName('throttle');
  const first = await client.enqueue('digest', {}, { queue, uniqueKey: 'daily', uniqueFor: 3_600_000 });
  await client.cancel(first);
  assert.equal(await client.enqueue('digest', {}, { queue, uniqueKey: 'daily', uniqueFor: 3_600_000 }), first);
  assert.deepEqual(await client.enqueueMany([{ kind: 'digest', queue, uniqueKey: 'daily', uniqueFor: 3_600_000 }]), [first]);
  assert.deepEqual(await statesOf(conn, queue), { cancelled: 1 });
  await assert.rejects(client.enqueue('digest', {}, { queue, uniqueFor: 3_600_000 }),
    (err) => err instanceof InvalidArgumentError && err.parameter === 'unique_for');
});

test('batch_handler_settles_each_job', async (t) => {
  // A batch handler gets up to maxJobs jobs claimed together; each job keeps its own outcome
  // (done with its result, failed, cancelled), and throwing fails every job.
  const client = newClient(t);
  const conn = await newConn(t);
  const queue = queueName('batch');
  await conn.query("UPDATE jobs_settings SET backoff_base = '1 hour', backoff_cap = greatest(backoff_cap, '1 hour')");
  const ids = [];
  for (let n = 0; n < 6; n++) ids.push(await client.enqueue('each', { n }, { queue }));
  const dead = [];
  for (let n = 0; n < 3; n++) dead.push(await client.enqueue('all', { n }, { queue, maxAttempts: 1 }));
  const calls = [];
  const worker = new Worker(client, {
    queues: { [queue]: 10 }, pollInterval: 50, maintainInterval: -1, handleSignals: false,
    handlers: {
      each: new Batch(async (jobs) => {
        calls.push(jobs.map((j) => j.id));
        return jobs.map((j) => (j.payload.n === 1 ? new Error('odd 1') : j.payload.n === 3 ? new Cancel('not wanted') : j.payload.n * 2));
      }, { maxJobs: 4 }),
      all: new Batch(async () => { throw new Error('the bulk call failed'); }),
    },
  });
  worker.start();
  t.after(() => worker.stop());
  await waitFor('nine outcomes', () => worker.stats.completed + worker.stats.failed + worker.stats.cancelled === 9);
  await worker.stop();
  assert.ok(calls.every((c) => c.length >= 1 && c.length <= 4), `call sizes ${calls.map((c) => c.length)}`);
  assert.equal(Math.max(...calls.map((c) => c.length)), 4);
  assert.deepEqual(calls.flat().sort(), [...ids].sort());
  for (const [n, id] of ids.entries()) {
    const { rows: [j] } = await conn.query(
      'SELECT state::text, attempts, last_error, (SELECT result FROM jobs_result(id)) AS result FROM jobs WHERE id = $1', [id]);
    if (n === 1) {
      assert.equal(j.state, 'queued');
      assert.equal(j.attempts, 1);
      assert.match(j.last_error, /odd 1/);
    } else if (n === 3) {
      assert.equal(j.state, 'cancelled');
      assert.match(j.last_error, /not wanted/);
    } else {
      assert.deepEqual([j.state, j.attempts, j.last_error, j.result], ['done', 1, null, n * 2]);
    }
  }
  for (const id of dead) {
    const { rows: [j] } = await conn.query('SELECT state::text, last_error FROM jobs WHERE id = $1', [id]);
    assert.equal(j.state, 'dead');
    assert.match(j.last_error, /the bulk call failed/);
  }
});
