// The Node producer of the cross-language test: enqueues N jobs of kind "crosslang" into
// QUEUE in one jobs_enqueue_many call, each with payload {"n": i, "from": "node"}.
//
//   node crosslang-enqueue.mjs DATABASE_URL QUEUE N
//
// Prints the number of jobs enqueued.
import { Client } from '../src/index.js';

const [url, queue, count] = process.argv.slice(2);
const n = Number(count);
if (!url || !queue || !Number.isInteger(n) || n < 0) {
  console.error('usage: node crosslang-enqueue.mjs DATABASE_URL QUEUE N');
  process.exit(2);
}

const client = new Client(url);
try {
  const jobs = Array.from({ length: n }, (_, i) => ({ kind: 'crosslang', queue, payload: { n: i, from: 'node' } }));
  const ids = n === 0 ? [] : await client.enqueueMany(jobs);
  console.log(ids.length);
} finally {
  await client.close();
}
