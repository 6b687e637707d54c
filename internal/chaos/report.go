package chaos

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/jackc/pgx/v5"
)

// Report is what a run found. The first fields are the acceptance numbers; a run
// passes when JobsLost and JobsDoneTwice are 0, RecoverySeconds is at most
// RecoveryBoundSeconds and there are no Violations ([Report.Err]).
type Report struct {
	// Jobs is how many jobs the run enqueued.
	Jobs int `json:"jobs"`

	// JobsLost counts the enqueued jobs that did not end done with their effect committed.
	JobsLost int `json:"jobs_lost"`

	// JobsDoneTwice counts the jobs whose effect committed more than once.
	JobsDoneTwice int `json:"jobs_done_twice"`

	// Executions counts the attempts that began (each recorded in its own transaction
	// before any work), including those killed, timed out or fenced off.
	Executions int `json:"executions"`

	// RecoverySeconds is the longest recovery of any fault (see Fault.RecoverySeconds), and
	// RecoveryBoundSeconds the most it may be: lease + poll interval + 2 s.
	RecoverySeconds      float64 `json:"recovery_seconds"`
	RecoveryBoundSeconds float64 `json:"recovery_bound_seconds"`

	// Kills, Restarts and TerminatedBackends count the faults injected.
	Kills              int `json:"kills"`
	Restarts           int `json:"restarts"`
	TerminatedBackends int `json:"terminated_backends"`

	// Seconds is the run's length, from starting the workers to the last completion (to the
	// end of the wait for it when jobs were lost).
	Seconds float64 `json:"seconds"`

	// JobsRunMoreThanOnce counts the jobs with more than one execution: each of them would
	// have repeated an effect made outside the job's transaction.
	JobsRunMoreThanOnce int `json:"jobs_run_more_than_once"`

	// JobsDead counts the jobs that ran out of attempts (they are also lost).
	JobsDead int `json:"jobs_dead"`

	// ListenersTerminated counts the LISTEN connections among TerminatedBackends.
	ListenersTerminated int `json:"listeners_terminated"`

	// LiveLeaseExpiries counts the leases that expired while their worker was alive (a
	// starved heartbeat: pool exhaustion, a blocked row, a restart longer than the lease).
	// Fencing makes them harmless; they cost re-executions.
	LiveLeaseExpiries int `json:"live_lease_expiries"`

	// OrphansRequeued counts the jobs that killed workers held and lease expiry gave back.
	OrphansRequeued int `json:"orphans_requeued"`

	// HeldXminSeconds is how long the snapshot was held (a restart ends it until it is
	// reopened); RowsLocked how many jobs the row-lock session locked.
	HeldXminSeconds float64 `json:"held_xmin_seconds"`
	RowsLocked      int     `json:"rows_locked"`

	// PoolExhaustions counts the hog jobs that ran their worker's pool dry (every
	// connection in use once they held theirs, or they gave up waiting for one), as
	// reported by the workers that shut down cleanly at the end; killed ones cannot tell.
	PoolExhaustions int64 `json:"pool_exhaustions"`

	// HogJobs and HangJobs count the jobs of the pool-exhausting and hanging kinds.
	HogJobs  int `json:"hog_jobs"`
	HangJobs int `json:"hang_jobs"`

	// Keys is how many concurrency keys the jobs went to (Options.Keys), and KeysStuck how
	// many of them still had a job that was not done at the end: a key whose jobs stopped
	// being claimed (an ordered key held by a job that never came back, say).
	Keys      int `json:"keys,omitempty"`
	KeysStuck int `json:"keys_stuck,omitempty"`

	// MostRunningPerKey is the most jobs of one key observed running at once: the attempts
	// that completed their job, each from its execution's start to its effect, both
	// numbered from one sequence. Killed or fenced attempts are left out, since when they
	// stopped is not recorded; the completing ones are each inside the claim they ran
	// under. It must be at most Options.Concurrency.PerKey, and 1 when Ordered.
	MostRunningPerKey int `json:"most_running_per_key,omitempty"`

	// OrderViolations counts the attempts of a job that began before every job of its key
	// with a lower id had committed its effect (or ended dead or cancelled): a later job
	// started before an earlier one was done. A job run again after its lease expired is the
	// same job and no violation. Counted whenever the jobs have keys; it must be 0 on an
	// ordered queue (Options.Concurrency.Ordered), and is not on others.
	OrderViolations int `json:"order_violations,omitempty"`

	// PerKeyLimit and Ordered are the settings the checks above hold the run to (0 and
	// false: none).
	PerKeyLimit int  `json:"per_key_limit,omitempty"`
	Ordered     bool `json:"ordered,omitempty"`

	// The run's settings.
	Workers      int     `json:"workers"`
	Slots        int     `json:"slots"`
	LeaseSeconds float64 `json:"lease_seconds"`
	PollSeconds  float64 `json:"poll_seconds"`
	JobSleepMS   float64 `json:"job_sleep_ms"`
	Seed         uint64  `json:"seed"`

	// Faults lists every fault in the order it began.
	Faults []*Fault `json:"faults"`

	// Violations lists the broken invariants other than the counts above: effects of jobs
	// that are not done, effects from an attempt other than the completing one, jobs left
	// running, workers that died by themselves.
	Violations []string `json:"violations,omitempty"`
}

