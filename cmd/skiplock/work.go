package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/skiplock/skiplock/driver"
)

// The exit statuses of an --exec command that mean more than "failed" (sysexits.h).
const (
	// execExitTempFail (EX_TEMPFAIL) puts the job back for later without spending an attempt.
	execExitTempFail = 75
	// execExitGiveUp (EX_DATAERR: the input was bad) cancels the job: retrying cannot help.
	execExitGiveUp = 65
)

// shutdownKillAfter caps --kill-after when shutdown ends a command, so that the group is
// gone, and its job given back, before the driver stops waiting for it (5 s).
const shutdownKillAfter = 3 * time.Second

// execStderrTail is how much of the end of an --exec command's stderr becomes the job's
// error when it fails: its last lines, at most this many bytes.
const (
	execStderrTailLines = 20
	execStderrTailBytes = 4096
)

var workCommand = &command{
	name:     "work",
	synopsis: "--queue Q --exec 'COMMAND [ARGS]' [--slots N] [--lease D] [--timeout D] [flags]",
	summary:  "work a queue by running a program for each job (any language)",
	help: `Works queue Q like a Go client (the driver: LISTEN and a poll, claims sized to the free
slots, batched completions, heartbeats, periodic jobs_maintain), running COMMAND for each
job, so any program can be a handler. Jobs of every kind are run. COMMAND is run directly
(split at spaces) when it is plain words, else with /bin/sh -c; when a shell runs it, a
SIGTERM ends the shell at once and the job's error says so, whatever the program did.

The command gets the job's JSON payload on stdin, and these environment variables on top of
skiplock's own: SKIPLOCK_JOB_ID, SKIPLOCK_ATTEMPT (the attempt number, from 1),
SKIPLOCK_KIND and SKIPLOCK_QUEUE. Its stdout and stderr go to skiplock's. It runs in a
process group of its own; while it runs, heartbeats keep the job's lease. When --timeout
passes (or the job is lost), the group gets SIGTERM, then SIGKILL when any of it is left
--kill-after later. What the command leaves running in its group when it exits is killed.

The command's exit status decides the job's fate:
  0    the job is done (completed);
  75   EX_TEMPFAIL: the job goes back to the queue for --tempfail-delay without spending an
       attempt (a command that always exits 75 is retried forever);
  65   EX_DATAERR, "give up now": the job is cancelled, with no further attempts;
  any other status, or death by a signal: a failed attempt, retried with backoff until its
       attempts are spent, then dead.
A failed or cancelled job's error is the exit status and the last lines of the command's
stderr (at most 20 lines, 4 KB).

SIGTERM or SIGINT to skiplock drains: it stops claiming, gives back the jobs it claimed but
did not start, waits up to --grace for running commands, then sends them SIGTERM (and SIGKILL
at most 3 s later); their jobs go back to the queue at once, unless they still exit 0. Then
it exits 0.

Connection: --database-url (default $DATABASE_URL, else the PG* variables), --schema.
`,
	setup: func(fs *flag.FlagSet) func(context.Context, *call) error {
		var o workOpts
		fs.StringVar(&o.queue, "queue", "", "the queue to work (required)")
		fs.StringVar(&o.command, "exec", "", "the command to run for each job (required)")
		fs.IntVar(&o.slots, "slots", driver.SlotsDefault, "jobs run at once")
		fs.DurationVar(&o.lease, "lease", driver.LeaseDefault, "the lease of a claimed job; heartbeats extend it every lease/3")
		fs.DurationVar(&o.timeout, "timeout", driver.JobTimeoutDefault, "the longest a command may run; 0 means no limit")
		fs.DurationVar(&o.killAfter, "kill-after", 10*time.Second, "SIGKILL this long after SIGTERM")
		fs.DurationVar(&o.tempfailDelay, "tempfail-delay", 10*time.Second, "how long a job whose command exits 75 waits before it is ready again")
		fs.DurationVar(&o.grace, "grace", driver.ShutdownTimeoutDefault, "on SIGTERM, how long running commands may finish before they get SIGTERM; 0 means without limit")
		o.db.register(fs)
		return func(ctx context.Context, c *call) error {
			if len(c.args) > 0 {
				return usageErrorf("work: unexpected argument %q (quote the command: --exec 'cmd args')", c.args[0])
			}
			return runWork(ctx, c.env, &o)
		}
	},
}

