package admin

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// StateCount is one row of jobs_stats: how many jobs of a queue are in a state. The JSON
// names are the columns' (oldest_ready_age_s in seconds), as `skiplock stats -o json` prints them.
type StateCount struct {
	Queue string `json:"queue"`
	State string `json:"state"`
	Jobs  int64  `json:"jobs"`
	// OldestReadyAgeS is the age in seconds of the queue's oldest ready job, on its queued
	// row; nil elsewhere.
	OldestReadyAgeS *float64 `json:"oldest_ready_age_s"`
}

// Stats calls jobs_stats: exact counts per queue and state (it reads every row; Metrics is
// the cheap read).
func (c *Client) Stats(ctx context.Context) ([]StateCount, error) {
	rows, err := c.db.Query(ctx, "SELECT queue, state::text, jobs, extract(epoch FROM oldest_ready_age)::float8 FROM "+c.fn("jobs_stats")+"()")
	if err != nil {
		return nil, fmt.Errorf("jobs_stats: %w", err)
	}
	stats, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (StateCount, error) {
		var s StateCount
		err := r.Scan(&s.Queue, &s.State, &s.Jobs, &s.OldestReadyAgeS)
		return s, err
	})
	if err != nil {
		return nil, fmt.Errorf("jobs_stats: %w", err)
	}
	return stats, nil
}

// Maintenance is what one round of jobs_maintain did. The JSON names are the columns'.
type Maintenance struct {
	Ran             bool `json:"ran"`
	Requeued        int  `json:"requeued"`
	PrunedDone      int  `json:"pruned_done"`
	PrunedCancelled int  `json:"pruned_cancelled"`
	PrunedDead      int  `json:"pruned_dead"`
	More            bool `json:"more"`
}

// Maintain calls jobs_maintain(maxJobs): one round of housekeeping (requeue expired leases,
// prune finished jobs past their retention, at most maxJobs of each state).
func (c *Client) Maintain(ctx context.Context, maxJobs int) (Maintenance, error) {
	var m Maintenance
	err := c.db.QueryRow(ctx, "SELECT ran, requeued, pruned_done, pruned_cancelled, pruned_dead, more FROM "+c.fn("jobs_maintain")+"($1)",
		maxJobs).Scan(&m.Ran, &m.Requeued, &m.PrunedDone, &m.PrunedCancelled, &m.PrunedDead, &m.More)
	if err != nil {
		return m, fmt.Errorf("jobs_maintain: %w", err)
	}
	return m, nil
}
