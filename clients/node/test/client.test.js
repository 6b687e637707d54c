// The Client: one method per SQL function, named arguments passed through, the caller's
// transaction honoured through {db}.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import pg from 'pg';
import { Client, InvalidArgumentError } from '../src/index.js';
import { newClient, newConn, queueName, sleep, statesOf, url } from './helpers.js';

test('enqueue passes every option through', async (t) => {
  const client = newClient(t);
  const conn = await newConn(t);
  const queue = queueName('options');
  const runAt = new Date(Date.now() + 3600_000);
  const id = await client.enqueue('report', { n: 1, nested: { a: [1, 2] } }, {
    queue, runAt, priority: -5, maxAttempts: 9, uniqueKey: 'report:1', concurrencyKey: 'acct:1', meta: { trace: 'x' },
  });
  assert.equal(typeof id, 'number');
  const res = await conn.query(`SELECT kind, payload, queue, run_at, priority, max_attempts, unique_key,
    concurrency_key, meta FROM jobs WHERE id = $1`, [id]);
  const row = res.rows[0];
  assert.deepEqual(row.payload, { n: 1, nested: { a: [1, 2] } });
  assert.equal(row.queue, queue);
  assert.equal(row.run_at.getTime(), runAt.getTime());
  assert.equal(row.priority, -5);
  assert.equal(row.max_attempts, 9);
  assert.equal(row.unique_key, 'report:1');
  assert.equal(row.concurrency_key, 'acct:1');
  assert.deepEqual(row.meta, { trace: 'x' });

  // The unique key gives back the live job that holds it.
  assert.equal(await client.enqueue('report', {}, { queue, uniqueKey: 'report:1' }), id);

  // Defaults: payload {}, queue 'default', ready now, priority 0, 5 attempts.
  const plain = await client.enqueue('plain');
  const d = (await conn.query('SELECT payload, queue, priority, max_attempts, run_at <= now() AS due FROM jobs WHERE id = $1', [plain])).rows[0];
  assert.deepEqual(d, { payload: {}, queue: 'default', priority: 0, max_attempts: 5, due: true });
  await client.cancel(plain);

  // delay is counted from the database's now().
  const later = await client.enqueue('later', [1, 'two'], { queue, delay: 60_000 });
  const l = (await conn.query(`SELECT run_at - created_at BETWEEN interval '59 s' AND interval '61 s' AS ok,
    payload FROM jobs WHERE id = $1`, [later])).rows[0];
  assert.deepEqual(l, { ok: true, payload: [1, 'two'] });
});

test('enqueueMany keeps input order and fills defaults per job', async (t) => {
  const client = newClient(t);
  const conn = await newConn(t);
  const queue = queueName('many');
  const at = new Date(Date.now() + 60_000);
  const ids = await client.enqueueMany([
    { kind: 'a', queue, payload: { i: 0 }, priority: 3 },
    { kind: 'b', queue, runAt: at, uniqueKey: 'u1' },
    { kind: 'c', queue, maxAttempts: 2, meta: { m: 1 } },
  ]);
  assert.equal(ids.length, 3);
  const rows = (await conn.query(`SELECT id, kind, payload, priority, max_attempts, unique_key, meta,
    run_at <= now() AS due FROM jobs WHERE id = ANY($1) ORDER BY id`, [ids])).rows;
  assert.deepEqual(rows.map((r) => r.id).map(Number), ids);
  assert.deepEqual(rows.map((r) => r.kind), ['a', 'b', 'c']);
  assert.deepEqual(rows.map((r) => r.payload), [{ i: 0 }, {}, {}]);
  assert.deepEqual(rows.map((r) => r.priority), [3, 0, 0]);
  assert.deepEqual(rows.map((r) => r.max_attempts), [5, 5, 2]);
  assert.deepEqual(rows.map((r) => r.unique_key), [null, 'u1', null]);
  assert.deepEqual(rows.map((r) => r.meta), [null, null, { m: 1 }]);
  assert.deepEqual(rows.map((r) => r.due), [true, false, true]);
  assert.deepEqual(await client.enqueueMany([]), []);
});

