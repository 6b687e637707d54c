package driver_test

import (
	"context"
	"maps"
	"sync"
	"testing"
	"time"

	"github.com/skiplock/skiplock/driver"
)

func TestMetaReachesTheWorker(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	var mu sync.Mutex
	seen := map[int64]map[string]string{}
	hs := driver.NewHandlers()
	driver.AddHandler(hs, "m", func(ctx context.Context, job *driver.Job[struct{}]) error {
		mu.Lock()
		defer mu.Unlock()
		seen[job.ID] = job.Meta
		return nil
	}, nil)

	one := mustEnqueue(t, b.pool, "m", nil, &driver.EnqueueOpts{Meta: map[string]string{"traceparent": "00-a-b-01"}})
	none := mustEnqueue(t, b.pool, "m", nil, nil)
	many, err := driver.EnqueueMany(ctx, b.pool, []driver.EnqueueParams{
		{Kind: "m", Opts: &driver.EnqueueOpts{Meta: map[string]string{"k": "v"}}},
		{Kind: "m"},
	})
	if err != nil {
		t.Fatal(err)
	}
	// A meta written by another client may hold values that are not strings.
	var foreign int64
	if err := b.pool.QueryRow(ctx, `SELECT jobs_enqueue('m', meta => '{"n": 1, "s": "x"}')`).Scan(&foreign); err != nil {
		t.Fatal(err)
	}
	if got := queryInt(t, b.pool, "SELECT count(*) FROM jobs_get($1) WHERE meta = '{\"k\": \"v\"}'", many[0]); got != 1 {
		t.Fatalf("jobs_get(%d) does not return the meta", many[0])
	}

	startClient(t, b.pool, baseConfig(b, hs, map[string]driver.QueueConfig{"default": {Slots: 5}}))
	waitUntil(t, 10*time.Second, "every job ran", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(seen) == 5
	})
	mu.Lock()
	defer mu.Unlock()
	for id, want := range map[int64]map[string]string{
		one: {"traceparent": "00-a-b-01"}, none: nil, many[0]: {"k": "v"}, many[1]: nil, foreign: {"s": "x"},
	} {
		if !maps.Equal(seen[id], want) || (want == nil) != (seen[id] == nil) {
			t.Errorf("job %d ran with Meta %v, want %v", id, seen[id], want)
		}
	}
}
