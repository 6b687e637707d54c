package shardtest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/skiplock/skiplock/tests/pgtest"
)

// claimedJob is the part of a jobs_claimed row the workflow tests look at.
type claimedJob struct {
	id            int64
	attempt       int32
	kind          string
	parentResults map[string]any
	checkpoints   map[string]any
}

// claimThrough claims up to n jobs of queues through the proxy.
func claimThrough(t *testing.T, s *sharded, n int, queues ...string) []claimedJob {
	t.Helper()
	rows, err := s.proxy.Query(context.Background(),
		"SELECT id, attempt, kind, parent_results, checkpoints FROM jobs_claim('w', $1, $2) ORDER BY id", n, queues)
	if err != nil {
		t.Fatal(err)
	}
	jobs, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (claimedJob, error) {
		var j claimedJob
		err := row.Scan(&j.id, &j.attempt, &j.kind, &j.parentResults, &j.checkpoints)
		return j, err
	})
	if err != nil {
		t.Fatalf("jobs_claim of %v through the proxy: %v", queues, err)
	}
	return jobs
}

// wantInvalid checks that err is the proxy's own 22023 naming column (in the error's COLUMN
// field, as _jobs_invalid raises it).
func wantInvalid(t *testing.T, what string, err error, column string) {
	t.Helper()
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != "22023" || pgErr.ColumnName != column {
		t.Errorf("%s: got %v, want 22023 naming %s", what, err, column)
	}
}

// wantShardInvalid checks that err is a shard's 22023 naming param, passed on by PL/Proxy:
// it keeps the SQLSTATE and the message, not the COLUMN field.
func wantShardInvalid(t *testing.T, what string, err error, param string) {
	t.Helper()
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != "22023" || !strings.Contains(pgErr.Message, "REMOTE ERROR") ||
		!strings.Contains(pgErr.Message, ": "+param+" ") {
		t.Errorf("%s: got %v, want the shard's 22023 naming %s", what, err, param)
	}
}

