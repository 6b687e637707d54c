package main

import (
	"strings"
	"testing"

	"github.com/skiplock/skiplock/admin"
	"github.com/skiplock/skiplock/tests/pgtest"
)

func TestTopic(t *testing.T) {
	t.Parallel()
	db := setup(t)

	if out := cli(t, db.URL, "topic", "subscribe", "order_placed", "mail", "send_receipt").ok(t); out != "subscribed mail/send_receipt to order_placed\n" {
		t.Fatalf("topic subscribe: %q", out)
	}
	if out := cli(t, db.URL, "topic", "subscribe", "order_placed", "mail", "send_receipt").ok(t); out != "mail/send_receipt was already subscribed to order_placed\n" {
		t.Fatalf("topic subscribe again: %q", out)
	}
	var subscribed map[string]any
	cli(t, db.URL, "topic", "subscribe", "order_placed", "billing", "charge", "-o", "json").decode(t, &subscribed)
	if subscribed["changed"] != true || subscribed["topic"] != "order_placed" || subscribed["queue"] != "billing" || subscribed["kind"] != "charge" {
		t.Fatalf("topic subscribe -o json = %v", subscribed)
	}
	cli(t, db.URL, "topic", "subscribe", "refunds", "billing", "refund").ok(t)

	var list []admin.Subscription
	cli(t, db.URL, "topic", "list", "-o", "json").decode(t, &list)
	if len(list) != 3 || list[0].Queue != "billing" || list[1].Kind != "send_receipt" || list[2].Topic != "refunds" || list[0].CreatedAt.IsZero() {
		t.Fatalf("topic list -o json = %+v", list)
	}
	out := cli(t, db.URL, "topic", "list", "order_placed").ok(t)
	if lines := strings.Split(strings.TrimSpace(out), "\n"); len(lines) != 3 || !strings.HasPrefix(lines[0], "TOPIC") ||
		!strings.Contains(lines[1], "billing") || !strings.Contains(lines[2], "send_receipt") {
		t.Fatalf("topic list order_placed:\n%s", out)
	}

	// publish: one job per subscription, ids in queue, kind order, one a line.
	out = cli(t, db.URL, "topic", "publish", "order_placed", `{"order": 42}`, "--priority", "-1", "--max-attempts", "2",
		"--concurrency-key", "c1").ok(t)
	want := pgtest.QueryOne[string](t, db.Conn, `SELECT string_agg(id::text || E'\n', '' ORDER BY queue, kind) FROM jobs
		WHERE payload = '{"order": 42}' AND priority = -1 AND max_attempts = 2 AND concurrency_key = 'c1'`)
	if out != want || strings.Count(out, "\n") != 2 {
		t.Fatalf("topic publish printed %q, want the two jobs' ids %q", out, want)
	}
	var published map[string][]int64
	cliWith(t, t.Context(), cliOpts{databaseURL: &db.URL, stdin: `{"order": 43}`},
		"topic", "publish", "order_placed", "-", "--in", "1h", "-o", "json").decode(t, &published)
	if ids := published["ids"]; len(ids) != 2 ||
		pgtest.QueryOne[int64](t, db.Conn, `SELECT count(*) FROM jobs WHERE id = ANY ($1) AND payload = '{"order": 43}'
			AND run_at - created_at = interval '1 hour'`, ids) != 2 {
		t.Fatalf("topic publish - --in 1h -o json = %v", published)
	}
	if out := cli(t, db.URL, "topic", "publish", "nobody").ok(t); out != "" {
		t.Fatalf("topic publish without subscribers printed %q", out)
	}
	var none map[string][]int64
	cli(t, db.URL, "topic", "publish", "nobody", "-o", "json").decode(t, &none)
	if ids, ok := none["ids"]; !ok || ids == nil || len(ids) != 0 {
		t.Fatalf("topic publish -o json without subscribers = %#v, want {\"ids\": []}", none)
	}

	// unsubscribe: later publishes skip it, the published jobs stay; exit 3 when there is none.
	if out := cli(t, db.URL, "topic", "unsubscribe", "order_placed", "billing", "charge").ok(t); out != "unsubscribed billing/charge from order_placed\n" {
		t.Fatalf("topic unsubscribe: %q", out)
	}
	cli(t, db.URL, "topic", "unsubscribe", "order_placed", "billing", "charge").fails(t, exitNotFound, `no subscription of billing/charge to "order_placed"`)
	if out := cli(t, db.URL, "topic", "publish", "order_placed").ok(t); strings.Count(out, "\n") != 1 {
		t.Fatalf("topic publish after unsubscribe: %q", out)
	}
	if n := pgtest.QueryOne[int64](t, db.Conn, "SELECT count(*) FROM jobs"); n != 5 {
		t.Fatalf("%d jobs, want 5", n)
	}

	cli(t, db.URL, "topic", "subscribe", "t", "q").fails(t, exitUsage, "want TOPIC QUEUE KIND")
	cli(t, db.URL, "topic", "subscribe", "t", "", "k").fails(t, exitUsage, "queue must be a non-empty string")
	cli(t, db.URL, "topic", "publish").fails(t, exitUsage, "want TOPIC [PAYLOAD | -]")
	cli(t, db.URL, "topic", "publish", "t", "--in", "1m", "--run-at", "2030-01-01T00:00:00Z").fails(t, exitUsage, "exclude each other")
	cli(t, db.URL, "topic", "publish", "t", "--max-attempts", "0").fails(t, exitUsage, "max_attempts must be at least 1")
	cli(t, db.URL, "topic", "list", "a", "b").fails(t, exitUsage, "at most one TOPIC")
	cli(t, db.URL, "topic").fails(t, exitUsage, "missing subcommand (subscribe, unsubscribe, list, publish)")
}
