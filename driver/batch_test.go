package driver_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/skiplock/skiplock/driver"
)

// numbered is the payload of the batch tests' jobs.
type numbered struct {
	N int `json:"n"`
}

// batchLog records the calls of a batch handler: the ids each call got, and how many times
// each id was handed to a call.
type batchLog struct {
	mu    sync.Mutex
	calls [][]int64
	seen  map[int64]int
}

func (l *batchLog) add(jobs []*driver.Job[numbered]) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.seen == nil {
		l.seen = make(map[int64]int)
	}
	ids := make([]int64, len(jobs))
	for i, j := range jobs {
		ids[i] = j.ID
		l.seen[j.ID]++
	}
	l.calls = append(l.calls, ids)
}

func (l *batchLog) sizes() []int {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]int, len(l.calls))
	for i, c := range l.calls {
		out[i] = len(c)
	}
	return out
}

// enqueueNumbered enqueues n jobs of kind with payloads {"n": first..first+n-1}.
func enqueueNumbered(t *testing.T, b *testBundle, kind string, first, n int, opts *driver.EnqueueOpts) []int64 {
	t.Helper()
	params := make([]driver.EnqueueParams, n)
	for i := range params {
		params[i] = driver.EnqueueParams{Kind: kind, Payload: numbered{N: first + i}, Opts: opts}
	}
	ids, err := driver.EnqueueMany(context.Background(), b.pool, params)
	if err != nil {
		t.Fatal(err)
	}
	return ids
}

// A batch handler gets at most MaxJobs jobs per call, the jobs of one claim together, and
// every job is handed to one call and completed once, at attempt 1, with the result it set.
func TestBatchHandlerGetsAtMostMaxJobs(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var log batchLog
	hs := driver.NewHandlers()
	driver.AddBatchHandler(hs, "batch", func(ctx context.Context, jobs []*driver.Job[numbered]) error {
		log.add(jobs)
		for _, j := range jobs {
			if err := j.SetResult(j.Payload.N * 2); err != nil {
				return err
			}
		}
		return nil
	}, driver.BatchOpts{MaxJobs: 20})
	ids := enqueueNumbered(t, b, "batch", 0, 250, nil)
	startClient(t, b.pool, baseConfig(b, hs, map[string]driver.QueueConfig{"default": {Slots: 50}}))
	waitUntil(t, 30*time.Second, "250 jobs done", func() bool {
		return queryInt(t, b.pool, "SELECT count(*) FROM jobs WHERE state = 'done'") == 250
	})

	biggest := 0
	for _, n := range log.sizes() {
		if n > 20 || n < 1 {
			t.Fatalf("a call got %d jobs, want 1 to MaxJobs (20)", n)
		}
		biggest = max(biggest, n)
	}
	if biggest != 20 {
		t.Errorf("the biggest batch had %d jobs; the first claim takes 50 jobs, so want batches of 20", biggest)
	}
	for i, id := range ids {
		if n := log.seen[id]; n != 1 {
			t.Errorf("job %d was handed to %d calls, want 1", id, n)
		}
		if j := getJob(t, b.pool, id); j.Attempts != 1 {
			t.Errorf("job %d: attempts = %d, want 1", id, j.Attempts)
		}
		if got := queryInt(t, b.pool, "SELECT (result)::int FROM jobs_result($1)", id); got != 2*i {
			t.Errorf("job %d: result = %d, want %d", id, got, 2*i)
		}
	}
	t.Logf("batch sizes: %v", log.sizes())
}

