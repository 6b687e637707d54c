package main

import (
	"strings"
	"testing"
	"time"

	"github.com/skiplock/skiplock/admin"
	"github.com/skiplock/skiplock/tests/pgtest"
)

func TestSchedule(t *testing.T) {
	t.Parallel()
	db := setup(t)

	out := cli(t, db.URL, "schedule", "add", "nightly", "30 2 * * *", "report", `{"format": "pdf"}`,
		"--queue", "reports", "--timezone", "Europe/Berlin", "--priority", "2", "--max-attempts", "3").ok(t)
	if !strings.HasPrefix(out, "nightly next runs at ") {
		t.Fatalf("schedule add: %q", out)
	}
	var added struct {
		Name      string     `json:"name"`
		NextRunAt *time.Time `json:"next_run_at"`
	}
	cli(t, db.URL, "schedule", "add", "every", "@every 1 second", "ping", "-o", "json").decode(t, &added)
	if added.Name != "every" || added.NextRunAt == nil {
		t.Fatalf("schedule add -o json = %+v", added)
	}

	var list []admin.Schedule
	cli(t, db.URL, "schedule", "list", "-o", "json").decode(t, &list)
	if len(list) != 2 || list[0].Name != "every" || list[1].Name != "nightly" || list[1].Timezone != "Europe/Berlin" ||
		list[1].Queue != "reports" || list[1].Priority != 2 || list[1].MaxAttempts != 3 || !list[1].Enabled ||
		!strings.Contains(string(list[1].Payload), `"format": "pdf"`) || list[1].LastRunAt != nil {
		t.Fatalf("schedule list -o json = %+v", list)
	}
	if out := cli(t, db.URL, "schedule", "list").ok(t); !strings.Contains(out, "nightly  30 2 * * *") {
		t.Fatalf("schedule list:\n%s", out)
	}

	// run: a job now, the schedule untouched.
	before := pgtest.QueryOne[time.Time](t, db.Conn, "SELECT next_run_at FROM jobs_schedules WHERE name = 'nightly'")
	if out := cli(t, db.URL, "schedule", "run", "nightly").ok(t); out != "1\n" {
		t.Fatalf("schedule run: %q", out)
	}
	if k := pgtest.QueryOne[string](t, db.Conn, "SELECT kind || ' ' || queue FROM jobs WHERE id = 1"); k != "report reports" {
		t.Fatalf("job of schedule run: %q", k)
	}
	if after := pgtest.QueryOne[time.Time](t, db.Conn, "SELECT next_run_at FROM jobs_schedules WHERE name = 'nightly'"); !after.Equal(before) {
		t.Fatalf("schedule run moved the next run from %v to %v", before, after)
	}

	// disable, enable.
	if out := cli(t, db.URL, "schedule", "disable", "every").ok(t); out != "disabled every\n" {
		t.Fatalf("schedule disable: %q", out)
	}
	if out := cli(t, db.URL, "schedule", "disable", "every").ok(t); out != "every was already disabled\n" {
		t.Fatalf("schedule disable again: %q", out)
	}
	pgtest.WaitFor(t, 10*time.Second, "the every-second schedule to be due", func() bool {
		return pgtest.QueryOne[bool](t, db.Conn, "SELECT next_run_at < clock_timestamp() FROM jobs_schedules WHERE name = 'every'")
	})
	if out := cli(t, db.URL, "schedule", "tick").ok(t); out != "enqueued 0 jobs\n" {
		t.Fatalf("tick with the due schedule disabled: %q", out)
	}
	var enabled map[string]any
	cli(t, db.URL, "schedule", "enable", "every", "-o", "json").decode(t, &enabled)
	if enabled["changed"] != true || enabled["enabled"] != true {
		t.Fatalf("schedule enable -o json = %v", enabled)
	}
	pgtest.WaitFor(t, 10*time.Second, "the re-enabled schedule to be due", func() bool {
		return pgtest.QueryOne[bool](t, db.Conn, "SELECT next_run_at < clock_timestamp() FROM jobs_schedules WHERE name = 'every'")
	})
	var ticked map[string]int
	cli(t, db.URL, "schedule", "tick", "-o", "json").decode(t, &ticked)
	if ticked["jobs"] != 1 {
		t.Fatalf("schedule tick -o json = %v, want 1 job", ticked)
	}

	if out := cli(t, db.URL, "schedule", "rm", "every").ok(t); out != "removed every\n" {
		t.Fatalf("schedule rm: %q", out)
	}
	for _, sub := range []string{"rm", "run", "enable", "disable"} {
		cli(t, db.URL, "schedule", sub, "every").fails(t, exitNotFound, `no schedule "every"`)
	}
	cli(t, db.URL, "schedule", "add", "bad", "0 0 31 2 *", "k").fails(t, exitUsage, "never runs")
	cli(t, db.URL, "schedule", "add", "bad", "* * * * *", "k", "--timezone", "Mars/Base").fails(t, exitUsage, "not a known time zone")
	cli(t, db.URL, "schedule", "add", "bad").fails(t, exitUsage, "want NAME CRON KIND")
	cli(t, db.URL, "schedule").fails(t, exitUsage, "missing subcommand (add, list, rm, run, enable, disable, tick)")
	cli(t, db.URL, "schedule", "nope").fails(t, exitUsage, `unknown command "schedule nope"`)
}
