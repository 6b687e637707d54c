package driver_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/skiplock/skiplock/driver"
)

// TestClientsPruneByRetention: two clients on one database run jobs_maintain on their
// RequeueInterval; with done_retention 0 the jobs they complete are deleted (at completion), the
// backlog of old done jobs (more than one round's batch) goes too, and nothing else does.
func TestClientsPruneByRetention(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	if _, err := b.pool.Exec(ctx, `INSERT INTO jobs (kind, state, attempts, lease_holder, created_at, finished_at)
		SELECT 'old', 'done', 1, 'w', now() - interval '2 days', now() - interval '2 days'
		FROM generate_series(1, 25000)`); err != nil {
		t.Fatal(err)
	}
	if _, err := b.pool.Exec(ctx, "UPDATE jobs_settings SET done_retention = '0'"); err != nil {
		t.Fatal(err)
	}
	var ran atomic.Int64
	hs := driver.NewHandlers()
	driver.AddHandler(hs, "ok", func(ctx context.Context, job *driver.Job[struct{}]) error {
		ran.Add(1)
		return nil
	}, nil)
	for range 2 {
		startClient(t, b.pool, &driver.Config{
			Queues:          map[string]driver.QueueConfig{"default": {}},
			Handlers:        hs,
			PollInterval:    50 * time.Millisecond,
			RequeueInterval: 50 * time.Millisecond,
			Logger:          b.logger,
		})
	}
	for range 200 {
		mustEnqueue(t, b.pool, "ok", struct{}{}, nil)
	}
	kept := mustEnqueue(t, b.pool, "ok", struct{}{}, &driver.EnqueueOpts{RunAt: time.Now().Add(time.Hour)})
	waitUntil(t, 30*time.Second, "every done job to be pruned", func() bool {
		return ran.Load() == 200 && queryInt(t, b.pool, "SELECT count(*) FROM jobs") == 1
	})
	if s := getJob(t, b.pool, kept).State; s != "queued" {
		t.Fatalf("the scheduled job is %s, want queued", s)
	}
}
