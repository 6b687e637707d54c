package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/skiplock/skiplock/cmd/bench/internal/arrival"
	"github.com/skiplock/skiplock/cmd/bench/internal/benchresult"
	"github.com/skiplock/skiplock/cmd/bench/internal/wait"
)

// noopArgs is every benchmark job's payload.
type noopArgs struct {
	Seq int64 `json:"seq"`
}

func (noopArgs) Kind() string { return "bench_noop" }

// noopWorker does nothing but call onStart, when set, with the job's id.
type noopWorker struct {
	river.WorkerDefaults[noopArgs]
	onStart atomic.Pointer[func(id int64)]
}

func (w *noopWorker) Work(_ context.Context, job *river.Job[noopArgs]) error {
	if f := w.onStart.Load(); f != nil {
		(*f)(job.ID)
	}
	return nil
}

// newClient returns a River client; with slots > 0 it works the default queue with that
// many slots (MaxWorkers), without only inserts.
func (h *harness) newClient(slots int) (*river.Client[pgx.Tx], error) {
	workers := river.NewWorkers()
	river.AddWorker(workers, h.worker)
	cfg := &river.Config{
		Logger:            h.logger,
		Workers:           workers,
		FetchCooldown:     h.cfg.fetchCooldown, // zero: River's default
		FetchPollInterval: h.cfg.fetchPollInterval,
	}
	if slots > 0 {
		cfg.Queues = map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: slots}}
	}
	client, err := river.NewClient(riverpgxv5.New(h.pool), cfg)
	if err != nil {
		return nil, fmt.Errorf("failed to make a River client: %w", err)
	}
	return client, nil
}

// stopClient stops a working client, letting running jobs finish.
func stopClient(ctx context.Context, client *river.Client[pgx.Tx]) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	if err := client.Stop(ctx); err != nil {
		return fmt.Errorf("failed to stop the River client: %w", err)
	}
	return nil
}

// countCompletions counts the completions River reports (it reports a job completed once
// its completer has persisted it) until the returned stop is called.
func countCompletions(client *river.Client[pgx.Tx], bufferSize int) (completed *atomic.Int64, stop func()) {
	events, cancel := client.SubscribeConfig(&river.SubscribeConfig{
		ChanSize: bufferSize, // an event that does not fit is dropped
		Kinds:    []river.EventKind{river.EventKindJobCompleted},
	})
	completed = &atomic.Int64{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range events {
			completed.Add(1)
		}
	}()
	return completed, func() { cancel(); <-done }
}

// warmUp runs load, the scenario's own inserts with nothing recorded, until --warmup-ms has
// passed, then waits (at most --timeout-ms) until every job is completed: the measured
// window starts on warm connections, as cmd/bench's own scenarios do.
func (h *harness) warmUp(ctx context.Context, load func(ctx context.Context, until time.Time) error) error {
	if err := load(ctx, time.Now().Add(h.cfg.warmup)); err != nil {
		return fmt.Errorf("warm-up: %w", err)
	}
	var total, completed int64
	var countErr error
	if err := wait.Until(ctx, func() bool {
		total, completed, countErr = h.countJobs(ctx)
		return countErr != nil || total == completed
	}, h.cfg.timeout); err != nil {
		return fmt.Errorf("warm-up: %d of %d jobs completed: %w", completed, total, err)
	}
	return countErr
}

// countJobs returns the number of jobs in river_job, and how many are completed.
func (h *harness) countJobs(ctx context.Context) (total, completed int64, err error) {
	err = h.pool.QueryRow(ctx, `SELECT count(*), count(*) FILTER (WHERE state = 'completed') FROM river_job`).Scan(&total, &completed)
	if err != nil {
		err = fmt.Errorf("failed to count jobs: %w", err)
	}
	return total, completed, err
}

// insertMany inserts n jobs through InsertManyFast (COPY FROM) in batches of -batch.
func (h *harness) insertMany(ctx context.Context, client *river.Client[pgx.Tx], n int) error {
	for off := 0; off < n; off += h.cfg.batch {
		params := make([]river.InsertManyParams, min(h.cfg.batch, n-off))
		for i := range params {
			params[i] = river.InsertManyParams{Args: noopArgs{Seq: int64(off + i)}}
		}
		if _, err := client.InsertManyFast(ctx, params); err != nil {
			return fmt.Errorf("failed to insert jobs: %w", err)
		}
	}
	return nil
}

