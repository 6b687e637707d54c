package sqltest

import (
	"fmt"
	"strings"
	"testing"
)

// errorsHistoryMax is the most entries a job's errors history keeps (_jobs_errors_append).
const errorsHistoryMax = 100

// TestErrorsHistoryKeepsFirstAndNewest: the errors history stops growing at 100 entries,
// keeping the first and the newest 99, on every path that appends to it.
func TestErrorsHistoryKeepsFirstAndNewest(t *testing.T) {
	t.Parallel()

	t.Run("JobsFailOverManyAttempts", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		id := enqueue(t, b.Conn, "max_attempts => 1000")
		const failures = 150
		for i := 1; i <= failures; i++ {
			j := claimOne(t, b.Conn, "w", "", "1 minute")
			// a retry in the past: ready for the next claim at once
			mustExec(t, b.Conn, "SELECT jobs_fail($1, $2, $3, now() - interval '1 second')", j.ID, j.Attempt, fmt.Sprintf("failure %d", j.Attempt))
		}
		r := getJob(t, b.Conn, id)
		if len(r.Errors) != errorsHistoryMax {
			t.Fatalf("%d failures left %d errors entries, want %d", failures, len(r.Errors), errorsHistoryMax)
		}
		first, second, last := r.Errors[0], r.Errors[1], r.Errors[errorsHistoryMax-1]
		if first.Attempt != 1 || first.Error != "failure 1" || second.Attempt != failures-errorsHistoryMax+2 ||
			last.Attempt != failures || last.Error != fmt.Sprintf("failure %d", failures) {
			t.Fatalf("errors kept attempts %d, %d ... %d (%q), want 1, %d ... %d",
				first.Attempt, second.Attempt, last.Attempt, last.Error, failures-errorsHistoryMax+2, failures)
		}
		for i := 1; i < len(r.Errors); i++ {
			if r.Errors[i].Attempt != r.Errors[i-1].Attempt+1 && i != 1 {
				t.Fatalf("entries %d and %d are attempts %d and %d: the newest must be kept in order", i-1, i, r.Errors[i-1].Attempt, r.Errors[i].Attempt)
			}
		}
	})

	// Each appending function, on a history already full: prior-1 is kept, prior-2 dropped,
	// prior-3 ... prior-100 and the new entry kept.
	for _, path := range []struct {
		name, lease string
		record      func(t *testing.T, b *testBundle, j claimedJob)
		newError    string
	}{
		{"JobsFail", "1 minute", func(t *testing.T, b *testBundle, j claimedJob) {
			mustExec(t, b.Conn, "SELECT jobs_fail($1, $2, 'new')", j.ID, j.Attempt)
		}, "new"},
		{"JobsCancelByWorker", "1 minute", func(t *testing.T, b *testBundle, j claimedJob) {
			mustExec(t, b.Conn, "SELECT jobs_cancel($1, $2, 'new')", j.ID, j.Attempt)
		}, "new"},
		{"JobsRequeueExpired", "50 milliseconds", func(t *testing.T, b *testBundle, j claimedJob) {
			waitLeasesExpired(t, b.Conn)
			mustExec(t, b.Conn, "SELECT jobs_requeue_expired()")
		}, "lease expired at "},
	} {
		t.Run(path.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			id := enqueue(t, b.Conn, "max_attempts => 5")
			j := claimOne(t, b.Conn, "w", "", path.lease)
			mustExec(t, b.Conn, `UPDATE jobs SET errors = (
				SELECT jsonb_agg(jsonb_build_object('attempt', 0, 'at', now(), 'error', 'prior-' || i, 'worker', 'w') ORDER BY i)
				FROM generate_series(1, $2) AS i) WHERE id = $1`, id, errorsHistoryMax)
			path.record(t, b, j)
			r := getJob(t, b.Conn, id)
			var got []string
			for _, e := range r.Errors {
				got = append(got, e.Error)
			}
			if len(got) != errorsHistoryMax || got[0] != "prior-1" || got[1] != "prior-3" ||
				got[errorsHistoryMax-2] != "prior-100" || !strings.HasPrefix(got[errorsHistoryMax-1], path.newError) {
				t.Fatalf("errors after one more entry: %d entries, %q ... %q, want %d: prior-1, prior-3 ... prior-100, %s...",
					len(got), got[:min(2, len(got))], got[max(0, len(got)-2):], errorsHistoryMax, path.newError)
			}
		})
	}
}
