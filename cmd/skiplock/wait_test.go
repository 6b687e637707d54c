package main

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/skiplock/skiplock/tests/pgtest"
)

// claimOne claims the job id (the only ready one of its queue) and returns its attempt.
func claimOne(t *testing.T, db *pgtest.TestDB, id int64, queue string) int32 {
	t.Helper()
	var got int64
	var attempt int32
	if err := db.Conn.QueryRow(t.Context(), "SELECT id, attempt FROM jobs_claim('w', 1, ARRAY[$1])", queue).Scan(&got, &attempt); err != nil {
		t.Fatal(err)
	}
	if got != id {
		t.Fatalf("claimed job %d, want %d", got, id)
	}
	return attempt
}

// waitingOnJobsResult waits until a session of the test's database other than the test's own
// has read jobs_result and sits idle: skiplock wait, listening, between two reads.
func waitingOnJobsResult(t *testing.T, db *pgtest.TestDB) {
	t.Helper()
	pgtest.WaitFor(t, 30*time.Second, "skiplock wait to read the job and wait", func() bool {
		return pgtest.QueryOne[int64](t, db.Conn, `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND pid <> pg_backend_pid() AND state = 'idle'
			  AND query LIKE '%jobs_result%'`) > 0
	})
}

func TestWait(t *testing.T) {
	t.Parallel()

	t.Run("WokenByJobsFinished", func(t *testing.T) {
		t.Parallel()
		db := setup(t)
		id := pgtest.QueryOne[int64](t, db.Conn, "SELECT jobs_enqueue('k', queue => 'n', notify_finished => true)")
		attempt := claimOne(t, db, id, "n")
		done := make(chan result, 1)
		// A poll of an hour: only the notification can end the wait within the timeout.
		go func() { done <- cli(t, db.URL, "wait", fmt.Sprint(id), "--poll", "1h", "--timeout", "30s") }()
		waitingOnJobsResult(t, db)
		start := time.Now()
		pgtest.MustExec(t, db.Conn, `SELECT jobs_complete($1, $2, '{"rows": [1, 2]}')`, id, attempt)
		r := <-done
		if out := r.ok(t); out != "{\n  \"rows\": [\n    1,\n    2\n  ]\n}\n" {
			t.Fatalf("wait printed %q, want the result indented", out)
		}
		if d := time.Since(start); d > 10*time.Second {
			t.Errorf("wait ended %v after the job, want at once (woken by jobs_finished)", d)
		}
	})

	t.Run("PollsAJobWithoutNotification", func(t *testing.T) {
		t.Parallel()
		db := setup(t)
		id := pgtest.QueryOne[int64](t, db.Conn, "SELECT jobs_enqueue('k', queue => 'p')")
		attempt := claimOne(t, db, id, "p")
		done := make(chan result, 1)
		go func() {
			done <- cli(t, db.URL, "wait", fmt.Sprint(id), "--poll", "50ms", "--timeout", "30s", "-o", "json")
		}()
		waitingOnJobsResult(t, db)
		pgtest.MustExec(t, db.Conn, `SELECT jobs_complete($1, $2)`, id, attempt)
		var got map[string]any
		(<-done).decode(t, &got)
		if got["id"] != float64(id) || got["state"] != "done" || got["result"] != nil || got["last_error"] != nil {
			t.Fatalf("wait -o json = %v", got)
		}
	})

	t.Run("DeadAndCancelledFail", func(t *testing.T) {
		t.Parallel()
		db := setup(t)
		dead := deadJob(t, db, "d", "k", "disk full")
		r := cli(t, db.URL, "wait", fmt.Sprint(dead))
		r.fails(t, exitFailed, fmt.Sprintf("job %d ended dead: disk full", dead))
		r = cli(t, db.URL, "wait", fmt.Sprint(dead), "-o", "json")
		if r.code != exitFailed || !strings.Contains(r.stdout, `"state": "dead"`) || !strings.Contains(r.stdout, `"last_error": "disk full"`) {
			t.Fatalf("wait -o json of a dead job: exit %d, stdout %q", r.code, r.stdout)
		}
		cancelled := pgtest.QueryOne[int64](t, db.Conn, "SELECT jobs_enqueue('k', queue => 'c')")
		pgtest.MustExec(t, db.Conn, "SELECT jobs_cancel($1)", cancelled)
		cli(t, db.URL, "wait", fmt.Sprint(cancelled)).fails(t, exitFailed, "ended cancelled")
	})

	t.Run("TimeoutUnknownAndUsage", func(t *testing.T) {
		t.Parallel()
		db := setup(t)
		id := pgtest.QueryOne[int64](t, db.Conn, "SELECT jobs_enqueue('k', run_at => now() + interval '1 hour')")
		start := time.Now()
		cli(t, db.URL, "wait", fmt.Sprint(id), "--timeout", "300ms", "--poll", "100ms").fails(t, exitTimeout,
			fmt.Sprintf("job %d still queued after 300ms", id))
		if d := time.Since(start); d < 300*time.Millisecond {
			t.Errorf("wait timed out after %v, before its --timeout", d)
		}
		cli(t, db.URL, "wait", "999").fails(t, exitNotFound, "no job 999")
		cli(t, db.URL, "wait").fails(t, exitUsage, "want one job ID")
		cli(t, db.URL, "wait", "1", "--poll", "0s").fails(t, exitUsage, "--poll must be positive")
		cli(t, db.URL, "wait", "1", "--timeout", "-1s").fails(t, exitUsage, "--timeout must not be negative")
	})
}
