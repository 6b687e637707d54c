// Shared by the test files: the database the Go test made (SKIPLOCK_TEST_DATABASE_URL), queue
// names no other test uses, and waiting on a condition with a deadline instead of sleeping.
import pg from 'pg';
import { Client } from '../src/index.js';

export const url = process.env.SKIPLOCK_TEST_DATABASE_URL;
if (!url) {
  throw new Error('SKIPLOCK_TEST_DATABASE_URL is not set: run these tests through `go test ./clients/node/`, '
    + 'or point it at a database with skiplock installed');
}
export const short = process.env.SKIPLOCK_TEST_SHORT === '1';

let counter = 0;
/** A queue name unique to this process and call, so tests sharing the database stay apart. */
export function queueName(prefix) {
  counter += 1;
  return `${prefix}-${process.pid}-${counter}`;
}

/** A Client on its own small pool; the test closes it. */
export function newClient(t, max = 4) {
  const client = new Client({ connectionString: url, max });
  t.after(() => client.close());
  return client;
}

/** A plain pg connection for transactions and checks. */
export async function newConn(t) {
  const conn = new pg.Client({ connectionString: url });
  await conn.connect();
  t.after(() => conn.end());
  return conn;
}

export const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

/** Polls cond() every 10 ms until it is truthy or timeoutMs passes (then throws). */
export async function waitFor(what, cond, timeoutMs = 10000) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await cond();
    if (v) return v;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await sleep(10);
  }
}

/** The states of a queue's jobs: {state: count}. */
export async function statesOf(db, queue) {
  const res = await db.query('SELECT state::text AS state, count(*)::int AS n FROM jobs WHERE queue = $1 GROUP BY 1', [queue]);
  return Object.fromEntries(res.rows.map((r) => [r.state, r.n]));
}

/** A logger that keeps what it is given, for checking what the worker logged. */
export function recordingLogger() {
  const lines = { info: [], warn: [], error: [] };
  return {
    lines,
    info: (m) => lines.info.push(m),
    warn: (m) => lines.warn.push(m),
    error: (m) => lines.error.push(m),
  };
}
