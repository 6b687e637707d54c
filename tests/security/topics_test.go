package security_test

import (
	"testing"

	"github.com/skiplock/skiplock/tests/pgtest"
)

// TestTopicRoles: an admin manages and lists the subscriptions of topics, a producer publishes
// to them (and gets one job per subscription) but may not change or list them, and a worker
// may do neither.
func TestTopicRoles(t *testing.T) {
	t.Parallel()
	b := setup(t)
	admin := pgtest.NewPool(t, newLogin(t, b, "app_admin", "jobs_admin"))
	producer := pgtest.NewPool(t, newLogin(t, b, "app_producer", "jobs_producer"))
	worker := pgtest.NewPool(t, newLogin(t, b, "app_worker", "jobs_worker"))

	if !scalar[bool](t, admin, "SELECT jobs_subscribe('orders', 'mail', 'receipt')") {
		t.Fatal("the admin's jobs_subscribe returned false")
	}
	exec(t, admin, "SELECT jobs_subscribe('orders', 'billing', 'charge'), jobs_subscribe('orders', 'gone', 'k')")
	if !scalar[bool](t, admin, "SELECT jobs_unsubscribe('orders', 'gone', 'k')") {
		t.Fatal("the admin's jobs_unsubscribe returned false")
	}
	if n := scalar[int64](t, admin, "SELECT count(*) FROM jobs_subscriptions('orders')"); n != 2 {
		t.Fatalf("the admin lists %d subscriptions, want 2", n)
	}

	ids := scalar[[]int64](t, producer, `SELECT jobs_publish('orders', '{"order": 1}')`)
	if len(ids) != 2 {
		t.Fatalf("the producer's jobs_publish returned %v, want 2 ids", ids)
	}
	if n := scalar[int64](t, b.super, "SELECT count(*) FROM jobs"); n != 2 {
		t.Fatalf("%d jobs after the producer's publish, want 2", n)
	}

	mustDeny(t, producer,
		"SELECT jobs_subscribe('orders', 'evil', 'k')",
		"SELECT jobs_unsubscribe('orders', 'mail', 'receipt')",
		"SELECT * FROM jobs_subscriptions()",
		"SELECT * FROM jobs_topic_subscriptions",
		"INSERT INTO jobs_topic_subscriptions (topic, queue, kind) VALUES ('orders', 'evil', 'k')",
	)
	mustDeny(t, worker,
		"SELECT jobs_publish('orders')",
		"SELECT jobs_subscribe('orders', 'evil', 'k')",
		"SELECT jobs_unsubscribe('orders', 'mail', 'receipt')",
		"SELECT * FROM jobs_subscriptions()",
	)
	if n := scalar[int64](t, b.super, "SELECT count(*) FROM jobs_topic_subscriptions"); n != 2 {
		t.Fatalf("%d subscriptions after the denied calls, want 2", n)
	}
	if n := scalar[int64](t, b.super, "SELECT count(*) FROM jobs"); n != 2 {
		t.Fatalf("%d jobs after the denied calls, want 2", n)
	}
}
