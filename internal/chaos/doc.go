// Package chaos is skiplock's chaos suite: it runs a known set of jobs through several
// worker processes while injecting faults, then checks that no job was lost, that no
// job's effect was committed twice, and that the system recovered from every fault in
// time. tests/chaos runs it at a small size in CI; `go run ./cmd/bench -scenarios chaos`
// runs it at any size.
//
// # The workload
//
// [Run] enqueues Options.Jobs jobs, all at once, and starts Options.Workers worker
// processes: the calling binary re-executed, which must hand over to [WorkerMain] when
// [IsWorker] says so. Each worker is a driver.Client with Options.Slots slots and a pool of
// Options.PoolConns connections, working three kinds of job:
//
//   - chaos_work sleeps a random time (so that kills find jobs in flight), then does the
//     job's effect.
//   - chaos_hog (Options.HogFraction of the jobs) first takes Options.HogConns
//     connections (all of them by default) from its process's pool and holds them while
//     it sleeps: pool exhaustion, which starves the other handlers, the claims and the
//     heartbeats of its process.
//   - chaos_hang (Options.HangFraction) hangs on its first attempt until its timeout, and
//     half a second past it, ignoring the cancellation; then half of them fail the attempt
//     and half complete the job anyway.
//
// Every attempt first inserts a chaos_executions row in its own autocommit statement, so
// that attempts whose work never commits are counted too. The effect is an insert into
// chaos_effects (job_id PRIMARY KEY), made in the same transaction as the job's completion
// (driver.CompleteTx). A second commit of a job's effect does not fail on the key: ON
// CONFLICT DO UPDATE counts it in chaos_effects.effects, so that the report can say how
// many jobs were done twice rather than stopping at the first.
//
// # The faults
//
// The schedule, drawn from Options.Seed, shuffles these faults and spaces them by random
// gaps of about a second:
//
//   - Options.Kills kills of a worker process with SIGKILL, preferring processes that hold
//     jobs; each is replaced at once by a new process with a new id.
//   - Options.TerminateRounds rounds of pg_terminate_backend on a random third of the
//     workers' connections, always including one worker's LISTEN connection.
//   - One full PostgreSQL restart per Options.Restarts mode (fast and immediate by
//     default): the whole cluster stops and starts again, a crash in immediate mode.
//   - A session holding FOR UPDATE row locks on Options.RowLockRows jobs, half running and
//     half queued, for Options.RowLock.
//
// Beside them, from the start of the schedule, a REPEATABLE READ transaction holds its
// snapshot (the xmin horizon) for Options.HeldXmin; the hog and hang jobs run throughout.
// Restarts and the row lock wait until the jobs of killed workers are back in the queue,
// so that each fault's recovery is measured alone. After the last fault the run waits
// until every job is done (at most Options.DrainTimeout), stops the workers and checks.
//
// # The report
//
// [Report] counts jobs_lost (enqueued jobs not done with their effect committed),
// jobs_done_twice (chaos_effects rows with effects > 1), executions (chaos_executions rows)
// and the faults, and measures recovery_seconds: for each fault, the time from its end
// (the process dead, the server accepting connections again, the lock released) to the next
// completion committed; for a kill, the time until lease expiry had put the last of the
// victim's jobs back in the queue, if longer; for a terminate round, the time until every
// worker listened again, if longer. The longest of them must be at most Options.Lease +
// Options.PollInterval + 2s ([Options.RecoveryBound]): a killed worker's jobs come back once
// their lease runs out and the next jobs_requeue_expired call (every PollInterval, which
// the workers also use as their requeue interval) takes them back.
//
// It also checks that no job is left running, that every committed effect belongs to a
// done job and to the attempt that completed it, that every done job has a recorded
// execution, and that no worker process died by itself.
//
// # Shaped queues
//
// With Options.Keys the jobs get concurrency keys (evenly, or one hot key holding
// Options.HotKeyShare of them, enqueued first), and Options.Concurrency sets the queue's
// jobs_set_concurrency (per_key, fair, ordered) before they are enqueued. Every execution
// and effect then also takes a number from one sequence, and the report adds: keys_stuck
// (keys with a job not done at the end), most_running_per_key (the most completing attempts
// of one key whose spans, from execution to effect, overlap; at most per_key, 1 on an
// ordered queue) and order_violations (attempts that began before an earlier job of their
// key, by id, had committed its effect; a job run again after its lease expired is the same
// job). Each fails the run where the queue's settings promise it: keys_stuck always,
// most_running_per_key over per_key, and on an ordered queue over 1 or any order violation.
//
// # The delivery guarantee it checks
//
// skiplock runs a job at least once: executions exceed jobs whenever a worker dies or
// loses a lease mid-job, and jobs_run_more_than_once says how many jobs an effect made
// outside the job's transaction (an e-mail, an HTTP call) would have repeated. Effects
// written in the job's transaction with CompleteTx happen exactly once: jobs_done_twice
// must be 0. Options.EffectOutsideTx runs the same workload the wrong way, committing the
// effect before the completion, to show that the suite catches the duplicates that causes.
//
// A pass from one run proves little: faults land at different moments every time. Run
// the suite often, with different seeds, and keep the seed of a failing run.
package chaos
