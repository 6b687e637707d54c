// Package pgbouncer_test runs producers, workers and the SQL functions through a real
// PgBouncer in transaction pooling mode, started by each test in front of its database.
// Tests skip when pgbouncer is not installed (scripts/test installs it when run as root).
package pgbouncer_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/skiplock/skiplock/driver"
	"github.com/skiplock/skiplock/internal/pglocal"
	"github.com/skiplock/skiplock/tests/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// poolSize is PgBouncer's server connections per database: far fewer than the clients' pool
// connections, so that the clients really share them.
const poolSize = 5

// testBundle is a fresh database and a PgBouncer in transaction mode in front of it.
type testBundle struct {
	directURL string        // the database, directly on PostgreSQL: a session of its own
	direct    *pgxpool.Pool // for the tests' own checks
	bouncer   *pglocal.PgBouncer
	dbname    string
	logs      *logRecorder
	logger    *slog.Logger
}

func setup(t *testing.T) *testBundle {
	t.Helper()
	if _, err := pglocal.FindPgBouncer(); errors.Is(err, pglocal.ErrPgBouncerNotFound) {
		t.Skipf("skipping PgBouncer test: %v", err)
	} else if err != nil {
		t.Fatal(err)
	}
	url := pgtest.NewDatabase(t)
	cfg, err := pgconn.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	bouncer, err := pglocal.StartPgBouncer(ctx, &pglocal.PgBouncerOptions{
		Host:     cfg.Host,
		Port:     int(cfg.Port),
		User:     cfg.User,
		Password: cfg.Password,
		PoolMode: "transaction",
		PoolSize: poolSize,
		Logf:     t.Logf,
	})
	if err != nil {
		t.Fatalf("failed to start pgbouncer: %v", err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("pgbouncer log:\n%s", bouncer.Log())
		}
		if err := bouncer.Close(); err != nil {
			t.Error(err)
		}
	})
	logs := newLogRecorder(t)
	return &testBundle{
		directURL: url,
		direct:    pgtest.NewPool(t, url),
		bouncer:   bouncer,
		dbname:    cfg.Database,
		logs:      logs,
		logger:    slog.New(logs),
	}
}

// pooledURL is the database's URL through PgBouncer with pgx's query exec mode set: pgx's
// default mode prepares named statements, which PgBouncer before 1.21 cannot follow from one
// server connection to another.
func (b *testBundle) pooledURL(mode string) string {
	return b.bouncer.URL(b.dbname, "default_query_exec_mode="+mode)
}

