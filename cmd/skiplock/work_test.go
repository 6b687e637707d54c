package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/skiplock/skiplock/tests/pgtest"
)

// lockedBuffer is a bytes.Buffer for the output of several processes at once.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// worker is a `skiplock work` running in-process until stop.
type worker struct {
	stdout, stderr *lockedBuffer
	cancel         context.CancelFunc
	done           chan int // its exit code
}

// startWork runs skiplock work args... in-process against url.
func startWork(t *testing.T, url string, args ...string) *worker {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	w := &worker{stdout: &lockedBuffer{}, stderr: &lockedBuffer{}, cancel: cancel, done: make(chan int, 1)}
	e := &env{
		stdin:  strings.NewReader(""),
		stdout: w.stdout,
		stderr: w.stderr,
		getenv: func(name string) string {
			if name == "DATABASE_URL" {
				return url
			}
			return ""
		},
	}
	go func() { w.done <- runMain(ctx, e, append([]string{"work"}, args...)) }()
	t.Cleanup(func() { w.stop(t) })
	return w
}

// stop cancels the worker's context (as SIGTERM does) and returns its exit code.
func (w *worker) stop(t *testing.T) int {
	t.Helper()
	w.cancel()
	select {
	case code := <-w.done:
		w.done <- code
		return code
	case <-time.After(30 * time.Second):
		t.Fatalf("skiplock work did not stop; stderr:\n%s", w.stderr)
		return -1
	}
}

