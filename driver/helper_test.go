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

// Helper processes (TestIdleMemory's idle client, TestKillWorkerHoldingLimitedJobs's sleepers) are this test binary, re-executed with helperModeEnv
// set; TestMain hands them to runHelper instead of running tests.
const (
	helperModeEnv  = "SKIPLOCK_DRIVER_TEST_HELPER" // "idle" or "sleeper"
	helperURLEnv   = "SKIPLOCK_DRIVER_TEST_URL"
	helperIDEnv    = "SKIPLOCK_DRIVER_TEST_ID"
	helperSlotsEnv = "SKIPLOCK_DRIVER_TEST_SLOTS"
	helperLeaseEnv = "SKIPLOCK_DRIVER_TEST_LEASE"
)

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
	case "idle":
		driver.AddHandler(hs, "noop", func(ctx context.Context, job *driver.Job[struct{}]) error { return nil }, nil)
	case "sleeper":
		addSleepHandler(hs)
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
