// TypeScript declarations of the package's whole public API (src/index.js and what it
// exports). test/types.test.js checks them with tsc against test/types/example.ts, and checks
// that they name what the JavaScript exports. Ids are numbers, durations milliseconds.
// Payloads, meta, results, checkpoints and progress are whatever JSON can hold; they are
// typed unknown (an interface type is no JSON type to TypeScript), the payload of a handler's
// job any unless the handler says (Handler<Payload>).

import type { ClientBase, Pool, PoolConfig } from 'pg';

/** Where a call runs: a pg Client (the one of your open transaction) or a Pool. */
export type Db = ClientBase | Pool;

/** Every method's last argument: run the call on `db` instead of the client's pool. */
export interface DbOption {
  db?: Db;
}

/** A job's state. A job whose parents are not all done is waiting. */
export type JobState = 'waiting' | 'queued' | 'running' | 'done' | 'dead' | 'cancelled';

/** What becomes of a child when a parent goes dead or is cancelled. */
export type OnParentFailure = 'cancel' | 'run';

/** What an enqueue does when its uniqueKey is taken. */
export type OnDuplicate = 'keep' | 'replace';

/** Client.enqueue's options. Left out, an option is not sent and the SQL default applies. */
export interface EnqueueOptions {
  /** Defaults to 'default'. */
  queue?: string;
  /** When the job is ready. Defaults to now. */
  runAt?: Date;
  /** ms from the database's now(), instead of runAt. */
  delay?: number;
  /** Defaults to 0. */
  priority?: number;
  /** Defaults to 5. */
  maxAttempts?: number;
  uniqueKey?: string;
  concurrencyKey?: string;
  meta?: unknown;
  /** The ids of the parent jobs: the job waits until they are all done. */
  dependsOn?: number[];
  /** Defaults to 'cancel'. */
  onParentFailure?: OnParentFailure;
  /** NOTIFY jobs_finished when the job is done, dead or cancelled (for wait). Defaults to false. */
  notifyFinished?: boolean;
  /**
   * When uniqueKey is taken: 'keep' (the default) returns the live job's id unchanged;
   * 'replace' gives a waiting or queued job this call's payload, run time, priority and
   * maxAttempts (debounce, with delay), or adds this job after a running one.
   */
  onDuplicate?: OnDuplicate;
  /** ms the uniqueKey stays taken after its job finished (throttle). Needs uniqueKey. */
  uniqueFor?: number;
}

/** The options of the jobs Client.publish adds, the same for each (queue and kind are each subscription's). */
export interface PublishOptions {
  /** When the jobs are ready. Defaults to now. */
  runAt?: Date;
  /** ms from the database's now(), instead of runAt. */
  delay?: number;
  /** Defaults to 0. */
  priority?: number;
  /** Defaults to 5. */
  maxAttempts?: number;
  concurrencyKey?: string;
  meta?: unknown;
}

/** One job of Client.enqueueMany. */
export interface EnqueueManyJob {
  kind: string;
  payload?: unknown;
  queue?: string;
  runAt?: Date;
  priority?: number;
  maxAttempts?: number;
  uniqueKey?: string;
  concurrencyKey?: string;
  meta?: unknown;
  onDuplicate?: OnDuplicate;
  uniqueFor?: number;
}

/** One step of Client.enqueueWorkflow. */
export interface WorkflowStep {
  /** Unique within the workflow; the key of the returned ids and of a child's parentResults. */
  name: string;
  kind: string;
  payload?: unknown;
  queue?: string;
  runAt?: Date;
  priority?: number;
  maxAttempts?: number;
  concurrencyKey?: string;
  meta?: unknown;
  /** The names of the steps it waits for. */
  dependsOn?: string[];
  onParentFailure?: OnParentFailure;
  notifyFinished?: boolean;
}

export interface ClaimOptions {
  /** The worker's name, stored as the lease holder. Required. */
  worker: string;
  /** Defaults to 1. */
  maxJobs?: number;
  /** Defaults to every queue. */
  queues?: string[];
  /** ms. Defaults to 5 minutes. */
  lease?: number;
}

/** A job claimed with jobs_claim: its fields, and the calls about it its holder makes. */
export class Job<Payload = any> {
  private constructor();
  readonly id: number;
  readonly queue: string;
  readonly kind: string;
  readonly payload: Payload;
  readonly attempt: number;
  readonly maxAttempts: number;
  readonly priority: number;
  readonly runAt: Date;
  readonly leaseExpiresAt: Date;
  readonly createdAt: Date;
  readonly meta: unknown;
  /**
   * The parents' results, by step name for a workflow step, by parent id (as text) for a job
   * enqueued with dependsOn; null without parents.
   */
  readonly parentResults: { [parent: string]: unknown } | null;
  /** The values saved by step, by step name; null when none. */
  checkpoints: { [step: string]: unknown } | null;
  /**
   * Runs fn once across the job's attempts: the value an earlier attempt saved for `name` is
   * returned without running fn. The value comes back as JSON gives it back (a Date as its
   * ISO string). Throws JobNotHeldError when the job is no longer held.
   */
  step<T>(name: string, fn: () => T | Promise<T>): Promise<T>;
  /**
   * Records the job's progress (jobs_progress; undefined clears it). Throws JobNotHeldError
   * when no longer held.
   */
  progress(value: unknown): Promise<void>;
}

