package driver_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/skiplock/skiplock/driver"
)

// claimRecorder is a Hook and ClaimHook that keeps every claim.
type claimRecorder struct {
	mu     sync.Mutex
	claims []driver.ClaimEvent
}

func (r *claimRecorder) HandleEvent(*driver.Event) {}

func (r *claimRecorder) HandleClaim(e *driver.ClaimEvent) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.claims = append(r.claims, *e)
}

// find returns the first claim from source that got at least one job.
func (r *claimRecorder) find(source driver.WakeSource) (driver.ClaimEvent, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, c := range r.claims {
		if c.Wake == source && c.Claimed > 0 {
			return c, true
		}
	}
	return driver.ClaimEvent{}, false
}

func TestClaimHookReportsBatchAndWakeSource(t *testing.T) {
	t.Parallel()
	noop := func(ctx context.Context, job *driver.Job[struct{}]) error { return nil }

	t.Run("StartThenNotify", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		hs := driver.NewHandlers()
		driver.AddHandler(hs, "noop", noop, nil)
		rec := &claimRecorder{}
		cfg := baseConfig(b, hs, map[string]driver.QueueConfig{"default": {Slots: 10, BatchSize: 4}})
		cfg.PollInterval = time.Hour // only a notification can wake the loop
		cfg.Hook = rec
		startClient(t, b.pool, cfg)
		waitUntil(t, 10*time.Second, "the start claim", func() bool {
			rec.mu.Lock()
			defer rec.mu.Unlock()
			return len(rec.claims) > 0
		})
		rec.mu.Lock()
		first := rec.claims[0]
		rec.mu.Unlock()
		if first.Wake != driver.WakeStart || first.Queue != "default" || first.Asked != 4 || first.Claimed != 0 {
			t.Fatalf("first claim = %+v, want start, default, asked 4, claimed 0", first)
		}
		id := mustEnqueue(t, b.pool, "noop", nil, nil)
		waitUntil(t, 10*time.Second, "job done", jobStateIs(t, b.pool, id, "done"))
		c, ok := rec.find(driver.WakeNotify)
		if !ok || c.Claimed != 1 {
			t.Fatalf("claims = %+v, want one woken by a notification that claimed 1 job", rec.claims)
		}
	})

	t.Run("PollAndBacklog", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		hs := driver.NewHandlers()
		driver.AddHandler(hs, "noop", noop, nil)
		rec := &claimRecorder{}
		cfg := baseConfig(b, hs, map[string]driver.QueueConfig{"default": {Slots: 2, BatchSize: 2}})
		cfg.DisableListen = true
		cfg.Hook = rec
		startClient(t, b.pool, cfg)
		waitUntil(t, 10*time.Second, "the start claim", func() bool {
			rec.mu.Lock()
			defer rec.mu.Unlock()
			return len(rec.claims) > 0
		})
		params := make([]driver.EnqueueParams, 10)
		for i := range params {
			params[i] = driver.EnqueueParams{Kind: "noop"}
		}
		if _, err := driver.EnqueueMany(context.Background(), b.pool, params); err != nil {
			t.Fatal(err)
		}
		waitUntil(t, 10*time.Second, "all jobs done", func() bool {
			return queryInt(t, b.pool, "SELECT count(*) FROM jobs WHERE state = 'done'") == 10
		})
		if c, ok := rec.find(driver.WakePoll); !ok || c.Claimed > c.Asked || c.Asked > 2 {
			t.Fatalf("claims = %+v, want one woken by the poll timer, claiming at most 2", rec.claims)
		}
		if _, ok := rec.find(driver.WakeBacklog); !ok {
			t.Fatalf("claims = %+v, want one after a full claim (backlog)", rec.claims)
		}
		if _, ok := rec.find(driver.WakeNotify); ok {
			t.Fatalf("claims = %+v, want none woken by a notification with DisableListen", rec.claims)
		}
	})
}
