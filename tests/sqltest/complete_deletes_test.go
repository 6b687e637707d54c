package sqltest

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// TestCompleteDeletesWithZeroRetention: with jobs_settings.done_retention 0, jobs_complete and
// jobs_complete_many delete the job instead of keeping it done, and stay fenced: a deleted
// job is unknown, so no caller can complete it again.
func TestCompleteDeletesWithZeroRetention(t *testing.T) {
	t.Parallel()

	t.Run("CompleteDeletesAndStaysFenced", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		mustExec(t, b.Conn, "UPDATE jobs_settings SET done_retention = '0'")
		id := enqueue(t, b.Conn, "")
		j := claimOne(t, b.Conn, "w", "", "1 hour")
		if ok := queryOne[bool](t, b.Conn, "SELECT jobs_complete($1, $2)", id, j.Attempt+1); ok {
			t.Fatal("jobs_complete with a wrong attempt returned true")
		}
		if ok := queryOne[bool](t, b.Conn, "SELECT jobs_complete($1, $2)", id, j.Attempt); !ok {
			t.Fatal("jobs_complete returned false for the holder")
		}
		if n := queryOne[int](t, b.Conn, "SELECT count(*) FROM jobs WHERE id = $1", id); n != 0 {
			t.Fatalf("job %d still has %d rows, want it deleted", id, n)
		}
		if ok := queryOne[bool](t, b.Conn, "SELECT jobs_complete($1, $2)", id, j.Attempt); ok {
			t.Fatal("a second jobs_complete of a deleted job returned true")
		}
		if got := queryList[int64](t, b.Conn, "SELECT * FROM jobs_complete_many(ARRAY[$1::bigint], ARRAY[$2::int])", id, j.Attempt); len(got) != 0 {
			t.Fatalf("jobs_complete_many of a deleted job returned %v", got)
		}
		if n := queryOne[int](t, b.Conn, "SELECT count(*) FROM jobs_get($1)", id); n != 0 {
			t.Fatalf("jobs_get of a deleted job returned %d rows, want none (as for a pruned job)", n)
		}
	})

	t.Run("StaleHolderGetsFalse", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		mustExec(t, b.Conn, "UPDATE jobs_settings SET done_retention = '0'")
		id := enqueue(t, b.Conn, "")
		stale := claimOne(t, b.Conn, "w1", "", "1 millisecond")
		waitLeasesExpired(t, b.Conn)
		if n := queryOne[int](t, b.Conn, "SELECT jobs_requeue_expired()"); n != 1 {
			t.Fatalf("jobs_requeue_expired() = %d, want 1", n)
		}
		fresh := claimOne(t, b.Conn, "w2", "", "1 hour")
		if ok := queryOne[bool](t, b.Conn, "SELECT jobs_complete($1, $2)", id, stale.Attempt); ok {
			t.Fatal("the stale holder's jobs_complete returned true")
		}
		if r := getJob(t, b.Conn, id); r.State != "running" || r.Attempts != fresh.Attempt {
			t.Fatalf("after the stale completion the job is %s at attempt %d, want running at %d", r.State, r.Attempts, fresh.Attempt)
		}
		if ok := queryOne[bool](t, b.Conn, "SELECT jobs_complete($1, $2)", id, fresh.Attempt); !ok {
			t.Fatal("the current holder's jobs_complete returned false")
		}
	})

	t.Run("CompleteManyDeletesOnlyHeldPairs", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		mustExec(t, b.Conn, "UPDATE jobs_settings SET done_retention = '0'")
		for range 3 {
			enqueue(t, b.Conn, "")
		}
		jobs := claim(t, b.Conn, "w", 3, nil, "1 minute")
		ids := []int64{jobs[0].ID, jobs[1].ID, jobs[2].ID, jobs[0].ID, 999999}
		attempts := []int32{jobs[0].Attempt, jobs[1].Attempt + 1, jobs[2].Attempt, jobs[0].Attempt, 1}
		got := queryList[int64](t, b.Conn, "SELECT * FROM jobs_complete_many($1, $2) ORDER BY 1", ids, attempts)
		if want := []int64{jobs[0].ID, jobs[2].ID}; !slices.Equal(got, want) {
			t.Fatalf("jobs_complete_many returned %v, want %v", got, want)
		}
		left := queryList[int64](t, b.Conn, "SELECT id FROM jobs ORDER BY id")
		if want := []int64{jobs[1].ID}; !slices.Equal(left, want) {
			t.Fatalf("rows left %v, want only the job with the wrong attempt %v", left, want)
		}
		if r := getJob(t, b.Conn, jobs[1].ID); r.State != "running" {
			t.Fatalf("job with the wrong attempt is %s, want running", r.State)
		}
	})

	t.Run("OtherRetentionKeepsDone", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		mustExec(t, b.Conn, "UPDATE jobs_settings SET done_retention = '1 second'")
		id := enqueue(t, b.Conn, "")
		j := claimOne(t, b.Conn, "w", "", "1 hour")
		if ok := queryOne[bool](t, b.Conn, "SELECT jobs_complete($1, $2)", id, j.Attempt); !ok {
			t.Fatal("jobs_complete returned false")
		}
		if r := getJob(t, b.Conn, id); r.State != "done" {
			t.Fatalf("job is %s, want done (kept: the retention is not 0)", r.State)
		}
	})

	// A foreign key to jobs without ON DELETE would refuse the delete: completion keeps the
	// row as done instead of failing, and jobs_maintain handles it as before. With ON DELETE
	// CASCADE the delete goes ahead and takes the referencing row along, as pruning would.
	t.Run("RestrictingForeignKeyKeepsDone", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		mustExec(t, b.Conn, "UPDATE jobs_settings SET done_retention = '0'")
		mustExec(t, b.Conn, "CREATE TABLE orders (id bigserial PRIMARY KEY, job_id bigint NOT NULL REFERENCES jobs (id) DEFERRABLE INITIALLY DEFERRED)")
		one := enqueue(t, b.Conn, "")
		two := enqueue(t, b.Conn, "")
		mustExec(t, b.Conn, "INSERT INTO orders (job_id) VALUES ($1), ($2)", one, two)
		jobs := claim(t, b.Conn, "w", 2, nil, "1 hour")
		if ok := queryOne[bool](t, b.Conn, "SELECT jobs_complete($1, $2)", jobs[0].ID, jobs[0].Attempt); !ok {
			t.Fatal("jobs_complete returned false")
		}
		got := queryList[int64](t, b.Conn, "SELECT * FROM jobs_complete_many(ARRAY[$1::bigint], ARRAY[$2::int])", jobs[1].ID, jobs[1].Attempt)
		if !slices.Equal(got, []int64{jobs[1].ID}) {
			t.Fatalf("jobs_complete_many returned %v", got)
		}
		if s := queryOne[string](t, b.Conn, "SELECT string_agg(state::text, ',' ORDER BY id) FROM jobs"); s != "done,done" {
			t.Fatalf("states %s, want done,done", s)
		}
	})

	// Every refusing form is found, not only the deferrable one above: RESTRICT has its own
	// RI trigger function (RI_FKey_restrict_del), and an immediate NO ACTION would fail the
	// completion with 23503 at once if it were missed.
	for _, onDelete := range []string{"ON DELETE RESTRICT", "ON DELETE NO ACTION", ""} {
		t.Run("RefusingForeignKeyKeepsDone/"+strings.TrimSpace("fk "+onDelete), func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			mustExec(t, b.Conn, "UPDATE jobs_settings SET done_retention = '0'")
			mustExec(t, b.Conn, "CREATE TABLE orders (id bigserial PRIMARY KEY, job_id bigint NOT NULL REFERENCES jobs (id) "+onDelete+")")
			id := enqueue(t, b.Conn, "")
			mustExec(t, b.Conn, "INSERT INTO orders (job_id) VALUES ($1)", id)
			j := claimOne(t, b.Conn, "w", "", "1 hour")
			if ok := queryOne[bool](t, b.Conn, "SELECT jobs_complete($1, $2)", id, j.Attempt); !ok {
				t.Fatal("jobs_complete returned false")
			}
			if s := queryOne[string](t, b.Conn, "SELECT state::text FROM jobs WHERE id = $1", id); s != "done" {
				t.Fatalf("state %s, want done (kept: the foreign key refuses the delete)", s)
			}
		})
	}

	t.Run("CascadingForeignKeyDeletes", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		mustExec(t, b.Conn, "UPDATE jobs_settings SET done_retention = '0'")
		mustExec(t, b.Conn, "CREATE TABLE orders (id bigserial PRIMARY KEY, job_id bigint REFERENCES jobs (id) ON DELETE SET NULL)")
		id := enqueue(t, b.Conn, "")
		mustExec(t, b.Conn, "INSERT INTO orders (job_id) VALUES ($1)", id)
		j := claimOne(t, b.Conn, "w", "", "1 hour")
		if ok := queryOne[bool](t, b.Conn, "SELECT jobs_complete($1, $2)", id, j.Attempt); !ok {
			t.Fatal("jobs_complete returned false")
		}
		if n := queryOne[int](t, b.Conn, "SELECT count(*) FROM jobs"); n != 0 {
			t.Fatalf("%d jobs left, want the completed one deleted", n)
		}
		if n := queryOne[int](t, b.Conn, "SELECT count(*) FROM orders WHERE job_id IS NULL"); n != 1 {
			t.Fatalf("the order's job_id was not set NULL (%d rows)", n)
		}
	})

	// The NOTIFY that gives a concurrency-limited queue's slot back must come from the delete
	// path too, or waiting workers would sleep until their poll.
	t.Run("NotifiesLimitedQueue", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		mustExec(t, b.Conn, "UPDATE jobs_settings SET done_retention = '0'")
		mustExec(t, b.Conn, "SELECT jobs_set_concurrency('lim', 1)")
		for range 2 {
			enqueue(t, b.Conn, "queue => 'lim'")
		}
		listener := b.Connect(t)
		mustExec(t, listener, "LISTEN jobs_ready")
		for _, call := range []string{
			"SELECT jobs_complete($1, $2)::text",
			"SELECT count(*)::text FROM jobs_complete_many(ARRAY[$1::bigint], ARRAY[$2::int])",
		} {
			j := claimOne(t, b.Conn, "w", "lim", "1 hour")
			mustExec(t, b.Conn, call, j.ID, j.Attempt)
			ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
			n, err := listener.WaitForNotification(ctx)
			cancel()
			if err != nil {
				t.Fatalf("%s: no jobs_ready notification: %v", call, err)
			}
			if n.Payload != "lim" {
				t.Fatalf("%s: notification payload %q, want lim", call, n.Payload)
			}
		}
	})
}

