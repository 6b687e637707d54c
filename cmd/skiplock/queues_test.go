package main

import (
	"strings"
	"testing"

	"github.com/skiplock/skiplock/admin"
	"github.com/skiplock/skiplock/tests/pgtest"
)

func TestQueues(t *testing.T) {
	t.Parallel()

	t.Run("CountsPauseAndLimits", func(t *testing.T) {
		t.Parallel()
		db := setup(t)
		deadJob(t, db, "b", "k", "boom")
		pgtest.MustExec(t, db.Conn, "SELECT jobs_enqueue_many(ARRAY['k', 'k', 'k'], queues => ARRAY['a', 'a', 'b'])")

		if out := cli(t, db.URL, "pause", "a").ok(t); out != "paused a\n" {
			t.Fatalf("pause: %q", out)
		}
		if out := cli(t, db.URL, "pause", "a").ok(t); out != "a was already paused\n" {
			t.Fatalf("pause again: %q", out)
		}
		if out := cli(t, db.URL, "limit", "b", "--max-running", "5", "--rate", "100/1m").ok(t); out != "b: max-running 5, rate 100/1m0s\n" {
			t.Fatalf("limit: %q", out)
		}
		// Setting one limit keeps the others.
		if out := cli(t, db.URL, "limit", "b", "--per-key", "2").ok(t); out != "b: max-running 5, per-key 2, rate 100/1m0s\n" {
			t.Fatalf("limit --per-key: %q", out)
		}

		var got struct {
			Queues []admin.QueueMetrics `json:"queues"`
			Total  admin.QueueMetrics   `json:"total"`
		}
		cli(t, db.URL, "queues", "-o", "json").decode(t, &got)
		if len(got.Queues) != 2 || *got.Queues[0].Queue != "a" || !got.Queues[0].Paused || got.Queues[0].Ready != 2 ||
			*got.Queues[1].Queue != "b" || got.Queues[1].Dead != 1 || *got.Queues[1].MaxRunning != 5 ||
			*got.Queues[1].PerKey != 2 || *got.Queues[1].MaxStarts != 100 || *got.Queues[1].PerS != 60 ||
			got.Total.Queue != nil || got.Total.Ready != 3 {
			t.Fatalf("queues -o json = %+v", got)
		}
		out := cli(t, db.URL, "queues").ok(t)
		if !strings.Contains(out, "paused") || !strings.Contains(out, "max-running 5, per-key 2, rate 100/1m0s") ||
			!strings.Contains(out, "(all)") {
			t.Fatalf("queues table:\n%s", out)
		}

		var changed struct {
			Queue   string `json:"queue"`
			Changed bool   `json:"changed"`
		}
		cli(t, db.URL, "resume", "a", "-o", "json").decode(t, &changed)
		if changed.Queue != "a" || !changed.Changed {
			t.Fatalf("resume -o json = %+v", changed)
		}
		if out := cli(t, db.URL, "resume", "a").ok(t); out != "a was not paused\n" {
			t.Fatalf("resume again: %q", out)
		}

		// none clears each limit; with none left the queue has no settings row.
		if out := cli(t, db.URL, "limit", "b", "--max-running", "none", "--per-key", "none", "--rate", "none").ok(t); out != "b: -\n" {
			t.Fatalf("limit none: %q", out)
		}
		if n := pgtest.QueryOne[int64](t, db.Conn, "SELECT count(*) FROM jobs_queues"); n != 0 {
			t.Fatalf("%d jobs_queues rows left", n)
		}
	})

	t.Run("FairOrderedAndRatePerKey", func(t *testing.T) {
		t.Parallel()
		db := setup(t)
		settings := func() string {
			return pgtest.QueryOne[string](t, db.Conn, `SELECT format('%s %s %s %s %s %s', max_running, per_key, fair, ordered,
				max_starts, rate_per_key) FROM jobs_queues WHERE queue = 'tenants'`)
		}
		if out := cli(t, db.URL, "limit", "tenants", "--fair", "--ordered", "--rate", "10/1s", "--rate-per-key").ok(t); out != "tenants: fair, ordered, rate 10/1s per key\n" {
			t.Fatalf("limit --fair --ordered --rate --rate-per-key: %q", out)
		}
		if got := settings(); got != "  t t 10 t" {
			t.Fatalf("jobs_queues row %q, want fair, ordered, 10 starts per key", got)
		}
		// A limit or a rate given alone keeps the switches, and the new rate still counts per key.
		if out := cli(t, db.URL, "limit", "tenants", "--per-key", "2", "--rate", "20/1s").ok(t); out != "tenants: per-key 2, fair, ordered, rate 20/1s per key\n" {
			t.Fatalf("limit --per-key --rate: %q", out)
		}

		var got struct {
			Queues []admin.QueueMetrics `json:"queues"`
		}
		cli(t, db.URL, "queues", "-o", "json").decode(t, &got)
		if len(got.Queues) != 1 || !got.Queues[0].Fair || !got.Queues[0].Ordered || !got.Queues[0].RatePerKey ||
			*got.Queues[0].PerKey != 2 || *got.Queues[0].MaxStarts != 20 {
			t.Fatalf("queues -o json = %+v", got)
		}
		if out := cli(t, db.URL, "queues").ok(t); !strings.Contains(out, "per-key 2, fair, ordered, rate 20/1s per key") {
			t.Fatalf("queues table:\n%s", out)
		}

		// =false turns each off; the rest stays.
		var limits struct {
			Queue      string `json:"queue"`
			PerKey     *int32 `json:"per_key"`
			MaxStarts  *int32 `json:"max_starts"`
			Fair       bool   `json:"fair"`
			Ordered    bool   `json:"ordered"`
			RatePerKey bool   `json:"rate_per_key"`
		}
		cli(t, db.URL, "limit", "tenants", "--fair=false", "--rate-per-key=false", "-o", "json").decode(t, &limits)
		if limits.Queue != "tenants" || limits.Fair || !limits.Ordered || limits.RatePerKey || *limits.PerKey != 2 || *limits.MaxStarts != 20 {
			t.Fatalf("limit --fair=false --rate-per-key=false -o json = %+v", limits)
		}
		if got := settings(); got != " 2 f t 20 f" {
			t.Fatalf("jobs_queues row %q, want 2 per key, ordered, 20 starts per queue", got)
		}
		// --rate-per-key alone counts the existing rate per key.
		if out := cli(t, db.URL, "limit", "tenants", "--rate-per-key").ok(t); out != "tenants: per-key 2, ordered, rate 20/1s per key\n" {
			t.Fatalf("limit --rate-per-key: %q", out)
		}
		if out := cli(t, db.URL, "limit", "tenants", "--ordered=false", "--per-key", "none", "--rate", "none").ok(t); out != "tenants: -\n" {
			t.Fatalf("limit --ordered=false --per-key none --rate none: %q", out)
		}
		if n := pgtest.QueryOne[int64](t, db.Conn, "SELECT count(*) FROM jobs_queues"); n != 0 {
			t.Fatalf("%d jobs_queues rows left", n)
		}
	})

	t.Run("BadInputIsUsage", func(t *testing.T) {
		t.Parallel()
		db := setup(t)
		cli(t, db.URL, "limit", "b").fails(t, exitUsage, "nothing to change")
		cli(t, db.URL, "limit", "b", "--rate-per-key").fails(t, exitUsage, "--rate-per-key needs a rate limit")
		cli(t, db.URL, "limit", "b", "--fair=sometimes").fails(t, exitUsage, "must be true or false")
		cli(t, db.URL, "limit", "b", "--rate", "100").fails(t, exitUsage, "must be N/DURATION")
		cli(t, db.URL, "limit", "b", "--max-running", "0").fails(t, exitUsage, "jobs_set_concurrency: max_running must be")
		cli(t, db.URL, "pause").fails(t, exitUsage, "want one QUEUE")
		cli(t, db.URL, "pause", "").fails(t, exitUsage, "jobs_pause: queue must be")
	})
}
