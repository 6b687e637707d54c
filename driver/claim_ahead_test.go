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

	// Two clients with claim-ahead on one queue both get work, and each job runs once. Each
	// client holds at most 12 jobs (4 slots, 8 ahead) of the 300, which take 10 ms each: the
	// drain lasts long enough (about 0.4 s with both) that a client slow to wake on a loaded
	// machine still gets its share (with 2 ms jobs one client got 12 of 300 in a -race CI run).
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
				time.Sleep(10 * time.Millisecond)
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

// maxAsked is the most jobs one claim of rec asked for.
func (r *claimRecorder) maxAsked() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	most := 0
	for _, c := range r.claims {
		most = max(most, c.Asked)
	}
	return most
}

// drainWith runs n jobs (each calling job, when not nil) through a client of one queue
// configured by q, after prepare (which may set the queue's limits), and returns its claims.
// A claim asks for at most the free slots plus the jobs it may claim ahead, so the most any
// claim asked for bounds how far the queue claimed ahead.
func drainWith(t *testing.T, q driver.QueueConfig, n int, job func(), prepare string) *claimRecorder {
	t.Helper()
	b := setup(t)
	if prepare != "" {
		mustExecPool(t, b, prepare)
	}
	hs := driver.NewHandlers()
	driver.AddHandler(hs, "job", func(ctx context.Context, _ *driver.Job[struct{}]) error {
		if job != nil {
			job()
		}
		return nil
	}, nil)
	rec := &claimRecorder{}
	cfg := baseConfig(b, hs, map[string]driver.QueueConfig{"default": q})
	cfg.Hook = rec
	enqueueN(t, b, "job", n)
	startClient(t, b.pool, cfg)
	waitUntil(t, 60*time.Second, "every job done", func() bool {
		return queryInt(t, b.pool, "SELECT count(*) FROM jobs WHERE state = 'done'") == n
	})
	// Nothing went back: every job ran at its first attempt, with its budget untouched.
	if m := queryInt(t, b.pool, "SELECT count(*) FROM jobs WHERE attempts <> 1 OR max_attempts <> 5"); m != 0 {
		t.Errorf("%d jobs were given back or ran twice", m)
	}
	return rec
}

func mustExecPool(t *testing.T, b *testBundle, sql string) {
	t.Helper()
	if _, err := b.pool.Exec(context.Background(), sql); err != nil {
		t.Fatal(err)
	}
}

// By default a queue claims ahead as far as its recent rate of finished jobs says: in a
// drain of no-op jobs beyond the free slots (up to 4 × Slots more), for slow jobs a few,
// on a limited queue (concurrency or rate limit) and with ClaimAheadOff never.
func TestClaimAheadDefault(t *testing.T) {
	t.Parallel()
	const slots = 10

	t.Run("ADrainClaimsAhead", func(t *testing.T) {
		t.Parallel()
		rec := drainWith(t, driver.QueueConfig{Slots: slots}, 3000, nil, "")
		if m := rec.maxAsked(); m <= slots || m > 5*slots {
			t.Errorf("claims asked for at most %d jobs, want more than the %d slots and at most %d", m, slots, 5*slots)
		}
	})

	t.Run("SlowJobsAFewAhead", func(t *testing.T) {
		t.Parallel()
		// 10 slots of 50 ms jobs finish 200 a second: 4 in ClaimAheadHorizon (20 ms).
		rec := drainWith(t, driver.QueueConfig{Slots: slots}, 100, func() { time.Sleep(50 * time.Millisecond) }, "")
		if m := rec.maxAsked(); m > slots+5 {
			t.Errorf("a claim asked for %d jobs of 50 ms on %d slots: more than a few ahead", m, slots)
		}
	})

	limits := map[string]string{
		"ConcurrencyLimit": "SELECT jobs_set_concurrency('default', 1000)",
		"PerKey":           "SELECT jobs_set_concurrency('default', NULL, 1000)",
		"RateLimit":        "SELECT jobs_set_rate_limit('default', 100000, interval '1 second')",
	}
	for name, sql := range limits {
		t.Run("None"+name, func(t *testing.T) {
			t.Parallel()
			rec := drainWith(t, driver.QueueConfig{Slots: slots}, 2000, nil, sql)
			if m := rec.maxAsked(); m > slots {
				t.Errorf("a claim of a limited queue asked for %d jobs, more than its %d slots", m, slots)
			}
		})
	}

	// A limit set while the queue drains stops its claims ahead within a poll interval
	// (200 ms here), when the fetch loop asks jobs_queue_limited again.
	t.Run("ALimitSetWhileDrainingWithinAPoll", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		hs := driver.NewHandlers()
		driver.AddHandler(hs, "job", func(ctx context.Context, _ *driver.Job[struct{}]) error {
			time.Sleep(time.Millisecond)
			return nil
		}, nil)
		rec := &claimRecorder{}
		cfg := baseConfig(b, hs, map[string]driver.QueueConfig{"default": {Slots: slots}})
		cfg.Hook = rec
		enqueueN(t, b, "job", 20000)
		startClient(t, b.pool, cfg)
		waitUntil(t, 10*time.Second, "a claim ahead", func() bool { return rec.maxAsked() > slots })
		mustExecPool(t, b, "SELECT jobs_set_concurrency('default', 1000)")
		time.Sleep(cfg.PollInterval + 100*time.Millisecond)
		rec.mu.Lock()
		from := len(rec.claims)
		rec.mu.Unlock()
		time.Sleep(500 * time.Millisecond)
		rec.mu.Lock()
		defer rec.mu.Unlock()
		if len(rec.claims) == from {
			t.Fatal("no claim in the 500 ms after the limit was noticed")
		}
		for _, c := range rec.claims[from:] {
			if c.Asked > slots {
				t.Fatalf("a claim %s after the limit was set asked for %d jobs, more than the %d slots",
					cfg.PollInterval+100*time.Millisecond, c.Asked, slots)
			}
		}
	})

	// A failing check counts as a limit: here the schema lacks jobs_queue_limited.
	t.Run("NoneWhenTheCheckFails", func(t *testing.T) {
		t.Parallel()
		rec := drainWith(t, driver.QueueConfig{Slots: slots}, 2000, nil, "DROP FUNCTION jobs_queue_limited(text)")
		if m := rec.maxAsked(); m > slots {
			t.Errorf("without jobs_queue_limited a claim asked for %d jobs, more than the %d slots", m, slots)
		}
	})

	t.Run("NoneWhenOff", func(t *testing.T) {
		t.Parallel()
		rec := drainWith(t, driver.QueueConfig{Slots: slots, ClaimAhead: driver.ClaimAheadOff}, 2000, nil, "")
		if m := rec.maxAsked(); m > slots {
			t.Errorf("with ClaimAheadOff a claim asked for %d jobs, more than the %d slots", m, slots)
		}
	})
}
