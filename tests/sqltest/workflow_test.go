package sqltest

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/skiplock/skiplock/tests/internal/jobstest"
	"github.com/skiplock/skiplock/tests/pgtest"
)

// The workflow tests give each job a queue of its own, so that claiming that queue takes
// exactly that job.

// claimJob claims job id, alone in its queue, and returns the attempt.
func claimJob(t *testing.T, q querier, id int64) int32 {
	t.Helper()
	queue := queryOne[string](t, q, "SELECT queue FROM jobs WHERE id = $1", id)
	j := claimOne(t, q, "w", queue, "1 minute")
	if j.ID != id {
		t.Fatalf("claimed job %d from queue %q, want %d", j.ID, queue, id)
	}
	return j.Attempt
}

// runJob claims job id and completes it with result (SQL, "NULL" for none).
func runJob(t *testing.T, q querier, id int64, result string) {
	t.Helper()
	attempt := claimJob(t, q, id)
	if !queryOne[bool](t, q, "SELECT jobs_complete($1, $2, "+result+")", id, attempt) {
		t.Fatalf("jobs_complete(%d, %d) returned false", id, attempt)
	}
}

// killJob claims job id (enqueued with max_attempts 1) and fails it: it ends dead.
func killJob(t *testing.T, q querier, id int64) {
	t.Helper()
	attempt := claimJob(t, q, id)
	if s := queryOne[string](t, q, "SELECT jobs_fail($1, $2, 'boom')::text", id, attempt); s != "dead" {
		t.Fatalf("jobs_fail(%d) = %s, want dead", id, s)
	}
}

// depRow is what the dependency tests look at in a job's row.
type depRow struct {
	State          string
	PendingParents *int32
	CancelledBy    *int64
	LastError      *string
}

func (r depRow) String() string {
	s := r.State
	if r.PendingParents != nil {
		s += fmt.Sprintf(" pending=%d", *r.PendingParents)
	}
	if r.CancelledBy != nil {
		s += fmt.Sprintf(" cancelled_by=%d", *r.CancelledBy)
	}
	if r.LastError != nil {
		s += fmt.Sprintf(" last_error=%q", *r.LastError)
	}
	return s
}

func getDep(t *testing.T, q querier, id int64) depRow {
	t.Helper()
	var r depRow
	if err := q.QueryRow(t.Context(),
		"SELECT state::text, pending_parents, cancelled_by, last_error FROM jobs WHERE id = $1", id).
		Scan(&r.State, &r.PendingParents, &r.CancelledBy, &r.LastError); err != nil {
		t.Fatalf("failed to read job %d: %v", id, err)
	}
	return r
}

// requireDep fails unless job id's row reads want (depRow.String).
func requireDep(t *testing.T, q querier, id int64, want string) {
	t.Helper()
	if got := getDep(t, q, id).String(); got != want {
		t.Fatalf("job %d is %s, want %s", id, got, want)
	}
}

// queryOneErr is queryOne returning the error instead of failing the test.
func queryOneErr[T any](q querier, sql string, args ...any) (T, error) {
	var v T
	err := q.QueryRow(context.Background(), sql, args...).Scan(&v)
	return v, err
}

// step is one row of jobs_enqueue_workflow.
type step struct {
	Name string
	ID   int64
}

func enqueueWorkflow(t *testing.T, q querier, steps string) map[string]int64 {
	t.Helper()
	return pgtest.EnqueueWorkflow(t, q, steps)
}

// claimWithResults claims one job from queue and returns its id, attempt, parent_results
// and checkpoints (as JSON text, "" for NULL).
func claimWithResults(t *testing.T, q querier, queue string) (id int64, attempt int32, parentResults, checkpoints string) {
	t.Helper()
	var pr, cp *string
	if err := q.QueryRow(t.Context(),
		"SELECT id, attempt, parent_results::text, checkpoints::text FROM jobs_claim('w', 1, ARRAY[$1], '1 minute')", queue).
		Scan(&id, &attempt, &pr, &cp); err != nil {
		t.Fatalf("jobs_claim from %q: %v", queue, err)
	}
	if pr != nil {
		parentResults = *pr
	}
	if cp != nil {
		checkpoints = *cp
	}
	return id, attempt, parentResults, checkpoints
}

