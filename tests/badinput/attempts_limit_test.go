package badinput

import (
	"fmt"
	"slices"
	"testing"

	"github.com/jackc/pgx/v5"
)

// noAttemptLeft is the last_error (and errors entry) of a job that a claim found with its
// attempts at the integer limit.
const noAttemptLeft = "no attempt left: attempts is at its limit, 2147483647"

// maxedQueue enqueues three ready jobs in queue q and sets the best of them to attempts
// 2147483647 directly (as the table owner), the state a forever-snoozed job reaches.
// It returns the maxed job's id and the other two ids.
func maxedQueue(t *testing.T, conn *pgx.Conn, q string) (maxed int64, others []int64) {
	t.Helper()
	maxed = queryOne[int64](t, conn, "SELECT jobs_enqueue('k', queue => $1, priority => -1)", q)
	for range 2 {
		others = append(others, queryOne[int64](t, conn, "SELECT jobs_enqueue('k', queue => $1)", q))
	}
	mustCall(t, conn, "UPDATE jobs SET attempts = $2, max_attempts = $2 WHERE id = $1", maxed, int32(maxInt32))
	return maxed, others
}

// requireDeadAtTheLimit checks the documented end of a job a claim found at the limit.
func requireDeadAtTheLimit(t *testing.T, conn *pgx.Conn, id int64) {
	t.Helper()
	r := getJob(t, conn, id)
	if r.State != "dead" || r.Attempts != maxInt32 || r.LastError == nil ||
		*r.LastError != noAttemptLeft || len(r.Errors) != 1 || r.Errors[0].Error != noAttemptLeft ||
		r.Errors[0].Attempt != maxInt32 {
		t.Errorf("job at attempts %d after the claim: %+v, want dead with last_error %q in its history",
			maxInt32, r, noAttemptLeft)
	}
	if !queryOne[bool](t, conn, "SELECT finished_at IS NOT NULL AND lease_expires_at IS NULL FROM jobs WHERE id = $1", id) {
		t.Error("finished_at is NULL or lease_expires_at is set")
	}
}

func claimedIDs(jobs []claimed) []int64 {
	ids := make([]int64, 0, len(jobs))
	for _, j := range jobs {
		ids = append(ids, j.ID)
	}
	slices.Sort(ids)
	return ids
}

