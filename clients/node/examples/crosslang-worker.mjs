// The Node side of the cross-language test: works jobs of kind "crosslang" from one queue for
// a number of seconds, then shuts down gracefully (SIGTERM does the same sooner). Each job's
// effect, a row (job id, attempt, 'node') in crosslang_effects, commits in the same
// transaction as its jobs_complete, so a job is done exactly when its row exists.
//
//   node crosslang-worker.mjs DATABASE_URL QUEUE WORKER_NAME SECONDS
//
// Prints one JSON line with the worker's counts when it stops.
import { Client, Worker } from '../src/index.js';

const [url, queue, name, seconds] = process.argv.slice(2);
if (!url || !queue || !name || !(Number(seconds) > 0)) {
  console.error('usage: node crosslang-worker.mjs DATABASE_URL QUEUE WORKER_NAME SECONDS');
  process.exit(2);
}

const client = new Client(url);
const worker = new Worker(client, {
  name,
  queues: { [queue]: 4 },
  pollInterval: 200,
  handlers: {
    crosslang: async (job, { complete }) => {
      const db = await client.pool.connect();
      try {
        await db.query('BEGIN');
        await db.query("INSERT INTO crosslang_effects VALUES ($1, $2, 'node')", [job.id, job.attempt]);
        if (await complete(db)) {
          await db.query('COMMIT');
        } else {
          // Someone else holds the job now: its effect must not happen twice.
          await db.query('ROLLBACK');
        }
      } catch (err) {
        await db.query('ROLLBACK').catch(() => {});
        throw err;
      } finally {
        db.release();
      }
    },
  },
});

const timer = setTimeout(() => worker.stop(), Number(seconds) * 1000);
await worker.run();
clearTimeout(timer);
await client.close();
console.log(JSON.stringify({ worker: name, language: 'node', ...worker.stats }));
