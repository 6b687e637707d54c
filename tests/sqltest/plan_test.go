package sqltest

import (
	"strings"
	"testing"
)

// TestFencedCallsProbeOneRow: complete, fail, heartbeat and snooze find their job through
// the primary key even when the statistics say almost nothing runs, the usual picture of a
// table full of finished jobs. A plan that walked the running jobs instead made each call
// cost O(running jobs), and halved claim+complete throughput with 1,000,000 done rows
// (BenchmarkClaimCompleteWithFinishedRows). Plans of the statements inside the functions
// are read with auto_explain.
func TestFencedCallsProbeOneRow(t *testing.T) {
	t.Parallel()
	b := setup(t)

	mustExec(t, b.Conn, `INSERT INTO jobs (kind, state, attempts, lease_holder, finished_at)
		SELECT 'old', 'done', 1, 'w', now() FROM generate_series(1, 20000)`)
	mustExec(t, b.Conn, "ANALYZE jobs")
	mustExec(t, b.Conn, "SELECT jobs_enqueue_many(array_fill('k'::text, ARRAY[400]))")

	conn, planLog := connectWithPlanLog(t, b.URL)
	startAutoExplain(t, conn)

	jobs := claim(t, conn, "w", 400, nil, "1 hour")
	if len(jobs) != 400 {
		t.Fatalf("claimed %d jobs, want 400", len(jobs))
	}
	ids := make([]int64, len(jobs))
	attempts := make([]int32, len(jobs))
	for i, j := range jobs {
		ids[i], attempts[i] = j.ID, j.Attempt
	}
	planLog.take()
	// Each function twice: PL/pgSQL may switch to a generic plan after the first calls.
	for i := range 2 {
		mustExec(t, conn, "SELECT jobs_heartbeat($1, $2)", ids[i], attempts[i])
		mustExec(t, conn, "SELECT jobs_complete($1, $2)", ids[2+i], attempts[2+i])
		mustExec(t, conn, "SELECT jobs_fail($1, $2, 'boom')", ids[4+i], attempts[4+i])
		mustExec(t, conn, "SELECT jobs_snooze($1, $2, now())", ids[6+i], attempts[6+i])
		lo, hi := 100+100*i, 200+100*i
		mustExec(t, conn, "SELECT jobs_heartbeat_many($1, $2)", ids[lo:hi], attempts[lo:hi])
		mustExec(t, conn, "SELECT jobs_complete_many($1, $2)", ids[lo:hi], attempts[lo:hi])
	}

	plans := planLog.take()
	var checked int
	for _, p := range plans {
		if !strings.Contains(p, "Update on jobs ") {
			continue
		}
		checked++
		if !strings.Contains(p, "jobs_pkey") || strings.Contains(p, "Seq Scan on jobs ") {
			t.Errorf("a fenced update does not probe the primary key:\n%s", p)
		}
	}
	if checked < 12 {
		t.Fatalf("auto_explain logged %d plans of fenced updates, want at least 12", checked)
	}
}
