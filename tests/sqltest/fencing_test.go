package sqltest

import (
	"testing"

	"github.com/skiplock/skiplock/tests/internal/jobstest"
)

// fenceResults is what each fenced function returned to a caller quoting (id, attempt).
type fenceResults struct {
	complete     bool
	fail         *string
	heartbeat    bool
	snooze       bool
	completeMany []int64
	heartbeatMny []int64
}

// callFenced calls every fenced function as the holder of (id, attempt) would.
func callFenced(t *testing.T, b *testBundle, id int64, attempt int32) fenceResults {
	t.Helper()
	var r fenceResults
	// Each in its own statement and transaction; fail, heartbeat and snooze go first since a
	// successful complete would end the job.
	r.fail = queryOne[*string](t, b.Conn, "SELECT jobs_fail($1, $2, 'stale worker failed')::text", id, attempt)
	r.heartbeat = queryOne[bool](t, b.Conn, "SELECT jobs_heartbeat($1, $2, '1 hour')", id, attempt)
	r.snooze = queryOne[bool](t, b.Conn, "SELECT jobs_snooze($1, $2, now())", id, attempt)
	r.heartbeatMny = queryList[int64](t, b.Conn, "SELECT * FROM jobs_heartbeat_many($1, $2)", []int64{id}, []int32{attempt})
	r.completeMany = queryList[int64](t, b.Conn, "SELECT * FROM jobs_complete_many($1, $2)", []int64{id}, []int32{attempt})
	r.complete = queryOne[bool](t, b.Conn, "SELECT jobs_complete($1, $2)", id, attempt)
	return r
}

func requireFencedOut(t *testing.T, r fenceResults) {
	t.Helper()
	if r.complete || r.fail != nil || r.heartbeat || r.snooze || len(r.completeMany) != 0 || len(r.heartbeatMny) != 0 {
		t.Fatalf("stale holder was not fenced out: complete=%v fail=%v heartbeat=%v snooze=%v complete_many=%v heartbeat_many=%v",
			r.complete, r.fail, r.heartbeat, r.snooze, r.completeMany, r.heartbeatMny)
	}
}

// TestFencedCalls: complete, fail, heartbeat, snooze and their batch forms refuse a caller
// that no longer holds the job at the attempt it quotes. (driver.TestFencing checks the same
// promise through the driver.)
func TestFencedCalls(t *testing.T) {
	t.Parallel()

	t.Run("ExpiredAndReclaimedHolderIsRefused", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		id := enqueue(t, b.Conn, "")
		a := claimOne(t, b.Conn, "worker-a", "", "100 milliseconds")
		if a.Attempt != 1 {
			t.Fatalf("first claim got attempt %d, want 1", a.Attempt)
		}
		waitLeasesExpired(t, b.Conn)
		if n := queryOne[int32](t, b.Conn, "SELECT jobs_requeue_expired()"); n != 1 {
			t.Fatalf("jobs_requeue_expired() = %d, want 1", n)
		}
		r := getJob(t, b.Conn, id)
		if r.State != "queued" || r.Attempts != 1 || r.LeaseExpiresAt != nil {
			t.Fatalf("job after requeue: %+v", r)
		}
		if r.LastError == nil || !containsAll(*r.LastError, "lease expired", "worker-a") {
			t.Fatalf("last_error = %v, want it to say the lease expired and name worker-a", r.LastError)
		}
		if len(r.Errors) != 1 || r.Errors[0].Attempt != 1 || r.Errors[0].Worker == nil || *r.Errors[0].Worker != "worker-a" ||
			!containsAll(r.Errors[0].Error, "lease expired", "worker-a") {
			t.Fatalf("errors history = %+v, want one entry for worker-a's attempt 1", r.Errors)
		}

		bJob := claimOne(t, b.Conn, "worker-b", "", "1 minute")
		if bJob.ID != id || bJob.Attempt != 2 {
			t.Fatalf("second claim got %+v, want job %d at attempt 2", bJob, id)
		}

		requireFencedOut(t, callFenced(t, b, id, a.Attempt))
		if r := getJob(t, b.Conn, id); r.State != "running" || *r.LeaseHolder != "worker-b" || r.Attempts != 2 || len(r.Errors) != 1 {
			t.Fatalf("worker-a's refused calls changed the job: %+v", r)
		}
		if !queryOne[bool](t, b.Conn, "SELECT jobs_complete($1, $2)", id, bJob.Attempt) {
			t.Fatal("worker-b's jobs_complete returned false")
		}
		if r := getJob(t, b.Conn, id); r.State != "done" || r.FinishedAt == nil {
			t.Fatalf("job after worker-b completed: %+v", r)
		}
	})

	t.Run("ExpiredButNotRequeuedHolderMayComplete", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		id := enqueue(t, b.Conn, "")
		a := claimOne(t, b.Conn, "worker-a", "", "100 milliseconds")
		waitLeasesExpired(t, b.Conn)
		if !queryOne[bool](t, b.Conn, "SELECT jobs_complete($1, $2)", id, a.Attempt) {
			t.Fatal("jobs_complete after lease expiry, with nobody taking over, returned false")
		}
		if n := queryOne[int32](t, b.Conn, "SELECT jobs_requeue_expired()"); n != 0 {
			t.Fatalf("jobs_requeue_expired() = %d after the job completed, want 0", n)
		}
	})

	t.Run("WrongAttemptIsRefused", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		id := enqueue(t, b.Conn, "")
		j := claimOne(t, b.Conn, "w", "", "1 minute")
		before := jobstest.TableChecksum(t, b.Conn)
		for _, attempt := range []int32{j.Attempt - 1, j.Attempt + 1} {
			requireFencedOut(t, callFenced(t, b, id, attempt))
		}
		if jobstest.TableChecksum(t, b.Conn) != before {
			t.Fatal("calls with the wrong attempt changed the table")
		}
	})

	t.Run("FinishedJobIsRefused", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		id := enqueue(t, b.Conn, "")
		j := claimOne(t, b.Conn, "w", "", "1 minute")
		if !queryOne[bool](t, b.Conn, "SELECT jobs_complete($1, $2)", id, j.Attempt) {
			t.Fatal("jobs_complete returned false")
		}
		before := jobstest.TableChecksum(t, b.Conn)
		requireFencedOut(t, callFenced(t, b, id, j.Attempt))
		if jobstest.TableChecksum(t, b.Conn) != before {
			t.Fatal("calls on a done job changed the table")
		}
	})
}
