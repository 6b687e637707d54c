package admin_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/skiplock/skiplock/admin"
	"github.com/skiplock/skiplock/tests/pgtest"
)

// TestSubscriptions: Subscribe, Unsubscribe and Subscriptions say what they changed and read
// back the subscriptions by topic, queue and kind, times in UTC.
func TestSubscriptions(t *testing.T) {
	t.Parallel()
	db := pgtest.NewTestDB(t)
	a := admin.New(db.Conn, nil)
	ctx := t.Context()
	pgtest.MustExec(t, db.Conn, "SET TIME ZONE 'Asia/Kathmandu'")

	for _, s := range [][3]string{{"orders", "mail", "receipt"}, {"orders", "billing", "charge"}, {"refunds", "billing", "refund"}} {
		if added, err := a.Subscribe(ctx, s[0], s[1], s[2]); err != nil || !added {
			t.Fatalf("Subscribe%v = %v, %v; want true", s, added, err)
		}
	}
	if added, err := a.Subscribe(ctx, "orders", "mail", "receipt"); err != nil || added {
		t.Fatalf("second Subscribe = %v, %v; want false", added, err)
	}
	all, err := a.Subscriptions(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, s := range all {
		if s.CreatedAt.Location() != time.UTC || s.CreatedAt.IsZero() {
			t.Fatalf("created_at %v, want a time in UTC", s.CreatedAt)
		}
		got = append(got, s.Topic+"/"+s.Queue+"/"+s.Kind)
	}
	if want := "[orders/billing/charge orders/mail/receipt refunds/billing/refund]"; fmt.Sprint(got) != want {
		t.Fatalf("Subscriptions(\"\") = %v, want %s", got, want)
	}
	if removed, err := a.Unsubscribe(ctx, "orders", "mail", "receipt"); err != nil || !removed {
		t.Fatalf("Unsubscribe = %v, %v; want true", removed, err)
	}
	if removed, err := a.Unsubscribe(ctx, "orders", "mail", "receipt"); err != nil || removed {
		t.Fatalf("second Unsubscribe = %v, %v; want false", removed, err)
	}
	orders, err := a.Subscriptions(ctx, "orders")
	if err != nil || len(orders) != 1 || orders[0].Kind != "charge" {
		t.Fatalf("Subscriptions(orders) = %+v, %v; want the charge subscription", orders, err)
	}
	if _, err := a.Subscribe(ctx, "orders", "", "k"); err == nil {
		t.Fatal("Subscribe with an empty queue succeeded")
	} else {
		pgtest.RequirePgError(t, err, "22023")
	}
}
