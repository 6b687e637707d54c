package driver

// The driver↔SQL contract: every statement the driver sends, one per jobs_* call. The
// queue's rules live in those functions (sql/functions/, specified in docs/sql-api.md); the
// comments here say which arguments the driver passes and what it relies on in the result.
// Each job-specific call quotes (id, attempt), the fencing token, and the functions refuse
// it once the job has moved on: that is what makes retrying any of them safe.

// enqueueSQL calls jobs_enqueue(kind, payload, queue, run_at, priority, max_attempts,
// unique_key, concurrency_key, meta, notify, depends_on, on_parent_failure, notify_finished,
// on_duplicate, unique_for) for [Enqueue]. run_at is RunAt when given, else now() + Delay by
// the database's clock. Relies on: the new job's id, or the id of the job that stands for it
// when the unique key is taken (kept, replaced in place, or in its unique_for period).
const enqueueSQL = `SELECT jobs_enqueue($1, $2, $3, coalesce($4::timestamptz, now() + $5::interval), $6, $7, $8, $9, $10::jsonb, $11,
    $12::bigint[], $13, $14, $15, $16::interval)`

// publishSQL calls jobs_publish(topic, payload, run_at, priority, max_attempts,
// concurrency_key, meta) for [Publish]; notify stays true (Publish notifies inline). run_at is
// RunAt when given, else now() + Delay by the database's clock. Relies on: one id per
// subscription of the topic, in the order of the subscriptions by queue then kind; '{}' (not
// NULL) without subscribers.
const publishSQL = `SELECT jobs_publish($1, $2, coalesce($3::timestamptz, now() + $4::interval), $5, $6, $7, $8::jsonb)`

// enqueueManySQL calls jobs_enqueue_many(kinds, payloads, queues, run_ats, priorities,
// max_attempts, unique_keys, concurrency_keys, metas, notify, on_duplicates, unique_fors) for [EnqueueMany]. Each job's run_at is computed in the
// database, so Delay follows the database's clock; with no RunAt or Delay at all both arrays
// are NULL and so is run_ats (every job ready now). A NULL array means the default for every
// job. Relies on: one id per input job, in input order; all or nothing.
const enqueueManySQL = `SELECT id FROM jobs_enqueue_many($1::text[], $2::jsonb[], $3::text[],
    (SELECT array_agg(coalesce(t.run_at, now() + t.delay) ORDER BY t.ord)
     FROM unnest($4::timestamptz[], $5::interval[]) WITH ORDINALITY AS t(run_at, delay, ord)),
    $6::integer[], $7::integer[], $8::text[], $9::text[], $10::jsonb[], $11::boolean, $12::text[], $13::interval[]) AS t(id)`

// notifySQL calls jobs_notify(queue): the notify throttle's wake-up for the enqueues of a
// cooldown window that passed notify => false (notify_throttle.go), sent after they returned.
const notifySQL = `SELECT jobs_notify($1)`

// claimSQL calls jobs_claim(worker, max_jobs, queues, lease) for a fetch loop. Relies on:
// at most max_jobs rows, each a job now running at the returned attempt and leased to worker
// until lease_expires_at, with its meta, parent_results and checkpoints (usually NULL), in the
// column order the fetch loop scans. An error with SQLSTATE
// 42883, 42P01, 42704, 42501 or 3F000 (see fatalSQL) means claiming cannot work at all.
const claimSQL = `SELECT id, queue, kind, payload, attempt, max_attempts, priority, run_at, lease_expires_at, created_at,
    meta, parent_results, checkpoints
FROM jobs_claim($1, $2, $3, $4)`