// workOpts are the flags of `skiplock work`.
type workOpts struct {
	queue, command string
	slots          int
	lease, timeout time.Duration
	killAfter      time.Duration
	tempfailDelay  time.Duration
	grace          time.Duration
	db             dbFlags
}

func runWork(ctx context.Context, e *env, o *workOpts) error {
	switch {
	case o.queue == "":
		return usageErrorf("work: --queue is required")
	case strings.TrimSpace(o.command) == "":
		return usageErrorf("work: --exec is required")
	case o.killAfter <= 0:
		return usageErrorf("work: --kill-after must be positive")
	case o.tempfailDelay < 0:
		return usageErrorf("work: --tempfail-delay must not be negative")
	}
	timeout := o.timeout
	if timeout <= 0 {
		timeout = -1 // the driver's "no timeout"
	}
	grace := o.grace
	if grace <= 0 {
		grace = -1
	}

	url := o.db.url
	if url == "" {
		url = e.getenv("DATABASE_URL")
	}
	poolCfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return usageErrorf("bad database URL: %w", err)
	}
	if o.db.schema != "" {
		poolCfg.ConnConfig.RuntimeParams["search_path"] = pgx.Identifier{o.db.schema}.Sanitize()
	}
	// The claims, completions, heartbeats and each failure share the pool; slots+2 keeps a
	// busy queue from waiting on it.
	poolCfg.MaxConns = int32(min(max(o.slots+2, 4), 64))
	pool, err := pgxpool.NewWithConfig(context.WithoutCancel(ctx), poolCfg)
	if err != nil {
		return fmt.Errorf("failed to connect: %w", err)
	}
	defer pool.Close()

	logger := slog.New(slog.NewTextHandler(e.stderr, nil))
	ex := &execHandler{command: o.command, killAfter: o.killAfter, tempfailDelay: o.tempfailDelay, stdout: e.stdout, stderr: e.stderr}
	handlers := driver.NewHandlers()
	driver.AddDefaultHandler(handlers, ex.run, nil)
	client, err := driver.NewClient(pool, &driver.Config{
		Queues:          map[string]driver.QueueConfig{o.queue: {Slots: o.slots}},
		Handlers:        handlers,
		Lease:           o.lease,
		JobTimeout:      timeout,
		ShutdownTimeout: grace,
		Logger:          logger,
	})
	if err != nil {
		if driver.IsInvalid(err) {
			return usageErrorf("work: %w", err)
		}
		return err
	}
	logger.Info("skiplock work started", slog.String("queue", o.queue), slog.Int("slots", o.slots), slog.String("exec", o.command))
	if err := client.Run(ctx); err != nil {
		return fmt.Errorf("failed to work queue %s: %w", o.queue, err)
	}
	logger.Info("skiplock work stopped", slog.String("queue", o.queue))
	return nil
}

// execHandler runs one job as a child process.
type execHandler struct {
	command        string
	killAfter      time.Duration
	tempfailDelay  time.Duration
	stdout, stderr io.Writer
}

