package chaos

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/skiplock/skiplock/internal/pglocal"
)

// The kinds of fault, as Fault.Kind names them.
const (
	faultKill             = "kill"
	faultRestartFast      = "restart_fast"
	faultRestartImmediate = "restart_immediate"
	faultTerminate        = "terminate"
	faultRowLock          = "row_lock"
	faultHeldXmin         = "held_xmin"
)

// Fault is one fault of a run, as injected and as recovered from.
type Fault struct {
	// Kind is kill, restart_fast, restart_immediate, terminate, row_lock or held_xmin.
	Kind string `json:"kind"`

	// Target is the killed worker's id, or what was terminated or locked.
	Target string `json:"target,omitempty"`

	// AtSeconds is when the fault began and EndSeconds when it ended (the process dead,
	// the server accepting connections again, the lock released), in seconds since the
	// workers started.
	AtSeconds  float64 `json:"at_seconds"`
	EndSeconds float64 `json:"end_seconds"`

	// InFlight is how many jobs the killed worker held when it was killed, and Orphans how
	// many of them lease expiry gave back; OrphansSeconds is the time from the kill until
	// the last of them was back in the queue.
	InFlight       int     `json:"in_flight,omitempty"`
	Orphans        int     `json:"orphans,omitempty"`
	OrphansSeconds float64 `json:"orphans_seconds,omitempty"`

	// Terminated is how many backends a terminate round ended, Listeners how many of them
	// were LISTEN connections, and ListenSeconds the time until every worker listened again.
	Terminated    int     `json:"terminated,omitempty"`
	Listeners     int     `json:"listeners,omitempty"`
	ListenSeconds float64 `json:"listen_seconds,omitempty"`

	// HeldSeconds is how long the snapshot was actually held, restarts aside.
	HeldSeconds float64 `json:"held_seconds,omitempty"`

	// Locked is how many jobs the row-lock session held.
	Locked int `json:"locked,omitempty"`

	// AllResumeSeconds, for restarts and terminate rounds, is the time from the end of the
	// fault until every worker process alive then had committed a completion.
	AllResumeSeconds float64 `json:"all_resume_seconds,omitempty"`

	// ResumeSeconds is the time from the end of the fault to the next committed
	// completion; -1 when no job was left to complete.
	ResumeSeconds float64 `json:"resume_seconds"`

	// RecoverySeconds is the fault's recovery: the longest of ResumeSeconds,
	// OrphansSeconds, ListenSeconds and AllResumeSeconds.
	RecoverySeconds float64 `json:"recovery_seconds"`

	at, end time.Time
}

// detail is a short description for the log and the table.
func (f *Fault) detail() string {
	switch f.Kind {
	case faultKill:
		return fmt.Sprintf("%d jobs in flight", f.InFlight)
	case faultTerminate:
		return fmt.Sprintf("%d backends, %d LISTEN", f.Terminated, f.Listeners)
	case faultRowLock:
		return fmt.Sprintf("%d jobs locked for %.1fs", f.Locked, f.end.Sub(f.at).Seconds())
	case faultHeldXmin:
		return fmt.Sprintf("snapshot held %.1fs of %.1fs", f.HeldSeconds, f.end.Sub(f.at).Seconds())
	default:
		return fmt.Sprintf("down %.1fs", f.end.Sub(f.at).Seconds())
	}
}

// step is one planned fault.
type step struct {
	kind   string
	mode   pglocal.StopMode
	jitter float64 // the gap before it is jitter × the gap unit; 0.5 to 1.5
}

// plan draws the run's schedule from the seeded generator: the faults in random order,
// each with a random gap before it. It returns the gap unit (about a second, longer when
// the held snapshot needs the schedule to last) and an estimate of the schedule's length.
func (r *runner) plan() (steps []step, unit, est time.Duration) {
	o := r.o
	for range o.Kills {
		steps = append(steps, step{kind: faultKill})
	}
	for _, m := range o.Restarts {
		steps = append(steps, step{kind: "restart_" + string(m), mode: m})
	}
	for range o.TerminateRounds {
		steps = append(steps, step{kind: faultTerminate})
	}
	if o.RowLock > 0 {
		steps = append(steps, step{kind: faultRowLock})
	}
	r.rng.Shuffle(len(steps), func(i, j int) { steps[i], steps[j] = steps[j], steps[i] })
	for i := range steps {
		steps[i].jitter = 0.5 + r.rng.Float64()
	}
	busy := r.busy(steps)
	unit = time.Second
	if need := o.HeldXmin + 3*time.Second - busy - time.Duration(len(steps))*unit; need > 0 && len(steps) > 0 {
		unit += need / time.Duration(len(steps))
	}
	est = busy + time.Duration(len(steps))*unit
	return steps, unit, max(est, o.HeldXmin+3*time.Second)
}

// busy estimates the time the faults themselves take, gaps aside: restarts and the row
// lock first wait for the orphans of earlier kills (up to a lease), a restart takes a
// couple of seconds on a loaded machine.
func (r *runner) busy(steps []step) time.Duration {
	var d time.Duration
	for _, s := range steps {
		switch s.kind {
		case faultKill:
		case faultTerminate:
			d += 500 * time.Millisecond
		case faultRowLock:
			d += r.o.Lease/2 + r.o.RowLock
		default:
			d += r.o.Lease/2 + 2*time.Second
		}
	}
	return d
}

