package main

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/skiplock/skiplock/tests/pgtest"
)

func TestEnqueue(t *testing.T) {
	t.Parallel()

	t.Run("PrintsTheIDWithEveryFlag", func(t *testing.T) {
		t.Parallel()
		db := setup(t)
		out := cli(t, db.URL, "enqueue", "email", `{"to": "a@example.com"}`, "--queue", "mail", "--priority", "-3",
			"--max-attempts", "2", "--unique-key", "u1", "--concurrency-key", "c1", "--in", "1h").ok(t)
		if out != "1\n" {
			t.Fatalf("stdout %q, want the id 1", out)
		}
		var queue, payload, unique, conc string
		var prio, maxAttempts int32
		var inAnHour bool
		err := db.Conn.QueryRow(t.Context(), `
			SELECT queue, payload::text, priority, max_attempts, unique_key, concurrency_key,
			       run_at BETWEEN now() + interval '59 minutes' AND now() + interval '61 minutes'
			FROM jobs WHERE id = 1`).Scan(&queue, &payload, &prio, &maxAttempts, &unique, &conc, &inAnHour)
		if err != nil {
			t.Fatal(err)
		}
		if queue != "mail" || payload != `{"to": "a@example.com"}` || prio != -3 || maxAttempts != 2 || unique != "u1" ||
			conc != "c1" || !inAnHour {
			t.Fatalf("job = %s %s %d %d %s %s in an hour: %v", queue, payload, prio, maxAttempts, unique, conc, inAnHour)
		}
		// The same unique key again gives the live job's id.
		var got map[string]int64
		cli(t, db.URL, "enqueue", "email", "--queue", "mail", "--unique-key", "u1", "-o", "json").decode(t, &got)
		if got["id"] != 1 {
			t.Fatalf("enqueue with a held unique key = %v, want id 1", got)
		}
	})

	t.Run("OnDuplicateAndUniqueFor", func(t *testing.T) {
		t.Parallel()
		db := setup(t)
		// Debounce: the second call replaces the queued job's payload and run time.
		cli(t, db.URL, "enqueue", "reindex", `{"rev": 1}`, "--unique-key", "doc", "--on-duplicate", "replace", "--in", "1m").ok(t)
		if out := cli(t, db.URL, "enqueue", "reindex", `{"rev": 2}`, "--unique-key", "doc", "--on-duplicate", "replace", "--in", "1h").ok(t); out != "1\n" {
			t.Fatalf("replace printed %q, want the queued job's id 1", out)
		}
		if ok := pgtest.QueryOne[bool](t, db.Conn, `SELECT payload = '{"rev": 2}' AND run_at > now() + interval '50 minutes' FROM jobs WHERE id = 1`); !ok {
			t.Fatal("the queued job did not take the replace's payload and run time")
		}
		// Throttle: the key stays taken after the job is cancelled.
		cli(t, db.URL, "enqueue", "digest", "--unique-key", "daily", "--unique-for", "1h").ok(t)
		pgtest.MustExec(t, db.Conn, "SELECT jobs_cancel(3)")
		if out := cli(t, db.URL, "enqueue", "digest", "--unique-key", "daily", "--unique-for", "1h").ok(t); out != "3\n" {
			t.Fatalf("enqueue within --unique-for printed %q, want the cancelled job's id 3", out)
		}
		if ok := pgtest.QueryOne[bool](t, db.Conn, `SELECT unique_for = interval '1 hour' FROM jobs WHERE id = 3`); !ok {
			t.Fatal("--unique-for was not stored")
		}
		cli(t, db.URL, "enqueue", "k", "--unique-key", "u", "--on-duplicate", "update").fails(t, exitUsage, "--on-duplicate must be keep or replace")
		cli(t, db.URL, "enqueue", "k", "--on-duplicate", "replace").fails(t, exitUsage, "need --unique-key")
		cli(t, db.URL, "enqueue", "k", "--unique-for", "1h").fails(t, exitUsage, "need --unique-key")
		cli(t, db.URL, "enqueue", "k", "--unique-key", "u", "--unique-for", "-1h").fails(t, exitUsage, "--unique-for must not be negative")
		cli(t, db.URL, "enqueue", "k", "--unique-key", "u", "--unique-for", "876600h1s").fails(t, exitUsage, "jobs_enqueue: unique_for must be NULL or a positive interval of at most 100 years")
	})

	t.Run("PayloadFromStdinAndRunAt", func(t *testing.T) {
		t.Parallel()
		db := setup(t)
		r := cliWith(t, t.Context(), cliOpts{databaseURL: &db.URL, stdin: `{"from": "stdin"}`},
			"enqueue", "resize", "-", "--run-at", "2030-01-02T03:04:05Z")
		r.ok(t)
		if p := pgtest.QueryOne[string](t, db.Conn, "SELECT payload->>'from' FROM jobs"); p != "stdin" {
			t.Fatalf("payload from stdin: %q", p)
		}
		if at := pgtest.QueryOne[time.Time](t, db.Conn, "SELECT run_at FROM jobs"); !at.Equal(time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)) {
			t.Fatalf("run_at %v", at)
		}
	})

	t.Run("DependsOnAndNotifyFinished", func(t *testing.T) {
		t.Parallel()
		db := setup(t)
		cli(t, db.URL, "enqueue", "a").ok(t)
		cli(t, db.URL, "enqueue", "b").ok(t)
		out := cli(t, db.URL, "enqueue", "c", "--depends-on", "1, 2", "--on-parent-failure", "run", "--notify-finished").ok(t)
		if out != "3\n" {
			t.Fatalf("stdout %q, want the id 3", out)
		}
		got := pgtest.QueryOne[string](t, db.Conn, `SELECT format('%s %s %s %s', state, depends_on, on_parent_failure, notify_finished)
			FROM jobs WHERE id = 3`)
		if got != "waiting {1,2} run t" {
			t.Fatalf("job 3 is %q, want waiting {1,2} run t", got)
		}
		if n := pgtest.QueryOne[int64](t, db.Conn, `SELECT count(*) FROM jobs WHERE id = 1 AND depends_on IS NULL AND NOT coalesce(notify_finished, false)`); n != 1 {
			t.Fatal("job 1, enqueued without the flags, has parents or notify_finished")
		}
		out = cli(t, db.URL, "show", "3").ok(t)
		for _, want := range []string{"state:             waiting", "depends on:        1, 2", "parent failure:    run"} {
			if !strings.Contains(out, want) {
				t.Errorf("show does not print %q:\n%s", want, out)
			}
		}
		cli(t, db.URL, "enqueue", "d", "--depends-on", "1", "--on-parent-failure", "ignore").fails(t, exitUsage, "on_parent_failure")
		cli(t, db.URL, "enqueue", "d", "--on-parent-failure", "run").fails(t, exitUsage, "--on-parent-failure needs --depends-on")
		cli(t, db.URL, "enqueue", "d", "--depends-on", "1,x").fails(t, exitUsage, "--depends-on must be job ids")
	})

	t.Run("BadInputIsUsage", func(t *testing.T) {
		t.Parallel()
		db := setup(t)
		cli(t, db.URL, "enqueue").fails(t, exitUsage, "want KIND")
		cli(t, db.URL, "enqueue", "k", "{not json").fails(t, exitUsage, "invalid input syntax for type json")
		cli(t, db.URL, "enqueue", "k", "--max-attempts", "0").fails(t, exitUsage, "jobs_enqueue: max_attempts must be at least 1")
		cli(t, db.URL, "enqueue", "k", "--in", "1m", "--run-at", "2030-01-01T00:00:00Z").fails(t, exitUsage, "exclude each other")
		cli(t, db.URL, "enqueue", "k", "--priority", "3000000000").fails(t, exitUsage, "--priority must be a 32-bit integer")
		cli(t, db.URL, "enqueue", "k", "--nope").fails(t, exitUsage, "flag provided but not defined: -nope")
		if n := pgtest.QueryOne[int64](t, db.Conn, "SELECT count(*) FROM jobs"); n != 0 {
			t.Fatalf("%d jobs after refused enqueues", n)
		}
	})
}

