package shardtest

import (
	"context"
	"strconv"
	"strings"
	"testing"
)

// TestMetricsMergesQueueOnSeveralShards: a queue with jobs on two shards (enqueued on the
// shards directly, as the Go driver may) gets one jobs_metrics row through the proxy, not
// one per shard (an exporter would see the queue twice): the sums of the shards' counts,
// paused when one shard pauses it, a limit both shards share, and NULL for a limit they
// do not share.
func TestMetricsMergesQueueOnSeveralShards(t *testing.T) {
	s := newSharded(t, 2)
	ctx := context.Background()
	for shard, n := range []int{2, 1} {
		for i := 0; i < n; i++ {
			one[int64](t, s.shards[shard], "SELECT jobs_enqueue('k', '{}', 'spread')")
		}
		for _, sql := range []string{"SELECT jobs_set_concurrency('spread', 3, fair => true, ordered => " + strconv.FormatBool(shard == 0) + ")", "SELECT jobs_set_rate_limit('spread', $1, '1 minute')"} {
			args := []any{}
			if strings.Contains(sql, "$1") {
				args = append(args, 10+shard)
			}
			if _, err := s.shards[shard].Exec(ctx, sql, args...); err != nil {
				t.Fatal(err)
			}
		}
	}
	one[bool](t, s.shards[0], "SELECT jobs_pause('spread')")

	var rows, ready int64
	var paused bool
	var maxRunning, maxStarts *int32
	if err := s.proxy.QueryRow(ctx, `
		SELECT count(*) OVER (), ready, paused, max_running, max_starts
		FROM jobs_metrics() WHERE queue = 'spread'`).Scan(&rows, &ready, &paused, &maxRunning, &maxStarts); err != nil {
		t.Fatal(err)
	}
	if rows != 1 {
		t.Fatalf("jobs_metrics has %d rows for a queue on two shards, want 1", rows)
	}
	if ready != 3 || !paused || maxRunning == nil || *maxRunning != 3 || maxStarts != nil {
		t.Errorf("merged row: ready %d paused %v max_running %v max_starts %v; want 3, true, 3, NULL", ready, paused, deref(maxRunning), deref(maxStarts))
	}
	// fair is set on both shards, ordered on one.
	if got := one[string](t, s.proxy, "SELECT format('%s %s %s', fair, ordered, rate_per_key) FROM jobs_metrics() WHERE queue = 'spread'"); got != "t f f" {
		t.Errorf("merged row: fair ordered rate_per_key %q, want t f f", got)
	}
	if n := one[int64](t, s.proxy, "SELECT count(*) FROM jobs_metrics() WHERE queue IS NULL AND ready + scheduled = 3"); n != 1 {
		t.Errorf("%d NULL-queue rows counting the 3 queued jobs, want 1", n)
	}
}

func deref[T any](p *T) any {
	if p == nil {
		return nil
	}
	return *p
}
