package sqltest

import (
	"reflect"
	"testing"
	"time"
)

// scheduleRow is the part of a jobs_schedules row the tests look at.
type scheduleRow struct {
	Cron, Timezone, Kind, Queue string
	Enabled                     bool
	NextRunAt, LastRunAt        *time.Time
	LastJobID                   *int64
	UpdatedAt                   time.Time
}

func getSchedule(t *testing.T, q querier, name string) scheduleRow {
	t.Helper()
	var s scheduleRow
	err := q.QueryRow(t.Context(), `
		SELECT cron, timezone, kind, queue, enabled, next_run_at, last_run_at, last_job_id, updated_at
		FROM jobs_schedules WHERE name = $1`, name).
		Scan(&s.Cron, &s.Timezone, &s.Kind, &s.Queue, &s.Enabled, &s.NextRunAt, &s.LastRunAt, &s.LastJobID, &s.UpdatedAt)
	if err != nil {
		t.Fatalf("failed to read schedule %q: %v", name, err)
	}
	return s
}

func TestSchedule(t *testing.T) {
	t.Parallel()

	t.Run("CreatesAndReturnsNextRun", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		next := queryOne[time.Time](t, b.Conn, "SELECT jobs_schedule('nightly', '0 3 * * *', 'report', timezone => 'Europe/Berlin')")
		want := queryOne[time.Time](t, b.Conn, "SELECT jobs_cron_next('0 3 * * *', now(), 'Europe/Berlin')")
		if !next.Equal(want) {
			t.Fatalf("jobs_schedule returned %v, want %v", next, want)
		}
		s := getSchedule(t, b.Conn, "nightly")
		if s.Cron != "0 3 * * *" || s.Timezone != "Europe/Berlin" || s.Kind != "report" || s.Queue != "default" ||
			!s.Enabled || s.NextRunAt == nil || !s.NextRunAt.Equal(want) || s.LastRunAt != nil || s.LastJobID != nil {
			t.Fatalf("schedule row = %+v", s)
		}
	})

	// Services declare their schedules at every start: the same arguments again must keep
	// the next run (no re-fire, no skip) and not even rewrite the row.
	t.Run("SameArgumentsChangeNothing", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		mustExec(t, b.Conn, "SELECT jobs_schedule('s', '*/5 * * * *', 'k', '{\"a\": 1}')")
		// A next run in the past (due) that a recomputation would move.
		mustExec(t, b.Conn, "UPDATE jobs_schedules SET next_run_at = '2020-01-01 00:05:00Z', updated_at = '2020-01-01Z'")
		before := getSchedule(t, b.Conn, "s")
		xmin := queryOne[string](t, b.Conn, "SELECT xmin::text FROM jobs_schedules")
		got := queryOne[time.Time](t, b.Conn, "SELECT jobs_schedule('s', '*/5 * * * *', 'k', '{\"a\": 1}')")
		if !got.Equal(*before.NextRunAt) {
			t.Fatalf("jobs_schedule again returned %v, want the kept %v", got, before.NextRunAt)
		}
		if after := getSchedule(t, b.Conn, "s"); !reflect.DeepEqual(after, before) {
			t.Fatalf("row changed: %+v -> %+v", before, after)
		}
		if x := queryOne[string](t, b.Conn, "SELECT xmin::text FROM jobs_schedules"); x != xmin {
			t.Fatalf("row was rewritten (xmin %s -> %s)", xmin, x)
		}
	})

	t.Run("ChangedPayloadKeepsNextRun", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		mustExec(t, b.Conn, "SELECT jobs_schedule('s', '*/5 * * * *', 'k')")
		mustExec(t, b.Conn, "UPDATE jobs_schedules SET next_run_at = '2020-01-01 00:05:00Z'")
		got := queryOne[time.Time](t, b.Conn, "SELECT jobs_schedule('s', '*/5 * * * *', 'k2', '{\"b\": 2}', 'q', priority => 3, max_attempts => 9)")
		if want := mustTime(t, "2020-01-01 00:05:00Z"); !got.Equal(want) {
			t.Fatalf("jobs_schedule returned %v, want the kept %v", got, want)
		}
		s := getSchedule(t, b.Conn, "s")
		if s.Kind != "k2" || s.Queue != "q" {
			t.Fatalf("schedule row = %+v", s)
		}
	})

	t.Run("ChangedCronOrTimezoneRecomputes", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		mustExec(t, b.Conn, "SELECT jobs_schedule('s', '*/5 * * * *', 'k')")
		mustExec(t, b.Conn, "UPDATE jobs_schedules SET next_run_at = '2020-01-01 00:05:00Z'")
		got := queryOne[time.Time](t, b.Conn, "SELECT jobs_schedule('s', '0 4 * * *', 'k')")
		if want := queryOne[time.Time](t, b.Conn, "SELECT jobs_cron_next('0 4 * * *', now())"); !got.Equal(want) {
			t.Fatalf("after a new cron, next run %v, want %v", got, want)
		}
		got = queryOne[time.Time](t, b.Conn, "SELECT jobs_schedule('s', '0 4 * * *', 'k', timezone => 'Asia/Tokyo')")
		if want := queryOne[time.Time](t, b.Conn, "SELECT jobs_cron_next('0 4 * * *', now(), 'Asia/Tokyo')"); !got.Equal(want) {
			t.Fatalf("after a new timezone, next run %v, want %v", got, want)
		}
	})

	// A recomputed next run stays after the last run, even when the last run is in the future
	// (run_at is the scheduled instant, so the last instant enqueued is never run twice).
	t.Run("RecomputedNextRunIsAfterLastRun", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		mustExec(t, b.Conn, "SELECT jobs_schedule('s', '*/5 * * * *', 'k')")
		mustExec(t, b.Conn, "UPDATE jobs_schedules SET last_run_at = now() + interval '1 day', next_run_at = now() + interval '1 day 5 minutes'")
		got := queryOne[time.Time](t, b.Conn, "SELECT jobs_schedule('s', '*/10 * * * *', 'k')")
		last := *getSchedule(t, b.Conn, "s").LastRunAt
		if !got.After(last) {
			t.Fatalf("next run %v is not after the last run %v", got, last)
		}
	})

	t.Run("DisabledIsNotTickedAndReEnablingSkipsMissedRuns", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		mustExec(t, b.Conn, "SELECT jobs_schedule('s', '* * * * *', 'k', enabled => false)")
		mustExec(t, b.Conn, "UPDATE jobs_schedules SET next_run_at = '2020-01-01 00:00:00Z'")
		if n := queryOne[int32](t, b.Conn, "SELECT jobs_schedule_tick()"); n != 0 {
			t.Fatalf("tick enqueued %d jobs of a disabled schedule", n)
		}
		got := queryOne[time.Time](t, b.Conn, "SELECT jobs_schedule('s', '* * * * *', 'k')")
		if now := queryOne[time.Time](t, b.Conn, "SELECT now()"); !got.After(now) {
			t.Fatalf("re-enabled schedule's next run %v is not after now %v", got, now)
		}
		if n := queryOne[int32](t, b.Conn, "SELECT jobs_schedule_tick()"); n != 0 {
			t.Fatalf("tick enqueued %d jobs missed while disabled", n)
		}
	})

	t.Run("UnscheduleDeletesAndReportsIt", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		mustExec(t, b.Conn, "SELECT jobs_schedule('s', '* * * * *', 'k')")
		if !queryOne[bool](t, b.Conn, "SELECT jobs_unschedule('s')") {
			t.Fatal("jobs_unschedule('s') = false, want true")
		}
		if queryOne[bool](t, b.Conn, "SELECT jobs_unschedule('s')") {
			t.Fatal("second jobs_unschedule('s') = true, want false")
		}
		if n := queryOne[int64](t, b.Conn, "SELECT count(*) FROM jobs_schedules"); n != 0 {
			t.Fatalf("%d schedules left", n)
		}
	})

	t.Run("InvalidCronNamesTheField", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		_, err := b.Conn.Exec(t.Context(), "SELECT jobs_schedule('s', '0 24 * * *', 'k')")
		if err == nil || !containsAll(err.Error(), "jobs_schedule: cron field hour: 24 is out of range 0-23", "22023") {
			t.Fatalf("err = %v, want 22023 naming cron and the hour field", err)
		}
		_, err = b.Conn.Exec(t.Context(), "SELECT jobs_schedule('s', '0 0 31 2 *', 'k')")
		if err == nil || !containsAll(err.Error(), "jobs_schedule: cron '0 0 31 2 *' never runs", "22023") {
			t.Fatalf("err = %v, want 22023: never runs", err)
		}
		if n := queryOne[int64](t, b.Conn, "SELECT count(*) FROM jobs_schedules"); n != 0 {
			t.Fatalf("%d schedules created by failed calls", n)
		}
	})
}