// jsonText is v as compact JSON, for comparing decoded results.
func jsonText(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestWorkflowThroughProxy: a workflow enqueued through the proxy lives on one shard, that
// of its first step's queue, and runs to completion through the proxy: claims by queue,
// results through jobs_complete and jobs_complete_many, the child's parent_results by step
// name, checkpoints and progress kept across a failed attempt, jobs_result, the new columns
// of jobs_get, jobs_workflow, jobs_inspect and jobs_metrics.
func TestWorkflowThroughProxy(t *testing.T) {
	s := newSharded(t, 2)
	ctx := context.Background()
	p := s.proxy
	q := s.queueOnShard(t, "wf", 1)
	// A queue that would hash to shard 0: the workflow pins it to its own shard.
	other := s.queueOnShard(t, "wf-other", 0)

	steps := fmt.Sprintf(`[
		{"name": "fetch", "kind": "fetch", "queue": %q},
		{"name": "parse", "kind": "parse", "queue": %q},
		{"name": "store", "kind": "store", "queue": %q, "depends_on": ["fetch", "parse"], "notify_finished": true}
	]`, q, other, q)
	ids := pgtest.EnqueueWorkflow(t, p, steps)
	if len(ids) != 3 {
		t.Fatalf("jobs_enqueue_workflow returned %v, want 3 steps", ids)
	}
	for name, id := range ids {
		if shardOf(id) != 1 || one[int64](t, s.shards[1], "SELECT count(*) FROM jobs WHERE id = $1", id) != 1 {
			t.Errorf("step %s: job %d is not on shard 1, the shard of the first step's queue", name, id)
		}
	}
	if got := one[int32](t, p, "SELECT shard FROM jobs_proxy_queues WHERE queue = $1", other); got != 1 {
		t.Errorf("the second step's new queue is pinned to shard %d, want 1 (the workflow's)", got)
	}
	wf := one[int64](t, p, "SELECT workflow_id FROM jobs_get($1)", ids["store"])
	if wf != ids["fetch"] {
		t.Errorf("workflow_id %d, want the first step's id %d", wf, ids["fetch"])
	}
	if st := one[string](t, p, "SELECT state::text FROM jobs_get($1)", ids["store"]); st != "waiting" {
		t.Errorf("the child is %s through the proxy, want waiting", st)
	}
	if n := one[int64](t, p, "SELECT waiting FROM jobs_metrics() WHERE queue = $1", q); n != 1 {
		t.Errorf("jobs_metrics through the proxy counts %d waiting jobs in %s, want 1", n, q)
	}

	// The parents: one completed with jobs_complete, one with jobs_complete_many.
	parents := claimThrough(t, s, 10, q, other)
	if len(parents) != 2 || parents[0].id != ids["fetch"] || parents[1].id != ids["parse"] {
		t.Fatalf("claimed %+v, want the two parents (the child waits)", parents)
	}
	if parents[0].parentResults != nil || parents[0].checkpoints != nil {
		t.Errorf("a step without parents got parent_results %v, checkpoints %v; want NULLs", parents[0].parentResults, parents[0].checkpoints)
	}
	if !one[bool](t, p, "SELECT jobs_complete($1, $2, $3)", parents[0].id, parents[0].attempt, `{"pages": 3}`) {
		t.Fatal("jobs_complete with a result returned false")
	}
	if n := one[int64](t, p, "SELECT count(*) FROM jobs_complete_many($1, $2, $3::jsonb[])",
		[]int64{parents[1].id}, []int32{parents[1].attempt}, []string{`"parsed"`}); n != 1 {
		t.Fatalf("jobs_complete_many with results completed %d, want 1", n)
	}

	// The child: its parents' results by step name, a checkpoint and progress, a failure,
	// then the checkpoint again on the next attempt.
	child := claimThrough(t, s, 10, q, other)
	if len(child) != 1 || child[0].id != ids["store"] {
		t.Fatalf("claimed %+v, want the child", child)
	}
	if got, want := jsonText(t, child[0].parentResults), `{"fetch":{"pages":3},"parse":"parsed"}`; got != want {
		t.Errorf("parent_results through the proxy = %s, want %s", got, want)
	}
	c := child[0]
	if !one[bool](t, p, "SELECT jobs_checkpoint($1, $2, 'download', '42')", c.id, c.attempt) {
		t.Error("jobs_checkpoint returned false for the holder")
	}
	if !one[bool](t, p, `SELECT jobs_progress($1, $2, '{"done": 1, "of": 2}')`, c.id, c.attempt) {
		t.Error("jobs_progress returned false for the holder")
	}
	if one[bool](t, p, "SELECT jobs_checkpoint($1, $2, 'stale', '1')", c.id, c.attempt+1) {
		t.Error("jobs_checkpoint of another attempt returned true")
	}
	if one[bool](t, p, "SELECT jobs_progress($1, $2, '1')", c.id, c.attempt+1) {
		t.Error("jobs_progress of another attempt returned true")
	}
	if got := one[string](t, p, "SELECT progress::text FROM jobs_workflow($1) WHERE id = $2", wf, c.id); got != `{"of": 2, "done": 1}` {
		t.Errorf("jobs_workflow shows progress %s", got)
	}
	if st := one[string](t, p, "SELECT jobs_fail($1, $2, 'boom', now())::text", c.id, c.attempt); st != "queued" {
		t.Fatalf("jobs_fail = %s, want queued", st)
	}
	again := claimThrough(t, s, 10, q)
	if len(again) != 1 || again[0].id != c.id || again[0].attempt != c.attempt+1 {
		t.Fatalf("claimed %+v, want the child's next attempt", again)
	}
	if got := jsonText(t, again[0].checkpoints); got != `{"download":42}` {
		t.Errorf("checkpoints on the next attempt = %s, want {\"download\":42}", got)
	}
	if got := jsonText(t, again[0].parentResults); got != `{"fetch":{"pages":3},"parse":"parsed"}` {
		t.Errorf("parent_results on the next attempt = %s", got)
	}
	if !one[bool](t, p, "SELECT jobs_complete($1, $2, '[1, 2]')", c.id, again[0].attempt) {
		t.Fatal("the child's jobs_complete returned false")
	}

	var state, result string
	var lastError *string
	if err := p.QueryRow(ctx, "SELECT state::text, result::text, last_error FROM jobs_result($1)", c.id).Scan(&state, &result, &lastError); err != nil {
		t.Fatal(err)
	}
	if state != "done" || result != "[1, 2]" || lastError == nil || *lastError != "boom" {
		t.Errorf("jobs_result = %s, %s, %v; want done, [1, 2], boom", state, result, deref(lastError))
	}
	var progress, deps string
	var wfID int64
	if err := p.QueryRow(ctx, "SELECT result::text, progress::text, workflow_id, depends_on::text FROM jobs_get($1)", c.id).
		Scan(&result, &progress, &wfID, &deps); err != nil {
		t.Fatal(err)
	}
	if want := fmt.Sprintf("{%d,%d}", ids["fetch"], ids["parse"]); result != "[1, 2]" || progress != `{"of": 2, "done": 1}` || wfID != wf || deps != want {
		t.Errorf("jobs_get = result %s, progress %s, workflow %d, depends_on %s; want [1, 2], the progress, %d, %s", result, progress, wfID, deps, wf, want)
	}
	if n := one[int64](t, p, "SELECT count(*) FROM jobs_workflow($1) WHERE state = 'done'", wf); n != 3 {
		t.Errorf("jobs_workflow: %d steps done, want 3", n)
	}
	if n := one[int64](t, p, "SELECT count(*) FROM jobs_result(1024 * 999 + 1)"); n != 0 {
		t.Errorf("jobs_result of an unknown id of shard 1: %d rows, want none", n)
	}
	var wfCols int64
	if err := p.QueryRow(ctx, "SELECT count(*) FROM jobs_inspect($1) WHERE workflow_step = 'store' AND result = '[1, 2]'", c.id).Scan(&wfCols); err != nil || wfCols != 1 {
		t.Errorf("jobs_inspect through the proxy does not show the step and its result: %d, %v", wfCols, err)
	}
}

// TestParentsDecideTheShard: a job with parents lives on their shard, whatever its queue
// hashes to (an unpinned queue is pinned there). Parents on different shards, a queue pinned
// to another shard than the parents', an id naming no configured shard and a workflow whose
// steps' queues live on different shards are 22023 (naming depends_on, or steps), and
// nothing is enqueued anywhere.
func TestParentsDecideTheShard(t *testing.T) {
	s := newSharded(t, 2)
	ctx := context.Background()
	p := s.proxy
	q0, q1 := s.queueOnShard(t, "parents", 0), s.queueOnShard(t, "parents", 1)
	p0 := one[int64](t, p, "SELECT jobs_enqueue('parent', '{}', $1)", q0)
	p1 := one[int64](t, p, "SELECT jobs_enqueue('parent', '{}', $1)", q1)
	p1b := one[int64](t, p, "SELECT jobs_enqueue('parent', '{}', $1)", q1)

	t.Run("ChildOnItsParentsShard", func(t *testing.T) {
		fresh := s.queueOnShard(t, "child", 0) // would hash to shard 0
		child := one[int64](t, p, "SELECT jobs_enqueue('child', '{}', $1, depends_on => $2)", fresh, []int64{p1, p1b})
		if shardOf(child) != 1 || one[string](t, s.shards[1], "SELECT state::text FROM jobs WHERE id = $1", child) != "waiting" {
			t.Fatalf("child %d is not waiting on shard 1, its parents' shard", child)
		}
		if got := one[int32](t, p, "SELECT shard FROM jobs_proxy_queues WHERE queue = $1", fresh); got != 1 {
			t.Errorf("the child's new queue is pinned to shard %d, want 1", got)
		}
		// The parents run; the child gets their results keyed by id.
		parents := claimThrough(t, s, 10, q1)
		if len(parents) != 2 {
			t.Fatalf("claimed %+v, want the two parents", parents)
		}
		for _, j := range parents {
			if !one[bool](t, p, "SELECT jobs_complete($1, $2, to_jsonb($1::bigint))", j.id, j.attempt) {
				t.Fatalf("jobs_complete(%d) returned false", j.id)
			}
		}
		got := claimThrough(t, s, 10, fresh)
		want := fmt.Sprintf(`{"%d":%d,"%d":%d}`, p1, p1, p1b, p1b)
		if len(got) != 1 || got[0].id != child || jsonText(t, got[0].parentResults) != want {
			t.Fatalf("claimed %+v, want the child with parent_results %s", got, want)
		}
		// A job of a queue already pinned to the parents' shard goes there as usual.
		if id := one[int64](t, p, "SELECT jobs_enqueue('child', queue => $1, depends_on => ARRAY[$2::bigint])", q0, p0); shardOf(id) != 0 {
			t.Errorf("child of a shard-0 parent in a shard-0 queue: id %d", id)
		}
		// No parents (an empty array): the queue decides.
		if id := one[int64](t, p, "SELECT jobs_enqueue('child', queue => $1, depends_on => '{}')", q1); shardOf(id) != 1 {
			t.Errorf("job with depends_on '{}' in a shard-1 queue: id %d", id)
		}
	})

	t.Run("Refused", func(t *testing.T) {
		unpinned := s.queueOnShard(t, "refused", 0)
		_, err := p.Exec(ctx, "SELECT jobs_enqueue('bad', '{}', $1, depends_on => $2)", unpinned, []int64{p0, p1})
		wantInvalid(t, "parents on shards 0 and 1", err, "depends_on")
		if err != nil && !strings.Contains(err.Error(), "shards 0, 1") {
			t.Errorf("the error does not name the parents' shards: %v", err)
		}
		_, err = p.Exec(ctx, "SELECT jobs_enqueue('bad', '{}', $1, depends_on => ARRAY[$2::bigint])", q0, p1)
		wantInvalid(t, "a queue pinned to shard 0, the parent on shard 1", err, "depends_on")
		_, err = p.Exec(ctx, "SELECT jobs_enqueue('bad', '{}', $1, depends_on => ARRAY[$2::bigint, 1024 * 7 + 3])", q1, p1)
		wantInvalid(t, "a parent id of shard 3 of a 2-shard proxy", err, "depends_on")
		// The shard's own checks still answer: a NULL among the parents, an unknown parent.
		_, err = p.Exec(ctx, "SELECT jobs_enqueue('bad', '{}', $1, depends_on => ARRAY[$2::bigint, NULL])", q1, p1)
		wantShardInvalid(t, "a NULL parent", err, "depends_on")
		_, err = p.Exec(ctx, "SELECT jobs_enqueue('bad', '{}', $1, depends_on => ARRAY[1024 * 999 + 1])", q1)
		wantShardInvalid(t, "an unknown parent of shard 1", err, "depends_on")

		a, b := s.queueOnShard(t, "wf-a", 0), s.queueOnShard(t, "wf-b", 1)
		one[int64](t, p, "SELECT jobs_enqueue('pin', '{}', $1)", a)
		one[int64](t, p, "SELECT jobs_enqueue('pin', '{}', $1)", b)
		_, err = p.Exec(ctx, "SELECT * FROM jobs_enqueue_workflow($1)",
			fmt.Sprintf(`[{"name": "x", "kind": "bad", "queue": %q}, {"name": "y", "kind": "bad", "queue": %q, "depends_on": ["x"]}]`, a, b))
		wantInvalid(t, "a workflow over queues of shards 0 and 1", err, "steps")
		_, err = p.Exec(ctx, "SELECT * FROM jobs_enqueue_workflow($1)", `[{"name": "x"}]`)
		wantShardInvalid(t, "a step without kind", err, "steps")

		for i, sh := range s.shards {
			if n := one[int64](t, sh, "SELECT count(*) FROM jobs WHERE kind = 'bad'"); n != 0 {
				t.Errorf("shard %d holds %d jobs of the refused calls", i, n)
			}
		}
		if n := one[int64](t, p, "SELECT count(*) FROM jobs_proxy_queues WHERE queue = $1", unpinned); n != 0 {
			t.Errorf("a refused enqueue pinned its queue")
		}
	})
}

// TestWorkflowFunctionsRouteByID: jobs_result, jobs_checkpoint, jobs_progress, jobs_workflow
// and jobs_cancel_workflow reach the shard the id (or workflow_id) names, and refuse an id of
// a shard the proxy does not have with 22023 naming it, as jobs_complete with a result and
// jobs_complete_many with results do.
func TestWorkflowFunctionsRouteByID(t *testing.T) {
	s := newSharded(t, 2)
	ctx := context.Background()
	p := s.proxy

	// One two-step workflow per shard, its first step running.
	type running struct {
		wf, child int64
		job       claimedJob
	}
	var on []running
	for i := range s.shards {
		q := s.queueOnShard(t, "byid", i)
		rows, err := p.Query(ctx, "SELECT id FROM jobs_enqueue_workflow($1) ORDER BY id",
			fmt.Sprintf(`[{"name": "a", "kind": "k", "queue": %q}, {"name": "b", "kind": "k", "queue": %q, "depends_on": ["a"]}]`, q, q))
		if err != nil {
			t.Fatal(err)
		}
		ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
		if err != nil || len(ids) != 2 {
			t.Fatalf("shard %d: workflow ids %v, %v", i, ids, err)
		}
		jobs := claimThrough(t, s, 1, q)
		if len(jobs) != 1 || jobs[0].id != ids[0] {
			t.Fatalf("shard %d: claimed %+v, want the first step %d", i, jobs, ids[0])
		}
		on = append(on, running{wf: ids[0], child: ids[1], job: jobs[0]})
	}
	for i, r := range on {
		sh := s.shards[i]
		if !one[bool](t, p, "SELECT jobs_checkpoint($1, $2, 's', to_jsonb($3::int))", r.job.id, r.job.attempt, i) ||
			one[string](t, sh, "SELECT checkpoints::text FROM jobs WHERE id = $1", r.job.id) != fmt.Sprintf(`{"s": %d}`, i) {
			t.Errorf("shard %d: jobs_checkpoint did not land there", i)
		}
		if !one[bool](t, p, "SELECT jobs_progress($1, $2, to_jsonb($3::int))", r.job.id, r.job.attempt, i) ||
			one[string](t, sh, "SELECT progress::text FROM jobs WHERE id = $1", r.job.id) != fmt.Sprint(i) {
			t.Errorf("shard %d: jobs_progress did not land there", i)
		}
		if st := one[string](t, p, "SELECT state::text FROM jobs_result($1)", r.child); st != "waiting" {
			t.Errorf("shard %d: jobs_result of the waiting step = %s", i, st)
		}
		if n := one[int64](t, p, "SELECT count(*) FROM jobs_workflow($1)", r.wf); n != 2 {
			t.Errorf("shard %d: jobs_workflow has %d steps, want 2", i, n)
		}
	}
	// Cancel shard 1's workflow: its running step is fenced out, its waiting one cancelled;
	// shard 0's is untouched.
	if n := one[int32](t, p, "SELECT jobs_cancel_workflow($1)", on[1].wf); n != 2 {
		t.Errorf("jobs_cancel_workflow = %d, want 2", n)
	}
	if n := one[int64](t, s.shards[1], "SELECT count(*) FROM jobs WHERE workflow_id = $1 AND state = 'cancelled'", on[1].wf); n != 2 {
		t.Errorf("shard 1: %d steps cancelled, want 2", n)
	}
	if one[bool](t, p, "SELECT jobs_complete($1, $2, '1')", on[1].job.id, on[1].job.attempt) {
		t.Error("jobs_complete of a step of the cancelled workflow returned true")
	}
	if n := one[int64](t, s.shards[0], "SELECT count(*) FROM jobs WHERE state = 'cancelled'"); n != 0 {
		t.Errorf("shard 0: %d jobs cancelled by shard 1's jobs_cancel_workflow", n)
	}

	unmapped := int64(1024*7 + 3) // shard 3 of a 2-shard proxy
	for _, c := range []struct{ sql, column string }{
		{"SELECT * FROM jobs_result($1)", "id"},
		{"SELECT jobs_checkpoint($1, 1, 's', '1')", "id"},
		{"SELECT jobs_progress($1, 1, '1')", "id"},
		{"SELECT * FROM jobs_workflow($1)", "workflow_id"},
		{"SELECT jobs_cancel_workflow($1)", "workflow_id"},
		{"SELECT jobs_complete($1, 1, '1')", "id"},
		{"SELECT * FROM jobs_complete_many(ARRAY[$1::bigint], ARRAY[1], ARRAY['1'::jsonb])", "ids"},
	} {
		_, err := p.Exec(ctx, c.sql, unmapped)
		wantInvalid(t, c.sql, err, c.column)
	}
}

// TestCompleteManyResultsAcrossShards: jobs_complete_many splits ids, attempts and results
// together, so each shard stores each job's own result; results of the wrong length are
// refused on the proxy (22023 naming results) before any shard completes anything.
func TestCompleteManyResultsAcrossShards(t *testing.T) {
	s := newSharded(t, 2)
	p := s.proxy
	queues := []string{s.queueOnShard(t, "results", 0), s.queueOnShard(t, "results", 1)}
	for range 3 {
		for _, q := range queues {
			one[int64](t, p, "SELECT jobs_enqueue('k', '{}', $1)", q)
		}
	}
	jobs := claimThrough(t, s, 10, queues...)
	if len(jobs) != 6 {
		t.Fatalf("claimed %d jobs, want 6", len(jobs))
	}
	ids := make([]int64, len(jobs))
	attempts := make([]int32, len(jobs))
	results := make([]string, len(jobs))
	for i, j := range jobs {
		ids[i], attempts[i], results[i] = j.id, j.attempt, fmt.Sprintf(`{"id": %d}`, j.id)
	}
	_, err := p.Exec(context.Background(), "SELECT * FROM jobs_complete_many($1, $2, $3::jsonb[])", ids, attempts, results[1:])
	wantInvalid(t, "results shorter than ids", err, "results")
	for i, sh := range s.shards {
		if n := one[int64](t, sh, "SELECT count(*) FROM jobs WHERE state = 'done'"); n != 0 {
			t.Fatalf("shard %d completed %d jobs of a refused call", i, n)
		}
	}
	if n := one[int64](t, p, "SELECT count(*) FROM jobs_complete_many($1, $2, $3::jsonb[])", ids, attempts, results); n != 6 {
		t.Fatalf("jobs_complete_many completed %d of 6", n)
	}
	for _, id := range ids {
		if got := one[int64](t, s.shards[shardOf(id)], "SELECT (result ->> 'id')::bigint FROM jobs WHERE id = $1 AND state = 'done'", id); got != id {
			t.Errorf("job %d stored the result of job %d", id, got)
		}
	}
}
