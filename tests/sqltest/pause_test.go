package sqltest

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/skiplock/skiplock/tests/pgtest"
)

// TestPause: a paused queue hands out none of its jobs, by name or to queues => NULL, while
// everything else about its jobs keeps working; jobs_resume gives them back and wakes
// workers.
func TestPause(t *testing.T) {
	t.Parallel()

	t.Run("ReturnsWhetherThisCallChangedIt", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		if !queryOne[bool](t, b.Conn, "SELECT jobs_pause('a')") {
			t.Fatal("first jobs_pause returned false")
		}
		if queryOne[bool](t, b.Conn, "SELECT jobs_pause('a')") {
			t.Fatal("second jobs_pause returned true")
		}
		if !queryOne[bool](t, b.Conn, "SELECT paused FROM jobs_queues WHERE queue = 'a'") {
			t.Fatal("jobs_queues does not show queue a paused")
		}
		if !queryOne[bool](t, b.Conn, "SELECT jobs_resume('a')") {
			t.Fatal("first jobs_resume returned false")
		}
		if queryOne[bool](t, b.Conn, "SELECT jobs_resume('a')") {
			t.Fatal("second jobs_resume returned true")
		}
		if queryOne[bool](t, b.Conn, "SELECT jobs_resume('never_paused')") {
			t.Fatal("jobs_resume of a queue never paused returned true")
		}
		// Nothing is left set, so nothing is left in the table.
		if n := queryOne[int64](t, b.Conn, "SELECT count(*) FROM jobs_queues"); n != 0 {
			t.Fatalf("%d jobs_queues rows after resuming, want 0", n)
		}
	})

	t.Run("PausedQueueGivesNoJobs", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		a := enqueue(t, b.Conn, "queue => 'a'")
		enqueue(t, b.Conn, "queue => 'b', priority => 5")
		mustExec(t, b.Conn, "SELECT jobs_pause('a')")

		if jobs := claim(t, b.Conn, "w", 10, []string{"a"}, "1 minute"); len(jobs) != 0 {
			t.Fatalf("claim of the paused queue returned %d jobs", len(jobs))
		}
		for _, queues := range [][]string{nil, {"a", "b"}} {
			jobs := claim(t, b.Conn, "w", 10, queues, "1 minute")
			if len(jobs) != 1 || jobs[0].Queue != "b" {
				t.Fatalf("claim of %v returned %+v, want the one job of queue b", queues, jobs)
			}
			mustExec(t, b.Conn, "SELECT jobs_snooze($1, $2, now())", jobs[0].ID, jobs[0].Attempt)
		}

		// Enqueue still works while paused.
		enqueue(t, b.Conn, "queue => 'a'")
		if n := queryOne[int64](t, b.Conn, "SELECT count(*) FROM jobs WHERE queue = 'a' AND state = 'queued'"); n != 2 {
			t.Fatalf("%d queued jobs in queue a, want 2", n)
		}

		mustExec(t, b.Conn, "SELECT jobs_resume('a')")
		jobs := claim(t, b.Conn, "w", 10, []string{"a"}, "1 minute")
		if len(jobs) != 2 || jobs[0].ID != a {
			t.Fatalf("after resume, claim returned %+v, want both jobs of queue a starting with %d", jobs, a)
		}
	})

	t.Run("RunningJobsCarryOn", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		for range 4 {
			enqueue(t, b.Conn, "queue => 'a', max_attempts => 3")
		}
		jobs := claim(t, b.Conn, "w", 4, []string{"a"}, "1 second")
		if len(jobs) != 4 {
			t.Fatalf("claimed %d jobs, want 4", len(jobs))
		}
		mustExec(t, b.Conn, "SELECT jobs_pause('a')")

		if !queryOne[bool](t, b.Conn, "SELECT jobs_heartbeat($1, $2, '1 second')", jobs[0].ID, jobs[0].Attempt) {
			t.Fatal("heartbeat of a running job of a paused queue failed")
		}
		if !queryOne[bool](t, b.Conn, "SELECT jobs_complete($1, $2)", jobs[0].ID, jobs[0].Attempt) {
			t.Fatal("complete of a running job of a paused queue failed")
		}
		if s := queryOne[string](t, b.Conn, "SELECT jobs_fail($1, $2, 'boom', now())::text", jobs[1].ID, jobs[1].Attempt); s != "queued" {
			t.Fatalf("fail of a running job of a paused queue gave %q, want queued", s)
		}
		// Expired leases are still taken back, to queued, where the pause holds them.
		waitLeasesExpired(t, b.Conn)
		if n := queryOne[int32](t, b.Conn, "SELECT jobs_requeue_expired()"); n != 2 {
			t.Fatalf("jobs_requeue_expired took back %d jobs, want 2", n)
		}
		if jobs := claim(t, b.Conn, "w", 10, nil, "1 minute"); len(jobs) != 0 {
			t.Fatalf("claim returned %d jobs of the paused queue", len(jobs))
		}
	})

	t.Run("ResumeNotifies", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		l := listen(t, b)
		mustExec(t, b.Conn, "SELECT jobs_pause('a')")
		mustExec(t, b.Conn, "SELECT jobs_resume('a')")
		mustExec(t, b.Conn, "SELECT jobs_resume('a')") // not paused: no notification
		requirePayloads(t, l.drain(t, b), "a")
	})

	t.Run("SurvivesSettingLimits", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		enqueue(t, b.Conn, "queue => 'a'")
		mustExec(t, b.Conn, "SELECT jobs_pause('a')")
		mustExec(t, b.Conn, "SELECT jobs_set_concurrency('a', 5)")
		mustExec(t, b.Conn, "SELECT jobs_set_concurrency('a', NULL)")
		if jobs := claim(t, b.Conn, "w", 10, nil, "1 minute"); len(jobs) != 0 {
			t.Fatalf("claim returned %d jobs of the paused queue", len(jobs))
		}
		mustExec(t, b.Conn, "SELECT jobs_resume('a')")
		if jobs := claim(t, b.Conn, "w", 10, nil, "1 minute"); len(jobs) != 1 {
			t.Fatalf("claim returned %d jobs after resume, want 1", len(jobs))
		}
	})

	t.Run("BadInputChangesNothing", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		for _, call := range []string{"jobs_pause", "jobs_resume"} {
			for _, arg := range []string{"NULL", "''", "repeat('x', 201)"} {
				_, err := b.Conn.Exec(t.Context(), "SELECT "+call+"("+arg+")")
				pgErr := pgtest.RequirePgError(t, err, "22023")
				if pgErr.ColumnName != "queue" {
					t.Fatalf("%s(%s): error names %q, want queue", call, arg, pgErr.ColumnName)
				}
			}
		}
		if n := queryOne[int64](t, b.Conn, "SELECT count(*) FROM jobs_queues"); n != 0 {
			t.Fatalf("%d jobs_queues rows after bad calls, want 0", n)
		}
	})
}