test('claim, heartbeat, complete and their batch forms', async (t) => {
  const client = newClient(t);
  const queue = queueName('claim');
  const ids = await client.enqueueMany([0, 1, 2].map((i) => ({ kind: 'k', queue, payload: { i }, priority: i })));
  const jobs = await client.claim({ worker: 'w1', maxJobs: 2, queues: [queue], lease: 30_000 });
  assert.deepEqual(jobs.map((j) => j.id), ids.slice(0, 2)); // best first
  const [j] = jobs;
  assert.equal(j.kind, 'k');
  assert.equal(j.queue, queue);
  assert.deepEqual(j.payload, { i: 0 });
  assert.equal(j.attempt, 1);
  assert.equal(j.maxAttempts, 5);
  assert.ok(j.leaseExpiresAt instanceof Date && j.runAt instanceof Date && j.createdAt instanceof Date);
  assert.ok(j.leaseExpiresAt - j.runAt < 40_000);

  assert.equal(await client.heartbeat(j.id, 1, { lease: 60_000 }), true);
  assert.equal(await client.heartbeat(j.id, 7), false);
  const hb = await client.heartbeatMany(ids, [1, 1, 1], { lease: 60_000 });
  assert.deepEqual(hb.sort((a, b) => a.id - b.id), [{ id: ids[0], extended: true }, { id: ids[1], extended: true }]);

  assert.equal(await client.complete(ids[0], 1), true);
  assert.equal(await client.complete(ids[0], 1), false);
  const [third] = await client.claim({ worker: 'w2', queues: [queue] });
  assert.deepEqual((await client.completeMany([ids[1], third.id, ids[0]], [1, 1, 1])).sort((a, b) => a - b), [ids[1], third.id]);
  for (const id of ids) assert.equal((await client.get(id)).state, 'done');
});

test('fail records the error and retries or kills', async (t) => {
  const client = newClient(t);
  const queue = queueName('fail');
  const id = await client.enqueue('k', {}, { queue, maxAttempts: 2 });
  let [job] = await client.claim({ worker: 'w', queues: [queue] });
  const retryAt = new Date(Date.now() - 1000); // in the past: ready at once
  assert.equal(await client.fail(id, job.attempt, new Error('boom'), { retryAt }), 'queued');
  let got = await client.get(id);
  assert.match(got.lastError, /Error: boom\n\s+at /); // an Error is stored with its stack
  [job] = await client.claim({ worker: 'w', queues: [queue] });
  assert.equal(job.attempt, 2);
  assert.equal(await client.fail(id, 2, 'second failure'), 'dead');
  got = await client.get(id);
  assert.equal(got.state, 'dead');
  assert.equal(got.lastError, 'second failure');
  assert.ok(got.finishedAt instanceof Date);

  assert.equal(await client.retry(id), true);
  assert.equal((await client.get(id)).state, 'queued');
  assert.equal(await client.retry(id), false);
});

test('snooze, cancel in both forms, get of an unknown id', async (t) => {
  const client = newClient(t);
  const queue = queueName('snooze');
  const [a, b, c] = await client.enqueueMany([{ kind: 'a', queue }, { kind: 'b', queue }, { kind: 'c', queue }]);
  const claimed = await client.claim({ worker: 'w', queues: [queue], maxJobs: 3 });
  const at = (id) => claimed.find((j) => j.id === id).attempt;

  assert.equal(await client.snooze(a, at(a), { delay: 60_000 }), true);
  let got = await client.get(a);
  assert.equal(got.state, 'queued');
  assert.equal(got.maxAttempts, 6);
  assert.ok(got.runAt > new Date(Date.now() + 50_000));
  // Snoozed for a minute: not ready, and b and c are still running.
  assert.deepEqual(await client.claim({ worker: 'w', queues: [queue] }), []);

  assert.equal(await client.cancel(b, { attempt: at(b), error: 'cannot succeed' }), true);
  got = await client.get(b);
  assert.equal(got.state, 'cancelled');
  assert.equal(got.lastError, 'cannot succeed');

  assert.equal(await client.cancel(c), true); // the operator's form, whoever holds it
  assert.equal((await client.get(c)).state, 'cancelled');
  assert.equal(await client.cancel(c), false);

  assert.equal(await client.snooze(a, at(a), { runAt: new Date() }), false); // no longer running
  assert.equal(await client.get(987654321), null);
});

