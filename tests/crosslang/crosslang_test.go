// Package crosslang_test checks that the clients of every language share one queue: jobs
// enqueued from one language are worked by workers of the others at once, and each job is
// done exactly once. The workers are the example scripts of clients/python and clients/node
// (crosslang_worker.py, crosslang-worker.mjs) and a Go driver client in this process; each
// completes a job in the same transaction that records its effect in crosslang_effects, so
// the table holds one row per job done, from the attempt that completed it.
package crosslang_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/skiplock/skiplock/driver"
	"github.com/skiplock/skiplock/tests/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// root is the repository's top folder.
func root(t *testing.T) string {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}

// python is /usr/bin/python3 with psycopg (Debian's python3-psycopg), or a skip. The pyenv
// python3 first on some PATHs lacks Debian's packages, so the path is fixed.
func python(t *testing.T) string {
	t.Helper()
	const py = "/usr/bin/python3"
	if out, err := exec.Command(py, "-c", "import psycopg").CombinedOutput(); err != nil {
		t.Skipf("%s with psycopg is missing (install python3-psycopg): %v %s", py, err, bytes.TrimSpace(out))
	}
	script := filepath.Join(root(t), "clients/python/examples/crosslang_worker.py")
	if _, err := os.Stat(script); err != nil {
		t.Skipf("clients/python/examples/crosslang_worker.py is missing: %v", err)
	}
	return py
}

// node is node with clients/node's dependencies installed (npm ci when they are missing or
// older than package-lock.json), or a skip.
func node(t *testing.T) string {
	t.Helper()
	nodeBin, err := exec.LookPath("node")
	if err != nil {
		t.Skip("node not found: install Node.js 20 or later and npm")
	}
	npm, err := exec.LookPath("npm")
	if err != nil {
		t.Skip("npm not found: install npm")
	}
	dir := filepath.Join(root(t), "clients/node")
	installed, err1 := os.Stat(filepath.Join(dir, "node_modules/.package-lock.json"))
	lock, err2 := os.Stat(filepath.Join(dir, "package-lock.json"))
	if err2 != nil {
		t.Skipf("clients/node/package-lock.json is missing: %v", err2)
	}
	if err1 != nil || installed.ModTime().Before(lock.ModTime()) {
		nodeModulesMu.Lock()
		defer nodeModulesMu.Unlock()
		cmd := exec.CommandContext(t.Context(), npm, "ci", "--no-audit", "--no-fund", "--loglevel=error")
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Skipf("npm ci in clients/node failed, so its dependencies are missing: %v\n%s", err, out)
		}
	}
	return nodeBin
}

// nodeModulesMu keeps two tests from running npm ci at once.
var nodeModulesMu sync.Mutex

const createEffects = `CREATE TABLE IF NOT EXISTS crosslang_effects (
    job_id   bigint  NOT NULL,
    attempt  integer NOT NULL,
    language text    NOT NULL,
    PRIMARY KEY (job_id, attempt)
)`

// process is a worker or producer script.
type process struct {
	name   string
	cmd    *exec.Cmd
	stdout bytes.Buffer
	done   chan error
}

// start runs a script of language lang ("python", "node") with args, its stderr in the
// test log.
func start(t *testing.T, lang, name string, args ...string) *process {
	t.Helper()
	var cmd *exec.Cmd
	switch lang {
	case "python":
		cmd = exec.Command(python(t), append([]string{filepath.Join(root(t), "clients/python/examples", name)}, args...)...)
		cmd.Env = append(os.Environ(), "PYTHONPATH="+filepath.Join(root(t), "clients/python"))
	case "node":
		cmd = exec.Command(node(t), append([]string{filepath.Join(root(t), "clients/node/examples", name)}, args...)...)
	default:
		t.Fatalf("unknown language %q", lang)
	}
	p := &process{name: lang + " " + name, cmd: cmd, done: make(chan error, 1)}
	cmd.Stdout = &p.stdout
	cmd.Stderr = logWriter(t, "["+lang+"] ")
	cmd.WaitDelay = 5 * time.Second
	if err := cmd.Start(); err != nil {
		t.Fatalf("failed to start %s: %v", p.name, err)
	}
	go func() { p.done <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-p.done
		p.done <- nil
	})
	return p
}