// TestResumeDuringClaimKeepsLimits: a limited queue that is paused when a claim looks at its
// settings and resumed before the claim takes jobs gives that claim nothing (it did not lock
// the queue's row), instead of being claimed without its limit. Deterministic: the claim
// (queues NULL) waits on queue b's row, held by another session, while jobs_resume('a')
// commits.
func TestResumeDuringClaimKeepsLimits(t *testing.T) {
	t.Parallel()
	b := setup(t)
	mustExec(t, b.Conn, "SELECT jobs_set_concurrency('a', 1)")
	mustExec(t, b.Conn, "SELECT jobs_set_concurrency('b', 1)")
	mustExec(t, b.Conn, "SELECT jobs_pause('a')")
	for range 5 {
		enqueue(t, b.Conn, "queue => 'a'")
	}
	enqueue(t, b.Conn, "queue => 'b'")

	holder := b.Connect(t)
	tx, err := holder.Begin(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	mustExec(t, tx, "SELECT jobs_set_concurrency('b', 1)") // holds b's row

	claimer := b.Connect(t)
	pid := queryOne[int32](t, claimer, "SELECT pg_backend_pid()")
	var got []claimedJob
	var claimErr error
	done := make(chan struct{})
	go func() {
		defer close(done)
		got, claimErr = tryClaim(context.Background(), claimer, "w", 10, nil, "5 minutes")
	}()
	pgtest.WaitFor(t, 10*time.Second, "claim waiting on b's row", func() bool {
		return queryOne[bool](t, b.Conn,
			"SELECT coalesce(bool_or(wait_event_type = 'Lock'), false) FROM pg_stat_activity WHERE pid = $1", pid)
	})
	mustExec(t, b.Conn, "SELECT jobs_resume('a')")
	if err := tx.Commit(t.Context()); err != nil {
		t.Fatal(err)
	}
	<-done
	if claimErr != nil {
		t.Fatal(claimErr)
	}
	n := queryOne[int64](t, b.Conn, "SELECT count(*) FROM jobs WHERE queue = 'a' AND state = 'running'")
	t.Logf("claim returned %d jobs; %d jobs of queue a running (max_running 1)", len(got), n)
	if n > 1 {
		t.Errorf("queue a has %d running jobs, max_running is 1", n)
	}
}

// TestPauseResumeLoopKeepsLimits: the same with claims of queues => '{a}' only (what the Go
// driver's fetch loop does) while an operator pauses and resumes in a loop; the claimed jobs
// are never completed, so with the limit exact at most one ever runs.
func TestPauseResumeLoopKeepsLimits(t *testing.T) {
	t.Parallel()
	b := setup(t)
	mustExec(t, b.Conn, "SELECT jobs_set_concurrency('a', 1)")
	mustExec(t, b.Conn, "SELECT count(*) FROM jobs_enqueue_many(kinds => array_fill('k'::text, ARRAY[5000]), queues => array_fill('a'::text, ARRAY[5000]))")

	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	toggler := b.Connect(t)
	wg.Add(1)
	go func() {
		defer wg.Done()
		for ctx.Err() == nil {
			_, _ = toggler.Exec(ctx, "SELECT jobs_pause('a')")
			_, _ = toggler.Exec(ctx, "SELECT jobs_resume('a')")
		}
	}()
	for i := range 2 {
		conn := b.Connect(t)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				if _, err := tryClaim(ctx, conn, "w"+string(rune('0'+i)), 3, []string{"a"}, "5 minutes"); err != nil {
					return
				}
			}
		}()
	}
	wg.Wait()
	n := queryOne[int64](t, b.Conn, "SELECT count(*) FROM jobs WHERE queue = 'a' AND state = 'running'")
	t.Logf("%d jobs of queue a running (max_running 1)", n)
	if n > 1 {
		t.Errorf("queue a has %d running jobs, max_running is 1", n)
	}
}
