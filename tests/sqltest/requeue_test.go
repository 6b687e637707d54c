package sqltest

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/skiplock/skiplock/tests/internal/jobstest"
	"github.com/skiplock/skiplock/tests/pgtest"
)

func TestRequeueExpired(t *testing.T) {
	t.Parallel()

	t.Run("ReturnsCountOfExpiredOnly", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		mustExec(t, b.Conn, "SELECT jobs_enqueue_many(array_fill('k'::text, ARRAY[7]))")
		short := claim(t, b.Conn, "short", 5, nil, "100 milliseconds")
		long := claim(t, b.Conn, "long", 2, nil, "1 hour")
		if len(short) != 5 || len(long) != 2 {
			t.Fatalf("claimed %d + %d jobs, want 5 + 2", len(short), len(long))
		}
		pgtest.WaitFor(t, 10*time.Second, "short leases to expire", func() bool {
			return queryOne[bool](t, b.Conn, "SELECT clock_timestamp() > $1", short[0].LeaseExpiresAt)
		})
		if n := queryOne[int32](t, b.Conn, "SELECT jobs_requeue_expired()"); n != 5 {
			t.Fatalf("jobs_requeue_expired() = %d, want 5", n)
		}
		if n := queryOne[int32](t, b.Conn, "SELECT jobs_requeue_expired()"); n != 0 {
			t.Fatalf("second jobs_requeue_expired() = %d, want 0", n)
		}
		for _, j := range short {
			r := getJob(t, b.Conn, j.ID)
			if r.State != "queued" || r.Attempts != 1 || r.LeaseExpiresAt != nil || len(r.Errors) != 1 {
				t.Fatalf("requeued job %d: %+v", j.ID, r)
			}
		}
		for _, j := range long {
			if r := getJob(t, b.Conn, j.ID); r.State != "running" || *r.LeaseHolder != "long" {
				t.Fatalf("job %d with a live lease was touched: %+v", j.ID, r)
			}
		}
		// Requeued jobs are ready at once, and the next claim is a new attempt.
		again := claim(t, b.Conn, "w", 10, nil, "1 minute")
		if len(again) != 5 {
			t.Fatalf("claimed %d requeued jobs, want 5", len(again))
		}
		for _, j := range again {
			if j.Attempt != 2 {
				t.Fatalf("requeued job %d claimed at attempt %d, want 2", j.ID, j.Attempt)
			}
		}
	})

	t.Run("DeadWhenAttemptsExhausted", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		last := enqueue(t, b.Conn, "max_attempts => 1")
		claimOne(t, b.Conn, "worker-x", "", "50 milliseconds")
		spare := enqueue(t, b.Conn, "max_attempts => 2")
		claimOne(t, b.Conn, "worker-y", "", "50 milliseconds")
		waitLeasesExpired(t, b.Conn)
		if n := queryOne[int32](t, b.Conn, "SELECT jobs_requeue_expired()"); n != 2 {
			t.Fatalf("jobs_requeue_expired() = %d, want 2", n)
		}
		r := getJob(t, b.Conn, last)
		if r.State != "dead" || r.FinishedAt == nil || r.LeaseExpiresAt != nil || r.LastError == nil ||
			!containsAll(*r.LastError, "lease expired", "worker-x") || len(r.Errors) != 1 {
			t.Fatalf("job out of attempts after expiry: %+v, want dead with the expiry recorded", r)
		}
		if r := getJob(t, b.Conn, spare); r.State != "queued" || r.FinishedAt != nil {
			t.Fatalf("job with attempts left after expiry: %+v, want queued", r)
		}
	})

	t.Run("ConcurrentCallersRequeueEachJobOnce", func(t *testing.T) {
		t.Parallel()
		const numJobs, numCallers = 300, 8
		b := setup(t)
		mustExec(t, b.Conn, "SELECT jobs_enqueue_many(array_fill('k'::text, ARRAY[$1::int]))", numJobs)
		if got := len(claim(t, b.Conn, "w", numJobs, nil, "100 milliseconds")); got != numJobs {
			t.Fatalf("claimed %d jobs, want %d", got, numJobs)
		}
		conns := make([]*pgx.Conn, numCallers)
		for i := range conns {
			conns[i] = b.Connect(t)
		}
		waitLeasesExpired(t, b.Conn)

		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		defer cancel()
		counts := make([]int32, numCallers)
		errs := make([]error, numCallers)
		var ready, done sync.WaitGroup
		start := make(chan struct{})
		for i, conn := range conns {
			ready.Add(1)
			done.Add(1)
			go func() {
				defer done.Done()
				ready.Done()
				<-start
				errs[i] = conn.QueryRow(ctx, "SELECT jobs_requeue_expired()").Scan(&counts[i])
			}()
		}
		ready.Wait()
		close(start)
		done.Wait()
		var sum int32
		for i := range conns {
			if errs[i] != nil {
				t.Fatalf("caller %d: %v", i, errs[i])
			}
			sum += counts[i]
		}
		if sum != numJobs {
			t.Fatalf("callers requeued %v, %d in total, want %d", counts, sum, numJobs)
		}
		var queued, once int64
		if err := b.Conn.QueryRow(t.Context(),
			`SELECT count(*) FILTER (WHERE state = 'queued'),
			        count(*) FILTER (WHERE attempts = 1 AND jsonb_array_length(errors) = 1)
			 FROM jobs`).Scan(&queued, &once); err != nil {
			t.Fatal(err)
		}
		if queued != numJobs || once != numJobs {
			t.Fatalf("%d jobs queued and %d with exactly one expiry recorded, want %d each", queued, once, numJobs)
		}
	})

	t.Run("NothingExpiredReturnsZero", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		enqueue(t, b.Conn, "")
		claimOne(t, b.Conn, "w", "", "1 hour")
		before := jobstest.TableChecksum(t, b.Conn)
		if n := queryOne[int32](t, b.Conn, "SELECT jobs_requeue_expired()"); n != 0 {
			t.Fatalf("jobs_requeue_expired() = %d, want 0", n)
		}
		if jobstest.TableChecksum(t, b.Conn) != before {
			t.Fatal("jobs_requeue_expired with nothing expired changed the table")
		}
	})
}

