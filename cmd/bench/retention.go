package main

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/skiplock/skiplock/cmd/bench/internal/benchresult"
	"github.com/skiplock/skiplock/cmd/bench/internal/wait"
)

// retentionDone is the done_retention of the pruning step.
const retentionDone = "10 seconds"

// retention: the workers complete jobs at the full drain rate for -retention-duration while
// a feeder keeps the queue topped up (EnqueueMany batches of -batch whenever fewer than two
// batches wait). The keep step sets done_retention to NULL, so every done job stays; the
// pruning step sets it to 10 s, and the clients' own jobs_maintain calls (every
// maintainInterval, jittered) delete done jobs past it while they work. Both
// report the done rows counted about every -retention-duration/12 (they must stay bounded
// with pruning: about the drain rate times retention plus interval) and the drain rate,
// whose ratio is the cost of pruning.
func (r *runner) retention(ctx context.Context, name string, prune bool) (*result, error) {
	pool, err := r.e.newPool(ctx, r.cfg.pool+2)
	if err != nil {
		return nil, err
	}
	defer pool.Close()
	retention := "NULL"
	if prune {
		retention = "interval '" + retentionDone + "'"
	}
	if _, err := pool.Exec(ctx, "UPDATE jobs_settings SET done_retention = "+retention); err != nil {
		return nil, fmt.Errorf("failed to set done_retention: %w", err)
	}

	var inserted, completed atomic.Int64
	feed := func() error {
		payloads := make([][]byte, r.cfg.batch)
		now := time.Now()
		for i := range payloads {
			payloads[i] = payload(inserted.Load()+int64(i), now)
		}
		if err := enqueueMany(ctx, pool, payloads); err != nil {
			return err
		}
		inserted.Add(int64(len(payloads)))
		return nil
	}
	for range 2 {
		if err := feed(); err != nil {
			return nil, err
		}
	}

	prog := newProgress(name, 0, r.cfg.retentionDuration, r.cfg.progress)
	ws, err := startWorkers(ctx, pool, r.workerName(), r.cfg.workers, r.cfg.claimAhead, workerHooks{
		started:   func(benchJob) { prog.Add(1) },
		completed: func() { completed.Add(1) },
	})
	if err != nil {
		return nil, err
	}
	defer func() { _ = ws.Stop(context.WithoutCancel(ctx)) }() // checked below on the success path

	prog.Begin()
	start := time.Now()
	end := start.Add(r.cfg.retentionDuration)
	startCompleted := completed.Load()
	feedErr := make(chan error, 1)
	go func() {
		for time.Now().Before(end) {
			if inserted.Load()-completed.Load() >= 2*int64(r.cfg.batch) {
				if err := wait.Sleep(ctx, time.Millisecond); err != nil {
					feedErr <- err
					return
				}
				continue
			}
			if err := feed(); err != nil {
				feedErr <- err
				return
			}
		}
		feedErr <- nil
	}()

	// The done rows over time; counting them reads every done row, which the keep step
	// pays more for as they pile up (a few tens of ms per count at a million).
	every := max(r.cfg.retentionDuration/12, time.Second)
	var series [][2]float64
	var maxDone int64
	for next := start.Add(every); ; next = next.Add(every) {
		if next.After(end) {
			next = end
		}
		if err := wait.Sleep(ctx, time.Until(next)); err != nil {
			prog.End()
			return nil, err
		}
		var done int64
		if err := pool.QueryRow(ctx, "SELECT count(*) FROM jobs WHERE state = 'done'").Scan(&done); err != nil {
			prog.End()
			return nil, fmt.Errorf("failed to count done jobs: %w", err)
		}
		series = append(series, [2]float64{benchresult.Round(time.Since(start).Seconds(), 1), float64(done)})
		maxDone = max(maxDone, done)
		if !next.Before(end) {
			break
		}
	}
	doneInWindow := completed.Load() - startCompleted
	samples := prog.End()
	if err := <-feedErr; err != nil {
		return nil, fmt.Errorf("feeder: %w", err)
	}
	if err := ws.Stop(context.WithoutCancel(ctx)); err != nil {
		return nil, fmt.Errorf("workers: %w", err)
	}

	secs := r.cfg.retentionDuration.Seconds()
	res := &result{Result: benchresult.Result{Scenario: name, Jobs: doneInWindow, Seconds: secs}, Series: samples}
	if prune {
		res.Add("done_retention", retentionDone)
	} else {
		res.Add("done_retention", nil)
	}
	res.Add("maintain_interval_s", maintainInterval.Seconds())
	res.Add("done_rows", series)
	res.Add("done_rows_max", maxDone)
	res.Add("done_rows_final", int64(series[len(series)-1][1]))
	res.Add("timing", "completions confirmed during the window; done rows counted every "+every.String())
	res.note("done rows max %d, at end %d", maxDone, int64(series[len(series)-1][1]))
	return res, nil
}