// deadJob enqueues a job with one attempt on queue and fails it to dead with message.
func deadJob(t *testing.T, db *pgtest.TestDB, queue, kind, message string) int64 {
	t.Helper()
	id := pgtest.QueryOne[int64](t, db.Conn, "SELECT jobs_enqueue($1, queue => $2, max_attempts => 1)", kind, queue)
	attempt := pgtest.QueryOne[int32](t, db.Conn, "SELECT attempt FROM jobs_claim('worker-1', 1, ARRAY[$1], '1 hour')", queue)
	pgtest.MustExec(t, db.Conn, "SELECT jobs_fail($1, $2, $3)", id, attempt, message)
	return id
}

func TestList(t *testing.T) {
	t.Parallel()

	t.Run("FiltersAndJSONFields", func(t *testing.T) {
		t.Parallel()
		db := setup(t)
		dead := deadJob(t, db, "mail", "email", "SMTP 550\nmailbox unavailable")
		cli(t, db.URL, "enqueue", "email", "--queue", "mail").ok(t)
		cli(t, db.URL, "enqueue", "resize", "--queue", "images").ok(t)

		var page struct {
			Jobs      []map[string]any `json:"jobs"`
			NextAfter *int64           `json:"next_after"`
		}
		cli(t, db.URL, "list", "--state", "dead", "-o", "json").decode(t, &page)
		if len(page.Jobs) != 1 || page.NextAfter != nil {
			t.Fatalf("list --state dead = %+v, want one job and no next page", page)
		}
		j := page.Jobs[0]
		for _, field := range []string{"id", "queue", "kind", "state", "priority", "attempts", "max_attempts", "run_at",
			"created_at", "started_at", "finished_at", "lease_holder", "lease_expires_at", "unique_key",
			"concurrency_key", "last_error"} {
			if _, ok := j[field]; !ok {
				t.Errorf("list -o json: job has no field %q: %v", field, j)
			}
		}
		if j["id"] != float64(dead) || j["last_error"] != "SMTP 550\nmailbox unavailable" || j["lease_holder"] != "worker-1" {
			t.Fatalf("dead job = %v", j)
		}

		out := cli(t, db.URL, "list", "--queue", "mail").ok(t)
		if !strings.Contains(out, "SMTP 550 mailbox unavailable") || strings.Contains(out, "images") ||
			strings.Count(out, "\n") != 3 {
			t.Fatalf("list --queue mail (a header, two jobs, the error on one line):\n%s", out)
		}
		if out := cli(t, db.URL, "list", "--kind", "nope").ok(t); strings.Count(out, "\n") != 1 {
			t.Fatalf("list --kind nope printed more than the header:\n%s", out)
		}
	})

	t.Run("KeysetPaging", func(t *testing.T) {
		t.Parallel()
		db := setup(t)
		pgtest.MustExec(t, db.Conn, "SELECT jobs_enqueue_many(array_fill('k'::text, ARRAY[5]))")
		var seen []int64
		after := ""
		for range 4 {
			args := []string{"list", "--limit", "2", "-o", "json"}
			if after != "" {
				args = append(args, "--after", after)
			}
			var page struct {
				Jobs []struct {
					ID int64 `json:"id"`
				} `json:"jobs"`
				NextAfter *int64 `json:"next_after"`
			}
			cli(t, db.URL, args...).decode(t, &page)
			for _, j := range page.Jobs {
				seen = append(seen, j.ID)
			}
			if page.NextAfter == nil {
				break
			}
			after = fmt.Sprint(*page.NextAfter)
		}
		if fmt.Sprint(seen) != "[5 4 3 2 1]" {
			t.Fatalf("pages gave %v, want 5 down to 1", seen)
		}
		r := cli(t, db.URL, "list", "--limit", "2")
		if r.ok(t); !strings.Contains(r.stderr, "--after 4") {
			t.Fatalf("a full table page does not say how to get the next: %q", r.stderr)
		}
	})

	t.Run("BadInputIsUsage", func(t *testing.T) {
		t.Parallel()
		db := setup(t)
		cli(t, db.URL, "list", "--state", "bogus").fails(t, exitUsage, `invalid input value for enum jobs_state: "bogus"`)
		cli(t, db.URL, "list", "--limit", "1001").fails(t, exitUsage, "jobs_list: max_jobs must be between 1 and 1000")
		cli(t, db.URL, "list", "extra").fails(t, exitUsage, `unexpected argument "extra"`)
		cli(t, db.URL, "list", "-o", "yaml").fails(t, exitUsage, "must be table or json")
	})
}

