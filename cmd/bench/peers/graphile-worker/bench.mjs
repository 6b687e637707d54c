// cmd/bench's harness for graphile-worker: runs the scenarios skiplock's benchmark shares
// with its peers against graphile-worker on a database of its own and prints one JSON line
// per scenario on stdout, in the format of `cmd/bench -json`:
//
//   {"system":"graphile-worker","version":"0.18.0","scenario":"work_drain","jobs":50000,"seconds":…,"jobs_per_sec":…,…}
//
// Logs and warnings go to stderr. `go run ./cmd/bench -peers graphile-worker` installs the
// dependencies pinned in package-lock.json (npm ci) and runs it with the same job count,
// slots, producers, latency schedule and steady length as skiplock's run, and with
// graphile-worker's best settings: --pool-max 20 --local-queue-size 500
// --local-queue-size-1000 500 --complete-job-batch-delay-ms 0. By hand:
//
//   node bench.mjs --database-url postgres://localhost/gw_bench --jobs 2000
//
// The database must exist. The graphile_worker schema is dropped and installed afresh by
// graphile-worker's own migrations at start, and its job tables are truncated before each
// scenario. One Node process both adds jobs (WorkerUtils, a pool of its own) and works
// them (a runner with `concurrency` = --workers), as a web app and a worker would.

import { readFileSync } from "node:fs";
import { performance } from "node:perf_hooks";
import { createInterface } from "node:readline";
import { parseArgs } from "node:util";
import pg from "pg";

// graphile-worker otherwise formats a "Completed task" message for every job, which the
// logger below would drop anyway; skiplock's handler logs nothing either.
process.env.NO_LOG_SUCCESS ??= "1";
const { run, makeWorkerUtils, runMigrations, Logger } = await import("graphile-worker");

const SYSTEM = "graphile-worker";
const VERSION = JSON.parse(
  readFileSync(new URL("./node_modules/graphile-worker/package.json", import.meta.url), "utf8"),
).version;
const SCHEMA = "graphile_worker";
const TASK = "bench_noop";
const SCENARIOS = ["insert_bulk", "insert_single", "work_drain", "work_drain_1000", "latency", "steady", "steady_rate"];
// WIDE_SLOTS is the concurrency of work_drain_1000, cmd/bench's wideSlots.
const WIDE_SLOTS = 1000;

// The flags cmd/bench passes carry the names of its own; the last three are graphile-worker's
// settings, at the library's defaults unless given.
const { values: flags } = parseArgs({
  options: {
    "database-url": { type: "string", default: process.env.DATABASE_URL ?? "" },
    scenarios: { type: "string", default: SCENARIOS.join(",") },
    jobs: { type: "string", default: "50000" },
    workers: { type: "string", default: "100" },
    batch: { type: "string", default: "1000" },
    producers: { type: "string", default: "8" },
    "latency-jobs": { type: "string", default: "500" },
    "latency-interval-ms": { type: "string", default: "10" },
    "steady-duration-ms": { type: "string", default: "15000" },
    rate: { type: "string", default: "1000" }, // steady_rate's arrivals per second
    "warmup-ms": { type: "string", default: "1000" },
    "timeout-ms": { type: "string", default: "600000" },
    "pool-max": { type: "string" }, // maxPoolSize; default 10
    "local-queue-size": { type: "string" }, // worker.localQueue.size; default -1, off
    "local-queue-size-1000": { type: "string" }, // the same in work_drain_1000; default: --local-queue-size
    "complete-job-batch-delay-ms": { type: "string" }, // worker.completeJobBatchDelay; default -1, off
    "cost-marks": { type: "boolean", default: false }, // see markDrain
  },
  strict: true,
});

function number(name, min) {
  const v = Number(flags[name]);
  if (!Number.isFinite(v) || v < min) fail(`--${name} must be a number of at least ${min}, got ${flags[name]}`);
  return v;
}
function fail(message) {
  process.stderr.write(`graphile-worker harness: ${message}\n`);
  process.exit(2);
}