// script writes an executable shell script into dir and returns its path.
func script(t *testing.T, dir, body string) string {
	t.Helper()
	p := filepath.Join(dir, "job.sh")
	if err := os.WriteFile(p, []byte("#!/bin/sh\n"+body), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

// jobRow is what the tests read of a job.
type jobRow struct {
	State       string
	Attempts    int
	MaxAttempts int
	LastError   string
	RunAtInS    float64 // run_at - now(), in seconds
}

func readJob(t *testing.T, db *pgtest.TestDB, id int64) jobRow {
	t.Helper()
	var j jobRow
	err := db.Conn.QueryRow(t.Context(), `SELECT state::text, attempts, max_attempts, coalesce(last_error, ''),
		extract(epoch FROM run_at - now())::float8 FROM jobs WHERE id = $1`, id).
		Scan(&j.State, &j.Attempts, &j.MaxAttempts, &j.LastError, &j.RunAtInS)
	if err != nil {
		t.Fatalf("failed to read job %d: %v", id, err)
	}
	return j
}

// waitJob polls job id until cond holds, for up to 20 s.
func waitJob(t *testing.T, db *pgtest.TestDB, id int64, what string, cond func(jobRow) bool, w *worker) jobRow {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		j := readJob(t, db, id)
		if cond(j) {
			return j
		}
		if time.Now().After(deadline) {
			var stderr string
			if w != nil {
				stderr = w.stderr.String()
			}
			t.Fatalf("job %d never became %s: %+v; stderr of skiplock work:\n%s", id, what, j, stderr)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// waitFile waits up to 20 s for path to exist and returns its content.
func waitFile(t *testing.T, path string) string {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		if b, err := os.ReadFile(path); err == nil && len(b) > 0 {
			return string(b)
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s never appeared", path)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func enqueue(t *testing.T, db *pgtest.TestDB, kind, payload, queue string, maxAttempts int) int64 {
	t.Helper()
	return pgtest.QueryOne[int64](t, db.Conn, "SELECT jobs_enqueue($1, $2::jsonb, queue => $3, max_attempts => $4)", kind, payload, queue, maxAttempts)
}

func isState(s string) func(jobRow) bool { return func(j jobRow) bool { return j.State == s } }

// TestWorkExec checks each rule of `skiplock work --exec` with real child processes.
func TestWorkExec(t *testing.T) {
	t.Parallel()

	t.Run("PayloadOnStdinAndEnvironment", func(t *testing.T) {
		t.Parallel()
		db, dir := setup(t), t.TempDir()
		sh := script(t, dir, `out="$(dirname "$0")/$SKIPLOCK_JOB_ID"
printf '%s %s %s %s\n' "$SKIPLOCK_JOB_ID" "$SKIPLOCK_ATTEMPT" "$SKIPLOCK_KIND" "$SKIPLOCK_QUEUE" > "$out.tmp"
cat >> "$out.tmp"
mv "$out.tmp" "$out"
`)
		id := enqueue(t, db, "resize", `{"w": 64}`, "img", 5)
		w := startWork(t, db.URL, "--queue", "img", "--exec", sh)
		waitJob(t, db, id, "done", isState("done"), w)
		got := waitFile(t, filepath.Join(dir, strconv.FormatInt(id, 10)))
		if want := fmt.Sprintf("%d 1 resize img\n{\"w\": 64}", id); got != want {
			t.Fatalf("the command saw %q, want %q", got, want)
		}
		if code := w.stop(t); code != 0 {
			t.Fatalf("skiplock work exited %d", code)
		}
	})

	t.Run("NonZeroExitFailsWithStderrTail", func(t *testing.T) {
		t.Parallel()
		db, dir := setup(t), t.TempDir()
		sh := script(t, dir, `for i in $(seq 1 30); do echo "line $i" >&2; done; exit 3`)
		id := enqueue(t, db, "k", `{}`, "q", 1)
		w := startWork(t, db.URL, "--queue", "q", "--exec", sh)
		j := waitJob(t, db, id, "dead", isState("dead"), w)
		if !strings.HasPrefix(j.LastError, "exit status 3: line 11\n") || !strings.HasSuffix(j.LastError, "line 30") || strings.Contains(j.LastError, "line 10\n") {
			t.Fatalf("last_error = %q, want the exit status and the last 20 lines of stderr", j.LastError)
		}
	})

	t.Run("Exit0WithABackgroundChildHoldingStderrCompletes", func(t *testing.T) {
		t.Parallel()
		db, dir := setup(t), t.TempDir()
		// The child outlives the command with its stderr open: cmd.Wait reports ErrWaitDelay.
		sh := script(t, dir, "sleep 30 &\nexit 0\n")
		id := enqueue(t, db, "k", `{}`, "q", 1)
		w := startWork(t, db.URL, "--queue", "q", "--exec", sh)
		j := waitJob(t, db, id, "finished", func(j jobRow) bool { return j.State != "running" && j.State != "queued" }, w)
		if j.State != "done" {
			t.Fatalf("exit 0 gave job %+v, want done", j)
		}
	})

	t.Run("FailureRetries", func(t *testing.T) {
		t.Parallel()
		db, dir := setup(t), t.TempDir()
		sh := script(t, dir, `[ "$SKIPLOCK_ATTEMPT" = 2 ] && exit 0; echo "not yet" >&2; exit 1`)
		pgtest.MustExec(t, db.Conn, "UPDATE jobs_settings SET backoff_base = '10ms', backoff_cap = '10ms'")
		id := enqueue(t, db, "k", `{}`, "q", 5)
		w := startWork(t, db.URL, "--queue", "q", "--exec", sh)
		j := waitJob(t, db, id, "done", isState("done"), w)
		if j.Attempts != 2 || j.LastError != "exit status 1: not yet" {
			t.Fatalf("job = %+v, want done at attempt 2 after one failure", j)
		}
	})

	t.Run("Exit75SnoozesWithoutSpendingAnAttempt", func(t *testing.T) {
		t.Parallel()
		db, dir := setup(t), t.TempDir()
		sh := script(t, dir, `echo "try later" >&2; exit 75`)
		id := enqueue(t, db, "k", `{}`, "q", 1)
		w := startWork(t, db.URL, "--queue", "q", "--exec", sh, "--tempfail-delay", "1h")
		j := waitJob(t, db, id, "snoozed", func(j jobRow) bool { return j.State == "queued" && j.Attempts == 1 }, w)
		// jobs_snooze raises max_attempts instead of lowering attempts (the fencing token).
		if j.MaxAttempts != 2 || j.RunAtInS < 3500 {
			t.Fatalf("job = %+v, want queued about an hour from now with an attempt given back", j)
		}
	})

	t.Run("Exit65GivesUp", func(t *testing.T) {
		t.Parallel()
		db, dir := setup(t), t.TempDir()
		sh := script(t, dir, `echo "bad payload" >&2; exit 65`)
		id := enqueue(t, db, "k", `{}`, "q", 5)
		w := startWork(t, db.URL, "--queue", "q", "--exec", sh)
		j := waitJob(t, db, id, "cancelled", isState("cancelled"), w)
		if j.Attempts != 1 || !strings.Contains(j.LastError, "exit status 65: bad payload") {
			t.Fatalf("job = %+v, want cancelled at its first attempt with stderr as the error", j)
		}
	})

	// 3,000 two-byte characters and a "!": the tail's cut at 4 KB from the end falls
	// inside a character. Its text must still be recorded, with the outcome the exit status
	// chose, rather than refused by PostgreSQL (invalid UTF-8) and lost until the lease expires.
	nonASCIIStderr := `i=0; while [ $i -lt 3000 ]; do printf '\303\251'; i=$((i+1)); done >&2; echo '!' >&2; exit `
	nonASCIITail := func(j jobRow, status string) bool {
		rest, ok := strings.CutPrefix(j.LastError, "exit status "+status+": ")
		return ok && utf8.ValidString(rest) && strings.Trim(rest, "é") == "!" && len(rest) <= 4096 && len(rest) > 4000
	}

	t.Run("NonASCIIStderrFailsWithBackoff", func(t *testing.T) {
		t.Parallel()
		db, dir := setup(t), t.TempDir()
		sh := script(t, dir, nonASCIIStderr+"1")
		pgtest.MustExec(t, db.Conn, "UPDATE jobs_settings SET backoff_base = '1 hour', backoff_cap = '1 hour'")
		id := enqueue(t, db, "k", `{}`, "q", 5)
		w := startWork(t, db.URL, "--queue", "q", "--exec", sh, "--lease", "1m")
		j := waitJob(t, db, id, "failed", func(j jobRow) bool { return j.LastError != "" }, w)
		// backoff_base is an hour, give or take jobs_settings.backoff_jitter (a quarter)
		if j.State != "queued" || j.Attempts != 1 || j.RunAtInS < 1800 || !nonASCIITail(j, "1") {
			t.Fatalf("job = %s %d attempt(s), run_at in %.0fs, last_error %.40q..., want queued an hour from now after one failure, with the stderr tail cut at a character",
				j.State, j.Attempts, j.RunAtInS, j.LastError)
		}
	})

	t.Run("NonASCIIStderrExit65Cancels", func(t *testing.T) {
		t.Parallel()
		db, dir := setup(t), t.TempDir()
		sh := script(t, dir, nonASCIIStderr+"65")
		id := enqueue(t, db, "k", `{}`, "q", 5)
		w := startWork(t, db.URL, "--queue", "q", "--exec", sh, "--lease", "1m")
		j := waitJob(t, db, id, "cancelled", func(j jobRow) bool { return j.LastError != "" }, w)
		if j.State != "cancelled" || j.Attempts != 1 || !nonASCIITail(j, "65") {
			t.Fatalf("job = %s %d attempt(s), last_error %.40q..., want cancelled at its first attempt, with the stderr tail cut at a character",
				j.State, j.Attempts, j.LastError)
		}
	})

	t.Run("TimeoutSendsSIGTERM", func(t *testing.T) {
		t.Parallel()
		db, dir := setup(t), t.TempDir()
		sh := script(t, dir, `trap 'echo TERM > "$(dirname "$0")/term"; exit 1' TERM
sleep 30 & wait`)
		id := enqueue(t, db, "k", `{}`, "q", 1)
		w := startWork(t, db.URL, "--queue", "q", "--exec", sh, "--timeout", "300ms")
		j := waitJob(t, db, id, "dead", isState("dead"), w)
		if got := waitFile(t, filepath.Join(dir, "term")); got != "TERM\n" {
			t.Fatalf("term file = %q", got)
		}
		if !strings.Contains(j.LastError, "exit status 1 after SIGTERM (context deadline exceeded)") {
			t.Fatalf("last_error = %q", j.LastError)
		}
	})

	t.Run("TimeoutThenSIGKILLToTheGroup", func(t *testing.T) {
		t.Parallel()
		db, dir := setup(t), t.TempDir()
		// The script ignores SIGTERM, and so does its child.
		sh := script(t, dir, `trap '' TERM
sleep 60 &
echo $! > "$(dirname "$0")/child"
wait`)
		id := enqueue(t, db, "k", `{}`, "q", 1)
		start := time.Now()
		w := startWork(t, db.URL, "--queue", "q", "--exec", sh, "--timeout", "300ms", "--kill-after", "300ms")
		j := waitJob(t, db, id, "dead", isState("dead"), w)
		if !strings.Contains(j.LastError, "killed by SIGKILL after SIGTERM (context deadline exceeded)") || time.Since(start) > 15*time.Second {
			t.Fatalf("job = %+v after %s, want killed by SIGKILL", j, time.Since(start))
		}
		child, err := strconv.Atoi(strings.TrimSpace(waitFile(t, filepath.Join(dir, "child"))))
		if err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(10 * time.Second)
		for syscall.Kill(child, 0) == nil {
			// A zombie waiting for init still answers kill 0; /proc says which.
			if stat, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stat", child)); strings.Contains(string(stat), ") Z ") {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the command's child %d outlived the SIGKILL", child)
			}
			time.Sleep(20 * time.Millisecond)
		}
	})

	t.Run("HeartbeatsKeepTheJobPastItsLease", func(t *testing.T) {
		t.Parallel()
		db, dir := setup(t), t.TempDir()
		sh := script(t, dir, `sleep 3`)
		id := enqueue(t, db, "k", `{}`, "q", 5)
		w := startWork(t, db.URL, "--queue", "q", "--exec", sh, "--lease", "1s")
		waitJob(t, db, id, "running", isState("running"), w)
		time.Sleep(2 * time.Second) // twice the lease: only heartbeats keep it
		pgtest.MustExec(t, db.Conn, "SELECT jobs_maintain()")
		j := waitJob(t, db, id, "done", isState("done"), w)
		if j.Attempts != 1 {
			t.Fatalf("job = %+v, want done at its first attempt (the lease never lapsed)", j)
		}
	})

	t.Run("SIGTERMDrains", func(t *testing.T) {
		t.Parallel()
		db, dir := setup(t), t.TempDir()
		sh := script(t, dir, `touch "$(dirname "$0")/started-$SKIPLOCK_JOB_ID"; sleep 1; echo ok`)
		first := enqueue(t, db, "k", `{}`, "q", 5)
		w := startWork(t, db.URL, "--queue", "q", "--slots", "1", "--exec", sh)
		waitJob(t, db, first, "running", isState("running"), w)
		second := enqueue(t, db, "k", `{}`, "q", 5)
		if code := w.stop(t); code != 0 {
			t.Fatalf("skiplock work exited %d; stderr:\n%s", code, w.stderr)
		}
		if j := readJob(t, db, first); j.State != "done" {
			t.Fatalf("the running job after the drain: %+v, want done", j)
		}
		if j := readJob(t, db, second); j.State != "queued" {
			t.Fatalf("the job not started: %+v, want queued", j)
		}
		if _, err := os.Stat(filepath.Join(dir, "started-"+strconv.FormatInt(second, 10))); err == nil {
			t.Fatal("the second job started during the drain")
		}
		if !strings.Contains(w.stdout.String(), "ok\n") {
			t.Fatalf("the command's stdout did not reach skiplock's: %q", w.stdout)
		}
	})

	t.Run("SIGTERMAfterGraceGivesTheJobBack", func(t *testing.T) {
		t.Parallel()
		db, dir := setup(t), t.TempDir()
		// Ignores SIGTERM: only the SIGKILL after it ends the command.
		sh := script(t, dir, `trap '' TERM
echo started > "$(dirname "$0")/started"
sleep 60 & wait; wait`)
		id := enqueue(t, db, "k", `{}`, "q", 5)
		w := startWork(t, db.URL, "--queue", "q", "--exec", sh, "--grace", "200ms")
		waitFile(t, filepath.Join(dir, "started"))
		start := time.Now()
		if code := w.stop(t); code != 0 {
			t.Fatalf("skiplock work exited %d; stderr:\n%s", code, w.stderr)
		}
		if took := time.Since(start); took > 5*time.Second {
			t.Fatalf("the drain took %s, want the grace plus at most 3 s", took)
		}
		// Released, not abandoned: queued and ready now, without waiting for the lease.
		if j := readJob(t, db, id); j.State != "queued" || j.RunAtInS > 1 {
			t.Fatalf("job after the drain: %+v, want queued and ready", j)
		}
	})

	t.Run("Kill9MidJobRunsItOnceMore", func(t *testing.T) {
		t.Parallel()
		db, dir := setup(t), t.TempDir()
		bin := buildBinary(t)
		// Attempt 1 hangs (until skiplock is killed); attempt 2 completes. Each attempt
		// appends its number to the effects file.
		effects := filepath.Join(dir, "effects")
		sh := script(t, dir, `echo "$SKIPLOCK_ATTEMPT" >> "`+effects+`"
echo $$ > "$(dirname "$0")/pid-$SKIPLOCK_ATTEMPT"
[ "$SKIPLOCK_ATTEMPT" = 1 ] && exec sleep 60
exit 0`)
		id := enqueue(t, db, "k", `{}`, "q", 5)
		args := []string{"work", "--queue", "q", "--exec", sh, "--lease", "1s"}
		first := exec.Command(bin, args...)
		first.Env = append(os.Environ(), "DATABASE_URL="+db.URL)
		var firstErr lockedBuffer
		first.Stderr = &firstErr
		if err := first.Start(); err != nil {
			t.Fatal(err)
		}
		pid, _ := strconv.Atoi(strings.TrimSpace(waitFile(t, filepath.Join(dir, "pid-1"))))
		if err := first.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		_ = first.Wait()
		// The command runs in a group of its own, so it outlives a kill -9 of skiplock; an
		// orphan like it is what the next attempt must tolerate. End it here.
		_ = syscall.Kill(-pid, syscall.SIGKILL)

		second := exec.Command(bin, args...)
		second.Env = first.Env
		var secondErr lockedBuffer
		second.Stderr = &secondErr
		if err := second.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_ = second.Process.Signal(syscall.SIGTERM)
			_ = second.Wait()
		})
		j := waitJob(t, db, id, "done", isState("done"), nil)
		if j.Attempts != 2 {
			t.Fatalf("job = %+v, want done at attempt 2", j)
		}
		if got := waitFile(t, effects); got != "1\n2\n" {
			t.Fatalf("effects = %q, want attempt 1 (killed) then attempt 2 (completed)", got)
		}
		if err := second.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		if err := second.Wait(); err != nil {
			t.Fatalf("skiplock work after SIGTERM: %v; stderr:\n%s", err, secondErr.String())
		}
	})

	t.Run("Usage", func(t *testing.T) {
		t.Parallel()
		db := setup(t)
		cli(t, db.URL, "work", "--exec", "true").fails(t, exitUsage, "--queue is required")
		cli(t, db.URL, "work", "--queue", "q").fails(t, exitUsage, "--exec is required")
		cli(t, db.URL, "work", "--queue", "q", "--exec", "true", "--lease", "10ms").fails(t, exitUsage, "Lease")
	})
}
