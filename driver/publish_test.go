package driver_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/skiplock/skiplock/driver"
	"github.com/skiplock/skiplock/tests/pgtest"
)

// TestPublish: Publish passes its options to jobs_publish, returns the ids in subscription
// order (an empty, non-nil slice without subscribers), joins the caller's transaction, and
// names bad fields.
func TestPublish(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	pgtest.MustExec(t, b.pool, `SELECT jobs_subscribe('orders', 'mail', 'receipt'), jobs_subscribe('orders', 'billing', 'charge'),
		jobs_subscribe('quiet', 'q', 'k')`)

	t.Run("OneJobPerSubscriptionWithTheOptions", func(t *testing.T) {
		t.Parallel()
		at := time.Date(2030, 1, 2, 3, 4, 5, 6000, time.UTC)
		ids, err := driver.Publish(ctx, b.pool, "orders", map[string]int{"order": 7}, &driver.PublishOpts{
			RunAt: at, Priority: -2, MaxAttempts: 3, ConcurrencyKey: "customer-1", Meta: map[string]string{"m": "v"},
		})
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, id := range ids {
			got = append(got, pgtest.QueryOne[string](t, b.pool, `SELECT queue || '/' || kind FROM jobs
				WHERE id = $1 AND payload = '{"order": 7}' AND run_at = $2 AND priority = -2 AND max_attempts = 3
				  AND concurrency_key = 'customer-1' AND meta = '{"m": "v"}'`, id, at))
		}
		if fmt.Sprint(got) != "[billing/charge mail/receipt]" {
			t.Fatalf("Publish made %v, want [billing/charge mail/receipt]", got)
		}
	})

	t.Run("DefaultsAndDelay", func(t *testing.T) {
		t.Parallel()
		ids, err := driver.Publish(ctx, b.pool, "quiet", nil, &driver.PublishOpts{Delay: time.Hour})
		if err != nil || len(ids) != 1 {
			t.Fatalf("Publish = %v, %v; want one id", ids, err)
		}
		if d := pgtest.QueryOne[time.Duration](t, b.pool, `SELECT run_at - created_at FROM jobs
			WHERE id = $1 AND payload = '{}' AND priority = 0 AND max_attempts = 5 AND concurrency_key IS NULL AND meta IS NULL`,
			ids[0]); d != time.Hour {
			t.Fatalf("run_at - created_at = %s, want 1h", d)
		}
	})

	t.Run("NoSubscribersReturnsEmptySlice", func(t *testing.T) {
		t.Parallel()
		ids, err := driver.Publish(ctx, b.pool, "nobody", nil, nil)
		if err != nil || ids == nil || len(ids) != 0 {
			t.Fatalf("Publish to a topic without subscribers = %#v, %v; want an empty non-nil slice", ids, err)
		}
	})

	t.Run("CommitsAndRollsBackWithTheCallersTransaction", func(t *testing.T) {
		t.Parallel()
		tx, err := b.pool.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		rolledBack, err := driver.Publish(ctx, tx, "orders", map[string]string{"tx": "rollback"}, nil)
		if err != nil || len(rolledBack) != 2 {
			t.Fatalf("Publish in a transaction = %v, %v", rolledBack, err)
		}
		if err := tx.Rollback(ctx); err != nil {
			t.Fatal(err)
		}
		if n := queryInt(t, b.pool, "SELECT count(*) FROM jobs WHERE id = ANY($1)", rolledBack); n != 0 {
			t.Fatalf("%d jobs of a rolled-back publish", n)
		}
	})

	t.Run("InvalidOptions", func(t *testing.T) {
		t.Parallel()
		tests := []struct {
			name  string
			topic string
			pay   any
			opts  *driver.PublishOpts
			field string
			sql   bool // reported by the SQL function
		}{
			{"EmptyTopic", "", nil, nil, "Topic", false},
			{"LongTopic", strings.Repeat("t", 201), nil, nil, "topic", true},
			{"NULInTopic", "t\x00", nil, nil, "Topic", false},
			{"RunAtAndDelay", "orders", nil, &driver.PublishOpts{RunAt: time.Now(), Delay: time.Second}, "PublishOpts.Delay", false},
			{"NegativeDelay", "orders", nil, &driver.PublishOpts{Delay: -time.Second}, "PublishOpts.Delay", false},
			{"NegativeMaxAttempts", "orders", nil, &driver.PublishOpts{MaxAttempts: -1}, "PublishOpts.MaxAttempts", false},
			{"UnencodablePayload", "orders", func() {}, nil, "Payload", false},
			{"LongConcurrencyKey", "orders", nil, &driver.PublishOpts{ConcurrencyKey: strings.Repeat("c", 201)}, "concurrency_key", true},
			{"InvalidUTF8ConcurrencyKey", "orders", nil, &driver.PublishOpts{ConcurrencyKey: "\xc3"}, "PublishOpts.ConcurrencyKey", false},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				t.Parallel()
				_, err := driver.Publish(ctx, b.pool, tt.topic, tt.pay, tt.opts)
				var ie *driver.InvalidError
				if !errors.As(err, &ie) || ie.Field != tt.field {
					t.Fatalf("Publish = %v, want an *InvalidError for %s", err, tt.field)
				}
				var pgErr *pgconn.PgError
				if errors.As(err, &pgErr) != tt.sql {
					t.Fatalf("error %v: from SQL = %v, want %v", err, !tt.sql, tt.sql)
				}
			})
		}
	})
}
