package sqltest

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/skiplock/skiplock/tests/pgtest"
)

// BenchmarkClaimCompleteWithFinishedRows measures claim+complete throughput (4 sessions,
// batches of 100) on an empty table and on one holding 1,000,000 done jobs, and reports
// jobs/s: the ratio of the two shows whether finished jobs slow the hot path
// (TestFencedCallsProbeOneRow guards the plan that once made them). It runs on pgtest's
// server: without DATABASE_URL that is a local cluster with fsync off, so the rates are
// CPU-bound and show the cost of the statements, not of the disk.
//
//	go test -run '^$' -bench ClaimCompleteWithFinishedRows -benchtime 50000x ./tests/sqltest
func BenchmarkClaimCompleteWithFinishedRows(b *testing.B) {
	const (
		numWorkers = 4
		batch      = 100
	)
	for _, done := range []int{0, 1000000} {
		b.Run(fmt.Sprintf("done=%d", done), func(b *testing.B) {
			b.StopTimer()
			url := pgtest.NewDatabase(b)
			conn := pgtest.NewConn(b, url)
			exec := func(sql string, args ...any) {
				b.Helper()
				if _, err := conn.Exec(b.Context(), sql, args...); err != nil {
					b.Fatalf("%s: %v", sql, err)
				}
			}
			if done > 0 {
				exec(`INSERT INTO jobs (kind, state, attempts, lease_holder, run_at, created_at, finished_at)
					SELECT 'old', 'done', 1, 'w', now() - interval '1 day', now() - interval '1 day', now() - interval '1 day'
					FROM generate_series(1, $1::int)`, done)
			}
			exec("VACUUM ANALYZE jobs")
			for i := 0; i < b.N; i += 10000 {
				exec("SELECT count(*) FROM jobs_enqueue_many(array_fill('k'::text, ARRAY[$1::int]))", min(10000, b.N-i))
			}

			conns := make([]*pgx.Conn, numWorkers)
			for i := range conns {
				conns[i] = pgtest.NewConn(b, url)
			}
			ctx, cancel := context.WithTimeout(b.Context(), 5*time.Minute)
			defer cancel()
			var (
				completed atomic.Int64
				wg        sync.WaitGroup
				errs      = make(chan error, numWorkers)
			)
			b.ResetTimer()
			b.StartTimer()
			start := time.Now()
			for i, conn := range conns {
				wg.Add(1)
				go func() {
					defer wg.Done()
					worker := fmt.Sprintf("bench-%d", i)
					for completed.Load() < int64(b.N) {
						jobs, err := tryClaim(ctx, conn, worker, batch, []string{"default"}, "5 minutes")
						if err != nil {
							errs <- fmt.Errorf("jobs_claim: %w", err)
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
							errs <- fmt.Errorf("jobs_complete_many: %w", err)
							return
						}
						completed.Add(tag.RowsAffected())
					}
				}()
			}
			wg.Wait()
			elapsed := time.Since(start)
			b.StopTimer()
			close(errs)
			for err := range errs {
				b.Fatal(err)
			}
			var n int64
			if err := conn.QueryRow(b.Context(), "SELECT count(*) FROM jobs WHERE state = 'done'").Scan(&n); err != nil {
				b.Fatal(err)
			}
			if n != int64(b.N+done) {
				b.Fatalf("%d done jobs, want %d", n, b.N+done)
			}
			b.ReportMetric(float64(b.N)/elapsed.Seconds(), "jobs/s")
		})
	}
}
