package chaos_test

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/signal"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/skiplock/skiplock/driver"
	"github.com/skiplock/skiplock/internal/chaos"
	"github.com/skiplock/skiplock/internal/pglocal"
	"github.com/skiplock/skiplock/internal/subproc"
	"github.com/skiplock/skiplock/tests/pgtest"
)

// The worker processes of TestChaosShards are this test binary re-executed with
// shardWorkerEnv set to the shards ("number=url,number=url…"); TestMain hands them to
// shardWorkerMain.
const (
	shardWorkerEnv   = "SKIPLOCK_CHAOS_SHARDS"
	shardWorkerIDEnv = "SKIPLOCK_CHAOS_SHARDS_ID"
	shardKind        = "chaos_shard"
	shardLease       = 2 * time.Second
	shardPoll        = 200 * time.Millisecond
)

// shardWorkerMain runs one worker process: a driver.ShardedClient over every shard, with 4
// slots per shard, until SIGTERM. Each attempt inserts a chaos_executions row on its job's
// shard in its own statement, sleeps 150-350ms (so that kills and restarts find jobs in
// flight: with 48 slots the 2,000 jobs last over 10 s even on an idle machine, longer than
// the faults take), then inserts the job's chaos_effects row and completes the job in one
// transaction on that shard (driver.CompleteTx): an effect committed twice counts up.
func shardWorkerMain() int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	var shards []driver.Shard
	for _, spec := range strings.Split(os.Getenv(shardWorkerEnv), ",") {
		num, url, _ := strings.Cut(spec, "=")
		n, err := strconv.Atoi(num)
		if err != nil {
			logger.Error("bad shard spec", slog.String("spec", spec))
			return 2
		}
		cfg, err := pgxpool.ParseConfig(url)
		if err != nil {
			logger.Error("bad shard URL", slog.Any("error", err))
			return 2
		}
		cfg.MaxConns = 8
		pool, err := pgxpool.NewWithConfig(ctx, cfg)
		if err != nil {
			logger.Error("failed to open pool", slog.Any("error", err))
			return 2
		}
		defer pool.Close()
		shards = append(shards, driver.Shard{Number: n, Pool: pool})
	}
	var sc *driver.ShardedClient
	hs := driver.NewHandlers()
	driver.AddHandler(hs, shardKind, func(ctx context.Context, job *driver.Job[struct{}]) error {
		pool, err := sc.Pool(job.ID)
		if err != nil {
			return err
		}
		if _, err := pool.Exec(ctx, "INSERT INTO chaos_executions (job_id, attempt) VALUES ($1, $2)", job.ID, job.Attempt); err != nil {
			return err
		}
		time.Sleep(time.Duration(150+rand.IntN(200)) * time.Millisecond)
		tx, err := pool.Begin(ctx)
		if err != nil {
			return err
		}
		defer func() { _ = tx.Rollback(context.Background()) }()
		if _, err := tx.Exec(ctx, `INSERT INTO chaos_effects (job_id) VALUES ($1)
			ON CONFLICT (job_id) DO UPDATE SET effects = chaos_effects.effects + 1`, job.ID); err != nil {
			return err
		}
		if err := driver.CompleteTx(ctx, tx, job); err != nil {
			return err
		}
		return tx.Commit(ctx)
	}, nil)
	sc, err := driver.NewShardedClient(shards, &driver.Config{
		ID:              os.Getenv(shardWorkerIDEnv),
		Queues:          map[string]driver.QueueConfig{"chaos": {Slots: 4}},
		Handlers:        hs,
		Lease:           shardLease,
		PollInterval:    shardPoll,
		RequeueInterval: shardPoll,
		Logger:          logger,
	})
	if err != nil {
		logger.Error("NewShardedClient", slog.Any("error", err))
		return 2
	}
	fmt.Println("ready")
	if err := sc.Run(ctx); err != nil {
		logger.Error("Run", slog.Any("error", err))
		return 1
	}
	return 0
}

// chaosShard is one shard of TestChaosShards.
type chaosShard struct {
	number int
	url    string
	pool   *pgxpool.Pool
	server *pglocal.Server
}

// count runs a count query, returning -1 when the shard cannot answer (it may be down).
func (s *chaosShard) count(sql string, args ...any) int {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var n int
	if err := s.pool.QueryRow(ctx, sql, args...).Scan(&n); err != nil {
		return -1
	}
	return n
}

