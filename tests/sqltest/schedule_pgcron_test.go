package sqltest

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/skiplock/skiplock"
	"github.com/skiplock/skiplock/internal/pglocal"
	"github.com/skiplock/skiplock/tests/pgtest"
)

// TestScheduleTickByPgCron: psql users tick schedules with pg_cron, as docs/operations.md
// shows. pg_cron must be preloaded, so the test starts a server of its own with
// shared_preload_libraries = 'pg_cron'; it skips where the pg_cron library is not installed
// (Debian: postgresql-NN-cron). pg_cron before 1.5 runs at most once a minute, so the test
// waits up to 75 seconds and does not run under -short.
func TestScheduleTickByPgCron(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("waits for pg_cron's once-a-minute tick")
	}
	bin, err := pglocal.FindBinaries(t.Context())
	if err != nil {
		t.Skipf("no local PostgreSQL: %v", err)
	}
	// Debian's layout: /usr/lib/postgresql/NN/{bin,lib}.
	if _, err := os.Stat(filepath.Join(bin, "..", "lib", "pg_cron.so")); err != nil {
		t.Skipf("pg_cron is not installed for the PostgreSQL in %s (Debian: apt-get install postgresql-NN-cron)", bin)
	}

	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	srv, err := pglocal.Start(ctx, &pglocal.Options{
		Settings: map[string]string{
			"fsync":                    "off",
			"shared_preload_libraries": "pg_cron",
			"cron.database_name":       "postgres",
			// Run the commands in background workers, not over a libpq connection that
			// would need a password or trust over TCP.
			"cron.use_background_workers": "on",
			"max_worker_processes":        "16",
		},
		Logf: t.Logf,
	})
	if err != nil {
		t.Fatalf("failed to start a server with pg_cron: %v", err)
	}
	t.Cleanup(func() {
		if err := srv.Close(); err != nil {
			t.Error(err)
		}
	})

	conn, err := pgx.Connect(ctx, srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.Close(context.WithoutCancel(ctx)) }()
	if err := skiplock.Migrate(ctx, conn, nil); err != nil {
		t.Fatal(err)
	}
	pgtest.MustExec(t, conn, "CREATE EXTENSION pg_cron")
	version := pgtest.QueryOne[string](t, conn, "SELECT extversion FROM pg_extension WHERE extname = 'pg_cron'")
	pgtest.MustExec(t, conn, "SELECT jobs_schedule('heartbeat', '@every 1 second', 'ping')")
	// The statement operations.md gives for pg_cron 1.4, which runs at most once a minute.
	pgtest.MustExec(t, conn, "SELECT cron.schedule('skiplock-tick', '* * * * *', 'SELECT jobs_schedule_tick()')")
	t.Logf("pg_cron %s: ticking every minute", version)

	pgtest.WaitFor(t, 75*time.Second, "pg_cron to tick a scheduled job in", func() bool {
		return pgtest.QueryOne[int64](t, conn, "SELECT count(*) FROM jobs WHERE kind = 'ping'") > 0
	})
	// pg_cron records the run's outcome just after the tick's transaction commits.
	var status, message string
	pgtest.WaitFor(t, 10*time.Second, "pg_cron to record the tick's run", func() bool {
		err := conn.QueryRow(ctx, `
			SELECT status, coalesce(return_message, '') FROM cron.job_run_details
			WHERE command = 'SELECT jobs_schedule_tick()' ORDER BY runid LIMIT 1`).Scan(&status, &message)
		if err != nil && !errors.Is(err, pgx.ErrNoRows) {
			t.Fatal(err)
		}
		return err == nil && status != "starting" && status != "running"
	})
	if status != "succeeded" {
		t.Fatalf("pg_cron's tick: %s %s", status, message)
	}
	// One tick, one job, for the latest instant (the schedule runs every second, the tick
	// every minute).
	if n := pgtest.QueryOne[int64](t, conn, "SELECT count(*) FROM jobs WHERE kind = 'ping'"); n != 1 {
		t.Fatalf("%d ping jobs after pg_cron's first tick, want 1", n)
	}
	if !pgtest.QueryOne[bool](t, conn, `
		SELECT j.run_at = s.last_run_at AND s.last_job_id = j.id
		FROM jobs j, jobs_schedules s WHERE j.kind = 'ping' AND s.name = 'heartbeat'`) {
		t.Fatal("the schedule's last run is not the job pg_cron's tick enqueued")
	}
}
