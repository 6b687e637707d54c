package driver_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/skiplock/skiplock/driver"
)

// Jobs started before Stop finish and are completed; no job starts after Stop is called.
func TestShutdownFinishesStartedJobs(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var mu sync.Mutex
	startedAt := map[int64]time.Time{}
	hs := driver.NewHandlers()
	driver.AddHandler(hs, "work", func(ctx context.Context, job *driver.Job[struct{}]) error {
		mu.Lock()
		startedAt[job.ID] = time.Now()
		mu.Unlock()
		select {
		case <-time.After(500 * time.Millisecond):
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}, nil)
	cfg := baseConfig(b, hs, map[string]driver.QueueConfig{"default": {Slots: 4}})
	client, err := driver.NewClient(b.pool, cfg)
	if err != nil {
		t.Fatal(err)
	}
	ids := make([]driver.EnqueueParams, 20)
	for i := range ids {
		ids[i] = driver.EnqueueParams{Kind: "work"}
	}
	if _, err := driver.EnqueueMany(context.Background(), b.pool, ids); err != nil {
		t.Fatal(err)
	}
	runErr := make(chan error, 1)
	go func() { runErr <- client.Run(context.Background()) }()
	// At least the first 4; a fifth may start before this sees the fourth, and the checks
	// below hold for however many started before Stop.
	waitUntil(t, 10*time.Second, "4 jobs started", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(startedAt) >= 4
	})

	stopCalled := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := client.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if err := client.Stop(ctx); err != nil { // a second Stop is harmless
		t.Fatal(err)
	}
	if err := <-runErr; err != nil {
		t.Fatalf("Run = %v", err)
	}

	mu.Lock()
	defer mu.Unlock()
	for id, at := range startedAt {
		if at.After(stopCalled) {
			t.Errorf("job %d started %s after Stop was called", id, at.Sub(stopCalled))
		}
		if j := getJob(t, b.pool, id); j.State != "done" {
			t.Errorf("job %d started before Stop is %s, want done", id, j.State)
		}
	}
	done := queryInt(t, b.pool, "SELECT count(*) FROM jobs WHERE state = 'done'")
	untouched := queryInt(t, b.pool, "SELECT count(*) FROM jobs WHERE state = 'queued' AND attempts = 0")
	if done != len(startedAt) || done+untouched != 20 {
		t.Fatalf("%d done, %d untouched, %d started: want the started ones done and the rest untouched", done, untouched, len(startedAt))
	}
}

// A handler still running when ShutdownTimeout passes has its context cancelled with cause
// ErrShutdown; the job is then released at once (queued, ready now, lease cleared, no
// attempt spent), not left to lease expiry.
func TestShutdownTimeoutReleasesJob(t *testing.T) {
	t.Parallel()
	b := setup(t)
	started := make(chan struct{})
	cause := make(chan error, 1)
	hs := driver.NewHandlers()
	driver.AddHandler(hs, "stubborn", func(ctx context.Context, job *driver.Job[struct{}]) error {
		close(started)
		<-ctx.Done()
		cause <- context.Cause(ctx)
		return ctx.Err()
	}, &driver.HandlerOpts{Timeout: -1})
	rec := &eventRecorder{}
	cfg := baseConfig(b, hs, map[string]driver.QueueConfig{"default": {}})
	cfg.Lease = time.Minute // so that only the release can explain the job being ready
	cfg.ShutdownTimeout = 200 * time.Millisecond
	cfg.Hook = rec
	client, err := driver.NewClient(b.pool, cfg)
	if err != nil {
		t.Fatal(err)
	}
	id := mustEnqueue(t, b.pool, "stubborn", nil, &driver.EnqueueOpts{MaxAttempts: 3})
	runErr := make(chan error, 1)
	go func() { runErr <- client.Run(context.Background()) }()
	<-started

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := client.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-runErr; err != nil {
		t.Fatalf("Run = %v", err)
	}
	if err := <-cause; !errors.Is(err, driver.ErrShutdown) {
		t.Fatalf("handler's context cause = %v, want ErrShutdown", err)
	}
	j := getJob(t, b.pool, id)
	if j.State != "queued" || j.Attempts != 1 || j.MaxAttempts != 4 || j.LeaseExpiresAt != nil || j.RunAt.After(time.Now()) {
		t.Fatalf("job = %+v, want queued and ready now with max_attempts raised to 4", j)
	}
	if _, ok := rec.find(id, driver.EventSnoozed); !ok {
		t.Fatal("no snoozed event for the released job")
	}
}

// Run returns ErrAlreadyRunning when called twice, and Stop before Run makes Run return at
// once.
func TestRunTwiceAndStopBeforeRun(t *testing.T) {
	t.Parallel()
	b := setup(t)
	hs := driver.NewHandlers()
	driver.AddHandler(hs, "noop", func(ctx context.Context, job *driver.Job[struct{}]) error { return nil }, nil)
	cfg := baseConfig(b, hs, map[string]driver.QueueConfig{"default": {}})

	client, err := driver.NewClient(b.pool, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := client.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := client.Run(ctx); err != nil {
		t.Fatalf("Run after Stop = %v, want nil", err)
	}
	if err := client.Run(ctx); !errors.Is(err, driver.ErrAlreadyRunning) {
		t.Fatalf("second Run = %v, want ErrAlreadyRunning", err)
	}
}
