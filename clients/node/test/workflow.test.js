// Workflows: parents and children, results, wait, steps and progress.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import {
  InvalidArgumentError, JobNotHeldError, UnknownJobError, WaitTimeoutError, Worker, retryAt,
} from '../src/index.js';
import {
  newClient, newConn, queueName, recordingLogger, sleep, waitFor,
} from './helpers.js';

// startWorker starts a worker on one queue with quick timers and stops it when the test ends.
function startWorker(t, client, queue, handlers, options = {}) {
  const worker = new Worker(client, {
    queues: { [queue]: 4 }, pollInterval: 50, maintainInterval: -1, handleSignals: false, handlers, ...options,
  });
  worker.start();
  t.after(() => worker.stop());
  return worker;
}

async function finalState(client, id, wanted) {
  return waitFor(`job ${id} ${wanted.join(' or ')}`, async () => {
    const job = await client.get(id);
    return wanted.includes(job.state) ? job : null;
  });
}

test('fan_in_child_gets_parent_results', async (t) => {
  const client = newClient(t);
  const queue = queueName('fanin');
  const parents = await Promise.all([1, 2, 3].map((n) => client.enqueue('part', { n }, { queue })));
  const child = await client.enqueue('sum', {}, { queue, dependsOn: parents });
  assert.equal((await client.get(child)).state, 'waiting');
  const byId = (a, b) => a - b;
  assert.deepEqual((await client.get(child)).dependsOn.sort(byId), [...parents].sort(byId));

  let seen = null;
  let parentsDone = null;
  const worker = startWorker(t, client, queue, {
    part: async (job) => ({ n: job.payload.n, square: job.payload.n ** 2 }),
    sum: async (job) => {
      seen = job.parentResults;
      parentsDone = await Promise.all(parents.map(async (id) => (await client.get(id)).state));
      return Object.values(job.parentResults).reduce((s, r) => s + r.square, 0);
    },
  });
  const done = await finalState(client, child, ['done']);
  await worker.stop();
  assert.deepEqual(parentsDone, ['done', 'done', 'done']);
  // Keyed by the parents' ids, as text, for a job enqueued with dependsOn.
  assert.deepEqual(seen, {
    [parents[0]]: { n: 1, square: 1 }, [parents[1]]: { n: 2, square: 4 }, [parents[2]]: { n: 3, square: 9 },
  });
  assert.equal(done.result, 14);
  assert.equal(worker.stats.completed, 4);
});

test('enqueueWorkflow returns the ids by name, shares a workflow id, and keys parentResults by name', async (t) => {
  const client = newClient(t);
  const queue = queueName('wf');
  const ids = await client.enqueueWorkflow([
    { name: 'fetch', kind: 'fetch', queue, payload: { url: 'a' } },
    { name: 'resize', kind: 'resize', queue, dependsOn: ['fetch'], maxAttempts: 2 },
    { name: 'thumb', kind: 'thumb', queue, dependsOn: ['fetch'], meta: { size: 64 } },
    { name: 'publish', kind: 'publish', queue, dependsOn: ['resize', 'thumb'], notifyFinished: true },
  ]);
  assert.deepEqual(Object.keys(ids).sort(), ['fetch', 'publish', 'resize', 'thumb']);
  for (const id of Object.values(ids)) assert.equal(typeof id, 'number');
  const got = Object.fromEntries(await Promise.all(Object.entries(ids).map(async ([n, id]) => [n, await client.get(id)])));
  // One workflow id, the id of its first step, on every step.
  const first = Math.min(...Object.values(ids));
  assert.deepEqual(Object.values(got).map((j) => j.workflowId), [first, first, first, first]);
  assert.equal(got.fetch.state, 'queued');
  assert.deepEqual([got.resize.state, got.thumb.state, got.publish.state], ['waiting', 'waiting', 'waiting']);
  assert.deepEqual(got.publish.dependsOn.sort((a, b) => a - b), [ids.resize, ids.thumb].sort((a, b) => a - b));
  assert.equal(got.resize.maxAttempts, 2);
  assert.deepEqual(got.thumb.meta, { size: 64 });

  const order = [];
  let publishParents = null;
  const worker = startWorker(t, client, queue, {
    fetch: async (job) => { order.push('fetch'); return `fetched ${job.payload.url}`; },
    resize: async (job) => { order.push('resize'); return { from: job.parentResults.fetch }; },
    thumb: async () => { order.push('thumb'); return 'thumb.png'; },
    publish: async (job) => { order.push('publish'); publishParents = job.parentResults; },
  });
  const done = await client.wait(ids.publish, { timeout: 10000 });
  await worker.stop();
  assert.deepEqual(done, { state: 'done', result: null, lastError: null });
  assert.equal(order[0], 'fetch');
  assert.equal(order[3], 'publish');
  assert.deepEqual(publishParents, { resize: { from: 'fetched a' }, thumb: 'thumb.png' });
});

