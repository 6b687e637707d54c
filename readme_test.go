package skiplock_test

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/skiplock/skiplock/tests/pgtest"
)

// readmeBlock returns the body of the first ```lang block after the heading in README.md.
func readmeBlock(t *testing.T, heading, lang string) string {
	t.Helper()
	return docBlock(t, "README.md", heading, lang)
}

// docBlock returns the body of the first ```lang block after the heading in the Markdown
// file at path.
func docBlock(t *testing.T, path, heading, lang string) string {
	t.Helper()
	doc, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	s := string(doc)
	i := strings.Index(s, "\n"+heading+"\n")
	if i < 0 {
		t.Fatalf("%s has no heading %q", path, heading)
	}
	open := "```" + lang + "\n"
	b := strings.Index(s[i:], open)
	if b < 0 {
		t.Fatalf("%s has no %s block after %q", path, open, heading)
	}
	b += i + len(open)
	e := strings.Index(s[b:], "```\n")
	if e < 0 {
		t.Fatalf("%s: unterminated block after %q", path, heading)
	}
	return s[b : b+e]
}

// The README's quickstarts are only worth something if they work as written, so each is
// a copy of a file that a test runs: the psql one is replayed with its expected output by
// tests/regress (readme_quickstart), the Go one is examples/quickstart, run below.
func TestReadmeQuickstartsAreTheTestedFiles(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ heading, lang, file string }{
		{"## psql quickstart", "sql", "tests/regress/sql/readme_quickstart.sql"},
		{"## Go quickstart", "go", "examples/quickstart/main.go"},
	} {
		want, err := os.ReadFile(c.file)
		if err != nil {
			t.Fatal(err)
		}
		if got := readmeBlock(t, c.heading, c.lang); got != string(want) {
			t.Errorf("README.md's %q block differs from %s: copy the file into the README (or the README into the file)", c.heading, c.file)
		}
	}
}

func TestGoQuickstartRuns(t *testing.T) {
	t.Parallel()
	url := pgtest.NewEmptyDatabase(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	bin := filepath.Join(t.TempDir(), "quickstart")
	build := exec.CommandContext(ctx, "go", "build", "-o", bin, "./examples/quickstart")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build ./examples/quickstart: %v\n%s", err, out)
	}

	cmd := exec.CommandContext(ctx, bin)
	cmd.Env = append(os.Environ(), "DATABASE_URL="+url)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}

	// Both handlers must run (the avatar job is delayed by a second), then SIGTERM must
	// shut the client down cleanly.
	want := map[string]bool{"sending welcome email to ada@example.com": false, "resizing avatar of user 1 to 256px": false}
	lines := bufio.NewScanner(stdout)
	var seen []string
	for lines.Scan() {
		line := lines.Text()
		seen = append(seen, line)
		for prefix := range want {
			if strings.HasPrefix(line, prefix) {
				want[prefix] = true
			}
		}
		if want["sending welcome email to ada@example.com"] && want["resizing avatar of user 1 to 256px"] {
			break
		}
	}
	for prefix, ok := range want {
		if !ok {
			t.Fatalf("quickstart never printed %q; output:\n%s", prefix, strings.Join(seen, "\n"))
		}
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	go func() {
		for lines.Scan() { // drain so the process never blocks on a full pipe
		}
	}()
	if err := cmd.Wait(); err != nil {
		t.Fatalf("quickstart did not exit cleanly after SIGTERM: %v", err)
	}

	conn := pgtest.NewConn(t, url)
	var welcomed bool
	if err := conn.QueryRow(ctx, "SELECT welcomed_at IS NOT NULL FROM users WHERE email = 'ada@example.com'").Scan(&welcomed); err != nil {
		t.Fatal(err)
	}
	if !welcomed {
		t.Error("the welcome_email handler's write (users.welcomed_at) was not committed")
	}
	var done int
	if err := conn.QueryRow(ctx, "SELECT count(*) FROM jobs WHERE state = 'done'").Scan(&done); err != nil {
		t.Fatal(err)
	}
	if done != 2 {
		t.Errorf("%d jobs done, want 2", done)
	}
}
