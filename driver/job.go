package driver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"time"

	"github.com/jackc/pgx/v5"
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
}

// Job is a claimed job with its payload decoded into T, as a handler receives it.
type Job[T any] struct {
	*JobRow

	// Payload is the job's payload, decoded from JSON into T.
	Payload T

	ex *execution // nil for a Job the driver did not make
}

// HandleFunc runs one job. Its outcome is what it returns:
//
//   - nil: the job is done (completed in a batch, or by [CompleteTx] in the handler's own
//     transaction).
//   - an error from [Snooze]: the job goes back to the queue for later without spending an
//     attempt.
//   - an error from [Cancel]: the job is cancelled, with no further attempts.
//   - an error from [RetryAt]: a failed attempt, retried at the given time.
//   - any other error, or a panic: a failed attempt, retried after the backoff of
//     jobs_backoff, or dead when it was the last attempt.
//
// These errors may be wrapped (fmt.Errorf with %w); the recorded error text is the returned
// error's message. ctx is done when the kind's timeout passes, when a heartbeat finds the
// job no longer held (cause ErrNotHeld), or when shutdown gives up waiting (cause
// ErrShutdown).
type HandleFunc[T any] func(ctx context.Context, job *Job[T]) error

// HandlerOpts configure one kind's handler.
type HandlerOpts struct {
	// Timeout bounds each run of the handler through its context. -1 means no timeout.
	// Defaults to Config.JobTimeout.
	Timeout time.Duration
}

// Handlers is a set of handlers by job kind, filled by [AddHandler] and given to a client
// in [Config.Handlers]. It is not safe for concurrent use; fill it before NewClient.
type Handlers struct {
	byKind map[string]*handler
}

// NewHandlers returns an empty set of handlers.
func NewHandlers() *Handlers {
	return &Handlers{byKind: make(map[string]*handler)}
}

// handler runs one kind: it decodes the payload and calls the user's function.
type handler struct {
	kind    string
	timeout time.Duration // 0: Config.JobTimeout; -1: none

	// run returns decodeErr when the payload does not decode into the handler's type (the
	// handler is not called then), and otherwise what the handler returned.
	run func(ctx context.Context, ex *execution) (decodeErr, err error)
}

// AddHandler registers fn for jobs of the given kind, whose payloads are decoded from JSON
// into T. A payload that does not decode into T (a payload written for another type) can
// never succeed, however often it is retried: the job is cancelled at once, with the decode
// error recorded as its last_error, rather than failed. jobs_retry brings it back once a
// handler that can read it is deployed.
//
// Jobs whose kind has no handler in the client that claims them fail with an error and are
// retried with backoff, since another client (a newer deployment) may know the kind.
//
// AddHandler panics when handlers is nil, kind is empty or already has a handler, fn is
// nil, or opts.Timeout is negative other than -1: these are programming errors.
func AddHandler[T any](handlers *Handlers, kind string, fn HandleFunc[T], opts *HandlerOpts) {
	switch {
	case handlers == nil || handlers.byKind == nil:
		panic("skiplock: AddHandler: handlers must come from NewHandlers")
	case kind == "":
		panic("skiplock: AddHandler: kind must not be empty")
	case fn == nil:
		panic("skiplock: AddHandler: fn must not be nil for kind " + kind)
	case handlers.byKind[kind] != nil:
		panic("skiplock: AddHandler: kind " + kind + " already has a handler")
	}
	if opts == nil {
		opts = &HandlerOpts{}
	}
	if opts.Timeout < -1 {
		panic(fmt.Sprintf("skiplock: AddHandler: HandlerOpts.Timeout must be -1 (none), 0 (default) or positive, got %s", opts.Timeout))
	}
	typeName := reflect.TypeFor[T]().String()
	handlers.byKind[kind] = &handler{
		kind:    kind,
		timeout: opts.Timeout,
		run: func(ctx context.Context, ex *execution) (error, error) {
			job := &Job[T]{JobRow: &ex.row, ex: ex}
			if err := json.Unmarshal(ex.row.EncodedPayload, &job.Payload); err != nil {
				return fmt.Errorf("failed to decode payload of kind %q into %s: %w", kind, typeName, err), nil
			}
			return nil, fn(ctx, job)
		},
	}
}

// CompleteTx marks the job done inside tx, the handler's own transaction, so that the
// job's effects and its completion commit together, or neither does. It calls jobs_complete,
// which locks the job's row until tx ends. It returns ErrNotHeld when the job is no longer
// held at its attempt (another attempt may have run or be running): roll tx back then.
//
// A handler that called CompleteTx successfully must commit tx and return nil; the driver
// then sends no completion of its own. If tx rolls back after all, return an error, or the
// job stays running until its lease expires and runs again.
func CompleteTx[T any](ctx context.Context, tx pgx.Tx, job *Job[T]) error {
	var ok bool
	if err := tx.QueryRow(ctx, "SELECT jobs_complete($1, $2)", job.ID, int32(job.Attempt)).Scan(&ok); err != nil {
		return fmt.Errorf("failed to complete job %d in transaction: %w", job.ID, err)
	}
	if !ok {
		return ErrNotHeld
	}
	if job.ex != nil {
		job.ex.completedInTx.Store(true)
	}
	return nil
}

// Snooze returns an error that, returned by a handler, puts the job back in its queue to
// run again after d (jobs_snooze) without spending an attempt. A negative d means 0.
func Snooze(d time.Duration) error { return &snoozeError{delay: max(d, 0)} }

// Cancel returns an error that, returned by a handler, cancels the job: it is not retried.
// err's message is recorded as the job's last_error. The driver cancels only while it holds
// the job (a fenced jobs_cancel): a job that was meanwhile taken back is left alone.
func Cancel(err error) error { return &cancelError{err: err} }

// RetryAt returns an error that, returned by a handler, fails the attempt (recording the
// error's message, as for any error) and retries the job at t instead of after the usual
// backoff. Wrap it to record why: fmt.Errorf("rate limited: %w", driver.RetryAt(t)). When
// the attempt was the last one the job is dead regardless.
func RetryAt(t time.Time) error { return &retryAtError{at: t} }

type snoozeError struct{ delay time.Duration }

func (e *snoozeError) Error() string { return "snoozed for " + e.delay.String() }

type cancelError struct{ err error }

func (e *cancelError) Error() string {
	if e.err == nil {
		return "cancelled by handler"
	}
	return e.err.Error()
}

func (e *cancelError) Unwrap() error { return e.err }

type retryAtError struct{ at time.Time }

func (e *retryAtError) Error() string { return "retry at " + e.at.Format(time.RFC3339Nano) }

// handlerVerdict sorts a handler's error into the driver's outcomes.
func handlerVerdict(err error) (snooze *snoozeError, cancel *cancelError, retryAt *retryAtError) {
	if errors.As(err, &cancel) {
		return nil, cancel, nil
	}
	if errors.As(err, &snooze) {
		return snooze, nil, nil
	}
	if errors.As(err, &retryAt) {
		return nil, nil, retryAt
	}
	return nil, nil, nil
}
