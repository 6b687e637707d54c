package main

import (
	"fmt"
	"strings"
	"testing"

	"github.com/skiplock/skiplock/admin"
	"github.com/skiplock/skiplock/tests/pgtest"
)

// TestWorkflowTree: every step follows all of its parents, nested under the parent printed
// last, naming the others; parents outside the steps given make a root.
func TestWorkflowTree(t *testing.T) {
	t.Parallel()
	step := func(id int64, name string, parents ...int64) admin.WorkflowJob {
		return admin.WorkflowJob{ID: id, WorkflowStep: &name, DependsOn: parents}
	}
	render := func(lines []treeLine) string {
		var b strings.Builder
		for _, l := range lines {
			b.WriteString(strings.Repeat("  ", l.depth) + *l.job.WorkflowStep)
			for _, o := range l.others {
				fmt.Fprintf(&b, " +%d", o)
			}
			b.WriteString("\n")
		}
		return b.String()
	}
	for _, tc := range []struct {
		name  string
		steps []admin.WorkflowJob
		want  string
	}{
		{"Diamond", []admin.WorkflowJob{step(1, "a"), step(2, "b", 1), step(3, "c", 1), step(4, "d", 2, 3)},
			"a\n  b\n  c\n    d +2\n"},
		// c's parents are in two subtrees: it comes after b2, the later of them, not under a2.
		{"TwoRoots", []admin.WorkflowJob{step(1, "a"), step(2, "b"), step(3, "a2", 1), step(4, "b2", 2), step(5, "c", 3, 4)},
			"a\n  a2\nb\n  b2\n    c +3\n"},
		{"ShortcutEdge", []admin.WorkflowJob{step(1, "a"), step(2, "b", 1), step(3, "c", 1, 2)},
			"a\n  b\n  c +2\n"},
		{"ParentOutsideAndDuplicate", []admin.WorkflowJob{step(5, "x", 99), step(6, "y", 5, 5)},
			"x\n  y\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := render(workflowTree(tc.steps)); got != tc.want {
				t.Errorf("tree:\n%s\nwant:\n%s", got, tc.want)
			}
		})
	}
}

func TestWorkflowShowAndCancel(t *testing.T) {
	t.Parallel()
	db := setup(t)
	ids := pgtest.EnqueueWorkflow(t, db.Conn, `[
		{"name": "fetch", "kind": "fetch", "queue": "wf"},
		{"name": "resize", "kind": "resize", "queue": "wf", "depends_on": ["fetch"]},
		{"name": "thumbs", "kind": "thumbs", "queue": "wf", "depends_on": ["fetch"]},
		{"name": "publish", "kind": "publish", "queue": "wf", "depends_on": ["resize", "thumbs"]},
		{"name": "archive", "kind": "archive", "queue": "wf", "depends_on": ["resize"]}
	]`)
	wf := ids["fetch"]
	pgtest.MustExec(t, db.Conn, `SELECT jobs_progress(id, attempt, '{"pct": 100}'), jobs_complete(id, attempt, '{"files": 3}')
		FROM jobs_claim('w', 1, ARRAY['wf'])`)
	pgtest.MustExec(t, db.Conn, `SELECT jobs_progress(id, attempt, '{"pct": 40}') FROM jobs_claim('w', 2, ARRAY['wf']) WHERE id = $1`, ids["resize"])

	out := cli(t, db.URL, "workflow", "show", fmt.Sprint(wf)).ok(t)
	var steps []string
	for _, line := range strings.Split(strings.TrimRight(out, "\n"), "\n")[2:] {
		f := strings.Fields(line)
		steps = append(steps, line[:strings.Index(line, f[0])]+f[0])
	}
	if got := strings.Join(steps, "|"); got != "fetch|  resize|    archive|  thumbs|    publish" {
		t.Errorf("workflow show's tree is %q:\n%s", got, out)
	}
	for _, want := range []string{
		fmt.Sprintf("workflow %d: 5 steps (2 waiting, 2 running, 1 done)", wf),
		"publish (after resize)",
		`{"pct":40}`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("workflow show does not print %q:\n%s", want, out)
		}
	}
	var doc struct {
		WorkflowID int64 `json:"workflow_id"`
		Steps      []struct {
			ID           int64   `json:"id"`
			WorkflowStep string  `json:"workflow_step"`
			State        string  `json:"state"`
			DependsOn    []int64 `json:"depends_on"`
			Depth        int     `json:"depth"`
		} `json:"steps"`
	}
	cli(t, db.URL, "workflow", "show", fmt.Sprint(wf), "-o", "json").decode(t, &doc)
	if doc.WorkflowID != wf || len(doc.Steps) != 5 || doc.Steps[0].WorkflowStep != "fetch" || doc.Steps[0].State != "done" ||
		doc.Steps[4].WorkflowStep != "publish" || doc.Steps[4].Depth != 2 || len(doc.Steps[4].DependsOn) != 2 {
		t.Errorf("workflow show -o json = %+v", doc)
	}

	out = cli(t, db.URL, "workflow", "cancel", fmt.Sprint(wf)).ok(t)
	if out != fmt.Sprintf("cancelled 4 jobs of workflow %d\n", wf) {
		t.Errorf("workflow cancel printed %q, want 4 jobs cancelled (all but fetch)", out)
	}
	if n := pgtest.QueryOne[int64](t, db.Conn, "SELECT count(*) FROM jobs WHERE workflow_id = $1 AND state = 'cancelled'", wf); n != 4 {
		t.Errorf("%d steps cancelled, want 4", n)
	}
	cli(t, db.URL, "workflow", "cancel", fmt.Sprint(wf)).fails(t, exitNotFound, "no unfinished step")
	cli(t, db.URL, "workflow", "show", "999").fails(t, exitNotFound, "no workflow 999")
	cli(t, db.URL, "workflow", "show", "x").fails(t, exitUsage, "ID must be an integer")
	cli(t, db.URL, "workflow", "cancel").fails(t, exitUsage, "want one workflow ID")
	cli(t, db.URL, "workflow").fails(t, exitUsage, "missing subcommand (show, cancel)")
}
