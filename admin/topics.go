package admin

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// Subscription is one row of jobs_subscriptions: jobs_publish of Topic adds a job of Kind to
// Queue. CreatedAt is in UTC. The JSON names are the columns', as `skiplock topic list -o
// json` prints them.
type Subscription struct {
	Topic     string    `json:"topic"`
	Queue     string    `json:"queue"`
	Kind      string    `json:"kind"`
	CreatedAt time.Time `json:"created_at"`
}

// Subscribe calls jobs_subscribe: each later publish of topic adds a job of kind to queue. It
// reports whether the subscription is new (false: it existed, nothing changed).
func (c *Client) Subscribe(ctx context.Context, topic, queue, kind string) (bool, error) {
	return c.subscription(ctx, "jobs_subscribe", topic, queue, kind)
}

// Unsubscribe calls jobs_unsubscribe: later publishes of topic add no job for queue and
// kind; jobs already published stay. It reports whether there was such a subscription.
func (c *Client) Unsubscribe(ctx context.Context, topic, queue, kind string) (bool, error) {
	return c.subscription(ctx, "jobs_unsubscribe", topic, queue, kind)
}

func (c *Client) subscription(ctx context.Context, function, topic, queue, kind string) (bool, error) {
	var changed bool
	if err := c.db.QueryRow(ctx, "SELECT "+c.fn(function)+"($1, $2, $3)", topic, queue, kind).Scan(&changed); err != nil {
		return false, fmt.Errorf("%s: %w", function, err)
	}
	return changed, nil
}

// Subscriptions calls jobs_subscriptions: the subscriptions of topic, or of every topic when
// topic is "", by topic, queue and kind (the order of the ids jobs_publish returns).
func (c *Client) Subscriptions(ctx context.Context, topic string) ([]Subscription, error) {
	rows, err := c.db.Query(ctx, "SELECT topic, queue, kind, created_at FROM "+c.fn("jobs_subscriptions")+"($1)",
		nullIfEmpty(topic))
	if err != nil {
		return nil, fmt.Errorf("jobs_subscriptions: %w", err)
	}
	subs, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Subscription, error) {
		var s Subscription
		err := r.Scan(&s.Topic, &s.Queue, &s.Kind, &s.CreatedAt)
		s.CreatedAt = s.CreatedAt.UTC()
		return s, err
	})
	if err != nil {
		return nil, fmt.Errorf("jobs_subscriptions: %w", err)
	}
	return subs, nil
}
