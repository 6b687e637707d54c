package main

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/skiplock/skiplock/cmd/bench/internal/benchresult"
	"github.com/skiplock/skiplock/cmd/bench/internal/wait"
)

// steady: producers enqueue single jobs at full rate for -steady-duration while the workers
// drain. With holdXmin another session keeps a REPEATABLE READ snapshot open throughout.
func (r *runner) steady(ctx context.Context, name string, holdXmin bool) (*result, error) {
	pool, err := r.e.newPool(ctx, r.cfg.pool+r.cfg.producers)
	if err != nil {
		return nil, err
	}
	defer pool.Close()

	var holdTx pgx.Tx
	if holdXmin {
		conn, err := pgx.Connect(ctx, r.e.url)
		if err != nil {
			return nil, fmt.Errorf("failed to connect the snapshot holder: %w", err)
		}
		defer conn.Close(context.WithoutCancel(ctx))
		holdTx, err = conn.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead})
		if err != nil {
			return nil, fmt.Errorf("failed to begin the snapshot holder: %w", err)
		}
		defer func() { _ = holdTx.Rollback(context.WithoutCancel(ctx)) }() // the holder only reads
		if _, err := holdTx.Exec(ctx, "SELECT 1 FROM "+pgx.Identifier{r.cfg.schema, "jobs"}.Sanitize()+" LIMIT 1"); err != nil {
			return nil, fmt.Errorf("failed to take the held snapshot: %w", err)
		}
	}

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
		var wg sync.WaitGroup
		errs := make([]error, r.cfg.producers)
		for g := range r.cfg.producers {
			wg.Go(func() {
				for i := int64(0); time.Now().Before(until); i++ {
					if _, err := enqueueOne(ctx, pool, payload(-1-(int64(g)<<40|i), time.Now())); err != nil {
						errs[g] = err
						return
					}
				}
			})
		}
		wg.Wait()
		return errors.Join(errs...)
	})
	if err != nil {
		return nil, err
	}
	prog.Set(0)

	var explained *explainer
	var inserted atomic.Int64
	errs := make([]error, r.cfg.producers)
	var wg sync.WaitGroup
	prog.Begin()
	start := time.Now()
	end := start.Add(r.cfg.steadyDuration)
	if r.cfg.explain {
		half := start.Add(r.cfg.steadyDuration / 2)
		explained = r.explainWhen(ctx, name, func() bool { return time.Now().After(half) })
	}
	for g := range r.cfg.producers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := int64(0); time.Now().Before(end); i++ {
				id, err := enqueueOne(ctx, pool, payload(int64(g)<<40|i, time.Now()))
				if err != nil {
					errs[g] = err
					return
				}
				rec.Commit(id, time.Now())
				inserted.Add(1)
			}
		}()
	}
	if err := wait.Sleep(ctx, time.Until(end)); err != nil {
		prog.End()
		return nil, err
	}
	insertedInWindow := inserted.Load()
	total, done, pending, err := countJobs(ctx, pool)
	done -= warmDone
	samples := prog.End()
	wg.Wait()
	explained.wait()
	if err != nil {
		return nil, err
	}
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	var deadTuples int64
	if holdXmin {
		// From the cumulative statistics, which lag by up to a second or so.
		_ = pool.QueryRow(ctx, "SELECT n_dead_tup FROM pg_stat_user_tables WHERE relid = 'jobs'::regclass").Scan(&deadTuples)
	}
	if err := ws.Stop(context.WithoutCancel(ctx)); err != nil {
		return nil, fmt.Errorf("workers: %w", err)
	}
	// The workers drain the backlog until they stop; only starts in the window count.
	lats, negative := rec.Latencies(end)
	secs := r.cfg.steadyDuration.Seconds()
	res := &result{Result: benchresult.Result{Scenario: name, Jobs: done, Seconds: secs}, Series: samples}
	res.setLatency("enqueue commit -> handler start", lats)
	res.Add("producers", r.cfg.producers)
	res.Add("inserted", insertedInWindow)
	res.Add("insert_per_sec", benchresult.Round(float64(insertedInWindow)/secs, 1))
	res.Add("completed", done)
	res.Add("final_backlog", pending)
	res.Add("rows_in_db", total)
	res.Add("negative_clamped", negative)
	res.Add("timing", "completions committed during the window; latency of jobs started in it")
	res.note("%d producers, %.0f enq/s, backlog %d", r.cfg.producers, float64(insertedInWindow)/secs, pending)
	if holdXmin {
		res.Add("xmin_held", true)
		res.Add("dead_tuples", deadTuples)
		res.note("snapshot held; ~%d dead tuples", deadTuples)
	}
	return res, nil
}
