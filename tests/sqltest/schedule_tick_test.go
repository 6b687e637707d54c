package sqltest

import (
	"errors"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

func TestScheduleTick(t *testing.T) {
	t.Parallel()

	t.Run("EnqueuesTheDueInstantOnce", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		mustExec(t, b.Conn, `SELECT jobs_schedule('s', '@yearly', 'report', '{"n": 1}', 'q', priority => 4, max_attempts => 2)`)
		instant := queryOne[time.Time](t, b.Conn, "UPDATE jobs_schedules SET next_run_at = date_trunc('year', now(), 'UTC') RETURNING next_run_at")
		if n := queryOne[int32](t, b.Conn, "SELECT jobs_schedule_tick()"); n != 1 {
			t.Fatalf("jobs_schedule_tick() = %d, want 1", n)
		}
		var kind, queue, payload, state string
		var runAt time.Time
		var priority, maxAttempts int32
		var id int64
		err := b.Conn.QueryRow(t.Context(), "SELECT id, kind, queue, payload::text, state::text, run_at, priority, max_attempts FROM jobs").
			Scan(&id, &kind, &queue, &payload, &state, &runAt, &priority, &maxAttempts)
		if err != nil {
			t.Fatal(err)
		}
		if kind != "report" || queue != "q" || payload != `{"n": 1}` || state != "queued" || !runAt.Equal(instant) ||
			priority != 4 || maxAttempts != 2 {
			t.Fatalf("job = %d %s %s %s %s %v %d %d; want run_at %v", id, kind, queue, payload, state, runAt, priority, maxAttempts, instant)
		}
		s := getSchedule(t, b.Conn, "s")
		if s.LastRunAt == nil || !s.LastRunAt.Equal(instant) || s.LastJobID == nil || *s.LastJobID != id ||
			s.NextRunAt == nil || !s.NextRunAt.Equal(instant.AddDate(1, 0, 0)) {
			t.Fatalf("schedule after tick = %+v", s)
		}
		if n := queryOne[int32](t, b.Conn, "SELECT jobs_schedule_tick()"); n != 0 {
			t.Fatalf("second jobs_schedule_tick() = %d, want 0", n)
		}
	})

	t.Run("NothingDue", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		mustExec(t, b.Conn, "SELECT jobs_schedule('s', '@yearly', 'k')")
		if n := queryOne[int32](t, b.Conn, "SELECT jobs_schedule_tick()"); n != 0 {
			t.Fatalf("jobs_schedule_tick() = %d, want 0", n)
		}
	})

	// After downtime, one job for the latest missed instant, not one per missed instant.
	t.Run("DowntimeEnqueuesOnlyTheLatestMissedInstant", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		for _, tc := range []struct{ cron, zone, since string }{
			{"*/5 * * * *", "UTC", "3 days"},
			{"@every 10 seconds", "UTC", "40 days"},
			{"30 2 * * *", "Europe/Berlin", "400 days"},
			{"0 0 29 2 *", "UTC", "20 years"},
		} {
			mustExec(t, b.Conn, "SELECT jobs_schedule('s', $1, 'k', timezone => $2)", tc.cron, tc.zone)
			first := queryOne[time.Time](t, b.Conn, `
				UPDATE jobs_schedules SET next_run_at = jobs_cron_next($1, now() - $2::interval, $3), last_run_at = NULL
				RETURNING next_run_at`, tc.cron, tc.since, tc.zone)
			if n := queryOne[int32](t, b.Conn, "SELECT jobs_schedule_tick()"); n != 1 {
				t.Fatalf("%s: jobs_schedule_tick() = %d, want 1", tc.cron, n)
			}
			runAt := queryOne[time.Time](t, b.Conn, "SELECT run_at FROM jobs")
			// The latest instant <= now(): its successor is after now().
			if !queryOne[bool](t, b.Conn, "SELECT $1::timestamptz <= now() AND jobs_cron_next($2, $1, $3) > now()", runAt, tc.cron, tc.zone) {
				t.Errorf("%s in %s: enqueued %v (first missed %v), not the latest instant before now()", tc.cron, tc.zone, runAt, first)
			}
			s := getSchedule(t, b.Conn, "s")
			if !s.LastRunAt.Equal(runAt) || !queryOne[bool](t, b.Conn, "SELECT $1::timestamptz = jobs_cron_next($2, $3, $4)", s.NextRunAt, tc.cron, runAt, tc.zone) {
				t.Errorf("%s: schedule after tick = %+v, job run_at %v", tc.cron, s, runAt)
			}
			mustExec(t, b.Conn, "DELETE FROM jobs")
		}
	})

	// The enqueue and the advance are one transaction: a caller rolling back its tick
	// leaves the instant due, and the next tick enqueues it, once.
	t.Run("RolledBackTickLeavesTheInstantDue", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		mustExec(t, b.Conn, "SELECT jobs_schedule('s', '@yearly', 'k')")
		instant := queryOne[time.Time](t, b.Conn, "UPDATE jobs_schedules SET next_run_at = date_trunc('year', now(), 'UTC') RETURNING next_run_at")
		tx, err := b.Conn.Begin(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if n := queryOne[int32](t, tx, "SELECT jobs_schedule_tick()"); n != 1 {
			t.Fatalf("tick in the rolled-back transaction = %d, want 1", n)
		}
		if err := tx.Rollback(t.Context()); err != nil {
			t.Fatal(err)
		}
		if n := queryOne[int32](t, b.Conn, "SELECT jobs_schedule_tick()"); n != 1 {
			t.Fatalf("tick after the rollback = %d, want 1", n)
		}
		if got := queryList[time.Time](t, b.Conn, "SELECT run_at FROM jobs"); len(got) != 1 || !got[0].Equal(instant) {
			t.Fatalf("jobs' run_at = %v, want one job at %v", got, instant)
		}
	})

	// A tick holding a schedule does not make another tick wait, and the other tick does
	// not enqueue it too.
	t.Run("LockedScheduleIsSkipped", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		other := b.Connect(t)
		mustExec(t, b.Conn, "SELECT jobs_schedule('s', '@yearly', 'k')")
		mustExec(t, b.Conn, "UPDATE jobs_schedules SET next_run_at = date_trunc('year', now(), 'UTC')")
		tx, err := b.Conn.Begin(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = tx.Rollback(t.Context()) }()
		if n := queryOne[int32](t, tx, "SELECT jobs_schedule_tick()"); n != 1 {
			t.Fatalf("first tick = %d, want 1", n)
		}
		mustExec(t, other, "SET lock_timeout = '5s'")
		if n := queryOne[int32](t, other, "SELECT jobs_schedule_tick()"); n != 0 {
			t.Fatalf("concurrent tick = %d, want 0 (the schedule is locked)", n)
		}
		if err := tx.Commit(t.Context()); err != nil {
			t.Fatal(err)
		}
		if n := queryOne[int32](t, other, "SELECT jobs_schedule_tick()"); n != 0 {
			t.Fatalf("tick after the commit = %d, want 0", n)
		}
		if n := queryOne[int64](t, b.Conn, "SELECT count(*) FROM jobs"); n != 1 {
			t.Fatalf("%d jobs, want 1", n)
		}
	})

	// The dedupe does not rest on the tick's code alone: the table refuses a next run that
	// is not after the last run, so no update can make an enqueued instant due again.
	t.Run("TableRefusesNextRunNotAfterLastRun", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		mustExec(t, b.Conn, "SELECT jobs_schedule('s', '@yearly', 'k')")
		mustExec(t, b.Conn, "UPDATE jobs_schedules SET next_run_at = date_trunc('year', now(), 'UTC')")
		mustExec(t, b.Conn, "SELECT jobs_schedule_tick()")
		_, err := b.Conn.Exec(t.Context(), "UPDATE jobs_schedules SET next_run_at = last_run_at")
		var pgErr *pgconn.PgError
		if !errors.As(err, &pgErr) || pgErr.Code != "23514" || pgErr.ConstraintName != "jobs_schedules_next_after_last" {
			t.Fatalf("err = %v, want 23514 from jobs_schedules_next_after_last", err)
		}
	})
}

