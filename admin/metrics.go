package admin

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// QueueMetrics is one row of jobs_metrics: a queue's counts and settings, or the totals row.
// The JSON names are the function's columns (per_s: per in seconds), as `skiplock queues -o
// json` prints them.
type QueueMetrics struct {
	// Queue is nil on the totals row.
	Queue          *string `json:"queue"`
	Ready          int64   `json:"ready"`
	Scheduled      int64   `json:"scheduled"`
	Running        int64   `json:"running"`
	RunningExpired int64   `json:"running_expired"`
	Dead           int64   `json:"dead"`
	Cancelled      int64   `json:"cancelled"`
	// Waiting counts the jobs waiting for a parent (depends_on) to finish.
	Waiting int64 `json:"waiting"`
	// DoneEstimate is the planner's estimate of done jobs; nil before the first ANALYZE.
	DoneEstimate *int64 `json:"done_estimate"`
	// OldestReadyAgeS is the age of the oldest ready job in seconds; nil when none is ready.
	OldestReadyAgeS *float64 `json:"oldest_ready_age_s"`
	// JobsCreatedTotal is set on the totals row only: jobs ever created (the id sequence).
	JobsCreatedTotal *int64 `json:"-"`
	Paused           bool   `json:"paused"`
	// MaxRunning, PerKey, MaxStarts and Per are the queue's limits (jobs_queues), nil when unset.
	MaxRunning *int32 `json:"max_running"`
	PerKey     *int32 `json:"per_key"`
	MaxStarts  *int32 `json:"max_starts"`
	// Per is the rate limit's window as PostgreSQL writes the interval ("00:01:00"), which
	// SetRateLimit takes back; PerS is the same in seconds.
	Per  *string  `json:"-"`
	PerS *float64 `json:"per_s"`
	// Fair, Ordered and RatePerKey are the queue's switches (jobs_queues): claims take ready
	// jobs round-robin across concurrency keys; jobs sharing a key run one at a time in
	// enqueue order; the rate limit counts starts per key. False on the totals row.
	Fair       bool `json:"fair"`
	Ordered    bool `json:"ordered"`
	RatePerKey bool `json:"rate_per_key"`
}

const metricsSQL = `SELECT queue, coalesce(ready, 0), coalesce(scheduled, 0), coalesce(running, 0),
    coalesce(running_expired, 0), coalesce(dead, 0), coalesce(cancelled, 0), done_estimate, oldest_ready_age_s,
    jobs_created_total, coalesce(paused, false), max_running, per_key, max_starts, per::text,
    extract(epoch FROM per)::float8, coalesce(waiting, 0), coalesce(fair, false), coalesce(ordered, false),
    coalesce(rate_per_key, false)
FROM %s()`

// Metrics calls jobs_metrics: the queues in name order, and the totals row (every queue's
// sums, with JobsCreatedTotal). It reads no finished row but the dead and cancelled ones, so
// it is cheap on any table.
func (c *Client) Metrics(ctx context.Context) (queues []QueueMetrics, total QueueMetrics, err error) {
	rows, err := c.db.Query(ctx, fmt.Sprintf(metricsSQL, c.fn("jobs_metrics")))
	if err != nil {
		return nil, total, fmt.Errorf("jobs_metrics: %w", err)
	}
	all, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (QueueMetrics, error) {
		var m QueueMetrics
		err := r.Scan(&m.Queue, &m.Ready, &m.Scheduled, &m.Running, &m.RunningExpired, &m.Dead, &m.Cancelled,
			&m.DoneEstimate, &m.OldestReadyAgeS, &m.JobsCreatedTotal, &m.Paused, &m.MaxRunning, &m.PerKey,
			&m.MaxStarts, &m.Per, &m.PerS, &m.Waiting, &m.Fair, &m.Ordered, &m.RatePerKey)
		return m, err
	})
	if err != nil {
		return nil, total, fmt.Errorf("jobs_metrics: %w", err)
	}
	for _, m := range all {
		if m.Queue == nil {
			total = m
		} else {
			queues = append(queues, m)
		}
	}
	return queues, total, nil
}
