package sqltest

import (
	"testing"
	"time"
)

// TestCronNext checks jobs_cron_next's syntax and time rules on fixed cases; the random
// comparison with robfig/cron lives in tests/cronoracle.
func TestCronNext(t *testing.T) {
	t.Parallel()
	b := setup(t)
	next := func(t *testing.T, cron, after, zone string) *time.Time {
		t.Helper()
		return queryOne[*time.Time](t, b.Conn, "SELECT jobs_cron_next($1, $2::timestamptz, $3)", cron, after, zone)
	}

	t.Run("Syntax", func(t *testing.T) {
		for _, tc := range []struct{ cron, after, want string }{
			{"* * * * *", "2024-05-01 10:00:00Z", "2024-05-01 10:01:00Z"},
			{"* * * * *", "2024-05-01 10:00:59.999999Z", "2024-05-01 10:01:00Z"},
			{"*/15 * * * *", "2024-05-01 10:00:00Z", "2024-05-01 10:15:00Z"},
			{"5/20 * * * *", "2024-05-01 10:46:00Z", "2024-05-01 11:05:00Z"},
			{"10-20/5 * * * *", "2024-05-01 10:16:00Z", "2024-05-01 10:20:00Z"},
			{"0 9,17 * * *", "2024-05-01 09:00:00Z", "2024-05-01 17:00:00Z"},
			{"0 0 1 jan-mar *", "2024-03-05 00:00:00Z", "2025-01-01 00:00:00Z"},
			{"0 0 * * MON-FRI", "2024-05-03 12:00:00Z", "2024-05-06 00:00:00Z"}, // Friday -> Monday
			{"0 0 * * 7", "2024-05-01 00:00:00Z", "2024-05-05 00:00:00Z"},       // 7 is Sunday
			{"0 0 * * sun", "2024-05-01 00:00:00Z", "2024-05-05 00:00:00Z"},
			// Both day fields restricted: either matches (the 13th, or a Friday).
			{"0 0 13 * FRI", "2024-05-01 00:00:00Z", "2024-05-03 00:00:00Z"},
			{"0 0 13 * FRI", "2024-05-10 00:00:00Z", "2024-05-13 00:00:00Z"},
			// One day field starting with '*' (even '*/2'): both must match.
			{"0 0 13 * *", "2024-05-01 00:00:00Z", "2024-05-13 00:00:00Z"},
			{"0 0 */2 * FRI", "2024-05-01 00:00:00Z", "2024-05-03 00:00:00Z"},
			{"0 0 */2 * FRI", "2024-05-04 00:00:00Z", "2024-05-17 00:00:00Z"},
			{"0 0 29 2 *", "2097-01-01 00:00:00Z", "2104-02-29 00:00:00Z"},
			{"@yearly", "2024-05-01 00:00:00Z", "2025-01-01 00:00:00Z"},
			{"@annually", "2024-05-01 00:00:00Z", "2025-01-01 00:00:00Z"},
			{"@monthly", "2024-05-01 00:00:00Z", "2024-06-01 00:00:00Z"},
			{"@weekly", "2024-05-01 00:00:00Z", "2024-05-05 00:00:00Z"},
			{"@daily", "2024-05-01 00:00:00Z", "2024-05-02 00:00:00Z"},
			{"@midnight", "2024-05-01 00:00:00Z", "2024-05-02 00:00:00Z"},
			{"@hourly", "2024-05-01 00:59:59Z", "2024-05-01 01:00:00Z"},
			{"  @DAILY\t", "2024-05-01 00:00:00Z", "2024-05-02 00:00:00Z"},
			// @every: the multiples of the interval since 1970-01-01 00:00 UTC.
			{"@every 30 seconds", "2024-05-01 00:00:10Z", "2024-05-01 00:00:30Z"},
			{"@every 30 seconds", "2024-05-01 00:00:30Z", "2024-05-01 00:01:00Z"},
			{"@every 1h30m", "2024-05-01 00:00:00Z", "2024-05-01 01:30:00Z"},
			{"@every 1 day", "2024-05-01 12:00:00Z", "2024-05-02 00:00:00Z"},
			{"@every 7 days", "2024-05-01 00:00:00Z", "2024-05-02 00:00:00Z"}, // 1970-01-01 was a Thursday
		} {
			got := next(t, tc.cron, tc.after, "UTC")
			want := mustTime(t, tc.want)
			if got == nil || !got.Equal(want) {
				t.Errorf("jobs_cron_next(%q, %s) = %v, want %v", tc.cron, tc.after, got, want)
			}
		}
	})

	t.Run("NeverRunsIsNull", func(t *testing.T) {
		if got := next(t, "0 0 31 2 *", "2024-01-01 00:00:00Z", "UTC"); got != nil {
			t.Errorf("jobs_cron_next('0 0 31 2 *') = %v, want NULL", got)
		}
		if got := next(t, "* * * * *", "294000-01-01 00:00:00Z", "UTC"); got != nil {
			t.Errorf("jobs_cron_next past the supported range = %v, want NULL", got)
		}
	})

	t.Run("LocalWallClock", func(t *testing.T) {
		for _, tc := range []struct{ cron, zone, after, want string }{
			{"0 9 * * *", "Asia/Kolkata", "2024-05-01 00:00:00Z", "2024-05-01 03:30:00Z"},
			{"0 9 * * *", "Asia/Kathmandu", "2024-05-01 00:00:00Z", "2024-05-01 03:15:00Z"},
			{"0 0 * * MON", "America/Los_Angeles", "2024-05-06 06:00:00Z", "2024-05-06 07:00:00Z"},
			// Spring forward: a skipped local time runs when the clocks jump.
			{"30 2 * * *", "America/New_York", "2024-03-09 12:00:00Z", "2024-03-10 07:00:00Z"}, // 03:00 EDT
			{"30 2 * * *", "America/New_York", "2024-03-10 07:00:00Z", "2024-03-11 06:30:00Z"},
			{"30 2 * * *", "Europe/Berlin", "2024-03-30 12:00:00Z", "2024-03-31 01:00:00Z"},       // 03:00 CEST
			{"15 2 * * *", "Australia/Lord_Howe", "2024-10-05 12:00:00Z", "2024-10-05 15:30:00Z"}, // 02:30 +11
			// Fall back: a repeated local time runs at its first occurrence only.
			{"30 1 * * *", "America/New_York", "2024-11-02 12:00:00Z", "2024-11-03 05:30:00Z"}, // 01:30 EDT
			{"30 1 * * *", "America/New_York", "2024-11-03 05:30:00Z", "2024-11-04 06:30:00Z"},
			{"30 2 * * *", "Europe/Berlin", "2024-10-26 12:00:00Z", "2024-10-27 00:30:00Z"}, // 02:30 CEST
			{"30 2 * * *", "Europe/Berlin", "2024-10-27 00:30:00Z", "2024-10-28 01:30:00Z"},
			{"45 1 * * *", "Australia/Lord_Howe", "2024-04-06 12:00:00Z", "2024-04-06 14:45:00Z"}, // 01:45 +11
			// Wildcard minute or hour fields run in both occurrences of the repeated hour
			// (Vixie cron): 02:58 CEST, then 02:00 CET.
			{"*/5 * * * *", "Europe/Berlin", "2024-10-27 00:58:00Z", "2024-10-27 01:00:00Z"},
			{"@hourly", "Europe/Berlin", "2024-10-27 00:00:00Z", "2024-10-27 01:00:00Z"},
			{"@hourly", "Europe/Berlin", "2024-10-27 01:00:00Z", "2024-10-27 02:00:00Z"},
			{"*/30 1 * * *", "America/New_York", "2024-11-03 05:30:00Z", "2024-11-03 06:00:00Z"}, // 01:00 EST
			{"*/30 1 * * *", "America/New_York", "2024-11-03 06:30:00Z", "2024-11-04 06:00:00Z"},
			// Lord Howe falls back half an hour (02:00 +11 to 01:30 +10:30): after 01:45
			// +11 comes 01:30 +10:30, before 02:00 +10:30.
			{"*/15 * * * *", "Australia/Lord_Howe", "2024-04-06 14:45:00Z", "2024-04-06 15:00:00Z"},
			{"*/15 * * * *", "Australia/Lord_Howe", "2024-04-06 15:00:00Z", "2024-04-06 15:15:00Z"},
			// A fixed time with a wildcard elsewhere (day fields) still runs once.
			{"30 2 * * *", "Europe/Berlin", "2024-10-27 00:31:00Z", "2024-10-28 01:30:00Z"},
			// After within the repeated hour, at a time whose first occurrence has passed.
			{"30 2 * * *", "Europe/Berlin", "2024-10-27 01:10:00Z", "2024-10-28 01:30:00Z"},
		} {
			got := next(t, tc.cron, tc.after, tc.zone)
			want := mustTime(t, tc.want)
			if got == nil || !got.Equal(want) {
				t.Errorf("jobs_cron_next(%q, %s, %s) = %v, want %v", tc.cron, tc.after, tc.zone, got, want)
			}
		}
	})

	// The rule: a daily 02:30 job runs exactly once on every local date of a year,
	// spring-forward and fall-back days included.
	t.Run("Daily0230OncePerLocalDateThroughDST", func(t *testing.T) {
		for _, zone := range []string{"America/New_York", "Europe/Berlin", "Australia/Lord_Howe", "America/Santiago", "UTC"} {
			loc, err := time.LoadLocation(zone)
			if err != nil {
				t.Fatal(err)
			}
			dates := queryList[string](t, b.Conn, `
				WITH RECURSIVE runs(at) AS (
				    SELECT jobs_cron_next('30 2 * * *', '2023-12-31 12:00:00Z', $1)
				    UNION ALL
				    SELECT jobs_cron_next('30 2 * * *', at, $1) FROM runs WHERE at < '2025-01-01 00:00:00Z'
				)
				SELECT to_char(at AT TIME ZONE $1, 'YYYY-MM-DD') FROM runs WHERE at < '2025-01-01 00:00:00Z' ORDER BY at`, zone)
			seen := map[string]int{}
			for _, d := range dates {
				seen[d]++
			}
			for d := time.Date(2024, 1, 1, 0, 0, 0, 0, loc); d.Year() == 2024; d = d.AddDate(0, 0, 1) {
				if n := seen[d.Format("2006-01-02")]; n != 1 {
					t.Errorf("%s: %s has %d runs of '30 2 * * *', want 1", zone, d.Format("2006-01-02"), n)
				}
			}
		}
	})
}

