package main

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// runner runs the scenarios against one env.
type runner struct {
	e   *env
	cfg *config
}

func (r *runner) workerName() string { return "bench-" + strconv.Itoa(os.Getpid()) }

// payload is a job's payload: its sequence number and the wall-clock time (Unix ns) the
// enqueue call began.
func payload(seq int64, at time.Time) []byte {
	return fmt.Appendf(nil, `{"seq":%d,"enqueued_at":%d}`, seq, at.UnixNano())
}

// bulkLoad enqueues n jobs through jobs_enqueue_many in batches of cfg.batch.
func (r *runner) bulkLoad(ctx context.Context, pool *pgxpool.Pool, n int, prog *progress) error {
	now := time.Now()
	for off := 0; off < n; off += r.cfg.batch {
		size := min(r.cfg.batch, n-off)
		payloads := make([][]byte, size)
		for i := range payloads {
			payloads[i] = payload(int64(off+i), now)
		}
		if err := enqueueMany(ctx, pool, payloads); err != nil {
			return err
		}
		if prog != nil {
			prog.Add(int64(size))
		}
	}
	return nil
}

// countJobs returns the number of jobs in each state class.
func countJobs(ctx context.Context, pool *pgxpool.Pool) (total, done, pending int64, err error) {
	err = pool.QueryRow(ctx, `
		SELECT count(*),
		       count(*) FILTER (WHERE state = 'done'),
		       count(*) FILTER (WHERE state IN ('queued', 'running'))
		FROM jobs`).Scan(&total, &done, &pending)
	if err != nil {
		err = fmt.Errorf("failed to count jobs: %w", err)
	}
	return total, done, pending, err
}

// waitCompleted returns once completed() reaches n: the workers count the completions the
// database confirmed, so no polling query competes with them for the server.
func waitCompleted(ctx context.Context, completed func() int64, n int64, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for completed() < n {
		if time.Now().After(deadline) {
			return fmt.Errorf("timed out after %s with %d of %d jobs completed", timeout, completed(), n)
		}
		if err := sleepCtx(ctx, 500*time.Microsecond); err != nil {
			return err
		}
	}
	return nil
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

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
	res := &result{Scenario: "insert_bulk", Jobs: int64(n), Seconds: elapsed.Seconds(), Series: samples}
	res.add("api", "driver.EnqueueMany -> jobs_enqueue_many (one call per batch)")
	res.add("batch_size", r.cfg.batch)
	res.add("rows_in_db", total)
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
	res := &result{Scenario: "insert_single", Jobs: n, Seconds: elapsed.Seconds(), Series: samples}
	res.setLatency("insert call (one tx)", all)
	res.LatencyPrefix = "insert_" // the peers' insert_p50_ms, insert_p99_ms
	res.add("api", "driver.Enqueue (one transaction per job)")
	res.add("concurrency", r.cfg.producers)
	res.add("rows_in_db", total)
	res.note("%d goroutines", r.cfg.producers)
	return res, nil
}

// warmPool opens n connections so that connection setup is not timed.
func warmPool(ctx context.Context, pool *pgxpool.Pool, n int) error {
	conns := make([]*pgxpool.Conn, 0, n)
	defer func() {
		for _, c := range conns {
			c.Release()
		}
	}()
	for range n {
		c, err := pool.Acquire(ctx)
		if err != nil {
			return fmt.Errorf("failed to open a connection: %w", err)
		}
		conns = append(conns, c)
	}
	return nil
}

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
	res := &result{Scenario: name, Jobs: n, Seconds: elapsed.Seconds(), Series: samples}
	res.add("timing", "workers started -> last completion committed (driver EventCompleted)")
	res.add("handled", prog.done.Load())
	if preloadDone > 0 {
		res.add("finished_jobs_in_table", preloadDone)
		res.note("%d done jobs in the table", preloadDone)
	}
	res.note("%d slots", r.cfg.workers)
	return res, nil
}

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

	rec := newLatencyRecorder()
	prog := newProgress(name, 0, r.cfg.steadyDuration, r.cfg.progress)
	ws, err := startWorkers(ctx, pool, r.workerName(), r.cfg.workers, workerHooks{started: func(j benchJob) {
		rec.start(j.ID, time.Now())
		prog.Add(1)
	}})
	if err != nil {
		return nil, err
	}
	defer func() { _ = ws.Stop(context.WithoutCancel(ctx)) }() // checked below on the success path
	if err := warmPool(ctx, pool, r.cfg.producers+2); err != nil {
		return nil, err
	}
	if err := sleepCtx(ctx, r.cfg.warmup); err != nil {
		return nil, err
	}

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
				rec.commit(id, time.Now())
				inserted.Add(1)
			}
		}()
	}
	if err := sleepCtx(ctx, time.Until(end)); err != nil {
		prog.End()
		return nil, err
	}
	insertedInWindow := inserted.Load()
	total, done, pending, err := countJobs(ctx, pool)
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
	lats, negative := rec.latencies(end)
	secs := r.cfg.steadyDuration.Seconds()
	res := &result{Scenario: name, Jobs: done, Seconds: secs, Series: samples}
	res.setLatency("enqueue commit -> handler start", lats)
	res.add("producers", r.cfg.producers)
	res.add("inserted", insertedInWindow)
	res.add("insert_per_sec", round(float64(insertedInWindow)/secs, 1))
	res.add("completed", done)
	res.add("final_backlog", pending)
	res.add("rows_in_db", total)
	res.add("negative_clamped", negative)
	res.add("timing", "completions committed during the window; latency of jobs started in it")
	res.note("%d producers, %.0f enq/s, backlog %d", r.cfg.producers, float64(insertedInWindow)/secs, pending)
	if holdXmin {
		res.add("xmin_held", true)
		res.add("dead_tuples", deadTuples)
		res.note("snapshot held; ~%d dead tuples", deadTuples)
	}
	return res, nil
}

