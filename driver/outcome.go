package driver

import (
	"context"
	"errors"
	"log/slog"
	"time"
)

// settle records the outcome of a handler's run: what the handler returned decides which
// fenced call (sql.go) records it, or hands a success to the completer.
func (c *Client) settle(ex *execution, decodeErr, err error, dur time.Duration) {
	if decodeErr == nil && err == nil && ex.completedInTx.Load() {
		c.emit(ex, EventCompleted, JobStateDone, dur, nil)
		return
	}
	if errorsIsCause(ex.ctx, ErrNotHeld) {
		// A heartbeat found the job gone; the fenced calls would refuse any outcome.
		c.emit(ex, EventLost, "", dur, ErrNotHeld)
		return
	}
	switch {
	case decodeErr != nil:
		c.cancelJob(ex, decodeErr, dur)
	case err == nil:
		c.completer.add(ex, dur)
	case errorsIsCause(ex.ctx, ErrShutdown):
		c.snoozeJob(ex, 0, err, dur) // interrupted, not failed: release it
	default:
		snooze, cancel, retryAt := handlerVerdict(err)
		switch {
		case cancel != nil:
			c.cancelJob(ex, err, dur)
		case snooze != nil:
			c.snoozeJob(ex, snooze.delay, err, dur)
		case retryAt != nil:
			at := retryAt.at
			c.failJob(ex, err, &at, dur)
		default:
			c.failJob(ex, err, nil, dur)
		}
	}
}

// failJob records a failed attempt with jobs_fail; retryAt nil means jobs_backoff's delay.
func (c *Client) failJob(ex *execution, jobErr error, retryAt *time.Time, dur time.Duration) {
	text := storableText(jobErr.Error())
	var state *string
	if !c.record(ex, "fail", func(ctx context.Context) error {
		return c.pool.QueryRow(ctx, failSQL, ex.row.ID, int32(ex.row.Attempt), text, retryAt).Scan(&state)
	}) {
		return
	}
	if state == nil {
		c.emit(ex, EventLost, "", dur, ErrNotHeld)
		return
	}
	level := slog.LevelInfo
	var pe *panicError
	if *state == string(JobStateDead) || errors.As(jobErr, &pe) {
		level = slog.LevelWarn
	}
	c.logger.LogAttrs(c.workCtx, level, "job failed",
		slog.Int64("job_id", ex.row.ID), slog.String("kind", ex.row.Kind), slog.String("queue", ex.row.Queue),
		slog.Int("attempt", ex.row.Attempt), slog.String("state", *state), slog.Any("error", jobErr))
	c.emit(ex, EventFailed, JobState(*state), dur, jobErr)
}

// snoozeJob puts the job back in its queue with jobs_snooze, ready after delay.
func (c *Client) snoozeJob(ex *execution, delay time.Duration, jobErr error, dur time.Duration) {
	if c.recordHeld(ex, "snooze", dur, snoozeSQL, ex.row.ID, int32(ex.row.Attempt), delay) {
		c.emit(ex, EventSnoozed, JobStateQueued, dur, jobErr)
	}
}

// cancelJob cancels the job with the worker's fenced jobs_cancel.
func (c *Client) cancelJob(ex *execution, jobErr error, dur time.Duration) {
	if !c.recordHeld(ex, "cancel", dur, cancelSQL, ex.row.ID, int32(ex.row.Attempt), storableText(jobErr.Error())) {
		return
	}
	c.logger.LogAttrs(c.workCtx, slog.LevelInfo, "job cancelled",
		slog.Int64("job_id", ex.row.ID), slog.String("kind", ex.row.Kind), slog.String("queue", ex.row.Queue),
		slog.Int("attempt", ex.row.Attempt), slog.Any("error", jobErr))
	c.emit(ex, EventCancelled, JobStateCancelled, dur, jobErr)
}

// recordHeld records an outcome with sql, a fenced call returning whether the job was still
// held. It reports whether the outcome was recorded; when the job was no longer held it
// emits EventLost.
func (c *Client) recordHeld(ex *execution, what string, dur time.Duration, sql string, args ...any) bool {
	var held bool
	if !c.record(ex, what, func(ctx context.Context) error {
		return c.pool.QueryRow(ctx, sql, args...).Scan(&held)
	}) {
		return false
	}
	if !held {
		c.emit(ex, EventLost, "", dur, ErrNotHeld)
	}
	return held
}

// record runs fn, a fenced call recording a job's outcome, until it succeeds. Connection
// errors are retried with backoff (the call is fenced, so repeating it is safe) until Run
// abandons database calls at the end of shutdown; then, or on an error retrying cannot fix, it logs and returns
// false, and the job stays leased until its lease expires.
func (c *Client) record(ex *execution, what string, fn func(ctx context.Context) error) bool {
	var b backoff
	for {
		ctx, cancel := context.WithTimeout(c.workCtx, opTimeout)
		err := fn(ctx)
		cancel()
		if err == nil {
			return true
		}
		if c.workCtx.Err() != nil || !retryable(err) {
			c.logger.Error("failed to record job outcome; the job runs again after its lease expires",
				slog.String("outcome", what), slog.Int64("job_id", ex.row.ID), slog.Int("attempt", ex.row.Attempt),
				slog.Any("error", err))
			return false
		}
		c.logger.Warn("failed to record job outcome; retrying",
			slog.String("outcome", what), slog.Int64("job_id", ex.row.ID), slog.Any("error", err))
		if !sleepCtx(c.workCtx, b.next()) {
			c.logger.Error("failed to record job outcome before shutdown; the job runs again after its lease expires",
				slog.String("outcome", what), slog.Int64("job_id", ex.row.ID), slog.Any("error", err))
			return false
		}
	}
}

// emit hands an event to the hook, if there is one.
func (c *Client) emit(ex *execution, kind EventKind, state JobState, dur time.Duration, err error) {
	if c.hook != nil {
		c.hook.HandleEvent(&Event{Kind: kind, Job: &ex.row, State: state, Duration: dur, Err: err})
	}
}

// errorsIsCause reports whether ctx was cancelled with cause target.
func errorsIsCause(ctx context.Context, target error) bool {
	return ctx.Err() != nil && errors.Is(context.Cause(ctx), target)
}