// pooledPool opens a pool through PgBouncer with more connections than PgBouncer has server
// connections.
func (b *testBundle) pooledPool(t *testing.T, mode string, maxConns int32) *pgxpool.Pool {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(b.pooledURL(mode))
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxConns = maxConns
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// listening counts the connections of the database whose last statement was LISTEN.
func (b *testBundle) listening(t *testing.T) int {
	t.Helper()
	return queryInt(t, b.direct,
		"SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND query = 'LISTEN jobs_ready'")
}

type drainPayload struct {
	N int `json:"n"`
}

// drainRun is a client that records how often each job ran and when it started.
type drainRun struct {
	mu      sync.Mutex
	runs    map[int64]int
	started chan time.Time // the start of every job, for latency measurements
	total   atomic.Int64
}

func newDrainRun() *drainRun {
	return &drainRun{runs: make(map[int64]int), started: make(chan time.Time, 100)}
}

func (r *drainRun) handlers() *driver.Handlers {
	hs := driver.NewHandlers()
	driver.AddHandler(hs, "drain", func(ctx context.Context, job *driver.Job[drainPayload]) error {
		r.mu.Lock()
		r.runs[job.ID]++
		r.mu.Unlock()
		r.total.Add(1)
		select {
		case r.started <- time.Now():
		default: // nobody measures right now
		}
		return nil
	}, nil)
	return hs
}

// checkExactlyOnce verifies that each id ran exactly once and is done, and that nothing
// else ran.
func (r *drainRun) checkExactlyOnce(t *testing.T, b *testBundle, ids []int64) {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	want := make(map[int64]bool, len(ids))
	for _, id := range ids {
		want[id] = true
		if n := r.runs[id]; n != 1 {
			t.Errorf("job %d ran %d times, want 1", id, n)
		}
	}
	for id, n := range r.runs {
		if !want[id] {
			t.Errorf("job %d ran %d times, want never (it was not committed)", id, n)
		}
	}
	if n := queryInt(t, b.direct, "SELECT count(*) FROM jobs WHERE state = 'done' AND id = ANY($1)", ids); n != len(ids) {
		t.Errorf("%d of %d jobs done", n, len(ids))
	}
	if n := queryInt(t, b.direct, "SELECT count(*) FROM jobs WHERE state <> 'done'"); n != 0 {
		t.Errorf("%d jobs not done", n)
	}
}

// produce enqueues n jobs through pool in every way a producer can: single enqueues from
// several goroutines, EnqueueMany batches, and both inside a caller's transaction, plus a
// transaction that rolls back, whose jobs must never run. It returns the committed ids.
func produce(t *testing.T, pool *pgxpool.Pool, n int) []int64 {
	t.Helper()
	ctx := t.Context()
	var mu sync.Mutex
	var ids []int64
	add := func(more ...int64) {
		mu.Lock()
		ids = append(ids, more...)
		mu.Unlock()
	}
	params := func(k int) []driver.EnqueueParams {
		ps := make([]driver.EnqueueParams, k)
		for i := range ps {
			ps[i] = driver.EnqueueParams{Kind: "drain", Payload: drainPayload{N: i}}
		}
		return ps
	}
	quarter := n / 4

	// A transaction that rolls back: its jobs never exist.
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := driver.Enqueue(ctx, tx, "drain", drainPayload{N: -1}, nil); err != nil {
		t.Fatalf("Enqueue in tx: %v", err)
	}
	if _, err := driver.EnqueueMany(ctx, tx, params(10)); err != nil {
		t.Fatalf("EnqueueMany in tx: %v", err)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}

	var wg sync.WaitGroup
	errs := make(chan error, 16)
	// Single enqueues, autocommit, from 8 goroutines.
	for g := range 8 {
		wg.Go(func() {
			for i := g; i < quarter; i += 8 {
				id, err := driver.Enqueue(ctx, pool, "drain", drainPayload{N: i}, nil)
				if err != nil {
					errs <- fmt.Errorf("Enqueue: %w", err)
					return
				}
				add(id)
			}
		})
	}
	// EnqueueMany, autocommit, in batches of 100.
	wg.Go(func() {
		for done := 0; done < quarter; done += 100 {
			got, err := driver.EnqueueMany(ctx, pool, params(min(100, quarter-done)))
			if err != nil {
				errs <- fmt.Errorf("EnqueueMany: %w", err)
				return
			}
			add(got...)
		}
	})
	// Single enqueues and EnqueueMany inside caller transactions, 50 jobs per transaction.
	wg.Go(func() {
		for done := 0; done < n-3*quarter; done += 50 {
			k := min(50, n-3*quarter-done)
			err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
				var got []int64
				for i := range k / 2 {
					id, err := driver.Enqueue(ctx, tx, "drain", drainPayload{N: i}, nil)
					if err != nil {
						return fmt.Errorf("Enqueue in tx: %w", err)
					}
					got = append(got, id)
				}
				more, err := driver.EnqueueMany(ctx, tx, params(k-k/2))
				if err != nil {
					return fmt.Errorf("EnqueueMany in tx: %w", err)
				}
				add(append(got, more...)...)
				return nil
			})
			if err != nil {
				errs <- err
				return
			}
		}
	})
	// The rest: EnqueueMany in transactions of 4 batches.
	wg.Go(func() {
		for done := 0; done < quarter; done += 200 {
			k := min(200, quarter-done)
			err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
				var got []int64
				for part := 0; part < k; part += 50 {
					more, err := driver.EnqueueMany(ctx, tx, params(min(50, k-part)))
					if err != nil {
						return fmt.Errorf("EnqueueMany in tx: %w", err)
					}
					got = append(got, more...)
				}
				add(got...)
				return nil
			})
			if err != nil {
				errs <- err
				return
			}
		}
	})
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if len(ids) != n {
		t.Fatalf("enqueued %d jobs, want %d", len(ids), n)
	}
	return ids
}