test('stats, maintain and requeueExpired', async (t) => {
  const client = newClient(t);
  const queue = queueName('stats');
  await client.enqueueMany([{ kind: 'k', queue }, { kind: 'k', queue }]);
  const [job] = await client.claim({ worker: 'w', queues: [queue], lease: 10 });
  const stats = (await client.stats()).filter((s) => s.queue === queue);
  assert.deepEqual(stats.map((s) => [s.state, s.jobs]), [['queued', 1], ['running', 1]]);
  assert.equal(typeof stats[0].oldestReadyAge, 'number');
  assert.equal(stats[1].oldestReadyAge, null);

  await sleep(30);
  assert.ok((await client.requeueExpired()) >= 1);
  assert.equal((await client.get(job.id)).state, 'queued');
  const m = await client.maintain({ maxJobs: 10 });
  assert.equal(typeof m.ran, 'boolean');
  for (const k of ['requeued', 'prunedDone', 'prunedCancelled', 'prunedDead']) assert.equal(typeof m[k], 'number');
});

test('a Client over the caller\'s pg.Pool leaves the pool open', async (t) => {
  const pool = new pg.Pool({ connectionString: url, max: 2 });
  t.after(() => pool.end());
  const client = new Client(pool);
  const id = await client.enqueue('k', {}, { queue: queueName('pool') });
  await client.close();
  assert.equal((await client.get(id)).state, 'queued');
  await client.cancel(id);
  assert.throws(() => new Client(42), TypeError);
});

test('errors other than 22023 keep their SQLSTATE and name the function', async (t) => {
  const client = newClient(t);
  const conn = await newConn(t);
  await conn.query('BEGIN ISOLATION LEVEL REPEATABLE READ');
  const queue = queueName('limited');
  await client.pool.query('SELECT jobs_set_concurrency($1, 1)', [queue]);
  await assert.rejects(client.claim({ worker: 'w', queues: [queue] }, { db: conn }), (err) => {
    assert.equal(err.code, '0A000');
    assert.match(err.message, /^skiplock: jobs_claim failed: /);
    assert.ok(err.cause);
    return true;
  });
  await conn.query('ROLLBACK');
});

test('a text argument PostgreSQL would refuse names its parameter', async (t) => {
  // NUL (the server refuses it with 22021) and a lone surrogate (pg would send U+FFFD in its
  // place) are an InvalidArgumentError naming the parameter, as the SQL functions name theirs.
  const client = newClient(t);
  const conn = await newConn(t);
  const queue = queueName('unstorable');
  const cases = [
    [() => client.enqueue('k\0', {}, { queue }), 'kind'],
    [() => client.enqueue('k', {}, { queue: `${queue}\uD800` }), 'queue'],
    [() => client.enqueue('k', {}, { queue, uniqueKey: '\0' }), 'unique_key'],
    [() => client.enqueueMany([{ kind: 'a', queue }, { kind: 'b\0', queue }]), 'kinds[2]'],
    [() => client.claim({ worker: 'w\0', queues: [queue] }), 'worker'],
  ];
  for (const [call, parameter] of cases) {
    await assert.rejects(call, (err) => err instanceof InvalidArgumentError && err.parameter === parameter
      && err.message.includes(parameter));
  }
  assert.deepEqual(await statesOf(conn, queue), {});
});
