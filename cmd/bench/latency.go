package main

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/skiplock/skiplock/cmd/bench/internal/benchresult"
	"github.com/skiplock/skiplock/cmd/bench/internal/wait"
)

// latency: idle workers; jobs enqueued one at a time on a fixed schedule; enqueue commit
// (the enqueue call returned) -> handler start.
func (r *runner) latency(ctx context.Context) (*result, error) {
	pool, err := r.e.newPool(ctx, r.cfg.pool)
	if err != nil {
		return nil, err
	}
	defer pool.Close()
	m := int64(r.cfg.latencyJobs)
	rec := benchresult.NewLatencyRecorder()
	prog := newProgress("latency", m, 0, r.cfg.progress)
	allStarted := make(chan struct{})
	var once sync.Once
	var measuring atomic.Bool // the warm-up's jobs are not counted
	ws, err := startWorkers(ctx, pool, r.workerName(), r.cfg.workers, r.cfg.claimAhead, workerHooks{started: func(j benchJob) {
		if !measuring.Load() {
			return
		}
		rec.Start(j.ID, time.Now())
		prog.Add(1)
		if prog.done.Load() >= m {
			once.Do(func() { close(allStarted) })
		}
	}})
	if err != nil {
		return nil, err
	}
	defer func() { _ = ws.Stop(context.WithoutCancel(ctx)) }() // checked below on the success path
	if err := warmPool(ctx, pool, 2); err != nil {
		return nil, err
	}
	if _, err := r.warmUp(ctx, pool, func(ctx context.Context, until time.Time) error {
		t0 := time.Now()
		for i := int64(0); ; i++ {
			next := t0.Add(time.Duration(i) * r.cfg.latencyInterval)
			if !next.Before(until) {
				return nil
			}
			if err := wait.Sleep(ctx, time.Until(next)); err != nil {
				return err
			}
			if _, err := enqueueOne(ctx, pool, payload(-1-i, time.Now())); err != nil {
				return err
			}
		}
	}); err != nil {
		return nil, err
	}
	measuring.Store(true)

	calls := make([]time.Duration, 0, m)
	prog.Begin()
	t0 := time.Now()
	for i := range m {
		if d := time.Until(t0.Add(time.Duration(i) * r.cfg.latencyInterval)); d > 0 {
			if err := wait.Sleep(ctx, d); err != nil {
				prog.End()
				return nil, err
			}
		}
		before := time.Now()
		id, err := enqueueOne(ctx, pool, payload(i, before))
		if err != nil {
			prog.End()
			return nil, err
		}
		after := time.Now()
		rec.Commit(id, after)
		calls = append(calls, after.Sub(before))
	}
	select {
	case <-allStarted:
	case <-time.After(30 * time.Second):
		prog.End()
		return nil, fmt.Errorf("only %d of %d jobs started within 30s of the last enqueue", prog.done.Load(), m)
	case <-ctx.Done():
		prog.End()
		return nil, ctx.Err()
	}
	elapsed := time.Since(t0)
	samples := prog.End()
	if err := ws.Stop(context.WithoutCancel(ctx)); err != nil {
		return nil, fmt.Errorf("workers: %w", err)
	}
	lats, negative := rec.Latencies(time.Time{})
	res := &result{Result: benchresult.Result{Scenario: "latency", Jobs: m, Seconds: elapsed.Seconds()}, Series: samples}
	res.setLatency("enqueue commit -> handler start", lats)
	res.Add("interval_ms", benchresult.MS(r.cfg.latencyInterval))
	res.Add("insert_call_p50_ms", benchresult.MS(benchresult.Summarize(calls).P50))
	res.Add("negative_clamped", negative)
	res.Add("timing", "enqueue call returned (commit acked) -> handler entered")
	res.note("1 job every %s", r.cfg.latencyInterval)
	return res, nil
}
