package main

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/skiplock/skiplock/tests/pgtest"
)

// buildBinary builds cmd/skiplock into a directory of the test's.
func buildBinary(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "skiplock")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("failed to build skiplock: %v\n%s", err, out)
	}
	return bin
}

// runBinary runs the built skiplock with DATABASE_URL set to url; stdin is /dev/null (not a
// terminal).
func runBinary(t *testing.T, bin, url string, args ...string) result {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), "DATABASE_URL="+url)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := 0
	var exitErr *exec.ExitError
	if errors.As(err, &exitErr) {
		code = exitErr.ExitCode()
	} else if err != nil {
		t.Fatalf("failed to run skiplock: %v", err)
	}
	return result{stdout.String(), stderr.String(), code}
}

// TestBinaryExitCodes runs the built binary: the process exits 0, 1, 2 or 3 as documented,
// and a filter-wide retry of dead jobs with stdin not a terminal (/dev/null) is refused
// without --yes and done with it.
func TestBinaryExitCodes(t *testing.T) {
	t.Parallel()
	bin := buildBinary(t)
	db := setup(t)
	for range 2 {
		deadJob(t, db, "mail", "email", "boom")
	}

	if out := runBinary(t, bin, db.URL, "help").ok(t); !strings.Contains(out, "exit codes:") {
		t.Fatalf("help: %q", out)
	}
	runBinary(t, bin, db.URL, "bogus").fails(t, exitUsage, `unknown command "bogus"`)
	runBinary(t, bin, db.URL, "list", "--nope").fails(t, exitUsage, "flag provided but not defined")
	runBinary(t, bin, db.URL, "show", "42").fails(t, exitNotFound, "no job 42")
	runBinary(t, bin, "postgres://nobody@127.0.0.1:1/none?connect_timeout=5", "list").fails(t, exitFailed, "failed to connect")

	runBinary(t, bin, db.URL, "retry", "--queue", "mail").fails(t, exitUsage, "refusing to retry 2 dead jobs")
	if n := pgtest.QueryOne[int64](t, db.Conn, "SELECT count(*) FROM jobs WHERE state = 'dead'"); n != 2 {
		t.Fatalf("%d dead jobs after a refused retry, want 2", n)
	}
	if out := runBinary(t, bin, db.URL, "retry", "--queue", "mail", "--yes").ok(t); out != "retried 2 jobs\n" {
		t.Fatalf("retry --yes: %q", out)
	}
	if n := pgtest.QueryOne[int64](t, db.Conn, "SELECT count(*) FROM jobs WHERE state = 'queued'"); n != 2 {
		t.Fatalf("%d queued jobs after retry --yes, want 2", n)
	}
}
