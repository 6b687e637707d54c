// A typed program using the package's API, as an application would (`import ... from
// 'skiplock'`). It is never run: test/types.test.js checks it with tsc --noEmit, so that a
// declaration in src/index.d.ts that is missing, wrong or too loose fails the suite. The
// lines marked to expect an error at the end must be errors, or tsc fails.
import pg from 'pg';
import {
  Cancel, Client, InvalidArgumentError, Job, JobNotHeldError, JobTimeoutError, RetryAt, ShutdownError, Snooze,
  UnknownJobError, WaitTimeoutError, Worker, cancel, retryAt, snooze, Batch, BATCH_MAX_JOBS_DEFAULT,
  COMPLETE_BATCH_DELAY_DEFAULT, COMPLETE_BATCH_SIZE_DEFAULT, JOB_TIMEOUT_DEFAULT, LEASE_DEFAULT,
  MAINTAIN_INTERVAL_DEFAULT, POLL_INTERVAL_DEFAULT, SHUTDOWN_TIMEOUT_DEFAULT, SLOTS_DEFAULT, WAIT_POLL_INTERVAL_DEFAULT,
} from 'skiplock';
import type {
  ClaimOptions, Db, EnqueueOptions, Handler, HandlerContext, JobInfo, JobResult, JobState, MaintainResult,
  QueueStats, WaitOptions, WorkerEvent, WorkerOptions, WorkerStats, WorkflowStep,
} from 'skiplock';

interface Email {
  to: string;
  subject: string;
}

