package chaos

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/skiplock/skiplock/driver"
)

// tablesSQL creates the run's bookkeeping: one chaos_effects row per job whose effect
// committed (effects counts the commits), one chaos_executions row per attempt begun. seq,
// from one sequence, orders the executions and effects of the whole run: a sequence never
// hands out a value twice, restarts included, so an attempt that began after an effect
// committed has the higher seq (the effect's is drawn before its commit).
const tablesSQL = `
DROP TABLE IF EXISTS chaos_effects, chaos_executions;
DROP SEQUENCE IF EXISTS chaos_order;
CREATE SEQUENCE chaos_order;
CREATE TABLE chaos_effects (
    job_id  bigint      NOT NULL,
    effects integer     NOT NULL DEFAULT 1,
    attempt integer     NOT NULL,
    worker  text        NOT NULL,
    at      timestamptz NOT NULL DEFAULT clock_timestamp(),
    seq     bigint      NOT NULL DEFAULT nextval('chaos_order'),
    CONSTRAINT chaos_effects_pkey PRIMARY KEY (job_id)
);
CREATE INDEX chaos_effects_at_idx ON chaos_effects (at);
CREATE TABLE chaos_executions (
    job_id  bigint      NOT NULL,
    attempt integer     NOT NULL,
    worker  text        NOT NULL,
    at      timestamptz NOT NULL DEFAULT clock_timestamp(),
    seq     bigint      NOT NULL DEFAULT nextval('chaos_order')
);
UPDATE jobs_settings SET backoff_base = interval '100 milliseconds', backoff_cap = interval '2 seconds';`

// controllerApp is the application_name of the controller's own connections; they are
// never terminated.
const controllerApp = "skiplock-chaos-controller"

// waitLimit bounds each wait of the controller for the system to settle (workers ready,
// a restart's first completion, orphans requeued); a wait that runs out is logged and the
// run goes on, so that the report, not a timeout, tells what went wrong.
const waitLimit = 60 * time.Second

// Run carries out one chaos run, as the package documentation describes, and returns its
// report. The error is non-nil when the run could not be carried out (bad options, no
// database, a worker that cannot start, a restart that failed) or when it broke a rule
// ([Report.Err]); the report is returned whenever the run got as far as counting.
func Run(ctx context.Context, opts *Options) (*Report, error) {
	o, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	r := &runner{o: o, rng: rand.New(rand.NewPCG(o.Seed, o.Seed^0x9e3779b97f4a7c15)), workerLog: &syncWriter{w: o.WorkerLog}}
	pc, err := r.poolConfig(controllerApp)
	if err != nil {
		return nil, err
	}
	pc.MaxConns = 4
	r.admin, err = pgxpool.NewWithConfig(ctx, pc)
	if err != nil {
		return nil, fmt.Errorf("chaos: failed to open a pool: %w", err)
	}
	defer r.admin.Close()
	defer r.stopAll()

	if err := r.setup(ctx); err != nil {
		return nil, err
	}
	steps, unit, est := r.plan()
	r.jobSleep = o.JobSleep
	if r.jobSleep == 0 {
		r.jobSleep = time.Duration(float64(o.Workers*o.Slots) * est.Seconds() * 1.5 / float64(o.Jobs) * float64(time.Second))
		r.jobSleep = min(max(r.jobSleep, time.Millisecond), 10*time.Second)
	}
	o.Logf("chaos: seed %d; %d jobs, %d workers x %d slots (pool %d), lease %s, poll %s; %d faults planned over ~%s; mean job sleep %s",
		o.Seed, o.Jobs, o.Workers, o.Slots, o.PoolConns, o.Lease, o.PollInterval, len(steps), est.Round(time.Second), r.jobSleep.Round(time.Millisecond))
	if err := r.enqueue(ctx); err != nil {
		return nil, err
	}

	r.start = time.Now()
	for slot := range o.Workers {
		if _, err := r.startProc(slot); err != nil {
			return nil, err
		}
	}
	d, err := r.waitListeners(ctx)
	if err != nil {
		return nil, fmt.Errorf("chaos: workers did not start: %w", err)
	}
	o.Logf("chaos: %d workers listening after %s", o.Workers, d.Round(time.Millisecond))

	var bg sync.WaitGroup
	var xmin *Fault
	if o.HeldXmin > 0 {
		bg.Go(func() { xmin = r.holdXmin(ctx, o.HeldXmin) })
	}
	for i, s := range steps {
		if err := sleepCtx(ctx, r.gap(ctx, steps[i:], unit)); err != nil {
			return nil, err
		}
		f := &Fault{Kind: s.kind}
		var err error
		switch s.kind {
		case faultKill:
			err = r.kill(ctx, f)
		case faultRestartFast, faultRestartImmediate:
			err = r.restart(ctx, f, s.mode)
		case faultTerminate:
			err = r.terminate(ctx, f)
		case faultRowLock:
			err = r.rowLock(ctx, f)
		}
		if err != nil {
			return nil, fmt.Errorf("chaos: fault %d (%s): %w", i+1, s.kind, err)
		}
		r.faults = append(r.faults, f)
		o.Logf("chaos: fault %d/%d %s %s at %.1fs (%s)", i+1, len(steps), f.Kind, f.Target, r.since(f.at), f.detail())
	}
	bg.Wait()
	if xmin != nil {
		r.faults = append(r.faults, xmin)
		slices.SortStableFunc(r.faults, func(a, b *Fault) int { return a.at.Compare(b.at) })
	}
	o.Logf("chaos: schedule done after %.1fs; waiting for the last jobs", time.Since(r.start).Seconds())
	r.drain(ctx)
	r.end = time.Now()
	r.stopAll()
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	rep, err := r.report(ctx)
	if err != nil {
		return nil, err
	}
	return rep, rep.Err()
}

