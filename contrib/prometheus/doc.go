// Package skiplockprom exports skiplock's metrics to Prometheus.
//
// It has two parts, registered on the same registry:
//
//   - a [Collector] of the queues' state, which reads the SQL function jobs_metrics() at
//     most once per CacheFor (5 s by default) whatever the number of scrapes, so every
//     replica of a service can expose it without loading the database; and
//   - a [Hook] for a driver client (driver.Config.Hook), which counts what this process's
//     workers do: jobs claimed, jobs finished by outcome, job durations, wait times, claim
//     batch sizes and what woke the fetch loops.
//
// Wiring both:
//
//	hook := skiplockprom.NewHook()
//	collector, err := skiplockprom.NewCollector(pool, nil)
//	if err != nil { ... }
//	prometheus.MustRegister(hook, collector)
//	client, err := driver.NewClient(pool, &driver.Config{..., Hook: hook})
//	http.Handle("/metrics", promhttp.Handler())
//
// # Names
//
// Every metric starts with skiplock_, durations are in seconds, counters end in _total,
// and the only labels are queue, kind and outcome, whose values are bounded by the
// queues and handlers a deployment has. The outcome of a finished job is one of done,
// retried, dead, cancelled, snoozed and fenced: fenced is an outcome the database refused
// because the worker no longer held the job (its lease expired and it was taken back, or
// it was cancelled meanwhile: driver.EventLost). docs/operations.md lists every metric and
// the alerting rules to set on them.
//
// The package lives in a Go module of its own so that the Prometheus client stays out
// of skiplock's go.mod.
package skiplockprom