test('cancelWorkflow cancels the steps not finished and returns how many', async (t) => {
  const client = newClient(t);
  const queue = queueName('wf-cancel');
  const ids = await client.enqueueWorkflow([
    { name: 'a', kind: 'k', queue },
    { name: 'b', kind: 'k', queue, dependsOn: ['a'] },
    { name: 'c', kind: 'k', queue, dependsOn: ['b'] },
  ]);
  const [a] = await client.claim({ worker: 'w', queues: [queue] });
  assert.equal(a.id, ids.a);
  assert.equal(await client.complete(a.id, a.attempt, { result: 1 }), true);
  assert.equal((await client.get(ids.b)).state, 'queued');
  const workflowId = (await client.get(ids.a)).workflowId;
  assert.equal(await client.cancelWorkflow(workflowId), 2);
  const states = await Promise.all(Object.values(ids).map(async (id) => (await client.get(id)).state));
  assert.deepEqual(states, ['done', 'cancelled', 'cancelled']);
  assert.equal(await client.cancelWorkflow(workflowId), 0);
});

test('onParentFailure: a dead parent cancels a child by default, and lets a run child run', async (t) => {
  const client = newClient(t);
  const queue = queueName('parent-dies');
  const parent = await client.enqueue('p', {}, { queue, maxAttempts: 1 });
  const cancelled = await client.enqueue('c', {}, { queue, dependsOn: [parent] });
  const runs = await client.enqueue('r', {}, { queue, dependsOn: [parent], onParentFailure: 'run' });
  const [p] = await client.claim({ worker: 'w', queues: [queue] });
  assert.equal(await client.fail(p.id, p.attempt, 'parent failed'), 'dead');
  assert.equal((await client.get(cancelled)).state, 'cancelled');
  assert.equal((await client.get(runs)).state, 'queued');
  const [r] = await client.claim({ worker: 'w', queues: [queue] });
  assert.equal(r.id, runs);
});

test('a 22023 for a bad onParentFailure or workflow is an InvalidArgumentError naming the parameter', async (t) => {
  const client = newClient(t);
  const conn = await newConn(t);
  const queue = queueName('wf-invalid');
  const cases = [
    ['on_parent_failure', () => client.enqueue('k', {}, { queue, onParentFailure: 'ignore' })],
    ['steps', () => client.enqueueWorkflow([{ name: 'a', kind: 'k', queue, dependsOn: ['missing'] }])],
    ['steps', () => client.enqueueWorkflow([{ name: 'a', kind: 'k', queue }, { name: 'a', kind: 'k', queue }])],
    ['steps', () => client.enqueueWorkflow([{ kind: 'k', queue }])],
    ['steps', () => client.enqueueWorkflow([{ name: 'a', kind: 'k\0', queue }])],
  ];
  for (const [parameter, call] of cases) {
    await assert.rejects(call, (err) => {
      assert.ok(err instanceof InvalidArgumentError, `${parameter}: got ${err}`);
      assert.equal(err.code, '22023');
      assert.equal(err.parameter, parameter);
      assert.match(err.message, new RegExp(parameter));
      return true;
    });
  }
  const left = await conn.query('SELECT count(*)::int AS n FROM jobs WHERE queue = $1', [queue]);
  assert.equal(left.rows[0].n, 0);
  // jobs_enqueue_many has no such arguments: refused before anything is sent.
  await assert.rejects(client.enqueueMany([{ kind: 'k', queue, dependsOn: [1] }]), /enqueueMany cannot set dependsOn/);
  // A step field jobs_enqueue_workflow would ignore (a typo, or a unique key) is refused.
  await assert.rejects(client.enqueueWorkflow([{ name: 'a', kind: 'k', queue }, { name: 'b', kind: 'k', queue, depends_on: ['a'] }]),
    (err) => err instanceof TypeError && /step 1 has depends_on/.test(err.message));
  await assert.rejects(client.enqueueWorkflow([{ name: 'a', kind: 'k', queue, uniqueKey: 'u' }]), /step 0 has uniqueKey/);
  // complete's options come before {db}: the old form is refused, not run outside the transaction.
  await assert.rejects(client.complete(1, 1, { db: conn }), TypeError);
  await assert.rejects(client.completeMany([1], [1], { db: conn }), TypeError);
});