// runner is the state of one run. The fault loop runs in Run's goroutine; worker exits
// are noticed on goroutines of their own, which only touch mu's fields.
type runner struct {
	o         *Options
	rng       *rand.Rand
	workerLog *syncWriter // the worker processes' stderr lines, one at a time
	admin     *pgxpool.Pool
	jobSleep  time.Duration
	hogJobs   int
	hangJobs  int

	start, end time.Time
	procs      []*proc  // by slot: the current process
	all        []*proc  // every process started, in order
	gens       []int    // by slot: processes started so far
	victims    []string // ids of the killed processes
	faults     []*Fault
	progress   []progressSample // jobs done, sampled before each fault

	mu         sync.Mutex
	violations []string
}

func (r *runner) violation(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.violations = append(r.violations, fmt.Sprintf(format, args...))
}

func (r *runner) since(t time.Time) float64 { return t.Sub(r.start).Seconds() }

// poolConfig parses the URL for a pool of the given application name, on the run's schema.
func (r *runner) poolConfig(app string) (*pgxpool.Config, error) {
	pc, err := pgxpool.ParseConfig(r.o.URL)
	if err != nil {
		return nil, fmt.Errorf("chaos: bad URL: %w", err)
	}
	if r.o.Schema != "" {
		pc.ConnConfig.RuntimeParams["search_path"] = pgx.Identifier{r.o.Schema}.Sanitize()
	}
	pc.ConnConfig.RuntimeParams["application_name"] = app
	return pc, nil
}

// connect opens a single connection of the controller's, for the held-xmin and row-lock
// sessions.
func (r *runner) connect(ctx context.Context, app string) (*pgx.Conn, error) {
	pc, err := r.poolConfig(app)
	if err != nil {
		return nil, err
	}
	return pgx.ConnectConfig(ctx, pc.ConnConfig)
}

// setup checks that the database is ready for a run and creates the run's tables.
func (r *runner) setup(ctx context.Context) error {
	var jobs int64
	if err := r.admin.QueryRow(ctx, "SELECT count(*) FROM jobs").Scan(&jobs); err != nil {
		return fmt.Errorf("chaos: the database has no skiplock installed where the URL looks: %w", err)
	}
	if jobs != 0 {
		return fmt.Errorf("chaos: the database already has %d jobs; a run needs an empty queue", jobs)
	}
	if _, err := r.admin.Exec(ctx, tablesSQL); err != nil {
		return fmt.Errorf("chaos: failed to create the run's tables: %w", err)
	}
	if cc := r.o.Concurrency; cc != nil {
		// fair and ordered only when set: the call then works on a schema without them too.
		sql := "SELECT jobs_set_concurrency(queue => $1, max_running => nullif($2, 0), per_key => nullif($3, 0)"
		args := []any{driver.QueueDefault, cc.MaxRunning, cc.PerKey}
		if cc.Fair {
			sql += ", fair => true"
		}
		if cc.Ordered {
			sql += ", ordered => true"
		}
		if _, err := r.admin.Exec(ctx, sql+")", args...); err != nil {
			return fmt.Errorf("chaos: failed to set the queue's concurrency settings: %w", err)
		}
	}
	return nil
}

// keyOf returns the concurrency key of job i, "" without Keys.
func (r *runner) keyOf(i int) string {
	o := r.o
	if o.Keys == 0 {
		return ""
	}
	if o.HotKeyShare == 0 {
		return "k" + strconv.Itoa(i%o.Keys)
	}
	hot := int(float64(o.Jobs) * o.HotKeyShare)
	if i < hot {
		return "k0"
	}
	return "k" + strconv.Itoa(1+(i-hot)%(o.Keys-1))
}