// wait waits for the process to exit 0 and returns its stdout.
func (p *process) wait(t *testing.T, timeout time.Duration) string {
	t.Helper()
	select {
	case err := <-p.done:
		p.done <- err
		if err != nil {
			t.Fatalf("%s: %v; stdout:\n%s", p.name, err, p.stdout.String())
		}
	case <-time.After(timeout):
		t.Fatalf("%s did not exit within %s", p.name, timeout)
	}
	return p.stdout.String()
}

// logWriter sends what a worker writes to the test log, each line prefixed.
func logWriter(t *testing.T, prefix string) io.Writer {
	return &prefixWriter{prefix: prefix, w: pgtest.NewLogWriter(t)}
}

type prefixWriter struct {
	prefix string
	w      io.Writer
}

func (p *prefixWriter) Write(b []byte) (int, error) {
	_, _ = p.w.Write([]byte(p.prefix + strings.ReplaceAll(strings.TrimRight(string(b), "\n"), "\n", "\n"+p.prefix)))
	return len(b), nil
}

// startGoWorker works queue with the Go driver until the test ends, recording each job's
// effect in the transaction that completes it (CompleteTx).
func startGoWorker(t *testing.T, pool *pgxpool.Pool, queue string) {
	t.Helper()
	hs := driver.NewHandlers()
	driver.AddHandler(hs, "crosslang", func(ctx context.Context, job *driver.Job[map[string]any]) error {
		tx, err := pool.Begin(ctx)
		if err != nil {
			return fmt.Errorf("failed to begin: %w", err)
		}
		defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
		if _, err := tx.Exec(ctx, "INSERT INTO crosslang_effects VALUES ($1, $2, 'go')", job.ID, job.Attempt); err != nil {
			return fmt.Errorf("failed to record the effect: %w", err)
		}
		if err := driver.CompleteTx(ctx, tx, job); err != nil {
			if errors.Is(err, driver.ErrNotHeld) {
				return nil // another worker holds the job: its effect must not happen twice
			}
			return err
		}
		return tx.Commit(ctx)
	}, nil)
	client, err := driver.NewClient(pool, &driver.Config{
		Queues:       map[string]driver.QueueConfig{queue: {Slots: 4}},
		Handlers:     hs,
		ID:           "go-" + queue,
		PollInterval: 200 * time.Millisecond,
		Logger:       slog.New(slog.NewTextHandler(logWriter(t, "[go] "), &slog.HandlerOptions{Level: slog.LevelWarn})),
	})
	if err != nil {
		t.Fatal(err)
	}
	runErr := make(chan error, 1)
	go func() { runErr <- client.Run(context.Background()) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := client.Stop(ctx); err != nil {
			t.Errorf("Stop: %v", err)
		}
		if err := <-runErr; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
}

// waitListeners waits until n sessions have run LISTEN jobs_ready as their last statement:
// the workers are up, so the jobs enqueued next reach all of them.
func waitListeners(t *testing.T, pool *pgxpool.Pool, n int) {
	t.Helper()
	pgtest.WaitFor(t, 60*time.Second, strconv.Itoa(n)+" listening workers", func() bool {
		return pgtest.QueryOne[int](t, pool, `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND query ILIKE 'LISTEN%jobs_ready%'`) >= n
	})
}

// TestCrossLanguage enqueues from one language and works the jobs with the other two at
// once, for each language, then checks that every job is done exactly once.
func TestCrossLanguage(t *testing.T) {
	t.Parallel()
	jobs := 600
	if testing.Short() {
		jobs = 200
	}
	for _, tt := range []struct {
		from    string
		workers []string
	}{
		{"python", []string{"node", "go"}},
		{"node", []string{"python", "go"}},
		{"go", []string{"python", "node"}},
	} {
		t.Run("From"+strings.ToUpper(tt.from[:1])+tt.from[1:], func(t *testing.T) {
			t.Parallel()
			// Skip at once when a language is missing.
			for _, lang := range append([]string{tt.from}, tt.workers...) {
				switch lang {
				case "python":
					python(t)
				case "node":
					node(t)
				}
			}
			url := pgtest.NewDatabase(t)
			pool, err := pgxpool.New(context.Background(), url)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(pool.Close)
			pgtest.MustExec(t, pool, createEffects)
			const queue = "crosslang"

			var scripts []*process
			for _, lang := range tt.workers {
				switch lang {
				case "python":
					scripts = append(scripts, start(t, "python", "crosslang_worker.py", url, queue, "py-worker", "120"))
				case "node":
					scripts = append(scripts, start(t, "node", "crosslang-worker.mjs", url, queue, "node-worker", "120"))
				case "go":
					startGoWorker(t, pool, queue)
				}
			}
			waitListeners(t, pool, len(tt.workers))

			switch tt.from {
			case "python":
				out := start(t, "python", "crosslang_enqueue.py", url, queue, strconv.Itoa(jobs)).wait(t, time.Minute)
				if strings.TrimSpace(out) != strconv.Itoa(jobs) {
					t.Fatalf("crosslang_enqueue.py printed %q, want %d", out, jobs)
				}
			case "node":
				out := start(t, "node", "crosslang-enqueue.mjs", url, queue, strconv.Itoa(jobs)).wait(t, time.Minute)
				if strings.TrimSpace(out) != strconv.Itoa(jobs) {
					t.Fatalf("crosslang-enqueue.mjs printed %q, want %d", out, jobs)
				}
			case "go":
				params := make([]driver.EnqueueParams, jobs)
				for i := range params {
					params[i] = driver.EnqueueParams{Kind: "crosslang", Payload: map[string]any{"n": i, "from": "go"}, Opts: &driver.EnqueueOpts{Queue: queue}}
				}
				if _, err := driver.EnqueueMany(context.Background(), pool, params); err != nil {
					t.Fatal(err)
				}
			}

			pgtest.WaitFor(t, 2*time.Minute, "every job done", func() bool {
				return pgtest.QueryOne[int](t, pool, "SELECT count(*) FROM jobs WHERE queue = $1 AND state = 'done'", queue) == jobs
			})
			// The scripts drain and exit 0 on SIGTERM, printing their counters.
			for _, p := range scripts {
				if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
					t.Fatal(err)
				}
			}
			for _, p := range scripts {
				t.Logf("%s: %s", p.name, strings.TrimSpace(p.wait(t, time.Minute)))
			}
			checkExactlyOnce(t, pool, queue, jobs, tt.workers)
		})
	}
}