// BatchErrors gives each job its own outcome: nil completes it, an error fails only that
// job (attempts, last_error, retried with backoff), Snooze and Cancel act on that job alone;
// a job whose payload does not decode is cancelled and left out of the call.
func TestBatchHandlerPerJobErrors(t *testing.T) {
	t.Parallel()
	b := setup(t)
	setBackoff(t, b.pool, "1 hour") // failed jobs stay queued for the checks
	var calls atomic.Int32
	hs := driver.NewHandlers()
	driver.AddBatchHandler(hs, "each", func(ctx context.Context, jobs []*driver.Job[numbered]) error {
		calls.Add(1)
		errs := make(driver.BatchErrors, len(jobs))
		for i, j := range jobs {
			switch {
			case j.Payload.N == 1:
				errs[i] = driver.Snooze(time.Hour)
			case j.Payload.N == 3:
				errs[i] = driver.Cancel(errors.New("not wanted"))
			case j.Payload.N%2 == 1:
				errs[i] = fmt.Errorf("odd %d", j.Payload.N)
			}
		}
		return fmt.Errorf("some failed: %w", errs) // wrapped: still read job by job
	}, driver.BatchOpts{MaxJobs: 10})
	rec := &eventRecorder{}
	cfg := baseConfig(b, hs, map[string]driver.QueueConfig{"default": {Slots: 10}})
	cfg.Hook = rec
	ids := enqueueNumbered(t, b, "each", 0, 8, nil)
	bad := mustEnqueue(t, b.pool, "each", json.RawMessage(`{"n": "not a number"}`), nil)
	startClient(t, b.pool, cfg)
	waitUntil(t, 10*time.Second, "every job settled", func() bool {
		return queryInt(t, b.pool, "SELECT count(*) FROM jobs WHERE state <> 'running' AND attempts = 1") == 9
	})

	for n, id := range ids {
		j := getJob(t, b.pool, id)
		switch {
		case n == 1:
			if j.State != "queued" || j.MaxAttempts != driver.MaxAttemptsDefault+1 || j.RunAt.Before(time.Now().Add(50*time.Minute)) {
				t.Errorf("snoozed job %d = %+v, want queued an hour from now without spending an attempt", n, j)
			}
		case n == 3:
			if j.State != "cancelled" || j.LastError == nil || *j.LastError != "not wanted" {
				t.Errorf("cancelled job %d = %+v, want cancelled with last_error 'not wanted'", n, j)
			}
		case n%2 == 1:
			want := fmt.Sprintf("odd %d", n)
			if j.State != "queued" || j.Attempts != 1 || j.LastError == nil || *j.LastError != want || j.RunAt.Before(time.Now().Add(30*time.Minute)) {
				t.Errorf("failed job %d = %+v, want queued for its backoff with last_error %q", n, j, want)
			}
			if _, ok := rec.find(id, driver.EventFailed); !ok {
				t.Errorf("failed job %d: no EventFailed", n)
			}
		default:
			if j.State != "done" || j.LastError != nil {
				t.Errorf("job %d = %+v, want done without error", n, j)
			}
		}
	}
	if j := getJob(t, b.pool, bad); j.State != "cancelled" || j.LastError == nil || !strings.Contains(*j.LastError, "failed to decode payload") {
		t.Errorf("job with a bad payload = %+v, want cancelled with the decode error", j)
	}
	if calls.Load() != 1 {
		t.Errorf("%d calls, want the 8 decodable jobs of the one claim in one call", calls.Load())
	}
}

// An error that is not a BatchErrors fails every job of the batch (dead on their last
// attempt), and so does a BatchErrors of the wrong length, saying so.
func TestBatchHandlerOneErrorFailsAll(t *testing.T) {
	t.Parallel()
	b := setup(t)
	hs := driver.NewHandlers()
	driver.AddBatchHandler(hs, "all", func(ctx context.Context, jobs []*driver.Job[numbered]) error {
		return errors.New("the bulk call failed")
	}, driver.BatchOpts{})
	driver.AddBatchHandler(hs, "short", func(ctx context.Context, jobs []*driver.Job[numbered]) error {
		return driver.BatchErrors{nil}
	}, driver.BatchOpts{})
	all := enqueueNumbered(t, b, "all", 0, 5, &driver.EnqueueOpts{MaxAttempts: 1})
	short := enqueueNumbered(t, b, "short", 0, 3, &driver.EnqueueOpts{MaxAttempts: 1})
	startClient(t, b.pool, baseConfig(b, hs, map[string]driver.QueueConfig{"default": {}}))
	waitUntil(t, 10*time.Second, "8 jobs dead", func() bool {
		return queryInt(t, b.pool, "SELECT count(*) FROM jobs WHERE state = 'dead'") == 8
	})
	for _, id := range all {
		if j := getJob(t, b.pool, id); j.Attempts != 1 || j.LastError == nil || *j.LastError != "the bulk call failed" {
			t.Errorf("job %d = %+v, want dead at attempt 1 with the batch's error", id, j)
		}
	}
	for _, id := range short {
		if j := getJob(t, b.pool, id); j.LastError == nil || !strings.Contains(*j.LastError, "BatchErrors with 1 entries for 3 jobs") {
			t.Errorf("job %d = %+v, want dead with the length mismatch as its error", id, j)
		}
	}
}

