package sqltest

import (
	"context"
	"testing"
	"time"
)

// jobs_cancel_workflow locks every unfinished step in id order before it cancels one: a
// worker that holds one step's row and then completes it (which locks the children the
// cancellation of another step has already locked) is waited for, not deadlocked with.
func TestCancelWorkflowWaitsForACompletingWorker(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	wf := queryOne[int64](t, b.Conn, `SELECT min(id) FROM jobs_enqueue_workflow('[{"name": "a", "kind": "k"},
		{"name": "b", "kind": "k", "depends_on": ["a"]}, {"name": "c", "kind": "k", "depends_on": ["a"]},
		{"name": "d", "kind": "k", "depends_on": ["b", "c"]}]')`)
	a, bID, c := wf, wf+1, wf+2
	mustExec(t, b.Conn, "SELECT jobs_complete(id, attempt) FROM jobs_claim('w', 1)")
	claimed := queryList[int64](t, b.Conn, "SELECT id FROM jobs_claim('w', 10) ORDER BY id")
	if len(claimed) != 2 || claimed[0] != bID || claimed[1] != c {
		t.Fatalf("claimed %v after a (%d) was done, want b and c", claimed, a)
	}

	worker := b.Connect(t)
	tx, err := worker.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	mustExec(t, tx, "SELECT jobs_progress($1, 1, '1')", c) // holds c's row
	cancelled := make(chan error, 1)
	var n int
	go func() {
		cancelled <- b.Connect(t).QueryRow(ctx, "SELECT jobs_cancel_workflow($1)", wf).Scan(&n)
	}()
	time.Sleep(300 * time.Millisecond) // the cancel is waiting for c by now
	if !queryOne[bool](t, tx, "SELECT jobs_complete($1, 1)", c) {
		t.Fatal("the worker's completion of c returned false")
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatalf("the worker's commit: %v", err)
	}
	if err := <-cancelled; err != nil {
		t.Fatalf("jobs_cancel_workflow: %v", err)
	}
	if n != 2 {
		t.Fatalf("jobs_cancel_workflow cancelled %d steps, want 2 (b and d; c finished first)", n)
	}
	if s := queryList[string](t, b.Conn, "SELECT state::text FROM jobs WHERE workflow_id = $1 ORDER BY id", wf); len(s) != 4 ||
		s[0] != "done" || s[1] != "cancelled" || s[2] != "done" || s[3] != "cancelled" {
		t.Fatalf("steps %v, want done, cancelled, done, cancelled", s)
	}
}

// A child both of whose parents died, cancelled in the name of one of them, is not brought
// back by retrying that one alone (it would wait forever for the other): it stays cancelled
// in the other's name, and retrying that one too brings it back to run.
func TestRetryOfOneOfTwoDeadParents(t *testing.T) {
	t.Parallel()
	b := setup(t)
	wf := queryOne[int64](t, b.Conn, `SELECT min(id) FROM jobs_enqueue_workflow('[
		{"name": "b", "kind": "k", "max_attempts": 1}, {"name": "c", "kind": "k", "max_attempts": 1},
		{"name": "d", "kind": "k", "depends_on": ["b", "c"]}]')`)
	bID, c, d := wf, wf+1, wf+2
	mustExec(t, b.Conn, "SELECT jobs_fail(id, attempt, 'boom') FROM jobs_claim('w', 10) ORDER BY id")
	if by := queryOne[int64](t, b.Conn, "SELECT cancelled_by FROM jobs WHERE id = $1 AND state = 'cancelled'", d); by != bID {
		t.Fatalf("d cancelled by %d, want b (%d)", by, bID)
	}
	mustExec(t, b.Conn, "SELECT jobs_retry($1)", bID)
	if s := queryOne[string](t, b.Conn, "SELECT state::text || ' by ' || cancelled_by || ': ' || last_error FROM jobs WHERE id = $1", d); s != "cancelled by 2: parent 2 ended dead" {
		t.Fatalf("d after retrying b alone: %q, want cancelled in c's name", s)
	}
	mustExec(t, b.Conn, "SELECT jobs_complete(id, attempt) FROM jobs_claim('w', 10)")
	mustExec(t, b.Conn, "SELECT jobs_retry($1)", c)
	if s := queryOne[string](t, b.Conn, "SELECT state::text FROM jobs WHERE id = $1", d); s != "waiting" {
		t.Fatalf("d after retrying c too: %s, want waiting", s)
	}
	mustExec(t, b.Conn, "SELECT jobs_complete(id, attempt) FROM jobs_claim('w', 10)")
	if got := queryList[int64](t, b.Conn, "SELECT id FROM jobs_claim('w', 10)"); len(got) != 1 || got[0] != d {
		t.Fatalf("claimed %v once both parents were done, want d", got)
	}
}

// The functions that follow dependencies find rows by id however small the tables were when
// their plans were cached: after many calls on an empty table, enqueueing and releasing a
// child of a table of 20,000 jobs (never analyzed) scans neither jobs nor jobs_dependencies.
func TestDependencyPathsNeverScanWholeTables(t *testing.T) {
	t.Parallel()
	b := setup(t)
	conn := b.Connect(t) // one session: plans are cached per session
	for range 10 {
		mustExec(t, conn, `SELECT jobs_complete(id, attempt) FROM jobs_claim('w', 10, ARRAY['warm'])`)
		mustExec(t, conn, `SELECT jobs_enqueue('k', queue => 'warm', depends_on => ARRAY[jobs_enqueue('k', queue => 'warm')])`)
	}
	mustExec(t, conn, `SELECT jobs_enqueue_many(array_fill('bulk'::text, ARRAY[20000]), queues => array_fill('bulk'::text, ARRAY[20000]))`)
	mustExec(t, conn, "BEGIN")
	parent := queryOne[int64](t, conn, "SELECT jobs_enqueue('k', queue => 'q')")
	mustExec(t, conn, "SELECT jobs_enqueue('k', queue => 'q2', depends_on => ARRAY[$1::bigint])", parent)
	mustExec(t, conn, "SELECT jobs_complete(id, attempt) FROM jobs_claim('w', 1, ARRAY['q'])")
	scans := queryOne[int64](t, conn, `SELECT coalesce(sum(seq_scan), 0) FROM pg_stat_xact_user_tables
		WHERE relname IN ('jobs', 'jobs_dependencies')`)
	mustExec(t, conn, "COMMIT")
	if scans != 0 {
		t.Fatalf("%d sequential scans of jobs or jobs_dependencies while enqueueing and releasing a child", scans)
	}
}
