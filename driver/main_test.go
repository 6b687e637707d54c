package driver_test

import (
	"context"
	"log/slog"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/skiplock/skiplock/driver"
	"github.com/skiplock/skiplock/tests/pgtest"
)

func TestMain(m *testing.M) {
	// Crash tests re-execute this binary as worker processes.
	if mode := os.Getenv(helperModeEnv); mode != "" {
		os.Exit(runHelper(mode))
	}
	pgtest.Main(m)
}

// testBundle is what most tests need: a fresh database with skiplock installed, a pool on
// it and a logger that writes to the test's log.
type testBundle struct {
	url    string
	pool   *pgxpool.Pool
	logger *slog.Logger
}

func setup(t *testing.T) *testBundle {
	t.Helper()
	url := pgtest.NewDatabase(t)
	return &testBundle{url: url, pool: newPool(t, url, 20), logger: testLogger(t)}
}

func newPool(t testing.TB, url string, maxConns int32) *pgxpool.Pool {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(url)
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

// testLogger logs to t until the test ends; client goroutines may log later.
func testLogger(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(pgtest.NewLogWriter(t), &slog.HandlerOptions{Level: slog.LevelInfo}))
}

// startClient runs a client until the test ends, and fails the test if Run returns an error.
func startClient(t testing.TB, pool *pgxpool.Pool, cfg *driver.Config) *driver.Client {
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
	return client
}

// waitUntil polls cond every 10ms until it is true, failing the test after timeout.
func waitUntil(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	pgtest.WaitFor(t, timeout, what, cond)
}

// jobInfo is a job's row, read directly for assertions.
type jobInfo struct {
	State          string
	Attempts       int
	MaxAttempts    int
	RunAt          time.Time
	LeaseHolder    *string
	LeaseExpiresAt *time.Time
	LastError      *string
	Errors         []map[string]any
}

func getJob(t testing.TB, db driver.Executor, id int64) jobInfo {
	t.Helper()
	var j jobInfo
	err := db.QueryRow(context.Background(),
		`SELECT state::text, attempts, max_attempts, run_at, lease_holder, lease_expires_at, last_error, errors
		 FROM jobs WHERE id = $1`, id).
		Scan(&j.State, &j.Attempts, &j.MaxAttempts, &j.RunAt, &j.LeaseHolder, &j.LeaseExpiresAt, &j.LastError, &j.Errors)
	if err != nil {
		t.Fatalf("failed to read job %d: %v", id, err)
	}
	return j
}

func jobStateIs(t testing.TB, db driver.Executor, id int64, state string) func() bool {
	return func() bool { return getJob(t, db, id).State == state }
}

func queryInt(t testing.TB, db driver.Executor, sql string, args ...any) int {
	t.Helper()
	return pgtest.QueryOne[int](t, db, sql, args...)
}

func mustEnqueue(t testing.TB, db driver.Executor, kind string, payload any, opts *driver.EnqueueOpts) int64 {
	t.Helper()
	id, err := driver.Enqueue(context.Background(), db, kind, payload, opts)
	if err != nil {
		t.Fatalf("Enqueue: %v", err)
	}
	return id
}

// eventRecorder is a Hook that keeps every event.
type eventRecorder struct {
	mu     sync.Mutex
	events []driver.Event
}

func (r *eventRecorder) HandleEvent(e *driver.Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	ev := *e
	row := *e.Job
	ev.Job = &row
	r.events = append(r.events, ev)
}

// kinds lists the event kinds of job id, in order.
func (r *eventRecorder) kinds(id int64) []driver.EventKind {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []driver.EventKind
	for _, e := range r.events {
		if e.Job.ID == id {
			out = append(out, e.Kind)
		}
	}
	return out
}

func (r *eventRecorder) find(id int64, kind driver.EventKind) (driver.Event, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, e := range r.events {
		if e.Job.ID == id && e.Kind == kind {
			return e, true
		}
	}
	return driver.Event{}, false
}

// baseConfig is a client configuration with short timings for tests.
func baseConfig(b *testBundle, handlers *driver.Handlers, queues map[string]driver.QueueConfig) *driver.Config {
	return &driver.Config{
		Queues:          queues,
		Handlers:        handlers,
		Lease:           2 * time.Second,
		PollInterval:    200 * time.Millisecond,
		RequeueInterval: 200 * time.Millisecond,
		ShutdownTimeout: 5 * time.Second,
		Logger:          b.logger,
	}
}

// setBackoff makes retries of failed jobs fast in b's database.
func setBackoff(t testing.TB, db driver.Executor, base string) {
	t.Helper()
	if _, err := db.Exec(context.Background(),
		"UPDATE jobs_settings SET backoff_base = $1::interval, backoff_cap = greatest(backoff_cap, $1::interval)", base); err != nil {
		t.Fatal(err)
	}
}
