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

// ConcurrencyOpts are jobs_set_concurrency's optional arguments. The zero value leaves the
// queue's fairness and ordering as they are.
type ConcurrencyOpts struct {
	// Fair, when not nil, turns fair sharing on or off: claims of the queue take ready jobs
	// round-robin across concurrency keys, so one key with many jobs cannot starve the others.
	// Defaults to nil: the queue's setting is left unchanged (jobs_set_concurrency's NULL).
	Fair *bool
	// Ordered, when not nil, turns ordered keys on or off: jobs sharing a concurrency key run
	// one at a time in enqueue order, a job waiting for its retry holding back the later ones.
	// Defaults to nil: the queue's setting is left unchanged.
	Ordered *bool
}

// SetConcurrency calls jobs_set_concurrency: at most maxRunning running jobs of the queue, and
// at most perKey per concurrency key; nil removes that limit. The optional opts (at most one)
// turn fair sharing and ordered keys on or off; without them, both stay as they are.
func (c *Client) SetConcurrency(ctx context.Context, queue string, maxRunning, perKey *int32, opts ...ConcurrencyOpts) error {
	var o ConcurrencyOpts
	switch len(opts) {
	case 0:
	case 1:
		o = opts[0]
	default:
		return fmt.Errorf("jobs_set_concurrency: %d ConcurrencyOpts given, want at most one", len(opts))
	}
	sql, args := "SELECT "+c.fn("jobs_set_concurrency")+"($1, $2, $3)", []any{queue, maxRunning, perKey}
	if o.Fair != nil || o.Ordered != nil {
		// Only then the new arguments: the three-argument call works on a 0.1.0 schema too.
		sql, args = "SELECT "+c.fn("jobs_set_concurrency")+"($1, $2, $3, fair => $4, ordered => $5)",
			append(args, o.Fair, o.Ordered)
	}
	if _, err := c.db.Exec(ctx, sql, args...); err != nil {
		return fmt.Errorf("jobs_set_concurrency: %w", err)
	}
	return nil
}

// RateLimitOpts are jobs_set_rate_limit's optional arguments. The zero value is a queue-wide
// window.
type RateLimitOpts struct {
	// PerKey makes the window count starts per concurrency key: at most maxStarts jobs of each
	// key start per window (jobs without a key share one budget). Defaults to false: the window
	// counts every start of the queue. Like the limit itself, it is set anew by each call.
	PerKey bool
}

// SetRateLimit calls jobs_set_rate_limit: at most maxStarts starts per per, an interval in
// PostgreSQL's syntax ("1 minute", "00:01:00"); both nil removes the rate limit. The optional
// opts (at most one) make the window count per concurrency key.
func (c *Client) SetRateLimit(ctx context.Context, queue string, maxStarts *int32, per *string, opts ...RateLimitOpts) error {
	var o RateLimitOpts
	switch len(opts) {
	case 0:
	case 1:
		o = opts[0]
	default:
		return fmt.Errorf("jobs_set_rate_limit: %d RateLimitOpts given, want at most one", len(opts))
	}
	sql, args := "SELECT "+c.fn("jobs_set_rate_limit")+"($1, $2, $3::interval)", []any{queue, maxStarts, per}
	if o.PerKey {
		sql, args = "SELECT "+c.fn("jobs_set_rate_limit")+"($1, $2, $3::interval, per_key => $4)", append(args, true)
	}
	if _, err := c.db.Exec(ctx, sql, args...); err != nil {
		return fmt.Errorf("jobs_set_rate_limit: %w", err)
	}
	return nil
}

// QueueLimits are a queue's flow-control settings as jobs_queues holds them: the limits nil
// when unset, the switches false.
type QueueLimits struct {
	MaxRunning *int32
	PerKey     *int32
	MaxStarts  *int32
	// Per is the rate limit's window as PostgreSQL writes the interval ("00:01:00"), which
	// SetRateLimit takes back; PerS is the same in seconds.
	Per  *string
	PerS *float64
	// Fair: claims take ready jobs round-robin across concurrency keys.
	Fair bool
	// Ordered: jobs sharing a concurrency key run one at a time, in enqueue order.
	Ordered bool
	// RatePerKey: the rate limit counts starts per concurrency key.
	RatePerKey bool
}

// Limits reads the queue's settings from jobs_queues (nil and false for a queue without
// settings). In a transaction that changes them, it reads what that transaction set.
func (c *Client) Limits(ctx context.Context, queue string) (QueueLimits, error) {
	var l QueueLimits
	err := c.db.QueryRow(ctx, `SELECT max_running, per_key, max_starts, per::text, extract(epoch FROM per)::float8,
			coalesce(fair, false), coalesce(ordered, false), coalesce(rate_per_key, false)
		FROM `+c.fn("jobs_queues")+` WHERE queue = $1`, queue).Scan(&l.MaxRunning, &l.PerKey, &l.MaxStarts, &l.Per, &l.PerS,
		&l.Fair, &l.Ordered, &l.RatePerKey)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return l, fmt.Errorf("jobs_queues: %w", err)
	}
	return l, nil
}
