package sqltest

import (
	"testing"

	"github.com/skiplock/skiplock/tests/internal/jobstest"
)

func TestRetry(t *testing.T) {
	t.Parallel()

	t.Run("DeadJobGetsAnotherAttempt", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		id := enqueue(t, b.Conn, "max_attempts => 2")
		for attempt := int32(1); attempt <= 2; attempt++ {
			j := claimOne(t, b.Conn, "w", "", "1 minute")
			mustExec(t, b.Conn, "SELECT jobs_fail($1, $2, 'boom', retry_at => now())", id, j.Attempt)
		}
		if r := getJob(t, b.Conn, id); r.State != "dead" {
			t.Fatalf("job is %s after two failures, want dead", r.State)
		}

		if !queryOne[bool](t, b.Conn, "SELECT jobs_retry($1)", id) {
			t.Fatal("jobs_retry of a dead job returned false")
		}
		r := getJob(t, b.Conn, id)
		if r.State != "queued" || r.Attempts != 2 || r.MaxAttempts != 3 || r.FinishedAt != nil || len(r.Errors) != 2 ||
			r.LastError == nil || *r.LastError != "boom" {
			t.Fatalf("job after retry: %+v, want queued, attempts 2, max_attempts 3, history kept", r)
		}
		j := claimOne(t, b.Conn, "w", "", "1 minute")
		if j.ID != id || j.Attempt != 3 {
			t.Fatalf("claim after retry got %+v, want job %d at a new attempt 3", j, id)
		}
		// The old tokens stay dead.
		requireFencedOut(t, callFenced(t, b, id, 2))
		// And the extra attempt is real: failing it makes the job dead again, not queued.
		if state := queryOne[string](t, b.Conn, "SELECT jobs_fail($1, $2, 'boom again')::text", id, j.Attempt); state != "dead" {
			t.Fatalf("jobs_fail of the retried attempt = %s, want dead", state)
		}
	})

	t.Run("CancelledJobIsQueuedAgain", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		id := enqueue(t, b.Conn, "max_attempts => 5")
		j := claimOne(t, b.Conn, "w", "", "1 minute")
		mustExec(t, b.Conn, "SELECT jobs_cancel($1)", id)
		if !queryOne[bool](t, b.Conn, "SELECT jobs_retry($1)", id) {
			t.Fatal("jobs_retry of a cancelled job returned false")
		}
		r := getJob(t, b.Conn, id)
		if r.State != "queued" || r.Attempts != 1 || r.MaxAttempts != 5 || r.FinishedAt != nil {
			t.Fatalf("job after retry: %+v, want queued with attempts 1 and max_attempts 5", r)
		}
		j2 := claimOne(t, b.Conn, "w", "", "1 minute")
		if j2.ID != id || j2.Attempt != j.Attempt+1 {
			t.Fatalf("claim after retry got %+v, want attempt %d", j2, j.Attempt+1)
		}
		requireFencedOut(t, callFenced(t, b, id, j.Attempt))
	})

	t.Run("OtherStatesReturnFalse", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		// Claims take the oldest first: running, then done; queued stays queued.
		running := enqueue(t, b.Conn, "")
		done := enqueue(t, b.Conn, "")
		queued := enqueue(t, b.Conn, "")
		mustExec(t, b.Conn, "SELECT jobs_claim('w', 1, lease => '1 minute')")
		mustExec(t, b.Conn, "SELECT jobs_claim('w', 1, lease => '1 minute')")
		j := getJob(t, b.Conn, done)
		mustExec(t, b.Conn, "SELECT jobs_complete($1, $2)", done, j.Attempts)
		if j := getJob(t, b.Conn, running); j.State != "running" {
			t.Fatalf("setup: job %d is %s", running, j.State)
		}

		before := jobstest.TableChecksum(t, b.Conn)
		for _, id := range []int64{queued, running, done, 999999} {
			if queryOne[bool](t, b.Conn, "SELECT jobs_retry($1)", id) {
				t.Errorf("jobs_retry(%d) returned true", id)
			}
		}
		if jobstest.TableChecksum(t, b.Conn) != before {
			t.Fatal("refused retries changed the table")
		}
	})
}