// Err returns nil when the run passed, or an error listing every rule it broke.
func (r *Report) Err() error {
	var p []string
	if r.JobsLost > 0 {
		p = append(p, fmt.Sprintf("%d jobs lost", r.JobsLost))
	}
	if r.JobsDoneTwice > 0 {
		p = append(p, fmt.Sprintf("%d jobs done twice", r.JobsDoneTwice))
	}
	if r.RecoverySeconds > r.RecoveryBoundSeconds {
		p = append(p, fmt.Sprintf("recovery took %.2fs, more than the bound of %.2fs", r.RecoverySeconds, r.RecoveryBoundSeconds))
	}
	if r.KeysStuck > 0 {
		p = append(p, fmt.Sprintf("%d concurrency keys with jobs not done", r.KeysStuck))
	}
	if r.PerKeyLimit > 0 && r.MostRunningPerKey > r.PerKeyLimit {
		p = append(p, fmt.Sprintf("%d jobs of one key ran at once, over per_key %d", r.MostRunningPerKey, r.PerKeyLimit))
	}
	if r.Ordered && r.MostRunningPerKey > 1 {
		p = append(p, fmt.Sprintf("%d jobs of one key of an ordered queue ran at once", r.MostRunningPerKey))
	}
	if r.Ordered && r.OrderViolations > 0 {
		p = append(p, fmt.Sprintf("%d attempts began before an earlier job of their key was done", r.OrderViolations))
	}
	p = append(p, r.Violations...)
	if len(p) == 0 {
		return nil
	}
	return errors.New("chaos run failed: " + strings.Join(p, "; "))
}

