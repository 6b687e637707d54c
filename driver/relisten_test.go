package driver_test

import (
	"context"
	"testing"
	"time"

	"github.com/skiplock/skiplock"
	"github.com/skiplock/skiplock/driver"
	"github.com/skiplock/skiplock/internal/pglocal"
	"github.com/skiplock/skiplock/tests/pgtest"
)

// The chaos suite (tests/chaos, internal/chaos) kills worker processes, terminates their
// backends and restarts PostgreSQL fast and immediate, and checks that no job is lost or
// done twice and that every worker's LISTEN connection comes back. Its workers poll every
// second, though, so a client that reconnected without listening would still pass it.
// The tests here are what it does not cover: with a 10 s poll interval, only a notification
// received on the new LISTEN connection explains a job started within 3 s.

// listenerPID is the pid of the backend LISTENing on jobs_ready in the current database,
// or 0 when there is none.
func listenerPID(t *testing.T, db driver.Executor) int {
	t.Helper()
	return queryInt(t, db, `SELECT coalesce(max(pid), 0) FROM pg_stat_activity
		WHERE datname = current_database() AND query = 'LISTEN jobs_ready'`)
}

// startPingClient starts a client that polls only every 10 s and whose "ping" handler
// sends on the returned channel.
func startPingClient(t *testing.T, b *testBundle) <-chan struct{} {
	t.Helper()
	pinged := make(chan struct{}, 1)
	hs := driver.NewHandlers()
	driver.AddHandler(hs, "ping", func(ctx context.Context, job *driver.Job[struct{}]) error {
		select {
		case pinged <- struct{}{}:
		default:
		}
		return nil
	}, nil)
	cfg := baseConfig(b, hs, map[string]driver.QueueConfig{"default": {Slots: 4}})
	cfg.PollInterval = 10 * time.Second // only a notification starts a job promptly
	startClient(t, b.pool, cfg)
	return pinged
}

// requireRelistened waits for a LISTEN backend other than old, then enqueues a ping job
// and requires it to start within 3 s.
func requireRelistened(t *testing.T, db driver.Executor, old int, pinged <-chan struct{}) {
	t.Helper()
	waitUntil(t, 20*time.Second, "the client listening on a new connection", func() bool {
		pid := listenerPID(t, db)
		return pid != 0 && pid != old
	})
	mustEnqueue(t, db, "ping", nil, nil)
	select {
	case <-pinged:
	case <-time.After(3 * time.Second):
		t.Fatal("the ping job did not start within 3s: the client reconnected but is not listening")
	}
}

// TestRelistenAfterConnectionsTerminated: after pg_terminate_backend ends every connection
// of a client (pool and LISTEN connection), the client listens again.
func TestRelistenAfterConnectionsTerminated(t *testing.T) {
	t.Parallel()
	b := setup(t)
	pinged := startPingClient(t, b)
	killer := pgtest.NewConn(t, b.url)
	waitUntil(t, 10*time.Second, "the client listening", func() bool { return listenerPID(t, killer) != 0 })
	old := listenerPID(t, killer)

	for round := range 2 {
		terminated := queryInt(t, killer, `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
			WHERE datname = current_database() AND pid <> pg_backend_pid() AND backend_type = 'client backend'`)
		if terminated == 0 {
			t.Fatalf("round %d: no backend to terminate", round+1)
		}
		requireRelistened(t, killer, old, pinged)
		old = listenerPID(t, killer)
	}
}

// TestRelistenAfterServerRestart: after a fast and then an immediate (crash) restart of
// PostgreSQL, the client reconnects and listens again.
func TestRelistenAfterServerRestart(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: restarts a private PostgreSQL cluster twice")
	}
	t.Parallel()
	srv := pgtest.NewServer(t)
	ctx := context.Background()
	admin := pgtest.NewConn(t, srv.URL())
	if _, err := admin.Exec(ctx, "CREATE DATABASE restart"); err != nil {
		t.Fatal(err)
	}
	url := srv.URLFor("restart")
	mconn := pgtest.NewConn(t, url)
	if err := skiplock.Migrate(ctx, mconn, nil); err != nil {
		t.Fatal(err)
	}
	_ = mconn.Close(ctx)
	b := &testBundle{url: url, pool: newPool(t, url, 8), logger: testLogger(t)}
	pinged := startPingClient(t, b)
	waitUntil(t, 10*time.Second, "the client listening", func() bool { return listenerPID(t, b.pool) != 0 })

	// The checks use a connection opened after each restart: the restart ends every
	// session, the pool's included.
	check := pgtest.NewConn(t, url)
	for _, mode := range []pglocal.StopMode{pglocal.StopFast, pglocal.StopImmediate} {
		old := listenerPID(t, check)
		if err := srv.Restart(ctx, mode); err != nil {
			t.Fatal(err)
		}
		check = pgtest.NewConn(t, url)
		requireRelistened(t, check, old, pinged)
	}
}
