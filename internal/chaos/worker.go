package chaos

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/skiplock/skiplock/driver"
)

// workerEnv holds a worker process's configuration, as JSON; its presence makes the process
// a worker (see IsWorker).
const workerEnv = "SKIPLOCK_CHAOS_WORKER"

// The job kinds of a run. Every kind does the same work in the end (see effect); they
// differ in what they do first.
const (
	kindWork = "chaos_work" // sleeps, then works
	kindHog  = "chaos_hog"  // holds extra pool connections while it sleeps, then works
	kindHang = "chaos_hang" // first attempt: hangs past its timeout; later attempts work
)

// appPrefix starts the application_name of every worker connection: appPrefix + id +
// "/pool" for the pool, appPrefix + id + "/listen" for the LISTEN connection.
const appPrefix = "skiplock-chaos-"

// hangExtra is how long a hanging handler ignores its cancelled context.
const hangExtra = 500 * time.Millisecond

// jobArgs is the payload of every chaos job.
type jobArgs struct {
	Seq     int `json:"seq"`
	SleepMS int `json:"sleep_ms"`
}

// workerConfig is what a worker process needs, passed in workerEnv.
type workerConfig struct {
	URL             string        `json:"url"`
	Schema          string        `json:"schema"`
	ID              string        `json:"id"`
	Slots           int           `json:"slots"`
	PoolConns       int           `json:"pool_conns"`
	HogConns        int           `json:"hog_conns"`
	HangTimeout     time.Duration `json:"hang_timeout"`
	Lease           time.Duration `json:"lease"`
	PollInterval    time.Duration `json:"poll_interval"`
	EffectOutsideTx bool          `json:"effect_outside_tx"`
	ClaimAhead      int           `json:"claim_ahead"`
}

// IsWorker reports whether this process was started by [Run] as a worker. A binary that
// runs chaos runs calls it first thing in main (or TestMain) and then [WorkerMain]:
//
//	if chaos.IsWorker() {
//		os.Exit(chaos.WorkerMain())
//	}
func IsWorker() bool { return os.Getenv(workerEnv) != "" }

