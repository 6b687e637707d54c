package main

import (
	"context"
	"fmt"
	"time"

	"github.com/skiplock/skiplock/cmd/bench/internal/arrival"
	"github.com/skiplock/skiplock/cmd/bench/internal/benchresult"
	"github.com/skiplock/skiplock/cmd/bench/internal/wait"
)

// defaultArrivalRate is steady_rate's arrival rate, in jobs/s, when -rate is not given and
// this run measured neither work_drain nor insert_single: a rate every system reaches on
// the 2-core machines the benchmark was written on.
const defaultArrivalRate = 1000

// steadyRate: -producers enqueue one job per transaction on a fixed schedule of rate jobs/s
// (arrival.Run) for -steady-duration while the workers drain: below capacity, the
// enqueue -> start latency is the figure users feel, and the backlog at the end shows
// whether the system kept up.
func (r *runner) steadyRate(ctx context.Context, rate float64) (*result, error) {
	const name = "steady_rate"
	pool, err := r.e.newPool(ctx, r.cfg.pool+r.cfg.producers)
	if err != nil {
		return nil, err
	}
	defer pool.Close()

	rec := benchresult.NewLatencyRecorder()
	prog := newProgress(name, 0, r.cfg.steadyDuration, r.cfg.progress)
	ws, err := startWorkers(ctx, pool, r.workerName(), r.cfg.workers, r.cfg.claimAhead, workerHooks{started: func(j benchJob) {
		rec.Start(j.ID, time.Now())
		prog.Add(1)
	}})
	if err != nil {
		return nil, err
	}
	defer func() { _ = ws.Stop(context.WithoutCancel(ctx)) }() // checked below on the success path
	if err := warmPool(ctx, pool, r.cfg.producers+2); err != nil {
		return nil, err
	}
	warmDone, err := r.warmUp(ctx, pool, func(ctx context.Context, until time.Time) error {
		_, err := arrival.Run(ctx, time.Now(), time.Until(until), rate, r.cfg.producers, func(ctx context.Context, k int64) error {
			_, err := enqueueOne(ctx, pool, payload(-1-k, time.Now()))
			return err
		})
		return err
	})
	if err != nil {
		return nil, err
	}

	prog.Set(0)
	prog.Begin()
	start := time.Now()
	end := start.Add(r.cfg.steadyDuration)
	sched, err := arrival.Run(ctx, start, r.cfg.steadyDuration, rate, r.cfg.producers, func(ctx context.Context, k int64) error {
		id, err := enqueueOne(ctx, pool, payload(k, time.Now()))
		if err != nil {
			return err
		}
		rec.Commit(id, time.Now())
		return nil
	})
	if err != nil {
		prog.End()
		return nil, err
	}
	// The last enqueues may return a little after the end; the window closes at the end.
	if err := wait.Sleep(ctx, time.Until(end)); err != nil {
		prog.End()
		return nil, err
	}
	total, done, pending, err := countJobs(ctx, pool)
	samples := prog.End()
	if err != nil {
		return nil, err
	}
	done -= warmDone
	if err := ws.Stop(context.WithoutCancel(ctx)); err != nil {
		return nil, fmt.Errorf("workers: %w", err)
	}
	lats, negative := rec.Latencies(end)
	secs := r.cfg.steadyDuration.Seconds()
	res := &result{Result: benchresult.Result{Scenario: name, Jobs: done, Seconds: secs}, Series: samples}
	res.setLatency("enqueue commit -> handler start", lats)
	res.Add("producers", r.cfg.producers)
	addArrivalFields(res, rate, sched, secs)
	res.Add("completed", done)
	res.Add("final_backlog", pending)
	res.Add("rows_in_db", total)
	res.Add("negative_clamped", negative)
	res.Add("timing", "completions committed during the window; latency of jobs started in it")
	res.note("%.0f/s asked, %.0f/s enqueued, backlog %d", rate, float64(sched.Enqueued)/secs, pending)
	return res, nil
}

// addArrivalFields puts the schedule's figures on a steady_rate line; the harnesses print
// the same keys.
func addArrivalFields(res *result, rate float64, sched arrival.Result, secs float64) {
	res.Add("rate_per_sec", benchresult.Round(rate, 1))
	res.Add("inserted", sched.Enqueued)
	res.Add("insert_per_sec", benchresult.Round(float64(sched.Enqueued)/secs, 1))
	res.Add("arrivals_due", sched.Due)
	res.Add("max_schedule_lag_ms", benchresult.MS(sched.MaxLag))
}