// startClient runs a client until the test ends and fails the test if Run returns an error.
func startClient(t *testing.T, pool *pgxpool.Pool, cfg *driver.Config) {
	t.Helper()
	client, err := driver.NewClient(pool, cfg)
	if err != nil {
		t.Fatalf("NewClient: %v", err)
	}
	runErr := make(chan error, 1)
	go func() { runErr <- client.Run(context.Background()) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := client.Stop(ctx); err != nil {
			t.Errorf("Stop: %v", err)
		}
		if err := <-runErr; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
}

// drain runs the producers while the client works, waits until every job is done and
// checks that PostgreSQL never saw more connections than PgBouncer's pool and the
// listener: the claims and completions went through PgBouncer.
func drain(t *testing.T, b *testBundle, pool *pgxpool.Pool, run *drainRun, n, listeners int) []int64 {
	t.Helper()
	var maxConns atomic.Int64
	stopSampling := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		for {
			var c int64
			err := b.direct.QueryRow(context.Background(),
				"SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND backend_type = 'client backend' AND pid <> pg_backend_pid()").Scan(&c)
			if err == nil && c > maxConns.Load() {
				maxConns.Store(c)
			}
			select {
			case <-stopSampling:
				return
			case <-tick.C:
			}
		}
	}()
	began := time.Now()
	ids := produce(t, pool, n)
	pgtest.WaitFor(t, time.Minute, fmt.Sprintf("%d jobs done", n), func() bool {
		return queryInt(t, b.direct, "SELECT count(*) FROM jobs WHERE state = 'done'") == n
	})
	close(stopSampling)
	<-sampled
	t.Logf("%d jobs enqueued and drained through PgBouncer in %s; at most %d server connections",
		n, time.Since(began).Round(time.Millisecond), maxConns.Load())
	// PgBouncer's server connections and the listener; the sampler leaves out its own
	// connection, but the test's other queries on b.direct may hold one more.
	if limit := int64(poolSize + listeners + 1); maxConns.Load() > limit {
		t.Errorf("PostgreSQL saw %d connections to the database, want at most %d: something bypassed PgBouncer",
			maxConns.Load(), limit)
	}
	// Completions are batched and sent after the job's handler returned: wait for the
	// handlers' count to match, then check exactly-once.
	pgtest.WaitFor(t, 10*time.Second, "every handler returned", func() bool { return run.total.Load() >= int64(n) })
	run.checkExactlyOnce(t, b, ids)
	return ids
}

// idleLatency enqueues jobs one at a time into an idle client and returns the median time
// from the enqueue's commit to the handler's start.
func idleLatency(t *testing.T, pool *pgxpool.Pool, run *drainRun, n int) time.Duration {
	t.Helper()
	// Drop starts recorded before measuring.
	for len(run.started) > 0 {
		<-run.started
	}
	lat := make([]time.Duration, 0, n)
	for range n {
		time.Sleep(5 * time.Millisecond) // idle again: past the fetch cooldown
		if _, err := driver.Enqueue(t.Context(), pool, "drain", drainPayload{}, nil); err != nil {
			t.Fatal(err)
		}
		committed := time.Now() // autocommit: the statement's return is the commit
		select {
		case at := <-run.started:
			lat = append(lat, at.Sub(committed))
		case <-time.After(10 * time.Second):
			t.Fatal("job not started within 10s")
		}
	}
	slices.Sort(lat)
	t.Logf("idle latency, enqueue commit -> handler start, %d jobs: p50 %s, max %s", n, lat[n/2], lat[n-1])
	return lat[n/2]
}

// A client whose pool goes through PgBouncer in transaction mode, with a direct listener,
// runs every job enqueued through PgBouncer exactly once (single and batch enqueues, in
// autocommit and in caller transactions; a rolled-back transaction's jobs never), and an
// idle client starts a job within milliseconds: LISTEN works on the direct connection.
func TestDirectListener(t *testing.T) {
	t.Parallel()
	b := setup(t)
	pool := b.pooledPool(t, "exec", 20)
	run := newDrainRun()
	startClient(t, pool, &driver.Config{
		Queues:       map[string]driver.QueueConfig{driver.QueueDefault: {Slots: 50}},
		Handlers:     run.handlers(),
		ListenerURL:  b.directURL,
		PollInterval: 10 * time.Second, // only a notification explains a prompt start
		Lease:        time.Minute,
		Logger:       b.logger,
	})
	pgtest.WaitFor(t, 10*time.Second, "the client listening", func() bool {
		return b.logs.has(slog.LevelInfo, "listening for wake-ups on jobs_ready", "listener", "Config.ListenerURL")
	})
	if n := b.listening(t); n != 1 {
		t.Fatalf("%d connections listening on the server, want 1", n)
	}

	const n = 2000
	drain(t, b, pool, run, n, 1)
	if p50 := idleLatency(t, pool, run, 50); p50 > 100*time.Millisecond {
		t.Errorf("p50 latency %s, want < 100ms: LISTEN should wake the client", p50)
	}
	if b.logs.hasMessage("LISTEN disabled") {
		t.Error("the client logged that LISTEN is disabled")
	}
}

