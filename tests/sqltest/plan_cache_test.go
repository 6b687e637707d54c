package sqltest

import (
	"strings"
	"testing"
)

// TestClaimAndCompletionKeepOnePlan: the statements of jobs_claim, _jobs_claim_take and
// jobs_complete_many run one generic plan however many jobs each call names, and that plan
// still probes jobs_queues by its primary key for the queues a claim names. By default
// PostgreSQL plans a statement with parameters anew at every call while its generic plan
// costs more than the custom plans made so far, which batches of a few jobs always made it
// do: 0.1 to 0.4 ms of planning per statement and call. A generic plan shows the
// parameters ($n) where a custom plan shows the call's arrays.
func TestClaimAndCompletionKeepOnePlan(t *testing.T) {
	t.Parallel()
	b := setup(t)
	mustExec(t, b.Conn, "SELECT jobs_enqueue_many(array_fill('k'::text, ARRAY[40]), queues => array_fill('a'::text, ARRAY[40]))")

	conn, planLog := connectWithPlanLog(t, b.URL)
	startAutoExplain(t, conn)
	mustExec(t, conn, "SET auto_explain.log_verbose = on")
	// More calls than the five custom plans PostgreSQL makes before it compares.
	for _, n := range []int{1, 3, 1, 2, 1, 1, 1, 1} {
		var ids []int64
		var attempts []int32
		for _, j := range claim(t, conn, "w", n, []string{"a"}, "1 minute") {
			ids = append(ids, j.ID)
			attempts = append(attempts, j.Attempt)
		}
		mustExec(t, conn, "SELECT jobs_complete_many($1, $2)", ids, attempts)
	}

	last := map[string]string{}
	for _, p := range planLog.take() {
		for _, stmt := range []string{"v_limited := EXISTS (", "v_rows := ARRAY(", "WITH taken AS (", "WITH held AS ("} {
			if strings.Contains(p, "Query Text: "+stmt) {
				last[stmt] = p
			}
		}
	}
	for stmt, want := range map[string]string{
		"v_limited := EXISTS (": "jobs_queues_pkey", // jobs_claim's probe, not a read of every row
		"v_rows := ARRAY(":      "q.queue = ($",     // jobs_claim's pick
		"WITH taken AS (":       "q.ctid = ANY ($",  // _jobs_claim_take
		"WITH held AS (":        "unnest($",         // jobs_complete_many
	} {
		p, ok := last[stmt]
		if !ok {
			t.Fatalf("no plan of %q logged", stmt)
		}
		if !strings.Contains(p, want) {
			t.Errorf("the last call planned %q for its arguments (no %q in the plan: not the generic plan):\n%s", stmt, want, p)
		}
	}
}
