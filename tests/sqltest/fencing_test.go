package sqltest

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/skiplock/skiplock/tests/internal/jobstest"
	"github.com/skiplock/skiplock/tests/pgtest"
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

func TestFencing(t *testing.T) {
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

func TestHeartbeat(t *testing.T) {
	t.Parallel()

	t.Run("ExtendsLease", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		id := enqueue(t, b.Conn, "")
		j := claimOne(t, b.Conn, "w", "", "300 milliseconds")

		tx, err := b.Conn.Begin(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if !queryOne[bool](t, tx, "SELECT jobs_heartbeat($1, $2, '1 hour')", id, j.Attempt) {
			t.Fatal("jobs_heartbeat returned false")
		}
		now := queryOne[time.Time](t, tx, "SELECT now()")
		if err := tx.Commit(t.Context()); err != nil {
			t.Fatal(err)
		}
		r := getJob(t, b.Conn, id)
		if r.LeaseExpiresAt == nil || !r.LeaseExpiresAt.Equal(now.Add(time.Hour)) {
			t.Fatalf("lease_expires_at = %v, want now() + 1 hour = %s", r.LeaseExpiresAt, now.Add(time.Hour))
		}

		// Past the original lease, the job is still the holder's.
		pgtest.WaitFor(t, 10*time.Second, "the original lease to pass", func() bool {
			return queryOne[bool](t, b.Conn, "SELECT clock_timestamp() > $1", j.LeaseExpiresAt)
		})
		if n := queryOne[int32](t, b.Conn, "SELECT jobs_requeue_expired()"); n != 0 {
			t.Fatalf("jobs_requeue_expired() = %d after the heartbeat, want 0", n)
		}
		if !queryOne[bool](t, b.Conn, "SELECT jobs_complete($1, $2)", id, j.Attempt) {
			t.Fatal("jobs_complete after heartbeat returned false")
		}
	})

	t.Run("ManyReturnsOnlyHeldIDs", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		for range 4 {
			enqueue(t, b.Conn, "")
		}
		jobs := claim(t, b.Conn, "w", 4, nil, "1 minute")
		if len(jobs) != 4 {
			t.Fatalf("claimed %d jobs, want 4", len(jobs))
		}
		held, cancelled, wrongAttempt, completed := jobs[0], jobs[1], jobs[2], jobs[3]
		mustExec(t, b.Conn, "SELECT jobs_cancel($1)", cancelled.ID)
		mustExec(t, b.Conn, "SELECT jobs_complete($1, $2)", completed.ID, completed.Attempt)

		ids := []int64{held.ID, cancelled.ID, wrongAttempt.ID, completed.ID, 999999, held.ID}
		attempts := []int32{held.Attempt, cancelled.Attempt, wrongAttempt.Attempt + 1, completed.Attempt, 1, held.Attempt}
		tx, err := b.Conn.Begin(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		got := queryList[int64](t, tx, "SELECT id FROM jobs_heartbeat_many($1, $2, '2 hours') WHERE extended", ids, attempts)
		if n := queryOne[int](t, tx, "SELECT count(*) FROM jobs_heartbeat_many($1, $2, '2 hours') WHERE NOT extended", ids, attempts); n != 0 {
			t.Errorf("%d jobs reported held but not extended, with no row locked by another session", n)
		}
		now := queryOne[time.Time](t, tx, "SELECT now()")
		if err := tx.Commit(t.Context()); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got, []int64{held.ID}) {
			t.Fatalf("jobs_heartbeat_many returned %v, want only the held job [%d]", got, held.ID)
		}
		if r := getJob(t, b.Conn, held.ID); !r.LeaseExpiresAt.Equal(now.Add(2 * time.Hour)) {
			t.Fatalf("held job's lease_expires_at = %v, want %s", r.LeaseExpiresAt, now.Add(2*time.Hour))
		}
		if r := getJob(t, b.Conn, wrongAttempt.ID); !r.LeaseExpiresAt.Equal(wrongAttempt.LeaseExpiresAt) {
			t.Fatalf("a job not held at the quoted attempt had its lease changed to %v", r.LeaseExpiresAt)
		}
	})
}

