package main

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/skiplock/skiplock/tests/pgtest"
)

// The tests run the commands in-process (runMain, with the streams and environment of an
// env) against a database of their own with skiplock installed; binary_test.go runs the
// built binary for what only a process shows (exit status, a real stdin).
func TestMain(m *testing.M) { pgtest.Main(m) }

// result is what one command line did.
type result struct {
	stdout, stderr string
	code           int
}

// cliOpts are the process a command runs in: DATABASE_URL (the test database unless set),
// stdin and whether it is a terminal.
type cliOpts struct {
	databaseURL *string
	stdin       string
	terminal    bool
}

// cli runs skiplock args... with DATABASE_URL set to url.
func cli(t *testing.T, url string, args ...string) result {
	t.Helper()
	return cliWith(t, t.Context(), cliOpts{databaseURL: &url}, args...)
}

func cliWith(t *testing.T, ctx context.Context, o cliOpts, args ...string) result {
	t.Helper()
	var stdout, stderr bytes.Buffer
	e := &env{
		stdin:  strings.NewReader(o.stdin),
		stdout: &stdout,
		stderr: &stderr,
		getenv: func(name string) string {
			if name == "DATABASE_URL" && o.databaseURL != nil {
				return *o.databaseURL
			}
			return ""
		},
		stdinIsTerminal: o.terminal,
	}
	code := runMain(ctx, e, args)
	return result{stdout.String(), stderr.String(), code}
}

// ok fails the test unless the command exited 0, and returns its stdout.
func (r result) ok(t *testing.T) string {
	t.Helper()
	if r.code != exitOK {
		t.Fatalf("exit code %d, want 0; stderr:\n%s", r.code, r.stderr)
	}
	return r.stdout
}

// fails fails the test unless the command exited with code, printed nothing on stdout and
// said wantErr on stderr.
func (r result) fails(t *testing.T, code int, wantErr string) {
	t.Helper()
	if r.code != code || r.stdout != "" || !strings.Contains(r.stderr, wantErr) {
		t.Fatalf("exit code %d, stdout %q, stderr %q; want exit code %d, no stdout, stderr with %q",
			r.code, r.stdout, r.stderr, code, wantErr)
	}
}

// decode parses the command's JSON output into v.
func (r result) decode(t *testing.T, v any) {
	t.Helper()
	if err := json.Unmarshal([]byte(r.ok(t)), v); err != nil {
		t.Fatalf("output is not the JSON wanted: %v\n%s", err, r.stdout)
	}
}

// setup gives a test its database, with skiplock installed, and a session on it.
func setup(t *testing.T) *pgtest.TestDB {
	t.Helper()
	return pgtest.NewTestDB(t)
}
