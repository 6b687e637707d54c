package driver_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/skiplock/skiplock/driver"
)

// addLongHandler registers kind "long": a handler that counts its runs and returns nil
// after d, or the cause when its context ends first.
func addLongHandler(hs *driver.Handlers, d time.Duration, runs *atomic.Int32) {
	driver.AddHandler(hs, "long", func(ctx context.Context, job *driver.Job[struct{}]) error {
		runs.Add(1)
		select {
		case <-time.After(d):
			return nil
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	}, &driver.HandlerOpts{Timeout: 30 * time.Second})
}

// A job running three times its lease keeps it through heartbeats, even with
// jobs_requeue_expired called every 100ms: it runs once and completes at attempt 1.
func TestHeartbeatKeepsLongJobAlive(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var runs atomic.Int32
	hs := driver.NewHandlers()
	addLongHandler(hs, 3*time.Second, &runs)
	cfg := baseConfig(b, hs, map[string]driver.QueueConfig{"default": {}})
	cfg.Lease = time.Second
	cfg.RequeueInterval = 100 * time.Millisecond
	startClient(t, b.pool, cfg)

	id := mustEnqueue(t, b.pool, "long", nil, nil)
	waitUntil(t, 15*time.Second, "job done", jobStateIs(t, b.pool, id, "done"))
	if j := getJob(t, b.pool, id); runs.Load() != 1 || j.Attempts != 1 || len(j.Errors) != 0 {
		t.Fatalf("runs=%d job=%+v, want one run at attempt 1 and no lease expiry", runs.Load(), j)
	}
}

// A running job whose row another session keeps locked (an operator's open transaction)
// does not hold up the heartbeats of the client's other jobs: they keep their two-second
// leases for five seconds, with jobs_requeue_expired called every 100ms, and complete at
// attempt 1.
func TestHeartbeatPastLockedRow(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var runs atomic.Int32
	hs := driver.NewHandlers()
	addLongHandler(hs, 5*time.Second, &runs)
	driver.AddHandler(hs, "locked", func(ctx context.Context, job *driver.Job[struct{}]) error {
		<-ctx.Done() // until the client stops, or the job is lost once its lease has passed
		return context.Cause(ctx)
	}, &driver.HandlerOpts{Timeout: -1})
	cfg := baseConfig(b, hs, map[string]driver.QueueConfig{"default": {}})
	cfg.Lease = 2 * time.Second
	cfg.RequeueInterval = 100 * time.Millisecond
	cfg.ShutdownTimeout = 100 * time.Millisecond // the locked handler returns only when cancelled

	// The locked job has the lowest id: a heartbeat that waited for its lock would hold
	// no other row meanwhile, so the maintainer could take every other job.
	locked := mustEnqueue(t, b.pool, "locked", nil, nil)
	long := []int64{mustEnqueue(t, b.pool, "long", nil, nil), mustEnqueue(t, b.pool, "long", nil, nil)}
	startClient(t, b.pool, cfg)
	waitUntil(t, 10*time.Second, "3 jobs running", func() bool {
		return queryInt(t, b.pool, "SELECT count(*) FROM jobs WHERE state = 'running'") == 3
	})
	tx, err := b.pool.Begin(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	// Runs before the pool is closed, which would otherwise wait for this connection forever
	// when the test fails with the lock held. After the Rollback below it does nothing.
	t.Cleanup(func() { _ = tx.Rollback(context.Background()) })
	if _, err := tx.Exec(t.Context(), "SELECT 1 FROM jobs WHERE id = $1 FOR UPDATE", locked); err != nil {
		t.Fatal(err)
	}
	for _, id := range long {
		waitUntil(t, 20*time.Second, "long job done", jobStateIs(t, b.pool, id, "done"))
	}
	if err := tx.Rollback(t.Context()); err != nil {
		t.Fatal(err)
	}
	for _, id := range long {
		if j := getJob(t, b.pool, id); j.Attempts != 1 || len(j.Errors) != 0 {
			t.Errorf("job %d = %+v, want done at attempt 1 with no lease expiry", id, j)
		}
	}
	if n := runs.Load(); n != 2 {
		t.Errorf("the long handler ran %d times, want 2 (once per job)", n)
	}
}

// When a heartbeat finds the job gone (here: cancelled by an operator), the handler's
// context is cancelled with cause ErrNotHeld and nothing is recorded for it.
func TestHeartbeatLostCancelsContext(t *testing.T) {
	t.Parallel()
	b := setup(t)
	started := make(chan struct{})
	cause := make(chan error, 1)
	hs := driver.NewHandlers()
	driver.AddHandler(hs, "wait", func(ctx context.Context, job *driver.Job[struct{}]) error {
		close(started)
		<-ctx.Done()
		cause <- context.Cause(ctx)
		return ctx.Err()
	}, &driver.HandlerOpts{Timeout: -1})
	rec := &eventRecorder{}
	cfg := baseConfig(b, hs, map[string]driver.QueueConfig{"default": {}})
	cfg.Lease = time.Second
	cfg.Hook = rec
	startClient(t, b.pool, cfg)

	id := mustEnqueue(t, b.pool, "wait", nil, nil)
	<-started
	if queryInt(t, b.pool, "SELECT jobs_cancel($1)::int", id) != 1 {
		t.Fatal("jobs_cancel returned false")
	}
	select {
	case err := <-cause:
		if !errors.Is(err, driver.ErrNotHeld) {
			t.Fatalf("context cause = %v, want ErrNotHeld", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("handler's context not cancelled within 5s of the job's cancellation")
	}
	waitUntil(t, 5*time.Second, "lost event", func() bool { _, ok := rec.find(id, driver.EventLost); return ok })
	if j := getJob(t, b.pool, id); j.State != "cancelled" || j.LastError != nil {
		t.Fatalf("job = %+v, want cancelled with no error recorded by the fenced-out worker", j)
	}
}

// A handler that outlives its lease cannot complete the job once another worker has claimed
// it: neither CompleteTx in its own transaction nor the driver's batched completion.
func TestFencing(t *testing.T) {
	t.Parallel()
	b := setup(t)
	started := make(chan struct{})
	proceed := make(chan struct{})
	completeTxErr := make(chan error, 1)
	hs := driver.NewHandlers()
	driver.AddHandler(hs, "stale", func(ctx context.Context, job *driver.Job[struct{}]) error {
		close(started)
		<-proceed
		tx, err := b.pool.Begin(ctx)
		if err != nil {
			return err
		}
		defer tx.Rollback(ctx)
		completeTxErr <- driver.CompleteTx(ctx, tx, job)
		return nil // the driver's own (batched) completion must be refused too
	}, &driver.HandlerOpts{Timeout: -1})
	rec := &eventRecorder{}
	cfg := baseConfig(b, hs, map[string]driver.QueueConfig{"default": {Slots: 1}})
	cfg.Lease = time.Second
	cfg.HeartbeatInterval = -1 // let the lease lapse while the handler runs
	cfg.RequeueInterval = -1
	cfg.Hook = rec
	startClient(t, b.pool, cfg)

	id := mustEnqueue(t, b.pool, "stale", nil, nil)
	<-started
	waitUntil(t, 5*time.Second, "lease expiry", func() bool {
		return queryInt(t, b.pool, "SELECT count(*) FROM jobs WHERE id = $1 AND lease_expires_at < now()", id) == 1
	})
	if n := queryInt(t, b.pool, "SELECT jobs_requeue_expired()"); n != 1 {
		t.Fatalf("jobs_requeue_expired() = %d, want 1", n)
	}
	// The client's only slot is busy, so this claim cannot lose the race to it.
	if n := queryInt(t, b.pool, "SELECT attempt FROM jobs_claim('other-worker', 1, '{default}', '1 minute')"); n != 2 {
		t.Fatalf("other worker claimed attempt %d, want 2", n)
	}
	close(proceed)

	if err := <-completeTxErr; !errors.Is(err, driver.ErrNotHeld) {
		t.Fatalf("CompleteTx = %v, want ErrNotHeld", err)
	}
	waitUntil(t, 5*time.Second, "lost event", func() bool { _, ok := rec.find(id, driver.EventLost); return ok })
	j := getJob(t, b.pool, id)
	if j.State != "running" || j.Attempts != 2 || j.LeaseHolder == nil || *j.LeaseHolder != "other-worker" {
		t.Fatalf("job = %+v, want still running at attempt 2 for other-worker", j)
	}
	if queryInt(t, b.pool, "SELECT jobs_complete($1, 2)::int", id) != 1 {
		t.Fatal("the new holder could not complete the job")
	}
}
