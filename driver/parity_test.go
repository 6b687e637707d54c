package driver_test

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/skiplock/skiplock/driver"
)

// Parity row eight_workers_claim_each_job_once (docs/clients.md): eight clients, each with a
// pool of its own, work one queue at once, and every job runs exactly once. The other rows
// have tests of their own; docs/clients.md names them.
func TestEightWorkersClaimEachJobOnce(t *testing.T) {
	t.Parallel()
	b := setup(t)
	n := 2000
	if testing.Short() {
		n = 500
	}
	var mu sync.Mutex
	runs := make(map[int64]int, n)
	for range 8 {
		hs := driver.NewHandlers()
		driver.AddHandler(hs, "once", func(ctx context.Context, job *driver.Job[struct{}]) error {
			mu.Lock()
			runs[job.ID]++
			mu.Unlock()
			return nil
		}, nil)
		cfg := baseConfig(b, hs, map[string]driver.QueueConfig{"default": {Slots: 4}})
		startClient(t, newPool(t, b.url, 4), cfg)
	}
	params := make([]driver.EnqueueParams, n)
	for i := range params {
		params[i] = driver.EnqueueParams{Kind: "once"}
	}
	ids, err := driver.EnqueueMany(context.Background(), b.pool, params)
	if err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 60*time.Second, "every job done", func() bool {
		return queryInt(t, b.pool, "SELECT count(*) FROM jobs WHERE state = 'done'") == n
	})
	mu.Lock()
	defer mu.Unlock()
	for _, id := range ids {
		if runs[id] != 1 {
			t.Fatalf("job %d ran %d times, want once", id, runs[id])
		}
	}
	if len(runs) != n || queryInt(t, b.pool, "SELECT count(*) FROM jobs WHERE attempts <> 1") != 0 {
		t.Fatalf("%d jobs ran, want %d, each at attempt 1", len(runs), n)
	}
}

// AddDefaultHandler runs the kinds without a handler of their own, with the payload as it is
// (json.RawMessage); a kind with its own handler still gets it.
func TestDefaultHandlerRunsOtherKinds(t *testing.T) {
	t.Parallel()
	b := setup(t)
	got := make(chan string, 2)
	hs := driver.NewHandlers()
	driver.AddHandler(hs, "own", func(ctx context.Context, job *driver.Job[struct{}]) error {
		got <- "own"
		return nil
	}, nil)
	driver.AddDefaultHandler(hs, func(ctx context.Context, job *driver.Job[json.RawMessage]) error {
		got <- job.Kind + " " + string(job.Payload)
		return nil
	}, nil)
	startClient(t, b.pool, baseConfig(b, hs, map[string]driver.QueueConfig{"default": {Slots: 1}}))
	mustEnqueue(t, b.pool, "own", nil, nil)
	mustEnqueue(t, b.pool, "any", map[string]int{"n": 1}, nil)
	seen := map[string]bool{}
	for range 2 {
		select {
		case s := <-got:
			seen[s] = true
		case <-time.After(10 * time.Second):
			t.Fatalf("jobs not run; got %v", seen)
		}
	}
	if !seen["own"] || !seen[`any {"n": 1}`] {
		t.Fatalf("handlers saw %v", seen)
	}
}
