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

// skipIfShort skips a test under -short: each test starts a PgBouncer of its own and runs
// clients through it for seconds.
func skipIfShort(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("-short: PgBouncer suites run in the full suite only")
	}
}
