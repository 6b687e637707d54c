package driver_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/skiplock/skiplock/driver"
)

// SetResult refuses only what the database surely would: 360 KB of "<b>" (1.5 MB had Go
// escaped it for HTML) and a string holding a backslash followed by "u0000" are accepted,
// stored and read back as they were; a real NUL is refused.
func TestSetResultEncoding(t *testing.T) {
	t.Parallel()
	b := setup(t)
	values := map[string]string{
		"html":      strings.Repeat("<b>", 120_000),
		"backslash": `C:\u0000 is not a NUL`,
	}
	var job driver.Job[struct{}]
	job.JobRow = &driver.JobRow{}
	var inv *driver.InvalidError
	if err := job.SetResult("a\x00b"); !errors.As(err, &inv) || inv.Field != "result" {
		t.Fatalf("SetResult of a NUL: %v, want an InvalidError naming result", err)
	}
	if err := job.SetResult(json.RawMessage(`["\\\u0000"]`)); !errors.As(err, &inv) || inv.Field != "result" {
		t.Fatalf(`SetResult of an escaped backslash then a NUL: %v, want an InvalidError naming result`, err)
	}
	for name, v := range values {
		if err := job.SetResult(v); err != nil {
			t.Fatalf("SetResult of the %s string: %v, want it accepted", name, err)
		}
	}

	hs := driver.NewHandlers()
	driver.AddHandler(hs, "echo", func(ctx context.Context, job *driver.Job[string]) error {
		return job.SetResult(values[job.Payload])
	}, nil)
	ids := map[string]int64{}
	for name := range values {
		ids[name] = mustEnqueue(t, b.pool, "echo", name, &driver.EnqueueOpts{NotifyFinished: true})
	}
	startClient(t, b.pool, baseConfig(b, hs, map[string]driver.QueueConfig{"default": {}}))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for name, id := range ids {
		r, err := driver.WaitResult(ctx, b.pool, id)
		if err != nil {
			t.Fatal(err)
		}
		var got string
		if r.State != driver.JobStateDone || json.Unmarshal(r.Result, &got) != nil || got != values[name] {
			t.Errorf("job with the %s string = %s (%.80s), want done with the string", name, r.State, r.Result)
		}
	}
}