// explainer prints the plan of jobs_claim's query once a condition holds; see explainWhen.
type explainer struct{ done chan struct{} }

func (x *explainer) wait() {
	if x != nil {
		<-x.done
	}
}

// explainWhen waits (in the background) until cond holds, then claims -workers jobs and
// completes them in a transaction that it rolls back, with auto_explain sending the plans
// of the statements inside jobs_claim and jobs_complete_many as notices, and prints them
// to stderr.
func (r *runner) explainWhen(ctx context.Context, scenario string, cond func() bool) *explainer {
	x := &explainer{done: make(chan struct{})}
	go func() {
		defer close(x.done)
		for !cond() {
			if sleepCtx(ctx, 5*time.Millisecond) != nil {
				return
			}
		}
		cc, err := pgx.ParseConfig(r.e.url)
		if err != nil {
			logf("explain: %v", err)
			return
		}
		cc.RuntimeParams["search_path"] = pgx.Identifier{r.cfg.schema}.Sanitize()
		var mu sync.Mutex
		var plans []string
		cc.OnNotice = func(_ *pgconn.PgConn, n *pgconn.Notice) {
			mu.Lock()
			plans = append(plans, n.Message)
			mu.Unlock()
		}
		conn, err := pgx.ConnectConfig(ctx, cc)
		if err != nil {
			logf("explain: %v", err)
			return
		}
		defer conn.Close(context.WithoutCancel(ctx))
		for _, s := range []string{
			"LOAD 'auto_explain'",
			"SET auto_explain.log_min_duration = 0",
			"SET auto_explain.log_analyze = on",
			"SET auto_explain.log_buffers = on",
			"SET auto_explain.log_timing = on",
			"SET auto_explain.log_nested_statements = on",
			"SET auto_explain.log_level = notice",
		} {
			if _, err := conn.Exec(ctx, s); err != nil {
				logf("explain: %s: %v", s, err)
				return
			}
		}
		tx, err := conn.Begin(ctx)
		if err != nil {
			logf("explain: %v", err)
			return
		}
		// Claim a batch and complete it, as a worker does, then undo both.
		var claimed int
		err = tx.QueryRow(ctx, `
			WITH c AS MATERIALIZED (SELECT id, attempt FROM jobs_claim('bench-explain', $1, $2))
			SELECT count(*) FROM jobs_complete_many(
			    coalesce((SELECT array_agg(id) FROM c), '{}'), coalesce((SELECT array_agg(attempt) FROM c), '{}'))`,
			r.cfg.workers, []string{benchQueue}).Scan(&claimed)
		_ = tx.Rollback(ctx)
		if err != nil {
			logf("explain: %v", err)
			return
		}
		mu.Lock()
		defer mu.Unlock()
		fmt.Fprintf(os.Stderr, "\n==== %s: plans of jobs_claim(max_jobs => %d) + jobs_complete_many under load (%d jobs, rolled back) ====\n",
			scenario, r.cfg.workers, claimed)
		for _, p := range plans {
			fmt.Fprintln(os.Stderr, p)
		}
		fmt.Fprintln(os.Stderr, "====")
	}()
	return x
}
