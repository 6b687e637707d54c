package admin

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// Pause calls jobs_pause: claims skip the queue until Resume; running jobs finish. It reports
// whether the queue was not paused before.
func (c *Client) Pause(ctx context.Context, queue string) (changed bool, err error) {
	return c.toggle(ctx, "jobs_pause", queue)
}

// Resume calls jobs_resume: workers claim from the queue again. It reports whether the queue
// was paused.
func (c *Client) Resume(ctx context.Context, queue string) (changed bool, err error) {
	return c.toggle(ctx, "jobs_resume", queue)
}

func (c *Client) toggle(ctx context.Context, function, queue string) (bool, error) {
	var changed bool
	if err := c.db.QueryRow(ctx, "SELECT "+c.fn(function)+"($1)", queue).Scan(&changed); err != nil {
		return false, fmt.Errorf("%s: %w", function, err)
	}
	return changed, nil
}

// SetConcurrency calls jobs_set_concurrency: at most maxRunning running jobs of the queue, and
// at most perKey per concurrency key; nil removes that limit.
func (c *Client) SetConcurrency(ctx context.Context, queue string, maxRunning, perKey *int32) error {
	if _, err := c.db.Exec(ctx, "SELECT "+c.fn("jobs_set_concurrency")+"($1, $2, $3)", queue, maxRunning, perKey); err != nil {
		return fmt.Errorf("jobs_set_concurrency: %w", err)
	}
	return nil
}

// SetRateLimit calls jobs_set_rate_limit: at most maxStarts starts per per, an interval in
// PostgreSQL's syntax ("1 minute", "00:01:00"); both nil removes the rate limit.
func (c *Client) SetRateLimit(ctx context.Context, queue string, maxStarts *int32, per *string) error {
	if _, err := c.db.Exec(ctx, "SELECT "+c.fn("jobs_set_rate_limit")+"($1, $2, $3::interval)", queue, maxStarts, per); err != nil {
		return fmt.Errorf("jobs_set_rate_limit: %w", err)
	}
	return nil
}

// QueueLimits are a queue's limits as jobs_queues holds them; nil when unset.
type QueueLimits struct {
	MaxRunning *int32
	PerKey     *int32
	MaxStarts  *int32
	// PerS is the rate limit's window in seconds.
	PerS *float64
}

// Limits reads the queue's limits from jobs_queues (all nil for a queue without settings).
// In a transaction that changes them, it reads what that transaction set.
func (c *Client) Limits(ctx context.Context, queue string) (QueueLimits, error) {
	var l QueueLimits
	err := c.db.QueryRow(ctx, `SELECT max_running, per_key, max_starts, extract(epoch FROM per)::float8
		FROM `+c.fn("jobs_queues")+` WHERE queue = $1`, queue).Scan(&l.MaxRunning, &l.PerKey, &l.MaxStarts, &l.PerS)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return l, fmt.Errorf("jobs_queues: %w", err)
	}
	return l, nil
}