// A job of a batch that stops being held while the handler runs (cancelled by an operator,
// or its lease taken back and the job queued again) is fenced: its completion is refused
// (EventLost), the requeued job runs again as attempt 2, and the other jobs of the batch
// are completed.
func TestBatchHandlerFencesStaleAttempt(t *testing.T) {
	t.Parallel()
	b := setup(t)
	started := make(chan []int64, 1)
	release := make(chan struct{})
	var first atomic.Bool
	var log batchLog
	hs := driver.NewHandlers()
	driver.AddBatchHandler(hs, "fenced", func(ctx context.Context, jobs []*driver.Job[numbered]) error {
		log.add(jobs)
		if first.CompareAndSwap(false, true) {
			ids := make([]int64, len(jobs))
			for i, j := range jobs {
				ids[i] = j.ID
			}
			started <- ids
			<-release
			return nil
		}
		// The requeued job's second attempt: completed after the first batch's completions
		// were sent (the completer counts one job's attempts in one batch as one id).
		time.Sleep(200 * time.Millisecond)
		return nil
	}, driver.BatchOpts{MaxJobs: 10})
	rec := &eventRecorder{}
	cfg := baseConfig(b, hs, map[string]driver.QueueConfig{"default": {Slots: 10}})
	cfg.Lease = 10 * time.Second
	cfg.HeartbeatInterval = -1 // the completions, not a heartbeat, meet the stale attempts
	cfg.RequeueInterval = -1
	cfg.Hook = rec
	ids := enqueueNumbered(t, b, "fenced", 0, 6, nil)
	startClient(t, b.pool, cfg)
	got := <-started
	var once sync.Once
	defer once.Do(func() { close(release) })
	if len(got) != 6 {
		t.Fatalf("first call got %d jobs, want the 6 of the first claim", len(got))
	}
	cancelled, requeued := ids[1], ids[4]
	if queryInt(t, b.pool, "SELECT jobs_cancel($1)::int", cancelled) != 1 {
		t.Fatal("jobs_cancel returned false")
	}
	// Its lease ends, as if its heartbeats had stopped; the claim's other jobs keep theirs.
	if _, err := b.pool.Exec(context.Background(), `
		WITH j AS (UPDATE jobs SET lease_expires_at = now() - interval '1 second' WHERE id = $1 RETURNING claim_id)
		UPDATE jobs_claims SET expires_at = now() - interval '1 second' WHERE claim_id = (SELECT claim_id FROM j)`, requeued); err != nil {
		t.Fatal(err)
	}
	if queryInt(t, b.pool, "SELECT jobs_requeue_expired()") != 1 {
		t.Fatal("jobs_requeue_expired did not take the job back")
	}
	once.Do(func() { close(release) })
	waitUntil(t, 10*time.Second, "5 jobs done", func() bool {
		return queryInt(t, b.pool, "SELECT count(*) FROM jobs WHERE state = 'done'") == 5
	})
	for _, id := range ids {
		j := getJob(t, b.pool, id)
		switch id {
		case cancelled:
			if j.State != "cancelled" {
				t.Errorf("cancelled job = %+v, want still cancelled", j)
			}
		case requeued:
			if j.State != "done" || j.Attempts != 2 {
				t.Errorf("requeued job = %+v, want done at attempt 2", j)
			}
		default:
			if j.State != "done" || j.Attempts != 1 {
				t.Errorf("job %d = %+v, want done at attempt 1", id, j)
			}
		}
	}
	for _, id := range []int64{cancelled, requeued} {
		e, ok := rec.find(id, driver.EventLost)
		if !ok || e.Job.Attempt != 1 {
			t.Errorf("job %d: lost event %+v (found %v), want one for attempt 1", id, e, ok)
		}
	}
}