// enqueue adds the run's jobs, their kinds and sleeps drawn from the seeded generator.
func (r *runner) enqueue(ctx context.Context) error {
	o := r.o
	const batch = 5000
	params := make([]driver.EnqueueParams, 0, batch)
	flush := func() error {
		if len(params) == 0 {
			return nil
		}
		if _, err := driver.EnqueueMany(ctx, r.admin, params); err != nil {
			return fmt.Errorf("chaos: failed to enqueue: %w", err)
		}
		params = params[:0]
		return nil
	}
	for i := range o.Jobs {
		kind := kindWork
		switch x := r.rng.Float64(); {
		case x < o.HangFraction:
			kind = kindHang
			r.hangJobs++
		case x < o.HangFraction+o.HogFraction:
			kind = kindHog
			r.hogJobs++
		}
		sleepMS := int(r.rng.Float64() * 2 * float64(r.jobSleep) / float64(time.Millisecond))
		opts := &driver.EnqueueOpts{MaxAttempts: o.MaxAttempts, ConcurrencyKey: r.keyOf(i)}
		params = append(params, driver.EnqueueParams{Kind: kind, Payload: jobArgs{Seq: i, SleepMS: sleepMS}, Opts: opts})
		if len(params) == batch {
			if err := flush(); err != nil {
				return err
			}
		}
	}
	return flush()
}

// drain waits until no job is queued or running, or DrainTimeout passes.
func (r *runner) drain(ctx context.Context) {
	deadline := time.Now().Add(r.o.DrainTimeout)
	for {
		var left int64
		err := r.admin.QueryRow(ctx, "SELECT count(*) FROM jobs WHERE state IN ('queued', 'running')").Scan(&left)
		if err == nil && left == 0 {
			return
		}
		if time.Now().After(deadline) {
			r.o.Logf("chaos: %d jobs still queued or running after the drain timeout (%s)", left, r.o.DrainTimeout)
			return
		}
		if sleepCtx(ctx, 200*time.Millisecond) != nil {
			return
		}
	}
}

// retry runs fn until it succeeds, ctx is done or limit passes: the controller's queries
// outlive restarts and terminated connections.
func (r *runner) retry(ctx context.Context, limit time.Duration, fn func(ctx context.Context) error) error {
	deadline := time.Now().Add(limit)
	for {
		qctx, cancel := context.WithDeadline(ctx, deadline)
		err := fn(qctx)
		cancel()
		if err == nil {
			return nil
		}
		if ctx.Err() != nil || time.Now().After(deadline) {
			return err
		}
		if err := sleepCtx(ctx, 100*time.Millisecond); err != nil {
			return err
		}
	}
}

// waitUntil polls cond every 50ms until it is true, ctx is done or limit passes; it
// returns how long it waited and whether cond came true.
func (r *runner) waitUntil(ctx context.Context, limit time.Duration, cond func(ctx context.Context) (bool, error)) (time.Duration, bool) {
	began := time.Now()
	for {
		qctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		ok, err := cond(qctx)
		cancel()
		if err == nil && ok {
			return time.Since(began), true
		}
		if ctx.Err() != nil || time.Since(began) > limit {
			return time.Since(began), false
		}
		_ = sleepCtx(ctx, 50*time.Millisecond)
	}
}

// waitListeners waits until every live worker has its LISTEN connection.
func (r *runner) waitListeners(ctx context.Context) (time.Duration, error) {
	var names []string
	for _, p := range r.procs {
		if p != nil && !p.gone() {
			names = append(names, appPrefix+p.id+"/listen")
		}
	}
	d, ok := r.waitUntil(ctx, waitLimit, func(ctx context.Context) (bool, error) {
		var n int
		err := r.admin.QueryRow(ctx, `SELECT count(DISTINCT application_name) FROM pg_stat_activity
			WHERE application_name = ANY($1)`, names).Scan(&n)
		return n == len(names), err
	})
	if !ok {
		return d, fmt.Errorf("not every worker of %v was listening after %s", names, d.Round(time.Millisecond))
	}
	return d, nil
}

// waitOrphans waits until no killed worker holds a running job any more, so that the next
// restart or row lock does not delay their recovery and blur its measurement.
func (r *runner) waitOrphans(ctx context.Context) {
	if len(r.victims) == 0 {
		return
	}
	d, ok := r.waitUntil(ctx, waitLimit, func(ctx context.Context) (bool, error) {
		var n int
		err := r.admin.QueryRow(ctx, "SELECT count(*) FROM jobs WHERE state = 'running' AND lease_holder = ANY($1)",
			r.victims).Scan(&n)
		return n == 0, err
	})
	if !ok {
		r.o.Logf("chaos: killed workers still held running jobs after %s", d.Round(time.Millisecond))
	}
}

// waitCompletion waits until a job completes after t, or no job is left.
func (r *runner) waitCompletion(ctx context.Context, t time.Time) {
	d, ok := r.waitUntil(ctx, waitLimit, func(ctx context.Context) (bool, error) {
		var done bool
		err := r.admin.QueryRow(ctx, `SELECT EXISTS (SELECT FROM chaos_effects WHERE at > $1)
			OR NOT EXISTS (SELECT FROM jobs WHERE state IN ('queued', 'running'))`, t).Scan(&done)
		return done, err
	})
	if !ok {
		r.o.Logf("chaos: no job completed in the %s after the fault", d.Round(time.Millisecond))
	}
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// errNoWorker is returned when a kill finds no process to kill.
var errNoWorker = errors.New("no live worker process")
