package sqltest

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/skiplock/skiplock/tests/internal/jobstest"
)

// finishedListener is a session LISTENing on jobs_finished.
type finishedListener struct {
	conn *pgx.Conn
}

func listenFinished(t *testing.T, b *testBundle) *finishedListener {
	t.Helper()
	l := &finishedListener{conn: b.Connect(t)}
	mustExec(t, l.conn, "LISTEN jobs_finished")
	return l
}

// drain returns the payloads of jobs_finished delivered since the last drain, up to a
// sentinel NOTIFY committed from b.Conn (notifications arrive in commit order).
func (l *finishedListener) drain(t *testing.T, b *testBundle) []string {
	t.Helper()
	mustExec(t, b.Conn, "SELECT pg_notify('jobs_finished', 'sentinel')")
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	var payloads []string
	for {
		n, err := l.conn.WaitForNotification(ctx)
		if err != nil {
			t.Fatalf("waiting for notifications (got %v so far): %v", payloads, err)
		}
		if n.Payload == "sentinel" {
			return payloads
		}
		payloads = append(payloads, n.Payload)
	}
}

func ids(ids ...int64) []string {
	s := make([]string, len(ids))
	for i, id := range ids {
		s[i] = strconv.FormatInt(id, 10)
	}
	return s
}

// jobResult is a row of jobs_result.
type jobResult struct {
	State     string
	Result    *string
	LastError *string
}

func getResult(t *testing.T, q querier, id int64) (jobResult, bool) {
	t.Helper()
	var r jobResult
	err := q.QueryRow(t.Context(), "SELECT state::text, result::text, last_error FROM jobs_result($1)", id).
		Scan(&r.State, &r.Result, &r.LastError)
	if err == pgx.ErrNoRows {
		return r, false
	}
	if err != nil {
		t.Fatalf("jobs_result(%d): %v", id, err)
	}
	return r, true
}

func TestResults(t *testing.T) {
	t.Parallel()

	t.Run("StoredAndReturned", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		one := enqueue(t, b.Conn, "queue => 'one'")
		if r, ok := getResult(t, b.Conn, one); !ok || r.State != "queued" || r.Result != nil || r.LastError != nil {
			t.Fatalf("jobs_result of a queued job: %+v %v", r, ok)
		}
		runJob(t, b.Conn, one, `'{"sum": 3}'`)
		if r, _ := getResult(t, b.Conn, one); r.State != "done" || r.Result == nil || *r.Result != `{"sum": 3}` {
			t.Fatalf("jobs_result after complete: %+v", r)
		}
		if got := queryOne[string](t, b.Conn, "SELECT result::text FROM jobs_get($1)", one); got != `{"sum": 3}` {
			t.Fatalf("jobs_get.result = %s", got)
		}
		if _, ok := getResult(t, b.Conn, 999999); ok {
			t.Fatal("jobs_result of an unknown id returned a row")
		}

		// jobs_complete_many: one result per pair, NULL for none.
		x := enqueue(t, b.Conn, "queue => 'many'")
		y := enqueue(t, b.Conn, "queue => 'many'")
		jobs := claim(t, b.Conn, "w", 2, []string{"many"}, "1 minute")
		idList, attempts := fence(jobs)
		done := queryList[int64](t, b.Conn, `SELECT * FROM jobs_complete_many($1, $2, ARRAY['"x"', NULL]::jsonb[])`, idList, attempts)
		if len(done) != 2 {
			t.Fatalf("jobs_complete_many completed %v", done)
		}
		if got := queryOne[string](t, b.Conn, "SELECT string_agg(coalesce(result::text, 'NULL'), ' ' ORDER BY id) FROM jobs WHERE id IN ($1, $2)", x, y); got != `"x" NULL` {
			t.Fatalf("results %s", got)
		}

		// jobs_complete_and_claim: results for the pairs it completes.
		z := enqueue(t, b.Conn, "queue => 'cc'")
		at := claimJob(t, b.Conn, z)
		mustExec(t, b.Conn, `SELECT * FROM jobs_complete_and_claim('w', ARRAY[$1::bigint], ARRAY[$2::int], 0, results => ARRAY['[1, 2]']::jsonb[])`, z, at)
		if r, _ := getResult(t, b.Conn, z); r.State != "done" || *r.Result != "[1, 2]" {
			t.Fatalf("jobs_result after jobs_complete_and_claim: %+v", r)
		}

		// A dead job: its last_error.
		d := enqueue(t, b.Conn, "queue => 'dead', max_attempts => 1")
		killJob(t, b.Conn, d)
		if r, _ := getResult(t, b.Conn, d); r.State != "dead" || r.Result != nil || r.LastError == nil || *r.LastError != "boom" {
			t.Fatalf("jobs_result of a dead job: %+v", r)
		}
	})

	// A result over 1 MB is refused, naming result; the job stays running.
	t.Run("TooLarge", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		id := enqueue(t, b.Conn, "queue => 'q'")
		at := claimJob(t, b.Conn, id)
		big := "'\"' || repeat('x', 1048576) || '\"'"
		before := jobstest.TableChecksum(t, b.Conn)
		for _, tc := range []struct{ sql, param string }{
			{"SELECT jobs_complete($1, $2, (" + big + ")::jsonb)", "result"},
			{"SELECT * FROM jobs_complete_many(ARRAY[$1::bigint], ARRAY[$2::int], ARRAY[(" + big + ")::jsonb])", "results"},
			{"SELECT * FROM jobs_complete_and_claim('w', ARRAY[$1::bigint], ARRAY[$2::int], 1, NULL, '1 minute', ARRAY[(" + big + ")::jsonb])", "results"},
			{"SELECT jobs_checkpoint($1, $2, 's', (" + big + ")::jsonb)", "value"},
			{"SELECT jobs_progress($1, $2, (" + big + ")::jsonb)", "progress"},
		} {
			_, err := b.Conn.Exec(t.Context(), tc.sql, id, at)
			jobstest.RequireInvalid(t, err, tc.param)
		}
		if jobstest.TableChecksum(t, b.Conn) != before {
			t.Fatal("refused calls changed the job")
		}
		// Exactly 1 MB as text is accepted.
		if !queryOne[bool](t, b.Conn, "SELECT jobs_complete($1, $2, ('\"' || repeat('x', 1048574) || '\"')::jsonb)", id, at) {
			t.Fatal("a result of exactly 1 MB was refused")
		}
	})
}

