package driver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
)

// errNoClient reports a call that needs the client that claimed the job on a Job made
// elsewhere.
var errNoClient = errors.New("job was not claimed by a Client")

// Step runs fn once across the job's attempts: the first attempt that gets past it saves its
// value (encoded as JSON, at most 1 MB) with jobs_checkpoint, and every later attempt (after a
// failure, an expired lease, a crash of the worker) gets that value back, decoded into R,
// without calling fn. Name identifies the step within the job (1 to 200 bytes); give each step
// its own. fn's error is returned as it is and saves nothing, so a failing step runs again in
// the next attempt. Step returns ErrNotHeld when the job is no longer held at its attempt (the
// value is not saved; stop working on the job). Durable steps are what make a long job with
// side effects resumable: put each effect that must not repeat in a step, and whatever
// follows reads the steps' values.
func Step[R, T any](ctx context.Context, job *Job[T], name string, fn func(ctx context.Context) (R, error)) (R, error) {
	var zero R
	if saved, ok := job.Checkpoints[name]; ok {
		var v R
		if err := json.Unmarshal(saved, &v); err != nil {
			return zero, fmt.Errorf("failed to decode the saved value of step %q of job %d: %w", name, job.ID, err)
		}
		return v, nil
	}
	if job.ex == nil {
		return zero, fmt.Errorf("failed to save step %q of job %d: %w", name, job.ID, errNoClient)
	}
	v, err := fn(ctx)
	if err != nil {
		return zero, err
	}
	b, err := encodeJSONValue("value", v)
	if err != nil {
		return zero, err
	}
	var ok bool
	if err := job.ex.loop.c.pool.QueryRow(ctx, checkpointSQL, job.ID, int32(job.Attempt), name, []byte(b)).Scan(&ok); err != nil {
		return zero, fmt.Errorf("failed to save step %q of job %d: %w", name, job.ID, sqlInvalid(err))
	}
	if !ok {
		return zero, ErrNotHeld
	}
	if job.Checkpoints == nil {
		job.Checkpoints = make(map[string]json.RawMessage)
	}
	job.Checkpoints[name] = b
	return v, nil
}

// SetProgress records how far the job has got (jobs_progress): any value that encodes as
// JSON, at most 1 MB, such as a percentage or {"done": 40, "of": 100}; nil clears it. jobs_get,
// jobs_list, the CLI and the dashboard show it. It returns ErrNotHeld when the job is no
// longer held at its attempt.
func (j *Job[T]) SetProgress(ctx context.Context, v any) error {
	if j.ex == nil {
		return fmt.Errorf("failed to record the progress of job %d: %w", j.ID, errNoClient)
	}
	var arg []byte // NULL for nil
	if v != nil {
		b, err := encodeJSONValue("progress", v)
		if err != nil {
			return err
		}
		arg = b
	}
	var ok bool
	if err := j.ex.loop.c.pool.QueryRow(ctx, progressSQL, j.ID, int32(j.Attempt), arg).Scan(&ok); err != nil {
		return fmt.Errorf("failed to record the progress of job %d: %w", j.ID, sqlInvalid(err))
	}
	if !ok {
		return ErrNotHeld
	}
	return nil
}
