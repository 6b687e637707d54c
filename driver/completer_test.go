package driver_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/skiplock/skiplock/driver"
	"github.com/skiplock/skiplock/tests/pgtest"
)

// A completion batch whose connection dies is sent again, not dropped: the job is done at
// its first attempt, long before its lease could expire.
func TestCompletionRetriedAfterConnectionLoss(t *testing.T) {
	t.Parallel()
	b := setup(t)
	started := make(chan struct{})
	proceed := make(chan struct{})
	hs := driver.NewHandlers()
	driver.AddHandler(hs, "quick", func(ctx context.Context, job *driver.Job[struct{}]) error {
		close(started)
		<-proceed
		return nil
	}, nil)
	cfg := baseConfig(b, hs, map[string]driver.QueueConfig{"default": {}})
	cfg.Lease = time.Minute
	cfg.RequeueInterval = -1
	startClient(t, b.pool, cfg)

	// Hold the running job's row lock, so that its completion blocks where we can kill its
	// connection. The completion goes out as jobs_complete_many, or as jobs_complete_and_claim
	// when the queue's fetch loop has a free slot and reason to claim at that moment.
	id := mustEnqueue(t, b.pool, "quick", nil, nil)
	<-started
	blocker := pgtest.NewConn(t, b.url)
	ctx := context.Background()
	if _, err := blocker.Exec(ctx, "BEGIN"); err != nil {
		t.Fatal(err)
	}
	if _, err := blocker.Exec(ctx, "SELECT 1 FROM jobs WHERE id = $1 FOR UPDATE", id); err != nil {
		t.Fatal(err)
	}
	close(proceed)

	killed := 0
	for killed < 2 {
		var n int
		waitUntil(t, 10*time.Second, "a blocked completion", func() bool {
			n = queryInt(t, b.pool, `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
				WHERE datname = current_database() AND wait_event_type = 'Lock'
				  AND (query LIKE '%jobs_complete_many%' OR query LIKE '%jobs_complete_and_claim%')`)
			return n > 0
		})
		killed += n
	}
	if _, err := blocker.Exec(ctx, "COMMIT"); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 10*time.Second, "job done", jobStateIs(t, b.pool, id, "done"))
	if j := getJob(t, b.pool, id); j.Attempts != 1 {
		t.Fatalf("job = %+v, want done at attempt 1", j)
	}
}

