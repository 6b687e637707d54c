package main

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// latencyRecorder pairs each job's enqueue commit with its handler start, by job id.
type latencyRecorder struct {
	mu        sync.Mutex
	committed map[int64]time.Time
	started   map[int64]time.Time
}

func newLatencyRecorder() *latencyRecorder {
	return &latencyRecorder{committed: map[int64]time.Time{}, started: map[int64]time.Time{}}
}

func (l *latencyRecorder) commit(id int64, at time.Time) {
	l.mu.Lock()
	l.committed[id] = at
	l.mu.Unlock()
}

func (l *latencyRecorder) start(id int64, at time.Time) {
	l.mu.Lock()
	if _, ok := l.started[id]; !ok {
		l.started[id] = at
	}
	l.mu.Unlock()
}

// latencies returns handler start minus commit for every job that has both and started
// no later than until (the zero time: whenever). A handler can start before the
// enqueueing goroutine sees its commit acknowledged; such values are counted in negative
// and clamped to zero, as the River peer does.
func (l *latencyRecorder) latencies(until time.Time) (d []time.Duration, negative int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for id, c := range l.committed {
		s, ok := l.started[id]
		if !ok || (!until.IsZero() && s.After(until)) {
			continue
		}
		v := s.Sub(c)
		if v < 0 {
			negative++
			v = 0
		}
		d = append(d, v)
	}
	return d, negative
}

// latency: idle workers; jobs enqueued one at a time on a fixed schedule; enqueue commit
// (the enqueue call returned) -> handler start.
func (r *runner) latency(ctx context.Context) (*result, error) {
	pool, err := r.e.newPool(ctx, r.cfg.pool)
	if err != nil {
		return nil, err
	}
	defer pool.Close()
	m := int64(r.cfg.latencyJobs)
	rec := newLatencyRecorder()
	prog := newProgress("latency", m, 0, r.cfg.progress)
	allStarted := make(chan struct{})
	var once sync.Once
	ws, err := startWorkers(ctx, pool, r.workerName(), r.cfg.workers, workerHooks{started: func(j benchJob) {
		rec.start(j.ID, time.Now())
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
	if err := sleepCtx(ctx, r.cfg.warmup); err != nil {
		return nil, err
	}

	calls := make([]time.Duration, 0, m)
	prog.Begin()
	t0 := time.Now()
	for i := range m {
		if wait := time.Until(t0.Add(time.Duration(i) * r.cfg.latencyInterval)); wait > 0 {
			if err := sleepCtx(ctx, wait); err != nil {
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
		rec.commit(id, after)
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
	lats, negative := rec.latencies(time.Time{})
	res := &result{Scenario: "latency", Jobs: m, Seconds: elapsed.Seconds(), Series: samples}
	res.setLatency("enqueue commit -> handler start", lats)
	res.add("interval_ms", ms(r.cfg.latencyInterval))
	res.add("insert_call_p50_ms", ms(summarize(calls).P50))
	res.add("negative_clamped", negative)
	res.add("timing", "enqueue call returned (commit acked) -> handler entered")
	res.note("1 job every %s", r.cfg.latencyInterval)
	return res, nil
}