// A transaction that began before instant I unschedules and re-schedules a name after a
// tick enqueued I: the new row's first run is computed from the clock at the call, not from
// the transaction's start, so I is not enqueued a second time.
func TestRescheduleInLongTransactionEnqueuesOnce(t *testing.T) {
	t.Parallel()
	b := setup(t)
	other := b.Connect(t)
	mustExec(t, b.Conn, "SELECT jobs_schedule('s', '@every 2 seconds', 'k')")
	tx, err := other.Begin(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(t.Context()) }()
	started := queryOne[time.Time](t, tx, "SELECT now()")
	deadline := time.Now().Add(10 * time.Second)
	for queryOne[int64](t, b.Conn, "SELECT count(*) FROM jobs WHERE run_at > $1", started) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("no instant after the transaction's start enqueued in 10 s")
		}
		mustExec(t, b.Conn, "SELECT jobs_schedule_tick()")
		time.Sleep(100 * time.Millisecond)
	}
	mustExec(t, tx, "SELECT jobs_unschedule('s')")
	next := queryOne[time.Time](t, tx, "SELECT jobs_schedule('s', '@every 2 seconds', 'k')")
	if err := tx.Commit(t.Context()); err != nil {
		t.Fatal(err)
	}
	if latest := queryOne[time.Time](t, b.Conn, "SELECT max(run_at) FROM jobs"); !next.After(latest) {
		t.Errorf("re-created schedule's next run %v is not after the instant already enqueued, %v", next, latest)
	}
	time.Sleep(time.Until(next) + 100*time.Millisecond)
	mustExec(t, b.Conn, "SELECT jobs_schedule_tick()")
	if d := queryOne[int64](t, b.Conn, "SELECT count(*) - count(DISTINCT run_at) FROM jobs"); d != 0 {
		t.Errorf("%d instants enqueued twice: %v", d, queryList[time.Time](t, b.Conn, "SELECT run_at FROM jobs ORDER BY run_at"))
	}
}