test('results: a handler\'s return value, batched, and complete, completeMany and result', async (t) => {
  const client = newClient(t);
  const queue = queueName('results');
  const kinds = ['object', 'number', 'string', 'none', 'null', 'array'];
  const ids = await client.enqueueMany(kinds.map((kind) => ({ kind, queue })));
  const batches = [];
  const completeMany = client.completeMany.bind(client);
  client.completeMany = (i, a, opts, db) => { batches.push(i.length); return completeMany(i, a, opts, db); };
  const worker = startWorker(t, client, queue, {
    object: async () => ({ ok: true, nested: { q: "it's \"quoted\" \\ {1,2}" } }),
    number: async () => 42,
    string: async () => 'fine',
    none: async () => {},
    null: async () => null,
    array: async () => [1, 'two', null],
  }, { queues: { [queue]: 6 }, completeBatchDelay: 30 });
  for (const id of ids) await finalState(client, id, ['done']);
  await worker.stop();
  assert.ok(Math.max(...batches) > 1, `batches: ${batches}`);
  const results = await Promise.all(ids.map((id) => client.result(id)));
  assert.deepEqual(results.map((r) => r.state), kinds.map(() => 'done'));
  assert.deepEqual(results.map((r) => r.result), [
    { ok: true, nested: { q: "it's \"quoted\" \\ {1,2}" } }, 42, 'fine', null, null, [1, 'two', null],
  ]);
  assert.equal((await client.get(ids[1])).result, 42);

  // The client's calls, one by one and in a batch.
  const [a, b, c] = await client.enqueueMany([{ kind: 'k', queue }, { kind: 'k', queue }, { kind: 'k', queue }]);
  const held = await client.claim({ worker: 'w', queues: [queue], maxJobs: 3 });
  assert.equal(await client.complete(a, 1, { result: { by: 'complete' } }), true);
  assert.deepEqual((await client.completeMany([b, c], [1, 1], { results: [undefined, 'c'] })).sort((x, y) => x - y), [b, c]);
  assert.equal(held.length, 3);
  assert.deepEqual((await client.result(a)).result, { by: 'complete' });
  assert.equal((await client.result(b)).result, null);
  assert.equal((await client.result(c)).result, 'c');
  assert.equal(await client.result(987654321), null);
});

test('a result refused in a batch fails only its own job', async (t) => {
  const client = newClient(t);
  const queue = queueName('big-result');
  const [small, big, other, nul] = await client.enqueueMany(['small', 'big', 'other', 'nul']
    .map((kind) => ({ kind, queue, maxAttempts: 1 })));
  const batches = [];
  const completeMany = client.completeMany.bind(client);
  client.completeMany = (i, a, opts, db) => { batches.push(i.length); return completeMany(i, a, opts, db); };
  const logger = recordingLogger();
  const worker = startWorker(t, client, queue, {
    small: async () => 'small',
    big: async () => 'x'.repeat(1_100_000), // over the 1 MB a result may take
    other: async () => ({ fine: true }),
    nul: async () => 'a\0b', // JSON's \u0000, which jsonb refuses (22P05)
  }, { queues: { [queue]: 4 }, completeBatchDelay: 200, logger });
  const b = await finalState(client, big, ['dead']);
  const n = await finalState(client, nul, ['dead']);
  await finalState(client, small, ['done']);
  await finalState(client, other, ['done']);
  await worker.stop();
  assert.equal(batches[0], 4, `batches: ${batches}`);
  assert.match(b.lastError, /result was refused: .*result/);
  assert.match(n.lastError, /result was refused/);
  assert.equal(b.result, null);
  assert.equal((await client.result(small)).result, 'small');
  assert.deepEqual((await client.result(other)).result, { fine: true });
  assert.equal(worker.stats.completed, 2);
  assert.equal(worker.stats.failed, 2);
});