func TestShow(t *testing.T) {
	t.Parallel()
	db := setup(t)
	id := pgtest.QueryOne[int64](t, db.Conn, `SELECT jobs_enqueue('email', '{"to": "a@example.com"}', max_attempts => 3)`)
	attempt := pgtest.QueryOne[int32](t, db.Conn, "SELECT attempt FROM jobs_claim('worker-1', 1, NULL, '1 hour')")
	pgtest.MustExec(t, db.Conn, "SELECT jobs_fail($1, $2, 'timeout', now())", id, attempt)
	pgtest.MustExec(t, db.Conn, "SELECT jobs_claim('worker-2', 1, NULL, '1 hour')")

	out := cli(t, db.URL, "show", fmt.Sprint(id)).ok(t)
	for _, want := range []string{"state:             running", "attempts:          2 of 3", "lease holder:      worker-2",
		`"to": "a@example.com"`, "attempt 1 at ", "by worker-1:\n    timeout"} {
		if !strings.Contains(out, want) {
			t.Errorf("show does not print %q:\n%s", want, out)
		}
	}
	var j struct {
		Payload        map[string]string `json:"payload"`
		LeaseHolder    string            `json:"lease_holder"`
		LeaseExpiresAt *time.Time        `json:"lease_expires_at"`
		Errors         []struct {
			Attempt int32     `json:"attempt"`
			At      time.Time `json:"at"`
			Error   string    `json:"error"`
			Worker  string    `json:"worker"`
		} `json:"errors"`
	}
	cli(t, db.URL, "show", fmt.Sprint(id), "-o", "json").decode(t, &j)
	if j.Payload["to"] != "a@example.com" || j.LeaseHolder != "worker-2" || j.LeaseExpiresAt == nil ||
		len(j.Errors) != 1 || j.Errors[0].Error != "timeout" || j.Errors[0].Worker != "worker-1" || j.Errors[0].At.IsZero() {
		t.Fatalf("show -o json = %+v", j)
	}

	// A worker's error cannot drive the operator's terminal.
	evil := deadJob(t, db, "evil", "k", "\x1b[2Jcleared\nsecond line")
	out = cli(t, db.URL, "show", fmt.Sprint(evil)).ok(t)
	if strings.Contains(out, "\x1b") || !strings.Contains(out, `\x1b[2Jcleared`+"\n    second line") {
		t.Fatalf("show prints a control character raw:\n%q", out)
	}
	if out := cli(t, db.URL, "list", "--queue", "evil").ok(t); strings.Contains(out, "\x1b") || !strings.Contains(out, `\x1b[2Jcleared second line`) {
		t.Fatalf("list prints a control character raw:\n%q", out)
	}

	cli(t, db.URL, "show", "999").fails(t, exitNotFound, "no job 999")
	cli(t, db.URL, "show", "x").fails(t, exitUsage, "ID must be an integer")
	cli(t, db.URL, "show").fails(t, exitUsage, "want one job ID")
}