// A limited queue's completion waits up to CompleteBatchDelay for others to join its batch
// only while other jobs run: the last running job's completion goes out at once, since the
// server holds its slot until then. Here the delay is 3 s and each job is alone, so each
// one's completion begins within a third of it. With two jobs running, the first to finish
// waits for the second (which finishes 300 ms later), not for the delay, and both go out in
// one batch. An unlimited queue's lone completion waits the delay (batched completions cost
// fewer commits).
func TestLastRunningJobOfALimitedQueueCompletesWithoutTheBatchDelay(t *testing.T) {
	t.Parallel()
	b := setup(t)
	mustExecPool(t, b, "SELECT jobs_set_concurrency('default', 5)")
	var mu sync.Mutex
	returned := map[int64]time.Time{}
	hs := driver.NewHandlers()
	driver.AddHandler(hs, "job", func(ctx context.Context, job *driver.Job[struct{ SleepMS int }]) error {
		time.Sleep(time.Duration(job.Payload.SleepMS) * time.Millisecond)
		mu.Lock()
		returned[job.ID] = time.Now()
		mu.Unlock()
		return nil
	}, nil)
	cfg := baseConfig(b, hs, map[string]driver.QueueConfig{"default": {Slots: 5}})
	cfg.CompleteBatchDelay = 3 * time.Second
	cfg.Lease = time.Minute // its heartbeat would flush the completion
	startClient(t, b.pool, cfg)
	// waited is how long after its handler returned a job's completion began: its finished_at
	// is the now() of the completing transaction (the server's clock, on this machine), so
	// neither the commit nor the polling for "done" counts.
	waited := func(id int64) time.Duration {
		var finishedAt time.Time
		if err := b.pool.QueryRow(context.Background(), "SELECT finished_at FROM jobs WHERE id = $1", id).Scan(&finishedAt); err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		defer mu.Unlock()
		return finishedAt.Sub(returned[id])
	}
	const within = time.Second // a third of the delay: a loaded -race run took 670 ms to see "done"
	for range 3 {
		id := mustEnqueue(t, b.pool, "job", map[string]int{"SleepMS": 0}, nil)
		waitUntil(t, 10*time.Second, "job done", jobStateIs(t, b.pool, id, "done"))
		if took := waited(id); took > within {
			t.Fatalf("job %d was done %s after its handler returned, want within %s (no other job was running)", id, took, within)
		}
	}
	ids, err := driver.EnqueueMany(context.Background(), b.pool, []driver.EnqueueParams{
		{Kind: "job", Payload: map[string]int{"SleepMS": 0}}, {Kind: "job", Payload: map[string]int{"SleepMS": 300}}})
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range ids {
		waitUntil(t, 10*time.Second, "job done", jobStateIs(t, b.pool, id, "done"))
	}
	if took := waited(ids[1]); took > within {
		t.Errorf("the second job was done %s after its handler returned, want within %s (then nothing ran)", took, within)
	}
	var finished int
	if err := b.pool.QueryRow(context.Background(),
		"SELECT count(DISTINCT finished_at) FROM jobs WHERE id = ANY ($1)", ids).Scan(&finished); err != nil {
		t.Fatal(err)
	}
	if finished != 1 {
		t.Errorf("the two jobs were completed in %d transactions, want 1 (the first waits for the second)", finished)
	}

	mustExecPool(t, b, "SELECT jobs_set_concurrency('default', NULL)")
	time.Sleep(cfg.PollInterval + 200*time.Millisecond) // the client asks jobs_queue_limited again
	id := mustEnqueue(t, b.pool, "job", map[string]int{"SleepMS": 0}, nil)
	waitUntil(t, 10*time.Second, "job done", jobStateIs(t, b.pool, id, "done"))
	if took := waited(id); took < 2*time.Second {
		t.Errorf("a job of an unlimited queue was done %s after its handler returned, want the batch delay (3 s)", took)
	}
}

