// Package chaos_test runs skiplock's chaos suite (internal/chaos) at CI size: worker
// processes killed with SIGKILL, backends terminated, PostgreSQL restarted fast and
// immediate, a held snapshot, row locks, pool exhaustion and hanging handlers, then checks
// that no job was lost or done twice and that every fault was recovered from in time.
//
// The tests do not run in parallel: the recovery bound is a timing claim, and a second run
// on the same two cores would measure the machine rather than skiplock. Set
// SKIPLOCK_CHAOS_SEED to replay a run's schedule.
package chaos_test

import (
	"context"
	"encoding/json"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/skiplock/skiplock"
	"github.com/skiplock/skiplock/internal/chaos"
	"github.com/skiplock/skiplock/internal/pglocal"
	"github.com/skiplock/skiplock/tests/pgtest"
)

func TestMain(m *testing.M) {
	// The chaos runs re-execute this binary as their worker processes.
	if chaos.IsWorker() {
		os.Exit(chaos.WorkerMain())
	}
	if os.Getenv(shardWorkerEnv) != "" {
		os.Exit(shardWorkerMain())
	}
	if os.Getenv(workflowWorkerEnv) != "" {
		os.Exit(workflowWorkerMain())
	}
	pgtest.Main(m)
}

// seed is SKIPLOCK_CHAOS_SEED, or 0 (a fresh seed, which the report shows).
func seed(t *testing.T) uint64 {
	s := os.Getenv("SKIPLOCK_CHAOS_SEED")
	if s == "" {
		return 0
	}
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		t.Fatalf("SKIPLOCK_CHAOS_SEED: %v", err)
	}
	return n
}

// TestChaos is the CI-size run: 2,000 jobs through 3 worker processes of 8 slots, 6 kills,
// 3 terminate rounds, a fast and an immediate restart, a snapshot held for 5s, a row-lock
// session, hog and hang jobs. It must lose nothing, do nothing twice, and recover from
// every fault within lease + poll interval + 2s.
func TestChaos(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: a chaos run takes minutes")
	}
	srv := pgtest.NewServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	admin := pgtest.NewConn(t, srv.URL())
	if _, err := admin.Exec(ctx, "CREATE DATABASE chaos"); err != nil {
		t.Fatal(err)
	}
	url := srv.URLFor("chaos")
	migrate(t, url)

	began := time.Now()
	rep, err := chaos.Run(ctx, &chaos.Options{
		URL:             url,
		Server:          srv,
		Jobs:            2000,
		Workers:         3,
		Slots:           8,
		Kills:           6,
		TerminateRounds: 3,
		HeldXmin:        5 * time.Second,
		RowLock:         3 * time.Second,
		Seed:            seed(t),
		Logf:            t.Logf,
		WorkerLog:       pgtest.NewLogWriter(t),
	})
	if rep != nil {
		t.Logf("chaos report (%s in all):\n%s", time.Since(began).Round(time.Second), rep)
		b, _ := json.Marshal(rep)
		t.Logf("json: %s", b)
	}
	if err != nil {
		t.Fatal(err)
	}
	checkStorage(t, url)

	// The faults happened as planned and did something: the run would prove nothing if
	// the kills found idle workers or the terminations missed the listeners.
	checks := []struct {
		ok   bool
		what string
	}{
		{rep.Kills == 6, "6 kills"},
		{rep.OrphansRequeued > 0, "kills that orphaned jobs in flight"},
		{rep.Restarts == 2, "a fast and an immediate restart"},
		{rep.TerminatedBackends > 0 && rep.ListenersTerminated > 0, "terminated backends, LISTEN connections among them"},
		{rep.HeldXminSeconds >= 4.5, "a snapshot held for 5s"},
		{rep.RowsLocked > 0, "row locks held"},
		{rep.HogJobs > 0 && rep.HangJobs > 0, "hog and hang jobs"},
		{rep.Executions > rep.Jobs, "re-executions (at-least-once at work)"},
	}
	for _, c := range checks {
		if !c.ok {
			t.Errorf("the run lacked %s", c.what)
		}
	}
}

// TestChaosClaimAhead kills worker processes that hold jobs claimed ahead (QueueConfig.
// ClaimAhead) besides running ones: the buffered jobs come back when their lease expires,
// and nothing is lost or done twice.
func TestChaosClaimAhead(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: a chaos run takes minutes")
	}
	url := pgtest.NewDatabase(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	rep, err := chaos.Run(ctx, &chaos.Options{
		URL:             url,
		Jobs:            800,
		Workers:         2,
		Slots:           4,
		ClaimAhead:      16,
		Kills:           4,
		Restarts:        []pglocal.StopMode{},
		TerminateRounds: -1,
		HeldXmin:        -1,
		RowLock:         -1,
		HogFraction:     -1,
		HangFraction:    -1,
		Seed:            seed(t),
		Logf:            t.Logf,
	})
	if rep != nil {
		t.Logf("chaos report:\n%s", rep)
	}
	if err != nil {
		t.Fatal(err)
	}
	checkStorage(t, url)
	if rep.Kills != 4 || rep.OrphansRequeued == 0 {
		t.Errorf("the run had %d kills and %d orphaned jobs requeued, want 4 kills that orphaned jobs", rep.Kills, rep.OrphansRequeued)
	}
}

// TestChaosCatchesEffectOutsideTx runs a small workload whose handlers commit their effect
// before, and apart from, the job's completion. Kills then leave effects whose jobs run
// again: the suite must report them as done twice. A suite that passed this run could not
// be trusted to catch anything.
func TestChaosCatchesEffectOutsideTx(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: a chaos run takes minutes")
	}
	url := pgtest.NewDatabase(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	rep, err := chaos.Run(ctx, &chaos.Options{
		URL:             url,
		Jobs:            400,
		Workers:         2,
		Kills:           3,
		Restarts:        []pglocal.StopMode{},
		TerminateRounds: -1,
		HeldXmin:        -1,
		RowLock:         -1,
		HogFraction:     -1,
		HangFraction:    -1,
		EffectOutsideTx: true,
		Seed:            seed(t),
		Logf:            t.Logf,
	})
	if rep == nil {
		t.Fatalf("no report: %v", err)
	}
	t.Logf("chaos report:\n%s", rep)
	if rep.JobsDoneTwice == 0 || err == nil || !strings.Contains(err.Error(), "done twice") {
		t.Fatalf("the suite did not catch effects committed outside the job's transaction: %d done twice, error %v",
			rep.JobsDoneTwice, err)
	}
	if rep.JobsLost != 0 {
		t.Errorf("%d jobs lost; at-least-once holds whatever the handler does", rep.JobsLost)
	}
}

func migrate(t *testing.T, url string) {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if err := skiplock.Migrate(ctx, conn, nil); err != nil {
		t.Fatal(err)
	}
}

// checkStorage fails the test when, after a run, the tables that list jobs (jobs_queued,
// jobs_claims, jobs_unique_keys, jobs_dead_cancelled) disagree with jobs: kills, terminated
// backends and restarts must leave them as consistent as the jobs themselves.
func checkStorage(t *testing.T, url string) {
	t.Helper()
	conn := pgtest.NewConn(t, url)
	if p := pgtest.StorageProblems(t, conn); len(p) > 0 {
		t.Errorf("after the run the tables that list jobs disagree with jobs (%d problems):\n%s", len(p), strings.Join(p, "\n"))
	}
}
