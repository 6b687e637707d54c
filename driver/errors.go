package driver

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

// ErrNotHeld reports that this worker no longer holds a job at the attempt it was given: its
// lease expired and the job was taken back (and maybe claimed by another worker), or it was
// cancelled. It is returned by [CompleteTx], and it is the cause ([context.Cause]) of a
// handler's context when a heartbeat finds the job gone. Nothing the handler does afterwards
// is recorded: the fenced SQL functions refuse it.
var ErrNotHeld = errors.New("job is no longer held by this worker")

// ErrShutdown is the cause ([context.Cause]) of a handler's context when the client shuts
// down and [Config.ShutdownTimeout] passes before the handler returned. A handler that then
// returns an error has its job released (queued again, ready now, without spending an
// attempt) rather than failed.
var ErrShutdown = errors.New("client shut down before the job finished")

// ErrAlreadyRunning is returned by [Client.Run] when Run was already called on the client.
// A client runs once; make a new one to run again.
var ErrAlreadyRunning = errors.New("client was already run")

// ErrGaveUp is wrapped by the error [Client.Run] returns when it stopped on its own rather
// than because its context was cancelled or [Client.Stop] was called: claiming jobs failed
// in a way retrying cannot fix (skiplock not installed where the pool's connections look, or
// a role without the right to call jobs_claim). Test for it with errors.Is; the error also
// wraps the cause, a *pgconn.PgError, for errors.As. Database outages never cause it.
var ErrGaveUp = errors.New("client gave up")

// InvalidError reports a bad configuration field or argument, whether the driver found it
// (Config fields in [NewClient], options in [Enqueue]) or a SQL function did (SQLSTATE 22023,
// which names the parameter).
type InvalidError struct {
	// Field names what was wrong: a Go field path such as `Config.Queues["mail"].Slots` or
	// `EnqueueOpts.Delay`, or the SQL parameter such as "kind" or "kinds[3]".
	Field string

	// Problem says what is wrong with it, e.g. "must not be negative, got -1".
	Problem string

	// Err is the *pgconn.PgError when the database reported the problem; nil otherwise.
	Err error
}

func (e *InvalidError) Error() string { return "invalid " + e.Field + ": " + e.Problem }

// Unwrap returns the database error, if any.
func (e *InvalidError) Unwrap() error { return e.Err }

// IsInvalid reports whether err, or an error it wraps, is an *InvalidError.
func IsInvalid(err error) bool {
	var ie *InvalidError
	return errors.As(err, &ie)
}

// The results a handler returns to choose its job's outcome other than success or a failure
// with backoff (see [HandleFunc]), and the error recorded for a panic.

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

// panicError is a handler's recovered panic, recorded as a failed attempt.
type panicError struct {
	value any
	stack []byte
}

func (e *panicError) Error() string { return fmt.Sprintf("panic: %v\n\n%s", e.value, e.stack) }

// sqlInvalid turns the SQL functions' SQLSTATE 22023 (which names the bad parameter in the
// error's COLUMN field) into an *InvalidError; other errors are returned unchanged.
func sqlInvalid(err error) error {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != "22023" || pgErr.ColumnName == "" {
		return err
	}
	// The message is "<function>: <parameter> <problem>".
	problem := pgErr.Message
	if _, rest, ok := strings.Cut(problem, ": "); ok {
		problem = strings.TrimPrefix(rest, pgErr.ColumnName+" ")
	}
	return &InvalidError{Field: pgErr.ColumnName, Problem: problem, Err: pgErr}
}

// invalidParameter reports whether err is the SQL functions' 22023 naming the parameter
// name.
func invalidParameter(err error, name string) bool {
	var ie *InvalidError
	return errors.As(sqlInvalid(err), &ie) && ie.Err != nil && ie.Field == name
}

// fatalSQL reports whether a database error means the client cannot work at all (skiplock
// not installed where the connection looks, or the role may not call the functions), so that
// retrying is pointless and Run should return it.
func fatalSQL(err error) bool {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) {
		return false
	}
	switch pgErr.Code {
	case "42883", // undefined_function
		"42P01", // undefined_table
		"42704", // undefined_object (e.g. the jobs_claimed type)
		"42501", // insufficient_privilege
		"3F000": // invalid_schema_name
		return true
	}
	return false
}

// retryable reports whether a failed database call may succeed if repeated: connection
// loss, server shutdown or restart, timeouts, serialization failures. Errors in the
// statement itself (bad arguments, missing functions) are not.
func retryable(err error) bool {
	if errors.Is(err, context.Canceled) {
		return false
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch pgErr.Code[:2] {
		case "08", // connection exception
			"40", // transaction rollback: serialization failure, deadlock
			"53", // insufficient resources: too many connections, out of memory
			"57", // operator intervention: admin shutdown, terminated, cannot connect now, query canceled
			"58": // system error: I/O
			return true
		}
		return false
	}
	// Network errors, pool and connect errors, timeouts.
	return true
}

// errorMethodPanicError stands for a handler's error whose Error method panics (a nil
// pointer of an error type whose method dereferences it, returned as a non-nil error, is the
// usual way): text says so, and Unwrap returns the error itself, so that errors.As still finds
// a Cancel or Snooze verdict beneath it.
type errorMethodPanicError struct {
	err  error
	text string
}

func (e *errorMethodPanicError) Error() string { return e.text }
func (e *errorMethodPanicError) Unwrap() error { return e.err }

// safeError returns err, unless its Error method panics: then an *errorMethodPanicError
// wrapping it. Every later step calls Error (the failure's text for jobs_fail and jobs_cancel,
// the log, the hook); a panic there, outside the handler's recover, would crash the process
// and every job running in it.
func safeError(err error) (safe error) {
	if err == nil {
		return nil
	}
	defer func() {
		if v := recover(); v != nil {
			safe = &errorMethodPanicError{err: err, text: fmt.Sprintf("error of type %T: its Error method panicked: %v", err, v)}
		}
	}()
	_ = err.Error()
	return err
}
