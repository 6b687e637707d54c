package sqltest

import (
	"testing"
	"time"

	"github.com/skiplock/skiplock/tests/pgtest"
)

func TestScheduleRun(t *testing.T) {
	t.Parallel()

	t.Run("EnqueuesNowAndLeavesTheScheduleAlone", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		mustExec(t, b.Conn, `SELECT jobs_schedule('nightly', '0 3 * * *', 'report', '{"f": 1}', queue => 'reports',
		                                          priority => 4, max_attempts => 7, enabled => false)`)
		before := getSchedule(t, b.Conn, "nightly")
		xmin := queryOne[string](t, b.Conn, "SELECT xmin::text FROM jobs_schedules")
		id := queryOne[int64](t, b.Conn, "SELECT jobs_schedule_run('nightly')")
		var (
			kind, queue, payload, state string
			priority, maxAttempts       int32
			due                         bool
		)
		err := b.Conn.QueryRow(t.Context(), `
			SELECT kind, queue, payload::text, state::text, priority, max_attempts, run_at = created_at
			FROM jobs WHERE id = $1`, id).Scan(&kind, &queue, &payload, &state, &priority, &maxAttempts, &due)
		if err != nil {
			t.Fatal(err)
		}
		if kind != "report" || queue != "reports" || payload != `{"f": 1}` || state != "queued" || priority != 4 ||
			maxAttempts != 7 || !due {
			t.Fatalf("job = %s %s %s %s %d %d due=%v, want the schedule's job due now", kind, queue, payload, state,
				priority, maxAttempts, due)
		}
		if x := queryOne[string](t, b.Conn, "SELECT xmin::text FROM jobs_schedules"); x != xmin {
			t.Fatalf("jobs_schedule_run rewrote the schedule (%+v before, %+v after)", before, getSchedule(t, b.Conn, "nightly"))
		}
	})

	t.Run("UnknownNameIs22023", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		_, err := b.Conn.Exec(t.Context(), "SELECT jobs_schedule_run('nope')")
		requireInvalid(t, err, "name", "jobs_schedule_run: name 'nope' is not a schedule")
	})
}

func TestScheduleSetEnabled(t *testing.T) {
	t.Parallel()

	t.Run("TrueOnlyWhenItChanges", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		mustExec(t, b.Conn, "SELECT jobs_schedule('s', '*/5 * * * *', 'k')")
		if queryOne[bool](t, b.Conn, "SELECT jobs_schedule_set_enabled('s', true)") {
			t.Fatal("enabling an enabled schedule returned true")
		}
		if !queryOne[bool](t, b.Conn, "SELECT jobs_schedule_set_enabled('s', false)") {
			t.Fatal("disabling returned false")
		}
		if getSchedule(t, b.Conn, "s").Enabled {
			t.Fatal("schedule still enabled")
		}
		xmin := queryOne[string](t, b.Conn, "SELECT xmin::text FROM jobs_schedules")
		if queryOne[bool](t, b.Conn, "SELECT jobs_schedule_set_enabled('s', false)") {
			t.Fatal("disabling a disabled schedule returned true")
		}
		if x := queryOne[string](t, b.Conn, "SELECT xmin::text FROM jobs_schedules"); x != xmin {
			t.Fatal("a call that changed nothing rewrote the row")
		}
		// A disabled schedule is not ticked.
		mustExec(t, b.Conn, "UPDATE jobs_schedules SET next_run_at = now() - interval '1 hour'")
		if n := queryOne[int32](t, b.Conn, "SELECT jobs_schedule_tick()"); n != 0 {
			t.Fatalf("a disabled schedule was ticked: %d jobs", n)
		}
	})

	// Re-enabling after missed runs does not replay them: the next run is after now.
	t.Run("ReenablingRecomputesFromNow", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		mustExec(t, b.Conn, "SELECT jobs_schedule('s', '*/5 * * * *', 'k', enabled => false)")
		mustExec(t, b.Conn, "UPDATE jobs_schedules SET next_run_at = '2020-01-01 00:05:00Z'")
		if !queryOne[bool](t, b.Conn, "SELECT jobs_schedule_set_enabled('s', true)") {
			t.Fatal("enabling returned false")
		}
		s := getSchedule(t, b.Conn, "s")
		want := queryOne[time.Time](t, b.Conn, "SELECT jobs_cron_next('*/5 * * * *', now())")
		if !s.Enabled || s.NextRunAt == nil || !s.NextRunAt.Equal(want) {
			t.Fatalf("re-enabled schedule = %+v, want next run %v", s, want)
		}
		if n := queryOne[int32](t, b.Conn, "SELECT jobs_schedule_tick()"); n != 0 {
			t.Fatalf("the missed runs were replayed: %d jobs", n)
		}
	})

	t.Run("UnknownNameIs22023", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		_, err := b.Conn.Exec(t.Context(), "SELECT jobs_schedule_set_enabled('nope', true)")
		requireInvalid(t, err, "name", "jobs_schedule_set_enabled: name 'nope' is not a schedule")
	})
}

// requireInvalid fails unless err is a 22023 naming param with the message want.
func requireInvalid(t *testing.T, err error, param, want string) {
	t.Helper()
	pgErr := pgtest.RequirePgError(t, err, "22023")
	if pgErr.ColumnName != param || pgErr.Message != want {
		t.Fatalf("error %q naming %q, want %q naming %q", pgErr.Message, pgErr.ColumnName, want, param)
	}
}