const cfg = {
  url: flags["database-url"] || fail("--database-url (or DATABASE_URL) is required"),
  jobs: number("jobs", 10),
  workers: number("workers", 1),
  batch: number("batch", 1),
  producers: number("producers", 1),
  latencyJobs: number("latency-jobs", 1),
  latencyIntervalMs: number("latency-interval-ms", 0),
  steadyMs: number("steady-duration-ms", 1),
  rate: number("rate", 0.001),
  warmupMs: number("warmup-ms", 0),
  timeoutMs: number("timeout-ms", 1),
  poolMax: flags["pool-max"] === undefined ? undefined : number("pool-max", 2),
  localQueueSize: flags["local-queue-size"] === undefined ? undefined : number("local-queue-size", -1),
  localQueueSize1000:
    flags["local-queue-size-1000"] === undefined ? undefined : number("local-queue-size-1000", -1),
  completeJobBatchDelay:
    flags["complete-job-batch-delay-ms"] === undefined ? undefined : number("complete-job-batch-delay-ms", -1),
};
const wanted = flags.scenarios.split(",").map((s) => s.trim()).filter(Boolean);
for (const s of wanted) if (!SCENARIOS.includes(s)) fail(`unknown scenario "${s}" (known: ${SCENARIOS.join(", ")})`);

const common = {
  workers: cfg.workers,
  pool_max_conns: cfg.poolMax ?? 10,
  settings: {
    concurrency: cfg.workers,
    max_pool_size: cfg.poolMax ?? "default (10)",
    local_queue_size: cfg.localQueueSize ?? "default (-1, off)",
    local_queue_size_1000: cfg.localQueueSize1000 ?? cfg.localQueueSize ?? "default (-1, off)",
    complete_job_batch_delay_ms: cfg.completeJobBatchDelay ?? "default (-1, off)",
    poll_interval_ms: "default (2000)",
    node: process.version,
  },
};

const logger = new Logger(() => (level, message) => {
  if (level === "error" || level === "warning") process.stderr.write(`[graphile-worker ${level}] ${message}\n`);
});
const log = (message) => process.stderr.write(`[graphile-worker ${new Date().toISOString().slice(11, 23)}] ${message}\n`);
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, Math.max(0, ms)));
const now = () => performance.now();
const round = (x, places) => Math.round(x * 10 ** places) / 10 ** places;

// percentile is the nearest-rank p-th percentile of sorted (ascending), as cmd/bench's.
const percentile = (sorted, p) => sorted[Math.max(0, Math.min(Math.ceil((p / 100) * sorted.length) - 1, sorted.length - 1))];

// line renders one result in cmd/bench's -json format. latency is in milliseconds; prefix
// "insert_" marks the insert call's latency, "" the enqueue -> start latency.
function line(scenario, jobs, ms, { latency = [], prefix = "", extra = {} } = {}) {
  const seconds = ms / 1000;
  const out = {
    system: SYSTEM,
    version: VERSION,
    scenario,
    jobs,
    seconds: round(seconds, 4),
    jobs_per_sec: round(seconds > 0 ? jobs / seconds : 0, 1),
  };
  if (latency.length > 0) {
    const s = Float64Array.from(latency).sort();
    out[`${prefix}p50_ms`] = round(percentile(s, 50), 3);
    out[`${prefix}p95_ms`] = round(percentile(s, 95), 3);
    out[`${prefix}p99_ms`] = round(percentile(s, 99), 3);
    out[`${prefix}max_ms`] = round(s[s.length - 1], 3);
    out[`${prefix}min_ms`] = round(s[0], 3);
    out[`${prefix}mean_ms`] = round(s.reduce((a, b) => a + b, 0) / s.length, 3);
    out[`${prefix}latency_samples`] = s.length;
  }
  Object.assign(out, extra);
  for (const [k, v] of Object.entries(common)) if (!(k in out)) out[k] = v; // a scenario's own value wins
  process.stdout.write(JSON.stringify(out) + "\n");
  log(`scenario ${scenario}: ${Math.round(out.jobs_per_sec)} jobs/s`);
}

// Latency pairs: when each job's add returned (commit acknowledged) and when its task started.
class LatencyRecorder {
  committed = new Map();
  started = new Map();
  commit(id, at) {
    this.committed.set(String(id), at);
  }
  start(id, at) {
    if (!this.started.has(String(id))) this.started.set(String(id), at);
  }
  // Start minus commit of every job with both that started no later than until; a task
  // can start before its producer sees the commit acknowledged, which is clamped to zero.
  latencies(until = Infinity) {
    const d = [];
    let negative = 0;
    for (const [id, c] of this.committed) {
      const s = this.started.get(id);
      if (s === undefined || s > until) continue;
      if (s < c) negative++;
      d.push(Math.max(0, s - c));
    }
    return { d, negative };
  }
}

let onStart = null; // set by latency and steady: (jobId, at) => void
const taskList = {
  [TASK]: async (_payload, helpers) => {
    if (onStart) onStart(helpers.job.id, now());
  },
};

