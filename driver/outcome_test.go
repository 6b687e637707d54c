package driver_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/skiplock/skiplock/driver"
	"github.com/skiplock/skiplock/tests/pgtest"
)

// TestOutcomeRetriedAfterConnectionLoss: a failure, a snooze and a cancellation whose call
// loses its connection (the backend is terminated while it waits on a row lock) are retried
// on a new connection and recorded exactly once.
func TestOutcomeRetriedAfterConnectionLoss(t *testing.T) {
	t.Parallel()
	b := setup(t)
	proceed := make(chan struct{})
	hs := driver.NewHandlers()
	outcomes := map[string]func() error{
		"fail":   func() error { return errors.New("failed once") },
		"snooze": func() error { return driver.Snooze(time.Hour) },
		"cancel": func() error { return driver.Cancel(errors.New("cancelled once")) },
	}
	for kind, outcome := range outcomes {
		driver.AddHandler(hs, kind, func(ctx context.Context, job *driver.Job[struct{}]) error {
			<-proceed
			return outcome()
		}, nil)
	}
	rec := &eventRecorder{}
	cfg := baseConfig(b, hs, map[string]driver.QueueConfig{"default": {Slots: 3}})
	cfg.Lease = time.Minute
	cfg.RequeueInterval = -1
	cfg.Hook = rec
	startClient(t, b.pool, cfg)

	ids := map[string]int64{}
	for kind := range outcomes {
		ids[kind] = mustEnqueue(t, b.pool, kind, nil, &driver.EnqueueOpts{MaxAttempts: 1})
	}
	// Claims skip locked rows: lock them only once they are running.
	waitUntil(t, 10*time.Second, "the three jobs running", func() bool {
		return queryInt(t, b.pool, "SELECT count(*) FROM jobs WHERE state = 'running'") == 3
	})
	blocker := pgtest.NewConn(t, b.url)
	ctx := context.Background()
	if _, err := blocker.Exec(ctx, "BEGIN"); err != nil {
		t.Fatal(err)
	}
	if _, err := blocker.Exec(ctx, "SELECT 1 FROM jobs FOR UPDATE"); err != nil {
		t.Fatal(err)
	}
	close(proceed)
	for _, fn := range []string{"jobs_fail", "jobs_snooze", "jobs_cancel"} {
		waitUntil(t, 10*time.Second, "a blocked "+fn+" to terminate", func() bool {
			return queryInt(t, b.pool, `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
				WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE $1`, "%"+fn+"(%") > 0
		})
	}
	if _, err := blocker.Exec(ctx, "COMMIT"); err != nil {
		t.Fatal(err)
	}
	want := map[string]struct {
		state                string
		maxAttempts, nErrors int
		event                driver.EventKind
	}{
		"fail": {"dead", 1, 1, driver.EventFailed},
		// a snooze recorded twice would have raised max_attempts twice
		"snooze": {"queued", 2, 0, driver.EventSnoozed},
		"cancel": {"cancelled", 1, 1, driver.EventCancelled},
	}
	for kind, w := range want {
		id := ids[kind]
		waitUntil(t, 20*time.Second, kind+" recorded", func() bool { _, ok := rec.find(id, w.event); return ok })
		if j := getJob(t, b.pool, id); j.State != w.state || j.Attempts != 1 || j.MaxAttempts != w.maxAttempts || len(j.Errors) != w.nErrors {
			t.Fatalf("%s: job = %+v, want %s at attempt 1, max_attempts %d, %d errors entries", kind, j, w.state, w.maxAttempts, w.nErrors)
		}
		if _, lost := rec.find(id, driver.EventLost); lost {
			t.Fatalf("%s: the outcome was recorded twice (the retry was fenced)", kind)
		}
	}
}

// nilPtrError's Error dereferences its receiver: a handler returning a nil *nilPtrError as its
// error (a non-nil interface holding a nil pointer, Go's classic typed-nil mistake) hands the
// driver an error whose Error method panics.
type nilPtrError struct{ msg string }

func (e *nilPtrError) Error() string { return e.msg }

// panickingError's Error method panics outright.
type panickingError struct{}

func (panickingError) Error() string { panic("Error method exploded") }

// TestHandlerErrorWhoseErrorPanics: a handler's error whose Error method panics (a typed nil
// pointer, or a method that panics) is recorded as a failure with a text saying so, and the
// cancellation of such an error too; the worker process does not crash.
func TestHandlerErrorWhoseErrorPanics(t *testing.T) {
	t.Parallel()
	b := setup(t)
	hs := driver.NewHandlers()
	driver.AddHandler(hs, "typednil", func(ctx context.Context, job *driver.Job[struct{}]) error {
		var e *nilPtrError
		return e
	}, nil)
	driver.AddHandler(hs, "panics", func(ctx context.Context, job *driver.Job[struct{}]) error {
		return panickingError{}
	}, nil)
	driver.AddHandler(hs, "cancelpanics", func(ctx context.Context, job *driver.Job[struct{}]) error {
		return driver.Cancel(panickingError{})
	}, nil)
	rec := &eventRecorder{}
	cfg := baseConfig(b, hs, map[string]driver.QueueConfig{"default": {Slots: 3}})
	cfg.Hook = rec
	startClient(t, b.pool, cfg)
	want := map[string]string{"typednil": "dead", "panics": "dead", "cancelpanics": "cancelled"}
	ids := map[string]int64{}
	for kind := range want {
		ids[kind] = mustEnqueue(t, b.pool, kind, nil, &driver.EnqueueOpts{MaxAttempts: 1})
	}
	for kind, state := range want {
		id := ids[kind]
		waitUntil(t, 10*time.Second, kind+" recorded", func() bool { return getJob(t, b.pool, id).State == state })
		if j := getJob(t, b.pool, id); len(j.Errors) != 1 || j.LastError == nil || !strings.Contains(*j.LastError, "its Error method panicked") {
			t.Fatalf("%s: job = %+v, want one errors entry and a last_error saying the Error method panicked", kind, j)
		}
	}
}