// TestCompleteDeletesConcurrently: under concurrency, each job deleted at completion is
// completed exactly once. Four sessions complete the same 200 claimed jobs at once, two of
// them one by one (jobs_complete) in opposite orders and two in overlapping batches
// (jobs_complete_many); every job must be reported completed by exactly one call, none may
// deadlock, and no row may be left.
func TestCompleteDeletesConcurrently(t *testing.T) {
	t.Parallel()
	b := setup(t)
	mustExec(t, b.Conn, "UPDATE jobs_settings SET done_retention = '0'")
	const n = 200
	mustExec(t, b.Conn, "SELECT jobs_enqueue_many(array_fill('k'::text, ARRAY[$1::int]))", n)
	jobs := claim(t, b.Conn, "w", n, nil, "1 hour")
	if len(jobs) != n {
		t.Fatalf("claimed %d jobs, want %d", len(jobs), n)
	}
	ids := make([]int64, n)
	attempts := make([]int32, n)
	for i, j := range jobs {
		ids[i], attempts[i] = j.ID, j.Attempt
	}

	conns := make([]*pgx.Conn, 4)
	for i := range conns {
		conns[i] = b.Connect(t)
	}
	completed := make([][]int64, len(conns))
	errs := make([]error, len(conns))
	var wg sync.WaitGroup
	for w := range conns {
		wg.Go(func() {
			ctx := t.Context()
			c := conns[w]
			switch w {
			case 0, 1:
				for k := range n {
					i := k
					if w == 1 {
						i = n - 1 - k
					}
					var ok bool
					if err := c.QueryRow(ctx, "SELECT jobs_complete($1, $2)", ids[i], attempts[i]).Scan(&ok); err != nil {
						errs[w] = err
						return
					}
					if ok {
						completed[w] = append(completed[w], ids[i])
					}
				}
			default:
				// Batches of 20 that overlap the other session's by half.
				for lo := (w - 2) * 10; lo < n; lo += 20 {
					hi := min(lo+20, n)
					rows, err := c.Query(ctx, "SELECT * FROM jobs_complete_many($1, $2)", ids[lo:hi], attempts[lo:hi])
					if err != nil {
						errs[w] = err
						return
					}
					got, err := pgx.CollectRows(rows, pgx.RowTo[int64])
					if err != nil {
						errs[w] = err
						return
					}
					completed[w] = append(completed[w], got...)
				}
			}
		})
	}
	wg.Wait()
	for w, err := range errs {
		if err != nil {
			t.Fatalf("session %d: %v", w, err)
		}
	}
	times := map[int64]int{}
	for _, c := range completed {
		for _, id := range c {
			times[id]++
		}
	}
	for _, id := range ids {
		if times[id] != 1 {
			t.Errorf("job %d reported completed %d times, want exactly once", id, times[id])
		}
	}
	if left := queryOne[int](t, b.Conn, "SELECT count(*) FROM jobs"); left != 0 {
		t.Errorf("%d rows left, want every completed job deleted", left)
	}
}