// TestAttemptsAtTheLimit: a job whose attempts are at 2147483647 has no attempt number
// (fencing token) left. It must not fail a claim batch with 22003 (integer out of range),
// which would block every claim of its queue: every claim path moves it to dead with a
// clear last_error and claims the others; jobs_retry refuses it and jobs_retry_many
// leaves it alone.
func TestAttemptsAtTheLimit(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		// claim claims up to 10 jobs of queue 'q' and returns them.
		claim func(t *testing.T, conn *pgx.Conn) []claimed
	}{
		{"ClaimOneQueue", func(t *testing.T, conn *pgx.Conn) []claimed {
			return claimAll(t, conn, "w", 10, []string{"q"}, "1 hour")
		}},
		{"ClaimEveryQueue", func(t *testing.T, conn *pgx.Conn) []claimed {
			return claimAll(t, conn, "w", 10, nil, "1 hour")
		}},
		{"ClaimSeveralQueues", func(t *testing.T, conn *pgx.Conn) []claimed {
			return claimAll(t, conn, "w", 10, []string{"q", "other"}, "1 hour")
		}},
		{"CompleteAndClaim", func(t *testing.T, conn *pgx.Conn) []claimed {
			rows := mustCall(t, conn, `SELECT id FROM jobs_complete_and_claim('w', '{}', '{}', 10, ARRAY['q'], '1 hour')
			                           WHERE id IS NOT NULL`)
			var out []claimed
			for _, r := range rows {
				out = append(out, claimed{ID: r[0].(int64)})
			}
			return out
		}},
		{"ClaimLimitedQueue", func(t *testing.T, conn *pgx.Conn) []claimed {
			mustCall(t, conn, "SELECT jobs_set_concurrency('q', max_running => 10)")
			return claimAll(t, conn, "w", 10, []string{"q"}, "1 hour")
		}},
		{"ClaimPerKeyQueue", func(t *testing.T, conn *pgx.Conn) []claimed {
			mustCall(t, conn, "UPDATE jobs SET concurrency_key = 'key' WHERE queue = 'q'")
			mustCall(t, conn, "SELECT jobs_set_concurrency('q', max_running => 10, per_key => 10)")
			return claimAll(t, conn, "w", 10, []string{"q"}, "1 hour")
		}},
		{"ClaimRateLimitedQueue", func(t *testing.T, conn *pgx.Conn) []claimed {
			mustCall(t, conn, "SELECT jobs_set_rate_limit('q', 10, '1 hour')")
			const starts = "SELECT count(*) FROM jobs_queue_starts WHERE queue = 'q'"
			before := queryOne[int64](t, conn, starts)
			got := claimAll(t, conn, "w", 10, []string{"q"}, "1 hour")
			// Only real starts count against the rate limit.
			if n := queryOne[int64](t, conn, starts) - before; n != int64(len(got)) {
				t.Errorf("%d starts logged for %d claimed jobs", n, len(got))
			}
			return got
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			conn := setup(t).Conn
			maxed, others := maxedQueue(t, conn, "q")
			if got := claimedIDs(tc.claim(t, conn)); !slices.Equal(got, others) {
				t.Fatalf("claimed %v, want the other jobs %v", got, others)
			}
			requireDeadAtTheLimit(t, conn, maxed)
			// And the queue keeps working.
			next := queryOne[int64](t, conn, "SELECT jobs_enqueue('k', queue => 'q')")
			if got := claimedIDs(tc.claim(t, conn)); !slices.Equal(got, []int64{next}) {
				t.Fatalf("second claim got %v, want [%d]", got, next)
			}
		})
	}

	t.Run("RetryRefusedRetryManyLeavesItAlone", func(t *testing.T) {
		t.Parallel()
		conn := setup(t).Conn
		maxed, others := maxedQueue(t, conn, "q")
		mustCall(t, conn, "UPDATE jobs SET state = 'dead', finished_at = now() WHERE id = $1", maxed)
		mustCall(t, conn, "SELECT jobs_cancel($1)", others[0])
		_, err := call(t.Context(), conn, "SELECT jobs_retry($1)", maxed)
		pgErr := asPgError(err)
		want := fmt.Sprintf("jobs_retry: job %d has no attempt left: attempts is at its limit, 2147483647", maxed)
		if pgErr == nil || pgErr.Code != "55000" || pgErr.Message != want {
			t.Errorf("jobs_retry of a job at attempts %d: %v, want SQLSTATE 55000 %q", maxInt32, err, want)
		}
		if r := getJob(t, conn, maxed); r.State != "dead" {
			t.Fatalf("refused retry left the job %s", r.State)
		}
		// jobs_retry_many retries the others of the batch and leaves the maxed job dead.
		if n := queryOne[int32](t, conn, "SELECT jobs_retry_many(states => '{dead, cancelled}')"); n != 1 {
			t.Fatalf("jobs_retry_many = %d, want 1 (the cancelled job only)", n)
		}
		if r := getJob(t, conn, maxed); r.State != "dead" {
			t.Fatalf("jobs_retry_many moved the maxed job to %s", r.State)
		}
		if r := getJob(t, conn, others[0]); r.State != "queued" {
			t.Fatalf("jobs_retry_many left the cancelled job %s", r.State)
		}
	})
}

// TestClaimAtTheLimitStillClaimsAReadyJob: jobs_claim promises no rows only when nothing is
// ready, and workers (driver/fetch_loop.go) wait for a notification or the poll interval after
// a claim that came back short. A job snoozed at attempt 2147483647 goes dead at the snooze,
// so it never takes the place of a ready job in a later claim: a claim of one job, or of a
// queue with one free slot, gets the next ready job.
func TestClaimAtTheLimitStillClaimsAReadyJob(t *testing.T) {
	t.Parallel()
	for _, limited := range []bool{false, true} {
		t.Run(fmt.Sprintf("Limited=%v", limited), func(t *testing.T) {
			t.Parallel()
			conn := setup(t).Conn
			id := queryOne[int64](t, conn, "SELECT jobs_enqueue('k', queue => 'q', priority => -1)")
			other := queryOne[int64](t, conn, "SELECT jobs_enqueue('k', queue => 'q')")
			mustCall(t, conn, "UPDATE jobs SET attempts = $2, max_attempts = $2 WHERE id = $1", id, int32(maxInt32-1))
			j := claimOne(t, conn, "w", "q")
			if j.ID != id || j.Attempt != maxInt32 {
				t.Fatalf("claimed %+v, want job %d at attempt %d", j, id, maxInt32)
			}
			if ok := mustCall(t, conn, "SELECT jobs_snooze($1, $2, now())", id, j.Attempt); fmt.Sprint(ok) != "[[true]]" {
				t.Fatalf("jobs_snooze at attempt %d = %v, want true", maxInt32, ok)
			}
			if limited {
				mustCall(t, conn, "SELECT jobs_set_concurrency('q', max_running => 1)")
			}
			if got := claimedIDs(claimAll(t, conn, "w", 1, []string{"q"}, "1 hour")); len(got) != 1 || got[0] != other {
				t.Errorf("claim of 1 job got %v, want [%d]: the job snoozed at the limit (%d) took its place", got, other, id)
			}
			requireDeadAtTheLimit(t, conn, id)
		})
	}
}