test('complete(db, result) stores the result with the handler\'s own transaction', async (t) => {
  const client = newClient(t);
  const queue = queueName('intx-result');
  const id = await client.enqueue('k', {}, { queue });
  const worker = startWorker(t, client, queue, {
    k: async (job, { complete }) => {
      const db = await client.pool.connect();
      try {
        await db.query('BEGIN');
        assert.equal(await complete(db, { inTx: job.id }), true);
        await db.query('COMMIT');
      } finally {
        db.release();
      }
      return 'returned after complete: not stored';
    },
  });
  await finalState(client, id, ['done']);
  await worker.stop();
  assert.deepEqual((await client.result(id)).result, { inTx: id });
  assert.equal(worker.stats.completed, 1);
});

test('wait returns the result of a job a worker finished, woken by jobs_finished', async (t) => {
  const client = newClient(t);
  const queue = queueName('wait');
  const id = await client.enqueue('slow', { n: 20 }, { queue, notifyFinished: true });
  let release;
  const released = new Promise((resolve) => { release = resolve; });
  startWorker(t, client, queue, { slow: async (job) => { await released; return { doubled: job.payload.n * 2 }; } });
  await finalState(client, id, ['running']);
  // The poll is a minute: only the notification can end the wait within the timeout.
  const waiting = client.wait(id, { timeout: 10000, pollInterval: 60000 });
  await sleep(100);
  const started = Date.now();
  release();
  const r = await waiting;
  assert.deepEqual(r, { state: 'done', result: { doubled: 40 }, lastError: null });
  assert.ok(Date.now() - started < 5000, `wait took ${Date.now() - started} ms`);
  // A finished job answers at once, notification or not.
  assert.deepEqual(await client.wait(id, { timeout: 0 }), r);
});

test('wait finds a job enqueued without notifyFinished by its poll, and reports dead and cancelled jobs', async (t) => {
  const client = newClient(t);
  const queue = queueName('wait-poll');
  const [quiet, dies, cancelled] = await client.enqueueMany([
    { kind: 'k', queue }, { kind: 'k', queue, maxAttempts: 1 }, { kind: 'k', queue },
  ]);
  const waiting = client.wait(quiet, { timeout: 10000, pollInterval: 50 });
  const [j] = await client.claim({ worker: 'w', queues: [queue] });
  assert.equal(j.id, quiet);
  assert.equal(await client.complete(j.id, j.attempt, { result: 'polled' }), true);
  assert.deepEqual(await waiting, { state: 'done', result: 'polled', lastError: null });

  const [d] = await client.claim({ worker: 'w', queues: [queue] });
  await client.fail(d.id, d.attempt, 'gave up');
  assert.deepEqual(await client.wait(dies, { timeout: 1000 }), { state: 'dead', result: null, lastError: 'gave up' });
  await client.cancel(cancelled);
  assert.equal((await client.wait(cancelled, { timeout: 1000 })).state, 'cancelled');
});

test('wait_times_out_with_typed_error', async (t) => {
  const client = newClient(t);
  const conn = await newConn(t);
  const queue = queueName('wait-timeout');
  const id = await client.enqueue('never', {}, { queue, notifyFinished: true });
  const started = Date.now();
  await assert.rejects(client.wait(id, { timeout: 300, pollInterval: 50 }), (err) => {
    assert.ok(err instanceof WaitTimeoutError, `got ${err}`);
    assert.equal(err.id, id);
    assert.equal(err.timeoutMs, 300);
    return true;
  });
  const took = Date.now() - started;
  assert.ok(took >= 300 && took < 3000, `wait gave up after ${took} ms`);
  assert.equal((await client.get(id)).state, 'queued');
  await assert.rejects(client.wait(987654321, { timeout: 1000 }), (err) => err instanceof UnknownJobError && err.id === 987654321);
  await assert.rejects(client.wait(id, { pollInterval: 0 }), /options\.pollInterval must be a positive number/);
  await assert.rejects(client.wait(id, { timeout: '5s' }), /options\.timeout must be a number/);
  // Each wait ended its own connection.
  await waitFor('the wait connections closed', async () => (await conn.query(
    "SELECT count(*)::int AS n FROM pg_stat_activity WHERE query = 'LISTEN jobs_finished' AND datname = current_database()")).rows[0].n === 0);
});

