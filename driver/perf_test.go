package driver_test

import (
	"context"
	"os"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/skiplock/skiplock/driver"
)

func envInt(t *testing.T, name string, def int) int {
	t.Helper()
	s := os.Getenv(name)
	if s == "" {
		return def
	}
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return n
}

// TestDrain measures how fast one client drains a backlog of no-op jobs. The default size
// keeps the suite quick; for the real measurement run without -race:
//
//	SKIPLOCK_DRAIN_JOBS=50000 SKIPLOCK_DRAIN_SLOTS=1000 go test -run TestDrain -v ./driver
func TestDrain(t *testing.T) {
	t.Parallel()
	b := setup(t)
	n := envInt(t, "SKIPLOCK_DRAIN_JOBS", 5000)
	slots := envInt(t, "SKIPLOCK_DRAIN_SLOTS", 1000)
	ctx := context.Background()
	for i := 0; i < n; i += 10000 {
		params := make([]driver.EnqueueParams, min(10000, n-i))
		for j := range params {
			params[j] = driver.EnqueueParams{Kind: "noop"}
		}
		if _, err := driver.EnqueueMany(ctx, b.pool, params); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := b.pool.Exec(ctx, "VACUUM ANALYZE jobs"); err != nil {
		t.Fatal(err)
	}

	var completed atomic.Int64
	allDone := make(chan struct{})
	hs := driver.NewHandlers()
	driver.AddHandler(hs, "noop", func(ctx context.Context, job *driver.Job[struct{}]) error { return nil }, nil)
	cfg := baseConfig(b, hs, map[string]driver.QueueConfig{"default": {Slots: slots}})
	cfg.Hook = driver.HookFunc(func(e *driver.Event) {
		if e.Kind == driver.EventCompleted && completed.Add(1) == int64(n) {
			close(allDone)
		}
	})
	began := time.Now()
	startClient(t, b.pool, cfg)
	select {
	case <-allDone:
	case <-time.After(5 * time.Minute):
		t.Fatalf("only %d of %d jobs completed in 5 minutes", completed.Load(), n)
	}
	elapsed := time.Since(began)
	if left := queryInt(t, b.pool, "SELECT count(*) FROM jobs WHERE state <> 'done'"); left != 0 {
		t.Fatalf("%d jobs not done", left)
	}
	t.Logf("drained %d no-op jobs with %d slots in %s: %.0f jobs/s", n, slots, elapsed.Round(time.Millisecond), float64(n)/elapsed.Seconds())
}

// A client with 1,000 idle slots is small: it pre-spawns nothing per slot.
func TestIdleMemory(t *testing.T) {
	t.Parallel()
	b := setup(t)
	hp := startHelper(t, "idle", b.url, "idle", 1000, 5*time.Second)
	waitUntil(t, 20*time.Second, "the idle client listening", func() bool {
		return queryInt(t, b.pool, "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND query = 'LISTEN jobs_ready'") == 1
	})
	time.Sleep(time.Second) // a few poll rounds
	kb := rssKB(t, hp.Pid())
	hp.stop(t)
	limit := 50 * 1024
	if raceEnabled {
		limit *= 4 // the race detector's shadow memory
	}
	t.Logf("idle client with 1000 slots: RSS %d kB (race detector: %v)", kb, raceEnabled)
	if kb > limit {
		t.Fatalf("RSS %d kB, want at most %d kB", kb, limit)
	}
}