// TestHeartbeatManySkipsLockedRows: a running job whose row another session has locked
// (an operator's open transaction, say) does not hold up the heartbeat of the others. It
// comes back held but not extended, with its lease untouched, and is extended again once
// the lock is gone.
func TestHeartbeatManySkipsLockedRows(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for range 3 {
		enqueue(t, b.Conn, "")
	}
	jobs := claim(t, b.Conn, "w", 3, nil, "1 minute")
	if len(jobs) != 3 {
		t.Fatalf("claimed %d jobs, want 3", len(jobs))
	}
	ids := []int64{jobs[0].ID, jobs[1].ID, jobs[2].ID}
	attempts := []int32{jobs[0].Attempt, jobs[1].Attempt, jobs[2].Attempt}
	locked := jobs[1]

	// Without the skip, the calls below would wait for the locker until statement_timeout.
	mustExec(t, b.Conn, "SET statement_timeout = '5s'")
	type result struct {
		ID       int64
		Extended bool
	}
	beat := func() []result {
		t.Helper()
		rows, err := b.Conn.Query(t.Context(), "SELECT id, extended FROM jobs_heartbeat_many($1, $2, '2 hours') ORDER BY id", ids, attempts)
		if err != nil {
			t.Fatal(err)
		}
		got, err := pgx.CollectRows(rows, pgx.RowToStructByPos[result])
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	locker := b.Connect(t)
	lock := func() pgx.Tx {
		t.Helper()
		tx, err := locker.Begin(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		mustExec(t, tx, "SELECT 1 FROM jobs WHERE id = $1 FOR UPDATE", locked.ID)
		return tx
	}

	tx := lock()
	got := beat()
	want := []result{{jobs[0].ID, true}, {locked.ID, false}, {jobs[2].ID, true}}
	if !slices.Equal(got, want) {
		t.Fatalf("jobs_heartbeat_many with job %d locked elsewhere = %v, want %v", locked.ID, got, want)
	}
	if r := getJob(t, b.Conn, locked.ID); !r.LeaseExpiresAt.Equal(locked.LeaseExpiresAt) {
		t.Fatalf("the locked job's lease changed from %v to %v", locked.LeaseExpiresAt, r.LeaseExpiresAt)
	}
	if r := getJob(t, b.Conn, jobs[0].ID); !r.LeaseExpiresAt.After(jobs[0].LeaseExpiresAt.Add(time.Hour)) {
		t.Fatalf("an unlocked job's lease is %v, want it extended by about 2 hours", r.LeaseExpiresAt)
	}

	// The lock is released: the next call extends all three.
	if err := tx.Rollback(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got, want := beat(), []result{{jobs[0].ID, true}, {locked.ID, true}, {jobs[2].ID, true}}; !slices.Equal(got, want) {
		t.Fatalf("after the lock on job %d was released: jobs_heartbeat_many = %v, want %v", locked.ID, got, want)
	}

	// The locker cancels the job and commits: it is no longer held, so it is left out.
	tx = lock()
	mustExec(t, tx, "SELECT jobs_cancel($1)", locked.ID)
	if err := tx.Commit(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got, want := beat(), []result{{jobs[0].ID, true}, {jobs[2].ID, true}}; !slices.Equal(got, want) {
		t.Fatalf("after the locker cancelled job %d: jobs_heartbeat_many = %v, want %v", locked.ID, got, want)
	}
}

// TestCompleteMany covers the batch complete's own promises.
func TestCompleteMany(t *testing.T) {
	t.Parallel()

	t.Run("ReturnsOnlyCompletedIDs", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		for range 3 {
			enqueue(t, b.Conn, "")
		}
		jobs := claim(t, b.Conn, "w", 3, nil, "1 minute")
		ids := []int64{jobs[0].ID, jobs[1].ID, jobs[2].ID, jobs[0].ID, 999999}
		attempts := []int32{jobs[0].Attempt, jobs[1].Attempt + 1, jobs[2].Attempt, jobs[0].Attempt, 1}
		got := queryList[int64](t, b.Conn, "SELECT * FROM jobs_complete_many($1, $2) ORDER BY 1", ids, attempts)
		if want := []int64{jobs[0].ID, jobs[2].ID}; !slices.Equal(got, want) {
			t.Fatalf("jobs_complete_many returned %v, want %v (duplicate pair once, wrong attempt and unknown id left out)", got, want)
		}
		if r := getJob(t, b.Conn, jobs[1].ID); r.State != "running" {
			t.Fatalf("job with the wrong attempt is %s, want running", r.State)
		}
		if got := queryOne[string](t, b.Conn, "SELECT string_agg(state::text, ',' ORDER BY id) FROM jobs"); !strings.EqualFold(got, "done,running,done") {
			t.Fatalf("states = %s", got)
		}
	})
}
