package driver_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/skiplock/skiplock/driver"
)

func enqueueN(t *testing.T, b *testBundle, kind string, n int) {
	t.Helper()
	params := make([]driver.EnqueueParams, n)
	for i := range params {
		params[i] = driver.EnqueueParams{Kind: kind}
	}
	if _, err := driver.EnqueueMany(context.Background(), b.pool, params); err != nil {
		t.Fatal(err)
	}
}

func TestClaimAhead(t *testing.T) {
	t.Parallel()

	// One claim takes the free slot and ClaimAhead more; each job after the first starts
	// from the buffer when the slot frees, with no claim in between.
	t.Run("BufferedJobsStartWithoutAClaim", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		hs := driver.NewHandlers()
		driver.AddHandler(hs, "noop", func(ctx context.Context, job *driver.Job[struct{}]) error { return nil }, nil)
		rec := &claimRecorder{}
		cfg := baseConfig(b, hs, map[string]driver.QueueConfig{"default": {Slots: 1, ClaimAhead: 4}})
		cfg.Hook = rec
		enqueueN(t, b, "noop", 5)
		startClient(t, b.pool, cfg)
		waitUntil(t, 10*time.Second, "every job done", func() bool {
			return queryInt(t, b.pool, "SELECT count(*) FROM jobs WHERE state = 'done' AND attempts = 1") == 5
		})
		rec.mu.Lock()
		defer rec.mu.Unlock()
		got := 0
		for _, c := range rec.claims {
			if c.Claimed > 0 {
				got++
				if c.Asked != 5 || c.Claimed != 5 {
					t.Errorf("claim %+v, want 5 asked and claimed (1 slot + 4 ahead)", c)
				}
			}
		}
		if got != 1 {
			t.Fatalf("%d claims got jobs, want 1: %+v", got, rec.claims)
		}
	})

	// At shutdown the buffered jobs go back: queued, attempts unchanged, max_attempts + 1 (no
	// attempt spent), and the next claim hands each a new attempt number.
	t.Run("ReturnedOnShutdownKeepTheirBudget", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		hs := driver.NewHandlers()
		driver.AddHandler(hs, "wait", func(ctx context.Context, job *driver.Job[struct{}]) error {
			<-ctx.Done() // runs until shutdown interrupts it (it is then released too)
			return ctx.Err()
		}, nil)
		cfg := baseConfig(b, hs, map[string]driver.QueueConfig{"default": {Slots: 1, ClaimAhead: 3}})
		cfg.ShutdownTimeout = 100 * time.Millisecond
		enqueueN(t, b, "wait", 4)
		client := startClient(t, b.pool, cfg)
		waitUntil(t, 10*time.Second, "1 running and 3 buffered", func() bool {
			return queryInt(t, b.pool, "SELECT count(*) FROM jobs WHERE state = 'running'") == 4
		})
		if err := client.Stop(context.Background()); err != nil {
			t.Fatal(err)
		}
		if n := queryInt(t, b.pool, "SELECT count(*) FROM jobs WHERE state = 'queued' AND attempts = 1 AND max_attempts = 6"); n != 4 {
			t.Fatalf("%d of 4 jobs queued at attempts 1 with max_attempts 6 after shutdown", n)
		}
		if n := queryInt(t, b.pool, "SELECT count(*) FROM jobs_claim('w', 10) WHERE attempt = 2 AND max_attempts = 6"); n != 4 {
			t.Fatalf("claimed again, %d of 4 jobs had attempt 2 of 6", n)
		}
	})

	// A job buffered longer than its TTL (Lease/2 here: 1 s) goes back without spending an
	// attempt, and no claim takes it again while the only slot stays busy.
	t.Run("ReturnedAfterTTL", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		proceed := make(chan struct{})
		var attempts sync.Map // id -> attempt that ran
		hs := driver.NewHandlers()
		driver.AddHandler(hs, "job", func(ctx context.Context, job *driver.Job[struct{}]) error {
			attempts.Store(job.ID, job.Attempt)
			<-proceed
			return nil
		}, nil)
		cfg := baseConfig(b, hs, map[string]driver.QueueConfig{"default": {Slots: 1, ClaimAhead: 2}})
		enqueueN(t, b, "job", 3)
		startClient(t, b.pool, cfg)
		waitUntil(t, 10*time.Second, "2 jobs returned after their TTL", func() bool {
			return queryInt(t, b.pool,
				"SELECT count(*) FROM jobs WHERE state = 'queued' AND attempts = 1 AND max_attempts = 6") == 2
		})
		time.Sleep(300 * time.Millisecond) // a claim now would be a bug: the slot is busy
		if n := queryInt(t, b.pool, "SELECT count(*) FROM jobs WHERE state = 'running'"); n != 1 {
			t.Fatalf("%d jobs running while the only slot is busy, want 1", n)
		}
		close(proceed)
		waitUntil(t, 10*time.Second, "every job done", func() bool {
			return queryInt(t, b.pool, "SELECT count(*) FROM jobs WHERE state = 'done'") == 3
		})
		if n := queryInt(t, b.pool, "SELECT count(*) FROM jobs WHERE attempts = 2 AND max_attempts = 6"); n != 2 {
			t.Fatalf("%d of the 2 returned jobs done at attempt 2 of 6", n)
		}
		n := 0
		attempts.Range(func(_, v any) bool { n++; return true })
		if n != 3 {
			t.Fatalf("%d jobs ran, want 3", n)
		}
	})

	// A buffered job goes back before its lease could end, heartbeat or not: its TTL is at
	// most half the lease (ClaimAheadTTL is 2s, the lease here 1s, heartbeats off). Every
	// 10ms the test looks for a job of the buffer (any but the one running in the only
	// slot) that is still running with its lease expired; there must be none, and the two
	// buffered jobs must have gone back by jobs_snooze's rule (no attempt spent).
	t.Run("ReturnedBeforeTheirLeaseEnds", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		proceed := make(chan struct{})
		var running atomic.Int64
		hs := driver.NewHandlers()
		driver.AddHandler(hs, "job", func(ctx context.Context, job *driver.Job[struct{}]) error {
			running.CompareAndSwap(0, job.ID)
			select {
			case <-proceed:
			case <-ctx.Done():
			}
			return nil
		}, nil)
		cfg := baseConfig(b, hs, map[string]driver.QueueConfig{"default": {Slots: 1, ClaimAhead: 2}})
		cfg.Lease = time.Second
		cfg.HeartbeatInterval = -1
		cfg.RequeueInterval = -1
		cfg.JobTimeout = -1
		enqueueN(t, b, "job", 3)
		startClient(t, b.pool, cfg)
		defer close(proceed)
		waitUntil(t, 10*time.Second, "a job running", func() bool { return running.Load() != 0 })
		deadline := time.Now().Add(2500 * time.Millisecond)
		for time.Now().Before(deadline) {
			if n := queryInt(t, b.pool, `SELECT count(*) FROM jobs
				WHERE state = 'running' AND lease_expires_at < clock_timestamp() AND id <> $1`, running.Load()); n > 0 {
				t.Fatalf("%d buffered jobs still running with their lease expired", n)
			}
			time.Sleep(10 * time.Millisecond)
		}
		if n := queryInt(t, b.pool, "SELECT count(*) FROM jobs WHERE id <> $1 AND attempts = 1 AND max_attempts = 6", running.Load()); n != 2 {
			t.Fatalf("%d of the 2 buffered jobs given back without spending an attempt", n)
		}
	})

	// Two clients with claim-ahead on one queue both get work, and each job runs once.
	t.Run("TwoClientsBothGetWork", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		const n = 300
		var ran [2]atomic.Int32
		var runs sync.Map // id -> *atomic.Int32
		for i := range 2 {
			hs := driver.NewHandlers()
			driver.AddHandler(hs, "job", func(ctx context.Context, job *driver.Job[struct{}]) error {
				ran[i].Add(1)
				v, _ := runs.LoadOrStore(job.ID, new(atomic.Int32))
				v.(*atomic.Int32).Add(1)
				time.Sleep(2 * time.Millisecond)
				return nil
			}, nil)
			cfg := baseConfig(b, hs, map[string]driver.QueueConfig{"default": {Slots: 4, ClaimAhead: 8}})
			startClient(t, b.pool, cfg)
		}
		enqueueN(t, b, "job", n)
		waitUntil(t, 30*time.Second, "every job done", func() bool {
			return queryInt(t, b.pool, "SELECT count(*) FROM jobs WHERE state = 'done'") == n
		})
		if ran[0].Load() < n/10 || ran[1].Load() < n/10 {
			t.Fatalf("clients ran %d and %d jobs, want each at least %d", ran[0].Load(), ran[1].Load(), n/10)
		}
		runs.Range(func(id, v any) bool {
			if c := v.(*atomic.Int32).Load(); c != 1 {
				t.Errorf("job %v ran %d times", id, c)
			}
			return true
		})
	})
}
