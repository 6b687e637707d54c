package admin_test

import (
	"testing"

	"github.com/skiplock/skiplock/admin"
	"github.com/skiplock/skiplock/tests/pgtest"
)

// TestQueueSettings: SetConcurrency and SetRateLimit pass fair, ordered and the per-key rate
// (nil options leave fair and ordered as they are, like the SQL's NULL), and Limits and
// Metrics read them back.
func TestQueueSettings(t *testing.T) {
	t.Parallel()
	db := pgtest.NewTestDB(t)
	a := admin.New(db.Conn, nil)
	ctx := t.Context()
	limits := func() admin.QueueLimits {
		t.Helper()
		l, err := a.Limits(ctx, "tenants")
		if err != nil {
			t.Fatal(err)
		}
		return l
	}

	if err := a.SetConcurrency(ctx, "tenants", nil, new(int32(2)), admin.ConcurrencyOpts{Fair: new(true), Ordered: new(true)}); err != nil {
		t.Fatal(err)
	}
	if err := a.SetRateLimit(ctx, "tenants", new(int32(10)), new("1 second"), admin.RateLimitOpts{PerKey: true}); err != nil {
		t.Fatal(err)
	}
	if l := limits(); l.MaxRunning != nil || *l.PerKey != 2 || !l.Fair || !l.Ordered || *l.MaxStarts != 10 || *l.Per != "00:00:01" ||
		*l.PerS != 1 || !l.RatePerKey {
		t.Fatalf("Limits = %+v, want 2 per key, fair, ordered, 10 starts per second per key", l)
	}
	queues, total, err := a.Metrics(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(queues) != 1 || !queues[0].Fair || !queues[0].Ordered || !queues[0].RatePerKey || total.Fair || total.Ordered || total.RatePerKey {
		t.Fatalf("Metrics = %+v, total %+v; want tenants fair, ordered, rate per key, the totals row none", queues, total)
	}

	// Without options, fair and ordered stay; the rate is set anew, per queue.
	if err := a.SetConcurrency(ctx, "tenants", new(int32(5)), nil); err != nil {
		t.Fatal(err)
	}
	if err := a.SetRateLimit(ctx, "tenants", new(int32(20)), new("1 minute")); err != nil {
		t.Fatal(err)
	}
	if l := limits(); *l.MaxRunning != 5 || l.PerKey != nil || !l.Fair || !l.Ordered || *l.MaxStarts != 20 || l.RatePerKey {
		t.Fatalf("Limits = %+v after calls without options, want max 5 running, fair and ordered kept, 20 per queue", l)
	}
	// One switch given: the other stays.
	if err := a.SetConcurrency(ctx, "tenants", nil, nil, admin.ConcurrencyOpts{Fair: new(false)}); err != nil {
		t.Fatal(err)
	}
	if l := limits(); l.Fair || !l.Ordered {
		t.Fatalf("Limits = %+v after Fair false, want ordered only", l)
	}
	if err := a.SetConcurrency(ctx, "tenants", nil, nil, admin.ConcurrencyOpts{}, admin.ConcurrencyOpts{}); err == nil {
		t.Fatal("SetConcurrency took two ConcurrencyOpts")
	}
}