// A ListenerURL through a PgBouncer in session mode is trusted: the client warns that its
// LISTEN connection goes through a pooler, listens anyway, and is woken by notifications,
// since session mode keeps one server connection per client.
func TestSessionModeListener(t *testing.T) {
	t.Parallel()
	b := setup(t)
	cfg, err := pgconn.ParseConfig(b.directURL)
	if err != nil {
		t.Fatal(err)
	}
	session, err := pglocal.StartPgBouncer(t.Context(), &pglocal.PgBouncerOptions{
		Host: cfg.Host, Port: int(cfg.Port), User: cfg.User, Password: cfg.Password,
		PoolMode: "session", Logf: t.Logf,
	})
	if err != nil {
		t.Fatalf("failed to start pgbouncer: %v", err)
	}
	t.Cleanup(func() {
		if err := session.Close(); err != nil {
			t.Error(err)
		}
	})
	pool := b.pooledPool(t, "exec", 10)
	run := newDrainRun()
	startClient(t, pool, &driver.Config{
		Queues:       map[string]driver.QueueConfig{driver.QueueDefault: {}},
		Handlers:     run.handlers(),
		ListenerURL:  session.URL(b.dbname),
		PollInterval: 10 * time.Second,
		Logger:       b.logger,
	})
	pgtest.WaitFor(t, 10*time.Second, "the client listening", func() bool {
		return b.logs.has(slog.LevelInfo, "listening for wake-ups on jobs_ready", "listener", "Config.ListenerURL")
	})
	if !b.logs.hasMessage("the LISTEN connection (Config.ListenerURL) goes through a connection pooler") {
		t.Errorf("no warning that the listener goes through a pooler:\n%s", b.logs.dump())
	}
	if p50 := idleLatency(t, pool, run, 20); p50 > 100*time.Millisecond {
		t.Errorf("p50 latency %s, want < 100ms: LISTEN should wake the client", p50)
	}
}

// Without ListenerURL, a client whose pool goes through PgBouncer notices that its LISTEN
// connection would go through the pooler, says so in a warning, never listens, and runs
// every job by polling.
func TestPollingFallback(t *testing.T) {
	t.Parallel()
	b := setup(t)
	pool := b.pooledPool(t, "exec", 20)
	run := newDrainRun()
	const pollInterval = 50 * time.Millisecond
	startClient(t, pool, &driver.Config{
		Queues:       map[string]driver.QueueConfig{driver.QueueDefault: {Slots: 50}},
		Handlers:     run.handlers(),
		PollInterval: pollInterval,
		Lease:        time.Minute,
		Logger:       b.logger,
	})
	pgtest.WaitFor(t, 10*time.Second, "the polling warning", func() bool {
		return b.logs.has(slog.LevelWarn, "LISTEN disabled: polling every 50ms", "poll_interval", pollInterval.String())
	})
	if !b.logs.hasAttrContaining("LISTEN disabled: polling every 50ms", "reason", "connection pooler") {
		t.Errorf("the polling warning does not say the pool goes through a pooler:\n%s", b.logs.dump())
	}

	const n = 2000
	drain(t, b, pool, run, n, 0)
	if n := b.listening(t); n != 0 {
		t.Errorf("%d connections listening, want 0", n)
	}
	if b.logs.hasMessage("listening for wake-ups on jobs_ready") {
		t.Error("the client logged that it listens")
	}
	// Polling only: a job waits for the next poll, half a poll interval on average.
	if p50 := idleLatency(t, pool, run, 20); p50 > 10*pollInterval {
		t.Errorf("p50 latency %s, want about half the poll interval (%s)", p50, pollInterval)
	}
}

