package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/skiplock/skiplock/admin"
)

// finishedChannel is where a job enqueued with notify_finished announces its end, the id as
// the payload.
const finishedChannel = "jobs_finished"

// waitPollDefault is how often `skiplock wait` reads the job besides on notifications.
const waitPollDefault = time.Second

var waitCommand = &command{
	name:     "wait",
	synopsis: "ID [--timeout D] [--poll D] [flags]",
	summary:  "wait until a job is done, dead or cancelled and print its result (jobs_result)",
	help: `Waits until job ID ends and prints its result: the JSON its worker completed it with
(null when none). The command listens on the jobs_finished channel before its first read of
the job, so it wakes as soon as a job enqueued with notify_finished ends, and reads the job
every --poll besides, so it also sees the end of any other job.

Exit code 0 when the job is done; 1 when it ended dead or cancelled (its last error on
stderr); 3 when there is no such job; 4 when --timeout passed first (the job's state on
stderr). A timeout never answers for a job that has not ended.

  id=$(skiplock enqueue report --notify-finished)
  skiplock wait "$id" --timeout 5m > report.json

Output: the result, indented; -o json: {"id": ID, "state": S, "result": JSON or null,
"last_error": TEXT or null}, also when the job ended dead or cancelled.
`,
	db:     true,
	output: true,
	setup: func(fs *flag.FlagSet) func(context.Context, *call) error {
		timeout := fs.Duration("timeout", 0, "give up after this long (30s, 5m); 0 waits until the job ends")
		poll := fs.Duration("poll", waitPollDefault, "read the job this often besides on notifications")
		return func(ctx context.Context, c *call) error {
			if len(c.args) != 1 {
				return usageErrorf("wait: want one job ID, got %d arguments", len(c.args))
			}
			id, err := strconv.ParseInt(c.args[0], 10, 64)
			if err != nil {
				return usageErrorf("wait: ID must be an integer, got %q", c.args[0])
			}
			if *timeout < 0 {
				return usageErrorf("wait: --timeout must not be negative, got %v", *timeout)
			}
			if *poll <= 0 {
				return usageErrorf("wait: --poll must be positive, got %v", *poll)
			}
			r, err := waitForJob(ctx, c.conn, c.admin(), id, *timeout, *poll)
			if err != nil {
				return err
			}
			if c.format == outputJSON {
				if err := writeJSON(c.stdout, struct {
					ID int64 `json:"id"`
					*admin.JobResult
				}{id, r}); err != nil {
					return err
				}
			} else if r.State == "done" {
				result := r.Result
				if result == nil {
					result = []byte("null")
				}
				if _, err := fmt.Fprintln(c.stdout, indentJSON(result)); err != nil {
					return err
				}
			}
			if r.State != "done" && r.LastError != nil {
				return fmt.Errorf("wait: job %d ended %s: %s", id, r.State, printable(*r.LastError))
			}
			if r.State != "done" {
				return fmt.Errorf("wait: job %d ended %s", id, r.State)
			}
			return nil
		}
	},
}

// waitForJob follows the SQL API's wait: LISTEN jobs_finished, then read the job with
// jobs_result until it is done, dead or cancelled, sleeping between reads until a
// notification names the job or poll passes. It fails with exit code 3 for an unknown job
// and 4 when timeout (0: none) passes first.
func waitForJob(ctx context.Context, conn *pgx.Conn, a *admin.Client, id int64, timeout, poll time.Duration) (*admin.JobResult, error) {
	// Before the first read: a job ending between the read and the LISTEN is not missed.
	if _, err := conn.Exec(ctx, "LISTEN "+finishedChannel); err != nil {
		return nil, fmt.Errorf("failed to listen on %s: %w", finishedChannel, err)
	}
	var deadline time.Time
	if timeout > 0 {
		deadline = time.Now().Add(timeout)
	}
	for {
		r, err := a.Result(ctx, id)
		if errors.Is(err, admin.ErrJobNotFound) {
			return nil, notFoundErrorf("wait: no job %d", id)
		}
		if err != nil {
			return nil, fmt.Errorf("failed to read job %d: %w", id, err)
		}
		if r.Finished() {
			return r, nil
		}
		sleep := poll
		if !deadline.IsZero() {
			left := time.Until(deadline)
			if left <= 0 {
				return nil, &exitError{code: exitTimeout, err: fmt.Errorf("wait: job %d still %s after %v", id, r.State, timeout)}
			}
			sleep = min(sleep, left)
		}
		if err := awaitFinished(ctx, conn, id, sleep); err != nil {
			return nil, err
		}
	}
}

// awaitFinished returns when a notification of jobs_finished names job id, or after d.
func awaitFinished(ctx context.Context, conn *pgx.Conn, id int64, d time.Duration) error {
	wctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	want := strconv.FormatInt(id, 10)
	for {
		n, err := conn.WaitForNotification(wctx)
		switch {
		case err == nil:
			if n.Channel == finishedChannel && n.Payload == want {
				return nil
			}
		case ctx.Err() != nil:
			return ctx.Err()
		case errors.Is(err, context.DeadlineExceeded) && !conn.IsClosed():
			return nil
		default:
			return fmt.Errorf("failed to wait for a notification: %w", err)
		}
	}
}
