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

	t.Run("BadInputIsUsage", func(t *testing.T) {
		t.Parallel()
		db := setup(t)
		cli(t, db.URL, "limit", "b").fails(t, exitUsage, "nothing to change")
		cli(t, db.URL, "limit", "b", "--rate", "100").fails(t, exitUsage, "must be N/DURATION")
		cli(t, db.URL, "limit", "b", "--max-running", "0").fails(t, exitUsage, "jobs_set_concurrency: max_running must be")
		cli(t, db.URL, "pause").fails(t, exitUsage, "want one QUEUE")
		cli(t, db.URL, "pause", "").fails(t, exitUsage, "jobs_pause: queue must be")
	})
}