// TestNotifyFinished: jobs enqueued with notify_finished NOTIFY jobs_finished with their id
// when they become done, dead or cancelled (also by a cascade), at commit; other jobs and
// other moves send nothing.
func TestNotifyFinished(t *testing.T) {
	t.Parallel()

	t.Run("DoneDeadCancelledOnly", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		l := listenFinished(t, b)
		done := enqueue(t, b.Conn, "queue => 'done', notify_finished => true")
		quiet := enqueue(t, b.Conn, "queue => 'quiet'")
		dead := enqueue(t, b.Conn, "queue => 'dead', notify_finished => true, max_attempts => 1")
		cancelled := enqueue(t, b.Conn, "queue => 'cancelled', notify_finished => true")
		retried := enqueue(t, b.Conn, "queue => 'retried', notify_finished => true, max_attempts => 2")
		parent := enqueue(t, b.Conn, "queue => 'parent', max_attempts => 1")
		child := enqueue(t, b.Conn, fmt.Sprintf("queue => 'child', depends_on => ARRAY[%d], notify_finished => true", parent))
		requirePayloads(t, l.drain(t, b))

		runJob(t, b.Conn, done, "NULL")
		runJob(t, b.Conn, quiet, "NULL")
		requirePayloads(t, l.drain(t, b), ids(done)...)
		killJob(t, b.Conn, dead)
		mustExec(t, b.Conn, "SELECT jobs_cancel($1)", cancelled)
		requirePayloads(t, l.drain(t, b), ids(dead, cancelled)...)

		// A failure with attempts left is no end.
		at := claimJob(t, b.Conn, retried)
		mustExec(t, b.Conn, "SELECT jobs_fail($1, $2, 'again', now())", retried, at)
		requirePayloads(t, l.drain(t, b))

		// The cascade's cancellation notifies the child, not the silent parent.
		killJob(t, b.Conn, parent)
		requirePayloads(t, l.drain(t, b), ids(child)...)

		// A job born cancelled (its parent already dead) notifies at once.
		born := enqueue(t, b.Conn, fmt.Sprintf("queue => 'born', depends_on => ARRAY[%d], notify_finished => true", parent))
		requirePayloads(t, l.drain(t, b), ids(born)...)
	})

	t.Run("AtCommitOnly", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		l := listenFinished(t, b)
		kept := enqueue(t, b.Conn, "queue => 'kept', notify_finished => true")
		rolled := enqueue(t, b.Conn, "queue => 'rolled', notify_finished => true")
		atKept, atRolled := claimJob(t, b.Conn, kept), claimJob(t, b.Conn, rolled)
		worker := b.Connect(t)

		tx, err := worker.Begin(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		mustExec(t, tx, "SELECT jobs_complete($1, $2)", rolled, atRolled)
		requirePayloads(t, l.drain(t, b))
		if err := tx.Rollback(t.Context()); err != nil {
			t.Fatal(err)
		}
		requirePayloads(t, l.drain(t, b))
		requireDep(t, b.Conn, rolled, "running")

		tx, err = worker.Begin(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		mustExec(t, tx, "SELECT jobs_complete($1, $2)", kept, atKept)
		requirePayloads(t, l.drain(t, b))
		if err := tx.Commit(t.Context()); err != nil {
			t.Fatal(err)
		}
		requirePayloads(t, l.drain(t, b), ids(kept)...)
	})
}

