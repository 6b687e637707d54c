package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/skiplock/skiplock/admin"
)

var workflowShowCommand = &command{
	name:     "workflow show",
	synopsis: "ID [flags]",
	summary:  "print a workflow's steps as a tree, with their states and progress",
	help: `Prints the steps of the workflow ID (the id of its first step, which every step's
workflow_id holds) as an indented tree: each step under a parent, after all of its parents,
and a step with several parents names the others "(after a, b)". Each line gives the step's
job id, state, kind, queue, attempts, progress and last error. Exit code 3 when there is no
such workflow.

The steps come from jobs_workflow, which jobs_admin may call.

  skiplock workflow show 1042

Output (-o json): {"workflow_id": ID, "steps": [STEP...]} in the tree's order (parents
first), each STEP with id, workflow_step, kind, queue, state, depends_on (ids), attempts,
max_attempts, last_error, progress, finished_at and depth (its indentation in the tree).
`,
	db:     true,
	output: true,
	setup: func(_ *flag.FlagSet) func(context.Context, *call) error {
		return func(ctx context.Context, c *call) error {
			id, err := workflowID("workflow show", c.args)
			if err != nil {
				return err
			}
			jobs, err := c.admin().Workflow(ctx, id)
			if errors.Is(err, admin.ErrWorkflowNotFound) {
				return notFoundErrorf("workflow show: no workflow %d", id)
			}
			if err != nil {
				return fmt.Errorf("failed to read workflow %d: %w", id, err)
			}
			lines := workflowTree(jobs)
			if c.format == outputJSON {
				type step struct {
					admin.WorkflowJob
					Depth int `json:"depth"`
				}
				steps := make([]step, len(lines))
				for i, l := range lines {
					steps[i] = step{l.job, l.depth}
				}
				return writeJSON(c.stdout, struct {
					WorkflowID int64  `json:"workflow_id"`
					Steps      []step `json:"steps"`
				}{id, steps})
			}
			return printWorkflow(c, id, lines)
		}
	},
}

var workflowCancelCommand = &command{
	name:     "workflow cancel",
	synopsis: "ID [flags]",
	summary:  "cancel every unfinished step of a workflow (jobs_cancel_workflow)",
	help: `Cancels the steps of the workflow ID that have not finished, as jobs_cancel_workflow does;
done, dead and cancelled steps are left as they are. Exit code 3 when no step was left to
cancel (no such workflow, or every step had finished).

Output: "cancelled N jobs of workflow ID"; -o json: {"workflow_id": ID, "jobs": N}.
`,
	db:     true,
	output: true,
	setup: func(_ *flag.FlagSet) func(context.Context, *call) error {
		return func(ctx context.Context, c *call) error {
			id, err := workflowID("workflow cancel", c.args)
			if err != nil {
				return err
			}
			n, err := c.admin().CancelWorkflow(ctx, id)
			if err != nil {
				return fmt.Errorf("failed to cancel workflow %d: %w", id, err)
			}
			if n == 0 {
				return notFoundErrorf("workflow cancel: workflow %d has no unfinished step (no such workflow, or every step finished)", id)
			}
			if c.format == outputJSON {
				return writeJSON(c.stdout, struct {
					WorkflowID int64 `json:"workflow_id"`
					Jobs       int   `json:"jobs"`
				}{id, n})
			}
			_, err = fmt.Fprintf(c.stdout, "cancelled %d jobs of workflow %d\n", n, id)
			return err
		}
	},
}

// workflowID is the one argument of a workflow command.
func workflowID(cmd string, args []string) (int64, error) {
	if len(args) != 1 {
		return 0, usageErrorf("%s: want one workflow ID, got %d arguments", cmd, len(args))
	}
	id, err := strconv.ParseInt(args[0], 10, 64)
	if err != nil {
		return 0, usageErrorf("%s: ID must be an integer, got %q", cmd, args[0])
	}
	return id, nil
}

// treeLine is one step of a workflow as the tree prints it.
type treeLine struct {
	job   admin.WorkflowJob
	depth int
	// others are the step's parents in the workflow besides the one it is printed under.
	others []int64
}

// workflowTree orders a workflow's steps (in id order) as an indented tree: a step comes
// right under the parent printed last of all its parents, so every step follows all of its
// parents. A step whose parents are all outside the steps given (or that has none) is a root.
// Steps left over, which only a cycle could leave, follow as roots.
func workflowTree(jobs []admin.WorkflowJob) []treeLine {
	index := make(map[int64]int, len(jobs))
	for i, j := range jobs {
		index[j.ID] = i
	}
	children := make(map[int64][]int64)
	waiting := make(map[int64]int) // parents not printed yet
	for _, j := range jobs {
		seen := map[int64]bool{}
		for _, p := range j.DependsOn {
			if _, ok := index[p]; ok && !seen[p] {
				seen[p] = true
				children[p] = append(children[p], j.ID)
				waiting[j.ID]++
			}
		}
	}
	lines := make([]treeLine, 0, len(jobs))
	printed := make(map[int64]bool, len(jobs))
	var emit func(id int64, under int64, depth int)
	emit = func(id, under int64, depth int) {
		printed[id] = true
		j := jobs[index[id]]
		var others []int64
		for _, p := range j.DependsOn {
			if _, ok := index[p]; ok && p != under && !slices.Contains(others, p) {
				others = append(others, p)
			}
		}
		lines = append(lines, treeLine{job: j, depth: depth, others: others})
		for _, child := range children[id] {
			if waiting[child]--; waiting[child] == 0 {
				emit(child, id, depth+1)
			}
		}
	}
	for _, j := range jobs {
		if !printed[j.ID] && waiting[j.ID] == 0 {
			emit(j.ID, 0, 0)
		}
	}
	for _, j := range jobs {
		if !printed[j.ID] {
			emit(j.ID, 0, 0)
		}
	}
	return lines
}

// stepName is how the tree names a step: its workflow_step, else its id.
func stepName(j admin.WorkflowJob) string {
	if j.WorkflowStep != nil {
		return *j.WorkflowStep
	}
	return "#" + strconv.FormatInt(j.ID, 10)
}

func printWorkflow(c *call, id int64, lines []treeLine) error {
	names := make(map[int64]string, len(lines))
	counts := map[string]int{}
	for _, l := range lines {
		names[l.job.ID] = stepName(l.job)
		counts[l.job.State]++
	}
	var summary []string
	for _, s := range []string{"waiting", "queued", "running", "done", "dead", "cancelled"} {
		if counts[s] > 0 {
			summary = append(summary, fmt.Sprintf("%d %s", counts[s], s))
		}
	}
	fmt.Fprintf(c.stdout, "workflow %d: %d steps (%s)\n", id, len(lines), strings.Join(summary, ", "))
	tw := newTable(c.stdout)
	fmt.Fprintln(tw, "STEP\tID\tSTATE\tKIND\tQUEUE\tATTEMPTS\tPROGRESS\tLAST ERROR")
	for _, l := range lines {
		step := strings.Repeat("  ", l.depth) + cell(names[l.job.ID], 40)
		if len(l.others) > 0 {
			after := make([]string, len(l.others))
			for i, p := range l.others {
				after[i] = cell(names[p], 40)
			}
			step += " (after " + strings.Join(after, ", ") + ")"
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%d/%d\t%s\t%s\n", step, l.job.ID, l.job.State, cell(l.job.Kind, 30),
			cell(l.job.Queue, 30), l.job.Attempts, l.job.MaxAttempts, jsonCell(l.job.Progress, 30), cell(l.job.LastError, 60))
	}
	return tw.Flush()
}
