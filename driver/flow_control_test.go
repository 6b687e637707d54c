package driver_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/skiplock/skiplock/driver"
	"github.com/skiplock/skiplock/tests/pgtest"
)

// A paused queue's fetch loop does not spin: its claims come back empty and it waits like an
// idle loop. After jobs_resume, whose notification wakes it, an idle worker starts the jobs
// within the usual wake-up latency, long before the next poll.
func TestPausedQueueIdlesAndResumeWakes(t *testing.T) {
	t.Parallel()
	b := setup(t)
	pool, claims := countingPool(t, b.url)
	var done atomic.Int32
	hs := driver.NewHandlers()
	driver.AddHandler(hs, "noop", func(ctx context.Context, job *driver.Job[struct{}]) error {
		done.Add(1)
		return nil
	}, nil)
	cfg := baseConfig(b, hs, map[string]driver.QueueConfig{"default": {Slots: 4}})
	cfg.PollInterval = 10 * time.Second // a poll would not come within the test
	startClient(t, pool, cfg)
	waitUntil(t, 10*time.Second, "the client listening", func() bool {
		return queryInt(t, b.pool, "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND query = 'LISTEN jobs_ready'") == 1
	})

	if _, err := b.pool.Exec(context.Background(), "SELECT jobs_pause('default')"); err != nil {
		t.Fatal(err)
	}
	const n = 5
	for range n {
		// Each notifies the paused queue's loop before it returns (NotifyCooldown -1: not
		// a deferred notification of the throttle, which could come after the sleep below).
		mustEnqueue(t, b.pool, "noop", nil, &driver.EnqueueOpts{NotifyCooldown: -1})
	}
	time.Sleep(100 * time.Millisecond) // the wake-ups arrive and their claims come back empty
	before := claims.n.Load()
	time.Sleep(time.Second)
	if made := claims.n.Load() - before; made > 1 {
		t.Fatalf("the paused queue's fetch loop claimed %d times in 1s with no notification and a 10s poll", made)
	}
	if d := done.Load(); d != 0 {
		t.Fatalf("%d jobs of the paused queue ran", d)
	}

	began := time.Now()
	if _, err := b.pool.Exec(context.Background(), "SELECT jobs_resume('default')"); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 2*time.Second, "the jobs run after resume", func() bool { return done.Load() == n })
	t.Logf("after jobs_resume, %d jobs ran in %s", n, time.Since(began).Round(time.Millisecond))
}

// A fetch loop cut short by a rate limit sleeps until jobs_next_start, not a whole poll
// interval, and does not spin meanwhile.
func TestRateLimitedQueueWaitsForNextStart(t *testing.T) {
	t.Parallel()
	b := setup(t)
	pool, claims := countingPool(t, b.url)
	if _, err := b.pool.Exec(context.Background(), "SELECT jobs_set_rate_limit('default', 2, '300 milliseconds')"); err != nil {
		t.Fatal(err)
	}
	const n = 10
	params := make([]driver.EnqueueParams, n)
	for i := range params {
		params[i] = driver.EnqueueParams{Kind: "noop"}
	}
	if _, err := driver.EnqueueMany(context.Background(), b.pool, params); err != nil {
		t.Fatal(err)
	}
	var (
		mu     sync.Mutex
		starts []time.Time
	)
	hs := driver.NewHandlers()
	driver.AddHandler(hs, "noop", func(ctx context.Context, job *driver.Job[struct{}]) error {
		mu.Lock()
		defer mu.Unlock()
		starts = append(starts, time.Now())
		return nil
	}, nil)
	cfg := baseConfig(b, hs, map[string]driver.QueueConfig{"default": {Slots: 10}})
	cfg.PollInterval = 10 * time.Second // waiting for polls would take 50s
	began := time.Now()
	startClient(t, pool, cfg)
	waitUntil(t, 5*time.Second, "every job run", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(starts) == n
	})
	elapsed := time.Since(began)
	made := claims.n.Load()
	t.Logf("%d jobs at 2 per 300ms ran in %s with %d claims", n, elapsed.Round(time.Millisecond), made)
	// 5 windows' worth: the last pair cannot start before 4 windows have passed.
	if elapsed < 4*300*time.Millisecond {
		t.Fatalf("%d jobs ran in %s, faster than 2 per 300ms allows", n, elapsed)
	}
	if made > 3*n {
		t.Fatalf("%d claims for %d jobs: the loop spins instead of waiting for the next start", made, n)
	}
}

