package sqltest

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/skiplock/skiplock/tests/pgtest"
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

// A REPEATABLE READ transaction completing a parent whose other child was enqueued after its
// snapshot fails with 40001 rather than leaving that child waiting forever: the child's
// enqueue writes the parent's row even when it already had children.
func TestRepeatableReadCompletionSeesLaterChildren(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	p := queryOne[int64](t, b.Conn, "SELECT jobs_enqueue('p', queue => 'p')")
	mustExec(t, b.Conn, "SELECT jobs_enqueue('c1', queue => 'c', depends_on => ARRAY[$1::bigint])", p)
	at := queryOne[int32](t, b.Conn, "SELECT attempt FROM jobs_claim('w', 1, ARRAY['p'])")
	for _, call := range []string{"SELECT jobs_complete($1, $2)", "SELECT jobs_cancel($1)"} {
		rr := b.Connect(t)
		tx, err := rr.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead})
		if err != nil {
			t.Fatal(err)
		}
		mustExec(t, tx, "SELECT 1") // the snapshot
		c2 := queryOne[int64](t, b.Conn, "SELECT jobs_enqueue('c2', queue => 'c', depends_on => ARRAY[$1::bigint])", p)
		args := []any{p, at}
		if strings.Contains(call, "cancel") {
			args = args[:1]
		}
		_, err = tx.Exec(ctx, call, args...)
		pgtest.RequirePgError(t, err, "40001")
		_ = tx.Rollback(ctx)
		if s := queryOne[string](t, b.Conn, "SELECT state::text FROM jobs WHERE id = $1", c2); s != "waiting" {
			t.Fatalf("%s: child enqueued after the snapshot is %s, want waiting", call, s)
		}
	}
	// Retried in READ COMMITTED, the completion releases every child.
	mustExec(t, b.Conn, "SELECT jobs_complete($1, $2)", p, at)
	if n := queryOne[int](t, b.Conn, "SELECT count(*) FROM jobs WHERE queue = 'c' AND state = 'queued'"); n != 3 {
		t.Fatalf("%d children queued after the parent was done, want 3", n)
	}
}

// parent_results keys by step name only within the child's own workflow: two parents named
// "build" in two workflows, or a step named like an id, keep their own keys.
func TestParentResultsKeysNeverCollide(t *testing.T) {
	t.Parallel()
	b := setup(t)
	w1 := queryOne[int64](t, b.Conn, `SELECT min(id) FROM jobs_enqueue_workflow('[{"name": "build", "kind": "k", "queue": "b1"}]')`)
	w2 := queryOne[int64](t, b.Conn, `SELECT min(id) FROM jobs_enqueue_workflow('[{"name": "build", "kind": "k", "queue": "b2"}]')`)
	runJob(t, b.Conn, w1, `'"from w1"'`)
	runJob(t, b.Conn, w2, `'"from w2"'`)
	mustExec(t, b.Conn, "SELECT jobs_enqueue('c', queue => 'c', depends_on => ARRAY[$1::bigint, $2])", w1, w2)
	_, _, pr, _ := claimWithResults(t, b.Conn, "c")
	if want := fmt.Sprintf(`{"%d": "from w1", "%d": "from w2"}`, w1, w2); pr != want {
		t.Fatalf("parent_results = %s, want %s (by id: the parents are steps of other workflows)", pr, want)
	}
}

// A child whose parents' results together exceed what one jsonb value holds (256 MB) is
// claimed with parent_results NULL: the claim does not fail, so the rest of its queue runs.
func TestOversizedParentResultsDoNotBlockTheQueue(t *testing.T) {
	if testing.Short() {
		t.Skip("writes about 70 MB")
	}
	t.Parallel()
	b := setup(t)
	// A 1 MB (as text) array of small numbers takes 4 MB as jsonb: 70 of them are over
	// jsonb's limit together.
	var parents []int64
	for range 70 {
		p := queryOne[int64](t, b.Conn, "SELECT jobs_enqueue('p', queue => 'p')")
		at := queryOne[int32](t, b.Conn, "SELECT attempt FROM jobs_claim('w', 1, ARRAY['p'])")
		mustExec(t, b.Conn, "SELECT jobs_complete($1, $2, (SELECT jsonb_agg(1) FROM generate_series(1, 340000)))", p, at)
		parents = append(parents, p)
	}
	child := queryOne[int64](t, b.Conn, "SELECT jobs_enqueue('c', queue => 'c', depends_on => $1)", parents)
	other := queryOne[int64](t, b.Conn, "SELECT jobs_enqueue('o', queue => 'c')")
	var got []int64
	rows, err := b.Conn.Query(t.Context(), "SELECT id, parent_results IS NULL FROM jobs_claim('w', 5, ARRAY['c']) ORDER BY id")
	if err != nil {
		t.Fatalf("a claim reaching the child failed: %v", err)
	}
	for rows.Next() {
		var id int64
		var none bool
		if err := rows.Scan(&id, &none); err != nil {
			t.Fatal(err)
		}
		if id == child && !none {
			t.Error("the child got parent_results beyond jsonb's limit")
		}
		got = append(got, id)
	}
	if err := rows.Err(); err != nil {
		t.Fatalf("a claim reaching the child failed: %v", err)
	}
	if len(got) != 2 || got[0] != child || got[1] != other {
		t.Fatalf("claimed %v, want the child %d and the other job %d", got, child, other)
	}
}