// completeAndClaimSQL calls jobs_complete_and_claim(worker, ids, attempts, max_jobs, queues,
// lease, results) for a fetch loop that claims while completions are pending: the completions of
// completeManySQL and the claim of claimSQL in one transaction. Relies on: completed (the ids
// completed; a job missing was no longer held at its attempt) on the first row only, then
// claimSQL's columns in its order; when nothing is claimed, one row whose job columns are
// NULL. The same errors as claimSQL mean claiming cannot work at all; 22023 naming results,
// as for completeManySQL, when a result is refused.
const completeAndClaimSQL = `SELECT completed, id, queue, kind, payload, attempt, max_attempts, priority, run_at,
    lease_expires_at, created_at, meta, parent_results, checkpoints
FROM jobs_complete_and_claim($1, $2, $3, $4, $5, $6, $7)`

// nextStartSQL calls jobs_next_start(queue) after a claim that came back short. Relies on:
// NULL when the queue has no rate limit (nothing to wait for but a notification, a freed
// slot or the poll), else how long until the rate limit allows the next start, measured on
// the database's clock (0 when it allows one now), so the fetch loop can sleep that long
// instead of a whole poll interval. greatest ignores NULLs: the CASE keeps the NULL.
const nextStartSQL = `SELECT CASE WHEN s IS NOT NULL THEN greatest(s - clock_timestamp(), interval '0') END
FROM jobs_next_start($1) AS s`

// queueLimitedSQL calls jobs_queue_limited(queue) at the fetch loop's start and once per
// poll interval. Relies on: true when the queue has a concurrency or rate limit, so that the
// loop claims no more than its free slots from it.
const queueLimitedSQL = `SELECT jobs_queue_limited($1)`

// completeSQL calls jobs_complete(id, attempt, result) in the handler's own transaction, for
// [CompleteTx], and for the completer's jobs one at a time when a batch was refused for its
// results; result is what [Job.SetResult] recorded (NULL for none). Relies on: true when the
// job was held at attempt and is now done (the row stays locked until that transaction ends),
// false when it was no longer held; 22023 naming result when the result is refused.
const completeSQL = `SELECT jobs_complete($1, $2, $3::jsonb)`

// completeManySQL calls jobs_complete_many(ids, attempts, results) for the completer's
// batches; results is NULL when no job of the batch has one. Relies on: the ids of the jobs
// completed; a job missing from the result was no longer held at its attempt; 22023 naming
// results, completing nothing, when a result is refused.
const completeManySQL = `SELECT id FROM jobs_complete_many($1, $2, $3::jsonb[]) AS t(id)`

// checkpointSQL calls jobs_checkpoint(id, attempt, step, value) for [Step]. Relies on: true
// when the job was held at attempt and the value is saved, false when it was no longer held.
const checkpointSQL = `SELECT jobs_checkpoint($1, $2, $3, $4::jsonb)`

// progressSQL calls jobs_progress(id, attempt, progress) for [Job.SetProgress]. Relies on:
// true when the job was held at attempt, false when it was no longer held.
const progressSQL = `SELECT jobs_progress($1, $2, $3::jsonb)`

// resultSQL calls jobs_result(id) for [WaitResult]. Relies on: one row (state, result,
// last_error), or none for an unknown job.
const resultSQL = `SELECT state::text, result, last_error FROM jobs_result($1)`

// enqueueWorkflowSQL calls jobs_enqueue_workflow(steps) for [EnqueueWorkflow]. Relies on: one
// row (name, id) per step; all or nothing; 22023 naming steps for a bad graph.
const enqueueWorkflowSQL = `SELECT name, id FROM jobs_enqueue_workflow($1::jsonb)`

// finishedChannel is the channel the SQL functions NOTIFY, at commit, with the job's id as
// payload, when a job enqueued with notify_finished becomes done, dead or cancelled.
const finishedChannel = "jobs_finished"

// listenFinishedSQL and unlistenFinishedSQL subscribe and unsubscribe a pooled connection
// waiting for results; UNLISTEN before the connection goes back to the pool, or it would
// keep hearing every finish.
const (
	listenFinishedSQL   = "LISTEN " + finishedChannel
	unlistenFinishedSQL = "UNLISTEN " + finishedChannel
)