// TestProgressAndResult: list and show print the progress a worker reported, show the result
// a job was completed with, and both carry them in their JSON.
func TestProgressAndResult(t *testing.T) {
	t.Parallel()
	db := setup(t)
	running := pgtest.QueryOne[int64](t, db.Conn, "SELECT jobs_enqueue('resize', queue => 'r')")
	attempt := claimOne(t, db, running, "r")
	pgtest.MustExec(t, db.Conn, `SELECT jobs_progress($1, $2, '{"pct": 40, "note": "\u001b[2J"}')`, running, attempt)
	done := pgtest.QueryOne[int64](t, db.Conn, "SELECT jobs_enqueue('fetch', queue => 'd')")
	attempt = claimOne(t, db, done, "d")
	pgtest.MustExec(t, db.Conn, `SELECT jobs_complete($1, $2, '{"files": 3}')`, done, attempt)

	out := cli(t, db.URL, "list", "--queue", "r").ok(t)
	if !strings.Contains(out, "PROGRESS") || !strings.Contains(out, `{"pct":40,"note":"\u001b[2J"}`) || strings.Contains(out, "\x1b") {
		t.Errorf("list does not print the progress (compact, escaped):\n%s", out)
	}
	out = cli(t, db.URL, "show", fmt.Sprint(done)).ok(t)
	if !strings.Contains(out, "result:\n{\n  \"files\": 3\n}") || !strings.Contains(out, "workflow:          -") {
		t.Errorf("show does not print the result:\n%s", out)
	}
	var j struct {
		Progress   map[string]any `json:"progress"`
		Result     map[string]any `json:"result"`
		WorkflowID *int64         `json:"workflow_id"`
	}
	cli(t, db.URL, "show", fmt.Sprint(running), "-o", "json").decode(t, &j)
	if j.Progress["pct"] != float64(40) || j.Result != nil || j.WorkflowID != nil {
		t.Errorf("show -o json = %+v, want the progress, no result, no workflow", j)
	}
	cli(t, db.URL, "show", fmt.Sprint(done), "-o", "json").decode(t, &j)
	if j.Result["files"] != float64(3) {
		t.Errorf("show -o json of the done job = %+v, want its result", j)
	}
}
