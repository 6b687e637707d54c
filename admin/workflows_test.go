package admin_test

import (
	"errors"
	"slices"
	"testing"

	"github.com/skiplock/skiplock/admin"
	"github.com/skiplock/skiplock/tests/pgtest"
)

// workflowSteps is a diamond with a tail: fetch, then resize and thumbs (one attempt), then
// publish after both, and archive after resize alone.
const workflowSteps = `[
	{"name": "fetch", "kind": "fetch", "queue": "wf"},
	{"name": "resize", "kind": "resize", "queue": "wf", "depends_on": ["fetch"]},
	{"name": "thumbs", "kind": "thumbs", "queue": "wf", "depends_on": ["fetch"], "max_attempts": 1},
	{"name": "publish", "kind": "publish", "queue": "wf", "depends_on": ["resize", "thumbs"]},
	{"name": "archive", "kind": "archive", "queue": "wf", "depends_on": ["resize"]}
]`

// TestWorkflowAndResult: Workflow reads every step with its parents, state and progress;
// Inspect and List carry the workflow, progress and result; Result reads jobs_result;
// CancelWorkflow cancels what has not finished.
func TestWorkflowAndResult(t *testing.T) {
	t.Parallel()
	db := pgtest.NewTestDB(t)
	a := admin.New(db.Conn, nil)
	ctx := t.Context()
	ids := pgtest.EnqueueWorkflow(t, db.Conn, workflowSteps)
	if len(ids) != 5 {
		t.Fatalf("jobs_enqueue_workflow gave %v, want 5 steps", ids)
	}
	// The workflow's id is its first step's.
	wf := pgtest.QueryOne[int64](t, db.Conn, "SELECT workflow_id FROM jobs WHERE id = $1", ids["fetch"])
	if wf != ids["fetch"] {
		t.Fatalf("workflow id %d, want the first step's, %d", wf, ids["fetch"])
	}

	// fetch reports progress and completes with a result; resize runs with progress; thumbs dies.
	claim := func(n int) map[int64]int32 {
		t.Helper()
		rows, err := db.Conn.Query(ctx, "SELECT id, attempt FROM jobs_claim('w', $1, ARRAY['wf'])", n)
		if err != nil {
			t.Fatal(err)
		}
		claimed := map[int64]int32{}
		for rows.Next() {
			var id int64
			var attempt int32
			if err := rows.Scan(&id, &attempt); err != nil {
				t.Fatal(err)
			}
			claimed[id] = attempt
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		return claimed
	}
	claimed := claim(5)
	if len(claimed) != 1 {
		t.Fatalf("claimed %v, want fetch (%d) alone: the other steps wait for it", claimed, ids["fetch"])
	}
	pgtest.MustExec(t, db.Conn, `SELECT jobs_progress($1, $2, '{"pct": 100}')`, ids["fetch"], claimed[ids["fetch"]])
	pgtest.MustExec(t, db.Conn, `SELECT jobs_complete($1, $2, '{"files": 3}')`, ids["fetch"], claimed[ids["fetch"]])
	claimed = claim(5)
	if _, ok := claimed[ids["thumbs"]]; len(claimed) != 2 || !ok {
		t.Fatalf("claimed %v, want resize and thumbs", claimed)
	}
	pgtest.MustExec(t, db.Conn, `SELECT jobs_progress($1, $2, '{"pct": 40}')`, ids["resize"], claimed[ids["resize"]])
	pgtest.MustExec(t, db.Conn, `SELECT jobs_fail($1, $2, 'no disk')`, ids["thumbs"], claimed[ids["thumbs"]])

	jobs, err := a.Workflow(ctx, wf)
	if err != nil {
		t.Fatal(err)
	}
	if len(jobs) != 5 {
		t.Fatalf("Workflow = %+v, want 5 steps", jobs)
	}
	byName := map[string]admin.WorkflowJob{}
	for i, j := range jobs {
		if i > 0 && j.ID <= jobs[i-1].ID {
			t.Fatalf("Workflow is not in id order: %+v", jobs)
		}
		if j.WorkflowStep == nil {
			t.Fatalf("step %d has no name", j.ID)
		}
		byName[*j.WorkflowStep] = j
	}
	for name, want := range map[string]struct {
		state   string
		parents []int64
	}{
		"fetch":   {"done", nil},
		"resize":  {"running", []int64{ids["fetch"]}},
		"thumbs":  {"dead", []int64{ids["fetch"]}},
		"publish": {"cancelled", []int64{ids["resize"], ids["thumbs"]}},
		"archive": {"waiting", []int64{ids["resize"]}},
	} {
		j := byName[name]
		parents := slices.Sorted(slices.Values(j.DependsOn))
		if j.ID != ids[name] || j.Kind != name || j.Queue != "wf" || j.State != want.state || !slices.Equal(parents, want.parents) {
			t.Errorf("step %s = %+v, want job %d in state %s after %v", name, j, ids[name], want.state, want.parents)
		}
	}
	if f := byName["fetch"]; string(f.Progress) != `{"pct": 100}` || f.FinishedAt == nil || f.Attempts != 1 {
		t.Errorf("fetch = %+v, want progress {\"pct\": 100}, finished, one attempt", f)
	}
	if th := byName["thumbs"]; th.LastError == nil || *th.LastError != "no disk" || th.MaxAttempts != 1 {
		t.Errorf("thumbs = %+v, want the last error no disk", th)
	}
	if byName["archive"].Progress != nil || byName["archive"].FinishedAt != nil {
		t.Errorf("archive = %+v, want no progress, not finished", byName["archive"])
	}

	publish, err := a.Inspect(ctx, ids["publish"])
	if err != nil {
		t.Fatal(err)
	}
	if publish.WorkflowID == nil || *publish.WorkflowID != wf || publish.WorkflowStep == nil || *publish.WorkflowStep != "publish" ||
		len(publish.DependsOn) != 2 || publish.OnParentFailure == nil || *publish.OnParentFailure != "cancel" ||
		publish.CancelledBy == nil || *publish.CancelledBy != ids["thumbs"] || publish.Result != nil {
		t.Errorf("Inspect(publish) = %+v, want workflow %d, step publish, two parents, cancelled by thumbs", publish, wf)
	}
	fetch, err := a.Inspect(ctx, ids["fetch"])
	if err != nil {
		t.Fatal(err)
	}
	if string(fetch.Result) != `{"files": 3}` || string(fetch.Progress) != `{"pct": 100}` || fetch.DependsOn != nil {
		t.Errorf("Inspect(fetch) = %+v, want result {\"files\": 3} and progress", fetch)
	}
	listed, err := a.List(ctx, admin.ListOpts{State: "running", Queue: "wf"})
	if err != nil {
		t.Fatal(err)
	}
	if len(listed) != 1 || string(listed[0].Progress) != `{"pct": 40}` || listed[0].WorkflowID == nil || *listed[0].WorkflowID != wf {
		t.Errorf("List(running) = %+v, want resize with its progress and workflow", listed)
	}

	r, err := a.Result(ctx, ids["fetch"])
	if err != nil || r.State != "done" || string(r.Result) != `{"files": 3}` || r.LastError != nil || !r.Finished() {
		t.Errorf("Result(fetch) = %+v, %v; want done with its result", r, err)
	}
	r, err = a.Result(ctx, ids["thumbs"])
	if err != nil || r.State != "dead" || r.Result != nil || r.LastError == nil || *r.LastError != "no disk" || !r.Finished() {
		t.Errorf("Result(thumbs) = %+v, %v; want dead with its error", r, err)
	}
	if r, err = a.Result(ctx, ids["archive"]); err != nil || r.State != "waiting" || r.Finished() {
		t.Errorf("Result(archive) = %+v, %v; want waiting, not finished", r, err)
	}
	if _, err := a.Result(ctx, ids["archive"]+1000); !errors.Is(err, admin.ErrJobNotFound) {
		t.Errorf("Result of an unknown id = %v, want ErrJobNotFound", err)
	}

	live := pgtest.QueryOne[int64](t, db.Conn, "SELECT count(*) FROM jobs WHERE workflow_id = $1 AND state NOT IN ('done', 'dead', 'cancelled')", wf)
	n, err := a.CancelWorkflow(ctx, wf)
	if err != nil || int64(n) != live || n == 0 {
		t.Fatalf("CancelWorkflow = %d, %v; want the %d unfinished steps", n, err, live)
	}
	if left := pgtest.QueryOne[int64](t, db.Conn, "SELECT count(*) FROM jobs WHERE workflow_id = $1 AND state IN ('waiting', 'queued')", wf); left != 0 {
		t.Errorf("%d steps waiting or queued after CancelWorkflow", left)
	}
	if n, err := a.CancelWorkflow(ctx, wf); err != nil || n != 0 {
		t.Errorf("CancelWorkflow again = %d, %v; want 0", n, err)
	}
	if _, err := a.Workflow(ctx, ids["archive"]+1000); !errors.Is(err, admin.ErrWorkflowNotFound) {
		t.Errorf("Workflow of an unknown id = %v, want ErrWorkflowNotFound", err)
	}
}