// gap is the wait before left[0], the next fault: its jitter times a unit chosen so that
// the remaining faults spread over the first 75 % of the rest of the run, and at least
// 300ms. The rest of the run is estimated from the rate of completions over the last ten
// seconds or so; before there is a rate, the unit is the planned one.
func (r *runner) gap(ctx context.Context, left []step, planned time.Duration) time.Duration {
	unit := planned
	var done int
	if err := r.admin.QueryRow(ctx, "SELECT count(*) FROM chaos_effects").Scan(&done); err == nil {
		now := time.Now()
		r.progress = append(r.progress, progressSample{now, done})
		from := r.progress[0]
		for _, p := range r.progress {
			if now.Sub(p.at) < 10*time.Second {
				break
			}
			from = p
		}
		if done > from.done {
			rate := float64(done-from.done) / now.Sub(from.at).Seconds()
			eta := time.Duration(float64(r.o.Jobs-done) / rate * float64(time.Second))
			unit = (eta*3/4 - r.busy(left)) / time.Duration(len(left))
			unit = min(max(unit, 300*time.Millisecond), 10*time.Second)
		}
	}
	return time.Duration(left[0].jitter * float64(unit))
}

// progressSample is the number of jobs done at a moment, for gap's rate.
type progressSample struct {
	at   time.Time
	done int
}

// kill kills a worker process that has jobs in flight with SIGKILL and starts another in
// its place.
func (r *runner) kill(ctx context.Context, f *Fault) error {
	held := map[string]int{}
	_ = r.retry(ctx, 10*time.Second, func(ctx context.Context) error {
		rows, err := r.admin.Query(ctx, "SELECT lease_holder, count(*)::int FROM jobs WHERE state = 'running' GROUP BY 1")
		if err != nil {
			return err
		}
		clear(held)
		var id string
		var n int
		_, err = pgx.ForEachRow(rows, []any{&id, &n}, func() error { held[id] = n; return nil })
		return err
	})
	// Prefer processes that have run a while and hold jobs; fall back to any live one.
	var busy, live []int
	for slot, p := range r.procs {
		if p == nil || p.gone() {
			continue
		}
		live = append(live, slot)
		if held[p.id] > 0 && time.Since(p.started) > time.Second {
			busy = append(busy, slot)
		}
	}
	pick := busy
	if len(pick) == 0 {
		pick = live
	}
	if len(pick) == 0 {
		return errNoWorker
	}
	slot := pick[r.rng.IntN(len(pick))]
	p := r.procs[slot]
	f.Target, f.InFlight = p.id, held[p.id]
	f.at = time.Now()
	p.kill9()
	f.end = time.Now()
	r.victims = append(r.victims, p.id)
	f.AtSeconds, f.EndSeconds = r.since(f.at), r.since(f.end)
	_, err := r.startProc(slot)
	return err
}

// restart restarts the server in the given mode, after the orphans of earlier kills are
// back in the queue, and waits for the first completion after it.
func (r *runner) restart(ctx context.Context, f *Fault, mode pglocal.StopMode) error {
	r.waitOrphans(ctx)
	f.Target = "server"
	f.at = time.Now()
	err := r.o.Server.Restart(ctx, mode)
	f.end = time.Now()
	f.AtSeconds, f.EndSeconds = r.since(f.at), r.since(f.end)
	if err != nil {
		return err
	}
	r.waitCompletion(ctx, f.end)
	return nil
}

// terminate ends a random set of the workers' backends with pg_terminate_backend: the
// LISTEN connection of one worker always, and each other worker connection with
// probability 1/3. It then waits until every worker listens again.
func (r *runner) terminate(ctx context.Context, f *Fault) error {
	live := map[string]bool{}
	var listeners []string
	for _, p := range r.procs {
		if p != nil && !p.gone() {
			live[appPrefix+p.id+"/pool"] = true
			live[appPrefix+p.id+"/listen"] = true
			listeners = append(listeners, appPrefix+p.id+"/listen")
		}
	}
	if len(listeners) == 0 {
		return errNoWorker
	}
	chosen := listeners[r.rng.IntN(len(listeners))]
	type backend struct {
		pid int32
		app string
	}
	var backends []backend
	err := r.retry(ctx, 10*time.Second, func(ctx context.Context) error {
		backends = backends[:0]
		rows, err := r.admin.Query(ctx, "SELECT pid, application_name FROM pg_stat_activity WHERE application_name LIKE $1 ORDER BY pid",
			appPrefix+"%")
		if err != nil {
			return err
		}
		var b backend
		_, err = pgx.ForEachRow(rows, []any{&b.pid, &b.app}, func() error { backends = append(backends, b); return nil })
		return err
	})
	if err != nil {
		return err
	}
	var pids []int32
	appOf := map[int32]string{}
	for _, b := range backends {
		if live[b.app] && (b.app == chosen || r.rng.IntN(3) == 0) {
			pids = append(pids, b.pid)
			appOf[b.pid] = b.app
		}
	}
	f.at = time.Now()
	var ended []int32
	err = r.retry(ctx, 10*time.Second, func(ctx context.Context) error {
		// Only the listed pids: in a WHERE clause beside other conditions, the planner may
		// call pg_terminate_backend on rows the other conditions would have excluded.
		rows, err := r.admin.Query(ctx, "SELECT pid FROM unnest($1::integer[]) AS t(pid) WHERE pg_terminate_backend(pid)", pids)
		if err != nil {
			return err
		}
		ended, err = pgx.CollectRows(rows, pgx.RowTo[int32])
		return err
	})
	f.end = time.Now()
	f.AtSeconds, f.EndSeconds = r.since(f.at), r.since(f.end)
	if err != nil {
		return err
	}
	f.Terminated = len(ended)
	for _, pid := range ended {
		if strings.HasSuffix(appOf[pid], "/listen") {
			f.Listeners++
		}
	}
	f.Target = fmt.Sprintf("%d backends", f.Terminated)
	if _, err := r.waitListeners(ctx); err != nil {
		r.o.Logf("chaos: %v", err)
	}
	f.ListenSeconds = time.Since(f.end).Seconds()
	return nil
}