func TestDependencies(t *testing.T) {
	t.Parallel()

	t.Run("WaitingUntilTheLastParentIsDone", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		a := enqueue(t, b.Conn, "queue => 'a'")
		p := enqueue(t, b.Conn, "queue => 'b'")
		c := enqueue(t, b.Conn, fmt.Sprintf("queue => 'c', depends_on => ARRAY[%d, %d, %d]", p, a, p))
		requireDep(t, b.Conn, c, "waiting pending=2")
		if got := queryOne[[]int64](t, b.Conn, "SELECT depends_on FROM jobs_get($1)", c); !slices.Equal(got, []int64{a, p}) {
			t.Fatalf("jobs_get(c).depends_on = %v, want [%d %d] (sorted, each once)", got, a, p)
		}
		if jobs := claim(t, b.Conn, "w", 1, []string{"c"}, "1 minute"); len(jobs) != 0 {
			t.Fatalf("claimed a waiting job: %v", jobs)
		}
		runJob(t, b.Conn, a, `'{"n": 1}'`)
		requireDep(t, b.Conn, c, "waiting pending=1")
		runJob(t, b.Conn, p, "NULL")
		requireDep(t, b.Conn, c, "queued pending=0")
		id, _, pr, _ := claimWithResults(t, b.Conn, "c")
		if want := fmt.Sprintf(`{"%d": {"n": 1}, "%d": null}`, a, p); id != c || pr != want {
			t.Fatalf("claimed %d with parent_results %s, want %d with %s (ids as text)", id, pr, c, want)
		}
		if p := pgtest.StorageProblems(t, b.Conn); len(p) > 0 {
			t.Fatal(p)
		}
	})

	t.Run("ParentAlreadyDoneCountsAsDone", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		a := enqueue(t, b.Conn, "queue => 'a'")
		runJob(t, b.Conn, a, `'"ok"'`)
		c := enqueue(t, b.Conn, fmt.Sprintf("queue => 'c', depends_on => ARRAY[%d]", a))
		requireDep(t, b.Conn, c, "queued pending=0")
		if id, _, pr, _ := claimWithResults(t, b.Conn, "c"); id != c || pr != fmt.Sprintf(`{"%d": "ok"}`, a) {
			t.Fatalf("claimed %d with parent_results %s", id, pr)
		}
		// An empty depends_on is no parents.
		e := enqueue(t, b.Conn, "queue => 'e', depends_on => '{}'")
		requireDep(t, b.Conn, e, "queued")
		if id, _, pr, _ := claimWithResults(t, b.Conn, "e"); id != e || pr != "" {
			t.Fatalf("claimed %d with parent_results %q, want NULL", id, pr)
		}
	})

	// a -> b -> c, a -> r (on_parent_failure 'run'): a's death cancels b, whose cancellation
	// cancels c, each naming its own parent; r runs.
	t.Run("ParentFailureCancelsDescendantsRecursively", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		a := enqueue(t, b.Conn, "queue => 'a', max_attempts => 1")
		bb := enqueue(t, b.Conn, fmt.Sprintf("queue => 'b', depends_on => ARRAY[%d]", a))
		c := enqueue(t, b.Conn, fmt.Sprintf("queue => 'c', depends_on => ARRAY[%d]", bb))
		r := enqueue(t, b.Conn, fmt.Sprintf("queue => 'r', depends_on => ARRAY[%d], on_parent_failure => 'run'", a))
		killJob(t, b.Conn, a)
		requireDep(t, b.Conn, bb, fmt.Sprintf("cancelled pending=1 cancelled_by=%d last_error=\"parent %d ended dead\"", a, a))
		requireDep(t, b.Conn, c, fmt.Sprintf("cancelled pending=1 cancelled_by=%d last_error=\"parent %d ended cancelled\"", bb, bb))
		requireDep(t, b.Conn, r, "queued pending=0")
		if n := queryOne[int](t, b.Conn, "SELECT jsonb_array_length(errors) FROM jobs WHERE id = $1", c); n != 1 {
			t.Fatalf("cancelled child has %d errors, want 1 naming its parent", n)
		}
		if id, _, pr, _ := claimWithResults(t, b.Conn, "r"); id != r || pr != fmt.Sprintf(`{"%d": null}`, a) {
			t.Fatalf("claimed %d with parent_results %s", id, pr)
		}
		if p := pgtest.StorageProblems(t, b.Conn); len(p) > 0 {
			t.Fatal(p)
		}
	})

	t.Run("CancelledParentCancelsOrReleases", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		a := enqueue(t, b.Conn, "queue => 'a'")
		c := enqueue(t, b.Conn, fmt.Sprintf("queue => 'c', depends_on => ARRAY[%d]", a))
		r := enqueue(t, b.Conn, fmt.Sprintf("queue => 'r', depends_on => ARRAY[%d], on_parent_failure => 'run'", a))
		if !queryOne[bool](t, b.Conn, "SELECT jobs_cancel($1)", a) {
			t.Fatal("jobs_cancel(a) returned false")
		}
		requireDep(t, b.Conn, c, fmt.Sprintf("cancelled pending=1 cancelled_by=%d last_error=\"parent %d ended cancelled\"", a, a))
		requireDep(t, b.Conn, r, "queued pending=0")
	})

	// A parent already dead or cancelled when the child is enqueued applies the policy at once.
	t.Run("ParentFinishedBadlyAtEnqueue", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		dead := enqueue(t, b.Conn, "queue => 'dead', max_attempts => 1")
		killJob(t, b.Conn, dead)
		cancelled := enqueue(t, b.Conn, "queue => 'cancelled'")
		mustExec(t, b.Conn, "SELECT jobs_cancel($1)", cancelled)
		done := enqueue(t, b.Conn, "queue => 'done'")
		runJob(t, b.Conn, done, "NULL")

		c := enqueue(t, b.Conn, fmt.Sprintf("queue => 'c', depends_on => ARRAY[%d, %d, %d], unique_key => 'u'", done, cancelled, dead))
		requireDep(t, b.Conn, c, fmt.Sprintf("cancelled pending=2 cancelled_by=%d last_error=\"parent %d ended dead\"", dead, dead))
		// Born finished: its unique_key is free again.
		if again := enqueue(t, b.Conn, "queue => 'c', unique_key => 'u'"); again == c {
			t.Fatal("the unique_key of a job born cancelled is still held")
		}
		r := enqueue(t, b.Conn, fmt.Sprintf("queue => 'r', depends_on => ARRAY[%d, %d], on_parent_failure => 'run'", dead, cancelled))
		requireDep(t, b.Conn, r, "queued pending=0")
		w := enqueue(t, b.Conn, fmt.Sprintf("queue => 'w', depends_on => ARRAY[%d], on_parent_failure => 'run'", cancelled))
		requireDep(t, b.Conn, w, "queued pending=0")
		if p := pgtest.StorageProblems(t, b.Conn); len(p) > 0 {
			t.Fatal(p)
		}
	})

	// jobs_retry of a dead parent brings the descendants its death cancelled back to waiting;
	// they run once it is done.
	t.Run("RetryOfParentRevivesDescendants", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		a := enqueue(t, b.Conn, "queue => 'a', max_attempts => 1")
		bb := enqueue(t, b.Conn, fmt.Sprintf("queue => 'b', depends_on => ARRAY[%d]", a))
		c := enqueue(t, b.Conn, fmt.Sprintf("queue => 'c', depends_on => ARRAY[%d]", bb))
		// o is cancelled by an operator before a dies: no parent's end cancelled it, so no
		// parent's retry brings it back.
		o := enqueue(t, b.Conn, fmt.Sprintf("queue => 'o', depends_on => ARRAY[%d]", bb))
		mustExec(t, b.Conn, "SELECT jobs_cancel($1)", o)
		killJob(t, b.Conn, a)
		requireDep(t, b.Conn, c, fmt.Sprintf("cancelled pending=1 cancelled_by=%d last_error=\"parent %d ended cancelled\"", bb, bb))

		if !queryOne[bool](t, b.Conn, "SELECT jobs_retry($1)", a) {
			t.Fatal("jobs_retry(a) returned false")
		}
		requireDep(t, b.Conn, a, "queued last_error=\"boom\"")
		requireDep(t, b.Conn, bb, fmt.Sprintf("waiting pending=1 last_error=\"parent %d ended dead\"", a))
		requireDep(t, b.Conn, c, fmt.Sprintf("waiting pending=1 last_error=\"parent %d ended cancelled\"", bb))
		requireDep(t, b.Conn, o, "cancelled pending=1")
		if jobs := claim(t, b.Conn, "w", 10, []string{"b", "c", "o"}, "1 minute"); len(jobs) != 0 {
			t.Fatalf("claimed revived jobs before their parents ran: %v", jobs)
		}
		runJob(t, b.Conn, a, "NULL")
		requireDep(t, b.Conn, bb, fmt.Sprintf("queued pending=0 last_error=\"parent %d ended dead\"", a))
		runJob(t, b.Conn, bb, "NULL")
		requireDep(t, b.Conn, c, fmt.Sprintf("queued pending=0 last_error=\"parent %d ended cancelled\"", bb))
		runJob(t, b.Conn, c, "NULL")
		requireDep(t, b.Conn, o, "cancelled pending=0")
		if p := pgtest.StorageProblems(t, b.Conn); len(p) > 0 {
			t.Fatal(p)
		}
	})

	t.Run("RetryManyOfParentRevivesDescendants", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		a := enqueue(t, b.Conn, "queue => 'a', max_attempts => 1")
		bb := enqueue(t, b.Conn, fmt.Sprintf("queue => 'b', depends_on => ARRAY[%d]", a))
		c := enqueue(t, b.Conn, fmt.Sprintf("queue => 'c', depends_on => ARRAY[%d]", bb))
		killJob(t, b.Conn, a)
		if n := queryOne[int32](t, b.Conn, "SELECT jobs_retry_many(ids => ARRAY[$1::bigint], states => '{dead}')", a); n != 1 {
			t.Fatalf("jobs_retry_many = %d, want 1", n)
		}
		requireDep(t, b.Conn, bb, fmt.Sprintf("waiting pending=1 last_error=\"parent %d ended dead\"", a))
		requireDep(t, b.Conn, c, fmt.Sprintf("waiting pending=1 last_error=\"parent %d ended cancelled\"", bb))
		runJob(t, b.Conn, a, "NULL")
		runJob(t, b.Conn, bb, "NULL")
		runJob(t, b.Conn, c, "NULL")
		if got := queryOne[string](t, b.Conn, "SELECT string_agg(state::text, ' ' ORDER BY id) FROM jobs"); got != "done done done" {
			t.Fatalf("jobs: %s, want all done", got)
		}
	})

	// A child cancelled by one dead parent, whose other parent then dies too: retrying the
	// first parent must not leave the child waiting for a parent that is dead (it can then
	// never run); it is cancelled again, naming the other parent, whose retry brings it back.
	t.Run("RetryOfOneParentWhileAnotherIsDead", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		p1 := enqueue(t, b.Conn, "queue => 'p1', max_attempts => 1")
		p2 := enqueue(t, b.Conn, "queue => 'p2', max_attempts => 1")
		c := enqueue(t, b.Conn, fmt.Sprintf("queue => 'c', depends_on => ARRAY[%d, %d]", p1, p2))
		killJob(t, b.Conn, p1)
		killJob(t, b.Conn, p2)
		requireDep(t, b.Conn, c, fmt.Sprintf("cancelled pending=2 cancelled_by=%d last_error=\"parent %d ended dead\"", p1, p1))
		mustExec(t, b.Conn, "SELECT jobs_retry($1)", p1)
		if got := getDep(t, b.Conn, c); got.State == "waiting" {
			t.Errorf("after jobs_retry(p1) the child is %s, waiting for p2, which is dead and has no reason to wake it", got)
		}
	})

	// Every way a parent ends dead or cancelled cancels its waiting children in the same
	// transaction (the trigger jobs_finished_cascade): a lease that expired on the last
	// attempt (jobs_requeue_expired), the worker's jobs_cancel, jobs_cancel_many.
	t.Run("EveryBadEndCascades", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		expired := enqueue(t, b.Conn, "queue => 'expired', max_attempts => 1")
		given := enqueue(t, b.Conn, "queue => 'given'")
		bulk := enqueue(t, b.Conn, "queue => 'bulk'")
		many := enqueue(t, b.Conn, "queue => 'many'")
		children := map[int64]int64{}
		for _, p := range []int64{expired, given, bulk, many} {
			children[p] = enqueue(t, b.Conn, fmt.Sprintf("queue => 'c%d', depends_on => ARRAY[%d]", p, p))
		}
		j := claimOne(t, b.Conn, "w", "expired", "1 millisecond")
		waitLeasesExpired(t, b.Conn)
		if n := queryOne[int32](t, b.Conn, "SELECT jobs_requeue_expired()"); n != 1 || j.ID != expired {
			t.Fatalf("jobs_requeue_expired() = %d", n)
		}
		at := claimJob(t, b.Conn, given)
		if !queryOne[bool](t, b.Conn, "SELECT jobs_cancel($1, $2, 'cannot succeed')", given, at) {
			t.Fatal("worker's jobs_cancel returned false")
		}
		claimJob(t, b.Conn, bulk)
		if n := queryOne[int32](t, b.Conn, "SELECT jobs_cancel_many(ids => ARRAY[$1, $2]::bigint[], states => '{queued, running}')", bulk, many); n != 2 {
			t.Fatalf("jobs_cancel_many = %d, want 2", n)
		}
		for p, c := range children {
			r := getDep(t, b.Conn, p)
			requireDep(t, b.Conn, c, fmt.Sprintf("cancelled pending=1 cancelled_by=%d last_error=\"parent %d ended %s\"", p, p, r.State))
		}
		if p := pgtest.StorageProblems(t, b.Conn); len(p) > 0 {
			t.Fatal(p)
		}
	})

	// A waiting job is live: it holds its unique_key, so enqueueing the key again returns it.
	t.Run("WaitingJobHoldsItsUniqueKey", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		a := enqueue(t, b.Conn, "queue => 'a'")
		c := enqueue(t, b.Conn, fmt.Sprintf("queue => 'c', unique_key => 'k', depends_on => ARRAY[%d]", a))
		if again := enqueue(t, b.Conn, "queue => 'c', unique_key => 'k'"); again != c {
			t.Fatalf("enqueue of the key of waiting job %d returned %d", c, again)
		}
		mustExec(t, b.Conn, "SELECT jobs_cancel($1)", c)
		if again := enqueue(t, b.Conn, "queue => 'c', unique_key => 'k'"); again == c {
			t.Fatal("the key of a cancelled waiting job is still held")
		}
	})

	t.Run("ListWaiting", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		a := enqueue(t, b.Conn, "queue => 'a'")
		c1 := enqueue(t, b.Conn, fmt.Sprintf("queue => 'c', depends_on => ARRAY[%d]", a))
		c2 := enqueue(t, b.Conn, fmt.Sprintf("queue => 'd', depends_on => ARRAY[%d, %d]", a, c1))
		if got := queryList[int64](t, b.Conn, "SELECT id FROM jobs_list(state => 'waiting')"); !slices.Equal(got, []int64{c2, c1}) {
			t.Fatalf("jobs_list(waiting) = %v, want [%d %d]", got, c2, c1)
		}
		if got := queryList[int64](t, b.Conn, "SELECT id FROM jobs_list(state => 'waiting', queue => 'c')"); !slices.Equal(got, []int64{c1}) {
			t.Fatalf("jobs_list(waiting, c) = %v", got)
		}
		if got := queryList[int64](t, b.Conn, "SELECT id FROM jobs_list(state => 'waiting', before_id => $1)", c2); !slices.Equal(got, []int64{c1}) {
			t.Fatalf("jobs_list(waiting, before c2) = %v", got)
		}
		runJob(t, b.Conn, a, "NULL")
		if got := queryList[int64](t, b.Conn, "SELECT id FROM jobs_list(state => 'waiting')"); !slices.Equal(got, []int64{c2}) {
			t.Fatalf("jobs_list(waiting) after a = %v, want [%d]", got, c2)
		}
	})

	// A done parent deleted (jobs_delete_many) before its child is claimed is missing from
	// parent_results; the child still runs.
	t.Run("DeletedParentMissingFromParentResults", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		p1 := enqueue(t, b.Conn, "queue => 'p1'")
		p2 := enqueue(t, b.Conn, "queue => 'p2'")
		c := enqueue(t, b.Conn, fmt.Sprintf("queue => 'c', depends_on => ARRAY[%d, %d]", p1, p2))
		runJob(t, b.Conn, p1, `'1'`)
		runJob(t, b.Conn, p2, `'2'`)
		if n := queryOne[int32](t, b.Conn, "SELECT jobs_delete_many(ids => ARRAY[$1::bigint], states => '{done}')", p1); n != 1 {
			t.Fatalf("jobs_delete_many = %d", n)
		}
		if id, _, pr, _ := claimWithResults(t, b.Conn, "c"); id != c || pr != fmt.Sprintf(`{"%d": 2}`, p2) {
			t.Fatalf("claimed %d with parent_results %s", id, pr)
		}
	})

	// A descendant brought back takes its unique_key again. When a live job took the key
	// meanwhile, that job does the descendant's work: jobs_retry and jobs_retry_many of the
	// parent retry it and leave that descendant cancelled, failing for no key.
	t.Run("RetryOfParentWhenADescendantsKeyIsTaken", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		for i, retry := range []string{"SELECT jobs_retry($1)::int", "SELECT jobs_retry_many(ids => ARRAY[$1::bigint])"} {
			p := enqueue(t, b.Conn, fmt.Sprintf("queue => 'p%d', max_attempts => 1", i))
			key := fmt.Sprintf("k%d", i)
			c := enqueue(t, b.Conn, fmt.Sprintf("queue => 'c', unique_key => '%s', depends_on => ARRAY[%d]", key, p))
			killJob(t, b.Conn, p)
			if other := enqueue(t, b.Conn, fmt.Sprintf("queue => 'c', unique_key => '%s'", key)); other == c {
				t.Fatal("the key of the cancelled child is still held")
			}
			n, err := queryOneErr[int32](b.Conn, retry, p)
			if err != nil || n != 1 {
				t.Fatalf("%s of the parent = %d, %v; want 1 (it never fails for a descendant's key)", retry, n, err)
			}
			requireDep(t, b.Conn, c, fmt.Sprintf("cancelled pending=1 cancelled_by=%d last_error=\"parent %d ended dead\"", p, p))
		}
		if p := pgtest.StorageProblems(t, b.Conn); len(p) > 0 {
			t.Fatal(p)
		}
	})

	// jobs_complete_and_claim completing the last parent can claim the child it released in
	// the same call, with the result it just stored.
	t.Run("CompleteAndClaimTakesTheChildItReleased", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		p := enqueue(t, b.Conn, "queue => 'q'")
		c := enqueue(t, b.Conn, fmt.Sprintf("queue => 'q', depends_on => ARRAY[%d]", p))
		at := claimJob(t, b.Conn, p)
		var completed []int64
		var id int64
		var pr string
		if err := b.Conn.QueryRow(t.Context(), `
			SELECT completed, id, parent_results::text
			FROM jobs_complete_and_claim('w', ARRAY[$1::bigint], ARRAY[$2::int], 1, ARRAY['q'], '1 minute', ARRAY['{"p": 1}']::jsonb[])`,
			p, at).Scan(&completed, &id, &pr); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(completed, []int64{p}) || id != c || pr != fmt.Sprintf(`{"%d": {"p": 1}}`, p) {
			t.Fatalf("jobs_complete_and_claim: completed %v, claimed %d with %s", completed, id, pr)
		}
	})

	t.Run("CancelWaitingJob", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		a := enqueue(t, b.Conn, "queue => 'a'")
		c := enqueue(t, b.Conn, fmt.Sprintf("queue => 'c', depends_on => ARRAY[%d], notify_finished => true", a))
		g := enqueue(t, b.Conn, fmt.Sprintf("queue => 'g', depends_on => ARRAY[%d]", c))
		if !queryOne[bool](t, b.Conn, "SELECT jobs_cancel($1)", c) {
			t.Fatal("jobs_cancel of a waiting job returned false")
		}
		requireDep(t, b.Conn, c, "cancelled pending=1")
		requireDep(t, b.Conn, g, fmt.Sprintf("cancelled pending=1 cancelled_by=%d last_error=\"parent %d ended cancelled\"", c, c))
		if queryOne[bool](t, b.Conn, "SELECT jobs_cancel($1)", c) {
			t.Fatal("second jobs_cancel returned true")
		}
		// The parent's completion counts, but does not bring the cancelled child back.
		runJob(t, b.Conn, a, "NULL")
		requireDep(t, b.Conn, c, "cancelled pending=0")
		if jobs := claim(t, b.Conn, "w", 10, nil, "1 minute"); len(jobs) != 0 {
			t.Fatalf("claimed %v", jobs)
		}
		// jobs_retry now queues it (its parent is done), and its child comes back waiting.
		mustExec(t, b.Conn, "SELECT jobs_retry($1)", c)
		requireDep(t, b.Conn, c, "queued pending=0")
		requireDep(t, b.Conn, g, fmt.Sprintf("waiting pending=1 last_error=\"parent %d ended cancelled\"", c))
	})

	t.Run("CancelManyTakesWaitingJobs", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		a := enqueue(t, b.Conn, "queue => 'a'")
		c := enqueue(t, b.Conn, fmt.Sprintf("queue => 'c', depends_on => ARRAY[%d]", a))
		if n := queryOne[int32](t, b.Conn, "SELECT jobs_cancel_many(states => '{waiting}')"); n != 1 {
			t.Fatalf("jobs_cancel_many(waiting) = %d, want 1", n)
		}
		requireDep(t, b.Conn, c, "cancelled pending=1")
		requireDep(t, b.Conn, a, "queued")
	})

	// REPEATABLE READ: two transactions completing the last two parents of one child. The
	// second waits for the first's lock on the child, then gets 40001 once the first
	// commits (documented in _jobs_finished); retried, it releases the child.
	t.Run("RepeatableReadLastTwoParents", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		p1 := enqueue(t, b.Conn, "queue => 'p1'")
		p2 := enqueue(t, b.Conn, "queue => 'p2'")
		c := enqueue(t, b.Conn, fmt.Sprintf("queue => 'c', depends_on => ARRAY[%d, %d]", p1, p2))
		at1, at2 := claimJob(t, b.Conn, p1), claimJob(t, b.Conn, p2)
		c1, c2 := b.Connect(t), b.Connect(t)
		rr := pgx.TxOptions{IsoLevel: pgx.RepeatableRead}
		tx1, err := c1.BeginTx(t.Context(), rr)
		if err != nil {
			t.Fatal(err)
		}
		defer tx1.Rollback(t.Context())
		tx2, err := c2.BeginTx(t.Context(), rr)
		if err != nil {
			t.Fatal(err)
		}
		defer tx2.Rollback(t.Context())
		// Both snapshots are taken before either completion.
		mustExec(t, tx1, "SELECT 1")
		mustExec(t, tx2, "SELECT 1")
		if !queryOne[bool](t, tx1, "SELECT jobs_complete($1, $2)", p1, at1) {
			t.Fatal("jobs_complete(p1) returned false")
		}
		second := make(chan error, 1)
		go func() {
			var ok bool
			second <- tx2.QueryRow(t.Context(), "SELECT jobs_complete($1, $2)", p2, at2).Scan(&ok)
		}()
		waitWaiting(t, b, c2, "Lock")
		if err := tx1.Commit(t.Context()); err != nil {
			t.Fatal(err)
		}
		err = <-second
		pgtest.RequirePgError(t, err, "40001")
		requireDep(t, b.Conn, c, "waiting pending=1")
		_ = tx2.Rollback(t.Context())
		// The retry, as the caller must do it.
		if !queryOne[bool](t, c2, "SELECT jobs_complete($1, $2)", p2, at2) {
			t.Fatal("retried jobs_complete(p2) returned false")
		}
		requireDep(t, b.Conn, c, "queued pending=0")
	})
}

