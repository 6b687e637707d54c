package sqltest

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// hostileSessionSettings are session settings a caller may have that must not change what
// a cron-related function computes or says: each one changes how PostgreSQL reads or
// writes times, intervals or names. The search_path one puts a schema first (before
// pg_catalog) whose decoys have the names of skiplock's helpers and of now().
var hostileSessionSettings = []string{
	"SET TimeZone = 'Asia/Kathmandu'",
	"SET TimeZone = 'America/Santiago'",
	"SET TimeZone = 'Pacific/Chatham'",
	"SET DateStyle = 'SQL, DMY'",
	"SET DateStyle = 'German'",
	"SET DateStyle = 'Postgres, MDY'",
	"SET IntervalStyle = 'sql_standard'",
	"SET IntervalStyle = 'postgres_verbose'",
	"SET IntervalStyle = 'iso_8601'",
	"SET timezone_abbreviations = 'India'",
	"SET timezone_abbreviations = 'Australia'",
	"SET search_path = hostile, pg_catalog, %s",
}

// TestCronFunctionsIgnoreSessionSettings runs every cron-related function (jobs_cron_next,
// jobs_schedule, jobs_schedule_tick, jobs_schedule_set_enabled, jobs_schedule_run,
// jobs_unschedule, and the private _jobs_cron_* through them), their results and their
// errors, under each hostile session setting, and compares with the same calls under the
// defaults: a schedule's instants must not depend on who ticks or re-enables it.
func TestCronFunctionsIgnoreSessionSettings(t *testing.T) {
	t.Parallel()
	b := setup(t)
	schema := queryOne[string](t, b.Conn, "SELECT current_schema()")
	mustExec(t, b.Conn, `
		CREATE SCHEMA hostile;
		CREATE TABLE hostile.jobs_schedules (LIKE jobs_schedules);
		CREATE FUNCTION hostile.now() RETURNS timestamptz LANGUAGE sql AS $$ SELECT timestamptz '2001-02-03 04:05:06Z' $$;
		CREATE FUNCTION hostile._jobs_cron_next(text, text, timestamptz, text) RETURNS timestamptz
			LANGUAGE sql AS $$ SELECT timestamptz '2001-02-03 04:05:06Z' $$;
		CREATE FUNCTION hostile._jobs_cron_instant(timestamp, text) RETURNS timestamptz
			LANGUAGE sql AS $$ SELECT timestamptz '2001-02-03 04:05:06Z' $$;
		CREATE FUNCTION hostile._jobs_cron_latest(text, text, text, timestamptz, timestamptz) RETURNS timestamptz
			LANGUAGE sql AS $$ SELECT timestamptz '2001-02-03 04:05:06Z' $$;
		CREATE FUNCTION hostile._jobs_invalid(text, text, text) RETURNS void
			LANGUAGE sql AS $$ SELECT $$;`)

	neutral := cronScenario(t, b.Conn, "RESET ALL")
	for _, set := range hostileSessionSettings {
		if strings.Contains(set, "%s") {
			set = fmt.Sprintf(set, pgx.Identifier{schema}.Sanitize())
		}
		got := cronScenario(t, b.Conn, set)
		for i := range max(len(got), len(neutral)) {
			var g, n string
			if i < len(got) {
				g = got[i]
			}
			if i < len(neutral) {
				n = neutral[i]
			}
			if g != n {
				t.Errorf("under %s:\n got  %s\n want %s (under the defaults)", set, g, n)
			}
		}
	}
}