// claimCheckpoints claims job id and returns its attempt and checkpoints ("" for NULL).
func claimCheckpoints(t *testing.T, q querier, id int64) (int32, string) {
	t.Helper()
	queue := queryOne[string](t, q, "SELECT queue FROM jobs WHERE id = $1", id)
	got, attempt, _, cp := claimWithResults(t, q, queue)
	if got != id {
		t.Fatalf("claimed %d, want %d", got, id)
	}
	return attempt, cp
}

func TestCheckpoints(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id := enqueue(t, b.Conn, "queue => 'q', max_attempts => 3")
	at, cp := claimCheckpoints(t, b.Conn, id)
	if cp != "" {
		t.Fatalf("first claim's checkpoints %s, want NULL", cp)
	}
	for _, s := range []struct{ step, value string }{{"one", `{"x": 1}`}, {"two", `"v"`}, {"one", `2`}, {"none", "null"}} {
		if !queryOne[bool](t, b.Conn, "SELECT jobs_checkpoint($1, $2, $3, $4::jsonb)", id, at, s.step, s.value) {
			t.Fatalf("jobs_checkpoint(%s) returned false", s.step)
		}
	}
	mustExec(t, b.Conn, "SELECT jobs_fail($1, $2, 'crash', now())", id, at)
	// The failed attempt's holder is fenced out.
	if queryOne[bool](t, b.Conn, "SELECT jobs_checkpoint($1, $2, 'late', '1')", id, at) {
		t.Fatal("jobs_checkpoint of a stale attempt returned true")
	}
	at2, cp := claimCheckpoints(t, b.Conn, id)
	if want := `{"one": 2, "two": "v", "none": null}`; cp != want || at2 != at+1 {
		t.Fatalf("second claim: attempt %d checkpoints %s, want %d %s", at2, cp, at+1, want)
	}
	if queryOne[bool](t, b.Conn, "SELECT jobs_checkpoint($1, $2, 'late', '1')", id, at) {
		t.Fatal("jobs_checkpoint of the first attempt returned true under the second")
	}
	// Death and jobs_retry keep them too.
	mustExec(t, b.Conn, "SELECT jobs_fail($1, $2, 'crash', now())", id, at2)
	at3, _ := claimCheckpoints(t, b.Conn, id)
	mustExec(t, b.Conn, "SELECT jobs_fail($1, $2, 'crash')", id, at3)
	requireDep(t, b.Conn, id, `dead last_error="crash"`)
	mustExec(t, b.Conn, "SELECT jobs_retry($1)", id)
	_, cp = claimCheckpoints(t, b.Conn, id)
	if !strings.Contains(cp, `"two": "v"`) {
		t.Fatalf("checkpoints after jobs_retry: %s", cp)
	}
}

// TestCheckpointsSixteenMegabytesTogether: each value is at most 1 MB, and the checkpoints
// of one job at most 16 MB together; the save that would pass that is refused (naming value)
// and changes nothing.
func TestCheckpointsSixteenMegabytesTogether(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("writes 136 MB of checkpoints (each save rewrites them all)")
	}
	b := setup(t)
	id := enqueue(t, b.Conn, "queue => 'q'")
	at := claimJob(t, b.Conn, id)
	for i := range 16 {
		if !queryOne[bool](t, b.Conn, "SELECT jobs_checkpoint($1, $2, $3, to_jsonb(repeat('x', 1048000)))", id, at, fmt.Sprint(i)) {
			t.Fatalf("checkpoint %d refused", i)
		}
	}
	before := jobstest.TableChecksum(t, b.Conn)
	_, err := b.Conn.Exec(t.Context(), "SELECT jobs_checkpoint($1, $2, 'one too many', to_jsonb(repeat('x', 1048000)))", id, at)
	jobstest.RequireInvalid(t, err, "value")
	if jobstest.TableChecksum(t, b.Conn) != before {
		t.Fatal("the refused checkpoint changed the job")
	}
	// Replacing a saved step does not grow them.
	if !queryOne[bool](t, b.Conn, "SELECT jobs_checkpoint($1, $2, '0', to_jsonb(repeat('y', 1048000)))", id, at) {
		t.Fatal("replacing a step was refused")
	}
}