// A schedule created in a transaction that began long ago starts after the call, not at
// the first instant after the transaction's start (which is already past).
func TestNewScheduleInLongTransactionStartsAfterTheCall(t *testing.T) {
	t.Parallel()
	b := setup(t)
	tx, err := b.Conn.Begin(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(t.Context()) }()
	mustExec(t, tx, "SELECT now()")
	time.Sleep(1100 * time.Millisecond)
	before := queryOne[time.Time](t, tx, "SELECT clock_timestamp()")
	next := queryOne[time.Time](t, tx, "SELECT jobs_schedule('s', '@every 1 second', 'k')")
	if !next.After(before) {
		t.Errorf("new schedule's next run %v is not after the call (%v)", next, before)
	}
	// Re-enabling in the same old transaction recomputes from the clock too.
	mustExec(t, tx, "SELECT jobs_schedule('s', '@every 1 second', 'k', enabled => false)")
	time.Sleep(1100 * time.Millisecond)
	before = queryOne[time.Time](t, tx, "SELECT clock_timestamp()")
	if next := queryOne[time.Time](t, tx, "SELECT jobs_schedule('s', '@every 1 second', 'k')"); !next.After(before) {
		t.Errorf("re-enabled schedule's next run %v is not after the call (%v)", next, before)
	}
}
