package admin

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
)

// MetricType is a Prometheus metric type.
type MetricType string

const (
	Gauge   MetricType = "gauge"
	Counter MetricType = "counter"
)

// MetricDef is one metric family every /metrics endpoint of skiplock exposes: `skiplock ui`'s
// (MetricsHandler) and contrib/prometheus's Collector both build theirs from MetricDefs, so
// the names, help texts, types and labels cannot differ.
type MetricDef struct {
	Name string
	Help string
	Type MetricType
	// PerQueue: one sample per queue, labelled queue; else one sample, from the totals row.
	PerQueue bool
	// value returns the sample of a row, and false when the row has none.
	value func(m *QueueMetrics) (float64, bool)
}

// MetricDefs lists the metric families, in the order they are exposed.
var MetricDefs = []MetricDef{
	{"skiplock_queue_waiting_jobs", "Jobs waiting for a parent to finish (jobs_metrics().waiting).", Gauge, true,
		func(m *QueueMetrics) (float64, bool) { return float64(m.Waiting), true }},
	{"skiplock_queue_ready_jobs", "Queued jobs due now (jobs_metrics().ready).", Gauge, true,
		func(m *QueueMetrics) (float64, bool) { return float64(m.Ready), true }},
	{"skiplock_queue_scheduled_jobs", "Queued jobs due later (jobs_metrics().scheduled).", Gauge, true,
		func(m *QueueMetrics) (float64, bool) { return float64(m.Scheduled), true }},
	{"skiplock_queue_running_jobs", "Running jobs (jobs_metrics().running).", Gauge, true,
		func(m *QueueMetrics) (float64, bool) { return float64(m.Running), true }},
	{"skiplock_queue_expired_lease_jobs", "Running jobs whose lease has expired and which were not yet taken back (jobs_metrics().running_expired).", Gauge, true,
		func(m *QueueMetrics) (float64, bool) { return float64(m.RunningExpired), true }},
	{"skiplock_queue_dead_jobs", "Dead jobs, which exhausted their attempts (jobs_metrics().dead).", Gauge, true,
		func(m *QueueMetrics) (float64, bool) { return float64(m.Dead), true }},
	{"skiplock_queue_cancelled_jobs", "Cancelled jobs (jobs_metrics().cancelled).", Gauge, true,
		func(m *QueueMetrics) (float64, bool) { return float64(m.Cancelled), true }},
	{"skiplock_queue_done_jobs_estimate", "An estimate of the done jobs from the planner's statistics (jobs_metrics().done_estimate); absent before the first ANALYZE.", Gauge, true,
		func(m *QueueMetrics) (float64, bool) { return optional(m.DoneEstimate) }},
	{"skiplock_queue_oldest_ready_age_seconds", "Seconds since the run_at of the oldest ready job; 0 when none is ready (jobs_metrics().oldest_ready_age_s).", Gauge, true,
		func(m *QueueMetrics) (float64, bool) {
			if m.OldestReadyAgeS == nil {
				return 0, true
			}
			return *m.OldestReadyAgeS, true
		}},
	{"skiplock_queue_paused", "1 when the queue is paused (jobs_pause), else 0.", Gauge, true,
		func(m *QueueMetrics) (float64, bool) { return flag(m.Paused), true }},
	{"skiplock_queue_fair", "1 when claims share the queue round-robin between concurrency keys (jobs_set_concurrency's fair), else 0.", Gauge, true,
		func(m *QueueMetrics) (float64, bool) { return flag(m.Fair), true }},
	{"skiplock_queue_ordered", "1 when the jobs of each concurrency key run one at a time in enqueue order (jobs_set_concurrency's ordered), else 0.", Gauge, true,
		func(m *QueueMetrics) (float64, bool) { return flag(m.Ordered), true }},
	{"skiplock_queue_max_running_jobs", "The queue's concurrency limit (jobs_set_concurrency); absent when it has none.", Gauge, true,
		func(m *QueueMetrics) (float64, bool) { return optional(m.MaxRunning) }},
	{"skiplock_jobs_created_total", "Jobs ever created, from the jobs.id sequence (jobs_metrics().jobs_created_total): its rate is the enqueue rate.", Counter, false,
		func(m *QueueMetrics) (float64, bool) { return optional(m.JobsCreatedTotal) }},
}

func flag(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

func optional[T int32 | int64](v *T) (float64, bool) {
	if v == nil {
		return 0, false
	}
	return float64(*v), true
}

// Sample is one value of a metric family; Queue is "" for a family that is not PerQueue.
type Sample struct {
	Queue string
	Value float64
}

// MetricFamily is a MetricDef with its samples from one read of jobs_metrics.
type MetricFamily struct {
	MetricDef
	Samples []Sample
}

// MetricFamilies turns one read of jobs_metrics (Metrics) into the samples of every MetricDef,
// in the order of MetricDefs and of queues.
func MetricFamilies(queues []QueueMetrics, total QueueMetrics) []MetricFamily {
	fams := make([]MetricFamily, len(MetricDefs))
	for i, d := range MetricDefs {
		fams[i].MetricDef = d
		if !d.PerQueue {
			if v, ok := d.value(&total); ok {
				fams[i].Samples = []Sample{{Value: v}}
			}
			continue
		}
		for j := range queues {
			if v, ok := d.value(&queues[j]); ok {
				fams[i].Samples = append(fams[i].Samples, Sample{Queue: *queues[j].Queue, Value: v})
			}
		}
	}
	return fams
}

// WriteMetricsText writes fams in the Prometheus text exposition format (version 0.0.4).
func WriteMetricsText(w io.Writer, fams []MetricFamily) error {
	var b bytes.Buffer
	for _, f := range fams {
		fmt.Fprintf(&b, "# HELP %s %s\n# TYPE %s %s\n", f.Name, escapeHelp(f.Help), f.Name, f.Type)
		for _, s := range f.Samples {
			b.WriteString(f.Name)
			if f.PerQueue {
				b.WriteString(`{queue="` + escapeLabel(s.Queue) + `"}`)
			}
			b.WriteString(" " + strconv.FormatFloat(s.Value, 'g', -1, 64) + "\n")
		}
	}
	_, err := b.WriteTo(w)
	return err
}

// The text format's escapes: a help text escapes backslash and newline, a label value also
// the double quote. Everything else, any UTF-8 included, is written as it is.
var (
	helpEscaper  = strings.NewReplacer(`\`, `\\`, "\n", `\n`)
	labelEscaper = strings.NewReplacer(`\`, `\\`, "\n", `\n`, `"`, `\"`)
)

func escapeHelp(s string) string  { return helpEscaper.Replace(s) }
func escapeLabel(s string) string { return labelEscaper.Replace(s) }

// MetricsHandler serves MetricDefs in the Prometheus text format, from one read of
// jobs_metrics per scrape. It is `skiplock ui`'s /metrics; a service with the Prometheus
// client library registers contrib/prometheus's Collector instead, which exposes the same.
func (c *Client) MetricsHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		queues, total, err := c.Metrics(r.Context())
		if err != nil {
			http.Error(w, "failed to read jobs_metrics: "+err.Error(), http.StatusInternalServerError)
			return
		}
		var b bytes.Buffer
		_ = WriteMetricsText(&b, MetricFamilies(queues, total)) // a bytes.Buffer does not fail
		w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
		_, _ = b.WriteTo(w)
	})
}
