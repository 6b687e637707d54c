package sqltest

import "testing"

func TestDeleteMany(t *testing.T) {
	t.Parallel()

	t.Run("DeletesFinishedJobsOnly", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		insertFinished(t, b.Conn, 4, "done", "a", "1 minute")
		insertFinished(t, b.Conn, 2, "dead", "a", "1 minute")
		insertFinished(t, b.Conn, 2, "cancelled", "a", "1 minute")
		insertFinished(t, b.Conn, 3, "done", "b", "1 minute")
		enqueue(t, b.Conn, "queue => 'a'")
		enqueue(t, b.Conn, "queue => 'a'")
		claimOne(t, b.Conn, "w", "a", "1 hour")

		if n := queryOne[int32](t, b.Conn, "SELECT jobs_delete_many(queue => 'a', states => '{dead}')"); n != 2 {
			t.Fatalf("jobs_delete_many(a, dead) = %d, want 2", n)
		}
		if n := queryOne[int32](t, b.Conn, "SELECT jobs_delete_many(queue => 'a')"); n != 6 {
			t.Fatalf("jobs_delete_many(a) = %d, want 6 (4 done, 2 cancelled)", n)
		}
		if got := queryOne[string](t, b.Conn,
			"SELECT string_agg(queue || ':' || state, ' ' ORDER BY id) FROM jobs"); got != "b:done b:done b:done a:running a:queued" {
			t.Fatalf("jobs left: %s", got)
		}
		// Naming the live jobs by id deletes nothing.
		if n := queryOne[int32](t, b.Conn, "SELECT jobs_delete_many(ids => ARRAY[12, 13])"); n != 0 {
			t.Fatalf("jobs_delete_many of live jobs = %d, want 0", n)
		}
	})

	t.Run("AtMostMaxJobsPerCall", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		insertFinished(t, b.Conn, 7, "done", "q", "1 minute")
		for _, want := range []int32{3, 3, 1, 0} {
			if n := queryOne[int32](t, b.Conn, "SELECT jobs_delete_many(max_jobs => 3)"); n != want {
				t.Fatalf("jobs_delete_many(max_jobs 3) = %d, want %d", n, want)
			}
		}
	})
}