// String renders the report as a table: the totals, then one line per fault.
func (r *Report) String() string {
	var b strings.Builder
	verdict := "PASS"
	if r.Err() != nil {
		verdict = "FAIL"
	}
	fmt.Fprintf(&b, "chaos run %s: %d jobs, %d worker processes x %d slots, lease %gs, poll %gs, mean job sleep %.0fms, seed %d, %.1fs\n",
		verdict, r.Jobs, r.Workers, r.Slots, r.LeaseSeconds, r.PollSeconds, r.JobSleepMS, r.Seed, r.Seconds)
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "  jobs_lost\t%d\t(%d dead)\n", r.JobsLost, r.JobsDead)
	fmt.Fprintf(tw, "  jobs_done_twice\t%d\teffects committed more than once\n", r.JobsDoneTwice)
	fmt.Fprintf(tw, "  executions\t%d\t%d jobs ran more than once (an effect outside the job's transaction would have repeated)\n",
		r.Executions, r.JobsRunMoreThanOnce)
	ok := "within"
	if r.RecoverySeconds > r.RecoveryBoundSeconds {
		ok = "OVER"
	}
	fmt.Fprintf(tw, "  recovery_seconds\t%.2f\t%s the bound of %.2fs (lease + poll + 2s)\n", r.RecoverySeconds, ok, r.RecoveryBoundSeconds)
	fmt.Fprintf(tw, "  kills\t%d\tkill -9 of worker processes, each replaced; %d orphaned jobs requeued by lease expiry\n", r.Kills, r.OrphansRequeued)
	fmt.Fprintf(tw, "  restarts\t%d\tfull PostgreSQL restarts (%s)\n", r.Restarts, strings.Join(r.restartModes(), ", "))
	fmt.Fprintf(tw, "  terminated_backends\t%d\tpg_terminate_backend, %d of them LISTEN connections\n", r.TerminatedBackends, r.ListenersTerminated)
	fmt.Fprintf(tw, "  live lease expiries\t%d\tleases lost by live workers (starved heartbeats), fenced off\n", r.LiveLeaseExpiries)
	fmt.Fprintf(tw, "  held xmin\t%.1fs\tREPEATABLE READ snapshot held open\n", r.HeldXminSeconds)
	fmt.Fprintf(tw, "  row locks\t%d\tjobs locked FOR UPDATE by another session\n", r.RowsLocked)
	fmt.Fprintf(tw, "  hog / hang jobs\t%d / %d\tjobs exhausting their pool (%d ran it dry, counted by surviving workers) / hanging past their timeout\n",
		r.HogJobs, r.HangJobs, r.PoolExhaustions)
	if r.Keys > 0 {
		limit := "no per_key limit"
		if r.PerKeyLimit > 0 {
			limit = fmt.Sprintf("per_key %d", r.PerKeyLimit)
		}
		if r.Ordered {
			limit += ", ordered"
		}
		fmt.Fprintf(tw, "  keys\t%d\t%d stuck (jobs not done); most running per key %d (%s); %d order violations\n",
			r.Keys, r.KeysStuck, r.MostRunningPerKey, limit, r.OrderViolations)
	}
	_ = tw.Flush()
	if len(r.Faults) > 0 {
		b.WriteString("faults:\n")
		tw = tabwriter.NewWriter(&b, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "  at s\tkind\ttarget\tresume s\trecovery s\t\tdetail")
		for _, f := range r.Faults {
			resume := "-"
			if f.ResumeSeconds >= 0 {
				resume = fmt.Sprintf("%.2f", f.ResumeSeconds)
			}
			detail := f.detail()
			switch {
			case f.Kind == faultKill:
				detail += fmt.Sprintf(", %d requeued %.2fs after", f.Orphans, f.OrphansSeconds)
			case f.Kind == faultTerminate:
				detail += fmt.Sprintf(", all listening %.2fs after, all completing %.2fs after", f.ListenSeconds, f.AllResumeSeconds)
			case strings.HasPrefix(f.Kind, "restart_"):
				detail += fmt.Sprintf(", all completing %.2fs after", f.AllResumeSeconds)
			}
			fmt.Fprintf(tw, "  %.1f\t%s\t%s\t%s\t%.2f\t\t%s\n", f.AtSeconds, f.Kind, f.Target, resume, f.RecoverySeconds, detail)
		}
		_ = tw.Flush()
	}
	for _, v := range r.Violations {
		fmt.Fprintf(&b, "VIOLATION: %s\n", v)
	}
	return b.String()
}

func (r *Report) restartModes() []string {
	var m []string
	for _, f := range r.Faults {
		if mode, ok := strings.CutPrefix(f.Kind, "restart_"); ok {
			m = append(m, mode)
		}
	}
	return m
}