// TestRequeueExpiredLastErrorIgnoresSessionSettings: the time in "lease expired at <time>" is
// the lease's end in UTC, ISO 8601, under any TimeZone and DateStyle of the calling session
// (docs/sql-api.md, jobs_requeue_expired).
func TestRequeueExpiredLastErrorIgnoresSessionSettings(t *testing.T) {
	t.Parallel()
	b := setup(t)
	mustExec(t, b.Conn, "SELECT jobs_enqueue('k')")
	claimOne(t, b.Conn, "w", "", "1 hour")
	// A lease that ran out at a known instant: the job's and its claim's (jobs_requeue_expired
	// looks at a claim once its expires_at has passed).
	mustExec(t, b.Conn, "UPDATE jobs SET lease_expires_at = '2026-11-30 05:33:56.935712+00' WHERE id = 1")
	mustExec(t, b.Conn, "UPDATE jobs_claims SET expires_at = '2026-11-30 05:33:56.935712+00'")
	mustExec(t, b.Conn, "SET TimeZone = 'Pacific/Chatham'")
	mustExec(t, b.Conn, "SET DateStyle = 'SQL, DMY'")
	if n := queryOne[int32](t, b.Conn, "SELECT jobs_requeue_expired()"); n != 1 {
		t.Fatalf("jobs_requeue_expired() = %d, want 1", n)
	}
	want := "lease expired at 2026-11-30T05:33:56.935712Z (held by w, attempt 1)"
	if got := queryOne[string](t, b.Conn, "SELECT last_error FROM jobs WHERE id = 1"); got != want {
		t.Fatalf("last_error = %q, want %q", got, want)
	}
	if got := queryOne[string](t, b.Conn, "SELECT errors->-1->>'error' FROM jobs WHERE id = 1"); got != want {
		t.Fatalf("errors' newest entry = %q, want %q", got, want)
	}
}