/** Client.get's answer. */
export interface JobInfo {
  state: JobState;
  attempts: number;
  maxAttempts: number;
  runAt: Date;
  lastError: string | null;
  createdAt: Date;
  finishedAt: Date | null;
  meta: unknown;
  result: unknown;
  progress: unknown;
  workflowId: number | null;
  dependsOn: number[] | null;
}

/** Client.result's and Client.wait's answer. */
export interface JobResult {
  state: JobState;
  result: unknown;
  lastError: string | null;
}

export interface WaitOptions {
  /** ms to wait before WaitTimeoutError. Defaults to -1, no timeout. */
  timeout?: number;
  /** ms between reads when no notification came. Defaults to WAIT_POLL_INTERVAL_DEFAULT. */
  pollInterval?: number;
}

export interface QueueStats {
  queue: string;
  state: JobState;
  jobs: number;
  /** ms, or null. */
  oldestReadyAge: number | null;
}

export interface MaintainResult {
  ran: boolean;
  requeued: number;
  prunedDone: number;
  prunedCancelled: number;
  prunedDead: number;
  more: boolean;
}

export const WAIT_POLL_INTERVAL_DEFAULT: number;

/** A skiplock client over a pg Pool: one method per SQL function. */
export class Client {
  /** A Pool stays yours; a connection string or pool config makes one close() ends. */
  constructor(source: Pool | string | PoolConfig);
  readonly pool: Pool;
  /** Ends the pool if the client made it. */
  close(): Promise<void>;
  enqueue(kind: string, payload?: unknown, opts?: EnqueueOptions, options?: DbOption): Promise<number>;
  enqueueMany(jobs: EnqueueManyJob[], options?: DbOption): Promise<number[]>;
  /** Returns the ids by step name. */
  enqueueWorkflow(steps: WorkflowStep[], options?: DbOption): Promise<{ [name: string]: number }>;
  /** One job per subscription of the topic; the ids in the order of the subscriptions by queue, then kind ([] without subscribers). */
  publish(topic: string, payload?: unknown, opts?: PublishOptions, options?: DbOption): Promise<number[]>;
  /** For jobs_admin. true when the subscription is new. */
  subscribe(topic: string, queue: string, kind: string, options?: DbOption): Promise<boolean>;
  /** For jobs_admin. true when a subscription was removed. */
  unsubscribe(topic: string, queue: string, kind: string, options?: DbOption): Promise<boolean>;
  /** Returns how many jobs it cancelled. */
  cancelWorkflow(workflowId: number, options?: DbOption): Promise<number>;
  claim(opts: ClaimOptions, options?: DbOption): Promise<Job[]>;
  complete(id: number, attempt: number, opts?: { result?: unknown }, options?: DbOption): Promise<boolean>;
  completeMany(ids: number[], attempts: number[], opts?: { results?: (unknown)[] }, options?: DbOption): Promise<number[]>;
  checkpoint(id: number, attempt: number, step: string, value: unknown, options?: DbOption): Promise<boolean>;
  /** undefined clears the progress. */
  progress(id: number, attempt: number, progress: unknown, options?: DbOption): Promise<boolean>;
  /** The job's new state, or null when no longer held. */
  fail(id: number, attempt: number, error: string | Error, opts?: { retryAt?: Date }, options?: DbOption): Promise<'queued' | 'dead' | null>;
  heartbeat(id: number, attempt: number, opts?: { lease?: number }, options?: DbOption): Promise<boolean>;
  heartbeatMany(ids: number[], attempts: number[], opts?: { lease?: number }, options?: DbOption): Promise<{ id: number; extended: boolean }[]>;
  snooze(id: number, attempt: number, opts?: { runAt?: Date; delay?: number }, options?: DbOption): Promise<boolean>;
  cancel(id: number, opts?: { attempt?: number; error?: string | Error }, options?: DbOption): Promise<boolean>;
  retry(id: number, options?: DbOption): Promise<boolean>;
  get(id: number, options?: DbOption): Promise<JobInfo | null>;
  result(id: number, options?: DbOption): Promise<JobResult | null>;
  /** Waits until the job is done, dead or cancelled. Throws WaitTimeoutError, UnknownJobError. */
  wait(id: number, opts?: WaitOptions): Promise<JobResult>;
  stats(options?: DbOption): Promise<QueueStats[]>;
  requeueExpired(options?: DbOption): Promise<number>;
  maintain(opts?: { maxJobs?: number }, options?: DbOption): Promise<MaintainResult>;
}

/** The second argument of a handler. */
export interface HandlerContext {
  /** Fires with JobTimeoutError, JobNotHeldError or ShutdownError. */
  signal: AbortSignal;
  /** jobs_complete on db, your transaction's pg Client; false when no longer held. */
  complete(db: Db, result?: unknown): Promise<boolean>;
}

