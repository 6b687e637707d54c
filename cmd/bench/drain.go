package main

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/skiplock/skiplock/cmd/bench/internal/benchresult"
)

// workDrain: N no-op jobs queued, then the workers start; time from starting them to the
// last completion committed. With preloadDone > 0 (the bloat scenario) that many finished
// jobs are put in the table first, straight through SQL, and vacuumed.
func (r *runner) workDrain(ctx context.Context, name string, preloadDone int) (*result, error) {
	pool, err := r.e.newPool(ctx, r.cfg.pool)
	if err != nil {
		return nil, err
	}
	defer pool.Close()
	n := int64(r.cfg.jobs)

	if preloadDone > 0 {
		logf("%s: inserting %d finished jobs", name, preloadDone)
		began := time.Now()
		if _, err := pool.Exec(ctx, `
			INSERT INTO jobs (queue, kind, payload, state, attempts, run_at, lease_holder, created_at, finished_at)
			SELECT $1, $2, jsonb_build_object('seq', g), 'done', 1,
			       now() - interval '1 day', 'bench-preload', now() - interval '1 day',
			       now() - interval '1 day' + g * interval '1 millisecond'
			FROM generate_series(1, $3::integer) AS g`, benchQueue, benchKind, preloadDone); err != nil {
			return nil, fmt.Errorf("failed to insert finished jobs: %w", err)
		}
		if _, err := pool.Exec(ctx, "VACUUM ANALYZE jobs"); err != nil {
			return nil, fmt.Errorf("failed to vacuum: %w", err)
		}
		logf("%s: %d finished jobs in place after %s", name, preloadDone, time.Since(began).Round(time.Millisecond))
	}
	if err := r.bulkLoad(ctx, pool, int(n), nil); err != nil {
		return nil, err
	}
	if err := settle(ctx, pool, "jobs"); err != nil {
		return nil, err
	}

	prog := newProgress(name, n, 0, r.cfg.progress)
	var explained *explainer
	if r.cfg.explain {
		explained = r.explainWhen(ctx, name, func() bool { return prog.done.Load() >= n/2 })
	}
	var completed atomic.Int64
	prog.Begin()
	start := time.Now()
	ws, err := startWorkers(ctx, pool, r.workerName(), r.cfg.workers, workerHooks{
		started:   func(benchJob) { prog.Add(1) },
		completed: func() { completed.Add(1) },
	})
	if err != nil {
		prog.End()
		return nil, err
	}
	err = waitCompleted(ctx, completed.Load, n, r.cfg.timeout)
	elapsed := time.Since(start)
	samples := prog.End()
	stopErr := ws.Stop(context.WithoutCancel(ctx))
	explained.wait()
	if err != nil {
		return nil, err
	}
	if stopErr != nil {
		return nil, fmt.Errorf("workers: %w", stopErr)
	}
	_, done, _, err := countJobs(ctx, pool)
	if err != nil {
		return nil, err
	}
	if done != n+int64(preloadDone) {
		return nil, fmt.Errorf("expected %d done jobs, found %d", n+int64(preloadDone), done)
	}
	res := &result{Result: benchresult.Result{Scenario: name, Jobs: n, Seconds: elapsed.Seconds()}, Series: samples}
	res.Add("timing", "workers started -> last completion committed (driver EventCompleted)")
	res.Add("handled", prog.done.Load())
	if preloadDone > 0 {
		res.Add("finished_jobs_in_table", preloadDone)
		res.note("%d done jobs in the table", preloadDone)
	}
	res.note("%d slots", r.cfg.workers)
	return res, nil
}
