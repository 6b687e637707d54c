package driver_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/skiplock/skiplock/driver"
)

// unstorableError is a handler's error text that PostgreSQL would refuse as a text
// parameter (SQLSTATE 22021): invalid UTF-8, a NUL, and a character cut in two.
const unstorableError = "bad \xff\xfe bytes, a NUL \x00 and half an \xc3"

// unstorableErrorStored is how unstorableError is recorded: each run of invalid bytes one
// U+FFFD, the NUL dropped.
const unstorableErrorStored = "bad \uFFFD bytes, a NUL  and half an \uFFFD"

// TestUnstorableErrorTextIsRecorded: an error whose text is not valid UTF-8 or holds a NUL
// is still recorded, sanitised, by the outcome the handler chose, at once: the backoff,
// RetryAt and Cancel are kept, rather than lost until the lease expires.
func TestUnstorableErrorTextIsRecorded(t *testing.T) {
	t.Parallel()
	later := time.Now().Add(time.Hour).Truncate(time.Microsecond)
	for _, tc := range []struct {
		name      string
		err       error
		state     string
		lastError string
		runAt     func(j jobInfo, before time.Time) bool
	}{
		{"FailWithBackoff", errors.New(unstorableError), "queued", unstorableErrorStored,
			// backoff_base is an hour in this test: the retry waits for it.
			func(j jobInfo, before time.Time) bool { return j.RunAt.After(before.Add(30 * time.Minute)) }},
		{"RetryAt", fmt.Errorf("%s: %w", unstorableError, driver.RetryAt(later)), "queued",
			unstorableErrorStored + ": retry at " + later.Format(time.RFC3339Nano),
			func(j jobInfo, _ time.Time) bool { return j.RunAt.Equal(later) }},
		{"Cancel", driver.Cancel(errors.New(unstorableError)), "cancelled", unstorableErrorStored,
			func(jobInfo, time.Time) bool { return true }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			setBackoff(t, b.pool, "1 hour")
			hs := driver.NewHandlers()
			driver.AddHandler(hs, "garble", func(ctx context.Context, job *driver.Job[struct{}]) error {
				return tc.err
			}, nil)
			cfg := baseConfig(b, hs, map[string]driver.QueueConfig{"default": {}})
			cfg.Lease = 30 * time.Second // an expired lease must not pass for the outcome
			startClient(t, b.pool, cfg)

			before := time.Now()
			id := mustEnqueue(t, b.pool, "garble", nil, nil)
			waitUntil(t, 10*time.Second, "outcome recorded", func() bool { return getJob(t, b.pool, id).LastError != nil })
			j := getJob(t, b.pool, id)
			if j.State != tc.state || j.Attempts != 1 || *j.LastError != tc.lastError || !tc.runAt(j, before) ||
				len(j.Errors) != 1 || j.Errors[0]["error"] != tc.lastError {
				t.Fatalf("job = %+v (last_error %q), want %s after one attempt with last_error %q", j, *j.LastError, tc.state, tc.lastError)
			}
		})
	}
}
