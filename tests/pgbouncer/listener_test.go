package pgbouncer_test

import (
	"log/slog"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/skiplock/skiplock/driver"
	"github.com/skiplock/skiplock/internal/pglocal"
	"github.com/skiplock/skiplock/tests/pgtest"
)

// A client whose pool goes through PgBouncer in transaction mode, with a direct listener,
// runs every job enqueued through PgBouncer exactly once (single and batch enqueues, in
// autocommit and in caller transactions; a rolled-back transaction's jobs never), and an
// idle client starts a job within milliseconds: LISTEN works on the direct connection.
func TestDirectListener(t *testing.T) {
	skipIfShort(t)
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
	skipIfShort(t)
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
	skipIfShort(t)
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
	skipIfShort(t)
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
