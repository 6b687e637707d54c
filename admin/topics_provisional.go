package admin

// PROVISIONAL: stands in for the topics branch's Subscriptions until it is merged; delete on
// merge.

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

type Subscription struct {
	Topic     string    `json:"topic"`
	Queue     string    `json:"queue"`
	Kind      string    `json:"kind"`
	CreatedAt time.Time `json:"created_at"`
}

func (c *Client) Subscriptions(ctx context.Context, topic *string) ([]Subscription, error) {
	rows, err := c.db.Query(ctx, "SELECT topic, queue, kind, created_at FROM "+c.fn("jobs_subscriptions")+"($1)", topic)
	if err != nil {
		return nil, fmt.Errorf("jobs_subscriptions: %w", err)
	}
	subs, err := pgx.CollectRows(rows, pgx.RowToStructByPos[Subscription])
	if err != nil {
		return nil, fmt.Errorf("jobs_subscriptions: %w", err)
	}
	return subs, nil
}