// rowLock holds row locks (FOR UPDATE) on RowLockRows jobs, half running and half queued,
// for RowLock: the running ones block their handlers' completions and their workers'
// heartbeats, the queued ones are skipped by claims.
func (r *runner) rowLock(ctx context.Context, f *Fault) error {
	r.waitOrphans(ctx)
	conn, err := r.connect(ctx, controllerApp+"/row-lock")
	if err != nil {
		return err
	}
	defer func() { _ = conn.Close(context.WithoutCancel(ctx)) }()
	tx, err := conn.Begin(ctx)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	n := r.o.RowLockRows
	var ids []int64
	for _, q := range []struct {
		state string
		limit int
	}{{"running", n / 2}, {"queued", n - n/2}} {
		rows, err := tx.Query(ctx, "SELECT id FROM jobs WHERE state = $1 ORDER BY random() LIMIT $2 FOR UPDATE SKIP LOCKED",
			q.state, q.limit)
		if err != nil {
			return err
		}
		got, err := pgx.CollectRows(rows, pgx.RowTo[int64])
		if err != nil {
			return err
		}
		ids = append(ids, got...)
	}
	f.at = time.Now()
	f.Locked = len(ids)
	f.Target = fmt.Sprintf("%d jobs", len(ids))
	if err := sleepCtx(ctx, r.o.RowLock); err != nil {
		return err
	}
	if err := tx.Rollback(ctx); err != nil {
		return err
	}
	f.end = time.Now()
	f.AtSeconds, f.EndSeconds = r.since(f.at), r.since(f.end)
	return nil
}

// holdXmin holds a REPEATABLE READ snapshot on the jobs table open for d in all, from now
// on, reopening it when a restart or termination ends its session. The time such a fault
// takes away is made up afterwards (within 3d), so the run always gets the snapshot it
// promised, whatever other fault the random schedule puts inside the window. It runs beside
// the fault loop.
func (r *runner) holdXmin(ctx context.Context, d time.Duration) *Fault {
	f := &Fault{Kind: faultHeldXmin, Target: "snapshot", at: time.Now()}
	deadline := f.at.Add(3 * d)
	var held time.Duration
	for held < d && time.Now().Before(deadline) && ctx.Err() == nil {
		until := time.Now().Add(d - held)
		if until.After(deadline) {
			until = deadline
		}
		held += r.holdXminOnce(ctx, until)
		if held < d {
			_ = sleepCtx(ctx, 200*time.Millisecond)
		}
	}
	f.end = time.Now()
	f.HeldSeconds = round(held.Seconds())
	f.AtSeconds, f.EndSeconds = r.since(f.at), r.since(f.end)
	return f
}

// holdXminOnce holds the snapshot in one session, until until or the session dies, and
// returns how long the session held it (as far as its last successful statement).
func (r *runner) holdXminOnce(ctx context.Context, until time.Time) time.Duration {
	conn, err := r.connect(ctx, controllerApp+"/held-xmin")
	if err != nil {
		return 0
	}
	defer func() { _ = conn.Close(context.WithoutCancel(ctx)) }()
	tx, err := conn.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead})
	if err != nil {
		return 0
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	// The first query takes the snapshot; the session's backend_xmin shows it is held.
	var held bool
	if err := tx.QueryRow(ctx, `SELECT count(*) >= 0 AND (SELECT backend_xmin IS NOT NULL FROM pg_stat_activity
		WHERE pid = pg_backend_pid()) FROM jobs`).Scan(&held); err != nil || !held {
		return 0
	}
	began, last := time.Now(), time.Now()
	for {
		left := time.Until(until)
		if left <= 0 || sleepCtx(ctx, min(left, time.Second)) != nil {
			return time.Since(began)
		}
		if _, err := tx.Exec(ctx, "SELECT 1"); err != nil {
			return last.Sub(began)
		}
		last = time.Now()
	}
}
