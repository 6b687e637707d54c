package admin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// ErrJobNotFound is returned for a job id that names no job (never created, or pruned).
var ErrJobNotFound = errors.New("no such job")

// ListedJob is one row of jobs_list: every column of a job but its payload and error history.
// Times are in UTC. The JSON names are the columns', as `skiplock list -o json` prints them.
type ListedJob struct {
	ID             int64      `json:"id"`
	Queue          string     `json:"queue"`
	Kind           string     `json:"kind"`
	State          string     `json:"state"`
	Priority       int32      `json:"priority"`
	Attempts       int32      `json:"attempts"`
	MaxAttempts    int32      `json:"max_attempts"`
	RunAt          time.Time  `json:"run_at"`
	CreatedAt      time.Time  `json:"created_at"`
	StartedAt      *time.Time `json:"started_at"`
	FinishedAt     *time.Time `json:"finished_at"`
	LeaseHolder    *string    `json:"lease_holder"`
	LeaseExpiresAt *time.Time `json:"lease_expires_at"`
	UniqueKey      *string    `json:"unique_key"`
	ConcurrencyKey *string    `json:"concurrency_key"`
	LastError      *string    `json:"last_error"`
	// Progress is the JSON the worker last reported with jobs_progress; nil when none.
	Progress json.RawMessage `json:"progress"`
	// WorkflowID is the id of the workflow's first step for a step of a workflow
	// (jobs_enqueue_workflow); nil for any other job.
	WorkflowID *int64 `json:"workflow_id"`
}

// listedColumns are ListedJob's columns in the order scanListed reads them.
const listedColumns = `id, queue, kind, state::text, priority, attempts, max_attempts, run_at, created_at, started_at,
    finished_at, lease_holder, lease_expires_at, unique_key, concurrency_key, last_error, progress, workflow_id`

func (j *ListedJob) scanDest() []any {
	return []any{&j.ID, &j.Queue, &j.Kind, &j.State, &j.Priority, &j.Attempts, &j.MaxAttempts, &j.RunAt,
		&j.CreatedAt, &j.StartedAt, &j.FinishedAt, &j.LeaseHolder, &j.LeaseExpiresAt, &j.UniqueKey,
		&j.ConcurrencyKey, &j.LastError, &j.Progress, &j.WorkflowID}
}

func (j *ListedJob) inUTC() {
	j.RunAt, j.CreatedAt = j.RunAt.UTC(), j.CreatedAt.UTC()
	j.StartedAt, j.FinishedAt, j.LeaseExpiresAt = utc(j.StartedAt), utc(j.FinishedAt), utc(j.LeaseExpiresAt)
}

func utc(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	u := t.UTC()
	return &u
}

// ListOpts filter a page of jobs_list. The zero value lists the newest jobs of every state,
// queue and kind, as many as jobs_list's default max_jobs.
type ListOpts struct {
	// State, Queue and Kind keep only the jobs that match; "" for any.
	State, Queue, Kind string
	// MaxJobs is the page size (jobs_list's max_jobs, 1 to 1000). Defaults to 0: jobs_list's
	// default.
	MaxJobs int
	// BeforeID keeps only the jobs with a smaller id: the last id of the previous page
	// (keyset paging). Defaults to 0: from the newest.
	BeforeID int64
}

// List calls jobs_list: one page of the jobs matching opts, newest (highest id) first.
func (c *Client) List(ctx context.Context, opts ListOpts) ([]ListedJob, error) {
	var before *int64
	if opts.BeforeID > 0 {
		before = &opts.BeforeID
	}
	args := []any{nullIfEmpty(opts.State), nullIfEmpty(opts.Queue), nullIfEmpty(opts.Kind), before}
	call := "(state => $1::text::" + c.fn("jobs_state") + ", queue => $2, kind => $3, before_id => $4"
	if opts.MaxJobs != 0 {
		args = append(args, opts.MaxJobs)
		call += ", max_jobs => $5"
	}
	rows, err := c.db.Query(ctx, "SELECT "+listedColumns+" FROM "+c.fn("jobs_list")+call+")", args...)
	if err != nil {
		return nil, fmt.Errorf("jobs_list: %w", err)
	}
	jobs, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (ListedJob, error) {
		var j ListedJob
		err := r.Scan(j.scanDest()...)
		j.inUTC()
		return j, err
	})
	if err != nil {
		return nil, fmt.Errorf("jobs_list: %w", err)
	}
	return jobs, nil
}

// Job is one job in full, as jobs_inspect returns it.
type Job struct {
	ListedJob
	// Payload is the JSON as stored.
	Payload json.RawMessage `json:"payload"`
	// Errors is the error history: the first failed attempt's and the newest ones, oldest first.
	Errors []AttemptError `json:"errors"`
	// WorkflowStep is the job's step name in its workflow; nil outside a workflow.
	WorkflowStep *string `json:"workflow_step"`
	// DependsOn are the ids of the jobs this one waits for (jobs_enqueue's depends_on, or its
	// workflow step's parents); nil for a job without parents.
	DependsOn []int64 `json:"depends_on"`
	// OnParentFailure is what becomes of the job when a parent ends dead or cancelled:
	// "cancel" or "run"; nil for a job without parents.
	OnParentFailure *string `json:"on_parent_failure"`
	// CancelledBy is the parent whose failure cancelled the job; nil otherwise.
	CancelledBy *int64 `json:"cancelled_by"`
	// Result is the JSON the worker completed the job with; nil when none.
	Result json.RawMessage `json:"result"`
	// Checkpoints are the values the job's steps saved (jobs_checkpoint), an object of step
	// name to value; nil when none.
	Checkpoints json.RawMessage `json:"checkpoints"`
}

// AttemptError is one entry of a job's error history.
type AttemptError struct {
	Attempt int32     `json:"attempt"`
	At      time.Time `json:"at"`
	Error   string    `json:"error"`
	// Worker is the worker that held the attempt; nil when the failure was not a worker's.
	Worker *string `json:"worker"`
}

// Inspect calls jobs_inspect: the job with its payload, error history, workflow and result, or
// ErrJobNotFound.
func (c *Client) Inspect(ctx context.Context, id int64) (*Job, error) {
	var j Job
	var rawErrors []byte
	err := c.db.QueryRow(ctx, "SELECT "+listedColumns+`, payload, errors, workflow_step, depends_on, on_parent_failure,
		cancelled_by, result, checkpoints FROM `+c.fn("jobs_inspect")+"($1)", id).
		Scan(append(j.scanDest(), &j.Payload, &rawErrors, &j.WorkflowStep, &j.DependsOn, &j.OnParentFailure,
			&j.CancelledBy, &j.Result, &j.Checkpoints)...)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("jobs_inspect: job %d: %w", id, ErrJobNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("jobs_inspect: job %d: %w", id, err)
	}
	j.inUTC()
	if err := json.Unmarshal(rawErrors, &j.Errors); err != nil {
		return nil, fmt.Errorf("jobs_inspect: job %d: decoding the error history: %w", id, err)
	}
	for i := range j.Errors {
		j.Errors[i].At = j.Errors[i].At.UTC()
	}
	return &j, nil
}

func nullIfEmpty(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}
