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

// The README's "From other languages" examples run as written: each block is taken from the
// README, run against a database with skiplock installed, and must work its greet job.
func TestReadmeFromOtherLanguagesRuns(t *testing.T) {
	t.Parallel()
	const heading = "## From other languages"

	t.Run("Python", func(t *testing.T) {
		t.Parallel()
		const py = "/usr/bin/python3"
		if out, err := exec.Command(py, "-c", "import psycopg").CombinedOutput(); err != nil {
			t.Skipf("%s with psycopg is missing (install python3-psycopg): %v %s", py, err, strings.TrimSpace(string(out)))
		}
		dir, url := t.TempDir(), pgtest.NewDatabase(t)
		script := filepath.Join(dir, "hello.py")
		writeFile(t, script, readmeBlock(t, heading, "python"))
		abs, err := filepath.Abs("clients/python")
		if err != nil {
			t.Fatal(err)
		}
		out := runExample(t, exec.Command(py, script), "DATABASE_URL="+url, "PYTHONPATH="+abs)
		if out != "hello, Ada from Python\n" {
			t.Fatalf("the Python example printed %q", out)
		}
		checkGreetDone(t, url)
	})

	t.Run("Node", func(t *testing.T) {
		t.Parallel()
		nodeBin, err := exec.LookPath("node")
		if err != nil {
			t.Skip("node not found: install Node.js 20 or later and npm")
		}
		pkg, err := filepath.Abs("clients/node")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(filepath.Join(pkg, "node_modules/pg")); err != nil {
			npm, err := exec.LookPath("npm")
			if err != nil {
				t.Skip("npm not found: install npm")
			}
			cmd := exec.Command(npm, "ci", "--no-audit", "--no-fund", "--loglevel=error")
			cmd.Dir = pkg
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Skipf("npm ci in clients/node failed, so its dependencies are missing: %v\n%s", err, out)
			}
		}
		// `import 'skiplock'` as an application that installed the package finds it.
		dir, url := t.TempDir(), pgtest.NewDatabase(t)
		if err := os.MkdirAll(filepath.Join(dir, "node_modules"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(pkg, filepath.Join(dir, "node_modules/skiplock")); err != nil {
			t.Fatal(err)
		}
		script := filepath.Join(dir, "hello.mjs")
		writeFile(t, script, readmeBlock(t, heading, "js"))
		out := runExample(t, exec.Command(nodeBin, script), "DATABASE_URL="+url)
		if out != "hello, Ada from Node\n" {
			t.Fatalf("the Node example printed %q", out)
		}
		checkGreetDone(t, url)
	})

	t.Run("WorkExec", func(t *testing.T) {
		t.Parallel()
		dir, url := t.TempDir(), pgtest.NewDatabase(t)
		bin := filepath.Join(dir, "bin")
		if out, err := exec.Command("go", "build", "-o", filepath.Join(bin, "skiplock"), "./cmd/skiplock").CombinedOutput(); err != nil {
			t.Fatalf("go build ./cmd/skiplock: %v\n%s", err, out)
		}
		cmd := exec.Command("/bin/sh", "-c", readmeBlock(t, heading, "sh"))
		cmd.Env = append(os.Environ(), "DATABASE_URL="+url, "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"))
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // SIGTERM reaches skiplock too
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		var stderr strings.Builder
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) })
		lines := make(chan string)
		go func() {
			s := bufio.NewScanner(stdout)
			for s.Scan() {
				lines <- s.Text()
			}
			close(lines)
		}()
		var printed []string
		deadline := time.After(time.Minute)
	wait:
		for {
			select {
			case l, ok := <-lines:
				if !ok {
					t.Fatalf("the example ended early: %v; stdout:\n%s", cmd.Wait(), strings.Join(printed, "\n"))
				}
				printed = append(printed, l)
				if strings.HasPrefix(l, "job ") && strings.HasSuffix(l, ` (greet, attempt 1): {"name": "Ada"}`) {
					break wait
				}
			case <-deadline:
				t.Fatalf("the job never ran; stdout:\n%s", strings.Join(printed, "\n"))
			}
		}
		checkGreetDoneWithin(t, url, 10*time.Second)
		// SIGTERM to the group, as a terminal's Ctrl-C or a service manager would: skiplock
		// drains and exits 0.
		if err := syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		go func() {
			for range lines {
			}
		}()
		// sh itself dies of the SIGTERM; Wait returns once skiplock, which shares its stderr,
		// has exited too.
		_ = cmd.Wait()
		if !strings.Contains(stderr.String(), "skiplock work stopped") {
			t.Fatalf("skiplock work did not drain and stop; stderr:\n%s", stderr.String())
		}
	})
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// runExample runs cmd with env added, for up to a minute, and returns its stdout; it fails
// the test unless cmd exits 0.
func runExample(t *testing.T, cmd *exec.Cmd, env ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c := exec.CommandContext(ctx, cmd.Path, cmd.Args[1:]...)
	c.Env = append(os.Environ(), env...)
	c.Stderr = pgtest.NewLogWriter(t)
	out, err := c.Output()
	if err != nil {
		t.Fatalf("%s: %v; stdout:\n%s", strings.Join(cmd.Args, " "), err, out)
	}
	return string(out)
}

// checkGreetDone: the example's one job is done.
func checkGreetDone(t *testing.T, url string) {
	t.Helper()
	checkGreetDoneWithin(t, url, 5*time.Second)
}

func checkGreetDoneWithin(t *testing.T, url string, d time.Duration) {
	t.Helper()
	conn := pgtest.NewConn(t, url)
	pgtest.WaitFor(t, d, "the greet job done", func() bool {
		return pgtest.QueryOne[int](t, conn, "SELECT count(*) FROM jobs WHERE kind = 'greet' AND queue = 'hello' AND state = 'done'") == 1
	})
}
