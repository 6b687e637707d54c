package driver_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/skiplock/skiplock/driver"
	"github.com/skiplock/skiplock/internal/subproc"
	"github.com/skiplock/skiplock/tests/pgtest"
)

// Worker processes for the crash tests are this test binary, re-executed with helperModeEnv
// set; TestMain hands them to runHelper instead of running tests.
const (
	helperModeEnv  = "SKIPLOCK_DRIVER_TEST_HELPER" // "worker" or "idle"
	helperURLEnv   = "SKIPLOCK_DRIVER_TEST_URL"
	helperIDEnv    = "SKIPLOCK_DRIVER_TEST_ID"
	helperSlotsEnv = "SKIPLOCK_DRIVER_TEST_SLOTS"
	helperLeaseEnv = "SKIPLOCK_DRIVER_TEST_LEASE"
)

// effectSchema is what the "effect" handler writes: one effects row per successful
// attempt, in the transaction that completes the job, and (when asked) one started row per
// attempt begun, committed at once. effects has no unique key, so a duplicate would show.
const effectSchema = `
CREATE TABLE effects (job_id bigint NOT NULL, attempt integer NOT NULL, worker text NOT NULL,
                      at timestamptz NOT NULL DEFAULT clock_timestamp());
CREATE TABLE started (job_id bigint NOT NULL, attempt integer NOT NULL, worker text NOT NULL);`

// effectArgs is the payload of an "effect" job.
type effectArgs struct {
	SleepMS     int  `json:"sleep_ms,omitempty"`
	RecordStart bool `json:"record_start,omitempty"`
}

// addEffectHandler registers the "effect" kind: the job's work is an effects row committed
// together with the job's completion (CompleteTx), so it happens exactly once per job.
func addEffectHandler(hs *driver.Handlers, pool *pgxpool.Pool, worker string) {
	driver.AddHandler(hs, "effect", func(ctx context.Context, job *driver.Job[effectArgs]) error {
		if job.Payload.RecordStart {
			if _, err := pool.Exec(ctx, "INSERT INTO started VALUES ($1, $2, $3)", job.ID, job.Attempt, worker); err != nil {
				return err
			}
		}
		if d := job.Payload.SleepMS; d > 0 {
			select {
			case <-time.After(time.Duration(d) * time.Millisecond):
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		tx, err := pool.Begin(ctx)
		if err != nil {
			return err
		}
		defer tx.Rollback(context.WithoutCancel(ctx))
		if _, err := tx.Exec(ctx, "INSERT INTO effects (job_id, attempt, worker) VALUES ($1, $2, $3)", job.ID, job.Attempt, worker); err != nil {
			return err
		}
		if err := driver.CompleteTx(ctx, tx, job); err != nil {
			return err
		}
		return tx.Commit(ctx)
	}, nil)
}

// runHelper is the main function of a helper process. It runs a client until SIGTERM.
func runHelper(mode string) int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	fail := func(err error) int {
		fmt.Fprintf(os.Stderr, "helper %s: %v\n", mode, err)
		return 1
	}
	slots, err := strconv.Atoi(os.Getenv(helperSlotsEnv))
	if err != nil {
		return fail(err)
	}
	lease, err := time.ParseDuration(os.Getenv(helperLeaseEnv))
	if err != nil {
		return fail(err)
	}
	id := os.Getenv(helperIDEnv)

	cfg, err := pgxpool.ParseConfig(os.Getenv(helperURLEnv))
	if err != nil {
		return fail(err)
	}
	cfg.MaxConns = int32(min(slots, 32) + 6)
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return fail(err)
	}
	defer pool.Close()

	hs := driver.NewHandlers()
	switch mode {
	case "worker":
		addEffectHandler(hs, pool, id)
	case "idle":
		driver.AddHandler(hs, "noop", func(ctx context.Context, job *driver.Job[struct{}]) error { return nil }, nil)
	default:
		return fail(fmt.Errorf("unknown mode"))
	}
	client, err := driver.NewClient(pool, &driver.Config{
		Queues:          map[string]driver.QueueConfig{"default": {Slots: slots}},
		Handlers:        hs,
		ID:              id,
		Lease:           lease,
		PollInterval:    200 * time.Millisecond,
		RequeueInterval: 200 * time.Millisecond,
		Logger:          slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
	})
	if err != nil {
		return fail(err)
	}
	if err := client.Run(ctx); err != nil {
		return fail(err)
	}
	return 0
}

// helperProcess is a running helper.
type helperProcess struct {
	*subproc.Process
}

// startHelper starts this binary as a helper process, its stderr going to the test's log;
// the test's cleanup kills it if it is still running.
func startHelper(t *testing.T, mode, url, id string, slots int, lease time.Duration) *helperProcess {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	p, err := subproc.Start(context.Background(), exe, &subproc.Options{
		Env: []string{
			helperModeEnv + "=" + mode, helperURLEnv + "=" + url, helperIDEnv + "=" + id,
			helperSlotsEnv + "=" + strconv.Itoa(slots), helperLeaseEnv + "=" + lease.String(),
		},
		Stderr:       pgtest.NewLogWriter(t),
		StderrPrefix: "[" + id + "] ",
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Kill)
	return &helperProcess{p}
}

// stop sends SIGTERM and waits for a clean exit.
func (hp *helperProcess) stop(t *testing.T) {
	t.Helper()
	_ = hp.Signal(syscall.SIGTERM)
	select {
	case <-hp.Done():
	case <-time.After(30 * time.Second):
		t.Fatalf("helper %d did not exit within 30s of SIGTERM", hp.Pid())
	}
	if err := hp.Err(); err != nil {
		t.Fatalf("helper %d: %v", hp.Pid(), err)
	}
}

// kill9 kills the process with SIGKILL and waits for it.
func (hp *helperProcess) kill9(t *testing.T) {
	t.Helper()
	if hp.Exited() {
		t.Fatalf("helper %d exited before it was killed: %v", hp.Pid(), hp.Err())
	}
	hp.Kill()
}

// rssKB reads the process's resident set size from /proc.
func rssKB(t *testing.T, pid int) int {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Skipf("no /proc: %v", err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.Atoi(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")))
			if err != nil {
				t.Fatal(err)
			}
			return kb
		}
	}
	t.Fatal("no VmRSS in /proc status")
	return 0
}
