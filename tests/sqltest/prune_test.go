package sqltest

import (
	"slices"
	"testing"
)

func TestPrune(t *testing.T) {
	t.Parallel()

	// finishJob makes a job in the given final state and backdates its finished_at.
	finishJob := func(t *testing.T, b *testBundle, state string, age string) int64 {
		t.Helper()
		id := enqueue(t, b.Conn, "queue => 'p', max_attempts => 1")
		j := claimOne(t, b.Conn, "w", "p", "1 hour")
		switch state {
		case "done":
			mustExec(t, b.Conn, "SELECT jobs_complete($1, $2)", id, j.Attempt)
		case "dead":
			mustExec(t, b.Conn, "SELECT jobs_fail($1, $2, 'boom')", id, j.Attempt)
		case "cancelled":
			mustExec(t, b.Conn, "SELECT jobs_cancel($1)", id)
		}
		mustExec(t, b.Conn, "UPDATE jobs SET finished_at = now() - $2::interval WHERE id = $1", id, age)
		return id
	}
	remaining := func(t *testing.T, b *testBundle) []int64 {
		return queryList[int64](t, b.Conn, "SELECT id FROM jobs ORDER BY id")
	}

	t.Run("DeletesOnlyFinishedOlderThanRetention", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		finishJob(t, b, "done", "8 days")
		newDone := finishJob(t, b, "done", "6 days")
		finishJob(t, b, "cancelled", "30 days")
		oldDead := finishJob(t, b, "dead", "30 days")
		queued := enqueue(t, b.Conn, "queue => 'p', run_at => '2000-01-01 00:00:00Z'")
		running := enqueue(t, b.Conn, "queue => 'r', run_at => '2000-01-01 00:00:00Z'")
		claimOne(t, b.Conn, "w", "r", "1 hour")

		if n := queryOne[int32](t, b.Conn, "SELECT jobs_prune('7 days')"); n != 2 {
			t.Fatalf("jobs_prune('7 days') = %d, want 2 (old done and old cancelled)", n)
		}
		if got, want := remaining(t, b), []int64{newDone, oldDead, queued, running}; !slices.Equal(got, want) {
			t.Fatalf("left %v, want %v", got, want)
		}
		if n := queryOne[int32](t, b.Conn, "SELECT jobs_prune('7 days', include_dead => true)"); n != 1 {
			t.Fatalf("jobs_prune with include_dead = %d, want 1", n)
		}
		if got, want := remaining(t, b), []int64{newDone, queued, running}; !slices.Equal(got, want) {
			t.Fatalf("left %v, want %v", got, want)
		}
		// Retention 0 takes every finished job, never a live one.
		if n := queryOne[int32](t, b.Conn, "SELECT jobs_prune('0', include_dead => true)"); n != 1 {
			t.Fatalf("jobs_prune('0') = %d, want 1", n)
		}
		if got, want := remaining(t, b), []int64{queued, running}; !slices.Equal(got, want) {
			t.Fatalf("left %v, want %v", got, want)
		}
	})

	t.Run("MaxJobsTakesLowestIDFirst", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		var ids []int64
		for _, age := range []string{"10 days", "12 days", "1 hour", "11 days", "13 days"} {
			ids = append(ids, finishJob(t, b, "done", age))
		}
		if n := queryOne[int32](t, b.Conn, "SELECT jobs_prune('1 day', max_jobs => 2)"); n != 2 {
			t.Fatalf("jobs_prune(max_jobs => 2) = %d, want 2", n)
		}
		if got, want := remaining(t, b), []int64{ids[2], ids[3], ids[4]}; !slices.Equal(got, want) {
			t.Fatalf("left %v, want %v", got, want)
		}
		// The next call skips the job inside the retention period.
		if n := queryOne[int32](t, b.Conn, "SELECT jobs_prune('1 day', max_jobs => 2)"); n != 2 {
			t.Fatalf("second jobs_prune = %d, want 2", n)
		}
		if n := queryOne[int32](t, b.Conn, "SELECT jobs_prune('1 day', max_jobs => 2)"); n != 0 {
			t.Fatalf("third jobs_prune = %d, want 0", n)
		}
		if got, want := remaining(t, b), []int64{ids[2]}; !slices.Equal(got, want) {
			t.Fatalf("left %v, want %v", got, want)
		}
	})
}
