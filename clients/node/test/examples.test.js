// The cross-language test's Node scripts (examples/crosslang-*.mjs) work as the exec
// engineer's test runs them: enqueue N jobs, work them for a few seconds, every job done once.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
const url = process.env.SKIPLOCK_TEST_DATABASE_URL;
test('crosslang_examples_enqueue_and_work_every_job_once', async () => {
  const pg = (await import('pg')).default;
  const c = new pg.Client(url); await c.connect();
  await c.query('CREATE TABLE crosslang_effects (job_id bigint PRIMARY KEY, attempt int NOT NULL, language text NOT NULL)');
  const out = execFileSync('node', ['examples/crosslang-enqueue.mjs', url, 'xl', '30']).toString();
  assert.equal(out.trim(), '30');
  const w = execFileSync('node', ['examples/crosslang-worker.mjs', url, 'xl', 'node-1', '2']).toString();
  assert.match(w, /"completed":30/);
  const r = await c.query("SELECT count(*)::int n FROM crosslang_effects");
  assert.equal(r.rows[0].n, 30);
  const s = await c.query("SELECT state::text, count(*)::int n FROM jobs WHERE queue='xl' GROUP BY 1");
  assert.deepEqual(s.rows, [{ state: 'done', n: 30 }]);
  await c.end();
});
