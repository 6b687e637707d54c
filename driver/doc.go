// Package driver is skiplock's Go client: it enqueues jobs and runs workers. The queue's
// rules all live in the database, in the jobs_* SQL functions installed by
// [github.com/skiplock/skiplock.Migrate]; every statement this package sends is a call to
// one of them, so Go and any other client share one queue and the same guarantees.
//
// A [Client] works one or more queues, each with its own number of slots (jobs running at
// once). For each queue a fetch loop claims ready jobs with jobs_claim, as many as it has
// free slots, and hands each to a worker goroutine, which decodes the JSON payload into the
// handler's type and calls the handler with a context. A LISTEN connection wakes the fetch
// loops when jobs are enqueued; polling is the safety net. Successful jobs are completed in
// batches (jobs_complete_many); failures, snoozes and cancellations are recorded one by one.
// A heartbeat extends the leases of long jobs, in one call for the whole client, and every
// client periodically runs jobs_maintain, which takes back the jobs of workers that died and
// deletes finished jobs past their retention.
// Every call about a claimed job quotes its attempt number, the fencing token, so a worker
// that lost its job can no longer change it.
//
// # Enqueueing
//
// [Enqueue] adds one job and [EnqueueMany] adds thousands in one round trip. Both take an
// [Executor]: a pool, a connection, or the caller's pgx.Tx, in which case the job commits or
// rolls back with the caller's own writes, and workers are woken only at commit:
//
//	tx, err := pool.Begin(ctx)
//	...
//	_, err = tx.Exec(ctx, "INSERT INTO users (email) VALUES ($1)", email)
//	...
//	_, err = driver.Enqueue(ctx, tx, "welcome_email", WelcomeEmail{To: email}, &driver.EnqueueOpts{Queue: "mail"})
//	...
//	err = tx.Commit(ctx)
//
// Payloads are encoded with encoding/json. [EnqueueOpts] choose the queue, the time the job
// becomes ready (RunAt, or Delay by the database's clock), the priority (lower runs first),
// the attempt budget, a unique key and a concurrency key (ConcurrencyKey: the jobs of a
// queue that share it count together against the queue's per-key concurrency limit).
//
// [Publish] adds one job per subscription of a topic (fan-out: the subscriptions, a queue and
// a kind each, are an operator's, set with the admin package or `skiplock topic subscribe`),
// through the same kinds of [Executor], and returns their ids.
//
// PostgreSQL commits transactions that sent a NOTIFY one at a time, so enqueues through a
// pool share a per-process, per-queue notify throttle: the first enqueue of a queue in a
// window of EnqueueOpts.NotifyCooldown (NotifyCooldownDefault, 2ms) wakes the workers
// itself, the others skip the notification, and once they have returned a jobs_notify of
// their own follows, at most one per cooldown. An idle worker still starts every job within
// the cooldown and a round trip or two. Enqueues through a pgx.Tx or a connection notify
// inline. A program that exits right after enqueueing through a pool calls [FlushNotify]
// first: the deferred notifications are sent from timers, which die with the process.
//
// # Handlers
//
// [AddHandler] registers a [HandleFunc] for a kind; the handler gets a [Job] whose Payload
// is decoded into its own type. Its return value is the outcome: nil completes the job, an
// error fails the attempt (retried after the backoff of jobs_backoff, or dead when attempts
// are exhausted), [Snooze] reschedules without spending an attempt, [Cancel] stops the job
// for good and [RetryAt] fails the attempt with a chosen retry time. A panic is recovered
// and fails the attempt with the panic value and stack as the error. A payload that does not
// decode into the handler's type cancels the job at once, since retrying cannot help, with
// the decode error recorded. A handler whose work is itself in PostgreSQL can call
// [CompleteTx] to complete the job in its own transaction: the work and the completion then
// commit together, exactly once. [AddDefaultHandler] registers a handler for every kind
// without one of its own, as `skiplock work --exec` does to run any job.
//
// # Batch handlers
//
// [AddBatchHandler] registers a [BatchHandleFunc] for a kind whose jobs are cheaper together
// (one bulk insert, one API call for many messages): it gets up to [BatchOpts].MaxJobs jobs of
// the kind claimed together by one queue of the client, and with [BatchOpts].MaxWait also
// those its later claims bring before then, in one call. Each job keeps its own attempt (the
// fencing token) and its own outcome: nil completes them all (each fenced, in the batched
// completions), one error fails them all (each with its own backoff), and a [BatchErrors]
// with one entry per job settles each job on its own (nil, an error, [Snooze], [Cancel],
// [RetryAt]). A panic fails every job of the batch. Each job holds a slot of its queue while
// it waits for the batch to fill and while the handler runs, and heartbeats extend the leases
// of all of them:
//
//	driver.AddBatchHandler(handlers, "send_email", func(ctx context.Context, jobs []*driver.Job[Email]) error {
//		errs := make(driver.BatchErrors, len(jobs))
//		for i, err := range mailer.SendAll(ctx, jobs) {
//			errs[i] = err // nil: done
//		}
//		return errs
//	}, driver.BatchOpts{MaxJobs: 50, MaxWait: 100 * time.Millisecond})
//
// # The fetch loop
//
// Each queue's fetch loop waits in a select on its wake-up channel (one slot, so any number
// of notifications before the next claim count as one), on slots freed by finished jobs, on
// a jittered poll timer and on shutdown. It claims when it has free slots and a reason to
// think jobs are ready: a notification, the poll timer, or the previous claim having filled
// every slot it asked for. In that last case it claims again as soon as jobs finish, without
// waiting for a notification, so a backlog drains in batches whose size follows the rate at
// which jobs finish. Claims of one queue are at least [Config.FetchCooldown] apart, so that
// a storm of notifications becomes a few large claims rather than many small ones.
//
// Flow control needs no configuration here: pausing a queue (jobs_pause), its concurrency
// limits (jobs_set_concurrency) and rate limit (jobs_set_rate_limit) are enforced by
// jobs_claim. A paused or fully limited queue's claims come back empty, and its loop waits as
// for an empty queue; jobs_resume notifies, so idle workers start at once. When a rate limit
// cut a claim short, the loop asks jobs_next_start and holds its claims until then (at most a
// poll interval) instead of polling or spinning.
//
// The LISTEN connection is separate from the pool: [Config.ListenerURL], or else a
// connection made from the pool's configuration. When it fails it is reconnected with
// backoff, and every fetch loop is woken once it listens again, since notifications sent in
// between are lost. Notifications cost nothing per job: the SQL functions send one per queue
// and transaction. With [Config.DisableListen] the client polls only.
//
// # PgBouncer
//
// Claims, completions, heartbeats and enqueues work through PgBouncer in transaction pooling
// mode: each is one call of a SQL function, in one transaction, with no session state. pgx's
// default query exec mode prepares named statements, which PgBouncer before 1.21 (or without
// max_prepared_statements) loses between transactions, so give the pool a mode that does not,
// e.g. default_query_exec_mode=exec in its URL (cache_describe and simple_protocol work too).
//
// LISTEN needs a server session of its own, which transaction pooling does not give: set
// [Config.ListenerURL] to a direct connection to PostgreSQL. Without it, the client checks
// the connection it made from the pool's configuration, and when that goes through a pooler
// (the backend process id the connection reports differs from pg_backend_pid(), as a
// pooler answers with its own) it does not listen. At start the client logs which it does:
// "listening for wake-ups on jobs_ready" (Info), or "LISTEN disabled: polling every 1s"
// (Warn when a pooler was detected, Info with DisableListen). A polling client starts a job
// half a [Config.PollInterval] after it became ready, on average.
//
// # Leases and heartbeats
//
// A claim leases its jobs for [Config.Lease]. Every [Config.HeartbeatInterval] (Lease/3 by
// default) the client extends, in one jobs_heartbeat_many call, the leases of its running
// jobs that would otherwise end within two intervals. If the database says a job is no
// longer held (its lease expired and it was taken back, or an operator cancelled it), the
// job's context is cancelled with cause [ErrNotHeld] and the handler's outcome is dropped.
// A job whose row another session has locked is not extended by that call and is in the
// next call again; the other jobs are extended as usual. The client logs it at Warn, or at
// Debug when the handler has called [CompleteTx]: the session holding the row is then
// usually the handler's own transaction, about to commit.
// A handler's context also ends when the kind's timeout passes ([HandlerOpts.Timeout], by
// default [Config.JobTimeout]).
//
// When a worker dies its jobs keep their lease until it expires; then jobs_maintain, which
// every client calls every [Config.RequeueInterval] (jittered), puts them back in their
// queue, and the next worker runs them as a new attempt.
//
// # Retention
//
// The same jobs_maintain round deletes done, cancelled and dead jobs once they are older than
// the retention of their state in jobs_settings (1 day, 7 days and 30 days by default; NULL
// keeps forever; change it with UPDATE jobs_settings). One client at a time runs a round;
// the others' calls return at once, so there is no leader to elect and no work done twice.
//
// # Completion batching
//
// A handler that returns nil hands its job to the client's completer and frees its slot at
// once. The completer sends the pending completions in one jobs_complete_many call
// [Config.CompleteBatchDelay] after the first of them, or as soon as
// [Config.CompleteBatchSize] are pending, one batch at a time, so that under load batches
// grow with the round trip time and a fast job costs a small share of one. A batch that fails
// because the connection died is sent again until it succeeds: completions are fenced, so
// repeating them is safe. Only when shutdown stops waiting for the database are completions
// dropped, with an error logged; those jobs run again after their lease expires.
//
// When a queue's fetch loop has free slots and reason to claim (its last claim filled every
// slot it asked for, or a notification or the poll woke it), a batch also claims for it, in
// one jobs_complete_and_claim call: one commit instead of two. A retried batch claims anew;
// the claim of a call whose result was lost never starts, and its jobs come back when their
// lease expires, like any lost claim. When the lost result's call had committed, the retry
// finds its completions done already, and the [Hook] still hears [EventCompleted] for them.
// That claim never waits for a lock: it skips a limited queue whose settings row another
// transaction holds (an operator changing the limit, another claim), so completions are
// never held back behind it, and the fetch loop then claims the queue with its own call.
//
// A queue with a concurrency or rate limit is claimed as the server counts its running jobs:
// a job that finished well holds its slot on the server until its completion commits, so
// the fetch loop leaves such slots to the batch that carries those completions, whose claim
// takes them over in the same commit. Claims beyond what the limit grants, which would come
// back short and leave the loop waiting for a notification, so do not happen while the
// client is alone on the queue and its slots are within the limit.
//
// # Claiming ahead
//
// A claim may take jobs beyond the free slots into a buffer, so that a worker that finishes
// starts its next job without a round trip ([QueueConfig.ClaimAhead]). By default how many
// follows the queue: what its slots finish in [ClaimAheadHorizon] at the rate they finished
// jobs lately, at most four times Slots: a drain of short jobs buffers up to a claim's worth, a queue
// of slow jobs a job or two, an idle queue none. A queue with a concurrency or rate limit
// never claims ahead (the client asks jobs_queue_limited at start and once per
// PollInterval): a buffered job would hold one of its slots, or spend one of its starts,
// without running. Buffered jobs are running in the database and leased; the heartbeat
// extends them, and they are given back, without spending an attempt, after
// [ClaimAheadTTL] (at most half the lease) and at shutdown. [ClaimAheadOff] turns it off.
//
// # Periodic jobs
//
// Durable cron schedules live in the database (jobs_schedules), not in the client, so runs
// are not lost across restarts and no client is a leader. [Config.Schedules] lists the
// schedules a client declares when it starts (jobs_schedule: the same declaration again
// keeps the next run time, so restarts neither re-fire nor skip a run):
//
//	cfg.Schedules = []driver.Schedule{
//		{Name: "nightly-report", Cron: "30 2 * * *", Timezone: "Europe/Berlin", Kind: "report"},
//		{Name: "heartbeat", Cron: "@every 30 seconds", Kind: "ping"},
//	}
//
// Every client, with or without schedules of its own, calls jobs_schedule_tick every
// [Config.ScheduleTickInterval] (the poll interval by default), which enqueues one job per
// due schedule with run_at set to the scheduled instant. However many clients tick, each
// instant is enqueued once; after downtime only the latest missed instant is. A client
// ticks even when its own schedules cannot be declared (a refused one is logged once). See
// docs/operations.md for ticking from psql with pg_cron or system cron.
//
// # Shutdown
//
// [Client.Run] returns when its context is cancelled or [Client.Stop] is called, after a
// graceful shutdown: the fetch loops stop claiming (jobs of a claim in flight are released
// at once rather than started); running handlers get up to [Config.ShutdownTimeout] to
// finish, with their leases still heartbeated; then their contexts are cancelled with cause
// [ErrShutdown]. A job whose handler then returns an error is released with jobs_snooze to
// now: ready at once for any worker, without spending an attempt. A handler that ignores its
// context for five more seconds is abandoned, and its job comes back when its lease expires.
// Finally the pending completions are flushed.
//
// # Connection loss
//
// The pool reconnects by itself; every loop of the client logs a failed call, backs off and
// tries again, and failed outcome updates are retried like completion batches. A claim whose
// result was lost with its connection is not run: if it had committed, its jobs come back
// through lease expiry. Run never returns because of a database outage, only on shutdown or
// when claiming cannot work at all (skiplock not installed where the pool looks, or a role
// without the right to call jobs_claim). In that case Run gives up: it shuts down as above
// and returns an error for which errors.Is(err, [ErrGaveUp]) holds, wrapping the database's
// *pgconn.PgError. A supervisor can treat that error as a deployment problem rather than
// restart the client in a loop.
//
// # Shards
//
// Past one server's job rate, skiplock spreads queues over several ordinary skiplock
// databases, each made shard N once with jobs_set_shard(N); every job id a shard hands out
// then names it ([ShardOf]: id % 1024). A [ShardedClient] ([NewShardedClient]) works the same
// queues on every shard given to it as a [Shard] (number and pool): it is one [Client] per
// shard under one Run and Stop, so each shard has its own fetch loops with the queue's
// Config slots, its own LISTEN connection, heartbeats, completer and maintainer, and a busy
// shard never starves another of slots. Every call about a job goes to the shard it was
// claimed from, which is the one its id names. Enqueue directly on the shard that holds the
// queue, in the caller's transaction on that database for an atomic enqueue (the outbox
// pattern): [Enqueue] takes that shard's pool or pgx.Tx as for one database.
//
// Before working a shard the client checks that its jobs_shard() is the number it was given.
// A shard that is down, at start or later, is logged (attribute skiplock_shard) and retried
// while the others keep working; its jobs run once it is back. Run gives up ([ErrGaveUp],
// wrapping a [*ShardError] that names the shard) only when a shard is misconfigured:
// another shard's database or none ([ErrWrongShard]), skiplock missing or the role lacking
// rights there. A handler that completes its job in its own transaction ([CompleteTx]) takes
// the transaction from [ShardedClient.Pool](job.ID); an id whose shard the client lacks gives
// an [*UnknownShardError]. Hooks receive the events of every shard (ShardOf(e.Job.ID) says
// which). See docs/scaling.md.
//
// # Observability
//
// The client logs through [log/slog] ([Config.Logger]): whether it listens or polls,
// connection trouble, failed and cancelled jobs, shutdown. Successful jobs are not logged. For metrics, a [Hook] receives an
// [Event] for every job started, completed, failed, snoozed, cancelled or lost, with the
// handler's duration and, for starts, the time the job waited since it became ready; a Hook
// that also implements [ClaimHook] receives a [ClaimEvent] for every claim (its batch size
// and what woke the fetch loop: [WakeNotify], [WakePoll], ...). The nested modules
// github.com/skiplock/skiplock/contrib/prometheus and .../contrib/otel turn these into
// metrics and spans.
//
// # Goroutines
//
// A running client has one fetch loop per queue, one LISTEN goroutine, one maintainer, one
// scheduler, one heartbeater and one completer (a ShardedClient: that many per shard). Jobs run on worker goroutines, about one per
// slot (a claim made just as a worker frees its slot may start one more): the fetch loop hands a claimed
// job to an idle worker, or starts a worker when none is idle, and a worker that has had no
// job for five seconds exits. A busy queue thus reuses its workers
// (and their grown stacks) rather than starting a goroutine per job, and an idle client has
// none.
package driver