// report checks the invariants in the database and measures the recoveries.
func (r *runner) report(ctx context.Context) (*Report, error) {
	o := r.o
	rep := &Report{
		Jobs:                 o.Jobs,
		RecoveryBoundSeconds: o.RecoveryBound().Seconds(),
		Seconds:              r.end.Sub(r.start).Seconds(),
		HogJobs:              r.hogJobs,
		HangJobs:             r.hangJobs,
		Workers:              o.Workers,
		Slots:                o.Slots,
		LeaseSeconds:         o.Lease.Seconds(),
		PollSeconds:          o.PollInterval.Seconds(),
		JobSleepMS:           float64(r.jobSleep) / float64(time.Millisecond),
		Seed:                 o.Seed,
		Faults:               r.faults,
	}
	q := func(sql string, args []any, dest ...any) error {
		return r.retry(ctx, waitLimit, func(ctx context.Context) error {
			return r.admin.QueryRow(ctx, sql, args...).Scan(dest...)
		})
	}

	// One pass over the jobs, joined to their effect and their number of executions (a
	// grouped join: a correlated subquery per job would be quadratic).
	var total, running, effectNotDone, wrongAttempt, doneNoExec, strayEffects int
	if err := q(`SELECT count(*),
		       count(*) FILTER (WHERE NOT (j.state = 'done' AND e.job_id IS NOT NULL)),
		       count(*) FILTER (WHERE j.state = 'dead'),
		       count(*) FILTER (WHERE j.state = 'running'),
		       count(*) FILTER (WHERE e.job_id IS NOT NULL AND j.state <> 'done'),
		       count(*) FILTER (WHERE e.attempt <> j.attempts),
		       count(*) FILTER (WHERE j.state = 'done' AND x.job_id IS NULL),
		       count(*) FILTER (WHERE x.n > 1)
		FROM jobs j
		LEFT JOIN chaos_effects e ON e.job_id = j.id
		LEFT JOIN (SELECT job_id, count(*) AS n FROM chaos_executions GROUP BY job_id) x ON x.job_id = j.id`, nil,
		&total, &rep.JobsLost, &rep.JobsDead, &running, &effectNotDone, &wrongAttempt, &doneNoExec,
		&rep.JobsRunMoreThanOnce); err != nil {
		return nil, fmt.Errorf("chaos: failed to check the jobs: %w", err)
	}
	if err := q(`SELECT count(*) FILTER (WHERE e.effects > 1),
		       count(*) FILTER (WHERE j.id IS NULL)
		FROM chaos_effects e
		LEFT JOIN jobs j ON j.id = e.job_id`, nil, &rep.JobsDoneTwice, &strayEffects); err != nil {
		return nil, fmt.Errorf("chaos: failed to check the effects: %w", err)
	}
	if err := q("SELECT count(*) FROM chaos_executions", nil, &rep.Executions); err != nil {
		return nil, fmt.Errorf("chaos: failed to count the executions: %w", err)
	}
	if total != o.Jobs {
		r.violation("%d jobs in the table, %d enqueued", total, o.Jobs)
	}
	if running > 0 {
		r.violation("%d jobs still running at the end", running)
	}
	if effectNotDone > 0 {
		r.violation("%d jobs have a committed effect but are not done", effectNotDone)
	}
	if wrongAttempt > 0 {
		r.violation("%d effects were committed by an attempt other than the one that completed the job", wrongAttempt)
	}
	if doneNoExec > 0 {
		r.violation("%d done jobs have no recorded execution", doneNoExec)
	}
	if strayEffects > 0 {
		r.violation("%d effects belong to no job", strayEffects)
	}
	if o.Keys > 0 {
		if err := r.checkKeys(ctx, rep); err != nil {
			return nil, err
		}
	}

	// When each killed worker's jobs came back: jobs_requeue_expired records every expiry
	// in the job's history with the holder's id and the time.
	expiries := map[string][]time.Time{}
	if err := r.retry(ctx, waitLimit, func(ctx context.Context) error {
		clear(expiries)
		rows, err := r.admin.Query(ctx, `SELECT e->>'worker', (e->>'at')::timestamptz
			FROM jobs j, jsonb_array_elements(j.errors) e
			WHERE e->>'error' LIKE 'lease expired%'`)
		if err != nil {
			return err
		}
		var w string
		var at time.Time
		_, err = pgx.ForEachRow(rows, []any{&w, &at}, func() error { expiries[w] = append(expiries[w], at); return nil })
		return err
	}); err != nil {
		return nil, fmt.Errorf("chaos: failed to read the lease expiries: %w", err)
	}

	// Every completion, by time and by worker.
	var all []time.Time
	byWorker := map[string][]time.Time{}
	if err := r.retry(ctx, waitLimit, func(ctx context.Context) error {
		all = all[:0]
		clear(byWorker)
		rows, err := r.admin.Query(ctx, "SELECT worker, at FROM chaos_effects ORDER BY at")
		if err != nil {
			return err
		}
		var w string
		var at time.Time
		_, err = pgx.ForEachRow(rows, []any{&w, &at}, func() error {
			all = append(all, at)
			byWorker[w] = append(byWorker[w], at)
			return nil
		})
		return err
	}); err != nil {
		return nil, fmt.Errorf("chaos: failed to read the completions: %w", err)
	}
	if len(all) > 0 && rep.JobsLost == 0 {
		rep.Seconds = all[len(all)-1].Sub(r.start).Seconds() // to the last completion
	}
	killedAt := map[string]time.Time{}
	for _, f := range r.faults {
		if f.Kind == faultKill {
			killedAt[f.Target] = f.at
		}
	}
	for w, ats := range expiries {
		for _, at := range ats {
			if k, ok := killedAt[w]; !ok || at.Before(k) {
				rep.LiveLeaseExpiries++
			}
		}
	}

	for _, f := range r.faults {
		f.ResumeSeconds = -1
		if i, _ := slices.BinarySearchFunc(all, f.end, time.Time.Compare); i < len(all) {
			f.ResumeSeconds = round(all[i].Sub(f.end).Seconds())
		}
		recovery := max(f.ResumeSeconds, 0)
		switch f.Kind {
		case faultKill:
			rep.Kills++
			var last time.Time
			for _, at := range expiries[f.Target] {
				if !at.Before(f.at) {
					f.Orphans++
					if at.After(last) {
						last = at
					}
				}
			}
			if f.Orphans > 0 {
				f.OrphansSeconds = round(max(last.Sub(f.end).Seconds(), 0))
			}
			rep.OrphansRequeued += f.Orphans
			recovery = max(recovery, f.OrphansSeconds)
		case faultTerminate:
			rep.TerminatedBackends += f.Terminated
			rep.ListenersTerminated += f.Listeners
			f.ListenSeconds = round(f.ListenSeconds)
			f.AllResumeSeconds = round(r.allResumed(f.end, all, byWorker))
			recovery = max(recovery, f.ListenSeconds, f.AllResumeSeconds)
		case faultRowLock:
			rep.RowsLocked += f.Locked
		case faultHeldXmin:
			rep.HeldXminSeconds = f.HeldSeconds
		default:
			rep.Restarts++
			f.AllResumeSeconds = round(r.allResumed(f.end, all, byWorker))
			recovery = max(recovery, f.AllResumeSeconds)
		}
		f.RecoverySeconds = round(recovery)
		rep.RecoverySeconds = max(rep.RecoverySeconds, f.RecoverySeconds)
	}
	for _, p := range r.all {
		if p.stats != nil {
			rep.PoolExhaustions += p.stats.Exhausted
		}
	}
	r.mu.Lock()
	rep.Violations = append(rep.Violations, r.violations...)
	r.mu.Unlock()
	rep.Seconds = round(rep.Seconds)
	return rep, nil
}

