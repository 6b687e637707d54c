package sqltest

import (
	"slices"
	"testing"
	"time"
)

func TestSnooze(t *testing.T) {
	t.Parallel()

	t.Run("SpendsNoAttemptAndNeverReusesToken", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		id := enqueue(t, b.Conn, "max_attempts => 2")
		var tokens []int32
		for range 3 {
			j := claimOne(t, b.Conn, "w", "", "1 minute")
			tokens = append(tokens, j.Attempt)
			if !queryOne[bool](t, b.Conn, "SELECT jobs_snooze($1, $2, now())", id, j.Attempt) {
				t.Fatal("jobs_snooze returned false")
			}
			r := getJob(t, b.Conn, id)
			if r.State != "queued" || r.LeaseExpiresAt != nil || r.Attempts != j.Attempt {
				t.Fatalf("job after snooze: %+v", r)
			}
			requireFencedOut(t, callFenced(t, b, id, j.Attempt))
		}
		if !slices.Equal(tokens, []int32{1, 2, 3}) {
			t.Fatalf("attempt tokens over three claims = %v, want 1, 2, 3", tokens)
		}
		if r := getJob(t, b.Conn, id); r.MaxAttempts != 5 || len(r.Errors) != 0 {
			t.Fatalf("after three snoozes max_attempts = %d (want 2 + 3) and %d errors (want 0)", r.MaxAttempts, len(r.Errors))
		}

		// The two real attempts the job was enqueued with are still all there.
		j := claimOne(t, b.Conn, "w", "", "1 minute")
		if s := queryOne[string](t, b.Conn, "SELECT jobs_fail($1, $2, 'first failure', retry_at => now())::text", id, j.Attempt); s != "queued" {
			t.Fatalf("first real failure left the job %s, want queued", s)
		}
		j = claimOne(t, b.Conn, "w", "", "1 minute")
		if s := queryOne[string](t, b.Conn, "SELECT jobs_fail($1, $2, 'second failure')::text", id, j.Attempt); s != "dead" {
			t.Fatalf("second real failure left the job %s, want dead", s)
		}
	})

	t.Run("UntilRunAt", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		id := enqueue(t, b.Conn, "")
		j := claimOne(t, b.Conn, "w", "", "1 minute")
		at := time.Date(2999, 1, 1, 0, 0, 0, 0, time.UTC)
		if !queryOne[bool](t, b.Conn, "SELECT jobs_snooze($1, $2, $3)", id, j.Attempt, at) {
			t.Fatal("jobs_snooze returned false")
		}
		if r := getJob(t, b.Conn, id); !r.RunAt.Equal(at) {
			t.Fatalf("run_at = %s, want %s", r.RunAt, at)
		}
		if jobs := claim(t, b.Conn, "w", 10, nil, "1 minute"); len(jobs) != 0 {
			t.Fatalf("claimed a job snoozed into the future: %v", jobs)
		}
	})
}