// cronScenario starts from no schedules and no jobs, makes every cron-related call with set
// in force (and RESET ALL after each), and returns one line per result or error, with the
// rows the calls changed (read under the defaults). Instants are yearly or fixed, so two
// runs agree unless a new year starts between them.
func cronScenario(t *testing.T, conn *pgx.Conn, set string) []string {
	t.Helper()
	mustExec(t, conn, "RESET ALL")
	mustExec(t, conn, "DELETE FROM jobs_schedules; DELETE FROM jobs")
	var out []string
	call := func(sql string) {
		t.Helper()
		mustExec(t, conn, set)
		var v any
		err := conn.QueryRow(t.Context(), "SELECT "+sql).Scan(&v)
		mustExec(t, conn, "RESET ALL")
		var pgErr *pgconn.PgError
		switch {
		case errors.As(err, &pgErr):
			out = append(out, fmt.Sprintf("%s: error %s: %s", sql, pgErr.Code, pgErr.Message))
		case err != nil:
			t.Fatalf("%s under %s: %v", sql, set, err)
		default:
			if tm, ok := v.(time.Time); ok {
				v = tm.UTC().Format(time.RFC3339Nano)
			}
			out = append(out, fmt.Sprintf("%s = %v", sql, v))
		}
	}
	rows := func(what, sql string) {
		t.Helper()
		got := queryList[string](t, conn, sql)
		out = append(out, what+": "+strings.Join(got, " | "))
	}

	for _, c := range []struct{ cron, after, zone string }{
		{"0 9 * * *", "2026-03-01 00:00:00Z", "IST"},
		{"0 12 * * MON", "2026-03-01 00:00:00Z", "EST"},
		{"0 12 * * *", "2026-03-01 00:00:00Z", "CST"},
		{"30 2 * * *", "2026-03-08 00:00:00Z", "America/New_York"},
		{"*/30 1-2 * * *", "2026-10-24 23:00:00Z", "Europe/Berlin"},
		{"0 0 1 * *", "2026-01-31 12:00:00Z", "Asia/Kathmandu"},
		{"0 0 1 * *", "2026-08-31 12:00:00Z", "America/Santiago"},
		{"0 0 29 2 *", "2026-01-01 00:00:00Z", "Pacific/Chatham"},
		{"@daily", "2026-03-01 00:00:00Z", "Asia/Kolkata"},
		{"@every 90 minutes", "2026-03-01 00:10:00Z", "UTC"},
		{"@every 1 30:00:00", "2026-03-01 00:10:00Z", "UTC"},
		{"@every -1 30:00:00", "2026-03-01 00:10:00Z", "UTC"},
		{"@every 1 month", "2026-03-01 00:00:00Z", "UTC"},
		{"@every 1.5 seconds", "2026-03-01 00:00:00Z", "UTC"},
		{"61 * * * *", "2026-03-01 00:00:00Z", "UTC"},
		{"0 9 * * *", "2026-03-01 00:00:00Z", "Nowhere/Zone"},
		{"0 9 * * *", "infinity", "UTC"},
	} {
		call(fmt.Sprintf("jobs_cron_next('%s', '%s', '%s')", c.cron, c.after, c.zone))
	}

	// Yearly instants: the results do not move between the runs of the scenario.
	call(`jobs_schedule('india', '0 9 1 1 *', 'k', '{"a": 1.5, "t": "2026-01-02"}', 'q', 'IST', 2, 3)`)
	call(`jobs_schedule('east', '0 9 1 1 *', 'k', timezone => 'EST')`)
	call(`jobs_schedule('every', '@every 1 30:00:00', 'k')`)
	call(`jobs_schedule('india', '0 9 1 1 *', 'k', '{"a": 1.5, "t": "2026-01-02"}', 'q', 'IST', 2, 3)`)
	call(`jobs_schedule('bad', '@every 1 month', 'k')`)
	call(`jobs_schedule('bad', '0 9 * * *', 'k', timezone => 'Nowhere/Zone')`)
	rows("schedules", "SELECT concat_ws(' ', name, cron, timezone, enabled, to_char(next_run_at AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI:SS')) FROM jobs_schedules ORDER BY name")

	// Due since 2020: a tick enqueues the latest instant of each and moves it on.
	mustExec(t, conn, "UPDATE jobs_schedules SET next_run_at = '2020-01-01 00:00:00Z' WHERE name <> 'every'")
	call("jobs_schedule_tick()")
	call("jobs_schedule_tick()")
	rows("after the tick", `SELECT concat_ws(' ', name, to_char(last_run_at AT TIME ZONE 'UTC', 'MM-DD HH24:MI:SS'),
		to_char(next_run_at AT TIME ZONE 'UTC', 'MM-DD HH24:MI:SS')) FROM jobs_schedules ORDER BY name`)
	rows("ticked jobs", `SELECT concat_ws(' ', kind, queue, priority, max_attempts, payload::text,
		to_char(run_at AT TIME ZONE 'UTC', 'MM-DD HH24:MI:SS')) FROM jobs ORDER BY queue, run_at`)

	// Re-enabling recomputes the next run from now() or the last run.
	call("jobs_schedule_set_enabled('india', false)")
	call("jobs_schedule_set_enabled('india', false)")
	call("jobs_schedule_set_enabled('india', true)")
	call("jobs_schedule_set_enabled('east', false)")
	mustExec(t, conn, "UPDATE jobs_schedules SET last_run_at = NULL, next_run_at = '2020-01-01 00:00:00Z' WHERE name = 'east'")
	call("jobs_schedule_set_enabled('east', true)")
	call("jobs_schedule_set_enabled('nosuch', true)")
	call("jobs_schedule_set_enabled(NULL, true)")
	call("jobs_schedule('east', '0 9 1 1 *', 'k', timezone => 'EST', enabled => false)")
	call("jobs_schedule('east', '0 9 1 1 *', 'k', timezone => 'EST', enabled => true)")
	rows("after re-enabling", `SELECT concat_ws(' ', name, enabled, to_char(next_run_at AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI:SS'))
		FROM jobs_schedules ORDER BY name`)

	mustExec(t, conn, "DELETE FROM jobs")
	call("jobs_schedule_run('india') > 0")
	call("jobs_schedule_run('nosuch')")
	rows("run now", `SELECT concat_ws(' ', kind, queue, priority, max_attempts, payload::text, state, run_at <= now())
		FROM jobs ORDER BY id`)

	call("jobs_unschedule('east')")
	call("jobs_unschedule('east')")
	call("jobs_unschedule(NULL)")
	rows("left", "SELECT name FROM jobs_schedules ORDER BY name")
	return out
}

// TestCronCallersPinTimezoneAbbreviations: every public function that computes cron
// instants (calls a _jobs_cron_ helper) pins timezone_abbreviations. The helpers leave it to
// their callers, as setting it reloads the abbreviation file: once per call of a public
// function, not once per step of a tick's search.
func TestCronCallersPinTimezoneAbbreviations(t *testing.T) {
	t.Parallel()
	b := setup(t)
	callers := queryList[string](t, b.Conn, `
		SELECT p.proname || ' ' || coalesce(array_to_string(p.proconfig, ','), '')
		FROM pg_proc p
		WHERE p.pronamespace = current_schema()::regnamespace
		  AND p.proname NOT LIKE '\_%'
		  AND p.prosrc ~ '_jobs_cron_(next|latest|instant|parse|timezone)\('
		ORDER BY p.proname`)
	if len(callers) < 4 {
		t.Fatalf("found %d public cron functions, want at least jobs_cron_next, jobs_schedule, jobs_schedule_set_enabled, jobs_schedule_tick: %q", len(callers), callers)
	}
	for _, c := range callers {
		if !strings.Contains(c, "timezone_abbreviations=Default") {
			t.Errorf("%s: does not pin timezone_abbreviations = 'Default'", c)
		}
	}
}
