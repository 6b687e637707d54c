package skiplockprom

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/skiplock/skiplock/driver"
	"github.com/skiplock/skiplock/tests/pgtest"
)

func TestCollectorReportsJobsMetrics(t *testing.T) {
	t.Parallel()
	db := pgtest.NewTestDB(t)
	ctx := context.Background()
	for range 3 {
		if _, err := driver.Enqueue(ctx, db.Conn, "mail", nil, &driver.EnqueueOpts{Queue: "email"}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := driver.Enqueue(ctx, db.Conn, "mail", nil, &driver.EnqueueOpts{Queue: "email", Delay: time.Hour}); err != nil {
		t.Fatal(err)
	}
	pgtest.MustExec(t, db.Conn, "SELECT jobs_pause('email')")
	pgtest.MustExec(t, db.Conn, "SELECT jobs_set_concurrency('email', 4, fair => true)")

	c, err := NewCollector(pgtest.NewPool(t, db.URL), nil)
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(c)
	text := exposition(t, reg)
	for _, want := range []string{
		`skiplock_queue_ready_jobs{queue="email"} 3`,
		`skiplock_queue_scheduled_jobs{queue="email"} 1`,
		`skiplock_queue_running_jobs{queue="email"} 0`,
		`skiplock_queue_dead_jobs{queue="email"} 0`,
		`skiplock_queue_paused{queue="email"} 1`,
		`skiplock_queue_fair{queue="email"} 1`,
		`skiplock_queue_ordered{queue="email"} 0`,
		`skiplock_queue_max_running_jobs{queue="email"} 4`,
		`skiplock_jobs_created_total 4`,
	} {
		if !strings.Contains(text, want+"\n") {
			t.Errorf("the exposition lacks %q:\n%s", want, text)
		}
	}
	if !strings.Contains(text, `skiplock_queue_oldest_ready_age_seconds{queue="email"} `) {
		t.Errorf("the exposition lacks the oldest ready age:\n%s", text)
	}
}

func TestCollectorReadsOncePerCacheWindow(t *testing.T) {
	t.Parallel()
	db := pgtest.NewTestDB(t)
	ctx := context.Background()
	c, err := NewCollector(pgtest.NewPool(t, db.URL), nil)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	c.now = func() time.Time { return now }
	reg := prometheus.NewRegistry()
	reg.MustRegister(c)

	if _, err := driver.Enqueue(ctx, db.Conn, "mail", nil, nil); err != nil {
		t.Fatal(err)
	}
	first := exposition(t, reg)
	if _, err := driver.Enqueue(ctx, db.Conn, "mail", nil, nil); err != nil {
		t.Fatal(err)
	}
	now = now.Add(CacheForDefault - time.Millisecond)
	second := exposition(t, reg)
	if c.reads != 1 || second != first {
		t.Fatalf("a scrape within 5 s read jobs_metrics() again (reads %d):\n%s\nthen\n%s", c.reads, first, second)
	}
	now = now.Add(time.Millisecond)
	third := exposition(t, reg)
	if c.reads != 2 || !strings.Contains(third, `skiplock_queue_ready_jobs{queue="default"} 2`) {
		t.Fatalf("a scrape 5 s later did not read again (reads %d):\n%s", c.reads, third)
	}
}

func TestCollectorRejectsBadOptions(t *testing.T) {
	t.Parallel()
	pool := pgtest.NewPool(t, pgtest.NewDatabase(t))
	for _, tc := range []struct {
		opts  CollectorOpts
		field string
	}{
		{CollectorOpts{CacheFor: time.Second}, "CollectorOpts.CacheFor"},
		{CollectorOpts{Timeout: -time.Second}, "CollectorOpts.Timeout"},
	} {
		_, err := NewCollector(pool, &tc.opts)
		var inv *driver.InvalidError
		if !errors.As(err, &inv) || inv.Field != tc.field {
			t.Errorf("NewCollector(%+v) = %v, want an *InvalidError naming %s", tc.opts, err, tc.field)
		}
	}
	if _, err := NewCollector(nil, nil); err == nil {
		t.Error("NewCollector(nil) succeeded")
	}
}

func TestCollectorFailsTheScrapeWhenTheReadFails(t *testing.T) {
	t.Parallel()
	c, err := NewCollector(pgtest.NewPool(t, pgtest.NewEmptyDatabase(t)), nil) // no skiplock installed
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(c)
	for range 2 { // a failed read is not cached
		if _, err := reg.Gather(); err == nil || !strings.Contains(err.Error(), "failed to read jobs_metrics()") {
			t.Fatalf("Gather = %v, want the read's error", err)
		}
	}
	if c.reads != 2 {
		t.Fatalf("reads = %d, want 2", c.reads)
	}
}
