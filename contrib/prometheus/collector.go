package skiplockprom

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/skiplock/skiplock/driver"
)

const (
	// CacheForDefault is how long a Collector reuses a read of jobs_metrics().
	CacheForDefault = 5 * time.Second
	// CacheForMin is the shortest CacheFor allowed, so that many scrapers (one per replica,
	// several Prometheus servers) add up to at most one read per replica every 5 s.
	CacheForMin = 5 * time.Second
	// TimeoutDefault bounds one read of jobs_metrics().
	TimeoutDefault = 5 * time.Second
)

// metricsSQL reads the per-queue gauges and, on the row with queue NULL, the number of jobs
// ever created.
const metricsSQL = `SELECT queue, ready, scheduled, running, running_expired, dead, cancelled,
    done_estimate, oldest_ready_age_s, jobs_created_total, paused, max_running
FROM jobs_metrics()`

// CollectorOpts configures a Collector. A nil *CollectorOpts means every default.
type CollectorOpts struct {
	// CacheFor is how long one read of jobs_metrics() serves scrapes: a scrape within
	// CacheFor of the last read reuses it. At least CacheForMin. Defaults to
	// CacheForDefault (5 s).
	CacheFor time.Duration

	// Timeout bounds one read of jobs_metrics(). Defaults to TimeoutDefault (5 s).
	Timeout time.Duration
}

// Collector is a prometheus.Collector of the queues' state, read from jobs_metrics() (see
// docs/sql-api.md): per queue, the ready, scheduled, running, expired, dead and cancelled
// jobs, the done estimate, the age of the oldest ready job, whether the queue is paused
// and its max_running limit; and the number of jobs ever created. A failed read is
// reported to the scrape as an error (promhttp answers 500 by default) and not cached.
type Collector struct {
	db       driver.Executor
	cacheFor time.Duration
	timeout  time.Duration
	now      func() time.Time // time.Now; tests move it

	mu     sync.Mutex
	readAt time.Time      // when rows were read; guarded by mu
	rows   []queueMetrics // the last read; guarded by mu
	reads  int            // reads of jobs_metrics() so far, for tests; guarded by mu
}

// queueMetrics is one row of jobs_metrics().
type queueMetrics struct {
	queue                                               *string
	ready, scheduled, running, expired, dead, cancelled int64
	doneEstimate, created                               *int64
	oldestReadyAge                                      *float64
	paused                                              *bool
	maxRunning                                          *int32
}

var (
	queueLabels   = []string{"queue"}
	descReady     = prometheus.NewDesc("skiplock_queue_ready_jobs", "Queued jobs due now (jobs_metrics().ready).", queueLabels, nil)
	descScheduled = prometheus.NewDesc("skiplock_queue_scheduled_jobs", "Queued jobs due later (jobs_metrics().scheduled).", queueLabels, nil)
	descRunning   = prometheus.NewDesc("skiplock_queue_running_jobs", "Running jobs (jobs_metrics().running).", queueLabels, nil)
	descExpired   = prometheus.NewDesc("skiplock_queue_expired_lease_jobs",
		"Running jobs whose lease has expired and which were not yet taken back (jobs_metrics().running_expired).", queueLabels, nil)
	descDead      = prometheus.NewDesc("skiplock_queue_dead_jobs", "Dead jobs, which exhausted their attempts (jobs_metrics().dead).", queueLabels, nil)
	descCancelled = prometheus.NewDesc("skiplock_queue_cancelled_jobs", "Cancelled jobs (jobs_metrics().cancelled).", queueLabels, nil)
	descDone      = prometheus.NewDesc("skiplock_queue_done_jobs_estimate",
		"An estimate of the done jobs from the planner's statistics (jobs_metrics().done_estimate); absent before the first ANALYZE.", queueLabels, nil)
	descOldest = prometheus.NewDesc("skiplock_queue_oldest_ready_age_seconds",
		"Seconds since the run_at of the oldest ready job; 0 when none is ready (jobs_metrics().oldest_ready_age_s).", queueLabels, nil)
	descPaused     = prometheus.NewDesc("skiplock_queue_paused", "1 when the queue is paused (jobs_pause), else 0.", queueLabels, nil)
	descMaxRunning = prometheus.NewDesc("skiplock_queue_max_running_jobs",
		"The queue's concurrency limit (jobs_set_concurrency); absent when it has none.", queueLabels, nil)
	descCreated = prometheus.NewDesc("skiplock_jobs_created_total",
		"Jobs ever created, from the jobs.id sequence (jobs_metrics().jobs_created_total): its rate is the enqueue rate.", nil, nil)
)

