package admin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// ErrWorkflowNotFound is returned for a workflow id that names no job's workflow (never
// created, or every step pruned).
var ErrWorkflowNotFound = errors.New("no such workflow")

// WorkflowJob is one step of a workflow: a job enqueued by jobs_enqueue_workflow, with what
// the operator's views of the workflow show of it. Times are in UTC. The JSON names are the
// jobs table's columns.
type WorkflowJob struct {
	ID int64 `json:"id"`
	// WorkflowStep is the step's name in the workflow (jobs_enqueue_workflow's "name").
	WorkflowStep *string `json:"workflow_step"`
	Kind         string  `json:"kind"`
	Queue        string  `json:"queue"`
	State        string  `json:"state"`
	// DependsOn are the ids of the step's parents, the jobs it waits for; nil for a root.
	DependsOn   []int64 `json:"depends_on"`
	Attempts    int32   `json:"attempts"`
	MaxAttempts int32   `json:"max_attempts"`
	LastError   *string `json:"last_error"`
	// Progress is the JSON the worker last reported with jobs_progress; nil when none.
	Progress   json.RawMessage `json:"progress"`
	FinishedAt *time.Time      `json:"finished_at"`
}

// Workflow reads the jobs of the workflow workflowID (the id of its first step), in id order,
// or ErrWorkflowNotFound when there is none.
//
// It calls jobs_workflow, which jobs_admin may call.
func (c *Client) Workflow(ctx context.Context, workflowID int64) ([]WorkflowJob, error) {
	rows, err := c.db.Query(ctx, `SELECT id, workflow_step, kind, queue, state::text, depends_on, attempts, max_attempts,
		last_error, progress, finished_at
		FROM `+c.fn("jobs_workflow")+`($1)`, workflowID)
	if err != nil {
		return nil, fmt.Errorf("jobs_workflow: workflow %d: %w", workflowID, err)
	}
	jobs, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (WorkflowJob, error) {
		var j WorkflowJob
		err := r.Scan(&j.ID, &j.WorkflowStep, &j.Kind, &j.Queue, &j.State, &j.DependsOn, &j.Attempts, &j.MaxAttempts,
			&j.LastError, &j.Progress, &j.FinishedAt)
		j.FinishedAt = utc(j.FinishedAt)
		return j, err
	})
	if err != nil {
		return nil, fmt.Errorf("jobs_workflow: workflow %d: %w", workflowID, err)
	}
	if len(jobs) == 0 {
		return nil, fmt.Errorf("jobs_workflow: workflow %d: %w", workflowID, ErrWorkflowNotFound)
	}
	return jobs, nil
}

// CancelWorkflow calls jobs_cancel_workflow: cancels the workflow's steps that have not
// finished, and returns how many it cancelled (0 for an unknown workflow, or one whose steps
// have all finished).
func (c *Client) CancelWorkflow(ctx context.Context, workflowID int64) (int, error) {
	var n int
	if err := c.db.QueryRow(ctx, "SELECT "+c.fn("jobs_cancel_workflow")+"($1)", workflowID).Scan(&n); err != nil {
		return 0, fmt.Errorf("jobs_cancel_workflow: workflow %d: %w", workflowID, err)
	}
	return n, nil
}

// JobResult is a job's outcome as jobs_result returns it. The JSON names are the function's
// columns.
type JobResult struct {
	State string `json:"state"`
	// Result is the JSON the worker completed the job with; nil when it gave none, or the job
	// has not completed.
	Result    json.RawMessage `json:"result"`
	LastError *string         `json:"last_error"`
}

// Finished reports whether the job is in a final state: done, dead or cancelled.
func (r *JobResult) Finished() bool {
	switch r.State {
	case "done", "dead", "cancelled":
		return true
	}
	return false
}

// Result calls jobs_result: the job's state, result and last error, or ErrJobNotFound.
func (c *Client) Result(ctx context.Context, id int64) (*JobResult, error) {
	var r JobResult
	err := c.db.QueryRow(ctx, "SELECT state::text, result, last_error FROM "+c.fn("jobs_result")+"($1)", id).
		Scan(&r.State, &r.Result, &r.LastError)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("jobs_result: job %d: %w", id, ErrJobNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("jobs_result: job %d: %w", id, err)
	}
	return &r, nil
}