func TestWorkflow(t *testing.T) {
	t.Parallel()

	// Steps listed children first: inserted parents first all the same, so every parent's
	// id is lower than its children's; workflow_id is the first step's id.
	t.Run("EnqueueIdsResultsByStepName", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		other := enqueue(t, b.Conn, "queue => 'other'")
		steps := `[
			{"name": "join", "kind": "j", "queue": "join", "depends_on": ["left", "right"], "payload": {"x": 1}},
			{"name": "right", "kind": "r", "queue": "right", "depends_on": ["fetch"], "priority": 3},
			{"name": "left", "kind": "l", "queue": "left", "depends_on": ["fetch"]},
			{"name": "fetch", "kind": "f", "queue": "fetch", "max_attempts": 2}
		]`
		rows, err := b.Conn.Query(t.Context(), "SELECT name, id FROM jobs_enqueue_workflow($1::jsonb)", steps)
		if err != nil {
			t.Fatal(err)
		}
		got, err := pgx.CollectRows(rows, pgx.RowToStructByPos[step])
		if err != nil {
			t.Fatal(err)
		}
		f := other + 1
		want := []step{{"fetch", f}, {"right", f + 1}, {"left", f + 2}, {"join", f + 3}}
		if !slices.Equal(got, want) {
			t.Fatalf("jobs_enqueue_workflow returned %v, want %v (depth, then array order)", got, want)
		}
		if got := queryOne[string](t, b.Conn, `
			SELECT string_agg(format('%s:%s:%s:%s:%s:%s', workflow_step, kind, state, workflow_id, priority, max_attempts), ' ' ORDER BY id)
			FROM jobs WHERE workflow_id IS NOT NULL`); got != fmt.Sprintf("fetch:f:queued:%d:0:2 right:r:waiting:%d:3:5 left:l:waiting:%d:0:5 join:j:waiting:%d:0:5", f, f, f, f) {
			t.Fatalf("steps: %s", got)
		}
		var wf int64
		var deps []int64
		if err := b.Conn.QueryRow(t.Context(), "SELECT workflow_id, depends_on FROM jobs_get($1)", f+3).Scan(&wf, &deps); err != nil {
			t.Fatal(err)
		}
		if wf != f || !slices.Equal(deps, []int64{f + 1, f + 2}) {
			t.Fatalf("jobs_get(join): workflow_id %d depends_on %v", wf, deps)
		}
		runJob(t, b.Conn, f, `'{"rows": 10}'`)
		id, _, pr, _ := claimWithResults(t, b.Conn, "left")
		if id != f+2 || pr != `{"fetch": {"rows": 10}}` {
			t.Fatalf("left claimed as %d with parent_results %s", id, pr)
		}
		mustExec(t, b.Conn, "SELECT jobs_complete($1, 1, '\"L\"')", id)
		runJob(t, b.Conn, f+1, `'"R"'`)
		id, _, pr, _ = claimWithResults(t, b.Conn, "join")
		if id != f+3 || pr != `{"left": "L", "right": "R"}` {
			t.Fatalf("join claimed as %d with parent_results %s", id, pr)
		}
		if got := queryOne[string](t, b.Conn, "SELECT payload::text FROM jobs WHERE id = $1", id); got != `{"x": 1}` {
			t.Fatalf("join's payload %s", got)
		}
	})

	t.Run("CancelWorkflowFencesRunningStep", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		ids := enqueueWorkflow(t, b.Conn, `[
			{"name": "a", "kind": "k", "queue": "a"},
			{"name": "b", "kind": "k", "queue": "b", "depends_on": ["a"]},
			{"name": "c", "kind": "k", "queue": "c", "depends_on": ["a"]},
			{"name": "d", "kind": "k", "queue": "d", "depends_on": ["b", "c"]}
		]`)
		unrelated := enqueue(t, b.Conn, "queue => 'other'")
		attempt := claimJob(t, b.Conn, ids["a"])
		if n := queryOne[int32](t, b.Conn, "SELECT jobs_cancel_workflow($1)", ids["a"]); n != 4 {
			t.Fatalf("jobs_cancel_workflow = %d, want 4", n)
		}
		if queryOne[bool](t, b.Conn, "SELECT jobs_complete($1, $2)", ids["a"], attempt) {
			t.Fatal("the cancelled running step's jobs_complete returned true")
		}
		if got := queryOne[string](t, b.Conn, "SELECT string_agg(state::text, ' ' ORDER BY id) FROM jobs WHERE workflow_id = $1", ids["a"]); got != "cancelled cancelled cancelled cancelled" {
			t.Fatalf("steps: %s", got)
		}
		requireDep(t, b.Conn, unrelated, "queued")
		if n := queryOne[int32](t, b.Conn, "SELECT jobs_cancel_workflow($1)", ids["a"]); n != 0 {
			t.Fatalf("second jobs_cancel_workflow = %d, want 0", n)
		}
		if n := queryOne[int32](t, b.Conn, "SELECT jobs_cancel_workflow(999999)"); n != 0 {
			t.Fatalf("jobs_cancel_workflow(unknown) = %d, want 0", n)
		}
		if p := pgtest.StorageProblems(t, b.Conn); len(p) > 0 {
			t.Fatal(p)
		}
	})

	// Finished steps keep their state; a step its parent's cancellation releases
	// (on_parent_failure 'run') is cancelled too, not left queued.
	t.Run("CancelWorkflowKeepsFinishedStepsAndCatchesReleasedOnes", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		ids := enqueueWorkflow(t, b.Conn, `[
			{"name": "a", "kind": "k", "queue": "a"},
			{"name": "b", "kind": "k", "queue": "b", "depends_on": ["a"]},
			{"name": "cleanup", "kind": "k", "queue": "cleanup", "depends_on": ["b"], "on_parent_failure": "run"}
		]`)
		runJob(t, b.Conn, ids["a"], "NULL")
		if n := queryOne[int32](t, b.Conn, "SELECT jobs_cancel_workflow($1)", ids["a"]); n != 2 {
			t.Fatalf("jobs_cancel_workflow = %d, want 2", n)
		}
		if got := queryOne[string](t, b.Conn, "SELECT string_agg(workflow_step || '=' || state, ' ' ORDER BY id) FROM jobs"); got != "a=done b=cancelled cleanup=cancelled" {
			t.Fatalf("steps: %s", got)
		}
	})

	// Refused graphs insert nothing: cycles of every length, duplicate and unknown names.
	t.Run("RefusedGraphsInsertNothing", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		enqueue(t, b.Conn, "queue => 'other'")
		before := jobstest.TableChecksum(t, b.Conn)
		for _, tc := range []struct{ name, steps, message string }{
			{"SelfDependency", `[{"name": "a", "kind": "k", "depends_on": ["a"]}]`, "cycle"},
			{"TwoCycle", `[{"name": "a", "kind": "k", "depends_on": ["b"]}, {"name": "b", "kind": "k", "depends_on": ["a"]}]`, "cycle"},
			{"ThreeCycleBehindARoot", `[{"name": "root", "kind": "k"},
				{"name": "a", "kind": "k", "depends_on": ["root", "c"]},
				{"name": "b", "kind": "k", "depends_on": ["a"]},
				{"name": "c", "kind": "k", "depends_on": ["b"]}]`, "cycle"},
			{"DuplicateName", `[{"name": "a", "kind": "k"}, {"name": "a", "kind": "k"}]`, `two steps named "a"`},
			{"UnknownStep", `[{"name": "a", "kind": "k"}, {"name": "b", "kind": "k", "depends_on": ["a", "z"]}]`, `unknown step "z"`},
			{"BadStepAfterGoodOnes", `[{"name": "a", "kind": "k"}, {"name": "b", "kind": "k", "depends_on": ["a"], "max_attempts": 0}]`, "max_attempts"},
		} {
			_, err := b.Conn.Exec(t.Context(), "SELECT * FROM jobs_enqueue_workflow($1::jsonb)", tc.steps)
			pgErr := jobstest.RequireInvalid(t, err, "steps")
			if !strings.HasPrefix(pgErr.Message, "jobs_enqueue_workflow: steps ") || !strings.Contains(pgErr.Message, tc.message) {
				t.Errorf("%s: message %q, want one naming steps and saying %q", tc.name, pgErr.Message, tc.message)
			}
		}
		if jobstest.TableChecksum(t, b.Conn) != before {
			t.Fatal("refused workflows changed jobs")
		}
		if n := queryOne[int64](t, b.Conn, "SELECT count(*) FROM jobs_dependencies"); n != 0 {
			t.Fatalf("refused workflows left %d dependencies", n)
		}
	})

	// A deep chain: the cascade is a loop, not recursion.
	t.Run("DeepChainCascade", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		const n = 500
		var steps []map[string]any
		for i := range n {
			s := map[string]any{"name": fmt.Sprint(i), "kind": "k", "queue": fmt.Sprintf("q%d", i), "max_attempts": 1}
			if i > 0 {
				s["depends_on"] = []string{fmt.Sprint(i - 1)}
			}
			steps = append(steps, s)
		}
		js, err := json.Marshal(steps)
		if err != nil {
			t.Fatal(err)
		}
		ids := enqueueWorkflow(t, b.Conn, string(js))
		killJob(t, b.Conn, ids["0"])
		if got := queryOne[int64](t, b.Conn, "SELECT count(*) FROM jobs WHERE state = 'cancelled' AND cancelled_by IS NOT NULL"); got != n-1 {
			t.Fatalf("%d steps cancelled by the cascade, want %d", got, n-1)
		}
		mustExec(t, b.Conn, "SELECT jobs_retry($1)", ids["0"])
		if got := queryOne[int64](t, b.Conn, "SELECT count(*) FROM jobs WHERE state = 'waiting'"); got != n-1 {
			t.Fatalf("%d steps waiting after the retry, want %d", got, n-1)
		}
	})
}
