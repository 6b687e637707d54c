package driver_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/skiplock/skiplock/driver"
)

// A diamond run by a client: each step's result reaches its children by step name, the sink
// runs after both branches, and WaitResult returns the sink's result.
func TestWorkflowResultsReachChildren(t *testing.T) {
	t.Parallel()
	b := setup(t)
	type in struct{ N int }
	var sinkParents atomic.Value
	hs := driver.NewHandlers()
	driver.AddHandler(hs, "double", func(ctx context.Context, job *driver.Job[in]) error {
		return job.SetResult(map[string]int{"n": job.Payload.N * 2})
	}, nil)
	driver.AddHandler(hs, "sum", func(ctx context.Context, job *driver.Job[in]) error {
		sinkParents.Store(job.ParentResults)
		total := 0
		for _, raw := range job.ParentResults {
			var r struct{ N int }
			if err := json.Unmarshal(raw, &r); err != nil {
				return err
			}
			total += r.N
		}
		return job.SetResult(total)
	}, nil)
	ids, err := driver.EnqueueWorkflow(context.Background(), b.pool, []driver.WorkflowStep{
		{Name: "a", Kind: "double", Payload: in{1}},
		{Name: "b", Kind: "double", Payload: in{10}, DependsOn: []string{"a"}},
		{Name: "c", Kind: "double", Payload: in{100}, DependsOn: []string{"a"}},
		{Name: "d", Kind: "sum", DependsOn: []string{"b", "c"}, NotifyFinished: true},
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(ids) != 4 || !(ids["a"] < ids["b"] && ids["b"] < ids["d"] && ids["c"] < ids["d"]) {
		t.Fatalf("ids = %v, want four, parents first", ids)
	}
	if s := getJob(t, b.pool, ids["d"]).State; s != "waiting" {
		t.Fatalf("sink is %s before its parents ran, want waiting", s)
	}
	startClient(t, b.pool, &driver.Config{
		Queues:       map[string]driver.QueueConfig{"default": {}},
		Handlers:     hs,
		PollInterval: 5 * time.Second, // releases must wake the workers, not the poll
		Logger:       b.logger,
	})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	r, err := driver.WaitResult(ctx, b.pool, ids["d"])
	if err != nil {
		t.Fatal(err)
	}
	if r.State != driver.JobStateDone || string(r.Result) != "220" {
		t.Fatalf("sink result = %+v (%s), want done with 220", r, r.Result)
	}
	got, _ := sinkParents.Load().(map[string]json.RawMessage)
	if len(got) != 2 || string(got["b"]) != `{"n": 20}` || string(got["c"]) != `{"n": 200}` {
		t.Fatalf("sink's ParentResults = %v, want b and c by step name", got)
	}
}

// A step runs once across attempts: the attempt after a failure gets the saved value
// without calling fn again, and progress is recorded (fenced by the attempt).
func TestStepRunsOnceAcrossAttempts(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var calls, attempts atomic.Int32
	hs := driver.NewHandlers()
	driver.AddHandler(hs, "resumable", func(ctx context.Context, job *driver.Job[struct{}]) error {
		attempts.Add(1)
		v, err := driver.Step(ctx, job, "charge", func(ctx context.Context) (string, error) {
			calls.Add(1)
			return "receipt-1", nil
		})
		if err != nil {
			return err
		}
		if err := job.SetProgress(ctx, map[string]int{"attempt": job.Attempt}); err != nil {
			return err
		}
		if job.Attempt == 1 {
			return fmt.Errorf("crash after the step: %w", driver.RetryAt(time.Now()))
		}
		return job.SetResult(v)
	}, nil)
	id := mustEnqueue(t, b.pool, "resumable", nil, &driver.EnqueueOpts{NotifyFinished: true})
	startClient(t, b.pool, &driver.Config{
		Queues:   map[string]driver.QueueConfig{"default": {}},
		Handlers: hs,
		Logger:   b.logger,
	})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	r, err := driver.WaitResult(ctx, b.pool, id)
	if err != nil {
		t.Fatal(err)
	}
	if r.State != driver.JobStateDone || string(r.Result) != `"receipt-1"` {
		t.Fatalf("result = %+v (%s), want done with the step's value", r, r.Result)
	}
	if calls.Load() != 1 || attempts.Load() != 2 {
		t.Fatalf("step ran %d times in %d attempts, want once in 2", calls.Load(), attempts.Load())
	}
	if p := queryInt(t, b.pool, "SELECT (progress->>'attempt')::int FROM jobs_get($1)", id); p != 2 {
		t.Fatalf("progress names attempt %d, want 2", p)
	}
}

// WaitResult: a timeout is the context's error and no answer; an unknown job is
// ErrJobNotFound; a job enqueued without NotifyFinished is still seen by the poll.
func TestWaitResultTimeoutAndPoll(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id := mustEnqueue(t, b.pool, "never-run", nil, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	r, err := driver.WaitResult(ctx, b.pool, id)
	if !errors.Is(err, context.DeadlineExceeded) || r != nil {
		t.Fatalf("WaitResult of an unfinished job = %v, %v; want nil and DeadlineExceeded", r, err)
	}
	if _, err := driver.WaitResult(context.Background(), b.pool, -1); !errors.Is(err, driver.ErrJobNotFound) {
		t.Fatalf("WaitResult of an unknown job: %v, want ErrJobNotFound", err)
	}
	// Cancelled by an operator a moment later, without a notification: the poll sees it.
	go func() {
		time.Sleep(200 * time.Millisecond)
		if _, err := b.pool.Exec(context.Background(), "SELECT jobs_cancel($1)", id); err != nil {
			t.Error(err)
		}
	}()
	ctx2, cancel2 := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel2()
	r, err = driver.WaitResult(ctx2, b.pool, id)
	if err != nil || r.State != driver.JobStateCancelled {
		t.Fatalf("WaitResult of a cancelled job = %+v, %v; want cancelled", r, err)
	}
	// The pool's connections hold no LISTEN afterwards.
	if n := queryInt(t, b.pool, "SELECT count(*) FROM pg_listening_channels()"); n != 0 {
		t.Fatalf("a pooled connection still listens on %d channels", n)
	}
}

// The new options are checked: EnqueueMany refuses dependencies, the database names a bad
// policy or an unknown parent, and a bad workflow names steps; nothing is added.
func TestWorkflowBadInput(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	parent := mustEnqueue(t, b.pool, "p", nil, nil)
	var inv *driver.InvalidError
	_, err := driver.EnqueueMany(ctx, b.pool, []driver.EnqueueParams{{Kind: "k", Opts: &driver.EnqueueOpts{DependsOn: []int64{parent}}}})
	if !errors.As(err, &inv) || inv.Field != "EnqueueParams[0].EnqueueOpts.DependsOn" {
		t.Fatalf("EnqueueMany with DependsOn: %v, want an InvalidError naming it", err)
	}
	_, err = driver.Enqueue(ctx, b.pool, "k", nil, &driver.EnqueueOpts{DependsOn: []int64{parent}, OnParentFailure: "ignore"})
	if !errors.As(err, &inv) || inv.Field != "on_parent_failure" {
		t.Fatalf("bad OnParentFailure: %v, want an InvalidError naming on_parent_failure", err)
	}
	_, err = driver.Enqueue(ctx, b.pool, "k", nil, &driver.EnqueueOpts{DependsOn: []int64{parent, parent + 1000}})
	if !errors.As(err, &inv) || inv.Field != "depends_on" {
		t.Fatalf("unknown parent: %v, want an InvalidError naming depends_on", err)
	}
	_, err = driver.EnqueueWorkflow(ctx, b.pool, []driver.WorkflowStep{
		{Name: "a", Kind: "k", DependsOn: []string{"b"}},
		{Name: "b", Kind: "k", DependsOn: []string{"a"}},
	})
	if !errors.As(err, &inv) || inv.Field != "steps" {
		t.Fatalf("a cycle: %v, want an InvalidError naming steps", err)
	}
	if n := queryInt(t, b.pool, "SELECT count(*) FROM jobs"); n != 1 {
		t.Fatalf("%d jobs after refused enqueues, want the parent only", n)
	}
	var job driver.Job[struct{}]
	job.JobRow = &driver.JobRow{}
	if err := job.SetResult(json.RawMessage(`{"unterminated`)); !errors.As(err, &inv) || inv.Field != "result" {
		t.Fatalf("SetResult of invalid JSON: %v, want an InvalidError naming result", err)
	}
}

// WaitResult survives the loss of its connection: it waits on a new one, whose first read
// finds the job finished while no connection listened.
func TestWaitResultReconnects(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id := mustEnqueue(t, b.pool, "waited", nil, &driver.EnqueueOpts{NotifyFinished: true})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	type answer struct {
		r   *driver.JobResult
		err error
	}
	done := make(chan answer, 1)
	go func() {
		r, err := driver.WaitResult(ctx, b.pool, id)
		done <- answer{r, err}
	}()
	// The waiting connection is the one whose last statement read jobs_result.
	waiter := func() bool {
		return queryInt(t, b.pool, `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND pid <> pg_backend_pid() AND query LIKE '%FROM jobs_result(%'`) > 0
	}
	waitUntil(t, 10*time.Second, "WaitResult listening", waiter)
	if n := queryInt(t, b.pool, `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
		WHERE datname = current_database() AND pid <> pg_backend_pid() AND query LIKE '%FROM jobs_result(%'`); n != 1 {
		t.Fatalf("terminated %d waiting connections, want 1", n)
	}
	if _, err := b.pool.Exec(context.Background(), "SELECT jobs_cancel($1)", id); err != nil {
		t.Fatal(err)
	}
	a := <-done
	if a.err != nil || a.r.State != driver.JobStateCancelled {
		t.Fatalf("WaitResult after its connection was terminated = %+v, %v; want cancelled", a.r, a.err)
	}
}
