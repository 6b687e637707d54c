// Command bench measures skiplock on a real PostgreSQL server and prints a table, or with
// -json one JSON object per scenario ({"system","version","scenario","jobs","seconds",
// "jobs_per_sec", p50_ms…}), the format the peer harnesses in cmd/bench/peers print too.
//
//	go run ./cmd/bench                        # throwaway local server, every scenario
//	go run ./cmd/bench -scenarios work_drain,naive -jobs 100000
//	go run ./cmd/bench -peers river,graphile-worker
//	DATABASE_URL=postgres://… go run ./cmd/bench -json
//
// Without DATABASE_URL (or -database-url) it starts a throwaway PostgreSQL cluster with
// internal/pglocal, fsync on, and removes it afterwards. Either way it works only in its own
// schema (-schema, default skiplock_bench), which it drops and re-creates with
// skiplock.Migrate before each scenario, so scenarios do not disturb each other. Nothing
// outside that schema is touched, except that Migrate creates skiplock's cluster-wide roles
// (jobs_producer, jobs_worker, jobs_admin) when they are missing and it may.
//
// Jobs are enqueued with driver.Enqueue and driver.EnqueueMany (the workflow scenario's
// with jobs_enqueue_workflow, which the driver has no call for) and worked by a
// driver.Client with -workers slots and every other setting at its default; the handler
// does nothing but record when it started. The scale scenario re-executes this binary as
// its worker processes (environment SKIPLOCK_BENCH_WORKER_MODE=1).
//
// Scenarios, run in this order whatever order -scenarios names them in (the table in
// scenario.go; a test keeps this list equal to it):
//
//	insert_bulk      N jobs through driver.EnqueueMany (jobs_enqueue_many) in batches of -batch
//	insert_single    N/10 jobs, one driver.Enqueue transaction each, from -producers goroutines
//	work_drain       N no-op jobs queued, then the workers start; time to the last completion
//	work_drain_1000  work_drain with 1,000 slots (pool unchanged), and the peers at 1,000 slots
//	                 with their settings for that count
//	latency          idle workers; -latency-jobs jobs enqueued one at a time -latency-interval
//	                 apart; enqueue commit -> handler start
//	steady           -producers enqueue at full rate while the workers drain, -steady-duration
//	steady_rate      -producers enqueue one job per transaction at -rate jobs/s (default: half
//	                 of skiplock's work_drain or insert_single, the lower) for -steady-duration;
//	                 enqueue commit -> handler start, achieved rate, backlog at the end
//	bloat            work_drain with -bloat-rows finished jobs in the table (ratio to work_drain)
//	limit_slots      work_drain on a queue with max_running = -workers (ratio to work_drain)
//	limit_half       work_drain on a queue with max_running = -workers/2 (ratio to work_drain)
//	limit_per_key    work_drain of jobs over 100 concurrency keys, per_key 1 (ratio to work_drain)
//	fair             work_drain over 1,000 concurrency keys, fair, per_key -workers, k0 holding 90%
//	                 (enqueued first; ratio to work_drain); when the other keys' last job started
//	ordered          work_drain over 1,000 concurrency keys, ordered (ratio to work_drain); starts
//	                 out of id order within a key
//	held_xmin        steady while another session holds a REPEATABLE READ snapshot (ratio to steady)
//	scale            work_drain with 1, 2 and 4 worker processes (this binary re-executed)
//	naive            the seed design, one SELECT … FOR UPDATE SKIP LOCKED LIMIT 1 + UPDATE
//	                 transaction per job from -naive-workers goroutines, on the same server
//	retention        opt-in: the workers drain at full rate for -retention-duration, done jobs
//	                 kept, then deleted 10 s after finishing by the clients' jobs_maintain
//	                 (ratio to retention_keep); reports the done rows over time
//	chaos            opt-in (only when -scenarios names it; throwaway server only): the chaos
//	                 suite of internal/chaos with N jobs, -chaos-workers processes and
//	                 -chaos-kills kills, fast and immediate restarts; see chaos.go
//	upgrade          opt-in: a schema at the migration before the newest, holding -upgrade-rows
//	                 jobs (mostly done), migrated to the newest while one session enqueues and
//	                 another reads by id; reports the migration's time and their longest waits
//	shards           opt-in: work_drain of N jobs spread over 1, 2 and 4 shards, each a throwaway
//	                 cluster of its own, through one driver.ShardedClient with -workers slots per
//	                 shard; reports the CPU per job of the clusters and of the bench; see shards.go
//	workflow         opt-in: -workflows diamonds of 4 no-op jobs (a -> b, c -> d) enqueued with
//	                 jobs_enqueue_workflow (untimed), then drained as work_drain (ratio to
//	                 work_drain when it runs too)
//
// latency, steady, steady_rate and held_xmin measure a running system, not one starting
// up: before their window each system (skiplock and every peer harness alike) runs the
// scenario's own load, not measured, for -warmup (default 1s), then waits until its queue
// is empty. A fresh PostgreSQL backend's first call of each function compiles and plans it,
// which on cold connections stalled the first half second of the window.
//
// The ratios at the end (work_drain to naive, bloat, the limit_* drains, fair, ordered and
// workflow to work_drain, held_xmin to steady, scale, shards) are the numbers to compare
// across machines: both sides ran in the same run on the same server, so load from
// elsewhere affects them alike.
//
// # Peers
//
// -peers river,graphile-worker runs skiplock's own harnesses of River and graphile-worker
// on the same throwaway server, with the same -jobs, -workers, -producers, latency
// schedule, steady length and steady_rate arrival rate, on the scenarios the table gives
// them. The systems alternate: each such scenario runs -rounds times (default 3), each
// round skiplock, then every peer, each peer in a fresh database; the table then gives
// per system the median and range (min-max) of jobs/s, p50 and p99 over the rounds, and
// per peer the median and range of the per-round ratios (skiplock's jobs/s over the
// peer's, or for latency and steady_rate the peer's p50 or p99 over skiplock's), and -json
// adds "round" to each line and a {"system":"summary",…} line after each scenario's
// rounds. So that a full -peers run stays within a few minutes on 2 cores, -peers makes the
// defaults of -jobs 20000, -steady-duration 5s and -latency-jobs 200 (flags given win).
// Without -peers each scenario runs once unless -rounds is given.
//
// # What a job costs the server
//
// Every drain without preloaded finished jobs (work_drain, work_drain_1000, limit_*, fair,
// ordered, workflow), of skiplock and of each peer, reports the database server's CPU time
// per job (its postmaster and every child, from /proc; the throwaway server only) and the
// WAL bytes per job (pg_current_wal_insert_lsn), from the workers' start until they have stopped, plus
// the work each system leaves for later, run at once and measured the same way: the prune
// of the finished jobs it keeps, in its own cleaner's batches (skiplock's jobs_prune 10,000
// at a time; River's JobCleaner query, 10,000 at a time; graphile-worker keeps none), and a
// VACUUM of its jobs table. A peer harness run with --cost-marks prints
// {"mark":"drain_begin"|"drain_end","scenario":…} at those two moments and waits for a line
// on stdin, so that the bench measures while it is idle. The fields are
// server_cpu_us_per_job and server_wal_bytes_per_job (deferred work included), with
// deferred_cpu_us_per_job and deferred_wal_bytes_per_job the deferred part; the
// alternation table shows their medians and the ratios section skiplock's cost over each
// peer's (below 1: skiplock costs less). cmd/bench/peers/river is a Go module of its own (so
// skiplock's go.mod never requires River), built with the go command into the user's cache
// directory; it shares the JSON line code (internal/benchresult) with the bench through a
// replace directive to the checkout it sits in, so a -peers-dir for it must be
// cmd/bench/peers of a skiplock checkout. cmd/bench/peers/graphile-worker is an npm package
// whose pinned dependencies npm ci installs into its node_modules (it needs node and npm on
// PATH). The harnesses are found in the checkout the bench runs in (above the working
// directory, else above its source), or in -peers-dir.
package main