// TestScheduleTickConcurrentExactlyOnce: 8 sessions tick at once, each every 0-100 ms,
// for a minute (20 s under -short) of '@every 1 second'. Every instant from the first to
// the last is enqueued exactly once (an instant may only be missing if no session ticked
// at all for over a second, which the test logs).
func TestScheduleTickConcurrentExactlyOnce(t *testing.T) {
	t.Parallel()
	b := setup(t)
	duration := time.Minute
	if testing.Short() {
		duration = 20 * time.Second
	}
	const sessions = 8
	mustExec(t, b.Conn, "SELECT jobs_schedule('every_second', '@every 1 second', 'tick')")
	conns := make([]querier, sessions)
	for i := range conns {
		conns[i] = b.Connect(t)
	}

	deadline := time.Now().Add(duration)
	var enqueued, ticks atomic.Int64
	var wg sync.WaitGroup
	var mu sync.Mutex
	var tickTimes []time.Time // each tick's now(), which decides what it finds due
	errs := make(chan error, sessions)
	for _, conn := range conns {
		wg.Go(func() {
			for time.Now().Before(deadline) {
				var n int32
				var at time.Time
				if err := conn.QueryRow(t.Context(), "SELECT jobs_schedule_tick(), now()").Scan(&n, &at); err != nil {
					errs <- err
					return
				}
				enqueued.Add(int64(n))
				ticks.Add(1)
				mu.Lock()
				tickTimes = append(tickTimes, at)
				mu.Unlock()
				time.Sleep(rand.N(100 * time.Millisecond))
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("jobs_schedule_tick: %v", err)
	}
	// tickedWithin reports whether some tick's now() lies in [from, to): such a tick must
	// have enqueued an instant in that range.
	tickedWithin := func(from, to time.Time) bool {
		for _, at := range tickTimes {
			if !at.Before(from) && at.Before(to) {
				return true
			}
		}
		return false
	}

	runAts := queryList[time.Time](t, b.Conn, "SELECT run_at FROM jobs WHERE kind = 'tick' ORDER BY run_at, id")
	if int64(len(runAts)) != enqueued.Load() {
		t.Fatalf("ticks reported %d jobs enqueued, the table has %d", enqueued.Load(), len(runAts))
	}
	// A guard against a run that ticked little; the gaps are judged below.
	minimum := int(duration/time.Second) / 2
	if len(runAts) < minimum {
		t.Fatalf("%d instants enqueued in %v, want at least %d", len(runAts), duration, minimum)
	}
	for i, at := range runAts {
		if at.Truncate(time.Second) != at {
			t.Errorf("instant %v is not a whole second", at)
		}
		if i == 0 {
			continue
		}
		switch d := at.Sub(runAts[i-1]); {
		case d <= 0:
			t.Errorf("instant %v enqueued twice", at)
		case d == time.Second:
		// A longer gap is only right if no session ticked in it (the machine stalled every
		// session for over a second): then the next tick enqueues the latest instant only.
		case tickedWithin(runAts[i-1].Add(time.Second), at):
			t.Errorf("instants %v and %v are %v apart though sessions ticked in between: missed instants", runAts[i-1], at, d)
		default:
			t.Logf("no session ticked between %v and %v: the instants in between were rightly skipped", runAts[i-1], at)
		}
	}
	t.Logf("%d sessions, %d ticks in %v: %d instants (%v to %v), each enqueued exactly once",
		sessions, ticks.Load(), duration, len(runAts), runAts[0].Format(time.TimeOnly), runAts[len(runAts)-1].Format(time.TimeOnly))
}

// TestScheduleTickProbesTheDueIndex: every client ticks about once a second, so a tick with
// nothing due must cost one probe of jobs_schedules_due_idx, not a scan of the schedules.
// The plan of the statement inside the function is read with auto_explain.
func TestScheduleTickProbesTheDueIndex(t *testing.T) {
	t.Parallel()
	b := setup(t)
	mustExec(t, b.Conn, `INSERT INTO jobs_schedules (name, cron, kind, next_run_at)
		SELECT 's' || g, '@daily', 'k', now() + g * interval '1 minute' FROM generate_series(1, 5000) g`)
	mustExec(t, b.Conn, "ANALYZE jobs_schedules")

	conn, planLog := connectWithPlanLog(t, b.URL)
	startAutoExplain(t, conn)
	// Several calls: PL/pgSQL may switch to a generic plan after the first ones.
	for range 7 {
		if n := queryOne[int32](t, conn, "SELECT jobs_schedule_tick()"); n != 0 {
			t.Fatalf("jobs_schedule_tick() = %d with nothing due", n)
		}
	}

	plans := planLog.take()
	var checked int
	for _, p := range plans {
		if !strings.Contains(p, "FROM jobs_schedules s") {
			continue
		}
		checked++
		if !strings.Contains(p, "jobs_schedules_due_idx") || strings.Contains(p, "Seq Scan") {
			t.Errorf("the tick's search for due schedules does not probe jobs_schedules_due_idx:\n%s", p)
		}
	}
	if checked < 7 {
		t.Fatalf("auto_explain logged %d plans of the tick's search, want 7", checked)
	}
}

// Catching up after long downtime costs a bisection, not a walk through the missed
// instants: '* * * 1-3 *' (every minute of January to March) down from January 1 to June 1
// finds March 31 23:59 at once. And the bisection agrees with walking on shorter gaps,
// across DST transitions too.
func TestScheduleTickCatchesUpLongDowntimeQuickly(t *testing.T) {
	t.Parallel()
	b := setup(t)
	start := time.Now()
	latest := queryOne[time.Time](t, b.Conn,
		"SELECT _jobs_cron_latest('t', '* * * 1-3 *', 'UTC', '2026-01-01 00:00:00Z', '2026-06-01 00:00:00Z')")
	if took := time.Since(start); took > 2*time.Second {
		t.Errorf("_jobs_cron_latest over five months took %v", took)
	}
	if want := mustTime(t, "2026-03-31 23:59:00Z"); !latest.Equal(want) {
		t.Errorf("_jobs_cron_latest = %v, want %v", latest, want)
	}

	// The same through jobs_schedule_tick, down for 400 days (so that some January to
	// March was missed, whatever today's date).
	mustExec(t, b.Conn, "SELECT jobs_schedule('s', '* * * 1-3 *', 'k')")
	mustExec(t, b.Conn, `UPDATE jobs_schedules SET next_run_at = jobs_cron_next(cron, now() - interval '400 days', 'UTC')`)
	start = time.Now()
	if n := queryOne[int32](t, b.Conn, "SELECT jobs_schedule_tick()"); n != 1 {
		t.Fatalf("jobs_schedule_tick() = %d, want 1", n)
	}
	if took := time.Since(start); took > 2*time.Second {
		t.Errorf("jobs_schedule_tick after 400 days down took %v", took)
	}

	for _, tc := range []struct{ cron, zone, from, upto string }{
		{"*/15 * * * *", "Europe/Berlin", "2026-10-24 20:00:00Z", "2026-10-25 01:20:00Z"},
		{"*/15 * * * *", "Europe/Berlin", "2026-10-24 20:00:00Z", "2026-10-25 00:50:00Z"},
		{"@hourly", "Europe/Berlin", "2026-10-24 20:00:00Z", "2026-10-25 01:30:00Z"},
		{"30 2 * * *", "America/New_York", "2026-02-01 07:30:00Z", "2026-03-20 00:00:00Z"},
		{"@every 7 seconds", "UTC", "2026-01-01 00:00:04Z", "2026-01-02 00:00:00Z"},
		{"0 0 1 * *", "UTC", "2026-01-01 00:00:00Z", "2026-01-01 00:00:00Z"},
	} {
		got := queryOne[time.Time](t, b.Conn, "SELECT _jobs_cron_latest('t', $1, $2, $3, $4)", tc.cron, tc.zone, tc.from, tc.upto)
		walked := queryOne[time.Time](t, b.Conn, `
			WITH RECURSIVE s(at) AS (
			    SELECT $3::timestamptz
			    UNION ALL
			    SELECT jobs_cron_next($1, at, $2) FROM s WHERE jobs_cron_next($1, at, $2) <= $4
			)
			SELECT max(at) FROM s`, tc.cron, tc.zone, tc.from, tc.upto)
		if !got.Equal(walked) {
			t.Errorf("_jobs_cron_latest(%q, %s, %s..%s) = %v, walking gives %v", tc.cron, tc.zone, tc.from, tc.upto, got, walked)
		}
	}
}
