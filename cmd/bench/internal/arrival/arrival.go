// Package arrival is the fixed-rate arrival schedule of the steady_rate scenario: job k is
// due at start + k/rate. cmd/bench and its Go peer harness enqueue on it alike (the
// graphile-worker harness has a copy in JavaScript), so that every system sees the same
// arrivals and their enqueue -> start latencies compare.
package arrival

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/skiplock/skiplock/cmd/bench/internal/wait"
)

// Result is what a Run achieved.
type Result struct {
	// Enqueued counts the enqueues that returned without error.
	Enqueued int64
	// Due counts the arrivals due before the end; Due - Enqueued were not started in time
	// (the producers fell behind) or failed.
	Due int64
	// MaxLag is how late the latest enqueue started after its due time: above the interval,
	// the producers (or the enqueue path) could not keep the schedule.
	MaxLag time.Duration
}

// Run enqueues job k at start + k/rate (rate in jobs per second) until start + d, from
// producers goroutines: each takes the next arrival, sleeps until it is due and calls
// enqueue, one job per call. A producer that is behind enqueues at once, so a late arrival
// is late, not dropped, as long as it is started before the end; no enqueue starts after
// it. Run returns when every producer has stopped, with the first error of enqueue.
func Run(ctx context.Context, start time.Time, d time.Duration, rate float64, producers int,
	enqueue func(ctx context.Context, k int64) error) (Result, error) {
	end := start.Add(d)
	interval := float64(time.Second) / rate
	dueAt := func(k int64) time.Time { return start.Add(time.Duration(float64(k) * interval)) }
	var (
		next, enqueued atomic.Int64
		mu             sync.Mutex
		maxLag         time.Duration
		firstErr       error
		wg             sync.WaitGroup
	)
	parent := ctx
	ctx, cancel := context.WithCancel(ctx) // cancelled by the first error, to stop the others
	defer cancel()
	for range producers {
		wg.Go(func() {
			for {
				k := next.Add(1) - 1
				due := dueAt(k)
				if !due.Before(end) {
					return
				}
				if err := wait.Sleep(ctx, time.Until(due)); err != nil {
					return
				}
				began := time.Now()
				if !began.Before(end) {
					return
				}
				err := enqueue(ctx, k)
				mu.Lock()
				if lag := began.Sub(due); lag > maxLag {
					maxLag = lag
				}
				if err != nil && firstErr == nil {
					firstErr = err
					cancel()
				}
				mu.Unlock()
				if err != nil {
					return
				}
				enqueued.Add(1)
			}
		})
	}
	wg.Wait()
	due := int64(float64(d) / interval)
	if float64(due)*interval < float64(d) {
		due++ // arrivals 0 … due-1 fall before the end
	}
	if firstErr == nil {
		firstErr = parent.Err()
	}
	return Result{Enqueued: enqueued.Load(), Due: due, MaxLag: maxLag}, firstErr
}