func (h *execHandler) run(ctx context.Context, job *driver.Job[json.RawMessage]) error {
	cmd := commandFor(h.command)
	cmd.Env = append(os.Environ(),
		"SKIPLOCK_JOB_ID="+strconv.FormatInt(job.ID, 10),
		"SKIPLOCK_ATTEMPT="+strconv.Itoa(job.Attempt),
		"SKIPLOCK_KIND="+job.Kind,
		"SKIPLOCK_QUEUE="+job.Queue,
	)
	cmd.Stdin = bytes.NewReader(job.EncodedPayload)
	cmd.Stdout = h.stdout
	tail := &tailWriter{}
	cmd.Stderr = io.MultiWriter(h.stderr, tail)
	// A group of its own: the timeout's signals reach the command's children too, and a
	// Ctrl-C meant for skiplock (which drains) does not kill running jobs.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	// Children that outlive the command may hold its stdout or stderr open; stop waiting for
	// them after the command exited.
	cmd.WaitDelay = time.Second
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("failed to start %q: %w", h.command, err)
	}
	pgid := cmd.Process.Pid

	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	var waitErr error
	select {
	case waitErr = <-exited:
	case <-ctx.Done():
		// The whole group gets SIGTERM and up to killAfter to end; a shell running the
		// command may exit before its children do, so wait for the group, not the child.
		_ = syscall.Kill(-pgid, syscall.SIGTERM)
		killAfter := h.killAfter
		if errors.Is(context.Cause(ctx), driver.ErrShutdown) {
			// The driver waits only a few seconds more before it abandons the job.
			killAfter = min(killAfter, shutdownKillAfter)
		}
		deadline := time.Now().Add(killAfter)
		waitErr = waitUntil(exited, deadline)
		for syscall.Kill(-pgid, 0) == nil && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
		if waitErr == errStillRunning {
			_ = syscall.Kill(-pgid, syscall.SIGKILL)
			waitErr = <-exited
		}
	}
	// Whatever the command left running in its group goes with it.
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
	if errors.Is(waitErr, exec.ErrWaitDelay) {
		// Wait gives up on a child still holding stdout or stderr after WaitDelay and reports
		// ErrWaitDelay only if the command itself exited 0: that exit status is the outcome.
		waitErr = nil
	}

	if waitErr == nil && ctx.Err() == nil {
		return nil
	}
	status := "exit status " + strconv.Itoa(cmd.ProcessState.ExitCode())
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		status = "killed by " + signalName(ws.Signal())
	}
	if ctx.Err() != nil {
		status += fmt.Sprintf(" after %s (%v)", "SIGTERM", context.Cause(ctx))
	}
	jobErr := errors.New(status)
	if s := tail.String(); s != "" {
		jobErr = fmt.Errorf("%s: %s", status, s)
	}
	if waitErr == nil {
		// It exited 0 after its context ended: the work was done.
		return nil
	}
	switch cmd.ProcessState.ExitCode() {
	case execExitTempFail:
		return fmt.Errorf("%w: %w", driver.Snooze(h.tempfailDelay), jobErr)
	case execExitGiveUp:
		return driver.Cancel(jobErr)
	}
	return jobErr
}

// errStillRunning: the command had not exited by the deadline.
var errStillRunning = errors.New("still running")

// waitUntil returns the command's exit from exited, or errStillRunning at deadline.
func waitUntil(exited <-chan error, deadline time.Time) error {
	timer := time.NewTimer(time.Until(deadline))
	defer timer.Stop()
	select {
	case err := <-exited:
		return err
	case <-timer.C:
		return errStillRunning
	}
}

// shellSyntax are the characters that make a command need /bin/sh -c.
const shellSyntax = "|&;<>()$`\\\"'*?[]#~=%{}!\n"

// commandFor runs command directly, split at spaces, when it is plain words, as make does;
// otherwise with /bin/sh -c. Run directly, the program is the process skiplock waits for, so
// its own exit status (not a shell's) decides the job after a SIGTERM too.
func commandFor(command string) *exec.Cmd {
	if !strings.ContainsAny(command, shellSyntax) {
		words := strings.Fields(command)
		return exec.Command(words[0], words[1:]...)
	}
	return exec.Command("/bin/sh", "-c", command)
}

// signalName is "SIGKILL" rather than Go's "killed".
func signalName(sig syscall.Signal) string {
	switch sig {
	case syscall.SIGTERM:
		return "SIGTERM"
	case syscall.SIGKILL:
		return "SIGKILL"
	case syscall.SIGINT:
		return "SIGINT"
	}
	return fmt.Sprintf("signal %d (%s)", int(sig), sig)
}

// tailWriter keeps the last execStderrTailLines lines (at most execStderrTailBytes) of what
// is written to it.
type tailWriter struct {
	mu  sync.Mutex
	buf []byte
}

func (w *tailWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf = append(w.buf, p...)
	if len(w.buf) > 4*execStderrTailBytes {
		w.buf = append([]byte(nil), w.buf[len(w.buf)-execStderrTailBytes:]...)
	}
	return len(p), nil
}

func (w *tailWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	s := strings.TrimRight(string(w.buf), "\n")
	lines := strings.Split(s, "\n")
	if len(lines) > execStderrTailLines {
		lines = lines[len(lines)-execStderrTailLines:]
	}
	s = strings.Join(lines, "\n")
	if len(s) > execStderrTailBytes {
		s = s[len(s)-execStderrTailBytes:]
	}
	// A cut at a byte offset (here or in Write) may fall inside a multi-byte character: start
	// at the next character rather than with its stray continuation bytes.
	for i := 0; i < utf8.UTFMax-1 && s != "" && !utf8.RuneStart(s[0]); i++ {
		s = s[1:]
	}
	return s
}