// Vixie cron's rule at fall-back: an expression whose minute or hour field starts with '*'
// runs in both occurrences of the repeated hour, so '*/15' keeps its 15-minute beat through
// it (no 75-minute gap) and @hourly runs every hour.
func TestCronNextWildcardRunsInBothOccurrencesAtFallBack(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for _, tc := range []struct {
		cron, zone, from string
		step             time.Duration
		n                int
	}{
		{"*/15 * * * *", "Europe/Berlin", "2026-10-24 23:30:00Z", 15 * time.Minute, 12},
		{"@hourly", "Europe/Berlin", "2026-10-24 22:00:00Z", time.Hour, 6},
		{"*/10 * * * *", "America/New_York", "2026-11-01 04:30:00Z", 10 * time.Minute, 20},
		{"* * * * *", "Australia/Lord_Howe", "2026-04-04 14:50:00Z", time.Minute, 60},
	} {
		runs := queryList[time.Time](t, b.Conn, `
			WITH RECURSIVE s(at, n) AS (
			    SELECT $2::timestamptz, 0
			    UNION ALL
			    SELECT jobs_cron_next($1, at, $3), n + 1 FROM s WHERE n < $4
			)
			SELECT at FROM s ORDER BY n`, tc.cron, tc.from, tc.zone, tc.n)
		for i := 1; i < len(runs); i++ {
			if d := runs[i].Sub(runs[i-1]); d != tc.step {
				t.Errorf("%s in %s: %v after %v, want every %v", tc.cron, tc.zone, runs[i], runs[i-1], tc.step)
			}
		}
	}
}

