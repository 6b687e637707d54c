package pgbouncer_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/skiplock/skiplock/driver"
	"github.com/skiplock/skiplock/tests/pgtest"
)

// Every statement the driver sends works through PgBouncer: failures (with backoff and with
// RetryAt), snoozes, cancellations, heartbeats of a job that outlives its lease, and
// CompleteTx in the handler's own transaction.
func TestOutcomes(t *testing.T) {
	skipIfShort(t)
	t.Parallel()
	b := setup(t)
	pool := b.pooledPool(t, "exec", 10)
	ctx := t.Context()
	mustExec(t, b.direct, "UPDATE jobs_settings SET backoff_base = interval '10 milliseconds'")
	mustExec(t, b.direct, "CREATE TABLE effects (job_id bigint PRIMARY KEY)")
	mustExec(t, b.direct, "GRANT ALL ON effects TO PUBLIC")

	const lease = time.Second
	var lostLease atomic.Bool
	hs := driver.NewHandlers()
	type none struct{}
	driver.AddHandler(hs, "fail_once", func(ctx context.Context, job *driver.Job[none]) error {
		if job.Attempt == 1 {
			return errors.New("first attempt fails")
		}
		return nil
	}, nil)
	driver.AddHandler(hs, "retry_at", func(ctx context.Context, job *driver.Job[none]) error {
		if job.Attempt == 1 {
			return driver.RetryAt(time.Now())
		}
		return nil
	}, nil)
	driver.AddHandler(hs, "snooze_once", func(ctx context.Context, job *driver.Job[none]) error {
		if job.Attempt == 1 {
			return driver.Snooze(10 * time.Millisecond)
		}
		return nil
	}, nil)
	driver.AddHandler(hs, "cancel", func(ctx context.Context, job *driver.Job[none]) error {
		return driver.Cancel(errors.New("not wanted"))
	}, nil)
	driver.AddHandler(hs, "slow", func(ctx context.Context, job *driver.Job[none]) error {
		select {
		case <-ctx.Done():
			lostLease.Store(true)
			return context.Cause(ctx)
		case <-time.After(3 * lease):
			return nil
		}
	}, nil)
	driver.AddHandler(hs, "in_tx", func(ctx context.Context, job *driver.Job[none]) error {
		return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, "INSERT INTO effects (job_id) VALUES ($1)", job.ID); err != nil {
				return err
			}
			return driver.CompleteTx(ctx, tx, job)
		})
	}, nil)
	startClient(t, pool, &driver.Config{
		Queues:          map[string]driver.QueueConfig{driver.QueueDefault: {}},
		Handlers:        hs,
		ListenerURL:     b.directURL,
		Lease:           lease,
		PollInterval:    100 * time.Millisecond,
		RequeueInterval: 100 * time.Millisecond,
		Logger:          b.logger,
	})

	want := map[string]string{ // kind -> final state
		"fail_once": "done", "retry_at": "done", "snooze_once": "done",
		"cancel": "cancelled", "slow": "done", "in_tx": "done",
	}
	ids := make(map[string]int64)
	for kind := range want {
		id, err := driver.Enqueue(ctx, pool, kind, none{}, nil)
		if err != nil {
			t.Fatal(err)
		}
		ids[kind] = id
	}
	pgtest.WaitFor(t, 30*time.Second, "every job finished", func() bool {
		return queryInt(t, b.direct, "SELECT count(*) FROM jobs WHERE finished_at IS NOT NULL") == len(want)
	})
	for kind, state := range want {
		var got string
		var attempts int
		if err := b.direct.QueryRow(ctx, "SELECT state::text, attempts FROM jobs WHERE id = $1", ids[kind]).Scan(&got, &attempts); err != nil {
			t.Fatal(err)
		}
		wantAttempts := map[string]int{"fail_once": 2, "retry_at": 2, "snooze_once": 2}[kind]
		if wantAttempts == 0 {
			wantAttempts = 1
		}
		if got != state || attempts != wantAttempts {
			t.Errorf("%s: state %s after %d attempts, want %s after %d", kind, got, attempts, state, wantAttempts)
		}
	}
	if lostLease.Load() {
		t.Error("the slow job lost its lease: heartbeats did not get through")
	}
	if n := queryInt(t, b.direct, "SELECT count(*) FROM effects WHERE job_id = $1", ids["in_tx"]); n != 1 {
		t.Errorf("in_tx: %d effects, want 1", n)
	}
}