// DisableListen turns LISTEN off on purpose: the client says so at Info level and polls.
func TestDisableListen(t *testing.T) {
	t.Parallel()
	b := setup(t)
	pool := b.pooledPool(t, "exec", 10)
	run := newDrainRun()
	startClient(t, pool, &driver.Config{
		Queues:        map[string]driver.QueueConfig{driver.QueueDefault: {}},
		Handlers:      run.handlers(),
		DisableListen: true,
		PollInterval:  20 * time.Millisecond,
		Logger:        b.logger,
	})
	pgtest.WaitFor(t, 10*time.Second, "the polling message", func() bool {
		return b.logs.has(slog.LevelInfo, "LISTEN disabled: polling every 20ms", "reason", "Config.DisableListen is set")
	})
	drain(t, b, pool, run, 200, 0)
	if n := b.listening(t); n != 0 {
		t.Errorf("%d connections listening, want 0", n)
	}
}

// Every statement the driver sends works through PgBouncer: failures (with backoff and with
// RetryAt), snoozes, cancellations, heartbeats of a job that outlives its lease, and
// CompleteTx in the handler's own transaction.
func TestOutcomes(t *testing.T) {
	t.Parallel()
	b := setup(t)
	pool := b.pooledPool(t, "exec", 10)
	ctx := t.Context()
	mustExec(t, b.direct, "UPDATE jobs_settings SET backoff_base = interval '10 milliseconds'")
	mustExec(t, b.direct, "CREATE TABLE effects (job_id bigint PRIMARY KEY)")
	mustExec(t, b.direct, "GRANT ALL ON effects TO PUBLIC")

	const lease = time.Second
	var lostLease atomic.Bool
	hs := driver.NewHandlers()
	type none struct{}
	driver.AddHandler(hs, "fail_once", func(ctx context.Context, job *driver.Job[none]) error {
		if job.Attempt == 1 {
			return errors.New("first attempt fails")
		}
		return nil
	}, nil)
	driver.AddHandler(hs, "retry_at", func(ctx context.Context, job *driver.Job[none]) error {
		if job.Attempt == 1 {
			return driver.RetryAt(time.Now())
		}
		return nil
	}, nil)
	driver.AddHandler(hs, "snooze_once", func(ctx context.Context, job *driver.Job[none]) error {
		if job.Attempt == 1 {
			return driver.Snooze(10 * time.Millisecond)
		}
		return nil
	}, nil)
	driver.AddHandler(hs, "cancel", func(ctx context.Context, job *driver.Job[none]) error {
		return driver.Cancel(errors.New("not wanted"))
	}, nil)
	driver.AddHandler(hs, "slow", func(ctx context.Context, job *driver.Job[none]) error {
		select {
		case <-ctx.Done():
			lostLease.Store(true)
			return context.Cause(ctx)
		case <-time.After(3 * lease):
			return nil
		}
	}, nil)
	driver.AddHandler(hs, "in_tx", func(ctx context.Context, job *driver.Job[none]) error {
		return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, "INSERT INTO effects (job_id) VALUES ($1)", job.ID); err != nil {
				return err
			}
			return driver.CompleteTx(ctx, tx, job)
		})
	}, nil)
	startClient(t, pool, &driver.Config{
		Queues:          map[string]driver.QueueConfig{driver.QueueDefault: {}},
		Handlers:        hs,
		ListenerURL:     b.directURL,
		Lease:           lease,
		PollInterval:    100 * time.Millisecond,
		RequeueInterval: 100 * time.Millisecond,
		Logger:          b.logger,
	})

	want := map[string]string{ // kind -> final state
		"fail_once": "done", "retry_at": "done", "snooze_once": "done",
		"cancel": "cancelled", "slow": "done", "in_tx": "done",
	}
	ids := make(map[string]int64)
	for kind := range want {
		id, err := driver.Enqueue(ctx, pool, kind, none{}, nil)
		if err != nil {
			t.Fatal(err)
		}
		ids[kind] = id
	}
	pgtest.WaitFor(t, 30*time.Second, "every job finished", func() bool {
		return queryInt(t, b.direct, "SELECT count(*) FROM jobs WHERE finished_at IS NOT NULL") == len(want)
	})
	for kind, state := range want {
		var got string
		var attempts int
		if err := b.direct.QueryRow(ctx, "SELECT state::text, attempts FROM jobs WHERE id = $1", ids[kind]).Scan(&got, &attempts); err != nil {
			t.Fatal(err)
		}
		wantAttempts := map[string]int{"fail_once": 2, "retry_at": 2, "snooze_once": 2}[kind]
		if wantAttempts == 0 {
			wantAttempts = 1
		}
		if got != state || attempts != wantAttempts {
			t.Errorf("%s: state %s after %d attempts, want %s after %d", kind, got, attempts, state, wantAttempts)
		}
	}
	if lostLease.Load() {
		t.Error("the slow job lost its lease: heartbeats did not get through")
	}
	if n := queryInt(t, b.direct, "SELECT count(*) FROM effects WHERE job_id = $1", ids["in_tx"]); n != 1 {
		t.Errorf("in_tx: %d effects, want 1", n)
	}
}