// A panic in a batch handler fails every job of the batch with the panic value and stack.
func TestBatchHandlerPanic(t *testing.T) {
	t.Parallel()
	b := setup(t)
	hs := driver.NewHandlers()
	driver.AddBatchHandler(hs, "boom", func(ctx context.Context, jobs []*driver.Job[numbered]) error {
		panic("boom in a batch")
	}, driver.BatchOpts{})
	ids := enqueueNumbered(t, b, "boom", 0, 4, &driver.EnqueueOpts{MaxAttempts: 1})
	startClient(t, b.pool, baseConfig(b, hs, map[string]driver.QueueConfig{"default": {}}))
	waitUntil(t, 10*time.Second, "4 jobs dead", func() bool {
		return queryInt(t, b.pool, "SELECT count(*) FROM jobs WHERE state = 'dead'") == 4
	})
	for _, id := range ids {
		if j := getJob(t, b.pool, id); j.LastError == nil || !strings.HasPrefix(*j.LastError, "panic: boom in a batch") ||
			!strings.Contains(*j.LastError, "batch_test.go") {
			t.Errorf("job %d = %+v, want dead with the panic and its stack", id, j)
		}
	}
}

// With MaxWait, jobs claimed after a batch opened join it, and the handler is called as
// soon as the batch is full, well before MaxWait has passed.
func TestBatchHandlerMaxWaitGathers(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var log batchLog
	var calledAt atomic.Int64
	hs := driver.NewHandlers()
	driver.AddBatchHandler(hs, "gather", func(ctx context.Context, jobs []*driver.Job[numbered]) error {
		calledAt.CompareAndSwap(0, time.Now().UnixNano())
		log.add(jobs)
		return nil
	}, driver.BatchOpts{MaxJobs: 5, MaxWait: 8 * time.Second})
	cfg := baseConfig(b, hs, map[string]driver.QueueConfig{"default": {Slots: 10}})
	cfg.Lease = 20 * time.Second
	startClient(t, b.pool, cfg)

	firstID := enqueueNumbered(t, b, "gather", 0, 1, nil)[0]
	waitUntil(t, 10*time.Second, "first job claimed", jobStateIs(t, b.pool, firstID, "running"))
	claimed := time.Now()
	enqueueNumbered(t, b, "gather", 1, 2, nil)
	time.Sleep(100 * time.Millisecond) // a second claim: these join too
	enqueueNumbered(t, b, "gather", 3, 2, nil)
	waitUntil(t, 10*time.Second, "5 jobs done", func() bool {
		return queryInt(t, b.pool, "SELECT count(*) FROM jobs WHERE state = 'done'") == 5
	})
	if sizes := log.sizes(); len(sizes) != 1 || sizes[0] != 5 {
		t.Fatalf("batch sizes = %v, want one call with the 5 jobs", sizes)
	}
	if waited := time.Unix(0, calledAt.Load()).Sub(claimed); waited > 4*time.Second {
		t.Fatalf("the full batch was called %s after its first job was claimed, want well before MaxWait (8s)", waited)
	}
}

