package driver_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/skiplock/skiplock/driver"
)

type greeting struct {
	Name string `json:"name"`
}

func TestRunCompletes(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var got atomic.Value
	var runs atomic.Int32
	hs := driver.NewHandlers()
	driver.AddHandler(hs, "greet", func(ctx context.Context, job *driver.Job[greeting]) error {
		got.Store(job.Payload.Name)
		runs.Add(1)
		return nil
	}, nil)
	rec := &eventRecorder{}
	cfg := baseConfig(b, hs, map[string]driver.QueueConfig{"default": {}})
	cfg.Hook = rec
	startClient(t, b.pool, cfg)

	id := mustEnqueue(t, b.pool, "greet", greeting{Name: "ada"}, nil)
	waitUntil(t, 10*time.Second, "job done", jobStateIs(t, b.pool, id, "done"))
	if got.Load() != "ada" || runs.Load() != 1 {
		t.Fatalf("handler saw %v, ran %d times", got.Load(), runs.Load())
	}
	waitUntil(t, 5*time.Second, "completed event", func() bool { _, ok := rec.find(id, driver.EventCompleted); return ok })
	if k := rec.kinds(id); len(k) != 2 || k[0] != driver.EventStarted || k[1] != driver.EventCompleted {
		t.Fatalf("events = %v, want [started completed]", k)
	}
}