// The SQL functions need no session state: called one statement at a time through PgBouncer
// in transaction mode, from more clients than it has server connections, every job is
// claimed exactly once and completed, failed and heartbeated as on a direct connection,
// in each of pgx's query exec modes that do not use named prepared statements.
func TestSQLFunctions(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for _, mode := range []string{"exec", "cache_describe", "simple_protocol"} {
		t.Run(mode, func(t *testing.T) {
			pool := b.pooledPool(t, mode, 16)
			ctx := t.Context()
			mustExec(t, b.direct, "DELETE FROM jobs")
			const n = 600
			var ids []int64
			rows, err := pool.Query(ctx, "SELECT jobs_enqueue_many(array_fill('sql'::text, ARRAY[$1::int]), NULL)", n)
			if err != nil {
				t.Fatal(err)
			}
			ids, err = pgx.CollectRows(rows, pgx.RowTo[int64])
			if err != nil {
				t.Fatal(err)
			}
			if len(ids) != n {
				t.Fatalf("jobs_enqueue_many returned %d ids, want %d", len(ids), n)
			}

			// 12 workers claim batches of 7 and treat them in turn: heartbeat, then
			// complete_many for most, fail for every fifth, complete for every seventh.
			var mu sync.Mutex
			claimed := make(map[int64]int)
			var wg sync.WaitGroup
			errs := make(chan error, 12)
			for w := range 12 {
				wg.Go(func() {
					worker := fmt.Sprintf("w%d", w)
					for {
						rows, err := pool.Query(ctx, "SELECT id, attempt FROM jobs_claim($1, 7, NULL, interval '1 minute')", worker)
						if err != nil {
							errs <- fmt.Errorf("jobs_claim: %w", err)
							return
						}
						type claim struct {
							ID      int64
							Attempt int32
						}
						got, err := pgx.CollectRows(rows, pgx.RowToStructByPos[claim])
						if err != nil {
							errs <- fmt.Errorf("jobs_claim: %w", err)
							return
						}
						if len(got) == 0 {
							return
						}
						var doneIDs []int64
						var doneAttempts []int32
						for _, c := range got {
							mu.Lock()
							claimed[c.ID]++
							mu.Unlock()
							var held bool
							if err := pool.QueryRow(ctx, "SELECT jobs_heartbeat($1, $2, interval '2 minutes')", c.ID, c.Attempt).Scan(&held); err != nil || !held {
								errs <- fmt.Errorf("jobs_heartbeat(%d): held %v, %v", c.ID, held, err)
								return
							}
							switch {
							case c.ID%5 == 0:
								var state string
								if err := pool.QueryRow(ctx, "SELECT jobs_fail($1, $2, 'boom', now() + interval '1 hour')::text", c.ID, c.Attempt).Scan(&state); err != nil || state != "queued" {
									errs <- fmt.Errorf("jobs_fail(%d): state %q, %v", c.ID, state, err)
									return
								}
							case c.ID%7 == 0:
								var ok bool
								if err := pool.QueryRow(ctx, "SELECT jobs_complete($1, $2)", c.ID, c.Attempt).Scan(&ok); err != nil || !ok {
									errs <- fmt.Errorf("jobs_complete(%d): %v, %v", c.ID, ok, err)
									return
								}
							default:
								doneIDs = append(doneIDs, c.ID)
								doneAttempts = append(doneAttempts, c.Attempt)
							}
						}
						if len(doneIDs) == 0 {
							continue
						}
						var beat []int64
						rows, err = pool.Query(ctx, "SELECT id FROM jobs_heartbeat_many($1, $2, interval '2 minutes') AS t(id)", doneIDs, doneAttempts)
						if err == nil {
							beat, err = pgx.CollectRows(rows, pgx.RowTo[int64])
						}
						if err != nil || len(beat) != len(doneIDs) {
							errs <- fmt.Errorf("jobs_heartbeat_many: %d of %d held, %v", len(beat), len(doneIDs), err)
							return
						}
						var completed []int64
						rows, err = pool.Query(ctx, "SELECT id FROM jobs_complete_many($1, $2) AS t(id)", doneIDs, doneAttempts)
						if err == nil {
							completed, err = pgx.CollectRows(rows, pgx.RowTo[int64])
						}
						if err != nil || len(completed) != len(doneIDs) {
							errs <- fmt.Errorf("jobs_complete_many: %d of %d completed, %v", len(completed), len(doneIDs), err)
							return
						}
					}
				})
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Error(err)
			}
			if t.Failed() {
				return
			}
			for _, id := range ids {
				if claimed[id] != 1 {
					t.Errorf("job %d claimed %d times, want 1", id, claimed[id])
				}
			}
			var failed, done, other int
			if err := b.direct.QueryRow(ctx, `SELECT
				count(*) FILTER (WHERE state = 'queued' AND attempts = 1 AND last_error = 'boom' AND id % 5 = 0),
				count(*) FILTER (WHERE state = 'done' AND attempts = 1 AND id % 5 <> 0),
				count(*) FILTER (WHERE NOT ((state = 'queued' AND id % 5 = 0) OR (state = 'done' AND id % 5 <> 0)))
				FROM jobs`).Scan(&failed, &done, &other); err != nil {
				t.Fatal(err)
			}
			if failed+done != n || other != 0 {
				t.Errorf("%d failed and %d done of %d, %d in an unexpected state", failed, done, n, other)
			}

			// A stale attempt is fenced out through the pooler as well.
			var ok bool
			if err := pool.QueryRow(ctx, "SELECT jobs_complete($1, 99)", ids[0]).Scan(&ok); err != nil || ok {
				t.Errorf("jobs_complete with a stale attempt: %v, %v; want false", ok, err)
			}
		})
	}
}

