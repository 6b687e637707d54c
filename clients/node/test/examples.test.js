// The cross-language test's Node scripts (examples/crosslang-*.mjs) work as the exec
// engineer's test runs them: enqueue N jobs, work them for a few seconds, every job done once;
// and SIGTERM drains the worker process gracefully.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync, spawn } from 'node:child_process';
import { newConn, queueName, statesOf, url, waitFor } from './helpers.js';

async function effectsTable(t) {
  const conn = await newConn(t);
  await conn.query(`CREATE TABLE IF NOT EXISTS crosslang_effects (
    job_id bigint PRIMARY KEY, attempt int NOT NULL, language text NOT NULL)`);
  return conn;
}

const countEffects = async (conn, queue) => (await conn.query(
  'SELECT count(*)::int AS n FROM crosslang_effects e JOIN jobs j ON j.id = e.job_id WHERE j.queue = $1', [queue])).rows[0].n;

test('crosslang_examples_enqueue_and_work_every_job_once', async (t) => {
  const conn = await effectsTable(t);
  const queue = queueName('xl');
  const out = execFileSync(process.execPath, ['examples/crosslang-enqueue.mjs', url, queue, '30']).toString();
  assert.equal(out.trim(), '30');
  const w = execFileSync(process.execPath, ['examples/crosslang-worker.mjs', url, queue, 'node-1', '2']).toString();
  assert.match(w, /"completed":30/);
  assert.equal(await countEffects(conn, queue), 30);
  assert.deepEqual(await statesOf(conn, queue), { done: 30 });
  const langs = await conn.query(
    'SELECT DISTINCT e.language, e.attempt FROM crosslang_effects e JOIN jobs j ON j.id = e.job_id WHERE j.queue = $1', [queue]);
  assert.deepEqual(langs.rows, [{ language: 'node', attempt: 1 }]);
});

test('sigterm_drains_a_worker_process', async (t) => {
  const conn = await effectsTable(t);
  const queue = queueName('xl-term');
  const n = 400;
  execFileSync(process.execPath, ['examples/crosslang-enqueue.mjs', url, queue, String(n)]);
  const child = spawn(process.execPath, ['examples/crosslang-worker.mjs', url, queue, 'node-term', '120'],
    { stdio: ['ignore', 'pipe', 'inherit'] });
  let stdout = '';
  child.stdout.on('data', (d) => { stdout += d; });
  const exited = new Promise((resolve) => child.on('exit', (code, signal) => resolve({ code, signal })));
  await waitFor('some jobs done', async () => (await countEffects(conn, queue)) >= 20);
  child.kill('SIGTERM');
  const { code, signal } = await exited;
  assert.deepEqual({ code, signal }, { code: 0, signal: null });
  assert.match(stdout, /"language":"node"/);
  const states = await statesOf(conn, queue);
  assert.equal(states.running, undefined, JSON.stringify(states));
  assert.equal(states.done, await countEffects(conn, queue));
  assert.equal((states.done ?? 0) + (states.queued ?? 0), n);
  t.diagnostic(`at SIGTERM: ${states.done} done, ${states.queued ?? 0} left queued`);
});
