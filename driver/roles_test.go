package driver_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/skiplock/skiplock/driver"
)

// The driver needs no more than the jobs_worker role to work jobs and jobs_producer to
// enqueue them: every outcome (complete in a batch and in the handler's transaction, fail,
// snooze, cancel, heartbeat, requeue) goes through functions those roles may call.
func TestLeastPrivilegeRoles(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	var exists bool
	if err := b.pool.QueryRow(ctx, "SELECT count(*) = 2 FROM pg_roles WHERE rolname IN ('jobs_worker', 'jobs_producer')").Scan(&exists); err != nil || !exists {
		t.Skipf("the jobs_worker and jobs_producer roles are not installed (%v)", err)
	}
	pool, err := loginPool(t, b, "driver_app_", " IN ROLE jobs_worker, jobs_producer", 8)
	if err != nil {
		t.Fatal(err)
	}

	hs := driver.NewHandlers()
	driver.AddHandler(hs, "ok", func(ctx context.Context, job *driver.Job[struct{}]) error { return nil }, nil)
	driver.AddHandler(hs, "tx", func(ctx context.Context, job *driver.Job[struct{}]) error {
		return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error { return driver.CompleteTx(ctx, tx, job) })
	}, nil)
	driver.AddHandler(hs, "fail", func(ctx context.Context, job *driver.Job[struct{}]) error { return errors.New("no") }, nil)
	driver.AddHandler(hs, "snooze", func(ctx context.Context, job *driver.Job[struct{}]) error {
		return driver.Snooze(time.Hour)
	}, nil)
	driver.AddHandler(hs, "cancel", func(ctx context.Context, job *driver.Job[struct{}]) error {
		return driver.Cancel(errors.New("never mind"))
	}, nil)
	driver.AddHandler(hs, "slow", func(ctx context.Context, job *driver.Job[struct{}]) error {
		time.Sleep(1500 * time.Millisecond) // past a heartbeat
		return nil
	}, nil)
	driver.AddHandler(hs, "typed", func(ctx context.Context, job *driver.Job[int]) error { return nil }, nil)
	rec := &eventRecorder{}
	startClient(t, pool, &driver.Config{
		Queues:          map[string]driver.QueueConfig{"default": {}},
		Handlers:        hs,
		Lease:           time.Second,
		PollInterval:    100 * time.Millisecond,
		RequeueInterval: 100 * time.Millisecond,
		Logger:          b.logger,
		Hook:            rec,
	})

	want := map[string]string{"ok": "done", "tx": "done", "fail": "", "snooze": "queued", "cancel": "cancelled",
		"slow": "done", "typed": "cancelled"}
	ids := map[string]int64{}
	for kind := range want {
		var payload any
		if kind == "typed" {
			payload = "not an int"
		}
		ids[kind] = mustEnqueue(t, pool, kind, payload, nil)
	}
	for kind, id := range ids {
		waitUntil(t, 10*time.Second, kind+" job settled", func() bool {
			j := getJob(t, b.pool, id)
			if kind == "fail" {
				return j.LastError != nil && *j.LastError == "no"
			}
			return j.State == want[kind] && (kind != "snooze" || j.MaxAttempts == driver.MaxAttemptsDefault+1)
		})
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	for _, e := range rec.events {
		if e.Kind == driver.EventLost {
			t.Errorf("job %d (%s) lost: an outcome was refused", e.Job.ID, e.Job.Kind)
		}
	}
}

// loginPool creates a login role for this test (named prefix plus random hex; clause, such as
// " IN ROLE jobs_worker", is appended to its CREATE ROLE) and returns a pool of maxConns
// connections logged in as it; the role is dropped when the test ends. The error is the
// CREATE ROLE's, for the caller to fail or skip on.
func loginPool(t *testing.T, b *testBundle, prefix, clause string, maxConns int32) (*pgxpool.Pool, error) {
	t.Helper()
	ctx := context.Background()
	rb := make([]byte, 6)
	_, _ = rand.Read(rb)
	name := prefix + hex.EncodeToString(rb)
	password := hex.EncodeToString(rb) + "pw"
	if _, err := b.pool.Exec(ctx, "CREATE ROLE "+name+" LOGIN PASSWORD '"+password+"'"+clause); err != nil {
		return nil, err
	}
	t.Cleanup(func() {
		if _, err := b.pool.Exec(context.Background(), "DROP ROLE "+name); err != nil {
			t.Errorf("failed to drop role %s: %v", name, err)
		}
	})
	cfg, err := pgxpool.ParseConfig(b.url)
	if err != nil {
		t.Fatal(err)
	}
	cfg.ConnConfig.User, cfg.ConnConfig.Password = name, password
	cfg.MaxConns = maxConns
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool, nil
}