// A caller transaction through PgBouncer keeps its server connection to the end: the job
// enqueued in it and the caller's own write commit or roll back together, and the
// notification is sent at commit only.
func TestCallerTransaction(t *testing.T) {
	t.Parallel()
	b := setup(t)
	pool := b.pooledPool(t, "exec", 10)
	ctx := t.Context()
	mustExec(t, b.direct, "CREATE TABLE accounts (email text PRIMARY KEY)")
	mustExec(t, b.direct, "GRANT ALL ON accounts TO PUBLIC")

	listener := pgtest.NewConn(t, b.directURL)
	if _, err := listener.Exec(ctx, "LISTEN jobs_ready"); err != nil {
		t.Fatal(err)
	}
	for _, commit := range []bool{false, true} {
		tx, err := pool.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tx.Exec(ctx, "INSERT INTO accounts (email) VALUES ($1)", fmt.Sprintf("a%v@example.com", commit)); err != nil {
			t.Fatal(err)
		}
		id, err := driver.Enqueue(ctx, tx, "welcome", map[string]bool{"commit": commit}, &driver.EnqueueOpts{Queue: "mail"})
		if err != nil {
			t.Fatal(err)
		}
		// Other clients keep PgBouncer's other server connections busy meanwhile.
		for range 20 {
			if _, err := driver.Enqueue(ctx, pool, "other", nil, &driver.EnqueueOpts{Queue: "other"}); err != nil {
				t.Fatal(err)
			}
		}
		if commit {
			err = tx.Commit(ctx)
		} else {
			err = tx.Rollback(ctx)
		}
		if err != nil {
			t.Fatal(err)
		}
		jobs := queryInt(t, b.direct, "SELECT count(*) FROM jobs WHERE id = $1", id)
		accounts := queryInt(t, b.direct, "SELECT count(*) FROM accounts WHERE email = $1", fmt.Sprintf("a%v@example.com", commit))
		if want := map[bool]int{false: 0, true: 1}[commit]; jobs != want || accounts != want {
			t.Errorf("commit=%v: %d jobs and %d accounts, want %d of each", commit, jobs, accounts, want)
		}
	}
	// The notifications seen: "other" at each autocommit enqueue, "mail" once, for the
	// committed transaction.
	mail := 0
	for {
		wctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
		note, err := listener.WaitForNotification(wctx)
		cancel()
		if errors.Is(err, context.DeadlineExceeded) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if note.Payload == "mail" {
			mail++
		}
	}
	if mail != 1 {
		t.Errorf("%d notifications for queue mail, want 1 (the committed transaction's)", mail)
	}
}

