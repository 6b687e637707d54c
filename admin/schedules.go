package admin

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// Schedule is one row of jobs_schedules. Times are in UTC. The JSON names are the columns',
// as `skiplock schedule list -o json` prints them.
type Schedule struct {
	Name        string          `json:"name"`
	Cron        string          `json:"cron"`
	Timezone    string          `json:"timezone"`
	Kind        string          `json:"kind"`
	Payload     json.RawMessage `json:"payload"`
	Queue       string          `json:"queue"`
	Priority    int32           `json:"priority"`
	MaxAttempts int32           `json:"max_attempts"`
	Enabled     bool            `json:"enabled"`
	// NextRunAt is nil when the expression has no run left in the supported range.
	NextRunAt *time.Time `json:"next_run_at"`
	// LastRunAt and LastJobID are the latest instant enqueued and the job it got.
	LastRunAt *time.Time `json:"last_run_at"`
	LastJobID *int64     `json:"last_job_id"`
}

// Schedules reads jobs_schedules by name, at most limit rows (0: all).
func (c *Client) Schedules(ctx context.Context, limit int) ([]Schedule, error) {
	var max *int
	if limit > 0 {
		max = &limit
	}
	rows, err := c.db.Query(ctx, `SELECT name, cron, timezone, kind, payload, queue, priority, max_attempts, enabled,
		next_run_at, last_run_at, last_job_id
		FROM `+c.fn("jobs_schedules")+` ORDER BY name LIMIT $1`, max)
	if err != nil {
		return nil, fmt.Errorf("jobs_schedules: %w", err)
	}
	schedules, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Schedule, error) {
		var s Schedule
		err := r.Scan(&s.Name, &s.Cron, &s.Timezone, &s.Kind, &s.Payload, &s.Queue, &s.Priority, &s.MaxAttempts,
			&s.Enabled, &s.NextRunAt, &s.LastRunAt, &s.LastJobID)
		s.NextRunAt, s.LastRunAt = utc(s.NextRunAt), utc(s.LastRunAt)
		return s, err
	})
	if err != nil {
		return nil, fmt.Errorf("jobs_schedules: %w", err)
	}
	return schedules, nil
}

// ScheduleOpts are the arguments of jobs_schedule besides the name, cron and kind. The zero
// value is not usable as it is: Payload, Queue, Timezone, Priority and MaxAttempts are passed
// as given (the skiplock command fills in the function's defaults: {}, default, UTC, 0, 5).
type ScheduleOpts struct {
	Payload     string // JSON
	Queue       string
	Timezone    string
	Priority    int
	MaxAttempts int
	Enabled     bool
}

// Schedule calls jobs_schedule: creates or replaces the schedule name, and returns its next
// run (nil when the expression has none left).
func (c *Client) Schedule(ctx context.Context, name, cron, kind string, opts ScheduleOpts) (*time.Time, error) {
	var next *time.Time
	err := c.db.QueryRow(ctx, `SELECT `+c.fn("jobs_schedule")+`(name => $1, cron => $2, kind => $3, payload => $4::jsonb,
		queue => $5, timezone => $6, priority => $7, max_attempts => $8, enabled => $9)`,
		name, cron, kind, opts.Payload, opts.Queue, opts.Timezone, opts.Priority, opts.MaxAttempts, opts.Enabled).Scan(&next)
	if err != nil {
		return nil, fmt.Errorf("jobs_schedule: %w", err)
	}
	return utc(next), nil
}

// Unschedule calls jobs_unschedule: removes the schedule, reporting whether it existed.
func (c *Client) Unschedule(ctx context.Context, name string) (bool, error) {
	var removed bool
	if err := c.db.QueryRow(ctx, "SELECT "+c.fn("jobs_unschedule")+"($1)", name).Scan(&removed); err != nil {
		return false, fmt.Errorf("jobs_unschedule: %w", err)
	}
	return removed, nil
}

// RunSchedule calls jobs_schedule_run: enqueues one job of the schedule now, leaving its next
// and last run alone, and returns the job's id. An unknown name is a 22023 naming "name".
func (c *Client) RunSchedule(ctx context.Context, name string) (int64, error) {
	var id int64
	if err := c.db.QueryRow(ctx, "SELECT "+c.fn("jobs_schedule_run")+"($1)", name).Scan(&id); err != nil {
		return 0, fmt.Errorf("jobs_schedule_run: %w", err)
	}
	return id, nil
}

// SetScheduleEnabled calls jobs_schedule_set_enabled, reporting whether it changed anything.
// An unknown name is a 22023 naming "name".
func (c *Client) SetScheduleEnabled(ctx context.Context, name string, enabled bool) (bool, error) {
	var changed bool
	if err := c.db.QueryRow(ctx, "SELECT "+c.fn("jobs_schedule_set_enabled")+"($1, $2)", name, enabled).Scan(&changed); err != nil {
		return false, fmt.Errorf("jobs_schedule_set_enabled: %w", err)
	}
	return changed, nil
}

// TickSchedules calls jobs_schedule_tick: enqueues every due run, and returns how many jobs it
// enqueued.
func (c *Client) TickSchedules(ctx context.Context) (int, error) {
	var n int
	if err := c.db.QueryRow(ctx, "SELECT "+c.fn("jobs_schedule_tick")+"()").Scan(&n); err != nil {
		return 0, fmt.Errorf("jobs_schedule_tick: %w", err)
	}
	return n, nil
}
