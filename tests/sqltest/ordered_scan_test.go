package sqltest

import (
	"slices"
	"testing"
)

// TestOrderedClaimBeyondItsScan: an ordered queue's claim reads at most max_jobs + 1,000 of
// the queue's ready jobs in claim order for the heads of idle keys, and walks every key when
// those give fewer than it may take while more are ready. After a job without a key, key a
// holds the next 1,200 jobs (ids in claim order), b and c one each behind them: the scan sees
// only the job without a key and a's jobs, yet the claim takes b's and c's heads too, and
// never a second job of a.
func TestOrderedClaimBeyondItsScan(t *testing.T) {
	t.Parallel()
	b := setup(t)
	unkeyed := enqueue(t, b.Conn, "queue => 'q'")
	mustExec(t, b.Conn, `SELECT count(jobs_enqueue('k', queue => 'q', concurrency_key => 'a', notify => false))
		FROM generate_series(1, 1200)`)
	bHead := enqueue(t, b.Conn, "queue => 'q', concurrency_key => 'b'")
	cHead := enqueue(t, b.Conn, "queue => 'q', concurrency_key => 'c'")
	aHead := queryOne[int64](t, b.Conn, "SELECT min(id) FROM jobs WHERE concurrency_key = 'a'")
	mustExec(t, b.Conn, "SELECT jobs_set_concurrency('q', NULL, ordered => true)")

	ids := func(jobs []claimedJob) []int64 {
		got := idsOf(jobs, func(j claimedJob) int64 { return j.ID })
		slices.Sort(got)
		return got
	}
	// Within the scan: the job without a key and a's head, then the walk for the rest.
	if got, want := ids(claimN(t, b.Conn, "q", 4)), []int64{unkeyed, aHead, bHead, cHead}; !slices.Equal(got, want) {
		t.Fatalf("first claim took %v, want the job without a key and a's, b's and c's heads %v", got, want)
	}
	// a, b and c run: neither the scan nor the walk may take anything.
	if got := claimN(t, b.Conn, "q", 5); len(got) != 0 {
		t.Fatalf("every key runs a job, yet the claim took %v", ids(got))
	}
}