func TestHandlerOutcomes(t *testing.T) {
	t.Parallel()

	t.Run("PayloadDecodeFailureCancels", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		var calls atomic.Int32
		hs := driver.NewHandlers()
		driver.AddHandler(hs, "count", func(ctx context.Context, job *driver.Job[struct{ N int }]) error {
			calls.Add(1)
			return nil
		}, nil)
		rec := &eventRecorder{}
		cfg := baseConfig(b, hs, map[string]driver.QueueConfig{"default": {}})
		cfg.Hook = rec
		startClient(t, b.pool, cfg)

		id := mustEnqueue(t, b.pool, "count", map[string]any{"N": "not a number"}, nil)
		waitUntil(t, 10*time.Second, "job cancelled", jobStateIs(t, b.pool, id, "cancelled"))
		j := getJob(t, b.pool, id)
		if calls.Load() != 0 || j.Attempts != 1 || j.LastError == nil ||
			!strings.Contains(*j.LastError, `failed to decode payload of kind "count"`) || len(j.Errors) != 1 {
			t.Fatalf("calls=%d job=%+v, want handler not called, 1 attempt, decode error recorded", calls.Load(), j)
		}
		waitUntil(t, 5*time.Second, "cancelled event", func() bool { _, ok := rec.find(id, driver.EventCancelled); return ok })
	})

	t.Run("PanicFailsWithStackAndRetries", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		setBackoff(t, b.pool, "10ms")
		hs := driver.NewHandlers()
		driver.AddHandler(hs, "explode", func(ctx context.Context, job *driver.Job[struct{}]) error {
			if job.Attempt == 1 {
				panic("boom")
			}
			return nil
		}, nil)
		rec := &eventRecorder{}
		cfg := baseConfig(b, hs, map[string]driver.QueueConfig{"default": {}})
		cfg.Hook = rec
		startClient(t, b.pool, cfg)

		id := mustEnqueue(t, b.pool, "explode", nil, nil)
		waitUntil(t, 10*time.Second, "job done", jobStateIs(t, b.pool, id, "done"))
		j := getJob(t, b.pool, id)
		if j.Attempts != 2 || j.LastError == nil || !strings.HasPrefix(*j.LastError, "panic: boom") ||
			!strings.Contains(*j.LastError, "goroutine ") || !strings.Contains(*j.LastError, "client_test.go") {
			t.Fatalf("job = %+v, want 2 attempts and the panic with its stack as last_error", j)
		}
		ev, ok := rec.find(id, driver.EventFailed)
		if !ok || ev.State != driver.JobStateQueued || ev.Err == nil {
			t.Fatalf("failed event = %+v (found %v), want state queued with the panic", ev, ok)
		}
	})

	t.Run("ErrorRetriesThenDies", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		setBackoff(t, b.pool, "10ms")
		var calls atomic.Int32
		hs := driver.NewHandlers()
		driver.AddHandler(hs, "flaky", func(ctx context.Context, job *driver.Job[struct{}]) error {
			calls.Add(1)
			return fmt.Errorf("attempt %d went wrong", job.Attempt)
		}, nil)
		rec := &eventRecorder{}
		cfg := baseConfig(b, hs, map[string]driver.QueueConfig{"default": {}})
		cfg.Hook = rec
		startClient(t, b.pool, cfg)

		id := mustEnqueue(t, b.pool, "flaky", nil, &driver.EnqueueOpts{MaxAttempts: 3})
		waitUntil(t, 10*time.Second, "job dead", jobStateIs(t, b.pool, id, "dead"))
		j := getJob(t, b.pool, id)
		if calls.Load() != 3 || j.Attempts != 3 || *j.LastError != "attempt 3 went wrong" || len(j.Errors) != 3 {
			t.Fatalf("calls=%d job=%+v, want 3 failed attempts", calls.Load(), j)
		}
		waitUntil(t, 5*time.Second, "dead event", func() bool {
			var dead int
			rec.mu.Lock()
			defer rec.mu.Unlock()
			for _, e := range rec.events {
				if e.Kind == driver.EventFailed && e.State == driver.JobStateDead {
					dead++
				}
			}
			return dead == 1
		})
	})

	t.Run("SnoozeSpendsNoAttempt", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		var calls atomic.Int32
		var snoozedAt, rerunAt atomic.Int64
		hs := driver.NewHandlers()
		driver.AddHandler(hs, "nap", func(ctx context.Context, job *driver.Job[struct{}]) error {
			if calls.Add(1) == 1 {
				snoozedAt.Store(time.Now().UnixNano())
				return driver.Snooze(300 * time.Millisecond)
			}
			rerunAt.Store(time.Now().UnixNano())
			return nil
		}, nil)
		rec := &eventRecorder{}
		cfg := baseConfig(b, hs, map[string]driver.QueueConfig{"default": {}})
		cfg.Hook = rec
		startClient(t, b.pool, cfg)

		id := mustEnqueue(t, b.pool, "nap", nil, &driver.EnqueueOpts{MaxAttempts: 1})
		waitUntil(t, 10*time.Second, "job done", jobStateIs(t, b.pool, id, "done"))
		if d := time.Duration(rerunAt.Load() - snoozedAt.Load()); d < 250*time.Millisecond {
			t.Errorf("job ran again %s after its snooze of 300ms", d)
		}
		j := getJob(t, b.pool, id)
		// With max_attempts 1 a spent attempt would have left the job dead, not run it again.
		if calls.Load() != 2 || j.Attempts != 2 || j.MaxAttempts != 2 || len(j.Errors) != 0 {
			t.Fatalf("calls=%d job=%+v, want 2 runs and max_attempts raised to 2, no errors", calls.Load(), j)
		}
		if _, ok := rec.find(id, driver.EventSnoozed); !ok {
			t.Fatal("no snoozed event")
		}
	})

	t.Run("CancelStopsRetries", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		var calls atomic.Int32
		hs := driver.NewHandlers()
		driver.AddHandler(hs, "doomed", func(ctx context.Context, job *driver.Job[struct{}]) error {
			calls.Add(1)
			return fmt.Errorf("giving up: %w", driver.Cancel(errors.New("account closed")))
		}, nil)
		rec := &eventRecorder{}
		cfg := baseConfig(b, hs, map[string]driver.QueueConfig{"default": {}})
		cfg.Hook = rec
		startClient(t, b.pool, cfg)

		id := mustEnqueue(t, b.pool, "doomed", nil, nil)
		waitUntil(t, 10*time.Second, "job cancelled", jobStateIs(t, b.pool, id, "cancelled"))
		j := getJob(t, b.pool, id)
		if calls.Load() != 1 || j.Attempts != 1 || *j.LastError != "giving up: account closed" {
			t.Fatalf("calls=%d job=%+v, want one run and the error recorded", calls.Load(), j)
		}
		waitUntil(t, 5*time.Second, "cancelled event", func() bool { _, ok := rec.find(id, driver.EventCancelled); return ok })
	})

	t.Run("RetryAtOverridesBackoff", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		at := time.Now().Add(time.Hour).Truncate(time.Microsecond)
		hs := driver.NewHandlers()
		driver.AddHandler(hs, "later", func(ctx context.Context, job *driver.Job[struct{}]) error {
			return fmt.Errorf("rate limited: %w", driver.RetryAt(at))
		}, nil)
		cfg := baseConfig(b, hs, map[string]driver.QueueConfig{"default": {}})
		startClient(t, b.pool, cfg)

		id := mustEnqueue(t, b.pool, "later", nil, nil)
		waitUntil(t, 10*time.Second, "job failed once", func() bool { return getJob(t, b.pool, id).LastError != nil })
		j := getJob(t, b.pool, id)
		if j.State != "queued" || j.Attempts != 1 || !j.RunAt.Equal(at) || !strings.HasPrefix(*j.LastError, "rate limited: retry at ") {
			t.Fatalf("job = %+v, want queued for %s with the error recorded", j, at)
		}
	})

	t.Run("UnknownKindFailsAndRetries", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		hs := driver.NewHandlers()
		driver.AddHandler(hs, "known", func(ctx context.Context, job *driver.Job[struct{}]) error { return nil }, nil)
		cfg := baseConfig(b, hs, map[string]driver.QueueConfig{"default": {}})
		startClient(t, b.pool, cfg)

		id := mustEnqueue(t, b.pool, "unknown", nil, nil)
		waitUntil(t, 10*time.Second, "job failed once", func() bool { return getJob(t, b.pool, id).LastError != nil })
		j := getJob(t, b.pool, id)
		if j.State != "queued" || j.Attempts != 1 || !strings.Contains(*j.LastError, `no handler for kind "unknown"`) {
			t.Fatalf("job = %+v, want queued for a retry with the error recorded", j)
		}
	})

	t.Run("TimeoutCancelsContext", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		hs := driver.NewHandlers()
		driver.AddHandler(hs, "slow", func(ctx context.Context, job *driver.Job[struct{}]) error {
			<-ctx.Done()
			return ctx.Err()
		}, &driver.HandlerOpts{Timeout: 100 * time.Millisecond})
		cfg := baseConfig(b, hs, map[string]driver.QueueConfig{"default": {}})
		startClient(t, b.pool, cfg)

		id := mustEnqueue(t, b.pool, "slow", nil, nil)
		waitUntil(t, 10*time.Second, "job failed once", func() bool { return getJob(t, b.pool, id).LastError != nil })
		if j := getJob(t, b.pool, id); *j.LastError != context.DeadlineExceeded.Error() {
			t.Fatalf("job = %+v, want it failed by its timeout", j)
		}
	})
}