// A time zone abbreviation means the same whatever the session's timezone_abbreviations:
// every ticker must agree on a schedule's instants.
func TestCronNextIgnoresSessionTimezoneAbbreviations(t *testing.T) {
	t.Parallel()
	b := setup(t)
	const q = "SELECT jobs_cron_next('0 9 * * *', '2026-12-01 00:00:00Z', 'IST')"
	byDefault := queryOne[time.Time](t, b.Conn, q)
	mustExec(t, b.Conn, "SET timezone_abbreviations = 'India'")
	if got := queryOne[time.Time](t, b.Conn, q); !got.Equal(byDefault) {
		t.Errorf("jobs_cron_next with 'IST' = %v under timezone_abbreviations 'India', %v under 'Default'", got, byDefault)
	}
	// jobs_schedule and jobs_schedule_tick read the zone the same way.
	next := queryOne[time.Time](t, b.Conn, "SELECT jobs_schedule('s', '0 9 * * *', 'k', timezone => 'IST')")
	if h := next.UTC().Hour(); h != byDefault.UTC().Hour() {
		t.Errorf("jobs_schedule with 'IST' under 'India' runs at %v, not at %02d:00 UTC as under 'Default'", next, byDefault.UTC().Hour())
	}
}

func mustTime(t *testing.T, s string) time.Time {
	t.Helper()
	v, err := time.Parse("2006-01-02 15:04:05.999999Z07:00", s)
	if err != nil {
		v, err = time.Parse("2006-01-02 15:04:05Z", s)
	}
	if err != nil {
		t.Fatal(err)
	}
	return v
}