// WorkerMain runs a worker process: a driver.Client with the chaos handlers, until its
// standard input closes (the controller stops it, or died) or it gets SIGTERM or SIGINT.
// It returns the process's exit code: 0 after a clean shutdown.
func WorkerMain() int {
	var cfg workerConfig
	if err := json.Unmarshal([]byte(os.Getenv(workerEnv)), &cfg); err != nil {
		fmt.Fprintf(os.Stderr, "chaos worker: bad %s: %v\n", workerEnv, err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		// The controller holds our stdin: EOF means stop, whether it asked or died.
		_, _ = io.Copy(io.Discard, os.Stdin)
		cancel()
	}()
	if err := runWorker(ctx, &cfg); err != nil {
		fmt.Fprintf(os.Stderr, "chaos worker %s: %v\n", cfg.ID, err)
		return 1
	}
	return 0
}

func runWorker(ctx context.Context, cfg *workerConfig) error {
	pc, err := pgxpool.ParseConfig(cfg.URL)
	if err != nil {
		return err
	}
	pc.MaxConns = int32(cfg.PoolConns)
	if cfg.Schema != "" {
		pc.ConnConfig.RuntimeParams["search_path"] = pgx.Identifier{cfg.Schema}.Sanitize()
	}
	// The client's LISTEN connection is made from this configuration without BeforeConnect,
	// so the two application names tell the listener from the pool's connections.
	pc.ConnConfig.RuntimeParams["application_name"] = appPrefix + cfg.ID + "/listen"
	pc.BeforeConnect = func(_ context.Context, cc *pgx.ConnConfig) error {
		cc.RuntimeParams["application_name"] = appPrefix + cfg.ID + "/pool"
		return nil
	}
	pool, err := pgxpool.NewWithConfig(ctx, pc)
	if err != nil {
		return err
	}
	defer pool.Close()

	w := &worker{cfg: cfg, pool: pool}
	hs := driver.NewHandlers()
	driver.AddHandler(hs, kindWork, w.work, &driver.HandlerOpts{Timeout: 30 * time.Second})
	driver.AddHandler(hs, kindHog, w.hog, &driver.HandlerOpts{Timeout: 30 * time.Second})
	driver.AddHandler(hs, kindHang, w.hang, &driver.HandlerOpts{Timeout: cfg.HangTimeout})
	client, err := driver.NewClient(pool, &driver.Config{
		Queues:          map[string]driver.QueueConfig{driver.QueueDefault: {Slots: cfg.Slots, ClaimAhead: cfg.ClaimAhead}},
		Handlers:        hs,
		ID:              cfg.ID,
		Lease:           cfg.Lease,
		PollInterval:    cfg.PollInterval,
		RequeueInterval: cfg.PollInterval,
		ShutdownTimeout: 5 * time.Second,
		Logger:          slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
	})
	if err != nil {
		return err
	}
	err = client.Run(ctx)
	// Tell the controller how often the hogs ran the pool dry.
	b, _ := json.Marshal(poolStats{Exhausted: w.exhausted.Load()})
	fmt.Printf("%s%s\n", statsPrefix, b)
	return err
}

// statsPrefix starts the line a worker prints on its standard output as it exits.
const statsPrefix = "stats "

// poolStats is what a worker reports of its pool as it exits.
type poolStats struct {
	// Exhausted counts the hog jobs that ran their pool dry: every connection was in use
	// once they held theirs, or they gave up waiting for one.
	Exhausted int64 `json:"exhausted"`
}

// worker holds what the handlers of one worker process share.
type worker struct {
	cfg       *workerConfig
	pool      *pgxpool.Pool
	exhausted atomic.Int64 // hog jobs that ran the pool dry
}

// work is the plain kind: record the execution, sleep, do the effect.
func (w *worker) work(ctx context.Context, job *driver.Job[jobArgs]) error {
	if err := w.recordExecution(ctx, job); err != nil {
		return err
	}
	if w.cfg.EffectOutsideTx {
		return w.effectOutsideTx(ctx, job)
	}
	if err := sleep(ctx, time.Duration(job.Payload.SleepMS)*time.Millisecond); err != nil {
		return err
	}
	return w.effect(ctx, job)
}

// hog takes up to HogConns connections from the pool (by default all of them, waiting at
// most a second) and holds them while it sleeps, starving the other handlers, the claims
// and the heartbeats of its process; then it works like work.
func (w *worker) hog(ctx context.Context, job *driver.Job[jobArgs]) error {
	if err := w.recordExecution(ctx, job); err != nil {
		return err
	}
	actx, cancel := context.WithTimeout(ctx, time.Second)
	var held []*pgxpool.Conn
	for range w.cfg.HogConns {
		c, err := w.pool.Acquire(actx)
		if err != nil {
			break // take what we could get
		}
		held = append(held, c)
	}
	cancel()
	if st := w.pool.Stat(); len(held) < w.cfg.HogConns || st.AcquiredConns() >= st.MaxConns() {
		w.exhausted.Add(1)
	}
	err := sleep(ctx, time.Duration(job.Payload.SleepMS)*time.Millisecond)
	for _, c := range held {
		c.Release()
	}
	if err != nil {
		return err
	}
	return w.effect(ctx, job)
}

// hang's first attempt waits for its timeout, then ignores the cancellation for hangExtra
// more, as a handler stuck in uninterruptible work would. Then, by the job's sequence
// number, it either fails the attempt (it is retried) or completes the job anyway, on a
// context of its own: the timeout is not a fence, the lease is, and the job is still held.
// Later attempts work normally.
func (w *worker) hang(ctx context.Context, job *driver.Job[jobArgs]) error {
	if err := w.recordExecution(ctx, job); err != nil {
		return err
	}
	if job.Attempt > 1 {
		if err := sleep(ctx, time.Duration(job.Payload.SleepMS)*time.Millisecond); err != nil {
			return err
		}
		return w.effect(ctx, job)
	}
	<-ctx.Done()
	time.Sleep(hangExtra)
	if job.Payload.Seq%2 == 0 {
		return fmt.Errorf("hung past the timeout: %w", context.Cause(ctx))
	}
	lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	return w.effect(lctx, job)
}

// recordExecution counts an attempt, in its own autocommit statement before any work, so
// that attempts whose work never committed are counted too.
func (w *worker) recordExecution(ctx context.Context, job *driver.Job[jobArgs]) error {
	_, err := w.pool.Exec(ctx, "INSERT INTO chaos_executions (job_id, attempt, worker) VALUES ($1, $2, $3)",
		job.ID, job.Attempt, w.cfg.ID)
	if err != nil {
		return fmt.Errorf("failed to record execution: %w", err)
	}
	return nil
}

// effectSQL records the job's effect. A second effect for a job does not fail on the
// primary key: it counts, so that the report can tell how many jobs were done twice.
const effectSQL = `INSERT INTO chaos_effects (job_id, attempt, worker)
VALUES ($1, $2, $3)
ON CONFLICT (job_id) DO UPDATE
SET effects = chaos_effects.effects + 1,
    attempt = excluded.attempt,
    worker = excluded.worker,
    at = excluded.at,
    seq = excluded.seq`

// effect commits the job's effect and its completion in one transaction (CompleteTx): the
// effect happens exactly once however often the job runs.
func (w *worker) effect(ctx context.Context, job *driver.Job[jobArgs]) error {
	tx, err := w.pool.Begin(ctx)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	if _, err := tx.Exec(ctx, effectSQL, job.ID, job.Attempt, w.cfg.ID); err != nil {
		return err
	}
	if err := driver.CompleteTx(ctx, tx, job); err != nil {
		return err // ErrNotHeld: another attempt owns the job; the rollback undoes the effect
	}
	return tx.Commit(ctx)
}

// effectOutsideTx is the mistake Options.EffectOutsideTx asks for: the effect commits on
// its own, and the completion comes later, from the driver. A worker that dies in between
// leaves an effect whose job runs again.
func (w *worker) effectOutsideTx(ctx context.Context, job *driver.Job[jobArgs]) error {
	if _, err := w.pool.Exec(ctx, effectSQL, job.ID, job.Attempt, w.cfg.ID); err != nil {
		return err
	}
	return sleep(ctx, time.Duration(job.Payload.SleepMS)*time.Millisecond)
}

// sleep waits for d or until ctx is done, returning ctx's cause then.
func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}
