package sqltest

import "testing"

func TestCancelMany(t *testing.T) {
	t.Parallel()

	t.Run("CancelsQueuedJobsByDefault", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		q1 := enqueue(t, b.Conn, "queue => 'a'")
		q2 := enqueue(t, b.Conn, "queue => 'a', run_at => now() + interval '1 day'")
		other := enqueue(t, b.Conn, "queue => 'b'")
		running := enqueue(t, b.Conn, "queue => 'a'")
		mustExec(t, b.Conn, "UPDATE jobs SET run_at = now() - interval '1 hour' WHERE id = $1", running)
		claimOne(t, b.Conn, "w", "a", "1 hour")

		if n := queryOne[int32](t, b.Conn, "SELECT jobs_cancel_many(queue => 'a')"); n != 2 {
			t.Fatalf("jobs_cancel_many(queue a) = %d, want 2", n)
		}
		for id, want := range map[int64]string{q1: "cancelled", q2: "cancelled", other: "queued", running: "running"} {
			r := getJob(t, b.Conn, id)
			if r.State != want {
				t.Errorf("job %d is %s, want %s", id, r.State, want)
			}
			if want == "cancelled" && r.FinishedAt == nil {
				t.Errorf("cancelled job %d has no finished_at", id)
			}
		}
	})

	t.Run("RunningJobsHolderIsFencedOut", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		id := queryOne[int64](t, b.Conn, "SELECT jobs_enqueue('slow')")
		j := claimOne(t, b.Conn, "w", "", "1 hour")
		if n := queryOne[int32](t, b.Conn, "SELECT jobs_cancel_many(kind => 'slow', states => '{queued, running}')"); n != 1 {
			t.Fatalf("jobs_cancel_many(running) = %d, want 1", n)
		}
		r := getJob(t, b.Conn, id)
		if r.State != "cancelled" || r.LeaseExpiresAt != nil || r.FinishedAt == nil {
			t.Fatalf("job after cancel_many: %+v, want cancelled with the lease cleared", r)
		}
		requireFencedOut(t, callFenced(t, b, id, j.Attempt))
	})

	t.Run("AtMostMaxJobsQueuedFirst", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		for range 3 {
			enqueue(t, b.Conn, "")
		}
		claim(t, b.Conn, "w", 2, nil, "1 hour")
		for range 3 {
			enqueue(t, b.Conn, "")
		}
		if n := queryOne[int32](t, b.Conn, "SELECT jobs_cancel_many(states => '{running, queued}', max_jobs => 3)"); n != 3 {
			t.Fatalf("first call = %d, want 3", n)
		}
		if n := queryOne[int64](t, b.Conn, "SELECT count(*) FROM jobs WHERE state = 'running'"); n != 2 {
			t.Fatalf("%d running jobs after the first call, want 2: queued jobs go first", n)
		}
		if n := queryOne[int32](t, b.Conn, "SELECT jobs_cancel_many(states => '{running, queued}', max_jobs => 3)"); n != 3 {
			t.Fatalf("second call = %d, want 3", n)
		}
		if n := queryOne[int32](t, b.Conn, "SELECT jobs_cancel_many(states => '{running, queued}')"); n != 0 {
			t.Fatalf("third call = %d, want 0", n)
		}
	})

	t.Run("FinishedJobsAreLeftAlone", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		insertFinished(t, b.Conn, 3, "done", "q", "1 minute")
		insertFinished(t, b.Conn, 3, "dead", "q", "1 minute")
		if n := queryOne[int32](t, b.Conn, "SELECT jobs_cancel_many(ids => ARRAY[1, 4, 6], states => '{queued, running}')"); n != 0 {
			t.Fatalf("jobs_cancel_many of finished jobs = %d, want 0", n)
		}
	})
}