func TestProgress(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id := enqueue(t, b.Conn, "queue => 'q', max_attempts => 3")
	at := claimJob(t, b.Conn, id)
	if !queryOne[bool](t, b.Conn, `SELECT jobs_progress($1, $2, '{"done": 40, "of": 100}')`, id, at) {
		t.Fatal("jobs_progress returned false")
	}
	if got := queryOne[string](t, b.Conn, "SELECT progress::text FROM jobs_get($1)", id); got != `{"of": 100, "done": 40}` {
		t.Fatalf("jobs_get.progress = %s", got)
	}
	if got := queryOne[string](t, b.Conn, "SELECT progress::text FROM jobs_list(state => 'running')"); got != `{"of": 100, "done": 40}` {
		t.Fatalf("jobs_list.progress = %s", got)
	}
	mustExec(t, b.Conn, "SELECT jobs_fail($1, $2, 'crash', now())", id, at)
	before := jobstest.TableChecksum(t, b.Conn)
	if queryOne[bool](t, b.Conn, "SELECT jobs_progress($1, $2, '50')", id, at) {
		t.Fatal("jobs_progress of a stale attempt returned true")
	}
	if queryOne[bool](t, b.Conn, "SELECT jobs_progress(999999, 1, '50')") {
		t.Fatal("jobs_progress of an unknown job returned true")
	}
	if jobstest.TableChecksum(t, b.Conn) != before {
		t.Fatal("fenced-out jobs_progress changed the job")
	}
	at2 := claimJob(t, b.Conn, id)
	if !queryOne[bool](t, b.Conn, "SELECT jobs_progress($1, $2, NULL)", id, at2) {
		t.Fatal("jobs_progress(NULL) returned false")
	}
	if got := queryOne[*string](t, b.Conn, "SELECT progress::text FROM jobs_get($1)", id); got != nil {
		t.Fatalf("progress after clearing = %s", *got)
	}
	mustExec(t, b.Conn, "SELECT jobs_progress($1, $2, '100')", id, at2)
	mustExec(t, b.Conn, "SELECT jobs_complete($1, $2)", id, at2)
	if got := queryOne[string](t, b.Conn, "SELECT progress::text FROM jobs_get($1)", id); got != "100" {
		t.Fatalf("progress after completion = %s, want it kept", got)
	}
}