async function main(): Promise<void> {
  const client = new Client(process.env.DATABASE_URL ?? 'postgres://localhost/app');
  const pool: pg.Pool = client.pool;
  new Client(pool);
  new Client({ connectionString: 'postgres://localhost/app', max: 4 });

  // Enqueue, in the caller's transaction; an interface type is a payload.
  const email: Email = { to: 'ada@example.com', subject: 'hi' };
  const tx = await client.pool.connect();
  await tx.query('BEGIN');
  const id: number = await client.enqueue('send_email', email, { queue: 'mail', priority: 1, meta: { trace: 'x' } }, { db: tx });
  await tx.query('COMMIT');
  tx.release();
  const opts: EnqueueOptions = { dependsOn: [id], onParentFailure: 'run', notifyFinished: true, delay: 1000 };
  const child: number = await client.enqueue('report', {}, opts);
  const many: number[] = await client.enqueueMany([{ kind: 'a', payload: [1, 2] }, { kind: 'b', runAt: new Date() }]);

  // Workflows.
  const steps: WorkflowStep[] = [
    { name: 'fetch', kind: 'fetch', payload: { url: 'https://example.com' } },
    { name: 'resize', kind: 'resize', dependsOn: ['fetch'], onParentFailure: 'cancel', maxAttempts: 3 },
    { name: 'publish', kind: 'publish', dependsOn: ['resize'], notifyFinished: true },
  ];
  const ids: { [name: string]: number } = await client.enqueueWorkflow(steps);
  const cancelled: number = await client.cancelWorkflow(ids.fetch);
  const published: number[] = await client.publish('order_placed', { order: 1 }, { priority: 1, delay: 1000 });
  const subscribed: boolean = await client.subscribe('order_placed', 'mail', 'receipt');
  const unsubscribed: boolean = await client.unsubscribe('order_placed', 'mail', 'receipt');

  // Results and waiting.
  const waitOpts: WaitOptions = { timeout: 30_000, pollInterval: WAIT_POLL_INTERVAL_DEFAULT };
  try {
    const done: JobResult = await client.wait(ids.publish, waitOpts);
    const state: JobState = done.state;
    console.log(state, done.result, done.lastError?.length);
  } catch (err) {
    if (err instanceof WaitTimeoutError) console.log(err.id, err.timeoutMs);
    else if (err instanceof UnknownJobError) console.log(err.id);
    else if (err instanceof InvalidArgumentError) console.log(err.parameter, err.code);
    else throw err;
  }
  const r: JobResult | null = await client.result(child);
  const info: JobInfo | null = await client.get(child);
  if (info) console.log(info.workflowId, info.dependsOn?.[0], info.progress, info.result, info.finishedAt?.getTime());
  console.log(r?.state, many.length, cancelled);

  // The calls a worker makes, by hand.
  const claimOpts: ClaimOptions = { worker: 'w', maxJobs: 2, queues: ['mail'], lease: 60_000 };
  const jobs: Job[] = await client.claim(claimOpts);
  for (const job of jobs) {
    const parents = job.parentResults ?? {};
    console.log(job.id, job.attempt, job.kind, job.leaseExpiresAt.getTime(), Object.keys(parents), job.checkpoints);
    const ok: boolean = await client.heartbeat(job.id, job.attempt, { lease: 60_000 });
    const saved: boolean = await client.checkpoint(job.id, job.attempt, 'step', { n: 1 });
    const recorded: boolean = await client.progress(job.id, job.attempt, 0.5);
    console.log(ok, saved, recorded);
  }
  const [a, b] = jobs;
  if (a && b) {
    await client.complete(a.id, a.attempt, { result: { sent: true } });
    const completed: number[] = await client.completeMany([b.id], [b.attempt], { results: [undefined] });
    console.log(completed);
  }
  const failed: 'queued' | 'dead' | null = await client.fail(1, 1, new Error('boom'), { retryAt: new Date() });
  const beats: { id: number; extended: boolean }[] = await client.heartbeatMany([1], [1]);
  await client.snooze(1, 1, { delay: 1000 });
  await client.cancel(1, { attempt: 1, error: 'no' });
  await client.retry(1);
  const stats: QueueStats[] = await client.stats();
  const requeued: number = await client.requeueExpired();
  const m: MaintainResult = await client.maintain({ maxJobs: 100 });
  console.log(failed, beats, stats[0]?.oldestReadyAge, requeued, m.more);

  // A worker.
  const sendEmail: Handler<Email> = async (job, { signal, complete }: HandlerContext) => {
    const receipt = await job.step('send', async () => ({ messageId: `${job.payload.to}:${job.payload.subject}` }));
    const n: number = await job.step('count', () => 3);
    await job.progress({ sent: n });
    if (signal.aborted) throw signal.reason;
    const db: Db = client.pool;
    if (job.attempt > 3) return await complete(db, receipt);
    return receipt;
  };
  const options: WorkerOptions = {
    queues: { mail: 2, default: SLOTS_DEFAULT },
    handlers: {
      send_email: sendEmail,
      later: async () => snooze(5000),
      never: async () => { throw cancel('cannot succeed'); },
      tomorrow: async () => retryAt(new Date(Date.now() + 86_400_000), new Error('upstream down')),
      sum: async (job) => Object.values(job.parentResults ?? {}).length,
      mail_many: new Batch<Email>(async (jobs, { signal }) => {
        if (signal.aborted) throw signal.reason;
        return jobs.map((j) => (j.payload.to === '' ? new Error('no address') : j.payload.subject));
      }, { maxJobs: BATCH_MAX_JOBS_DEFAULT, maxWait: 100 }),
    },
    lease: LEASE_DEFAULT,
    timeout: JOB_TIMEOUT_DEFAULT,
    pollInterval: POLL_INTERVAL_DEFAULT,
    maintainInterval: MAINTAIN_INTERVAL_DEFAULT,
    shutdownTimeout: SHUTDOWN_TIMEOUT_DEFAULT,
    completeBatchDelay: COMPLETE_BATCH_DELAY_DEFAULT,
    completeBatchSize: COMPLETE_BATCH_SIZE_DEFAULT,
    logger: console,
    onEvent: (e: WorkerEvent) => {
      if (e.error instanceof JobNotHeldError) console.log(e.error.id, e.error.attempt);
      if (e.error instanceof JobTimeoutError || e.error instanceof ShutdownError) console.log(e.type, e.job.id);
    },
  };
  const worker = new Worker(client, options);
  worker.start();
  await worker.ready;
  const ws: WorkerStats = worker.stats;
  console.log(worker.name, ws.completed, new Snooze(10).delayMs, new RetryAt(Date.now()).at, new Cancel() instanceof Error);
  await worker.stop();
  await worker.run();
  await client.close();

  // What the declarations must refuse.
  // @ts-expect-error onParentFailure is 'cancel' or 'run'
  await client.enqueue('k', {}, { onParentFailure: 'ignore' });
  // @ts-expect-error dependsOn holds ids
  await client.enqueue('k', {}, { dependsOn: ['fetch'] });
  // @ts-expect-error a workflow step needs a name
  await client.enqueueWorkflow([{ kind: 'k' }]);
  // @ts-expect-error the ids are numbers
  const wrong: string = ids.fetch;
  // @ts-expect-error a step returns what its function returns
  const notNumber: number = await jobs[0]!.step('s', () => 'text');
  // @ts-expect-error timeout is in ms
  await client.wait(1, { timeout: '5s' });
  // @ts-expect-error complete's options come before {db}
  await client.complete(1, 1, { db: pool });
  // @ts-expect-error a worker needs handlers
  new Worker(client, { queues: { mail: 1 } });
  // @ts-expect-error jobs are made by claim
  new Job();
  console.log(wrong, notNumber);
}

main().catch((err: unknown) => {
  console.error(err);
  process.exitCode = 1;
});
