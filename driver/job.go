package driver

import (
	"encoding/json"
	"time"
)

// JobRow is a claimed job as jobs_claim returned it.
type JobRow struct {
	ID    int64
	Queue string
	Kind  string

	// EncodedPayload is the job's payload as JSON; Job.Payload holds it decoded.
	EncodedPayload []byte

	// Attempt is this run's attempt number, starting at 1. It is the fencing token: the
	// driver quotes it back on every call about the job, and the database refuses those
	// calls once the job has moved on to another attempt.
	Attempt     int
	MaxAttempts int
	Priority    int

	// RunAt is when the job became (or was scheduled to become) ready.
	RunAt time.Time

	// LeaseExpiresAt is when the lease given by the claim ends, by the database's clock.
	// Heartbeats extend it; this field is not updated.
	LeaseExpiresAt time.Time

	CreatedAt time.Time

	// Meta is what the job was enqueued with as EnqueueOpts.Meta (nil for none): data for
	// tools, such as the trace context of contrib/otel. Values of a meta written by other
	// clients that are not strings are left out.
	Meta map[string]string

	// ParentResults holds the results of the job's parents (EnqueueOpts.DependsOn,
	// WorkflowStep.DependsOn) as JSON, keyed by step name for workflow steps and by id
	// (decimal) otherwise; a parent without a result maps to JSON null. nil for a job
	// without parents.
	ParentResults map[string]json.RawMessage

	// Checkpoints holds the values that earlier attempts saved with [Step], by step name;
	// nil when none. Step reads it; handlers rarely need to.
	Checkpoints map[string]json.RawMessage

	// result is what Job.SetResult recorded, as JSON; nil for none.
	result json.RawMessage
}

// Job is a claimed job with its payload decoded into T, as a handler receives it.
type Job[T any] struct {
	*JobRow

	// Payload is the job's payload, decoded from JSON into T.
	Payload T

	ex *execution // nil for a Job the driver did not make
}

// JobState is a job's state (the SQL type jobs_state).
type JobState string

// The states of a job.
const (
	JobStateWaiting   JobState = "waiting" // a parent (EnqueueOpts.DependsOn) is unfinished
	JobStateQueued    JobState = "queued"
	JobStateRunning   JobState = "running"
	JobStateDone      JobState = "done"
	JobStateDead      JobState = "dead"
	JobStateCancelled JobState = "cancelled"
)
