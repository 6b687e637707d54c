package shardtest

import (
	"context"
	"slices"
	"testing"
	"time"
)

// TestRouting calls every proxy function and checks on the shards themselves that it landed
// on the right one: by the id's low bits (id % 1024), by the queue's pinned shard, or on
// every shard.
func TestRouting(t *testing.T) {
	s := newSharded(t, shardClusters)
	ctx := context.Background()
	p := s.proxy

	queues := make([]string, shardClusters)
	for i := range queues {
		queues[i] = s.queueOnShard(t, "route", i)
	}

	// where reports, for a job id, the shards holding it (want exactly its own).
	where := func(id int64) []int {
		var on []int
		for i, sh := range s.shards {
			if one[int64](t, sh, "SELECT count(*) FROM jobs WHERE id = $1", id) > 0 {
				on = append(on, i)
			}
		}
		return on
	}
	state := func(id int64) string {
		return one[string](t, s.shards[shardOf(id)], "SELECT state::text FROM jobs WHERE id = $1", id)
	}

	t.Run("EnqueueByQueue", func(t *testing.T) {
		for i, q := range queues {
			id := one[int64](t, p, "SELECT jobs_enqueue('k', '{}', $1)", q)
			if shardOf(id) != i || !slices.Equal(where(id), []int{i}) {
				t.Errorf("queue %s: job %d on shards %v, want only %d", q, id, where(id), i)
			}
			if pinned := one[int32](t, p, "SELECT shard FROM jobs_proxy_queues WHERE queue = $1", q); pinned != int32(i) {
				t.Errorf("queue %s pinned to %d, want %d", q, pinned, i)
			}
		}
	})

	// The wake-up goes out on the queue's shard, where its workers LISTEN: notify => false
	// sends none there, jobs_notify through the proxy sends one.
	t.Run("NotifyOnTheQueuesShard", func(t *testing.T) {
		q := queues[2]
		conn, err := s.shards[2].Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Release()
		if _, err := conn.Exec(ctx, "LISTEN jobs_ready"); err != nil {
			t.Fatal(err)
		}
		heard := func() string {
			wctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
			defer cancel()
			n, err := conn.Conn().WaitForNotification(wctx)
			if err != nil {
				return ""
			}
			return n.Payload
		}
		one[int64](t, p, "SELECT jobs_enqueue('k', queue => $1, notify => false)", q)
		one[int64](t, p, "SELECT count(*) FROM jobs_enqueue_many(ARRAY['k'], queues => ARRAY[$1], notify => false)", q)
		if got := heard(); got != "" {
			t.Fatalf("shard 2 heard %q after enqueues with notify => false through the proxy", got)
		}
		if _, err := p.Exec(ctx, "SELECT jobs_notify($1)", q); err != nil {
			t.Fatal(err)
		}
		if got := heard(); got != q {
			t.Fatalf("shard 2 heard %q after jobs_notify(%q) through the proxy, want the queue's name", got, q)
		}
		one[int64](t, p, "SELECT jobs_enqueue('k', queue => $1)", q)
		if got := heard(); got != q {
			t.Fatalf("shard 2 heard %q after a default enqueue through the proxy, want %q", got, q)
		}
	})

	t.Run("EnqueueManySplitByQueueKeepsOrder", func(t *testing.T) {
		order := []int{3, 0, 2, 1, 0, 3}
		kinds := make([]string, len(order))
		qs := make([]string, len(order))
		for i, sh := range order {
			kinds[i] = "many" + string(rune('a'+i))
			qs[i] = queues[sh]
		}
		rows, err := p.Query(ctx, "SELECT * FROM jobs_enqueue_many($1, NULL, $2)", kinds, qs)
		if err != nil {
			t.Fatal(err)
		}
		var ids []int64
		for rows.Next() {
			var id int64
			if err := rows.Scan(&id); err != nil {
				t.Fatal(err)
			}
			ids = append(ids, id)
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		if len(ids) != len(order) {
			t.Fatalf("got %d ids, want %d", len(ids), len(order))
		}
		for i, id := range ids {
			if shardOf(id) != order[i] {
				t.Errorf("element %d (queue %s): id %d is on shard %d, want %d", i, qs[i], id, shardOf(id), order[i])
			}
			if k := one[string](t, s.shards[shardOf(id)], "SELECT kind FROM jobs WHERE id = $1", id); k != kinds[i] {
				t.Errorf("element %d: id %d has kind %q, want %q (ids out of order)", i, id, k, kinds[i])
			}
		}
	})

	// One running job per shard, claimed through the proxy by queue.
	claimed := make([]int64, shardClusters)
	t.Run("ClaimByQueue", func(t *testing.T) {
		for i, q := range queues {
			var id int64
			var attempt int32
			if err := p.QueryRow(ctx, "SELECT id, attempt FROM jobs_claim('w', 1, ARRAY[$1])", q).Scan(&id, &attempt); err != nil {
				t.Fatalf("claim %s: %v", q, err)
			}
			if shardOf(id) != i || attempt != 1 || state(id) != "running" {
				t.Fatalf("claim %s: job %d attempt %d (%s), want a running job of shard %d", q, id, attempt, state(id), i)
			}
			claimed[i] = id
		}
	})

	t.Run("ByID", func(t *testing.T) {
		if got := one[string](t, p, "SELECT state::text FROM jobs_get($1)", claimed[0]); got != "running" {
			t.Errorf("jobs_get: %s", got)
		}
		if !one[bool](t, p, "SELECT jobs_heartbeat($1, 1, '10 minutes')", claimed[0]) ||
			!one[bool](t, s.shards[0], "SELECT lease_expires_at > now() + interval '9 minutes' FROM jobs WHERE id = $1", claimed[0]) {
			t.Error("jobs_heartbeat did not extend the lease on shard 0")
		}
		if !one[bool](t, p, "SELECT jobs_complete($1, 1)", claimed[0]) || state(claimed[0]) != "done" {
			t.Errorf("jobs_complete: job %d is %s", claimed[0], state(claimed[0]))
		}
		if got := one[string](t, p, "SELECT jobs_fail($1, 1, 'boom')::text", claimed[1]); got != "queued" ||
			one[string](t, s.shards[1], "SELECT last_error FROM jobs WHERE id = $1", claimed[1]) != "boom" {
			t.Errorf("jobs_fail: %s", got)
		}
		if !one[bool](t, p, "SELECT jobs_snooze($1, 1, now() + interval '1 hour')", claimed[2]) ||
			!one[bool](t, s.shards[2], "SELECT state = 'queued' AND run_at > now() + interval '59 minutes' FROM jobs WHERE id = $1", claimed[2]) {
			t.Error("jobs_snooze did not reschedule the job on shard 2")
		}
		if !one[bool](t, p, "SELECT jobs_cancel($1, 1, 'stop')", claimed[3]) || state(claimed[3]) != "cancelled" {
			t.Errorf("jobs_cancel (worker): %s", state(claimed[3]))
		}
		if !one[bool](t, p, "SELECT jobs_retry($1)", claimed[3]) || state(claimed[3]) != "queued" {
			t.Errorf("jobs_retry: %s", state(claimed[3]))
		}
		if !one[bool](t, p, "SELECT jobs_cancel($1)", claimed[3]) || state(claimed[3]) != "cancelled" {
			t.Errorf("jobs_cancel (operator): %s", state(claimed[3]))
		}
		var id int64
		var st string
		if err := p.QueryRow(ctx, "SELECT id, state::text FROM jobs_inspect($1)", claimed[0]).Scan(&id, &st); err != nil || id != claimed[0] || st != "done" {
			t.Errorf("jobs_inspect: %d %s %v", id, st, err)
		}
	})

	t.Run("ManyByID", func(t *testing.T) {
		var ids []int64
		var attempts []int32
		rows, err := p.Query(ctx, "SELECT id, attempt FROM jobs_claim('w', 100, $1)", queues)
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			var id int64
			var a int32
			if err := rows.Scan(&id, &a); err != nil {
				t.Fatal(err)
			}
			ids = append(ids, id)
			attempts = append(attempts, a)
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		shardsHit := map[int]bool{}
		for _, id := range ids {
			shardsHit[shardOf(id)] = true
		}
		if len(shardsHit) != shardClusters {
			t.Fatalf("jobs_claim over every queue got jobs of shards %v, want all %d", shardsHit, shardClusters)
		}
		if n := one[int64](t, p, "SELECT count(*) FROM jobs_heartbeat_many($1, $2, '10 minutes') WHERE extended", ids, attempts); n != int64(len(ids)) {
			t.Errorf("jobs_heartbeat_many extended %d of %d", n, len(ids))
		}
		if n := one[int64](t, p, "SELECT count(*) FROM jobs_complete_many($1, $2)", ids, attempts); n != int64(len(ids)) {
			t.Errorf("jobs_complete_many completed %d of %d", n, len(ids))
		}
		for _, id := range ids {
			if state(id) != "done" {
				t.Errorf("job %d is %s after jobs_complete_many", id, state(id))
			}
		}
	})

	t.Run("QueueSettingsOnTheQueuesShard", func(t *testing.T) {
		if !one[bool](t, p, "SELECT jobs_pause($1)", queues[2]) {
			t.Error("jobs_pause returned false")
		}
		for i, sh := range s.shards {
			paused := one[int64](t, sh, "SELECT count(*) FROM jobs_queues WHERE queue = $1 AND paused", queues[2])
			if (i == 2) != (paused == 1) {
				t.Errorf("shard %d: %d paused rows for %s", i, paused, queues[2])
			}
		}
		if !one[bool](t, p, "SELECT jobs_resume($1)", queues[2]) {
			t.Error("jobs_resume returned false")
		}
		if _, err := p.Exec(ctx, "SELECT jobs_set_concurrency($1, 3)", queues[1]); err != nil {
			t.Fatal(err)
		}
		if n := one[int64](t, s.shards[1], "SELECT count(*) FROM jobs_queues WHERE queue = $1 AND max_running = 3", queues[1]); n != 1 {
			t.Error("jobs_set_concurrency did not reach shard 1")
		}
		// fair and ordered reach the shard; three arguments keep them there.
		if _, err := p.Exec(ctx, "SELECT jobs_set_concurrency($1, 3, NULL, fair => true, ordered => true)", queues[1]); err != nil {
			t.Fatal(err)
		}
		if _, err := p.Exec(ctx, "SELECT jobs_set_concurrency($1, 3, 2)", queues[1]); err != nil {
			t.Fatal(err)
		}
		if n := one[int64](t, s.shards[1], "SELECT count(*) FROM jobs_queues WHERE queue = $1 AND per_key = 2 AND fair AND ordered", queues[1]); n != 1 {
			t.Error("jobs_set_concurrency's fair and ordered did not reach shard 1")
		}
		if _, err := p.Exec(ctx, "SELECT jobs_set_rate_limit($1, 1, '1 hour')", queues[3]); err != nil {
			t.Fatal(err)
		}
		if n := one[int64](t, s.shards[3], "SELECT count(*) FROM jobs_queues WHERE queue = $1 AND max_starts = 1", queues[3]); n != 1 {
			t.Error("jobs_set_rate_limit did not reach shard 3")
		}
		if _, err := p.Exec(ctx, "SELECT jobs_set_rate_limit($1, 1, '1 hour', per_key => true)", queues[3]); err != nil {
			t.Fatal(err)
		}
		if n := one[int64](t, s.shards[3], "SELECT count(*) FROM jobs_queues WHERE queue = $1 AND rate_per_key", queues[3]); n != 1 {
			t.Error("jobs_set_rate_limit's per_key did not reach shard 3")
		}
		if _, err := p.Exec(ctx, "SELECT jobs_set_rate_limit($1, 1, '1 hour')", queues[3]); err != nil {
			t.Fatal(err)
		}
		// One start in the hour: after a claim, the next start is an hour away, on shard 3.
		one[int64](t, p, "SELECT jobs_enqueue('k', '{}', $1)", queues[3])
		one[int64](t, p, "SELECT id FROM jobs_claim('w', 1, ARRAY[$1])", queues[3])
		if !one[bool](t, p, "SELECT jobs_next_start($1) > now() + interval '59 minutes'", queues[3]) {
			t.Error("jobs_next_start through the proxy does not show shard 3's rate limit")
		}
		if !one[bool](t, p, "SELECT jobs_queue_limited($1) AND jobs_queue_limited($2)", queues[1], queues[3]) {
			t.Error("jobs_queue_limited through the proxy does not show the limits of shards 1 and 3")
		}
		if one[bool](t, p, "SELECT jobs_queue_limited($1)", queues[2]) {
			t.Error("jobs_queue_limited through the proxy says a queue without limits is limited")
		}
		// A queue first named by an operator function is pinned too: its jobs follow it.
		fresh := s.queueOnShard(t, "fresh", 1)
		one[bool](t, p, "SELECT jobs_pause($1)", fresh)
		if got := one[int32](t, p, "SELECT shard FROM jobs_proxy_queues WHERE queue = $1", fresh); got != 1 {
			t.Errorf("paused queue pinned to %d, want 1", got)
		}
	})

	t.Run("OnAllShards", func(t *testing.T) {
		// Two expired leases on two shards, one more on a third: each ALL function sees them.
		expire := func(shard int) {
			one[int64](t, p, "SELECT jobs_enqueue('exp', '{}', $1)", queues[shard])
			one[int64](t, p, "SELECT id FROM jobs_claim('w', 1, ARRAY[$1], '1 millisecond')", queues[shard])
		}
		expire(0)
		expire(2)
		time.Sleep(20 * time.Millisecond)
		if n := one[int32](t, p, "SELECT jobs_requeue_expired()"); n != 2 {
			t.Errorf("jobs_requeue_expired = %d, want 2 (one on shard 0, one on shard 2)", n)
		}
		one[int64](t, p, "SELECT count(*) FROM jobs_claim('w', 10, ARRAY[$1, $2], '1 millisecond')", queues[0], queues[2])
		expire(1)
		time.Sleep(20 * time.Millisecond)
		if n := one[int32](t, p, "SELECT requeued FROM jobs_maintain()"); n != 3 {
			t.Errorf("jobs_maintain requeued %d, want 3 (shards 0, 1, 2)", n)
		}
		// A due schedule on shards 1 and 3: one tick through the proxy runs both.
		for _, i := range []int{1, 3} {
			sh := s.shards[i]
			if _, err := sh.Exec(ctx, "SELECT jobs_schedule('tick', '* * * * *', 'ticked', '{}', $1)", queues[i]); err != nil {
				t.Fatal(err)
			}
			if _, err := sh.Exec(ctx, "UPDATE jobs_schedules SET next_run_at = now() - interval '1 second' WHERE name = 'tick'"); err != nil {
				t.Fatal(err)
			}
		}
		if n := one[int32](t, p, "SELECT jobs_schedule_tick()"); n != 2 {
			t.Errorf("jobs_schedule_tick = %d, want 2", n)
		}
		for _, i := range []int{1, 3} {
			if n := one[int64](t, s.shards[i], "SELECT count(*) FROM jobs WHERE kind = 'ticked'"); n != 1 {
				t.Errorf("shard %d: %d ticked jobs, want 1", i, n)
			}
		}

		var statsQueues []string
		rows, err := p.Query(ctx, "SELECT DISTINCT queue FROM jobs_stats() ORDER BY 1")
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			var q string
			if err := rows.Scan(&q); err != nil {
				t.Fatal(err)
			}
			statsQueues = append(statsQueues, q)
		}
		want := slices.Clone(queues)
		slices.Sort(want)
		if !slices.Equal(statsQueues, want) {
			t.Errorf("jobs_stats queues %v, want %v", statsQueues, want)
		}
		// jobs_metrics: one row per queue, then one NULL-queue row summing every shard.
		if n := one[int64](t, p, "SELECT count(*) FROM jobs_metrics() WHERE queue IS NULL"); n != 1 {
			t.Errorf("jobs_metrics has %d NULL-queue rows, want 1", n)
		}
		var direct int64
		for _, sh := range s.shards {
			direct += one[int64](t, sh, "SELECT ready + scheduled FROM jobs_metrics() WHERE queue IS NULL")
		}
		if got := one[int64](t, p, "SELECT ready + scheduled FROM jobs_metrics() WHERE queue IS NULL"); got != direct {
			t.Errorf("jobs_metrics total queued %d, shards say %d", got, direct)
		}
		for _, q := range queues {
			if n := one[int64](t, p, "SELECT count(*) FROM jobs_metrics() WHERE queue = $1", q); n != 1 {
				t.Errorf("jobs_metrics: %d rows for %s, want 1", n, q)
			}
		}
	})
}
