package driver_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/skiplock/skiplock/driver"
)

type sqlCounter struct{ claims, nextStarts atomic.Int64 }

func (c *sqlCounter) TraceQueryStart(ctx context.Context, _ *pgx.Conn, data pgx.TraceQueryStartData) context.Context {
	if strings.Contains(data.SQL, "jobs_claim(") {
		c.claims.Add(1)
	}
	if strings.Contains(data.SQL, "jobs_next_start(") {
		c.nextStarts.Add(1)
	}
	return ctx
}

func (c *sqlCounter) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// TestQueueWithoutRateLimitSkipsNextStart: a queue with no settings at all should ask
// jobs_next_start at most once per poll interval (fetch_loop.go rateWait), but
// nextStartSQL's greatest(NULL - clock_timestamp(), '0') is never NULL, so the loop
// believes every queue is rate limited and asks after every short claim.
func TestQueueWithoutRateLimitSkipsNextStart(t *testing.T) {
	t.Parallel()
	b := setup(t)
	cfg0, err := pgxpool.ParseConfig(b.url)
	if err != nil {
		t.Fatal(err)
	}
	counter := &sqlCounter{}
	cfg0.ConnConfig.Tracer = counter
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)

	hs := driver.NewHandlers()
	driver.AddHandler(hs, "noop", func(ctx context.Context, job *driver.Job[struct{}]) error { return nil }, nil)
	cfg := baseConfig(b, hs, map[string]driver.QueueConfig{"default": {Slots: 10}})
	cfg.PollInterval = 10 * time.Second
	startClient(t, pool, cfg)
	waitUntil(t, 10*time.Second, "the client listening", func() bool {
		return queryInt(t, b.pool, "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND query = 'LISTEN jobs_ready'") == 1
	})
	time.Sleep(100 * time.Millisecond)
	claims0, ns0 := counter.claims.Load(), counter.nextStarts.Load()
	for range 20 {
		mustEnqueue(t, b.pool, "noop", nil, nil)
		time.Sleep(50 * time.Millisecond)
	}
	claims, ns := counter.claims.Load()-claims0, counter.nextStarts.Load()-ns0
	t.Logf("queue without settings, 1s: %d claims, %d jobs_next_start calls (poll interval 10s)", claims, ns)
	if ns > 1 {
		t.Errorf("%d jobs_next_start calls in 1s for a queue without a rate limit; want at most 1 per poll interval", ns)
	}
}