// checkExactlyOnce: every job of queue is done, has exactly one effect row, from the attempt
// that completed it, and each worker language did some of them.
func checkExactlyOnce(t *testing.T, pool *pgxpool.Pool, queue string, jobs int, workers []string) {
	t.Helper()
	bad := pgtest.QueryList[string](t, pool, `
		SELECT format('job %s: state %s, attempts %s, effects %s', j.id, j.state, j.attempts,
		              coalesce((SELECT string_agg(format('attempt %s by %s', e.attempt, e.language), ', ')
		                        FROM crosslang_effects e WHERE e.job_id = j.id), 'none'))
		FROM jobs j
		WHERE j.queue = $1
		  AND (j.state <> 'done'
		       OR (SELECT count(*) FROM crosslang_effects e WHERE e.job_id = j.id) <> 1
		       OR NOT EXISTS (SELECT FROM crosslang_effects e WHERE e.job_id = j.id AND e.attempt = j.attempts))
		ORDER BY j.id
		LIMIT 20`, queue)
	if len(bad) > 0 {
		t.Fatalf("jobs not done exactly once:\n%s", strings.Join(bad, "\n"))
	}
	if n := pgtest.QueryOne[int](t, pool, "SELECT count(*) FROM crosslang_effects"); n != jobs {
		t.Fatalf("%d effect rows, want %d", n, jobs)
	}
	for _, lang := range workers {
		n := pgtest.QueryOne[int](t, pool, "SELECT count(*) FROM crosslang_effects WHERE language = $1", lang)
		t.Logf("%s worked %d of %d jobs", lang, n, jobs)
		if n == 0 {
			t.Errorf("the %s worker did none of the jobs, want both workers at once", lang)
		}
	}
}
