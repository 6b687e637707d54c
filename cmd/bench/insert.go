package main

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/skiplock/skiplock/cmd/bench/internal/benchresult"
)

// insertBulk: N jobs through jobs_enqueue_many in batches of -batch, one goroutine.
func (r *runner) insertBulk(ctx context.Context) (*result, error) {
	pool, err := r.e.newPool(ctx, r.cfg.pool)
	if err != nil {
		return nil, err
	}
	defer pool.Close()
	n := r.cfg.jobs
	prog := newProgress("insert_bulk", int64(n), 0, r.cfg.progress)
	prog.Begin()
	start := time.Now()
	err = r.bulkLoad(ctx, pool, n, prog)
	elapsed := time.Since(start)
	samples := prog.End()
	if err != nil {
		return nil, err
	}
	total, _, _, err := countJobs(ctx, pool)
	if err != nil {
		return nil, err
	}
	if total != int64(n) {
		return nil, fmt.Errorf("expected %d jobs, found %d", n, total)
	}
	res := &result{Result: benchresult.Result{Scenario: "insert_bulk", Jobs: int64(n), Seconds: elapsed.Seconds()}, Series: samples}
	res.Add("api", "driver.EnqueueMany -> jobs_enqueue_many (one call per batch)")
	res.Add("batch_size", r.cfg.batch)
	res.Add("rows_in_db", total)
	res.note("batches of %d", r.cfg.batch)
	return res, nil
}

// insertSingle: N/10 jobs, one jobs_enqueue transaction each, from -producers goroutines.
func (r *runner) insertSingle(ctx context.Context) (*result, error) {
	pool, err := r.e.newPool(ctx, max(r.cfg.pool, r.cfg.producers))
	if err != nil {
		return nil, err
	}
	defer pool.Close()
	n := int64(r.cfg.jobs / 10)
	if err := warmPool(ctx, pool, r.cfg.producers); err != nil {
		return nil, err
	}

	prog := newProgress("insert_single", n, 0, r.cfg.progress)
	var next atomic.Int64
	lat := make([][]time.Duration, r.cfg.producers)
	errs := make([]error, r.cfg.producers)
	var wg sync.WaitGroup
	prog.Begin()
	start := time.Now()
	for g := range r.cfg.producers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := next.Add(1) - 1
				if i >= n {
					return
				}
				t := time.Now()
				if _, err := enqueueOne(ctx, pool, payload(i, t)); err != nil {
					errs[g] = err
					return
				}
				lat[g] = append(lat[g], time.Since(t))
				prog.Add(1)
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	samples := prog.End()
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	total, _, _, err := countJobs(ctx, pool)
	if err != nil {
		return nil, err
	}
	if total != n {
		return nil, fmt.Errorf("expected %d jobs, found %d", n, total)
	}
	var all []time.Duration
	for _, l := range lat {
		all = append(all, l...)
	}
	res := &result{Result: benchresult.Result{Scenario: "insert_single", Jobs: n, Seconds: elapsed.Seconds()}, Series: samples}
	res.setLatency("insert call (one tx)", all)
	res.LatencyPrefix = "insert_" // the peers' insert_p50_ms, insert_p99_ms
	res.Add("api", "driver.Enqueue (one transaction per job)")
	res.Add("concurrency", r.cfg.producers)
	res.Add("rows_in_db", total)
	res.note("%d goroutines", r.cfg.producers)
	return res, nil
}