// insertBulk: N jobs through InsertManyFast in batches of -batch, one goroutine.
func (h *harness) insertBulk(ctx context.Context) (*benchresult.Result, error) {
	client, err := h.newClient(0)
	if err != nil {
		return nil, err
	}
	start := time.Now()
	if err := h.insertMany(ctx, client, h.cfg.jobs); err != nil {
		return nil, err
	}
	elapsed := time.Since(start)
	total, _, err := h.countJobs(ctx)
	if err != nil {
		return nil, err
	}
	if total != int64(h.cfg.jobs) {
		return nil, fmt.Errorf("expected %d jobs, found %d", h.cfg.jobs, total)
	}
	res := &benchresult.Result{Jobs: total, Seconds: elapsed.Seconds()}
	res.Add("api", "Client.InsertManyFast (COPY FROM)")
	res.Add("batch_size", h.cfg.batch)
	res.Add("rows_in_db", total)
	return res, nil
}

// insertSingle: N/10 jobs, one Client.Insert (its own transaction) each, from -producers
// goroutines.
func (h *harness) insertSingle(ctx context.Context) (*benchresult.Result, error) {
	client, err := h.newClient(0)
	if err != nil {
		return nil, err
	}
	n := int64(h.cfg.jobs / 10)
	var next atomic.Int64
	lat := make([][]time.Duration, h.cfg.producers)
	errs := make([]error, h.cfg.producers)
	var wg sync.WaitGroup
	start := time.Now()
	for g := range h.cfg.producers {
		wg.Go(func() {
			for i := next.Add(1) - 1; i < n; i = next.Add(1) - 1 {
				t := time.Now()
				if _, err := client.Insert(ctx, noopArgs{Seq: i}, nil); err != nil {
					errs[g] = fmt.Errorf("failed to insert a job: %w", err)
					return
				}
				lat[g] = append(lat[g], time.Since(t))
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	total, _, err := h.countJobs(ctx)
	if err != nil {
		return nil, err
	}
	if total != n {
		return nil, fmt.Errorf("expected %d jobs, found %d", n, total)
	}
	res := &benchresult.Result{Jobs: n, Seconds: elapsed.Seconds(), LatencyPrefix: "insert_"}
	res.SetLatency(slices.Concat(lat...))
	res.Add("api", "Client.Insert (one transaction per job)")
	res.Add("concurrency", h.cfg.producers)
	res.Add("rows_in_db", total)
	return res, nil
}

// workDrain: N jobs queued (untimed, then ANALYZE), then a client with slots workers
// starts; time to the last completion River reports persisted.
func (h *harness) workDrain(ctx context.Context, scenario string, slots int) (*benchresult.Result, error) {
	n := int64(h.cfg.jobs)
	inserter, err := h.newClient(0)
	if err != nil {
		return nil, err
	}
	if err := h.insertMany(ctx, inserter, int(n)); err != nil {
		return nil, err
	}
	if _, err := h.pool.Exec(ctx, "ANALYZE river_job"); err != nil {
		return nil, fmt.Errorf("failed to analyze: %w", err)
	}
	client, err := h.newClient(slots)
	if err != nil {
		return nil, err
	}
	completed, stopCounting := countCompletions(client, int(n)+1024)
	defer stopCounting()
	if err := h.markDrain("drain_begin", scenario); err != nil {
		return nil, err
	}
	start := time.Now()
	if err := client.Start(ctx); err != nil {
		return nil, fmt.Errorf("failed to start the River client: %w", err)
	}
	err = wait.Until(ctx, func() bool { return completed.Load() >= n }, h.cfg.timeout)
	elapsed := time.Since(start)
	if stopErr := stopClient(ctx, client); err == nil {
		err = stopErr
	}
	if err != nil {
		return nil, fmt.Errorf("%w (%d of %d completed)", err, completed.Load(), n)
	}
	_, done, err := h.countJobs(ctx)
	if err != nil {
		return nil, err
	}
	if done != n {
		return nil, fmt.Errorf("expected %d completed jobs, found %d", n, done)
	}
	// After the count: the bench prunes the completed jobs before it answers.
	if err := h.markDrain("drain_end", scenario); err != nil {
		return nil, err
	}
	res := &benchresult.Result{Jobs: n, Seconds: elapsed.Seconds()}
	res.Add("timing", "client started -> last completion persisted (EventKindJobCompleted)")
	res.Add("workers", slots)
	return res, nil
}

// latency: an idle client; -latency-jobs jobs inserted one at a time on a fixed schedule;
// from Insert returning (commit acknowledged) to Work starting.
func (h *harness) latency(ctx context.Context) (*benchresult.Result, error) {
	m := int64(h.cfg.latencyJobs)
	rec := benchresult.NewLatencyRecorder()
	var started atomic.Int64
	onStart := func(id int64) { rec.Start(id, time.Now()); started.Add(1) }
	h.worker.onStart.Store(&onStart)
	defer h.worker.onStart.Store(nil)
	client, err := h.newClient(h.cfg.workers)
	if err != nil {
		return nil, err
	}
	if err := client.Start(ctx); err != nil {
		return nil, fmt.Errorf("failed to start the River client: %w", err)
	}
	defer func() { _ = stopClient(ctx, client) }() // checked below on the success path
	if err := h.warmUp(ctx, func(ctx context.Context, until time.Time) error {
		t0 := time.Now()
		for i := int64(0); ; i++ {
			next := t0.Add(time.Duration(i) * h.cfg.latencyInterval)
			if !next.Before(until) {
				return nil
			}
			if err := wait.Sleep(ctx, time.Until(next)); err != nil {
				return err
			}
			if _, err := client.Insert(ctx, noopArgs{Seq: -1 - i}, nil); err != nil {
				return err
			}
		}
	}); err != nil {
		return nil, err
	}
	started.Store(0)
	var calls []time.Duration
	t0 := time.Now()
	for i := range m {
		if err := wait.Sleep(ctx, time.Until(t0.Add(time.Duration(i)*h.cfg.latencyInterval))); err != nil {
			return nil, err
		}
		before := time.Now()
		ins, err := client.Insert(ctx, noopArgs{Seq: i}, nil)
		if err != nil {
			return nil, fmt.Errorf("failed to insert a job: %w", err)
		}
		after := time.Now()
		rec.Commit(ins.Job.ID, after)
		calls = append(calls, after.Sub(before))
	}
	if err := wait.Until(ctx, func() bool { return started.Load() >= m }, 30*time.Second); err != nil {
		return nil, fmt.Errorf("%w: %d of %d jobs started after the last insert", err, started.Load(), m)
	}
	elapsed := time.Since(t0)
	if err := stopClient(ctx, client); err != nil {
		return nil, err
	}
	lats, negative := rec.Latencies(time.Time{})
	res := &benchresult.Result{Jobs: m, Seconds: elapsed.Seconds()}
	res.SetLatency(lats)
	res.Add("interval_ms", benchresult.MS(h.cfg.latencyInterval))
	res.Add("insert_call_p50_ms", benchresult.MS(benchresult.Summarize(calls).P50))
	res.Add("negative_clamped", negative)
	res.Add("timing", "Insert returned (commit acked) -> Work entered")
	return res, nil
}

// steady: -producers goroutines insert single jobs at full rate for -steady-duration while
// the client works; jobs are the completions persisted in the window, latency that of the
// jobs started in it.
func (h *harness) steady(ctx context.Context) (*benchresult.Result, error) {
	rec := benchresult.NewLatencyRecorder()
	onStart := func(id int64) { rec.Start(id, time.Now()) }
	h.worker.onStart.Store(&onStart)
	defer h.worker.onStart.Store(nil)
	client, err := h.newClient(h.cfg.workers)
	if err != nil {
		return nil, err
	}
	completed, stopCounting := countCompletions(client, 1<<20)
	defer stopCounting()
	if err := client.Start(ctx); err != nil {
		return nil, fmt.Errorf("failed to start the River client: %w", err)
	}
	defer func() { _ = stopClient(ctx, client) }() // checked below on the success path
	if err := h.warmUp(ctx, func(ctx context.Context, until time.Time) error {
		var wg sync.WaitGroup
		errs := make([]error, h.cfg.producers)
		for g := range h.cfg.producers {
			wg.Go(func() {
				for i := int64(0); time.Now().Before(until); i++ {
					if _, err := client.Insert(ctx, noopArgs{Seq: -1 - (int64(g)<<40 | i)}, nil); err != nil {
						errs[g] = err
						return
					}
				}
			})
		}
		wg.Wait()
		return errors.Join(errs...)
	}); err != nil {
		return nil, err
	}
	before := completed.Load()
	var inserted atomic.Int64
	errs := make([]error, h.cfg.producers)
	var wg sync.WaitGroup
	end := time.Now().Add(h.cfg.steadyDuration)
	for g := range h.cfg.producers {
		wg.Go(func() {
			for i := int64(0); time.Now().Before(end); i++ {
				ins, err := client.Insert(ctx, noopArgs{Seq: int64(g)<<40 | i}, nil)
				if err != nil {
					errs[g] = fmt.Errorf("failed to insert a job: %w", err)
					return
				}
				rec.Commit(ins.Job.ID, time.Now())
				inserted.Add(1)
			}
		})
	}
	if err := wait.Sleep(ctx, time.Until(end)); err != nil {
		return nil, err
	}
	done := completed.Load() - before
	insertedInWindow := inserted.Load()
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	total, persisted, err := h.countJobs(ctx)
	if err != nil {
		return nil, err
	}
	if err := stopClient(ctx, client); err != nil {
		return nil, err
	}
	lats, negative := rec.Latencies(end)
	secs := h.cfg.steadyDuration.Seconds()
	res := &benchresult.Result{Jobs: done, Seconds: secs}
	res.SetLatency(lats)
	res.Add("producers", h.cfg.producers)
	res.Add("inserted", insertedInWindow)
	res.Add("insert_per_sec", benchresult.Round(float64(insertedInWindow)/secs, 1))
	res.Add("completed", done)
	res.Add("final_backlog", total-persisted)
	res.Add("negative_clamped", negative)
	res.Add("timing", "completions persisted during the window; latency of jobs started in it")
	return res, nil
}

// steadyRate: --producers goroutines insert one job per Client.Insert on the fixed schedule
// of --rate jobs/s (arrival.Run, cmd/bench's) for --steady-duration-ms while the client
// works; jobs are the completions persisted in the window, latency that of the jobs started
// in it, and the backlog is counted at its end.
func (h *harness) steadyRate(ctx context.Context) (*benchresult.Result, error) {
	rec := benchresult.NewLatencyRecorder()
	onStart := func(id int64) { rec.Start(id, time.Now()) }
	h.worker.onStart.Store(&onStart)
	defer h.worker.onStart.Store(nil)
	client, err := h.newClient(h.cfg.workers)
	if err != nil {
		return nil, err
	}
	completed, stopCounting := countCompletions(client, 1<<20)
	defer stopCounting()
	if err := client.Start(ctx); err != nil {
		return nil, fmt.Errorf("failed to start the River client: %w", err)
	}
	defer func() { _ = stopClient(ctx, client) }() // checked below on the success path
	if err := h.warmUp(ctx, func(ctx context.Context, until time.Time) error {
		_, err := arrival.Run(ctx, time.Now(), time.Until(until), h.cfg.rate, h.cfg.producers, func(ctx context.Context, k int64) error {
			_, err := client.Insert(ctx, noopArgs{Seq: -1 - k}, nil)
			return err
		})
		return err
	}); err != nil {
		return nil, err
	}
	before := completed.Load()
	start := time.Now()
	end := start.Add(h.cfg.steadyDuration)
	sched, err := arrival.Run(ctx, start, h.cfg.steadyDuration, h.cfg.rate, h.cfg.producers, func(ctx context.Context, k int64) error {
		ins, err := client.Insert(ctx, noopArgs{Seq: k}, nil)
		if err != nil {
			return fmt.Errorf("failed to insert a job: %w", err)
		}
		rec.Commit(ins.Job.ID, time.Now())
		return nil
	})
	if err != nil {
		return nil, err
	}
	if err := wait.Sleep(ctx, time.Until(end)); err != nil {
		return nil, err
	}
	done := completed.Load() - before
	total, persisted, err := h.countJobs(ctx)
	if err != nil {
		return nil, err
	}
	if err := stopClient(ctx, client); err != nil {
		return nil, err
	}
	lats, negative := rec.Latencies(end)
	secs := h.cfg.steadyDuration.Seconds()
	res := &benchresult.Result{Jobs: done, Seconds: secs}
	res.SetLatency(lats)
	res.Add("producers", h.cfg.producers)
	res.Add("rate_per_sec", benchresult.Round(h.cfg.rate, 1))
	res.Add("inserted", sched.Enqueued)
	res.Add("insert_per_sec", benchresult.Round(float64(sched.Enqueued)/secs, 1))
	res.Add("arrivals_due", sched.Due)
	res.Add("max_schedule_lag_ms", benchresult.MS(sched.MaxLag))
	res.Add("completed", done)
	res.Add("final_backlog", total-persisted)
	res.Add("negative_clamped", negative)
	res.Add("timing", "completions persisted during the window; latency of jobs started in it")
	return res, nil
}
