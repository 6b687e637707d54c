package driver_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/skiplock/skiplock/driver"
)

// notifyCounter is a session LISTENing on jobs_ready that records every notification.
type notifyCounter struct {
	mu     sync.Mutex
	got    []receivedNotify
	cancel context.CancelFunc
	done   chan struct{}
}

type receivedNotify struct {
	queue string
	at    time.Time
}

func countNotifications(t *testing.T, url string) *notifyCounter {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(t.Context(), "LISTEN jobs_ready"); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	c := &notifyCounter{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(c.done)
		for {
			n, err := conn.WaitForNotification(ctx)
			if err != nil {
				return
			}
			c.mu.Lock()
			c.got = append(c.got, receivedNotify{n.Payload, time.Now()})
			c.mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		c.cancel()
		<-c.done
		_ = conn.Close(context.Background())
	})
	return c
}

// of returns the notifications received so far for queue.
func (c *notifyCounter) of(queue string) []time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	var at []time.Time
	for _, n := range c.got {
		if n.queue == queue {
			at = append(at, n.at)
		}
	}
	return at
}

// A burst of enqueues through a pool, of which all but the first pass notify => false,
// still wakes an idle client that would otherwise wait a minute for its poll: every job,
// the burst's last included, starts within the cooldown (plus a second of slack for a
// loaded machine's round trips) of its enqueue's return, thanks to the window's deferred
// jobs_notify.
func TestNotifyThrottleWakesIdleWorker(t *testing.T) {
	t.Parallel()
	b := setup(t)
	const cooldown = 300 * time.Millisecond
	// The round trips after the window's end: a notification, a claim, a start. A loaded
	// machine (the -short suite's packages in parallel on 2 cores) has seen 400 ms; without
	// the deferred notification the jobs would wait for the minute's poll.
	const slack = time.Second
	var mu sync.Mutex
	started := map[int64]time.Time{}
	hs := driver.NewHandlers()
	driver.AddHandler(hs, "burst", func(ctx context.Context, job *driver.Job[struct{}]) error {
		mu.Lock()
		started[job.ID] = time.Now()
		mu.Unlock()
		return nil
	}, nil)
	cfg := baseConfig(b, hs, map[string]driver.QueueConfig{"burst": {Slots: 50}})
	cfg.PollInterval = time.Minute
	startClient(t, b.pool, cfg)
	counter := countNotifications(t, b.url)

	// Let the client's first claim (at start) and its LISTEN happen: a job it starts
	// proves both.
	warm := mustEnqueue(t, b.pool, "burst", nil, &driver.EnqueueOpts{Queue: "burst", NotifyCooldown: -1})
	waitUntil(t, 10*time.Second, "warm-up job done", jobStateIs(t, b.pool, warm, "done"))

	for round := range 3 {
		// 8 goroutines enqueue 5 jobs each, at once: one opens the window, the rest skip.
		const goroutines, each = 8, 5
		var wg sync.WaitGroup
		returned := make(chan [2]int64, goroutines*each) // id, return time
		before := len(counter.of("burst"))
		burstStart := time.Now()
		for range goroutines {
			wg.Go(func() {
				for range each {
					id, err := driver.Enqueue(context.Background(), b.pool, "burst", nil,
						&driver.EnqueueOpts{Queue: "burst", NotifyCooldown: cooldown})
					if err != nil {
						t.Errorf("Enqueue: %v", err)
						return
					}
					returned <- [2]int64{id, time.Now().UnixNano()}
				}
			})
		}
		wg.Wait()
		close(returned)
		burst := time.Since(burstStart)
		var rs [][2]int64
		for r := range returned {
			rs = append(rs, r)
		}
		if len(rs) != goroutines*each {
			t.Fatalf("round %d: %d enqueues returned, want %d", round, len(rs), goroutines*each)
		}
		waitUntil(t, 10*time.Second, "every job of the burst started", func() bool {
			mu.Lock()
			defer mu.Unlock()
			for _, r := range rs {
				if _, ok := started[r[0]]; !ok {
					return false
				}
			}
			return true
		})
		mu.Lock()
		for _, r := range rs {
			returnedAt := time.Unix(0, r[1])
			if wait := started[r[0]].Sub(returnedAt); wait > cooldown+slack {
				t.Errorf("round %d: job %d started %s after its enqueue returned, want within %s",
					round, r[0], wait, cooldown+slack)
			}
		}
		mu.Unlock()
		// The throttle was at work: one notification inline, then one per window the
		// burst reached into, far fewer than the enqueues.
		limit := 2 + int(burst/cooldown)
		if got := len(counter.of("burst")) - before; got > limit {
			t.Fatalf("round %d: %d notifications for %d enqueues in %s, want at most %d", round, got, len(rs), burst, limit)
		}
		time.Sleep(2 * cooldown) // the queue's windows close: the next round opens anew
	}
}

