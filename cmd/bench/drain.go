package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/skiplock/skiplock/cmd/bench/internal/benchresult"
	"github.com/skiplock/skiplock/driver"
)

// drainLimits are the flow-control settings of a limited drain (the limit_* scenarios, fair
// and ordered): the queue's jobs_set_concurrency arguments (0 or false: not set), and how many
// concurrency keys the jobs go to (0: no keys).
type drainLimits struct {
	maxRunning int
	perKey     int
	fair       bool
	ordered    bool
	keys       int
	// hotShare is the share of the jobs that go to key k0, all enqueued before the others;
	// the others cycle through the remaining keys-1 keys. 0: every job cycles through the
	// keys, job i to key k<i mod keys>.
	hotShare float64
}

// keyOf returns the key index of job seq of n.
func (l *drainLimits) keyOf(seq, n int) int {
	if l.hotShare == 0 {
		return seq % l.keys
	}
	hot := l.hotJobs(n)
	if seq < hot {
		return 0
	}
	return 1 + (seq-hot)%(l.keys-1)
}

// hotJobs is how many of n jobs go to key k0 when hotShare is set.
func (l *drainLimits) hotJobs(n int) int { return int(float64(n) * l.hotShare) }

// workDrain: N no-op jobs queued, then the workers start; time from starting them to the
// last completion committed. With preloadDone > 0 (the bloat scenario) that many finished
// jobs are put in the table first, straight through SQL, and vacuumed. With limits, the
// jobs get concurrency keys and the queue its concurrency limits before the workers start.
// slots is the client's worker slots (-workers but in work_drain_1000).
func (r *runner) workDrain(ctx context.Context, name string, slots, preloadDone int, limits *drainLimits) (*result, error) {
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
	if limits != nil && limits.keys > 0 {
		if err := r.bulkLoadKeyed(ctx, pool, int(n), limits); err != nil {
			return nil, err
		}
	} else if err := r.bulkLoad(ctx, pool, int(n), nil); err != nil {
		return nil, err
	}
	var watch *keyWatch
	if limits != nil {
		if err := setLimits(ctx, pool, limits); err != nil {
			return nil, err
		}
		defer func() {
			// The next scenarios drain the same queue without limits.
			if err := setLimits(context.WithoutCancel(ctx), pool, &drainLimits{}); err != nil {
				logf("%s: %v", name, err)
			}
		}()
		if limits.fair || limits.ordered {
			if watch, err = newKeyWatch(ctx, pool, limits.keys, int(n)); err != nil {
				return nil, err
			}
		}
	}
	res, err := r.drain(ctx, pool, name, slots, n, int64(preloadDone), watch)
	if err != nil {
		return nil, err
	}
	if preloadDone > 0 {
		res.Add("finished_jobs_in_table", preloadDone)
		res.note("%d done jobs in the table", preloadDone)
	}
	if limits != nil {
		if limits.maxRunning > 0 {
			res.Add("max_running", limits.maxRunning)
			res.note("max_running %d", limits.maxRunning)
		}
		if limits.perKey > 0 {
			res.Add("per_key", limits.perKey)
			res.note("per_key %d", limits.perKey)
		}
		if limits.fair {
			res.Add("fair", true)
			res.note("fair")
		}
		if limits.ordered {
			res.Add("ordered", true)
			res.note("ordered")
		}
		if limits.keys > 0 {
			res.Add("concurrency_keys", limits.keys)
			if limits.hotShare > 0 {
				res.Add("hot_key_jobs", limits.hotJobs(int(n)))
				res.note("%d keys, k0 holding %d jobs enqueued first", limits.keys, limits.hotJobs(int(n)))
			} else {
				res.note("%d keys", limits.keys)
			}
		}
		if watch != nil {
			watch.report(res, limits, res.Seconds)
		}
	}
	res.Add("workers", slots) // over the run's -workers among the common fields
	res.note("%d slots", slots)
	return res, nil
}

// drain is the timed part of a drain, once its n jobs are in the table beside preloadDone
// finished ones: the table analyzed and checkpointed, then a client with slots worker slots
// (and the settings of startWorkers) started; time from starting it to the last completion
// committed. It checks that every job is done and, without preloaded jobs, measures what the
// jobs cost the server, the deferred prune and vacuum included. A non-nil watch sees every
// handler start and return. The caller adds its own fields, then "workers".
func (r *runner) drain(ctx context.Context, pool *pgxpool.Pool, name string, slots int, n, preloadDone int64, watch *keyWatch) (*result, error) {
	if err := settle(ctx, pool, "jobs"); err != nil {
		return nil, err
	}

	prog := newProgress(name, n, 0, r.cfg.progress)
	var explained *explainer
	if r.cfg.explain {
		explained = r.explainWhen(ctx, name, func() bool { return prog.done.Load() >= n/2 })
	}
	var meter *costMeter
	var began costMark
	var err error
	if preloadDone == 0 { // the deferred prune would take the preloaded jobs too
		if meter, err = r.e.newCostMeter(ctx); err != nil {
			return nil, err
		}
		defer meter.close()
		if began, err = meter.mark(ctx); err != nil {
			return nil, err
		}
	}
	var completed atomic.Int64
	prog.Begin()
	start := time.Now()
	hooks := workerHooks{
		started:   func(benchJob) { prog.Add(1) },
		completed: func() { completed.Add(1) },
	}
	if watch != nil {
		hooks.started = func(j benchJob) {
			watch.started(j.ID, start)
			prog.Add(1)
		}
		hooks.returned = func(j benchJob) { watch.returned(j.ID) }
	}
	ws, err := startWorkers(ctx, pool, r.workerName(), slots, r.cfg.claimAhead, hooks)
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
	if done != n+preloadDone {
		return nil, fmt.Errorf("expected %d done jobs, found %d", n+preloadDone, done)
	}
	res := &result{Result: benchresult.Result{Scenario: name, Jobs: n, Seconds: elapsed.Seconds()}, Series: samples}
	if meter != nil {
		// After the count, as the peers' harnesses mark their end after theirs.
		drained, err := meter.since(ctx, began)
		if err != nil {
			return nil, err
		}
		conn, err := pool.Acquire(ctx)
		if err != nil {
			return nil, err
		}
		deferred, err := meter.runDeferred(ctx, conn.Conn(), "skiplock")
		conn.Release()
		if err != nil {
			return nil, err
		}
		addCost(res, drained, deferred)
	}
	res.Add("timing", "workers started -> last completion committed (driver EventCompleted)")
	res.Add("handled", prog.done.Load())
	return res, nil
}

// bulkLoadKeyed enqueues n jobs like bulkLoad, job i with concurrency key "k<limits.keyOf(i)>":
// without hotShare job i goes to key i mod keys, so that the keys interleave in claim order.
func (r *runner) bulkLoadKeyed(ctx context.Context, pool *pgxpool.Pool, n int, limits *drainLimits) error {
	now := time.Now()
	for off := 0; off < n; off += r.cfg.batch {
		size := min(r.cfg.batch, n-off)
		params := make([]driver.EnqueueParams, size)
		for i := range params {
			seq := off + i
			params[i] = driver.EnqueueParams{Kind: benchKind, Payload: json.RawMessage(payload(int64(seq), now)),
				Opts: &driver.EnqueueOpts{ConcurrencyKey: "k" + strconv.Itoa(limits.keyOf(seq, n))}}
		}
		if _, err := driver.EnqueueMany(ctx, pool, params); err != nil {
			return err
		}
	}
	return nil
}