// Without MaxWait, a job alone is handled at once; with it, a batch that does not fill is
// called once MaxWait has passed.
func TestBatchHandlerMaxWaitEnds(t *testing.T) {
	t.Parallel()
	b := setup(t)
	calls := make(chan time.Time, 10)
	hs := driver.NewHandlers()
	driver.AddBatchHandler(hs, "wait", func(ctx context.Context, jobs []*driver.Job[numbered]) error {
		calls <- time.Now()
		return nil
	}, driver.BatchOpts{MaxJobs: 5, MaxWait: 300 * time.Millisecond})
	startClient(t, b.pool, baseConfig(b, hs, map[string]driver.QueueConfig{"default": {}}))
	id := enqueueNumbered(t, b, "wait", 0, 1, nil)[0]
	waitUntil(t, 10*time.Second, "job claimed", func() bool { return getJob(t, b.pool, id).State != "queued" })
	claimed := time.Now()
	select {
	case at := <-calls:
		if d := at.Sub(claimed); d < 150*time.Millisecond {
			t.Fatalf("called %s after the claim was seen, want after about MaxWait (300ms)", d)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the batch was not called within 5s")
	}
	waitUntil(t, 10*time.Second, "job done", jobStateIs(t, b.pool, id, "done"))
}

// Many batches at once, on two clients with batch and single kinds mixed in one queue, and
// jobs claimed ahead: every job is run once and done at attempt 1 (run with -race).
func TestBatchHandlerConcurrentBatches(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var log batchLog
	var singles sync.Map
	hs := driver.NewHandlers()
	driver.AddBatchHandler(hs, "many", func(ctx context.Context, jobs []*driver.Job[numbered]) error {
		log.add(jobs)
		time.Sleep(time.Duration(rand.IntN(2000)) * time.Microsecond)
		return nil
	}, driver.BatchOpts{MaxJobs: 7, MaxWait: 5 * time.Millisecond})
	driver.AddHandler(hs, "single", func(ctx context.Context, job *driver.Job[numbered]) error {
		if _, dup := singles.LoadOrStore(job.ID, true); dup {
			return fmt.Errorf("job %d run twice", job.ID)
		}
		return nil
	}, nil)
	const n = 2000
	params := make([]driver.EnqueueParams, n)
	for i := range params {
		kind := "many"
		if i%5 == 0 {
			kind = "single"
		}
		params[i] = driver.EnqueueParams{Kind: kind, Payload: numbered{N: i}}
	}
	if _, err := driver.EnqueueMany(context.Background(), b.pool, params); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		startClient(t, b.pool, baseConfig(b, hs, map[string]driver.QueueConfig{"default": {Slots: 20}}))
	}
	waitUntil(t, 60*time.Second, "all jobs done", func() bool {
		return queryInt(t, b.pool, "SELECT count(*) FROM jobs WHERE state = 'done'") == n
	})
	if bad := queryInt(t, b.pool, "SELECT count(*) FROM jobs WHERE attempts <> 1"); bad != 0 {
		t.Fatalf("%d jobs ran more than once", bad)
	}
	log.mu.Lock()
	defer log.mu.Unlock()
	for id, k := range log.seen {
		if k != 1 {
			t.Errorf("job %d handed to %d calls", id, k)
		}
	}
	if len(log.seen) != n-n/5 {
		t.Errorf("%d batch jobs handled, want %d", len(log.seen), n-n/5)
	}
	for _, c := range log.calls {
		if len(c) > 7 {
			t.Fatalf("a call got %d jobs, want at most 7", len(c))
		}
	}
	t.Logf("%d calls for %d batch jobs", len(log.calls), len(log.seen))
}