// NewCollector makes a Collector reading jobs_metrics() through db (a pool, typically;
// its role needs EXECUTE on jobs_metrics, which jobs_worker and jobs_admin have). It does
// no I/O. An *driver.InvalidError names a bad option.
func NewCollector(db driver.Executor, opts *CollectorOpts) (*Collector, error) {
	if db == nil {
		return nil, &driver.InvalidError{Field: "db", Problem: "must not be nil"}
	}
	var o CollectorOpts
	if opts != nil {
		o = *opts
	}
	if o.CacheFor == 0 {
		o.CacheFor = CacheForDefault
	}
	if o.CacheFor < CacheForMin {
		return nil, &driver.InvalidError{Field: "CollectorOpts.CacheFor",
			Problem: fmt.Sprintf("must be at least %s, got %s", CacheForMin, o.CacheFor)}
	}
	if o.Timeout == 0 {
		o.Timeout = TimeoutDefault
	}
	if o.Timeout < 0 {
		return nil, &driver.InvalidError{Field: "CollectorOpts.Timeout", Problem: fmt.Sprintf("must not be negative, got %s", o.Timeout)}
	}
	return &Collector{db: db, cacheFor: o.CacheFor, timeout: o.Timeout, now: time.Now}, nil
}

// Describe sends the descriptions of every metric the Collector may report.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descReady, descScheduled, descRunning, descExpired, descDead, descCancelled,
		descDone, descOldest, descPaused, descMaxRunning, descCreated} {
		ch <- d
	}
}

// Collect reports the queues' state, reading jobs_metrics() when the last read is older
// than CacheFor. Concurrent scrapes wait for one read.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	rows, err := c.read()
	if err != nil {
		ch <- prometheus.NewInvalidMetric(descReady, err)
		return
	}
	gauge := func(d *prometheus.Desc, v float64, queue string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, queue)
	}
	for _, r := range rows {
		if r.queue == nil {
			if r.created != nil {
				ch <- prometheus.MustNewConstMetric(descCreated, prometheus.CounterValue, float64(*r.created))
			}
			continue
		}
		q := *r.queue
		gauge(descReady, float64(r.ready), q)
		gauge(descScheduled, float64(r.scheduled), q)
		gauge(descRunning, float64(r.running), q)
		gauge(descExpired, float64(r.expired), q)
		gauge(descDead, float64(r.dead), q)
		gauge(descCancelled, float64(r.cancelled), q)
		if r.doneEstimate != nil {
			gauge(descDone, float64(*r.doneEstimate), q)
		}
		age := 0.0
		if r.oldestReadyAge != nil {
			age = *r.oldestReadyAge
		}
		gauge(descOldest, age, q)
		paused := 0.0
		if r.paused != nil && *r.paused {
			paused = 1
		}
		gauge(descPaused, paused, q)
		if r.maxRunning != nil {
			gauge(descMaxRunning, float64(*r.maxRunning), q)
		}
	}
}

// read returns the cached rows, or reads jobs_metrics() when they are older than cacheFor.
func (c *Collector) read() ([]queueMetrics, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.now()
	if !c.readAt.IsZero() && now.Sub(c.readAt) < c.cacheFor {
		return c.rows, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	c.reads++
	rows, err := c.db.Query(ctx, metricsSQL)
	if err != nil {
		return nil, fmt.Errorf("failed to read jobs_metrics(): %w", err)
	}
	defer rows.Close()
	var out []queueMetrics
	for rows.Next() {
		var r queueMetrics
		var ready, scheduled, running, expired, dead, cancelled *int64
		if err := rows.Scan(&r.queue, &ready, &scheduled, &running, &expired, &dead, &cancelled,
			&r.doneEstimate, &r.oldestReadyAge, &r.created, &r.paused, &r.maxRunning); err != nil {
			return nil, fmt.Errorf("failed to read jobs_metrics(): %w", err)
		}
		r.ready, r.scheduled, r.running = deref(ready), deref(scheduled), deref(running)
		r.expired, r.dead, r.cancelled = deref(expired), deref(dead), deref(cancelled)
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("failed to read jobs_metrics(): %w", err)
	}
	c.rows, c.readAt = out, now
	return out, nil
}

func deref(p *int64) int64 {
	if p == nil {
		return 0
	}
	return *p
}
