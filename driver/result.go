package driver

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// resultMaxBytes is the largest result, checkpoint value or progress the SQL functions take.
const resultMaxBytes = 1 << 20

// SetResult records v, encoded as JSON, as the job's result: the completion stores it (the
// driver's own after the handler returns nil, or [CompleteTx]), [WaitResult] and jobs_get
// return it, and the job's children find it in JobRow.ParentResults. Call it before
// returning nil (or before CompleteTx); a later call replaces the value, and a failed attempt
// stores nothing. A json.RawMessage is stored as it is. It returns an *InvalidError when v
// cannot be encoded, holds the NUL character (\u0000) or is larger than 1 MB as compact JSON.
// The database measures jsonb's text, which can be longer (1e300 prints as 301 digits): a
// result it refuses when the driver completes the job cancels the job, with a last_error
// saying why, since another attempt would return the same result ([CompleteTx] returns the
// refusal instead).
func (j *Job[T]) SetResult(v any) error {
	b, err := encodeJSONValue("result", v)
	if err != nil {
		return err
	}
	j.result = b
	return nil
}

// JobResult is what became of a job: jobs_result's row.
type JobResult struct {
	// State is the job's state; done, dead or cancelled once it has finished.
	State JobState

	// Result is the job's result as JSON (Job.SetResult, jobs_complete's result); nil for
	// none.
	Result json.RawMessage

	// LastError is the job's last error, "" for none.
	LastError string
}

// Finished reports whether the job is done, dead or cancelled.
func (r *JobResult) Finished() bool {
	return r.State == JobStateDone || r.State == JobStateDead || r.State == JobStateCancelled
}

// ErrJobNotFound reports that a job does not exist (never did, or was pruned).
var ErrJobNotFound = errors.New("job not found")

// waitPollInterval is how often WaitResult reads the job's state without a notification: the
// safety net for a job enqueued without NotifyFinished, or a notification lost with its
// connection.
var waitPollInterval = time.Second

// WaitResult waits until the job is done, dead or cancelled and returns what became of it
// (a dead or cancelled job is not an error: look at State and LastError). It listens on the
// jobs_finished channel on a connection of db held for the wait, and reads jobs_result at
// once, on each notification naming the job and at least once a second, so it also returns
// for jobs enqueued without EnqueueOpts.NotifyFinished, only later. A lost connection is
// replaced (with backoff) and the wait goes on. It returns ctx's error (wrapped) when ctx
// ends first, never a result it has not read, and ErrJobNotFound (wrapped) for an unknown
// job.
func WaitResult(ctx context.Context, db *pgxpool.Pool, id int64) (*JobResult, error) {
	var b backoff
	for {
		r, err := waitOnce(ctx, db, id)
		if err == nil || ctx.Err() != nil || errors.Is(err, ErrJobNotFound) || !retryable(err) {
			return r, err
		}
		// The connection was lost (a server restart, pg_terminate_backend, the network): wait
		// on a new one. Its first read catches a finish whose notification went with the old.
		if !sleepCtx(ctx, b.next()) {
			return nil, fmt.Errorf("job %d has not finished: %w", id, ctx.Err())
		}
	}
}

// waitOnce is WaitResult on one connection of db: it returns the connection's error when
// the connection fails.
func waitOnce(ctx context.Context, db *pgxpool.Pool, id int64) (*JobResult, error) {
	conn, err := db.Acquire(ctx)
	if err != nil {
		return nil, fmt.Errorf("failed to wait for job %d: %w", id, err)
	}
	// The connection goes back to the pool only without its LISTEN.
	listening := false
	defer func() {
		if listening {
			uctx, cancel := context.WithTimeout(context.Background(), opTimeout)
			defer cancel()
			if _, err := conn.Exec(uctx, unlistenFinishedSQL); err != nil {
				_ = conn.Conn().Close(uctx)
			}
		}
		conn.Release()
	}()
	// LISTEN before the first read: a finish committed after the read is then heard.
	if _, err := conn.Exec(ctx, listenFinishedSQL); err != nil {
		return nil, fmt.Errorf("failed to wait for job %d: %w", id, err)
	}
	listening = true
	payload := strconv.FormatInt(id, 10)
	for {
		r, err := readResult(ctx, conn.Conn(), id)
		if err != nil {
			return nil, err
		}
		if r.Finished() {
			return r, nil
		}
		// Until a notification names the job or the poll interval passes.
		deadline := time.Now().Add(waitPollInterval)
		for {
			wctx, cancel := context.WithDeadline(ctx, deadline)
			n, err := conn.Conn().WaitForNotification(wctx)
			cancel()
			if ctx.Err() != nil {
				return nil, fmt.Errorf("job %d has not finished: %w", id, ctx.Err())
			}
			if errors.Is(err, context.DeadlineExceeded) && !conn.Conn().IsClosed() {
				break // the poll
			}
			if err != nil {
				return nil, fmt.Errorf("failed to wait for job %d: %w", id, err)
			}
			if n.Payload == payload {
				break
			}
		}
	}
}