test('step_runs_once_across_attempts', async (t) => {
  const client = newClient(t);
  const queue = queueName('step');
  const id = await client.enqueue('charge', { amount: 5 }, { queue, maxAttempts: 3 });
  let charged = 0;
  const seen = [];
  const worker = startWorker(t, client, queue, {
    charge: async (job) => {
      seen.push({ attempt: job.attempt, checkpoints: job.checkpoints });
      const receipt = await job.step('charge', async () => {
        charged += 1;
        return { receipt: `r-${job.payload.amount}`, at: new Date(0) };
      });
      const again = await job.step('charge', () => { throw new Error('must not run: saved in this attempt'); });
      assert.deepEqual(again, receipt);
      if (job.attempt === 1) throw retryAt(new Date(), 'after the charge, before the email');
      return receipt;
    },
  });
  const done = await finalState(client, id, ['done', 'dead']);
  await worker.stop();
  assert.equal(done.state, 'done', done.lastError);
  assert.equal(charged, 1);
  assert.deepEqual(seen.map((s) => s.attempt), [1, 2]);
  assert.equal(seen[0].checkpoints, null);
  // As JSON gave it back, on both attempts: the Date is its ISO string.
  const saved = { receipt: 'r-5', at: '1970-01-01T00:00:00.000Z' };
  assert.deepEqual(seen[1].checkpoints, { charge: saved });
  assert.deepEqual(done.result, saved);
});

test('progress is visible through get; step and progress of a lost job throw JobNotHeldError', async (t) => {
  const client = newClient(t);
  const queue = queueName('progress');
  const id = await client.enqueue('import', {}, { queue });
  const [job] = await client.claim({ worker: 'w', queues: [queue] });
  assert.equal((await client.get(id)).progress, null);
  await job.progress({ rows: 3, of: 10 });
  assert.deepEqual((await client.get(id)).progress, { rows: 3, of: 10 });
  await job.progress();
  assert.equal((await client.get(id)).progress, null); // undefined clears it
  await job.progress(0.5);
  assert.equal((await client.get(id)).progress, 0.5);

  assert.equal(await client.cancel(id), true);
  await assert.rejects(job.progress(1), (err) => err instanceof JobNotHeldError && err.id === id && err.attempt === 1);
  let ran = 0;
  await assert.rejects(job.step('s', () => { ran += 1; return 1; }), JobNotHeldError);
  assert.equal(ran, 1);
  assert.equal(job.checkpoints, null);
  assert.equal((await client.get(id)).progress, 0.5);
});

test('a handler whose step finds its job lost ends as lost, recording nothing', async (t) => {
  const client = newClient(t);
  const queue = queueName('step-lost');
  const logger = recordingLogger();
  const id = await client.enqueue('k', {}, { queue });
  let release;
  const released = new Promise((resolve) => { release = resolve; });
  const events = [];
  const worker = startWorker(t, client, queue, {
    k: async (job) => {
      await released;
      await job.step('after-cancel', () => 'never saved');
      return 'never stored';
    },
  }, { logger, onEvent: (e) => events.push(e) });
  await finalState(client, id, ['running']);
  assert.equal(await client.cancel(id), true);
  release();
  await waitFor('the lost run', () => worker.stats.fenced === 1);
  await worker.stop();
  assert.deepEqual(events.map((e) => e.type), ['lost']);
  assert.ok(events[0].error instanceof JobNotHeldError);
  assert.equal(worker.stats.failed, 0);
  const got = await client.get(id);
  assert.equal(got.state, 'cancelled');
  assert.equal(got.result, null);
});
