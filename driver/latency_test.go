package driver_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/skiplock/skiplock/driver"
)

// An idle client starts a job within milliseconds of the enqueue's commit: the LISTEN
// connection wakes it, since the poll interval is 10s.
func TestIdleLatency(t *testing.T) {
	t.Parallel()
	b := setup(t)
	startedCh := make(chan time.Time, 1)
	hs := driver.NewHandlers()
	driver.AddHandler(hs, "ping", func(ctx context.Context, job *driver.Job[struct{}]) error {
		startedCh <- time.Now()
		return nil
	}, nil)
	cfg := baseConfig(b, hs, map[string]driver.QueueConfig{"default": {}})
	cfg.PollInterval = 10 * time.Second
	startClient(t, b.pool, cfg)

	// Let the client's first claim and LISTEN happen before measuring.
	warm := mustEnqueue(t, b.pool, "ping", nil, nil)
	select {
	case <-startedCh:
	case <-time.After(10 * time.Second):
		t.Fatal("warm-up job not started")
	}
	waitUntil(t, 5*time.Second, "warm-up done", jobStateIs(t, b.pool, warm, "done"))

	const n = 200
	lat := make([]time.Duration, 0, n)
	for range n {
		time.Sleep(5 * time.Millisecond) // idle again: past the fetch cooldown
		mustEnqueue(t, b.pool, "ping", nil, nil)
		committed := time.Now() // autocommit: the statement's return is the commit
		select {
		case at := <-startedCh:
			lat = append(lat, at.Sub(committed))
		case <-time.After(5 * time.Second):
			t.Fatal("job not started within 5s: notification not received")
		}
	}
	slices.Sort(lat)
	p50, p99 := lat[n/2], lat[n*99/100]
	t.Logf("idle latency, enqueue commit -> handler start, %d jobs: p50 %s, p99 %s, max %s", n, p50, p99, lat[n-1])
	if p50 > 50*time.Millisecond {
		t.Fatalf("p50 latency %s, want < 50ms", p50)
	}
}
