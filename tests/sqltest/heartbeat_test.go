package sqltest

import (
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/skiplock/skiplock/tests/pgtest"
)

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
