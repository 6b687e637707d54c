package shardtest

import (
	"context"
	"errors"
	"net/url"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// TestTopicsThroughTheProxy: the proxy keeps the subscriptions itself, and its jobs_publish
// sends each subscription's job to its queue's shard (pinning the queue), returning the ids
// in the order of the subscriptions by queue, then kind, and '{}' without subscribers; its
// checks and messages are the shard's. A producer publishes through the proxy (reaching the
// shards as itself) but may not change or read the subscriptions.
func TestTopicsThroughTheProxy(t *testing.T) {
	s := newSharded(t, 3)
	ctx := context.Background()
	p := s.proxy

	queues := []string{s.queueOnShard(t, "topic", 0), s.queueOnShard(t, "topic", 1), s.queueOnShard(t, "topic", 2)}
	for _, q := range queues {
		if !one[bool](t, p, "SELECT jobs_subscribe('orders', $1, 'handle')", q) {
			t.Fatalf("jobs_subscribe of %s returned false", q)
		}
	}
	if one[bool](t, p, "SELECT jobs_subscribe('orders', $1, 'handle')", queues[0]) {
		t.Fatal("a second jobs_subscribe returned true")
	}
	if n := one[int64](t, p, "SELECT count(*) FROM jobs_subscriptions('orders')"); n != 3 {
		t.Fatalf("the proxy lists %d subscriptions, want 3", n)
	}
	for i, sh := range s.shards {
		if n := one[int64](t, sh, "SELECT count(*) FROM jobs_topic_subscriptions"); n != 0 {
			t.Fatalf("shard %d holds %d subscriptions: they are the proxy's", i, n)
		}
	}

	ids := one[[]int64](t, p, `SELECT jobs_publish('orders', '{"order": 1}', priority => 2)`)
	// queueOnShard's names sort as their shards here only by chance, so the expected order is
	// the queues' own.
	order := one[[]string](t, p, "SELECT array_agg(queue ORDER BY queue, kind) FROM jobs_subscriptions('orders')")
	if len(ids) != 3 {
		t.Fatalf("jobs_publish returned %v, want 3 ids", ids)
	}
	for i, id := range ids {
		shard := -1
		for j, q := range queues {
			if q == order[i] {
				shard = j
			}
		}
		if shardOf(id) != shard {
			t.Errorf("id %d (subscription %s) is on shard %d, want %d", id, order[i], shardOf(id), shard)
			continue
		}
		if !one[bool](t, s.shards[shard], `SELECT queue = $2 AND kind = 'handle' AND payload = '{"order": 1}' AND priority = 2
			AND state = 'queued' FROM jobs WHERE id = $1`, id, order[i]) {
			t.Errorf("job %d on shard %d is not the publish's job of %s", id, shard, order[i])
		}
		if pinned := one[int32](t, p, "SELECT shard FROM jobs_proxy_queues WHERE queue = $1", order[i]); pinned != int32(shard) {
			t.Errorf("queue %s pinned to %d, want %d", order[i], pinned, shard)
		}
	}
	if !one[bool](t, p, "SELECT jobs_publish('nobody') = '{}'::bigint[]") {
		t.Error("jobs_publish through the proxy to a topic without subscribers did not return '{}'")
	}
	_, err := p.Exec(ctx, "SELECT jobs_publish('orders', max_attempts => 0)")
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != "22023" || pgErr.ColumnName != "max_attempts" ||
		pgErr.Message != "jobs_publish: max_attempts must be at least 1" {
		t.Fatalf("a bad jobs_publish through the proxy: %v", err)
	}
	if !one[bool](t, p, "SELECT jobs_unsubscribe('orders', $1, 'handle')", queues[1]) {
		t.Fatal("jobs_unsubscribe returned false")
	}
	if ids := one[[]int64](t, p, "SELECT jobs_publish('orders')"); len(ids) != 2 {
		t.Fatalf("jobs_publish after an unsubscribe returned %v, want 2 ids", ids)
	}
	total := int64(0)
	for _, sh := range s.shards {
		total += one[int64](t, sh, "SELECT count(*) FROM jobs")
	}
	if total != 5 {
		t.Fatalf("%d jobs on the shards, want 5", total)
	}

	// Roles: a producer publishes, and may not manage or read the subscriptions.
	suffix := s.name[len(s.name)-8:]
	producer := "tprod_" + suffix
	for _, srv := range s.c.shards[:3] {
		execOn(t, srv.URL(), "CREATE ROLE "+producer+" LOGIN IN ROLE jobs_producer")
	}
	execOn(t, s.c.proxy.URL(), "CREATE ROLE "+producer+" LOGIN IN ROLE jobs_producer")
	t.Cleanup(func() {
		for _, u := range []string{s.c.proxy.URL(), s.c.shards[0].URL(), s.c.shards[1].URL(), s.c.shards[2].URL()} {
			if conn, err := pgx.Connect(ctx, u); err == nil {
				_, _ = conn.Exec(ctx, "DROP ROLE IF EXISTS "+producer)
				_ = conn.Close(ctx)
			}
		}
	})
	u, err := url.Parse(s.proxyURL)
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.User(producer)
	conn, err := pgx.Connect(ctx, u.String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var byProducer []int64
	if err := conn.QueryRow(ctx, "SELECT jobs_publish('orders')").Scan(&byProducer); err != nil || len(byProducer) != 2 {
		t.Fatalf("producer's jobs_publish through the proxy = %v, %v", byProducer, err)
	}
	for _, sql := range []string{
		"SELECT jobs_subscribe('orders', 'evil', 'k')",
		"SELECT jobs_unsubscribe('orders', 'evil', 'k')",
		"SELECT * FROM jobs_subscriptions()",
		"SELECT * FROM jobs_topic_subscriptions",
	} {
		_, err := conn.Exec(ctx, sql)
		if !errors.As(err, &pgErr) || pgErr.Code != "42501" {
			t.Errorf("producer %s: got %v, want 42501", sql, err)
		}
	}
}

// execOn runs sql on a fresh connection to url.
func execOn(t *testing.T, url, sql string) {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, sql); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}