func mustExec(t *testing.T, db *pgxpool.Pool, sql string, args ...any) {
	t.Helper()
	pgtest.MustExec(t, db, sql, args...)
}

func queryInt(t *testing.T, db *pgxpool.Pool, sql string, args ...any) int {
	t.Helper()
	return pgtest.QueryOne[int](t, db, sql, args...)
}

// logRecorder is a slog.Handler that keeps every record for assertions and writes it to
// the test's log until the test's cleanups start.
type logRecorder struct {
	shared *logShared
	attrs  []slog.Attr
	text   slog.Handler
}

type logShared struct {
	mu      sync.Mutex
	t       *testing.T
	done    bool
	records []logRecord
}

type logRecord struct {
	level slog.Level
	msg   string
	attrs map[string]string
}

func newLogRecorder(t *testing.T) *logRecorder {
	s := &logShared{t: t}
	t.Cleanup(func() {
		s.mu.Lock()
		s.done = true
		s.mu.Unlock()
	})
	return &logRecorder{shared: s, text: slog.NewTextHandler(logWriter{s}, nil)}
}

type logWriter struct{ s *logShared }

func (w logWriter) Write(p []byte) (int, error) {
	w.s.mu.Lock()
	defer w.s.mu.Unlock()
	if !w.s.done {
		w.s.t.Log(strings.TrimSpace(string(p)))
	}
	return len(p), nil
}

func (h *logRecorder) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelInfo }

func (h *logRecorder) Handle(ctx context.Context, r slog.Record) error {
	rec := logRecord{level: r.Level, msg: r.Message, attrs: make(map[string]string)}
	for _, a := range h.attrs {
		rec.attrs[a.Key] = a.Value.String()
	}
	r.Attrs(func(a slog.Attr) bool {
		rec.attrs[a.Key] = a.Value.String()
		return true
	})
	h.shared.mu.Lock()
	h.shared.records = append(h.shared.records, rec)
	h.shared.mu.Unlock()
	return h.text.Handle(ctx, r)
}

func (h *logRecorder) WithAttrs(as []slog.Attr) slog.Handler {
	return &logRecorder{shared: h.shared, attrs: append(slices.Clip(h.attrs), as...), text: h.text.WithAttrs(as)}
}

func (h *logRecorder) WithGroup(name string) slog.Handler {
	return &logRecorder{shared: h.shared, attrs: h.attrs, text: h.text.WithGroup(name)}
}

// has reports whether a record with this level and message, and attribute key = value,
// was logged.
func (h *logRecorder) has(level slog.Level, msg, key, value string) bool {
	return h.find(func(r logRecord) bool { return r.level == level && r.msg == msg && r.attrs[key] == value })
}

func (h *logRecorder) hasAttrContaining(msg, key, part string) bool {
	return h.find(func(r logRecord) bool { return r.msg == msg && strings.Contains(r.attrs[key], part) })
}

func (h *logRecorder) hasMessage(prefix string) bool {
	return h.find(func(r logRecord) bool { return strings.HasPrefix(r.msg, prefix) })
}

func (h *logRecorder) find(match func(logRecord) bool) bool {
	h.shared.mu.Lock()
	defer h.shared.mu.Unlock()
	return slices.ContainsFunc(h.shared.records, match)
}

func (h *logRecorder) dump() string {
	h.shared.mu.Lock()
	defer h.shared.mu.Unlock()
	var sb strings.Builder
	for _, r := range h.shared.records {
		fmt.Fprintf(&sb, "%s %q %v\n", r.level, r.msg, r.attrs)
	}
	return sb.String()
}