// At shutdown, a batch handler still running when ShutdownTimeout passes has its context
// cancelled with cause ErrShutdown, and when it returns an error every job of the batch is
// released (queued, ready now, no attempt spent). A batch waiting for MaxWait stops waiting
// when shutdown begins.
func TestBatchHandlerShutdownMidBatch(t *testing.T) {
	t.Parallel()
	b := setup(t)
	started := make(chan struct{})
	cause := make(chan error, 1)
	hs := driver.NewHandlers()
	driver.AddBatchHandler(hs, "stubborn", func(ctx context.Context, jobs []*driver.Job[numbered]) error {
		close(started)
		<-ctx.Done()
		cause <- context.Cause(ctx)
		return ctx.Err()
	}, driver.BatchOpts{MaxJobs: 10, MaxWait: 20 * time.Second, Timeout: -1})
	cfg := baseConfig(b, hs, map[string]driver.QueueConfig{"default": {Slots: 10}})
	cfg.Lease = time.Minute // so that only the release can explain the jobs being ready
	cfg.ShutdownTimeout = 200 * time.Millisecond
	client, err := driver.NewClient(b.pool, cfg)
	if err != nil {
		t.Fatal(err)
	}
	ids := enqueueNumbered(t, b, "stubborn", 0, 4, &driver.EnqueueOpts{MaxAttempts: 3})
	runErr := make(chan error, 1)
	go func() { runErr <- client.Run(context.Background()) }()
	waitUntil(t, 10*time.Second, "4 jobs claimed", func() bool {
		return queryInt(t, b.pool, "SELECT count(*) FROM jobs WHERE state = 'running'") == 4
	})
	stopped := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := client.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-runErr; err != nil {
		t.Fatalf("Run = %v", err)
	}
	if d := time.Since(stopped); d > 10*time.Second {
		t.Fatalf("Stop took %s: the batch waited for MaxWait", d)
	}
	select {
	case <-started:
	default:
		t.Fatal("the batch waiting for MaxWait was not run at shutdown")
	}
	if err := <-cause; !errors.Is(err, driver.ErrShutdown) {
		t.Fatalf("handler's context cause = %v, want ErrShutdown", err)
	}
	for _, id := range ids {
		if j := getJob(t, b.pool, id); j.State != "queued" || j.Attempts != 1 || j.MaxAttempts != 4 || j.RunAt.After(time.Now()) {
			t.Errorf("job %d = %+v, want queued and ready now with max_attempts raised to 4", id, j)
		}
	}
}

// AddBatchHandler panics on programming errors, and NewClient refuses a MaxWait that is not
// below half of the lease.
func TestAddBatchHandlerRefusesBadOptions(t *testing.T) {
	t.Parallel()
	fn := func(ctx context.Context, jobs []*driver.Job[numbered]) error { return nil }
	for name, add := range map[string]func(){
		"nil handlers":     func() { driver.AddBatchHandler(nil, "k", fn, driver.BatchOpts{}) },
		"empty kind":       func() { driver.AddBatchHandler(driver.NewHandlers(), "", fn, driver.BatchOpts{}) },
		"nil fn":           func() { driver.AddBatchHandler[numbered](driver.NewHandlers(), "k", nil, driver.BatchOpts{}) },
		"negative MaxJobs": func() { driver.AddBatchHandler(driver.NewHandlers(), "k", fn, driver.BatchOpts{MaxJobs: -1}) },
		"huge MaxJobs": func() {
			driver.AddBatchHandler(driver.NewHandlers(), "k", fn, driver.BatchOpts{MaxJobs: driver.BatchSizeMax + 1})
		},
		"negative MaxWait": func() { driver.AddBatchHandler(driver.NewHandlers(), "k", fn, driver.BatchOpts{MaxWait: -1}) },
		"bad Timeout":      func() { driver.AddBatchHandler(driver.NewHandlers(), "k", fn, driver.BatchOpts{Timeout: -2}) },
		"kind taken": func() {
			hs := driver.NewHandlers()
			driver.AddHandler(hs, "k", func(ctx context.Context, job *driver.Job[numbered]) error { return nil }, nil)
			driver.AddBatchHandler(hs, "k", fn, driver.BatchOpts{})
		},
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s: no panic", name)
				}
			}()
			add()
		}()
	}

	hs := driver.NewHandlers()
	driver.AddBatchHandler(hs, "slow", fn, driver.BatchOpts{MaxWait: 30 * time.Second})
	// pgxpool.New connects lazily: no server is needed to validate.
	pool, err := pgxpool.New(context.Background(), "postgres://nobody@127.0.0.1:1/none")
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	_, err = driver.NewClient(pool, &driver.Config{
		Queues: map[string]driver.QueueConfig{"default": {}}, Handlers: hs, Lease: time.Minute,
	})
	var ie *driver.InvalidError
	if !errors.As(err, &ie) || ie.Field != `Config.Handlers["slow"].MaxWait` || !strings.Contains(ie.Problem, "below half of Config.Lease") {
		t.Fatalf("NewClient = %v, want an InvalidError naming the MaxWait", err)
	}
}