// Run returns an error, rather than retrying for ever, when skiplock is not installed in
// the database it was pointed at.
func TestRunNotInstalled(t *testing.T) {
	t.Parallel()
	url := pgtest.NewEmptyDatabase(t)
	pool := newPool(t, url, 4)
	hs := driver.NewHandlers()
	driver.AddHandler(hs, "noop", func(ctx context.Context, job *driver.Job[struct{}]) error { return nil }, nil)
	client, err := driver.NewClient(pool, &driver.Config{
		Queues:   map[string]driver.QueueConfig{"default": {}},
		Handlers: hs,
		Logger:   testLogger(t),
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	err = client.Run(ctx)
	if err == nil || ctx.Err() != nil {
		t.Fatalf("Run = %v (ctx %v), want an error before the deadline", err, ctx.Err())
	}
	t.Logf("Run: %v", err)
}

// The hook sees a started and a completed event for each of many jobs, with durations.
func TestHookEvents(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var started, completed atomic.Int32
	var badDuration atomic.Bool
	hs := driver.NewHandlers()
	driver.AddHandler(hs, "tick", func(ctx context.Context, job *driver.Job[struct{}]) error {
		time.Sleep(time.Millisecond)
		return nil
	}, nil)
	cfg := baseConfig(b, hs, map[string]driver.QueueConfig{"default": {Slots: 20}})
	cfg.Hook = driver.HookFunc(func(e *driver.Event) {
		switch e.Kind {
		case driver.EventStarted:
			started.Add(1)
		case driver.EventCompleted:
			if e.Duration < time.Millisecond {
				badDuration.Store(true)
			}
			completed.Add(1)
		}
	})
	params := make([]driver.EnqueueParams, 500)
	for i := range params {
		params[i] = driver.EnqueueParams{Kind: "tick"}
	}
	if _, err := driver.EnqueueMany(context.Background(), b.pool, params); err != nil {
		t.Fatal(err)
	}
	startClient(t, b.pool, cfg)
	waitUntil(t, 20*time.Second, "500 completed events", func() bool { return completed.Load() == 500 })
	if started.Load() != 500 || badDuration.Load() {
		t.Fatalf("started=%d badDuration=%v", started.Load(), badDuration.Load())
	}
}

// A batch of completions the database refuses for one job's result (3,500 × 1e300: 24 KB as
// Go's JSON, which SetResult accepts, but over 1 MB as jsonb's text, where each number has
// 301 digits) is completed one job at a time: the other jobs are done with their results,
// the one whose result was refused is cancelled with a last_error saying so, and no job runs
// twice.
func TestCompletionBatchWithARefusedResult(t *testing.T) {
	t.Parallel()
	b := setup(t)
	const jobs = 11
	big := make([]float64, 3500)
	for i := range big {
		big[i] = 1e300
	}
	var mu sync.Mutex
	runs := map[int64]int{}
	hs := driver.NewHandlers()
	driver.AddHandler(hs, "result", func(ctx context.Context, job *driver.Job[struct{ N int }]) error {
		mu.Lock()
		runs[job.ID]++
		mu.Unlock()
		if job.Payload.N == 0 {
			if err := job.SetResult(big); err != nil {
				t.Errorf("SetResult of 3,500 × 1e300: %v, want it accepted (the database decides)", err)
			}
			return nil
		}
		return job.SetResult(map[string]int{"n": job.Payload.N})
	}, nil)
	params := make([]driver.EnqueueParams, jobs)
	for i := range params {
		params[i] = driver.EnqueueParams{Kind: "result", Payload: map[string]int{"N": i}}
	}
	ids, err := driver.EnqueueMany(context.Background(), b.pool, params)
	if err != nil {
		t.Fatal(err)
	}
	rec := &eventRecorder{}
	cfg := baseConfig(b, hs, map[string]driver.QueueConfig{"default": {Slots: jobs}})
	cfg.CompleteBatchDelay = 300 * time.Millisecond // one batch for all
	cfg.Hook = rec
	startClient(t, b.pool, cfg)

	waitUntil(t, 5*time.Second, "every job finished and reported", func() bool {
		for _, id := range ids {
			if len(rec.kinds(id)) < 2 {
				return false
			}
		}
		return queryInt(t, b.pool, "SELECT count(*) FROM jobs WHERE state NOT IN ('done', 'cancelled')") == 0
	})
	bad := getJob(t, b.pool, ids[0])
	if bad.State != "cancelled" || bad.Attempts != 1 || bad.LastError == nil ||
		!strings.Contains(*bad.LastError, "result") || !strings.Contains(*bad.LastError, "1 MB") {
		t.Errorf("job with the refused result = %+v (last_error %v), want cancelled at attempt 1 with a last_error naming its result", bad, bad.LastError)
	}
	if e, ok := rec.find(ids[0], driver.EventCancelled); !ok || !driver.IsInvalid(e.Err) {
		t.Errorf("events of the job with the refused result = %v, want started and cancelled with an InvalidError", rec.kinds(ids[0]))
	}
	for i, id := range ids[1:] {
		var state, result string
		if err := b.pool.QueryRow(context.Background(), "SELECT state::text, result::text FROM jobs_result($1)", id).
			Scan(&state, &result); err != nil {
			t.Fatal(err)
		}
		if want := fmt.Sprintf(`{"n": %d}`, i+1); state != "done" || result != want {
			t.Errorf("job %d = %s with %s, want done with %s", id, state, result, want)
		}
		if k := rec.kinds(id); len(k) != 2 || k[1] != driver.EventCompleted {
			t.Errorf("events of job %d = %v, want started and completed", id, k)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	for _, id := range ids {
		if runs[id] != 1 {
			t.Errorf("job %d ran %d times, want once", id, runs[id])
		}
	}
}
