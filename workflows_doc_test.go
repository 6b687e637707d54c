package skiplock_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/skiplock/skiplock/tests/pgtest"
)

// docs/workflows.md's example is only worth something if it works as written: its SQL is
// tests/regress/sql/workflow_example.sql (replayed with its expected output by
// tests/regress), its Go is examples/workflow, run below.
func TestWorkflowsDocExamplesAreTheTestedFiles(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ heading, lang, file string }{
		{"### In SQL", "sql", "tests/regress/sql/workflow_example.sql"},
		{"### In Go", "go", "examples/workflow/main.go"},
	} {
		want, err := os.ReadFile(c.file)
		if err != nil {
			t.Fatal(err)
		}
		if got := docBlock(t, "docs/workflows.md", c.heading, c.lang); got != string(want) {
			t.Errorf("docs/workflows.md's %q block differs from %s: copy the file into the doc", c.heading, c.file)
		}
	}
}

// The Go example runs to its end: 100 resizes, then the archive built from their results.
func TestGoWorkflowExampleRuns(t *testing.T) {
	t.Parallel()
	url := pgtest.NewEmptyDatabase(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	bin := filepath.Join(t.TempDir(), "workflow")
	if out, err := exec.CommandContext(ctx, "go", "build", "-o", bin, "./examples/workflow").CombinedOutput(); err != nil {
		t.Fatalf("go build ./examples/workflow: %v\n%s", err, out)
	}
	cmd := exec.CommandContext(ctx, bin)
	cmd.Env = append(os.Environ(), "DATABASE_URL="+url)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("examples/workflow: %v\n%s", err, out)
	}
	for _, want := range []string{"enqueued workflow 1: 101 steps\n",
		"archive done: thumbs.zip with 100 files, the first thumbs/1-256.jpg\n"} {
		if !strings.Contains(string(out), want) {
			t.Fatalf("examples/workflow printed %q, want a line %q", out, want)
		}
	}
	var done int
	if err := pgtest.NewConn(t, url).QueryRow(ctx, "SELECT count(*) FROM jobs WHERE workflow_id = 1 AND state = 'done'").Scan(&done); err != nil {
		t.Fatal(err)
	}
	if done != 101 {
		t.Fatalf("%d steps done, want 101", done)
	}
}
