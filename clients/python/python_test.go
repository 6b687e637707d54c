// Package pythonclient_test runs the Python client's pytest suite (clients/python/tests)
// against a throwaway database, so `go test ./...` covers the Python client too.
package pythonclient_test

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/skiplock/skiplock/tests/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// python is Debian's interpreter, where apt puts python3-psycopg and python3-pytest;
// a python3 earlier on PATH (pyenv) would not see them. SKIPLOCK_PYTHON overrides it.
func python() string {
	if p := os.Getenv("SKIPLOCK_PYTHON"); p != "" {
		return p
	}
	return "/usr/bin/python3"
}

// TestPytest runs pytest -v in clients/python with SKIPLOCK_TEST_DATABASE_URL naming a
// database with skiplock installed. Each Python test makes its own queue names, so one
// database serves the whole suite. SKIPLOCK_PYTEST_ARGS adds arguments (e.g. "-k parity").
func TestPytest(t *testing.T) {
	py := python()
	if _, err := os.Stat(py); err != nil {
		t.Skipf("%s not found: install python3, python3-psycopg and python3-pytest (apt-get install python3-psycopg python3-pytest)", py)
	}
	if out, err := exec.Command(py, "-c", "import psycopg, pytest").CombinedOutput(); err != nil {
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		t.Skipf("%s: %s (apt-get install python3-psycopg python3-pytest)", py, lines[len(lines)-1])
	}
	url := pgtest.NewDatabase(t)

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	args := []string{"-m", "pytest", "-v", "-p", "no:cacheprovider", "tests"}
	args = append(args, strings.Fields(os.Getenv("SKIPLOCK_PYTEST_ARGS"))...)
	cmd := exec.CommandContext(ctx, py, args...)
	cmd.Env = append(os.Environ(), "SKIPLOCK_TEST_DATABASE_URL="+url, "PYTHONPATH=.", "PYTHONDONTWRITEBYTECODE=1")
	out, err := cmd.CombinedOutput()
	// pytest's own report, test by test, is the useful part of a failure.
	t.Logf("%s %s:\n%s", py, strings.Join(args, " "), out)
	if err != nil {
		t.Fatalf("pytest: %v", err)
	}
}
