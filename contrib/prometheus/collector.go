package skiplockprom

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/skiplock/skiplock/admin"
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
// docs/sql-api.md): the metric families of admin.MetricDefs, which `skiplock ui`'s /metrics
// serves too, so both expose the same names, help texts, types and labels. Per queue, the
// ready, scheduled, running, expired, dead and cancelled jobs, the done estimate, the age of
// the oldest ready job, whether the queue is paused, fair and ordered, and its max_running
// limit; and the number of jobs ever created. A failed read is reported to the scrape as an
// error (promhttp answers 500 by default) and not cached.
type Collector struct {
	admin    *admin.Client
	cacheFor time.Duration
	timeout  time.Duration
	now      func() time.Time // time.Now; tests move it

	mu     sync.Mutex
	readAt time.Time            // when fams were read; guarded by mu
	fams   []admin.MetricFamily // the last read; guarded by mu
	reads  int                  // reads of jobs_metrics() so far, for tests; guarded by mu
}

// descs are the descriptions of admin.MetricDefs, by name.
var descs = func() map[string]*prometheus.Desc {
	m := make(map[string]*prometheus.Desc, len(admin.MetricDefs))
	for _, d := range admin.MetricDefs {
		var labels []string
		if d.PerQueue {
			labels = []string{"queue"}
		}
		m[d.Name] = prometheus.NewDesc(d.Name, d.Help, labels, nil)
	}
	return m
}()

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
	return &Collector{admin: admin.New(db, nil), cacheFor: o.CacheFor, timeout: o.Timeout, now: time.Now}, nil
}

// Describe sends the descriptions of every metric the Collector may report.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range admin.MetricDefs {
		ch <- descs[d.Name]
	}
}

// Collect reports the queues' state, reading jobs_metrics() when the last read is older
// than CacheFor. Concurrent scrapes wait for one read.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	fams, err := c.read()
	if err != nil {
		ch <- prometheus.NewInvalidMetric(descs[admin.MetricDefs[0].Name], err)
		return
	}
	for _, f := range fams {
		kind := prometheus.GaugeValue
		if f.Type == admin.Counter {
			kind = prometheus.CounterValue
		}
		for _, s := range f.Samples {
			if f.PerQueue {
				ch <- prometheus.MustNewConstMetric(descs[f.Name], kind, s.Value, s.Queue)
			} else {
				ch <- prometheus.MustNewConstMetric(descs[f.Name], kind, s.Value)
			}
		}
	}
}

// read returns the cached families, or reads jobs_metrics() when they are older than cacheFor.
func (c *Collector) read() ([]admin.MetricFamily, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.now()
	if !c.readAt.IsZero() && now.Sub(c.readAt) < c.cacheFor {
		return c.fams, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	c.reads++
	queues, total, err := c.admin.Metrics(ctx)
	if err != nil {
		return nil, fmt.Errorf("failed to read jobs_metrics(): %w", err)
	}
	c.fams, c.readAt = admin.MetricFamilies(queues, total), now
	return c.fams, nil
}
