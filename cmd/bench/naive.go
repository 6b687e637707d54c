package main

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/skiplock/skiplock/cmd/bench/internal/benchresult"
)

// The seed design skiplock replaced (the pgbench scripts it was first measured with are
// not part of this repository; everything the scenario needs is below): one table with a
// partial index on run_at, and one transaction per job that picks the oldest ready row
// with FOR UPDATE SKIP LOCKED and marks it done. It lives in the benchmark's schema as
// naive_jobs.

const naiveSchemaSQL = `
CREATE TABLE naive_jobs (
    id         bigserial   PRIMARY KEY,
    kind       text        NOT NULL,
    payload    jsonb       NOT NULL,
    status     text        NOT NULL DEFAULT 'queued',
    attempts   integer     NOT NULL DEFAULT 0,
    max_tries  integer     NOT NULL DEFAULT 5,
    run_at     timestamptz NOT NULL DEFAULT now(),
    last_error text,
    created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX naive_jobs_ready_idx ON naive_jobs (run_at) WHERE status = 'queued'`

// naiveLoadSQL spreads run_at 1 ms apart, all in the past, like load_jobs.sql.
const naiveLoadSQL = `
INSERT INTO naive_jobs (kind, payload, run_at)
SELECT 'bench_noop', jsonb_build_object('seq', g),
       now() - make_interval(secs => ($1 - g) / 1000.0) - interval '1 second'
FROM generate_series(1, $1::integer) AS g`

const naiveClaimSQL = `
SELECT id, kind, payload, attempts, max_tries
FROM naive_jobs
WHERE status = 'queued' AND run_at <= now()
ORDER BY run_at
LIMIT 1
FOR UPDATE SKIP LOCKED`

const naiveDoneSQL = `UPDATE naive_jobs SET status = 'done', attempts = attempts + 1 WHERE id = $1`

// naive: N preloaded jobs drained by -naive-workers goroutines, one connection each, one
// transaction per job. Done when every goroutine finds nothing left to claim.
func (r *runner) naive(ctx context.Context) (*result, error) {
	workers := r.cfg.naiveWorkers
	pool, err := r.e.newPool(ctx, workers+2)
	if err != nil {
		return nil, err
	}
	defer pool.Close()
	n := int64(r.cfg.jobs)
	if _, err := pool.Exec(ctx, naiveSchemaSQL); err != nil {
		return nil, fmt.Errorf("failed to create naive_jobs: %w", err)
	}
	if _, err := pool.Exec(ctx, naiveLoadSQL, n); err != nil {
		return nil, fmt.Errorf("failed to load naive_jobs: %w", err)
	}
	if _, err := pool.Exec(ctx, "VACUUM ANALYZE naive_jobs"); err != nil {
		return nil, fmt.Errorf("failed to vacuum naive_jobs: %w", err)
	}
	if err := settle(ctx, pool, "naive_jobs"); err != nil {
		return nil, err
	}
	if err := warmPool(ctx, pool, workers); err != nil {
		return nil, err
	}

	prog := newProgress("naive", n, 0, r.cfg.progress)
	errs := make([]error, workers)
	var wg sync.WaitGroup
	prog.Begin()
	start := time.Now()
	for g := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			conn, err := pool.Acquire(ctx)
			if err != nil {
				errs[g] = err
				return
			}
			defer conn.Release()
			for {
				found, err := naiveOne(ctx, conn.Conn())
				if err != nil {
					errs[g] = err
					return
				}
				if !found {
					return
				}
				prog.Add(1)
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	samples := prog.End()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	var done int64
	if err := pool.QueryRow(ctx, "SELECT count(*) FROM naive_jobs WHERE status = 'done'").Scan(&done); err != nil {
		return nil, fmt.Errorf("failed to count naive jobs: %w", err)
	}
	if done != n {
		return nil, fmt.Errorf("expected %d done naive jobs, found %d", n, done)
	}
	res := &result{Result: benchresult.Result{Scenario: "naive", Jobs: n, Seconds: elapsed.Seconds()}, Series: samples}
	res.Add("design", "BEGIN; SELECT ... FOR UPDATE SKIP LOCKED LIMIT 1; UPDATE ... done; COMMIT (one job per transaction)")
	res.Add("concurrency", workers)
	res.note("seed design, %d connections", workers)
	return res, nil
}

// naiveOne claims and finishes one job in one transaction; found is false when nothing
// was left to claim.
func naiveOne(ctx context.Context, conn *pgx.Conn) (found bool, err error) {
	tx, err := conn.Begin(ctx)
	if err != nil {
		return false, fmt.Errorf("naive: failed to begin: %w", err)
	}
	defer func() {
		if err != nil {
			_ = tx.Rollback(context.WithoutCancel(ctx))
		}
	}()
	var (
		id                 int64
		kind               string
		payload            []byte
		attempts, maxTries int32
	)
	err = tx.QueryRow(ctx, naiveClaimSQL).Scan(&id, &kind, &payload, &attempts, &maxTries)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, tx.Commit(ctx)
	}
	if err != nil {
		return false, fmt.Errorf("naive: failed to claim: %w", err)
	}
	if _, err = tx.Exec(ctx, naiveDoneSQL, id); err != nil {
		return false, fmt.Errorf("naive: failed to finish job %d: %w", id, err)
	}
	if err = tx.Commit(ctx); err != nil {
		return false, fmt.Errorf("naive: failed to commit: %w", err)
	}
	return true, nil
}
