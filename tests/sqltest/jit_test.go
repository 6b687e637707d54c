package sqltest

import (
	"strings"
	"testing"
)

// TestSeqScanFreeFunctionsAreNeverCompiled: a function that turns sequential scans off
// (so that lagging statistics cannot make it read a whole table) also turns JIT off. With
// sequential scans off, a condition that no index serves is costed at 1e10, far above
// jit_above_cost, and each call then JIT-compiled its statements: jobs_claim with queues
// NULL (every queue) took about 100 ms instead of 4.
func TestSeqScanFreeFunctionsAreNeverCompiled(t *testing.T) {
	t.Parallel()
	b := setup(t)

	// Every such function, now and later.
	rows, err := b.Conn.Query(t.Context(), `
		SELECT p.oid::regprocedure::text
		FROM pg_proc p
		WHERE p.pronamespace = to_regnamespace(current_schema())
		  AND 'enable_seqscan=off' = ANY (p.proconfig)
		  AND NOT 'jit=off' = ANY (p.proconfig)
		ORDER BY 1`)
	if err != nil {
		t.Fatal(err)
	}
	var missing []string
	for rows.Next() {
		var name string
		if err := rows.Scan(&name); err != nil {
			t.Fatal(err)
		}
		missing = append(missing, name)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if len(missing) > 0 {
		t.Errorf("functions with enable_seqscan = off but without jit = off: %s", strings.Join(missing, ", "))
	}

	// And what it is for: the claims of every queue, on the fast and the limited path, with
	// JIT on at its default thresholds.
	var available bool
	if err := b.Conn.QueryRow(t.Context(), "SELECT pg_jit_available()").Scan(&available); err != nil {
		t.Fatal(err)
	}
	if !available {
		t.Skip("JIT is not available on this server (no LLVM provider): nothing would be compiled")
	}
	mustExec(t, b.Conn, "SELECT jobs_enqueue('k', queue => q) FROM unnest(ARRAY['a', 'b', 'c']) AS q, generate_series(1, 3)")

	conn, planLog := connectWithPlanLog(t, b.URL)
	mustExec(t, conn, "SET jit = on")
	mustExec(t, conn, "RESET jit_above_cost")
	startAutoExplain(t, conn)
	claim(t, conn, "w", 1, nil, "1 hour")
	mustExec(t, conn, "SELECT jobs_set_concurrency('b', 10, fair => true)")
	claim(t, conn, "w", 2, nil, "1 hour")
	for _, p := range planLog.take() {
		if strings.Contains(p, "JIT:") {
			t.Errorf("a claim of every queue was JIT-compiled:\n%s", p)
		}
	}
}