// readResult reads jobs_result(id) on conn.
func readResult(ctx context.Context, conn *pgx.Conn, id int64) (*JobResult, error) {
	var r JobResult
	var state string
	var lastError *string
	err := conn.QueryRow(ctx, resultSQL, id).Scan(&state, &r.Result, &lastError)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return nil, fmt.Errorf("failed to wait for job %d: %w", id, ErrJobNotFound)
	case err != nil:
		if ctx.Err() != nil {
			return nil, fmt.Errorf("job %d has not finished: %w", id, ctx.Err())
		}
		return nil, fmt.Errorf("failed to read the result of job %d: %w", id, err)
	}
	r.State = JobState(state)
	if lastError != nil {
		r.LastError = *lastError
	}
	return &r, nil
}

// encodeJSONValue encodes v for a jsonb argument named field (a json.RawMessage as it is),
// refusing what the SQL function surely refuses. Characters are not escaped for HTML: Go's
// \u003c for '<' is 6 bytes of the size the SQL functions measure, jsonb's text 1.
func encodeJSONValue(field string, v any) (json.RawMessage, error) {
	var b []byte
	if raw, ok := v.(json.RawMessage); ok {
		if !json.Valid(raw) {
			return nil, &InvalidError{Field: field, Problem: "is not valid JSON"}
		}
		b = raw
	} else {
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(v); err != nil {
			return nil, &InvalidError{Field: field, Problem: fmt.Sprintf("cannot be encoded as JSON: %v", err)}
		}
		b = bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
	}
	// jsonb refuses the NUL character (22P05), which would fail a whole batch of completions.
	if hasNULEscape(b) {
		return nil, &InvalidError{Field: field, Problem: "must not contain the NUL character (\\u0000), which PostgreSQL's jsonb refuses"}
	}
	// The SQL functions measure jsonb's text, which is longer than compact JSON in most ways
	// (a space after each ',' and ':', numbers in full: 1e300 is 301 digits) and shorter only
	// by escapes where jsonb writes the character (Go's \u2028, a json.RawMessage's own) and
	// a json.RawMessage's duplicate keys. So only compact JSON over the limit is refused here;
	// the database decides the rest, and the completer cancels a job whose result it refuses.
	if n := len(b); n > resultMaxBytes {
		var compact bytes.Buffer
		if err := json.Compact(&compact, b); err == nil {
			n = compact.Len()
		}
		if n > resultMaxBytes {
			return nil, &InvalidError{Field: field, Problem: fmt.Sprintf("must be at most 1 MB as JSON text, got %d bytes", n)}
		}
	}
	return b, nil
}

// hasNULEscape reports whether the JSON text b holds the escape \u0000, a NUL character:
// one preceded by an even number of backslashes (in \\u0000 the backslash is itself escaped,
// and the string holds a backslash followed by "u0000").
func hasNULEscape(b []byte) bool {
	for i := 0; ; {
		j := bytes.Index(b[i:], []byte(`\u0000`))
		if j < 0 {
			return false
		}
		j += i
		n := 0
		for k := j - 1; k >= 0 && b[k] == '\\'; k-- {
			n++
		}
		if n%2 == 0 {
			return true
		}
		i = j + 1
	}
}
