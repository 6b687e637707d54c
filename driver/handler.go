package driver

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"time"
)

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
// job no longer held (cause ErrNotHeld), or when shutdown stops waiting (cause
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

	// anyKind runs the kinds without a handler of their own (AddDefaultHandler); nil if none.
	anyKind *handler
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
	// handler is not called then), and otherwise what the handler returned. nil for a batch
	// handler.
	run func(ctx context.Context, ex *execution) (decodeErr, err error)

	// batch runs the jobs of a batch handler (AddBatchHandler); nil for other handlers.
	batch *batchHandler
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
	handlers.byKind[kind] = newHandler(kind, fn, opts)
}

// AddDefaultHandler registers fn for the jobs of every kind that has no handler of its own
// (AddHandler), with payloads decoded from JSON into T (json.RawMessage keeps them as they
// are). It is for programs that run any job handed to them, such as `skiplock work --exec`,
// which passes each payload to a command. Without a default handler, a job whose kind has
// no handler fails and is retried (see AddHandler).
//
// AddDefaultHandler panics when handlers is nil, already has a default handler, fn is nil,
// or opts.Timeout is negative other than -1.
func AddDefaultHandler[T any](handlers *Handlers, fn HandleFunc[T], opts *HandlerOpts) {
	switch {
	case handlers == nil || handlers.byKind == nil:
		panic("skiplock: AddDefaultHandler: handlers must come from NewHandlers")
	case fn == nil:
		panic("skiplock: AddDefaultHandler: fn must not be nil")
	case handlers.anyKind != nil:
		panic("skiplock: AddDefaultHandler: handlers already has a default handler")
	}
	handlers.anyKind = newHandler("", fn, opts)
}

// newHandler wraps fn for kind ("" for the default handler). It panics on a bad opts.Timeout.
func newHandler[T any](kind string, fn HandleFunc[T], opts *HandlerOpts) *handler {
	if opts == nil {
		opts = &HandlerOpts{}
	}
	if opts.Timeout < -1 {
		panic(fmt.Sprintf("skiplock: AddHandler: HandlerOpts.Timeout must be -1 (none), 0 (default) or positive, got %s", opts.Timeout))
	}
	typeName := reflect.TypeFor[T]().String()
	return &handler{
		kind:    kind,
		timeout: opts.Timeout,
		run: func(ctx context.Context, ex *execution) (error, error) {
			kind := ex.row.Kind
			job := &Job[T]{JobRow: &ex.row, ex: ex}
			if err := json.Unmarshal(ex.row.EncodedPayload, &job.Payload); err != nil {
				return fmt.Errorf("failed to decode payload of kind %q into %s: %w", kind, typeName, err), nil
			}
			return nil, fn(ctx, job)
		},
	}
}