// A cancellation going down the graph locks every descendant it may reach in one id order
// first, so a completion of another parent of some of them takes turns with it: X is a child
// of P1, Y of X and P2, Z of P1 and P2 (X < Y < Z); jobs_cancel(P1) used to lock X and Z,
// then Y, while jobs_complete(P2) locked Y, then Z.
func TestCascadeAndCompletionDoNotDeadlock(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	for round := range 15 {
		q := fmt.Sprintf("r%d", round)
		p1 := queryOne[int64](t, b.Conn, "SELECT jobs_enqueue('p1', queue => $1)", q+"p1")
		p2 := queryOne[int64](t, b.Conn, "SELECT jobs_enqueue('p2', queue => $1)", q+"p2")
		x := queryOne[int64](t, b.Conn, "SELECT jobs_enqueue('x', queue => $1, depends_on => ARRAY[$2::bigint])", q, p1)
		mustExec(t, b.Conn, "SELECT jobs_enqueue('y', queue => $1, depends_on => ARRAY[$2::bigint, $3])", q, x, p2)
		mustExec(t, b.Conn, "SELECT jobs_enqueue('z', queue => $1, depends_on => ARRAY[$2::bigint, $3])", q, p1, p2)
		mustExec(t, b.Conn, "SELECT jobs_claim('w', 1, ARRAY[$1])", q+"p1")
		at := queryOne[int32](t, b.Conn, "SELECT attempt FROM jobs_claim('w', 1, ARRAY[$1])", q+"p2")
		errs := make(chan error, 2)
		start := make(chan struct{})
		for _, call := range []func(c *pgx.Conn) error{
			func(c *pgx.Conn) error { _, err := c.Exec(ctx, "SELECT jobs_cancel($1)", p1); return err },
			func(c *pgx.Conn) error { _, err := c.Exec(ctx, "SELECT jobs_complete($1, $2)", p2, at); return err },
		} {
			c := b.Connect(t)
			go func() { <-start; errs <- call(c) }()
		}
		close(start)
		for range 2 {
			if err := <-errs; err != nil {
				t.Fatalf("round %d: %v", round, err)
			}
		}
		if s := queryList[string](t, b.Conn, "SELECT state::text FROM jobs WHERE queue = $1 ORDER BY id", q); len(s) != 3 ||
			s[0] != "cancelled" || s[1] != "cancelled" || s[2] != "cancelled" {
			t.Fatalf("round %d: x, y, z are %v, want all cancelled", round, s)
		}
	}
}

// A job waiting for a parent that ended dead is not retried on its own (it would wait
// forever): jobs_retry refuses it naming the parent, jobs_retry_many leaves it alone, and
// retrying the parent brings it back.
func TestRetryOfAChildWhoseParentIsDead(t *testing.T) {
	t.Parallel()
	b := setup(t)
	p := queryOne[int64](t, b.Conn, "SELECT jobs_enqueue('p', queue => 'p', max_attempts => 1)")
	c := queryOne[int64](t, b.Conn, "SELECT jobs_enqueue('c', queue => 'c', depends_on => ARRAY[$1::bigint])", p)
	killJob(t, b.Conn, p)
	_, err := b.Conn.Exec(t.Context(), "SELECT jobs_retry($1)", c)
	if pgErr := pgtest.RequirePgError(t, err, "55000"); !strings.Contains(pgErr.Message, fmt.Sprintf("parent %d", p)) {
		t.Fatalf("jobs_retry of the child: %v, want a refusal naming its parent", err)
	}
	if n := queryOne[int32](t, b.Conn, "SELECT jobs_retry_many(ids => ARRAY[$1::bigint])", c); n != 0 {
		t.Fatalf("jobs_retry_many retried %d jobs, want 0", n)
	}
	mustExec(t, b.Conn, "SELECT jobs_retry($1)", p)
	if s := queryOne[string](t, b.Conn, "SELECT state::text FROM jobs WHERE id = $1", c); s != "waiting" {
		t.Fatalf("the child after retrying its parent is %s, want waiting", s)
	}
}

// With done_retention 0 a workflow step is kept as done when it completes (a workflow's steps
// go together); a plain job is deleted.
func TestZeroRetentionKeepsWorkflowSteps(t *testing.T) {
	t.Parallel()
	b := setup(t)
	mustExec(t, b.Conn, "UPDATE jobs_settings SET done_retention = '0'")
	wf := queryOne[int64](t, b.Conn, `SELECT min(id) FROM jobs_enqueue_workflow('[{"name": "a", "kind": "k", "queue": "a"}, {"name": "b", "kind": "k", "queue": "b"}]')`)
	runJob(t, b.Conn, wf, `'"A"'`)
	at := claimJob(t, b.Conn, wf+1)
	mustExec(t, b.Conn, `SELECT * FROM jobs_complete_many(ARRAY[$1::bigint], ARRAY[$2::int])`, wf+1, at)
	if n := queryOne[int](t, b.Conn, "SELECT count(*) FROM jobs_workflow($1) WHERE state = 'done'", wf); n != 2 {
		t.Fatalf("%d of the workflow's 2 steps kept as done, want both", n)
	}
}