/**
 * A handler: what it returns (or resolves to) is the job's result, unless it is a Snooze,
 * Cancel or RetryAt; what it throws fails the attempt.
 */
export type Handler<Payload = any> = (job: Job<Payload>, ctx: HandlerContext) => unknown;

/** The second argument of a batch handler. */
export interface BatchContext {
  /** Fires with JobTimeoutError or ShutdownError, or JobNotHeldError once every job is lost. */
  signal: AbortSignal;
}

/**
 * A batch handler's function: undefined completes every job; an array with one entry per job
 * settles each on its own (a value: its result; Snooze, Cancel, RetryAt; an Error: failed);
 * what it throws fails every job.
 */
export type BatchHandleFunc<Payload = any> = (jobs: Job<Payload>[], ctx: BatchContext) => unknown;

export interface BatchOptions {
  /** Defaults to BATCH_MAX_JOBS_DEFAULT. */
  maxJobs?: number;
  /** ms; 0 (the default) is no waiting. Below lease / 2. */
  maxWait?: number;
}

export const BATCH_MAX_JOBS_DEFAULT: number;

/** A batch handler, given as the value of a kind in WorkerOptions.handlers. */
export class Batch<Payload = any> {
  constructor(fn: BatchHandleFunc<Payload>, options?: BatchOptions);
  readonly fn: BatchHandleFunc<Payload>;
  readonly maxJobs: number;
  readonly maxWait: number;
}

export type WorkerEventType = 'completed' | 'failed' | 'snoozed' | 'cancelled' | 'lost';

export interface WorkerEvent {
  type: WorkerEventType;
  job: Job;
  state: JobState | null;
  error: unknown;
}

export interface Logger {
  info?(message: string): void;
  warn?(message: string): void;
  error?(message: string): void;
}

/** new Worker's options; src/worker.js documents each. */
export interface WorkerOptions {
  handlers: { [kind: string]: Handler | Batch };
  /** Queue name -> slots. Defaults to {default: SLOTS_DEFAULT}. */
  queues?: { [queue: string]: number };
  name?: string;
  lease?: number;
  heartbeatInterval?: number;
  /** -1 for none. */
  timeout?: number;
  pollInterval?: number;
  listen?: boolean;
  /** -1 disables. */
  maintainInterval?: number;
  shutdownTimeout?: number;
  completeBatchDelay?: number;
  completeBatchSize?: number;
  handleSignals?: boolean;
  logger?: Logger;
  onEvent?(event: WorkerEvent): void;
}

export interface WorkerStats {
  claimed: number;
  completed: number;
  failed: number;
  snoozed: number;
  cancelled: number;
  fenced: number;
  errors: number;
}

export class Worker {
  constructor(client: Client, options: WorkerOptions);
  readonly client: Client;
  readonly name: string;
  readonly stats: WorkerStats;
  /** Resolves once the worker listens (with listen) and has made its first claims. */
  readonly ready: Promise<void>;
  /** Runs until stop() or, with handleSignals, SIGTERM or SIGINT. */
  run(): Promise<void>;
  start(): void;
  /** Graceful shutdown; safe to call twice. */
  stop(): Promise<void>;
}

export const LEASE_DEFAULT: number;
export const JOB_TIMEOUT_DEFAULT: number;
export const POLL_INTERVAL_DEFAULT: number;
export const MAINTAIN_INTERVAL_DEFAULT: number;
export const SHUTDOWN_TIMEOUT_DEFAULT: number;
export const COMPLETE_BATCH_DELAY_DEFAULT: number;
export const COMPLETE_BATCH_SIZE_DEFAULT: number;
export const SLOTS_DEFAULT: number;

/** SQLSTATE 22023 from a SQL function: `parameter` names the bad argument. */
export class InvalidArgumentError extends Error {
  constructor(message: string, parameter: string | null, cause?: unknown);
  readonly code: '22023';
  readonly parameter: string | null;
}

export class JobTimeoutError extends Error {
  constructor(timeoutMs: number);
}

export class JobNotHeldError extends Error {
  constructor(id: number, attempt: number);
  readonly id: number;
  readonly attempt: number;
}

export class ShutdownError extends Error {
  constructor();
}

export class WaitTimeoutError extends Error {
  constructor(id: number, timeoutMs: number);
  readonly id: number;
  readonly timeoutMs: number;
}

export class UnknownJobError extends Error {
  constructor(id: number);
  readonly id: number;
}

export class Snooze {
  constructor(delayMs?: number);
  readonly delayMs: number;
}

export class Cancel extends Error {
  constructor(reason?: string | Error);
}

export class RetryAt extends Error {
  constructor(at: Date | string | number, reason?: string | Error);
  readonly at: Date;
}

export function snooze(delayMs?: number): Snooze;
export function cancel(reason?: string | Error): Cancel;
export function retryAt(at: Date | string | number, reason?: string | Error): RetryAt;
