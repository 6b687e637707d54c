package skiplockprom

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/skiplock/skiplock/driver"
)

// The outcomes of a finished job, the values of the outcome label.
const (
	OutcomeDone      = "done"      // completed
	OutcomeRetried   = "retried"   // failed, and queued for another attempt
	OutcomeDead      = "dead"      // failed its last attempt
	OutcomeCancelled = "cancelled" // the handler returned driver.Cancel, or the payload could not be decoded
	OutcomeSnoozed   = "snoozed"   // back in its queue without spending an attempt (driver.Snooze, shutdown)
	OutcomeFenced    = "fenced"    // refused by the database: the worker no longer held the job (driver.EventLost)
)

// Outcome is the outcome label of a finished job's event (driver.Event.Outcome), "" for
// driver.EventStarted.
func Outcome(e *driver.Event) string { return e.Outcome() }

// DurationBuckets are the buckets of the job duration and wait time histograms, in
// seconds: 5 ms to about 20 minutes.
var DurationBuckets = prometheus.ExponentialBuckets(0.005, 4, 10)

// BatchBuckets are the buckets of the claim batch size histogram, in jobs.
var BatchBuckets = []float64{0, 1, 2, 5, 10, 20, 50, 100, 200, 500, 1000}

// Hook counts what a driver client's workers do, as Prometheus metrics. Set it as
// driver.Config.Hook (it implements driver.Hook and driver.ClaimHook) and register it
// (it is a prometheus.Collector). One Hook may serve several clients of a process.
type Hook struct {
	claimed       *prometheus.CounterVec   // skiplock_jobs_claimed_total{queue}
	finished      *prometheus.CounterVec   // skiplock_jobs_finished_total{queue,kind,outcome}
	duration      *prometheus.HistogramVec // skiplock_job_duration_seconds{queue,kind}
	wait          *prometheus.HistogramVec // skiplock_job_wait_seconds{queue,kind}
	batch         *prometheus.HistogramVec // skiplock_claim_batch_jobs{queue}
	wakeupsNotify *prometheus.CounterVec   // skiplock_wakeups_notify_total{queue}
	wakeupsPoll   *prometheus.CounterVec   // skiplock_wakeups_poll_total{queue}
}

var (
	_ driver.Hook          = (*Hook)(nil)
	_ driver.ClaimHook     = (*Hook)(nil)
	_ prometheus.Collector = (*Hook)(nil)
)

// NewHook makes a Hook with no series yet: a queue, kind or outcome appears at its first
// event.
func NewHook() *Hook {
	return &Hook{
		claimed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "skiplock_jobs_claimed_total",
			Help: "Jobs claimed by this process's fetch loops.",
		}, []string{"queue"}),
		finished: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "skiplock_jobs_finished_total",
			Help: "Job runs finished by this process, by outcome: done, retried, dead, cancelled, snoozed, fenced (refused by the database: the job was no longer held).",
		}, []string{"queue", "kind", "outcome"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "skiplock_job_duration_seconds",
			Help:    "How long handlers ran.",
			Buckets: DurationBuckets,
		}, []string{"queue", "kind"}),
		wait: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "skiplock_job_wait_seconds",
			Help:    "How long jobs waited to start: from their run_at to the start of the handler.",
			Buckets: DurationBuckets,
		}, []string{"queue", "kind"}),
		batch: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "skiplock_claim_batch_jobs",
			Help:    "Jobs per claim (jobs_claim call) of this process's fetch loops, empty claims included.",
			Buckets: BatchBuckets,
		}, []string{"queue"}),
		wakeupsNotify: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "skiplock_wakeups_notify_total",
			Help: "Claims made because a notification (jobs_ready) woke the fetch loop.",
		}, []string{"queue"}),
		wakeupsPoll: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "skiplock_wakeups_poll_total",
			Help: "Claims made because the poll timer woke the fetch loop.",
		}, []string{"queue"}),
	}
}

// HandleEvent counts a job's start (its wait) or its end (outcome and duration).
func (h *Hook) HandleEvent(e *driver.Event) {
	q, k := e.Job.Queue, e.Job.Kind
	if e.Kind == driver.EventStarted {
		h.wait.WithLabelValues(q, k).Observe(max(e.Wait.Seconds(), 0))
		return
	}
	outcome := Outcome(e)
	if outcome == "" {
		return
	}
	h.finished.WithLabelValues(q, k, outcome).Inc()
	h.duration.WithLabelValues(q, k).Observe(e.Duration.Seconds())
}

// HandleClaim counts a claim: its jobs, its batch size and what woke the fetch loop.
func (h *Hook) HandleClaim(e *driver.ClaimEvent) {
	h.claimed.WithLabelValues(e.Queue).Add(float64(e.Claimed))
	h.batch.WithLabelValues(e.Queue).Observe(float64(e.Claimed))
	switch e.Wake {
	case driver.WakeNotify:
		h.wakeupsNotify.WithLabelValues(e.Queue).Inc()
	case driver.WakePoll:
		h.wakeupsPoll.WithLabelValues(e.Queue).Inc()
	}
}

func (h *Hook) collectors() []prometheus.Collector {
	return []prometheus.Collector{h.claimed, h.finished, h.duration, h.wait, h.batch, h.wakeupsNotify, h.wakeupsPoll}
}

// Describe sends the descriptions of the Hook's metrics.
func (h *Hook) Describe(ch chan<- *prometheus.Desc) {
	for _, c := range h.collectors() {
		c.Describe(ch)
	}
}

// Collect sends the Hook's metrics.
func (h *Hook) Collect(ch chan<- prometheus.Metric) {
	for _, c := range h.collectors() {
		c.Collect(ch)
	}
}
