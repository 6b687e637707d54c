// Package nodeclient_test runs the Node client's own suite (node --test, in test/) against
// a throwaway database, so that go test ./... covers the Node client too.
package nodeclient_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/skiplock/skiplock/tests/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// TestNodeClient installs the package's pinned dependencies with npm ci when node_modules
// is missing or older than package-lock.json, then runs node --test with
// SKIPLOCK_TEST_DATABASE_URL naming a fresh database with skiplock installed. Each Node test
// file isolates itself with queue names of its own. It skips when node 20+ or npm is
// missing. SKIPLOCK_NODE_TEST_PATTERN passes --test-name-pattern, to run some tests only.
func TestNodeClient(t *testing.T) {
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("node not found: install Node.js 20 or later (with npm) to run the Node client's tests")
	}
	out, err := exec.Command(node, "-p", "process.versions.node").Output()
	if err != nil {
		t.Fatalf("failed to run %s: %v", node, err)
	}
	version := strings.TrimSpace(string(out))
	if major, _, _ := strings.Cut(version, "."); atoi(major) < 20 {
		t.Skipf("the Node client needs Node.js 20 or later, found %s at %s", version, node)
	}
	npm, err := exec.LookPath("npm")
	if err != nil {
		t.Skip("npm not found: install npm to fetch the Node client's dependencies (pg)")
	}
	if stale("node_modules/.package-lock.json", "package-lock.json") {
		cmd := exec.CommandContext(t.Context(), npm, "ci", "--no-audit", "--no-fund", "--loglevel=error")
		var buf bytes.Buffer
		cmd.Stdout, cmd.Stderr = &buf, &buf
		if err := cmd.Run(); err != nil {
			// Without the registry the packages cannot be had; say so rather than fail.
			t.Skipf("npm ci failed, so the Node client's dependencies are missing: %v\n%s", err, buf.String())
		}
	}

	url := pgtest.NewDatabase(t)
	args := []string{"--test", "--test-reporter=spec"}
	if p := os.Getenv("SKIPLOCK_NODE_TEST_PATTERN"); p != "" {
		args = append(args, "--test-name-pattern="+p)
	}
	files, err := filepath.Glob("test/*.test.js")
	if err != nil || len(files) == 0 {
		t.Fatalf("no test files in test/: %v", err)
	}
	args = append(args, files...)
	cmd := exec.CommandContext(t.Context(), node, args...)
	cmd.Env = append(os.Environ(), "SKIPLOCK_TEST_DATABASE_URL="+url, "NO_COLOR=1")
	if testing.Short() {
		cmd.Env = append(cmd.Env, "SKIPLOCK_TEST_SHORT=1")
	}
	cmd.WaitDelay = 10 * time.Second
	// node --test's own report, the summary included, goes to the test log.
	var report bytes.Buffer
	cmd.Stdout, cmd.Stderr = &report, &report
	err = cmd.Run()
	for line := range strings.Lines(report.String()) {
		t.Log(strings.TrimRight(line, "\n"))
	}
	if err != nil {
		t.Fatalf("node --test failed: %v", err)
	}
}

// atoi is s as a number, or 0.
func atoi(s string) int {
	n, _ := strconv.Atoi(s)
	return n
}

// stale reports whether target is missing or older than source.
func stale(target, source string) bool {
	t, err := os.Stat(target)
	if err != nil {
		return true
	}
	s, err := os.Stat(source)
	return err != nil || t.ModTime().Before(s.ModTime())
}