// startRunner starts a worker pool of --workers concurrency with the given settings and
// counts the jobs that finished. graphile-worker emits job:complete when it hands the
// completion over (to its batcher, with --complete-job-batch-delay-ms), not once written
// back, so the scenarios confirm completions in the table.
async function startRunner(concurrency = cfg.workers) {
  const preset = { worker: {} };
  const localQueueSize = concurrency === WIDE_SLOTS ? (cfg.localQueueSize1000 ?? cfg.localQueueSize) : cfg.localQueueSize;
  if (localQueueSize !== undefined) preset.worker.localQueue = { size: localQueueSize };
  if (cfg.completeJobBatchDelay !== undefined) preset.worker.completeJobBatchDelay = cfg.completeJobBatchDelay;
  const options = { connectionString: cfg.url, concurrency, taskList, crontab: "", logger, noHandleSignals: true, preset };
  if (cfg.poolMax !== undefined) options.maxPoolSize = cfg.poolMax;
  const runner = await run(options);
  const counts = { completed: 0, failed: 0 };
  runner.events.on("job:complete", ({ error }) => {
    if (error) counts.failed++;
    else counts.completed++;
  });
  return { runner, counts };
}

async function waitFor(cond, timeoutMs, what) {
  const deadline = now() + timeoutMs;
  while (!cond()) {
    if (now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await sleep(1);
  }
}

const admin = new pg.Pool({ connectionString: cfg.url, max: 2 });
const jobsInTable = async () => (await admin.query(`SELECT count(*)::int AS n FROM ${SCHEMA}._private_jobs`)).rows[0].n;
const truncate = () => admin.query(`TRUNCATE ${SCHEMA}._private_jobs, ${SCHEMA}._private_job_queues`);

// warmUp runs load(until), the scenario's own addJob calls with nothing recorded, until
// --warmup-ms has passed, then waits (at most --timeout-ms) until the jobs table is empty:
// the measured window starts on warm connections, as cmd/bench's own scenarios do.
async function warmUp(load) {
  await load(now() + cfg.warmupMs);
  const deadline = now() + cfg.timeoutMs;
  while ((await jobsInTable()) > 0) {
    if (now() > deadline) throw new Error(`timed out after ${cfg.timeoutMs} ms waiting for the warm-up's jobs`);
    await sleep(1);
  }
}

async function addBatches(utils, n) {
  for (let off = 0; off < n; off += cfg.batch) {
    const specs = [];
    for (let i = off; i < Math.min(n, off + cfg.batch); i++) specs.push({ identifier: TASK, payload: { seq: i } });
    await utils.addJobs(specs);
  }
}

const scenarios = {
  // N jobs through WorkerUtils.addJobs (add_jobs) in batches of --batch, one caller.
  async insert_bulk(utils) {
    const t0 = now();
    await addBatches(utils, cfg.jobs);
    const ms = now() - t0;
    const rows = await jobsInTable();
    if (rows !== cfg.jobs) throw new Error(`expected ${cfg.jobs} jobs, found ${rows}`);
    line("insert_bulk", cfg.jobs, ms, { extra: { api: "WorkerUtils.addJobs -> add_jobs(job_spec[])", batch_size: cfg.batch, rows_in_db: rows } });
  },

  // N/10 jobs, one WorkerUtils.addJob (its own transaction) each, from --producers callers.
  async insert_single(utils) {
    const n = Math.floor(cfg.jobs / 10);
    // Open the producers' connections first, so that connecting is not timed.
    await Promise.all(Array.from({ length: cfg.producers }, () => utils.withPgClient((c) => c.query("SELECT 1"))));
    const calls = [];
    let next = 0;
    const t0 = now();
    await Promise.all(
      Array.from({ length: cfg.producers }, async () => {
        for (let i = next++; i < n; i = next++) {
          const t = now();
          await utils.addJob(TASK, { seq: i });
          calls.push(now() - t);
        }
      }),
    );
    const ms = now() - t0;
    const rows = await jobsInTable();
    if (rows !== n) throw new Error(`expected ${n} jobs, found ${rows}`);
    line("insert_single", n, ms, {
      latency: calls,
      prefix: "insert_",
      extra: { api: "WorkerUtils.addJob -> add_job (one transaction per job)", concurrency: cfg.producers, rows_in_db: rows },
    });
  },

  // N jobs queued (untimed, then ANALYZE), then the runner starts; time to the last
  // completion written back: graphile-worker deletes a completed job, so to the table's
  // being empty, polled once every job has finished.
  work_drain: (utils) => drain(utils, "work_drain", cfg.workers),
  // The same with concurrency 1,000 (and --local-queue-size-1000).
  work_drain_1000: (utils) => drain(utils, "work_drain_1000", WIDE_SLOTS),

  // An idle runner; --latency-jobs jobs added one at a time on a fixed schedule; from addJob
  // returning (commit acknowledged) to the task starting.
  async latency(utils) {
    const rec = new LatencyRecorder();
    let started = 0;
    onStart = (id, at) => {
      rec.start(id, at);
      started++;
    };
    const { runner } = await startRunner();
    const calls = [];
    let ms;
    try {
      await warmUp(async (until) => {
        const t0 = now();
        for (let i = 0; t0 + i * cfg.latencyIntervalMs < until; i++) {
          await sleep(t0 + i * cfg.latencyIntervalMs - now());
          await utils.addJob(TASK, { seq: -1 - i });
        }
      });
      started = 0;
      const t0 = now();
      for (let i = 0; i < cfg.latencyJobs; i++) {
        await sleep(t0 + i * cfg.latencyIntervalMs - now());
        const before = now();
        const job = await utils.addJob(TASK, { seq: i });
        const after = now();
        rec.commit(job.id, after);
        calls.push(after - before);
      }
      await waitFor(() => started >= cfg.latencyJobs, 30000, `${cfg.latencyJobs} jobs to start`);
      ms = now() - t0;
    } finally {
      onStart = null;
      await runner.stop();
    }
    const { d, negative } = rec.latencies();
    calls.sort((a, b) => a - b);
    line("latency", cfg.latencyJobs, ms, {
      latency: d,
      extra: {
        interval_ms: cfg.latencyIntervalMs,
        insert_call_p50_ms: round(percentile(calls, 50), 3),
        negative_clamped: negative,
        timing: "addJob returned (commit acked) -> task entered",
      },
    });
  },

  // --producers callers add single jobs at full rate for --steady-duration-ms while the
  // runner works; jobs are the completions written back in the window (the jobs added then
  // that are no longer in the table at its end), latency that of the jobs started in it.
  async steady(utils) {
    const rec = new LatencyRecorder();
    onStart = (id, at) => rec.start(id, at);
    const { runner } = await startRunner();
    let done, inserted, backlog, end;
    try {
      await warmUp(async (until) => {
        await Promise.all(
          Array.from({ length: cfg.producers }, async (_, g) => {
            for (let i = 0; now() < until; i++) await utils.addJob(TASK, { seq: -1 - (g * 2 ** 40 + i) });
          }),
        );
      });
      let added = 0;
      end = now() + cfg.steadyMs;
      const producers = Array.from({ length: cfg.producers }, async (_, g) => {
        for (let i = 0; now() < end; i++) {
          const job = await utils.addJob(TASK, { seq: g * 2 ** 40 + i });
          rec.commit(job.id, now());
          added++;
        }
      });
      await sleep(end - now());
      inserted = added;
      backlog = await jobsInTable();
      done = inserted - backlog;
      await Promise.all(producers);
    } finally {
      onStart = null;
      await runner.stop();
    }
    const { d, negative } = rec.latencies(end);
    const secs = cfg.steadyMs / 1000;
    line("steady", done, cfg.steadyMs, {
      latency: d,
      extra: {
        producers: cfg.producers,
        inserted,
        insert_per_sec: round(inserted / secs, 1),
        completed: done,
        final_backlog: backlog,
        negative_clamped: negative,
        timing: "completions written back during the window; latency of jobs started in it",
      },
    });
  },
};

// markDrain prints the cost mark {"mark":"drain_begin"|"drain_end","scenario":…} and waits
// for cmd/bench's line on stdin, when --cost-marks is given: cmd/bench reads the server's CPU
// time and WAL position meanwhile, and at the end vacuums the jobs table as autovacuum would.
let stdin = null; // readline over stdin, closed at the end (an open one keeps Node running)
let stdinLines = null;
async function markDrain(mark, scenario) {
  if (!flags["cost-marks"]) return;
  stdin ??= createInterface({ input: process.stdin });
  stdinLines ??= stdin[Symbol.asyncIterator]();
  process.stdout.write(JSON.stringify({ mark, scenario }) + "\n");
  const { done } = await stdinLines.next();
  if (done) throw new Error(`cost mark ${mark}: stdin closed before cmd/bench answered`);
}

// drain: N jobs queued (untimed, then ANALYZE), then a runner of the given concurrency
// starts; time to the last completion written back.
async function drain(utils, scenario, concurrency) {
  await addBatches(utils, cfg.jobs);
  await admin.query(`ANALYZE ${SCHEMA}._private_jobs`);
  await markDrain("drain_begin", scenario);
  const t0 = now();
  const { runner, counts } = await startRunner(concurrency);
  let ms;
  try {
    await waitFor(() => counts.completed + counts.failed >= cfg.jobs, cfg.timeoutMs, `${cfg.jobs} jobs to finish`);
    for (;;) {
      const { rows } = await admin.query(`SELECT EXISTS (SELECT FROM ${SCHEMA}._private_jobs) AS left`);
      if (!rows[0].left) break;
      if (now() - t0 > cfg.timeoutMs) throw new Error(`timed out after ${cfg.timeoutMs} ms waiting for the completions`);
      await sleep(1);
    }
    ms = now() - t0;
  } finally {
    await runner.stop();
  }
  if (counts.failed > 0) throw new Error(`${counts.failed} jobs failed`);
  await markDrain("drain_end", scenario);
  line(scenario, cfg.jobs, ms, {
    extra: { timing: "runner started -> last completion written back (jobs table empty)", workers: concurrency },
  });
}

// steadyRate: --producers callers add one job each (addJob, its own transaction) on the
// fixed schedule of --rate jobs/s for --steady-duration-ms, as cmd/bench's arrival.Run: job
// k is due at start + k/rate; a caller that is behind adds at once, and none starts after
// the end. Jobs are the completions written back in the window, latency that of the jobs
// started in it, and the backlog is counted at its end.
async function steadyRate(utils) {
  const rec = new LatencyRecorder();
  onStart = (id, at) => rec.start(id, at);
  const { runner } = await startRunner();
  const interval = 1000 / cfg.rate;
  let done, inserted, backlog, end, maxLag = 0;
  try {
    await warmUp(async (until) => {
      const start = now();
      let next = 0;
      await Promise.all(
        Array.from({ length: cfg.producers }, async () => {
          for (;;) {
            const k = next++;
            const due = start + k * interval;
            if (due >= until) return;
            await sleep(due - now());
            await utils.addJob(TASK, { seq: -1 - k });
          }
        }),
      );
    });
    const start = now();
    end = start + cfg.steadyMs;
    let next = 0;
    let added = 0;
    const producers = Array.from({ length: cfg.producers }, async () => {
      for (;;) {
        const k = next++;
        const due = start + k * interval;
        if (due >= end) return;
        await sleep(due - now());
        const began = now();
        if (began >= end) return;
        maxLag = Math.max(maxLag, began - due);
        const job = await utils.addJob(TASK, { seq: k });
        rec.commit(job.id, now());
        added++;
      }
    });
    await Promise.all(producers);
    await sleep(end - now());
    inserted = added;
    backlog = await jobsInTable();
    done = inserted - backlog;
  } finally {
    onStart = null;
    await runner.stop();
  }
  const { d, negative } = rec.latencies(end);
  const secs = cfg.steadyMs / 1000;
  line("steady_rate", done, cfg.steadyMs, {
    latency: d,
    extra: {
      producers: cfg.producers,
      rate_per_sec: round(cfg.rate, 1),
      inserted,
      insert_per_sec: round(inserted / secs, 1),
      arrivals_due: Math.ceil((cfg.steadyMs / 1000) * cfg.rate),
      max_schedule_lag_ms: round(maxLag, 3),
      completed: done,
      final_backlog: backlog,
      negative_clamped: negative,
      timing: "completions written back during the window; latency of jobs started in it",
    },
  });
}
scenarios.steady_rate = steadyRate;

let utils;
try {
  await admin.query(`DROP SCHEMA IF EXISTS ${SCHEMA} CASCADE`);
  await runMigrations({ connectionString: cfg.url, logger });
  const utilsOptions = { connectionString: cfg.url, logger };
  if (cfg.poolMax !== undefined) utilsOptions.maxPoolSize = cfg.poolMax;
  utils = await makeWorkerUtils(utilsOptions);
  for (const name of SCENARIOS) {
    if (!wanted.includes(name)) continue;
    await truncate();
    log(`scenario ${name}: start`);
    await scenarios[name](utils);
  }
  await truncate();
} catch (err) {
  process.stderr.write(`graphile-worker harness: ${err?.stack ?? err}\n`);
  process.exitCode = 1;
} finally {
  stdin?.close();
  await utils?.release();
  await admin.end();
}
