package sqltest

import (
	"strings"
	"testing"
)

// TestClaimFastPathUntouchedByFlowControl: a claim that names no paused or limited queue
// pays one probe of jobs_queues and is otherwise the claim it was before flow control: an
// ordered range scan of jobs_ready_idx, never the limited path (jobs_queue_starts,
// jobs_ready_key_idx, the running-jobs count over jobs_claims_queue_idx). Plans are read
// with auto_explain, as TestFencedCallsProbeOneRow does.
func TestClaimFastPathUntouchedByFlowControl(t *testing.T) {
	t.Parallel()
	b := setup(t)
	mustExec(t, b.Conn, `INSERT INTO jobs (kind, state, attempts, lease_holder, finished_at)
		SELECT 'old', 'done', 1, 'w', now() FROM generate_series(1, 20000)`)
	mustExec(t, b.Conn, "SELECT jobs_enqueue_many(array_fill('k'::text, ARRAY[400]), queues => array_fill('a'::text, ARRAY[400]))")
	mustExec(t, b.Conn, "SELECT jobs_enqueue_many(array_fill('k'::text, ARRAY[10]), queues => array_fill('b'::text, ARRAY[10]))")
	// Another queue is limited, paused and rate-limited: claims of a and b must not care.
	mustExec(t, b.Conn, "SELECT jobs_set_concurrency('other', 1, 1), jobs_pause('other'), jobs_set_rate_limit('other', 1, '1 minute')")
	mustExec(t, b.Conn, "ANALYZE jobs")

	conn, planLog := connectWithPlanLog(t, b.URL)
	startAutoExplain(t, conn)

	var held []claimedJob
	// Each form several times: PL/pgSQL may switch to a generic plan after the first calls.
	for range 6 {
		held = append(held, claim(t, conn, "w", 10, []string{"a"}, "1 hour")...)
		held = append(held, claim(t, conn, "w", 1, []string{"a", "b"}, "1 hour")...)
	}
	for i := range 4 {
		mustExec(t, conn, "SELECT jobs_heartbeat($1, $2)", held[i].ID, held[i].Attempt)
		mustExec(t, conn, "SELECT jobs_complete($1, $2)", held[4+i].ID, held[4+i].Attempt)
		mustExec(t, conn, "SELECT jobs_fail($1, $2, 'boom')", held[8+i].ID, held[8+i].Attempt)
	}

	plans := planLog.take()
	var scans, updates int
	for _, p := range plans {
		if strings.Contains(p, "jobs_queue_starts") || strings.Contains(p, "jobs_claims_queue_idx") ||
			strings.Contains(p, "jobs_ready_key_idx") || strings.Contains(p, "_jobs_claim_limited") {
			t.Errorf("a claim of queues without settings, or a fenced call, touched the limited path:\n%s", p)
		}
		if strings.Contains(p, "Seq Scan on jobs ") {
			t.Errorf("a sequential scan of jobs:\n%s", p)
		}
		if strings.Contains(p, "Index Scan using jobs_ready_idx") {
			scans++
		}
		if strings.Contains(p, "UPDATE jobs") {
			updates++
		}
	}
	if scans < 12 {
		t.Fatalf("auto_explain logged %d plans scanning jobs_ready_idx for 12 claims, want at least 12", scans)
	}
	if updates < 24 {
		t.Fatalf("auto_explain logged %d plans of updates for 12 claims and 12 fenced calls, want at least 24", updates)
	}
}
