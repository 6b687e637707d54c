package driver_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/skiplock/skiplock/driver"
	"github.com/skiplock/skiplock/tests/pgtest"
)

// BenchmarkDrain measures how fast one client drains a backlog of b.N no-op jobs, from its
// start to the last completion, and reports jobs/s. cmd/bench's work_drain scenario is the
// measurement the README quotes; this is the driver's own, for profiling:
//
//	go test -run '^$' -bench Drain -benchtime 50000x ./driver
//
// The ",batch" runs drain the jobs with a batch handler (AddBatchHandler, MaxJobs 100).
func BenchmarkDrain(b *testing.B) {
	for _, run := range []struct {
		slots int
		batch bool
	}{{100, false}, {1000, false}, {100, true}, {1000, true}} {
		slots := run.slots
		name := fmt.Sprintf("slots=%d", slots)
		if run.batch {
			name += ",batch"
		}
		b.Run(name, func(b *testing.B) {
			url := pgtest.NewDatabase(b)
			tb := &testBundle{url: url, pool: newPool(b, url, 20), logger: testLogger(b)}
			ctx := context.Background()

			b.StopTimer()
			for i := 0; i < b.N; i += 10000 {
				params := make([]driver.EnqueueParams, min(10000, b.N-i))
				for j := range params {
					params[j] = driver.EnqueueParams{Kind: "noop"}
				}
				if _, err := driver.EnqueueMany(ctx, tb.pool, params); err != nil {
					b.Fatal(err)
				}
			}
			if _, err := tb.pool.Exec(ctx, "VACUUM ANALYZE jobs"); err != nil {
				b.Fatal(err)
			}

			var completed atomic.Int64
			allDone := make(chan struct{})
			hs := driver.NewHandlers()
			if run.batch {
				driver.AddBatchHandler(hs, "noop", func(ctx context.Context, jobs []*driver.Job[struct{}]) error { return nil },
					driver.BatchOpts{MaxJobs: 100})
			} else {
				driver.AddHandler(hs, "noop", func(ctx context.Context, job *driver.Job[struct{}]) error { return nil }, nil)
			}
			cfg := baseConfig(tb, hs, map[string]driver.QueueConfig{"default": {Slots: slots}})
			cfg.Hook = driver.HookFunc(func(e *driver.Event) {
				if e.Kind == driver.EventCompleted && completed.Add(1) == int64(b.N) {
					close(allDone)
				}
			})
			b.ResetTimer()
			b.StartTimer()
			began := time.Now()
			startClient(b, tb.pool, cfg)
			select {
			case <-allDone:
			case <-time.After(5 * time.Minute):
				b.Fatalf("only %d of %d jobs completed in 5 minutes", completed.Load(), b.N)
			}
			elapsed := time.Since(began)
			b.StopTimer()
			if left := queryInt(b, tb.pool, "SELECT count(*) FROM jobs WHERE state <> 'done'"); left != 0 {
				b.Fatalf("%d jobs not done", left)
			}
			b.ReportMetric(float64(b.N)/elapsed.Seconds(), "jobs/s")
		})
	}
}
