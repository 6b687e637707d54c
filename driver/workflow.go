package driver

import (
	"context"
	"encoding/json"
	"fmt"
	"time"
)

// WorkflowStep is one job of [EnqueueWorkflow], named so that other steps can depend on it.
type WorkflowStep struct {
	// Name identifies the step within the workflow, 1 to 200 bytes; its children's
	// JobRow.ParentResults are keyed by it.
	Name string

	// Kind selects the handler; see [AddHandler]. 1 to 200 bytes.
	Kind string

	// Payload is encoded with encoding/json; nil is stored as {}.
	Payload any

	// DependsOn names the steps that must be done before this one runs. Defaults to nil:
	// the step is ready at once.
	DependsOn []string

	// OnParentFailure is ParentFailureCancel (the default, "") or ParentFailureRun, as for
	// EnqueueOpts.
	OnParentFailure string

	// Queue, RunAt, Priority, MaxAttempts, ConcurrencyKey, Meta and NotifyFinished are as in
	// EnqueueOpts, with the same defaults (RunAt zero: now).
	Queue          string
	RunAt          time.Time
	Priority       int
	MaxAttempts    int
	ConcurrencyKey string
	Meta           map[string]string
	NotifyFinished bool
}

// workflowStepJSON is a step as jobs_enqueue_workflow reads it.
type workflowStepJSON struct {
	Name            string            `json:"name"`
	Kind            string            `json:"kind"`
	Payload         json.RawMessage   `json:"payload,omitempty"`
	DependsOn       []string          `json:"depends_on,omitempty"`
	OnParentFailure string            `json:"on_parent_failure,omitempty"`
	Queue           string            `json:"queue,omitempty"`
	RunAt           *time.Time        `json:"run_at,omitempty"`
	Priority        int               `json:"priority,omitempty"`
	MaxAttempts     int               `json:"max_attempts,omitempty"`
	ConcurrencyKey  string            `json:"concurrency_key,omitempty"`
	Meta            map[string]string `json:"meta,omitempty"`
	NotifyFinished  bool              `json:"notify_finished,omitempty"`
}

// EnqueueWorkflow adds a graph of jobs in one call (jobs_enqueue_workflow) and returns each
// step's job id by name. Every step is a job with its parents' ids as DependsOn; all share
// one workflow_id, the id of the first step without parents. Pass the caller's pgx.Tx as db
// to enqueue atomically with the caller's own writes. All or nothing: duplicate or unknown
// names and cycles give an *InvalidError naming "steps", and nothing is added.
func EnqueueWorkflow(ctx context.Context, db Executor, steps []WorkflowStep) (map[string]int64, error) {
	in := make([]workflowStepJSON, len(steps))
	for i, s := range steps {
		var payload json.RawMessage // nil: {}
		if s.Payload != nil {
			b, err := json.Marshal(s.Payload)
			if err != nil {
				return nil, &InvalidError{Field: fmt.Sprintf("steps[%d].Payload", i), Problem: fmt.Sprintf("cannot be encoded as JSON: %v", err)}
			}
			payload = b
		}
		in[i] = workflowStepJSON{
			Name: s.Name, Kind: s.Kind, Payload: payload, DependsOn: s.DependsOn,
			OnParentFailure: s.OnParentFailure, Queue: s.Queue, Priority: s.Priority,
			MaxAttempts: s.MaxAttempts, ConcurrencyKey: s.ConcurrencyKey, Meta: s.Meta,
			NotifyFinished: s.NotifyFinished,
		}
		if !s.RunAt.IsZero() {
			t := s.RunAt
			in[i].RunAt = &t
		}
		if s.MaxAttempts < 0 {
			return nil, &InvalidError{Field: fmt.Sprintf("steps[%d].MaxAttempts", i), Problem: "must be at least 1 (0 means the default)"}
		}
	}
	b, err := json.Marshal(in)
	if err != nil {
		return nil, &InvalidError{Field: "steps", Problem: fmt.Sprintf("cannot be encoded as JSON: %v", err)}
	}
	rows, err := db.Query(ctx, enqueueWorkflowSQL, b)
	if err != nil {
		return nil, fmt.Errorf("failed to enqueue workflow: %w", sqlInvalid(err))
	}
	defer rows.Close()
	ids := make(map[string]int64, len(steps))
	var name string
	var id int64
	for rows.Next() {
		if err := rows.Scan(&name, &id); err != nil {
			return nil, fmt.Errorf("failed to enqueue workflow: %w", err)
		}
		ids[name] = id
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("failed to enqueue workflow: %w", sqlInvalid(err))
	}
	return ids, nil
}
