package main

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/skiplock/skiplock/cmd/bench/internal/wait"
)

// runner runs the scenarios against one env.
type runner struct {
	e   *env
	cfg *config
	// arrivalRate is steady_rate's rate in jobs/s (config.arrivalRate), set before each
	// scenario from the figures of the scenarios before it.
	arrivalRate float64
}

func (r *runner) workerName() string { return "bench-" + strconv.Itoa(os.Getpid()) }

// payload is a job's payload: its sequence number and the wall-clock time (Unix ns) the
// enqueue call began.
func payload(seq int64, at time.Time) []byte {
	return fmt.Appendf(nil, `{"seq":%d,"enqueued_at":%d}`, seq, at.UnixNano())
}

// bulkLoad enqueues n jobs through jobs_enqueue_many in batches of cfg.batch.
func (r *runner) bulkLoad(ctx context.Context, pool *pgxpool.Pool, n int, prog *progress) error {
	now := time.Now()
	for off := 0; off < n; off += r.cfg.batch {
		size := min(r.cfg.batch, n-off)
		payloads := make([][]byte, size)
		for i := range payloads {
			payloads[i] = payload(int64(off+i), now)
		}
		if err := enqueueMany(ctx, pool, payloads); err != nil {
			return err
		}
		if prog != nil {
			prog.Add(int64(size))
		}
	}
	return nil
}

// warmUp runs load, the scenario's own enqueues with nothing recorded, until -warmup has
// passed, then waits (at most -timeout) until the queue is empty, and returns how many jobs
// are done then. So the measured window starts on connections that have run each statement
// already, as those of a service that has been running have: a fresh backend's first call
// of a PL/pgSQL function compiles and plans it (jobs_enqueue about 11 ms of CPU, jobs_claim
// 8 ms on a 2-core machine), and 30 cold connections stalled the first half second of
// steady_rate (p99 225-320 ms cold against 7-10 ms warm). The peer harnesses warm up the
// same way.
func (r *runner) warmUp(ctx context.Context, pool *pgxpool.Pool, load func(ctx context.Context, until time.Time) error) (done int64, err error) {
	if err := load(ctx, time.Now().Add(r.cfg.warmup)); err != nil {
		return 0, fmt.Errorf("warm-up: %w", err)
	}
	var pending int64
	var countErr error
	if err := wait.Until(ctx, func() bool {
		_, done, pending, countErr = countJobs(ctx, pool)
		return countErr != nil || pending == 0
	}, r.cfg.timeout); err != nil {
		return 0, fmt.Errorf("warm-up: %d jobs still pending: %w", pending, err)
	}
	return done, countErr
}

// countJobs returns the number of jobs in each state class. With done_retention 0
// (-done-retention 0) completion deletes the job, so done also counts the job ids handed out
// that have no row left (the benchmark's inserts neither roll back nor deduplicate).
func countJobs(ctx context.Context, pool *pgxpool.Pool) (total, done, pending int64, err error) {
	err = pool.QueryRow(ctx, `
		SELECT count(*),
		       count(*) FILTER (WHERE state = 'done')
		         + CASE WHEN (SELECT done_retention = interval '0' FROM jobs_settings)
		                THEN coalesce(pg_sequence_last_value(pg_get_serial_sequence('jobs', 'id')::regclass), 0) - count(*)
		                ELSE 0 END,
		       count(*) FILTER (WHERE state IN ('queued', 'running'))
		FROM jobs`).Scan(&total, &done, &pending)
	if err != nil {
		err = fmt.Errorf("failed to count jobs: %w", err)
	}
	return total, done, pending, err
}

// waitCompleted returns once completed() reaches n: the workers count the completions the
// database confirmed, so no polling query competes with them for the server.
func waitCompleted(ctx context.Context, completed func() int64, n int64, timeout time.Duration) error {
	if err := wait.Until(ctx, func() bool { return completed() >= n }, timeout); err != nil {
		return fmt.Errorf("%w with %d of %d jobs completed", err, completed(), n)
	}
	return nil
}

// warmPool opens n connections so that connection setup is not timed.
func warmPool(ctx context.Context, pool *pgxpool.Pool, n int) error {
	conns := make([]*pgxpool.Conn, 0, n)
	defer func() {
		for _, c := range conns {
			c.Release()
		}
	}()
	for range n {
		c, err := pool.Acquire(ctx)
		if err != nil {
			return fmt.Errorf("failed to open a connection: %w", err)
		}
		conns = append(conns, c)
	}
	return nil
}
