package sqltest

import (
	"testing"

	"github.com/skiplock/skiplock/tests/internal/jobstest"
)

func TestCancel(t *testing.T) {
	t.Parallel()

	t.Run("QueuedBecomesCancelled", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		id := enqueue(t, b.Conn, "")
		if !queryOne[bool](t, b.Conn, "SELECT jobs_cancel($1)", id) {
			t.Fatal("jobs_cancel of a queued job returned false")
		}
		if r := getJob(t, b.Conn, id); r.State != "cancelled" || r.FinishedAt == nil || r.Attempts != 0 {
			t.Fatalf("job after cancel: %+v", r)
		}
		if jobs := claim(t, b.Conn, "w", 10, nil, "1 minute"); len(jobs) != 0 {
			t.Fatalf("claimed a cancelled job: %v", jobs)
		}
	})

	t.Run("RunningBecomesCancelledAndHolderIsFencedOut", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		id := enqueue(t, b.Conn, "")
		j := claimOne(t, b.Conn, "w", "", "1 minute")
		if !queryOne[bool](t, b.Conn, "SELECT jobs_cancel($1)", id) {
			t.Fatal("jobs_cancel of a running job returned false")
		}
		r := getJob(t, b.Conn, id)
		if r.State != "cancelled" || r.FinishedAt == nil || r.LeaseExpiresAt != nil {
			t.Fatalf("job after cancel: %+v", r)
		}
		requireFencedOut(t, callFenced(t, b, id, j.Attempt))
		if r := getJob(t, b.Conn, id); r.State != "cancelled" {
			t.Fatalf("holder's calls changed the cancelled job: %+v", r)
		}
		if n := queryOne[int32](t, b.Conn, "SELECT jobs_requeue_expired()"); n != 0 {
			t.Fatalf("jobs_requeue_expired() = %d, want 0", n)
		}
	})

	t.Run("FinishedOrUnknownReturnsFalse", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		done := enqueue(t, b.Conn, "")
		j := claimOne(t, b.Conn, "w", "", "1 minute")
		mustExec(t, b.Conn, "SELECT jobs_complete($1, $2)", done, j.Attempt)
		cancelled := enqueue(t, b.Conn, "")
		mustExec(t, b.Conn, "SELECT jobs_cancel($1)", cancelled)
		dead := enqueue(t, b.Conn, "max_attempts => 1")
		j = claimOne(t, b.Conn, "w", "", "1 minute")
		mustExec(t, b.Conn, "SELECT jobs_fail($1, $2, 'boom')", dead, j.Attempt)

		before := jobstest.TableChecksum(t, b.Conn)
		for _, id := range []int64{done, cancelled, dead, 999999} {
			if queryOne[bool](t, b.Conn, "SELECT jobs_cancel($1)", id) {
				t.Errorf("jobs_cancel(%d) returned true", id)
			}
		}
		if jobstest.TableChecksum(t, b.Conn) != before {
			t.Fatal("refused cancels changed the table")
		}
	})
}