// sleepArgs is the payload of a "sleep" job, run by the "sleeper" helper processes.
type sleepArgs struct {
	MS int `json:"ms"`
}

// addSleepHandler registers the "sleep" kind: the job sleeps MS milliseconds and completes.
func addSleepHandler(hs *driver.Handlers) {
	driver.AddHandler(hs, "sleep", func(ctx context.Context, job *driver.Job[sleepArgs]) error {
		select {
		case <-time.After(time.Duration(job.Payload.MS) * time.Millisecond):
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}, nil)
}

// A worker process killed with SIGKILL while it holds the whole of a queue's max_running
// leaks no slot: the jobs hold their slots only until their leases expire and
// jobs_requeue_expired takes them back, then another worker runs the queue at its limit
// again. Running jobs never exceed the limit meanwhile (sampled continuously).
func TestKillWorkerHoldingLimitedJobs(t *testing.T) {
	t.Parallel()
	b := setup(t)
	const n, limit = 16, 4
	if _, err := b.pool.Exec(context.Background(), "SELECT jobs_set_concurrency('default', $1)", limit); err != nil {
		t.Fatal(err)
	}
	params := make([]driver.EnqueueParams, n)
	for i := range params {
		params[i] = driver.EnqueueParams{Kind: "sleep", Payload: sleepArgs{MS: 1000}}
	}
	if _, err := driver.EnqueueMany(context.Background(), b.pool, params); err != nil {
		t.Fatal(err)
	}

	var (
		maxRunning atomic.Int64
		sampling   sync.WaitGroup
	)
	ctx, stopSampling := context.WithCancel(context.Background())
	sampling.Add(1)
	go func() {
		defer sampling.Done()
		for ctx.Err() == nil {
			var running int64
			if err := b.pool.QueryRow(ctx, "SELECT count(*) FROM jobs WHERE state = 'running'").Scan(&running); err != nil {
				return
			}
			if running > maxRunning.Load() {
				maxRunning.Store(running)
			}
		}
	}()
	defer func() {
		stopSampling()
		sampling.Wait()
	}()

	victim := startHelper(t, "sleeper", b.url, "victim", 8, 2*time.Second)
	waitUntil(t, 20*time.Second, "the victim holding the queue's slots", func() bool {
		return queryInt(t, b.pool, "SELECT count(*) FROM jobs WHERE state = 'running' AND lease_holder = 'victim'") == limit
	})
	victim.Kill()
	if r := queryInt(t, b.pool, "SELECT count(*) FROM jobs WHERE state = 'running' AND lease_holder = 'victim'"); r != limit {
		t.Fatalf("%d jobs running for the killed victim, want %d (killed before it finished any)", r, limit)
	}

	rescuer := startHelper(t, "sleeper", b.url, "rescuer", 8, 2*time.Second)
	waitUntil(t, 20*time.Second, "the rescuer running at the limit", func() bool {
		return queryInt(t, b.pool, "SELECT count(*) FROM jobs WHERE state = 'running' AND lease_holder = 'rescuer'") == limit
	})
	waitUntil(t, time.Minute, "every job done", func() bool {
		return queryInt(t, b.pool, "SELECT count(*) FROM jobs WHERE state = 'done'") == n
	})
	rescuer.stop(t)
	stopSampling()
	sampling.Wait()
	t.Logf("max_running %d: most running observed %d", limit, maxRunning.Load())
	if m := maxRunning.Load(); m > limit {
		t.Fatalf("%d jobs running at once, max_running %d", m, limit)
	}
}

// EnqueueOpts.ConcurrencyKey reaches the job, in Enqueue and EnqueueMany; "" is no key.
func TestEnqueueConcurrencyKey(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id := mustEnqueue(t, b.pool, "k", nil, &driver.EnqueueOpts{ConcurrencyKey: "customer-1"})
	ids, err := driver.EnqueueMany(context.Background(), b.pool, []driver.EnqueueParams{
		{Kind: "k", Opts: &driver.EnqueueOpts{ConcurrencyKey: "customer-2"}},
		{Kind: "k"},
	})
	if err != nil {
		t.Fatal(err)
	}
	var keys []*string
	for _, i := range append([]int64{id}, ids...) {
		var k *string
		if err := b.pool.QueryRow(context.Background(), "SELECT concurrency_key FROM jobs WHERE id = $1", i).Scan(&k); err != nil {
			t.Fatal(err)
		}
		keys = append(keys, k)
	}
	if keys[0] == nil || *keys[0] != "customer-1" || keys[1] == nil || *keys[1] != "customer-2" || keys[2] != nil {
		t.Fatalf("concurrency keys %v, want customer-1, customer-2, NULL", keys)
	}
	_, err = driver.Enqueue(context.Background(), b.pool, "k", nil, &driver.EnqueueOpts{ConcurrencyKey: strings.Repeat("x", 201)})
	var inv *driver.InvalidError
	if !errors.As(err, &inv) || inv.Field != "concurrency_key" {
		t.Fatalf("Enqueue with a 201-byte key: %v, want an InvalidError for concurrency_key", err)
	}
}

// An operator's transaction holding a limited queue's jobs_queues row (an open
// jobs_set_concurrency) for longer than the lease holds back no completion: every job that
// finishes meanwhile is done at once, none waits for its lease to lapse and runs again, and
// each is reported completed once. The completions go out as jobs_complete_and_claim calls
// (the fetch loop's cooldown leaves the claims to them), whose claim skips the held queue;
// the loop's own claim then waits for the row, which holds no completion back.
// The row is held past the driver's call timeout (10 s) when the completions do not get
// through, so that a waiting call times out and its jobs' lapsed leases are taken back (by
// a session standing for other workers' maintenance) before its retry completes them.
func TestCompletionsDoNotWaitForHeldQueueRow(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	const n = 5
	if _, err := b.pool.Exec(ctx, "SELECT jobs_set_concurrency('api', 10)"); err != nil {
		t.Fatal(err)
	}
	var runs sync.Map // job id -> *atomic.Int32
	var started atomic.Int32
	hs := driver.NewHandlers()
	driver.AddHandler(hs, "slow", func(ctx context.Context, job *driver.Job[struct{}]) error {
		v, _ := runs.LoadOrStore(job.ID, new(atomic.Int32))
		v.(*atomic.Int32).Add(1)
		started.Add(1)
		select {
		case <-time.After(time.Second):
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}, nil)
	rec := &cycleRecorder{}
	cfg := baseConfig(b, hs, map[string]driver.QueueConfig{"api": {Slots: n, BatchSize: n}})
	cfg.Lease = 2 * time.Second
	cfg.RequeueInterval = 100 * time.Millisecond // a lapsed lease is taken back at once
	// The loop's next claim waits out 3 s after its first: the jobs' completions (after 1 s)
	// claim for it, as jobs_complete_and_claim calls.
	cfg.FetchCooldown = 3 * time.Second
	cfg.Hook = rec
	params := make([]driver.EnqueueParams, n)
	for i := range params {
		params[i] = driver.EnqueueParams{Kind: "slow", Opts: &driver.EnqueueOpts{Queue: "api"}}
	}
	if _, err := driver.EnqueueMany(ctx, b.pool, params); err != nil {
		t.Fatal(err)
	}
	startClient(t, b.pool, cfg)
	waitUntil(t, 10*time.Second, "every job started", func() bool { return started.Load() == n })

	// Other workers' maintenance, every 10 ms: a lapsed lease is taken back as soon as no
	// call holds the job's row (a timed-out call's retry is 50 ms later).
	requeuer := pgtest.NewConn(t, b.url)
	requeueCtx, stopRequeue := context.WithCancel(ctx)
	var requeuing sync.WaitGroup
	requeuing.Go(func() {
		for requeueCtx.Err() == nil {
			_, _ = requeuer.Exec(requeueCtx, "SELECT jobs_requeue_expired()")
			time.Sleep(10 * time.Millisecond)
		}
	})
	defer requeuing.Wait()
	defer stopRequeue()

	operator := pgtest.NewConn(t, b.url)
	if _, err := operator.Exec(ctx, "BEGIN"); err != nil {
		t.Fatal(err)
	}
	if _, err := operator.Exec(ctx, "SELECT jobs_set_concurrency('api', 10)"); err != nil {
		t.Fatal(err)
	}
	held := time.Now()
	allDone := func() bool {
		return queryInt(t, b.pool, "SELECT count(*) FROM jobs WHERE state = 'done'") == n
	}
	// The jobs end about a second after they started; their completions must commit while
	// the row is held. Past the lease they would be taken back.
	doneWhileHeld := false
	for deadline := held.Add(8 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if doneWhileHeld = allDone(); doneWhileHeld {
			break
		}
	}
	if !doneWhileHeld {
		t.Errorf("%d of %d jobs done after the queue's row was held for %s: their completions wait behind it",
			queryInt(t, b.pool, "SELECT count(*) FROM jobs WHERE state = 'done'"), n, time.Since(held).Round(time.Millisecond))
		time.Sleep(time.Until(held.Add(13 * time.Second))) // past the call timeout
	} else {
		time.Sleep(time.Until(held.Add(2 * cfg.Lease))) // past the lease of every job
	}
	if _, err := operator.Exec(ctx, "COMMIT"); err != nil {
		t.Fatal(err)
	}

	waitUntil(t, 30*time.Second, "every job done", allDone)
	waitUntil(t, 10*time.Second, "a completed event per job", func() bool { return rec.completed.Load() >= n })
	if bad := queryInt(t, b.pool, "SELECT count(*) FROM jobs WHERE attempts <> 1"); bad != 0 {
		t.Errorf("%d jobs done at a later attempt than 1: they ran again", bad)
	}
	runs.Range(func(id, v any) bool {
		if r := v.(*atomic.Int32).Load(); r != 1 {
			t.Errorf("job %d ran %d times, want once", id, r)
		}
		return true
	})
	if c, l := rec.completed.Load(), rec.lost.Load(); c != n || l != 0 {
		t.Errorf("%d completed and %d lost events, want %d and 0", c, l, n)
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if len(rec.carrying) == 0 {
		t.Error("no completion went out with a claim (jobs_complete_and_claim): the test did not exercise it")
	}
}

// A queue whose max_running equals the client's slots, worked by that client alone, is
// claimed as the server counts its running jobs: the fetch loop leaves alone the slots of
// jobs that finished but whose completion the completer has not yet committed (the server
// still counts them), and the completer's claim takes those slots over as its completions
// free them. So no claim asks for more than the limit grants while the backlog lasts (such
// a claim comes back short, often empty, and leaves the loop waiting for a notification:
// the limited queue's serialisation this avoids); those at the drain's end find it gone.
func TestLimitedQueueClaimsWhatTheServerGrants(t *testing.T) {
	t.Parallel()
	const slots, jobs = 10, 3000
	rec := drainWith(t, driver.QueueConfig{Slots: slots}, jobs, nil,
		fmt.Sprintf("SELECT jobs_set_concurrency('default', %d)", slots))
	rec.mu.Lock()
	defer rec.mu.Unlock()
	short, got := 0, 0
	for _, c := range rec.claims {
		got += c.Claimed
		// The last claims of the drain take what is left.
		if c.Claimed < c.Asked && got < jobs-2*slots {
			short++
		}
	}
	t.Logf("%d claims, %d of them short of their ask while the backlog lasted", len(rec.claims), short)
	if short > 5 {
		t.Errorf("%d claims of the limited queue asked for more jobs than its limit granted while the backlog lasted, want at most 5", short)
	}
}
