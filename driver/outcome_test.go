package driver_test

import (
	"context"
	"errors"
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