// TestRetentionKeepsWhatChildrenNeed: a done parent stays while a child is unfinished (the
// child's claim reads its result), a workflow's steps stay while any step is unfinished, and
// with done_retention 0 a job others wait for is kept as done.
func TestRetentionKeepsWhatChildrenNeed(t *testing.T) {
	t.Parallel()

	t.Run("PruneKeepsParentOfUnfinishedChild", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		p := enqueue(t, b.Conn, "queue => 'p'")
		q := enqueue(t, b.Conn, "queue => 'q'")
		c := enqueue(t, b.Conn, fmt.Sprintf("queue => 'c', depends_on => ARRAY[%d, %d]", p, q))
		plain := enqueue(t, b.Conn, "queue => 'plain'")
		runJob(t, b.Conn, plain, "NULL")
		runJob(t, b.Conn, p, `'"P"'`)
		if n := queryOne[int32](t, b.Conn, "SELECT jobs_prune('0')"); n != 1 {
			t.Fatalf("jobs_prune('0') with the child waiting = %d, want 1 (the plain job)", n)
		}
		runJob(t, b.Conn, q, `'"Q"'`)
		if n := queryOne[int32](t, b.Conn, "SELECT jobs_prune('0')"); n != 0 {
			t.Fatalf("jobs_prune('0') with the child queued = %d, want 0", n)
		}
		id, at, pr, _ := claimWithResults(t, b.Conn, "c")
		if n := queryOne[int32](t, b.Conn, "SELECT jobs_prune('0')"); n != 0 {
			t.Fatalf("jobs_prune('0') with the child running = %d, want 0", n)
		}
		if id != c || pr != fmt.Sprintf(`{"%d": "P", "%d": "Q"}`, p, q) {
			t.Fatalf("child claimed as %d with %s", id, pr)
		}
		mustExec(t, b.Conn, "SELECT jobs_complete($1, $2)", c, at)
		if n := queryOne[int32](t, b.Conn, "SELECT jobs_prune('0')"); n != 3 {
			t.Fatalf("jobs_prune('0') after the child finished = %d, want 3", n)
		}
		if n := queryOne[int64](t, b.Conn, "SELECT (SELECT count(*) FROM jobs) + (SELECT count(*) FROM jobs_dependencies)"); n != 0 {
			t.Fatalf("%d rows left in jobs and jobs_dependencies", n)
		}
	})

	t.Run("MaintainKeepsParentAndWorkflow", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		p := enqueue(t, b.Conn, "queue => 'p'")
		c := enqueue(t, b.Conn, fmt.Sprintf("queue => 'c', depends_on => ARRAY[%d]", p))
		ids := enqueueWorkflow(t, b.Conn, `[
			{"name": "a", "kind": "k", "queue": "wa"},
			{"name": "side", "kind": "k", "queue": "wside"},
			{"name": "b", "kind": "k", "queue": "wb", "depends_on": ["a"]}
		]`)
		runJob(t, b.Conn, p, "NULL")
		runJob(t, b.Conn, ids["a"], "NULL")
		runJob(t, b.Conn, ids["side"], "NULL")
		// Past done_retention (1 day by default); jobs_maintain looks at jobs created before
		// the cutoff only.
		mustExec(t, b.Conn, "UPDATE jobs SET created_at = created_at - interval '3 days'")
		mustExec(t, b.Conn, "UPDATE jobs SET finished_at = finished_at - interval '2 days' WHERE state = 'done'")
		if m := maintain(t, b.Conn, 10000); m.PrunedDone != 0 {
			t.Fatalf("jobs_maintain = %+v, want nothing pruned (a child and a workflow step unfinished)", m)
		}
		if n := queryOne[int32](t, b.Conn, "SELECT jobs_prune('1 day')"); n != 0 {
			t.Fatalf("jobs_prune = %d, want 0", n)
		}
		// The last step finishes now: within retention, so the workflow's steps all stay.
		runJob(t, b.Conn, ids["b"], "NULL")
		runJob(t, b.Conn, c, "NULL")
		if m := maintain(t, b.Conn, 10000); m.PrunedDone != 1 {
			t.Fatalf("jobs_maintain = %+v, want the parent pruned (its child finished), the workflow kept", m)
		}
		mustExec(t, b.Conn, "UPDATE jobs SET finished_at = finished_at - interval '2 days' WHERE state = 'done'")
		if m := maintain(t, b.Conn, 10000); m.PrunedDone != 4 {
			t.Fatalf("jobs_maintain = %+v, want the child and the 3 steps pruned", m)
		}
	})

	t.Run("ZeroRetentionKeepsJobsOthersWaitFor", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		mustExec(t, b.Conn, "UPDATE jobs_settings SET done_retention = '0'")
		p := enqueue(t, b.Conn, "queue => 'p'")
		enqueue(t, b.Conn, fmt.Sprintf("queue => 'c', depends_on => ARRAY[%d]", p))
		n := enqueue(t, b.Conn, "queue => 'n', notify_finished => true")
		plain := enqueue(t, b.Conn, "queue => 'plain'")
		runJob(t, b.Conn, p, `'"P"'`)
		runJob(t, b.Conn, plain, "NULL")
		// jobs_complete_many too.
		at := claimJob(t, b.Conn, n)
		mustExec(t, b.Conn, `SELECT * FROM jobs_complete_many(ARRAY[$1::bigint], ARRAY[$2::int], ARRAY['"N"']::jsonb[])`, n, at)
		if got := queryOne[string](t, b.Conn, "SELECT string_agg(id || '=' || state || ':' || coalesce(result::text, ''), ' ' ORDER BY id) FROM jobs WHERE state = 'done'"); got != fmt.Sprintf(`%d=done:"P" %d=done:"N"`, p, n) {
			t.Fatalf("done jobs: %s (want the parent and the notify_finished job kept, the plain one deleted)", got)
		}
		if r, ok := getResult(t, b.Conn, n); !ok || *r.Result != `"N"` {
			t.Fatalf("jobs_result of the notify_finished job: %+v %v", r, ok)
		}
		if _, ok := getResult(t, b.Conn, plain); ok {
			t.Fatal("the plain job was kept")
		}
	})
}