// jobStateSQL calls jobs_get(id) for the completer, after a completion call that may have
// committed but whose reply was lost, about the jobs its retry did not complete. Relies on:
// the job's state and attempts (state done at the attempt the worker held: that call
// completed it), or no row for a job that no longer exists (deleted by its completion with
// done_retention 0, or since).
const jobStateSQL = `SELECT state::text, attempts FROM jobs_get($1)`

// failSQL calls jobs_fail(id, attempt, error, retry_at) when a handler fails; retry_at is
// NULL for the backoff of jobs_backoff. Relies on: the job's new state, queued (to be
// retried) or dead, or NULL when the job was no longer held.
const failSQL = `SELECT jobs_fail($1, $2, $3, $4)`

// snoozeSQL calls jobs_snooze(id, attempt, now() + delay) when a handler snoozes, and with
// a delay of 0 to release a job at shutdown (claimed but not started, or interrupted): ready
// at once for any worker, no attempt spent. Relies on: true when the job was held and is
// queued again, false when it was no longer held.
const snoozeSQL = `SELECT jobs_snooze($1, $2, now() + $3::interval)`

// cancelSQL calls the worker's fenced jobs_cancel(id, attempt, error) when a handler
// cancels its job, its payload does not decode or the database refuses its result. Relies on: true when the job was held and
// is now cancelled, false when it was no longer held (and is left alone).
const cancelSQL = `SELECT jobs_cancel($1, $2, $3)`

// heartbeatManySQL calls jobs_heartbeat_many(ids, attempts, lease) for the heartbeater.
// Relies on: one row per job still held, with extended = false when another session holds
// its row lock (the lease is unchanged; the job goes into the next call again); a job
// missing from the result is no longer held, and its handler's context is cancelled.
const heartbeatManySQL = `SELECT id, extended FROM jobs_heartbeat_many($1, $2, $3)`

// maintainSQL calls jobs_maintain() (default batch size) for the maintainer. Relies on: ran
// false when another session's round was in progress (nothing done); more true when a prune
// hit its batch size and another round should follow; the counts, only for logging.
const maintainSQL = `SELECT ran, requeued, pruned_done, pruned_cancelled, pruned_dead, more FROM jobs_maintain()`

// scheduleSQL calls jobs_schedule(name, cron, kind, payload, queue, timezone, priority,
// max_attempts, enabled) for each of Config.Schedules when the client starts. Relies on:
// the same arguments again change nothing (the next run is kept); a bad cron expression or
// time zone is SQLSTATE 22023 naming it.
const scheduleSQL = `SELECT jobs_schedule($1, $2, $3, $4, $5, $6, $7, $8, $9)`

// scheduleTickSQL calls jobs_schedule_tick() for the scheduler. Relies on: each scheduled
// instant is enqueued once whatever the number of clients ticking; the number of jobs
// enqueued, only for logging.
const scheduleTickSQL = `SELECT jobs_schedule_tick()`

// notifyChannel is the channel the SQL functions NOTIFY, at commit, with the queue name as
// payload, when a job becomes ready now (enqueued, retried, snoozed to now, requeued). One
// notification per queue and transaction; the listener wakes that queue's fetch loop.
const notifyChannel = "jobs_ready"

// listenSQL subscribes the listener's own connection to notifyChannel.
const listenSQL = "LISTEN " + notifyChannel

// backendPIDSQL asks the server for its process id. The listener compares it with the one
// the connection reported at start-up: a pooler answers with its own, and LISTEN does not
// work through a transaction pooler. Sent with the simple protocol: no prepared statement
// for a pooler to lose.
const backendPIDSQL = `SELECT pg_backend_pid()`

// shardNumberSQL calls jobs_shard() for [NewShardedClient]'s check of each shard. Relies on:
// the number jobs_set_shard gave the database, or NULL when it is not a shard.
const shardNumberSQL = `SELECT jobs_shard()`