// Under steady enqueueing from 8 goroutines into two queues, each queue gets at most one
// notification per cooldown window (plus the one that opened the first window), however
// many jobs go in; EnqueueMany takes part like Enqueue.
func TestNotifyThrottleOnePerWindow(t *testing.T) {
	t.Parallel()
	b := setup(t)
	counter := countNotifications(t, b.url)
	const cooldown = 50 * time.Millisecond
	const duration = 1500 * time.Millisecond
	queues := []string{"qa", "qb"}
	ctx := context.Background()

	start := time.Now()
	var wg sync.WaitGroup
	var mu sync.Mutex
	enqueued := map[string]int{}
	for g := range 8 {
		wg.Go(func() {
			for i := 0; time.Since(start) < duration; i++ {
				q := queues[(g+i)%2]
				opts := &driver.EnqueueOpts{Queue: q, NotifyCooldown: cooldown}
				var err error
				if g == 0 {
					_, err = driver.EnqueueMany(ctx, b.pool, []driver.EnqueueParams{
						{Kind: "k", Opts: opts}, {Kind: "k", Opts: opts}})
				} else {
					_, err = driver.Enqueue(ctx, b.pool, "k", nil, opts)
				}
				if err != nil {
					t.Errorf("enqueue: %v", err)
					return
				}
				mu.Lock()
				enqueued[q]++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	// The last window's notification comes after the last enqueue returned.
	time.Sleep(cooldown + 500*time.Millisecond)

	for _, q := range queues {
		got := counter.of(q)
		limit := int(elapsed/cooldown) + 2
		t.Logf("queue %s: %d enqueue calls, %d notifications in %s (cooldown %s, limit %d)",
			q, enqueued[q], len(got), elapsed, cooldown, limit)
		if len(got) == 0 {
			t.Fatalf("queue %s: no notification at all", q)
		}
		if len(got) > limit {
			t.Errorf("queue %s: %d notifications in %s, want at most %d (one per %s window, plus the first)",
				q, len(got), elapsed, limit, cooldown)
		}
		if enqueued[q] < 2*len(got) {
			t.Errorf("queue %s: %d notifications for only %d enqueue calls: too few calls to show the throttle",
				q, len(got), enqueued[q])
		}
	}
}

// Enqueues whose commit the driver does not perform notify inline, whatever the window:
// through a pgx.Tx the notification comes at the caller's commit, through a *pgx.Conn at
// once, long before the open window's own notification. NotifyCooldown -1 notifies inline
// too.
func TestNotifyThrottleInlineOutsidePool(t *testing.T) {
	t.Parallel()
	b := setup(t)
	counter := countNotifications(t, b.url)
	ctx := context.Background()
	const cooldown = time.Minute // the open window's notification comes far too late

	waitNotified := func(queue string, want int) {
		t.Helper()
		waitUntil(t, 5*time.Second, "notification", func() bool { return len(counter.of(queue)) >= want })
	}

	// Opens a one-minute window of queue "q" on b.pool.
	mustEnqueue(t, b.pool, "k", nil, &driver.EnqueueOpts{Queue: "q", NotifyCooldown: cooldown})
	waitNotified("q", 1)

	tx, err := b.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	mustEnqueue(t, tx, "k", nil, &driver.EnqueueOpts{Queue: "q", NotifyCooldown: cooldown})
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	waitNotified("q", 2)

	conn, err := b.pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	mustEnqueue(t, conn.Conn(), "k", nil, &driver.EnqueueOpts{Queue: "q", NotifyCooldown: cooldown})
	conn.Release()
	waitNotified("q", 3)

	mustEnqueue(t, b.pool, "k", nil, &driver.EnqueueOpts{Queue: "q", NotifyCooldown: -1})
	waitNotified("q", 4)
	if _, err := driver.EnqueueMany(ctx, b.pool, []driver.EnqueueParams{
		{Kind: "k", Opts: &driver.EnqueueOpts{Queue: "q", NotifyCooldown: cooldown}},
		{Kind: "k", Opts: &driver.EnqueueOpts{Queue: "q", NotifyCooldown: -1}},
	}); err != nil {
		t.Fatal(err)
	}
	waitNotified("q", 5)

	// A job not ready now takes no part: it neither notifies nor opens a window, so the
	// next ready job of its queue notifies inline.
	mustEnqueue(t, b.pool, "k", nil, &driver.EnqueueOpts{Queue: "later", Delay: time.Hour, NotifyCooldown: cooldown})
	mustEnqueue(t, b.pool, "k", nil, &driver.EnqueueOpts{Queue: "later", NotifyCooldown: cooldown})
	waitNotified("later", 1)
}

func TestNotifyCooldownInvalid(t *testing.T) {
	t.Parallel()
	b := setup(t)
	_, err := driver.Enqueue(context.Background(), b.pool, "k", nil, &driver.EnqueueOpts{NotifyCooldown: -2})
	var inv *driver.InvalidError
	if !errors.As(err, &inv) || inv.Field != "EnqueueOpts.NotifyCooldown" {
		t.Fatalf("Enqueue with NotifyCooldown -2: %v, want an *InvalidError for EnqueueOpts.NotifyCooldown", err)
	}
}

// A program that enqueues through a pool of its own and closes the pool at once (a CLI,
// a request handler's short-lived pool) still wakes the idle workers: the window's
// deferred jobs_notify goes out on a connection of its own when the pool is closed, so no
// job waits for the workers' poll. Regression: the deferred notification failed on the
// closed pool and every skipped enqueue's job waited a poll interval.
func TestNotifyThrottleSurvivesPoolClose(t *testing.T) {
	t.Parallel()
	b := setup(t)
	const cooldown = 300 * time.Millisecond
	var mu sync.Mutex
	started := map[int64]time.Time{}
	hs := driver.NewHandlers()
	driver.AddHandler(hs, "closing", func(ctx context.Context, job *driver.Job[struct{}]) error {
		mu.Lock()
		started[job.ID] = time.Now()
		mu.Unlock()
		return nil
	}, nil)
	cfg := baseConfig(b, hs, map[string]driver.QueueConfig{"closing": {Slots: 50}})
	cfg.PollInterval = time.Minute
	startClient(t, b.pool, cfg)
	warm := mustEnqueue(t, b.pool, "closing", nil, &driver.EnqueueOpts{Queue: "closing", NotifyCooldown: -1})
	waitUntil(t, 10*time.Second, "warm-up job done", jobStateIs(t, b.pool, warm, "done"))

	for round := range 2 {
		producer := newPool(t, b.url, 8)
		var ids []int64
		var idsMu sync.Mutex
		var wg sync.WaitGroup
		for range 8 {
			wg.Go(func() {
				for range 3 {
					id, err := driver.Enqueue(context.Background(), producer, "closing", nil,
						&driver.EnqueueOpts{Queue: "closing", NotifyCooldown: cooldown})
					if err != nil {
						t.Errorf("Enqueue: %v", err)
						return
					}
					idsMu.Lock()
					ids = append(ids, id)
					idsMu.Unlock()
				}
			})
		}
		wg.Wait()
		producer.Close()
		closedAt := time.Now()
		waitUntil(t, 10*time.Second, "every job enqueued before the pool closed started", func() bool {
			mu.Lock()
			defer mu.Unlock()
			for _, id := range ids {
				if _, ok := started[id]; !ok {
					return false
				}
			}
			return true
		})
		mu.Lock()
		for _, id := range ids {
			if wait := started[id].Sub(closedAt); wait > cooldown+time.Second {
				t.Errorf("round %d: job %d started %s after the pool closed, want within %s", round, id, wait, cooldown+time.Second)
			}
		}
		mu.Unlock()
		time.Sleep(2 * cooldown)
	}
}

// A program that exits right after enqueueing calls FlushNotify: the notification owed
// for an enqueue that skipped its own (inside an open window) goes out at once, not when
// the window ends, and after FlushNotify returns nothing is owed (FlushNotify again sends
// nothing). Without it the job would wait the whole window (here 20s, standing in for a
// process that exited and took the window's timer with it).
//
// Not parallel: FlushNotify is process-wide, so it would also send what the parallel
// throttle tests' windows owe, a notification early inside their window, and those tests
// count notifications per window.
func TestFlushNotifySendsWhatTheThrottleOwes(t *testing.T) {
	b := setup(t)
	const cooldown = 20 * time.Second
	started := make(chan int64, 10)
	hs := driver.NewHandlers()
	driver.AddHandler(hs, "flushed", func(ctx context.Context, job *driver.Job[struct{}]) error {
		started <- job.ID
		return nil
	}, nil)
	cfg := baseConfig(b, hs, map[string]driver.QueueConfig{"flushed": {Slots: 5}})
	cfg.PollInterval = time.Minute
	startClient(t, b.pool, cfg)
	counter := countNotifications(t, b.url)
	// Let the client's first claim (at start) and its LISTEN happen, and the warm-up job's
	// notification arrive: a later wake-up would claim the job meant to wait.
	warm := mustEnqueue(t, b.pool, "flushed", nil, &driver.EnqueueOpts{Queue: "flushed", NotifyCooldown: -1})
	if got := <-started; got != warm {
		t.Fatalf("started job %d, want %d", got, warm)
	}
	time.Sleep(300 * time.Millisecond)
	opts := &driver.EnqueueOpts{Queue: "flushed", NotifyCooldown: cooldown}
	first := mustEnqueue(t, b.pool, "flushed", nil, opts) // notifies inline, opens the window
	if got := <-started; got != first {
		t.Fatalf("started job %d, want %d", got, first)
	}
	time.Sleep(300 * time.Millisecond)                     // its notification arrived: the next wake-up is FlushNotify's
	second := mustEnqueue(t, b.pool, "flushed", nil, opts) // skips its notification
	select {
	case id := <-started:
		t.Fatalf("job %d started before FlushNotify: the enqueue did not skip its notification", id)
	case <-time.After(300 * time.Millisecond):
	}
	before := len(counter.of("flushed"))
	// An earlier test's pool, closed by now, may still owe a notification: its error is
	// not this test's.
	if err := driver.FlushNotify(t.Context()); err != nil && strings.Contains(err.Error(), `"flushed"`) {
		t.Fatalf("FlushNotify: %v", err)
	}
	select {
	case got := <-started:
		if got != second {
			t.Fatalf("started job %d, want %d", got, second)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the skipped enqueue's job did not start within 5s of FlushNotify")
	}
	if err := driver.FlushNotify(t.Context()); err != nil && strings.Contains(err.Error(), `"flushed"`) {
		t.Fatalf("second FlushNotify: %v", err)
	}
	time.Sleep(200 * time.Millisecond)
	if got := len(counter.of("flushed")) - before; got != 1 {
		t.Fatalf("%d notifications from two FlushNotify calls, want 1", got)
	}
}

// A worker process's handlers enqueue follow-up jobs through the client's pool; when the
// client stops (and the process would exit), Run sends the notifications the throttle owes
// for them, so another process's idle worker starts them at once instead of at its poll.
func TestRunFlushesNotifyOnStop(t *testing.T) {
	t.Parallel()
	b := setup(t)
	const cooldown = 20 * time.Second
	enqueued := make(chan [2]int64, 1)
	firstEnqueued := make(chan int64, 1)
	firstStarted := make(chan struct{})
	producerHandlers := driver.NewHandlers()
	driver.AddHandler(producerHandlers, "produce", func(ctx context.Context, job *driver.Job[struct{}]) error {
		opts := &driver.EnqueueOpts{Queue: "followups", NotifyCooldown: cooldown}
		first, err := driver.Enqueue(ctx, b.pool, "followup", nil, opts) // inline, opens the window
		if err != nil {
			return err
		}
		// The worker claims the first before the second exists (one claim would take both).
		firstEnqueued <- first
		select {
		case <-firstStarted:
		case <-ctx.Done():
			return ctx.Err()
		}
		second, err := driver.Enqueue(ctx, b.pool, "followup", nil, opts) // skips its notification
		if err != nil {
			return err
		}
		enqueued <- [2]int64{first, second}
		return nil
	}, nil)
	producerCfg := baseConfig(b, producerHandlers, map[string]driver.QueueConfig{"default": {Slots: 1}})
	producer, err := driver.NewClient(b.pool, producerCfg)
	if err != nil {
		t.Fatal(err)
	}
	runDone := make(chan error, 1)
	go func() { runDone <- producer.Run(context.Background()) }()
	t.Cleanup(func() { _ = producer.Stop(context.Background()) })

	// The other process: its own pool, an idle worker that only a notification wakes.
	started := make(chan int64, 10)
	workerHandlers := driver.NewHandlers()
	driver.AddHandler(workerHandlers, "followup", func(ctx context.Context, job *driver.Job[struct{}]) error {
		started <- job.ID
		return nil
	}, nil)
	workerCfg := baseConfig(b, workerHandlers, map[string]driver.QueueConfig{"followups": {Slots: 5}})
	workerCfg.PollInterval = time.Minute
	startClient(t, newPool(t, b.url, 5), workerCfg)
	warm := mustEnqueue(t, b.pool, "followup", nil, &driver.EnqueueOpts{Queue: "followups", NotifyCooldown: -1})
	if got := <-started; got != warm {
		t.Fatalf("started job %d, want the warm-up %d", got, warm)
	}
	time.Sleep(300 * time.Millisecond)

	mustEnqueue(t, b.pool, "produce", nil, &driver.EnqueueOpts{NotifyCooldown: -1})
	first := <-firstEnqueued
	if got := <-started; got != first {
		t.Fatalf("started job %d, want the first follow-up %d", got, first)
	}
	close(firstStarted)
	ids := <-enqueued
	select {
	case id := <-started:
		t.Fatalf("job %d started before the producer stopped: the second enqueue did not skip its notification", id)
	case <-time.After(300 * time.Millisecond):
	}
	if err := producer.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := <-runDone; err != nil {
		t.Fatalf("Run: %v", err)
	}
	select {
	case got := <-started:
		if got != ids[1] {
			t.Fatalf("started job %d, want the second follow-up %d", got, ids[1])
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the follow-up enqueued without a notification did not start within 5s of Run's return")
	}
}
