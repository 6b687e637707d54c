package sqltest

import (
	"context"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// TestMeasureClaimCompleteWithFinishedRows measures claim+complete throughput on an empty
// table and on one holding 1,000,000 done jobs, with the same workers. It asserts nothing:
// it logs the two rates and their ratio, the figure that shows whether finished jobs slow
// the hot path. Run it with SKIPLOCK_MEASURE=1 go test -run Measure -v ./tests/sqltest.
// It runs on pgtest's server: without DATABASE_URL that is a local cluster with fsync off,
// so the rates are CPU-bound and show the cost of the statements, not of the disk.
//
// It does not call t.Parallel, so it runs alone, before the parallel tests start.
func TestMeasureClaimCompleteWithFinishedRows(t *testing.T) {
	if os.Getenv("SKIPLOCK_MEASURE") != "1" {
		t.Skip("a measurement, not a test: set SKIPLOCK_MEASURE=1 to run it")
	}
	const (
		numJobs    = 50000
		numWorkers = 4
		batch      = 100
		doneRows   = 1000000
	)

	run := func(t *testing.T, done int) float64 {
		b := setup(t)
		if done > 0 {
			start := time.Now()
			mustExec(t, b.Conn, `INSERT INTO jobs (kind, state, attempts, lease_holder, run_at, created_at, finished_at)
				SELECT 'old', 'done', 1, 'w', now() - interval '1 day', now() - interval '1 day', now() - interval '1 day'
				FROM generate_series(1, $1::int)`, done)
			t.Logf("inserted %d done jobs in %s", done, time.Since(start).Round(time.Millisecond))
		}
		mustExec(t, b.Conn, "VACUUM ANALYZE jobs")
		for i := 0; i < numJobs; i += 10000 {
			mustExec(t, b.Conn, "SELECT count(*) FROM jobs_enqueue_many(array_fill('k'::text, ARRAY[10000]))")
		}

		conns := make([]*pgx.Conn, numWorkers)
		for i := range conns {
			conns[i] = b.Connect(t)
		}
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
		defer cancel()
		var (
			completed atomic.Int64
			wg        sync.WaitGroup
			errs      = make(chan error, numWorkers)
		)
		start := time.Now()
		for i, conn := range conns {
			wg.Add(1)
			go func() {
				defer wg.Done()
				worker := fmt.Sprintf("measure-%d", i)
				for completed.Load() < numJobs {
					jobs, err := tryClaim(ctx, conn, worker, batch, []string{"default"}, "5 minutes")
					if err != nil {
						errs <- err
						return
					}
					if len(jobs) == 0 {
						continue
					}
					ids := make([]int64, len(jobs))
					attempts := make([]int32, len(jobs))
					for k, j := range jobs {
						ids[k], attempts[k] = j.ID, j.Attempt
					}
					tag, err := conn.Exec(ctx, "SELECT jobs_complete_many($1, $2)", ids, attempts)
					if err != nil {
						errs <- err
						return
					}
					completed.Add(tag.RowsAffected())
				}
			}()
		}
		wg.Wait()
		elapsed := time.Since(start)
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		if n := queryOne[int64](t, b.Conn, "SELECT count(*) FROM jobs WHERE state = 'done'"); n != int64(numJobs+done) {
			t.Fatalf("%d done jobs, want %d", n, numJobs+done)
		}
		rate := float64(numJobs) / elapsed.Seconds()
		t.Logf("%d done rows: %d jobs claimed (%d per claim, %d sessions) and completed in %s: %.0f jobs/s",
			done, numJobs, batch, numWorkers, elapsed.Round(time.Millisecond), rate)
		return rate
	}

	empty := run(t, 0)
	loaded := run(t, doneRows)
	t.Logf("claim+complete: %.0f jobs/s on an empty table, %.0f jobs/s with %d done rows: ratio %.2f",
		empty, loaded, doneRows, loaded/empty)
}