// TestChaosShards runs jobs on four shards, three in one cluster and one in another,
// through three worker processes, each a driver.ShardedClient over all four, while worker
// processes holding jobs on several shards are killed with SIGKILL (and replaced) and the
// fourth shard's cluster is restarted, fast and immediate, with the workers running. While
// that shard is down the other three must keep completing jobs, new ones included; at the end no job may be
// lost or done twice, and no effect may sit on another shard than its job's id names. -short
// runs one kill and one (fast) restart with fewer jobs.
func TestChaosShards(t *testing.T) {
	jobsPerShard, kills, restarts := 500, 2, []pglocal.StopMode{pglocal.StopFast, pglocal.StopImmediate}
	if testing.Short() {
		jobsPerShard, kills, restarts = 200, 1, restarts[:1]
	}
	ctx := context.Background()
	srvA, srvB := pgtest.NewServer(t), pgtest.NewServer(t)
	var shards []*chaosShard
	for i, srv := range []*pglocal.Server{srvA, srvA, srvA, srvB} {
		db := "shard" + strconv.Itoa(i)
		admin := pgtest.NewConn(t, srv.URL())
		pgtest.MustExec(t, admin, "CREATE DATABASE "+db)
		url := srv.URLFor(db)
		migrate(t, url)
		pool := pgtest.NewPool(t, url)
		pgtest.MustExec(t, pool, "SELECT jobs_set_shard($1)", i)
		pgtest.MustExec(t, pool, `CREATE TABLE chaos_effects (job_id bigint PRIMARY KEY, effects int NOT NULL DEFAULT 1)`)
		pgtest.MustExec(t, pool, `CREATE TABLE chaos_executions (job_id bigint NOT NULL, attempt int NOT NULL)`)
		pgtest.MustExec(t, pool, `SELECT jobs_enqueue_many(array_fill($1::text, ARRAY[$2::int]), NULL, array_fill('chaos'::text, ARRAY[$2::int]),
			max_attempts => array_fill(25, ARRAY[$2::int]))`, shardKind, jobsPerShard)
		shards = append(shards, &chaosShard{number: i, url: url, pool: pool, server: srv})
	}
	restarted := shards[3]
	total := jobsPerShard * len(shards) // enqueued at the start; each restart adds 250

	var specs []string
	for _, s := range shards {
		specs = append(specs, fmt.Sprintf("%d=%s", s.number, s.url))
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	workers := map[string]*subproc.Process{}
	nextWorker := 0
	startWorker := func() {
		t.Helper()
		id := "shard-worker-" + strconv.Itoa(nextWorker)
		nextWorker++
		p, err := subproc.Start(ctx, exe, &subproc.Options{
			Env:          []string{shardWorkerEnv + "=" + strings.Join(specs, ","), shardWorkerIDEnv + "=" + id},
			ReadyLine:    "ready",
			Stderr:       pgtest.NewLogWriter(t),
			StderrPrefix: "[" + id + "] ",
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(p.Kill)
		if err := p.WaitReady(30 * time.Second); err != nil {
			t.Fatal(err)
		}
		workers[id] = p
	}
	done := func() int {
		n := 0
		for _, s := range shards {
			n += max(s.count("SELECT count(*) FROM chaos_effects"), 0)
		}
		return n
	}
	began := time.Now()
	for range 3 {
		startWorker()
	}

	// holders counts, by lease holder, the shards where it holds running jobs.
	holders := func() map[string]int {
		out := map[string]int{}
		for _, s := range shards {
			rows, err := s.pool.Query(ctx, "SELECT DISTINCT lease_holder FROM jobs WHERE state = 'running'")
			if err != nil {
				continue // the restarted shard may be down
			}
			for rows.Next() {
				var h string
				if rows.Scan(&h) == nil {
					out[h]++
				}
			}
			rows.Close()
		}
		return out
	}
	// Each fault's recovery must take at most the chaos suite's bound: lease + poll
	// interval + slack (see internal/chaos).
	bound := shardLease + shardPoll + chaos.RecoverySlack
	var recoveries []string
	recovered := func(what string, took time.Duration) {
		recoveries = append(recoveries, what+": "+took.Round(10*time.Millisecond).String())
		if took > bound {
			t.Errorf("%s took %s to recover, more than %s", what, took, bound)
		}
	}
	kill := func() {
		t.Helper()
		var victim string
		pgtest.WaitFor(t, 30*time.Second, "a worker holding jobs on two shards or more", func() bool {
			best := 1
			for h, n := range holders() {
				if n > best && workers[h] != nil {
					victim, best = h, n
				}
			}
			return victim != ""
		})
		onShards := holders()[victim]
		workers[victim].Kill()
		<-workers[victim].Done()
		killedAt := time.Now()
		delete(workers, victim)
		startWorker()
		// Recovered once no shard has a running job of the victim's: lease expiry and
		// jobs_maintain took them back (or they were completed before the kill landed).
		pgtest.WaitFor(t, 30*time.Second, "the killed worker's jobs taken back on every shard", func() bool {
			for _, s := range shards {
				if s.count("SELECT count(*) FROM jobs WHERE state = 'running' AND lease_holder = $1", victim) != 0 {
					return false
				}
			}
			return true
		})
		recovered(fmt.Sprintf("kill of %s (jobs on %d shards)", victim, onShards), time.Since(killedAt))
	}
	restart := func(mode pglocal.StopMode) {
		t.Helper()
		// Fresh jobs, so that the restart finds some in flight whatever the shard's progress.
		pgtest.MustExec(t, restarted.pool, `SELECT jobs_enqueue_many(array_fill($1::text, ARRAY[100]), NULL, array_fill('chaos'::text, ARRAY[100]),
			max_attempts => array_fill(25, ARRAY[100]))`, shardKind)
		pgtest.WaitFor(t, 30*time.Second, "jobs running on the shard about to restart", func() bool {
			return restarted.count("SELECT count(*) FROM jobs WHERE state = 'running'") > 0
		})
		if err := restarted.server.Stop(ctx, mode); err != nil {
			t.Fatal(err)
		}
		// The other shards keep flowing while it is down: new jobs there are all done
		// before it comes back.
		for _, s := range shards[:3] {
			pgtest.MustExec(t, s.pool, `SELECT jobs_enqueue_many(array_fill($1::text, ARRAY[50]), NULL, array_fill('chaos'::text, ARRAY[50]),
				max_attempts => array_fill(25, ARRAY[50]))`, shardKind)
		}
		pgtest.WaitFor(t, 30*time.Second, fmt.Sprintf("the other shards drained while shard %d is down", restarted.number), func() bool {
			for _, s := range shards[:3] {
				if s.count("SELECT count(*) FROM jobs WHERE state <> 'done'") != 0 {
					return false
				}
			}
			return true
		})
		effects := restarted.count("SELECT count(*) FROM chaos_effects") // -1: down
		if err := restarted.server.Start(ctx); err != nil {
			t.Fatal(err)
		}
		upAt := time.Now()
		pgtest.WaitFor(t, 30*time.Second, "a job completed on the restarted shard", func() bool {
			n := restarted.count("SELECT count(*) FROM chaos_effects")
			if effects < 0 && n >= 0 {
				effects = n // the first answer after the restart is the baseline
				return false
			}
			return n > effects || n == jobsPerShard
		})
		recovered(fmt.Sprintf("restart (%s) of shard %d, from up to its next completion", mode, restarted.number), time.Since(upAt))
	}

	// Faults, spaced through the run: the kills first, while every shard has jobs, then the
	// restarts.
	faults := 0
	at := func() {
		faults++
		target := faults * total / (kills + len(restarts) + 2)
		pgtest.WaitFor(t, 60*time.Second, fmt.Sprintf("%d jobs done", target), func() bool { return done() >= target })
	}
	for range kills {
		at()
		kill()
	}
	for _, mode := range restarts {
		at()
		restart(mode)
	}
	pgtest.WaitFor(t, 90*time.Second, "every job done on every shard", func() bool {
		for _, s := range shards {
			if s.count("SELECT count(*) FROM jobs WHERE state <> 'done'") != 0 {
				return false
			}
		}
		return true
	})
	elapsed := time.Since(began)
	ids := make([]string, 0, len(workers))
	for id := range workers {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		p := workers[id]
		_ = p.Signal(syscall.SIGTERM)
		if err := p.Wait(30 * time.Second); err != nil {
			t.Errorf("worker %s: %v", id, err)
		}
	}

	var jobs, lost, twice, misplaced, executions int
	for _, s := range shards {
		jobs += s.count("SELECT count(*) FROM jobs")
		lost += s.count(`SELECT count(*) FROM jobs j LEFT JOIN chaos_effects e ON e.job_id = j.id
			WHERE j.state <> 'done' OR e.job_id IS NULL`)
		twice += s.count("SELECT count(*) FROM chaos_effects WHERE effects > 1")
		misplaced += s.count("SELECT count(*) FROM chaos_effects WHERE job_id % 1024 <> $1", s.number)
		executions += s.count("SELECT count(*) FROM chaos_executions")
	}
	t.Logf("chaos across shards: %d jobs on 4 shards (2 clusters) through 3 worker processes in %s; %d executions; "+
		"%d lost, %d done twice, %d effects on the wrong shard; recoveries:\n  %s",
		jobs, elapsed.Round(100*time.Millisecond), executions, lost, twice, misplaced, strings.Join(recoveries, "\n  "))
	if lost != 0 || twice != 0 || misplaced != 0 {
		t.Errorf("%d lost, %d done twice, %d effects on the wrong shard; want none", lost, twice, misplaced)
	}
	// The lost count sees only rows still in jobs: a job that vanished (pruned, deleted)
	// would escape it.
	if want := total + 250*len(restarts); jobs != want {
		t.Errorf("%d jobs on the shards, want the %d enqueued", jobs, want)
	}
	if executions <= jobs {
		t.Errorf("%d executions of %d jobs: the kills and restarts interrupted no job, so the run proves little", executions, jobs)
	}
}
