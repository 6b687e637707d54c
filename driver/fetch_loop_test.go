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
	"github.com/skiplock/skiplock/tests/pgtest"
)

// claimCounter is a pgx tracer counting the jobs_claim calls made through a pool.
type claimCounter struct{ n atomic.Int64 }

func (c *claimCounter) TraceQueryStart(ctx context.Context, _ *pgx.Conn, data pgx.TraceQueryStartData) context.Context {
	if strings.Contains(data.SQL, "jobs_claim(") {
		c.n.Add(1)
	}
	return ctx
}

func (c *claimCounter) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

func countingPool(t *testing.T, url string) (*pgxpool.Pool, *claimCounter) {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	counter := &claimCounter{}
	cfg.ConnConfig.Tracer = counter
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool, counter
}

// A storm of notifications makes few claims: wake-ups coalesce and claims of a queue are at
// least FetchCooldown apart.
func TestNotificationStormCoalesces(t *testing.T) {
	t.Parallel()
	b := setup(t)
	pool, claims := countingPool(t, b.url)
	hs := driver.NewHandlers()
	driver.AddHandler(hs, "noop", func(ctx context.Context, job *driver.Job[struct{}]) error { return nil }, nil)
	cfg := baseConfig(b, hs, map[string]driver.QueueConfig{"default": {}})
	cfg.PollInterval = 10 * time.Second
	cfg.FetchCooldown = 25 * time.Millisecond
	startClient(t, pool, cfg)
	waitUntil(t, 10*time.Second, "the client listening", func() bool {
		return queryInt(t, b.pool, "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND query = 'LISTEN jobs_ready'") == 1
	})
	time.Sleep(50 * time.Millisecond) // past the cooldown of the start-up claim

	notifier := pgtest.NewConn(t, b.url)
	before := claims.n.Load()
	began := time.Now()
	const storm = 300
	for range storm {
		if _, err := notifier.Exec(context.Background(), "SELECT pg_notify('jobs_ready', 'default')"); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(100 * time.Millisecond) // let the last wake-ups arrive
	made := claims.n.Load() - before
	elapsed := time.Since(began)
	limit := int64(elapsed/cfg.FetchCooldown) + 2
	t.Logf("%d notifications made %d claims in %s (at most %d allowed)", storm, made, elapsed.Round(time.Millisecond), limit)
	if made == 0 || made > limit {
		t.Fatalf("%d claims for %d notifications in %s, want between 1 and %d", made, storm, elapsed, limit)
	}
}

// A backlog drains at the pace jobs finish, not at the poll interval: when a claim fills every
// slot it asked for, the next claim follows as soon as slots free up.
func TestBacklogDrainsWithoutPolling(t *testing.T) {
	t.Parallel()
	b := setup(t)
	const n = 60
	params := make([]driver.EnqueueParams, n)
	for i := range params {
		params[i] = driver.EnqueueParams{Kind: "noop"}
	}
	if _, err := driver.EnqueueMany(context.Background(), b.pool, params); err != nil {
		t.Fatal(err)
	}
	var done atomic.Int32
	hs := driver.NewHandlers()
	driver.AddHandler(hs, "noop", func(ctx context.Context, job *driver.Job[struct{}]) error {
		done.Add(1)
		return nil
	}, nil)
	cfg := baseConfig(b, hs, map[string]driver.QueueConfig{"default": {Slots: 2}})
	cfg.PollInterval = 10 * time.Second // one poll tick would blow the deadline below
	startClient(t, b.pool, cfg)
	waitUntil(t, 5*time.Second, "the backlog drained", func() bool { return done.Load() == n })
}
