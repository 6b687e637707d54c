package skiplockprom

import (
	"context"
	"errors"
	"log/slog"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/skiplock/skiplock/driver"
	"github.com/skiplock/skiplock/tests/pgtest"
)

// runOutcomes runs one job of each outcome through a client with hook and waits until each
// has finished: kinds ok (done), fail with max_attempts 1 (dead), retry (retried), cancel,
// snooze and fence (cancelled by an operator while running, so its failure is refused).
func runOutcomes(t *testing.T, pool *pgxpool.Pool, hook driver.Hook) {
	t.Helper()
	ctx := context.Background()
	hs := driver.NewHandlers()
	driver.AddHandler(hs, "ok", func(ctx context.Context, job *driver.Job[struct{}]) error { return nil }, nil)
	driver.AddHandler(hs, "fail", func(ctx context.Context, job *driver.Job[struct{}]) error { return errors.New("boom") }, nil)
	driver.AddHandler(hs, "retry", func(ctx context.Context, job *driver.Job[struct{}]) error {
		return driver.RetryAt(time.Now().Add(time.Hour))
	}, nil)
	driver.AddHandler(hs, "cancel", func(ctx context.Context, job *driver.Job[struct{}]) error {
		return driver.Cancel(errors.New("never"))
	}, nil)
	driver.AddHandler(hs, "snooze", func(ctx context.Context, job *driver.Job[struct{}]) error {
		return driver.Snooze(time.Hour)
	}, nil)
	driver.AddHandler(hs, "fence", func(ctx context.Context, job *driver.Job[struct{}]) error {
		if _, err := pool.Exec(context.Background(), "SELECT jobs_cancel($1)", job.ID); err != nil {
			return err
		}
		return errors.New("too late")
	}, nil)
	client, err := driver.NewClient(pool, &driver.Config{
		Queues:       map[string]driver.QueueConfig{"default": {Slots: 10}},
		Handlers:     hs,
		PollInterval: 100 * time.Millisecond,
		Hook:         hook,
		Logger:       slog.New(slog.NewTextHandler(pgtest.NewLogWriter(t), nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	runErr := make(chan error, 1)
	go func() { runErr <- client.Run(ctx) }()
	defer func() {
		if err := client.Stop(ctx); err != nil {
			t.Errorf("Stop: %v", err)
		}
		if err := <-runErr; err != nil {
			t.Errorf("Run: %v", err)
		}
	}()
	for _, kind := range []string{"ok", "fail", "retry", "cancel", "snooze", "fence"} {
		if _, err := driver.Enqueue(ctx, pool, kind, nil, &driver.EnqueueOpts{MaxAttempts: 1 + btoi(kind == "retry")}); err != nil {
			t.Fatal(err)
		}
	}
	pgtest.WaitFor(t, 20*time.Second, "every job finished its run", func() bool {
		var n int
		err := pool.QueryRow(ctx, `SELECT count(*) FROM jobs WHERE state IN ('done', 'dead', 'cancelled')
			OR (state = 'queued' AND attempts > 0) OR (state = 'queued' AND run_at > now() + interval '30 minutes')`).Scan(&n)
		return err == nil && n == 6
	})
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

func TestHookCountsOutcomes(t *testing.T) {
	t.Parallel()
	pool := pgtest.NewPool(t, pgtest.NewDatabase(t))
	hook := NewHook()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(hook)
	runOutcomes(t, pool, hook)
	// A short run may see no poll; the driver's tests check the sources themselves.
	hook.HandleClaim(&driver.ClaimEvent{Queue: "default", Wake: driver.WakePoll, Asked: 10})
	text := exposition(t, reg)
	pgtest.WaitFor(t, 10*time.Second, "the completer's done event", func() bool {
		text = exposition(t, reg)
		return strings.Contains(text, `outcome="done"`)
	})
	for _, want := range []string{
		`skiplock_jobs_finished_total{kind="ok",outcome="done",queue="default"} 1`,
		`skiplock_jobs_finished_total{kind="fail",outcome="dead",queue="default"} 1`,
		`skiplock_jobs_finished_total{kind="retry",outcome="retried",queue="default"} 1`,
		`skiplock_jobs_finished_total{kind="cancel",outcome="cancelled",queue="default"} 1`,
		`skiplock_jobs_finished_total{kind="snooze",outcome="snoozed",queue="default"} 1`,
		`skiplock_jobs_finished_total{kind="fence",outcome="fenced",queue="default"} 1`,
		`skiplock_jobs_claimed_total{queue="default"} 6`,
		`skiplock_job_duration_seconds_count{kind="ok",queue="default"} 1`,
		`skiplock_job_wait_seconds_count{kind="fence",queue="default"} 1`,
	} {
		if !strings.Contains(text, want+"\n") {
			t.Errorf("the exposition lacks %q:\n%s", want, text)
		}
	}
	for _, want := range []string{"skiplock_claim_batch_jobs_count", "skiplock_wakeups_notify_total", "skiplock_wakeups_poll_total"} {
		if !strings.Contains(text, want+`{queue="default"} `) {
			t.Errorf("the exposition lacks %s:\n%s", want, text)
		}
	}
}

// TestExpositionPassesPromtool checks the names, types and help of every metric, the
// collector's and the hook's, with `promtool check metrics` (Debian's prometheus package).
func TestExpositionPassesPromtool(t *testing.T) {
	t.Parallel()
	tool := promtool(t)
	url := pgtest.NewDatabase(t)
	pool := pgtest.NewPool(t, url)
	hook := NewHook()
	c, err := NewCollector(pool, nil)
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(hook, c)
	pgtest.MustExec(t, pool, "SELECT jobs_set_concurrency('default', 4)")
	runOutcomes(t, pool, hook)
	hook.HandleClaim(&driver.ClaimEvent{Queue: "default", Wake: driver.WakePoll, Asked: 10})
	pgtest.MustExec(t, pool, "ANALYZE jobs") // so that the done estimate is reported too
	text := exposition(t, reg)
	cmd := exec.Command(tool, "check", "metrics")
	cmd.Stdin = strings.NewReader(text)
	out, err := cmd.CombinedOutput()
	if err != nil || len(strings.TrimSpace(string(out))) > 0 {
		t.Fatalf("promtool check metrics: %v\n%s\non:\n%s", err, out, text)
	}
	t.Logf("promtool check metrics: no problems in %d lines", strings.Count(text, "\n"))
}