// allResumed is the time from t until every worker process alive at t had committed a
// completion. A worker that committed none after t counts for the whole time it could
// have: until it was killed, or the last job was done.
func (r *runner) allResumed(t time.Time, all []time.Time, byWorker map[string][]time.Time) float64 {
	if len(all) == 0 {
		return 0
	}
	last := all[len(all)-1]
	worst := 0.0
	for _, p := range r.all {
		if p.started.After(t) || !p.ended.After(t) {
			continue // not alive at t
		}
		ats := byWorker[p.id]
		if i, _ := slices.BinarySearchFunc(ats, t, time.Time.Compare); i < len(ats) {
			worst = max(worst, ats[i].Sub(t).Seconds())
			continue
		}
		stop := p.ended
		if last.Before(stop) {
			stop = last
		}
		worst = max(worst, stop.Sub(t).Seconds())
	}
	return worst
}

func round(f float64) float64 { return math.Round(f*1000) / 1000 }

// checkKeys fills the report's per-key figures: keys stuck, most running per key, and
// attempts that began before an earlier job of their key was done.
func (r *runner) checkKeys(ctx context.Context, rep *Report) error {
	o := r.o
	rep.Keys = o.Keys
	if cc := o.Concurrency; cc != nil {
		rep.PerKeyLimit, rep.Ordered = cc.PerKey, cc.Ordered
	}
	q := func(what, sql string, dest *int) error {
		if err := r.retry(ctx, waitLimit, func(ctx context.Context) error {
			return r.admin.QueryRow(ctx, sql).Scan(dest)
		}); err != nil {
			return fmt.Errorf("chaos: failed to %s: %w", what, err)
		}
		return nil
	}
	if err := q("count the stuck keys", `SELECT count(DISTINCT concurrency_key) FROM jobs
		WHERE concurrency_key IS NOT NULL AND state <> 'done'`, &rep.KeysStuck); err != nil {
		return err
	}
	// Each completing attempt runs from its execution's seq to its effect's: +1 at the one,
	// -1 at the other, summed in seq order per key.
	if err := q("count the jobs running per key", `
		WITH spans AS (
		    SELECT j.queue, j.concurrency_key AS key, x.seq AS began, e.seq AS ended
		    FROM jobs j
		    JOIN chaos_effects e ON e.job_id = j.id
		    JOIN (SELECT job_id, attempt, max(seq) AS seq FROM chaos_executions GROUP BY 1, 2) x
		      ON x.job_id = j.id AND x.attempt = e.attempt
		    WHERE j.concurrency_key IS NOT NULL
		), steps AS (
		    SELECT queue, key, began AS seq, 1 AS d FROM spans
		    UNION ALL
		    SELECT queue, key, ended, -1 FROM spans
		)
		SELECT coalesce(max(n), 0)::integer
		FROM (SELECT sum(d) OVER (PARTITION BY queue, key ORDER BY seq) AS n FROM steps) s`,
		&rep.MostRunningPerKey); err != nil {
		return err
	}
	// For each job, the latest effect of the jobs of its key with lower ids, and whether one
	// of them is neither done with an effect nor dead or cancelled.
	return q("check the order within keys", `
		WITH earlier AS (
		    SELECT j.id,
		           max(e.seq) OVER w AS done_seq,
		           bool_or(e.job_id IS NULL AND j.state NOT IN ('dead', 'cancelled')) OVER w AS undone
		    FROM jobs j
		    LEFT JOIN chaos_effects e ON e.job_id = j.id
		    WHERE j.concurrency_key IS NOT NULL
		    WINDOW w AS (PARTITION BY j.queue, j.concurrency_key ORDER BY j.id
		                 ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING)
		)
		SELECT count(*)::integer
		FROM chaos_executions x
		JOIN earlier p ON p.id = x.job_id
		WHERE x.seq < p.done_seq OR p.undone`, &rep.OrderViolations)
}
