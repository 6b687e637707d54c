package shardtest

import (
	"context"
	"fmt"
	"testing"
)

// TestAddShard: a proxy of 3 shards gets a 4th. Existing ids still reach their jobs, existing
// queues stay on their shards (also the ones whose hash now points elsewhere), new queues
// can land on the new shard, and a proxy session opened before the change sees it in its
// transactions that start a second after the change (setShards waits for that).
func TestAddShard(t *testing.T) {
	s := newSharded(t, 3)
	ctx := context.Background()
	session, err := s.proxy.Acquire(ctx) // a session that routes before and after the change
	if err != nil {
		t.Fatal(err)
	}
	defer session.Release()

	type job struct {
		id    int64
		queue string
		shard int
	}
	var jobs []job
	for i := 0; i < 24; i++ {
		q := "grow-" + string(rune('a'+i))
		var id int64
		if err := session.QueryRow(ctx, "SELECT jobs_enqueue('k', '{}', $1)", q).Scan(&id); err != nil {
			t.Fatal(err)
		}
		jobs = append(jobs, job{id, q, shardOf(id)})
	}

	s.addShardDB(t, 3)
	s.setShards(t)
	if n := one[int32](t, session, "SELECT _jobs_proxy_shard_count()"); n != 4 {
		t.Fatalf("the proxy sees %d shards, want 4", n)
	}

	moved := 0 // queues whose hash over 4 shards differs from their pinned shard
	for _, j := range jobs {
		if one[int32](t, session, "SELECT (hashtext($1)::bigint & 2147483647) % 4", j.queue) != int32(j.shard) {
			moved++
		}
		var st string
		if err := session.QueryRow(ctx, "SELECT state::text FROM jobs_get($1)", j.id).Scan(&st); err != nil || st != "queued" {
			t.Errorf("job %d (shard %d) after adding a shard: %q, %v", j.id, j.shard, st, err)
		}
		var id int64
		if err := session.QueryRow(ctx, "SELECT jobs_enqueue('k', '{}', $1)", j.queue).Scan(&id); err != nil {
			t.Fatal(err)
		}
		if shardOf(id) != j.shard {
			t.Errorf("queue %s moved from shard %d to %d", j.queue, j.shard, shardOf(id))
		}
		var claimed int64
		if err := session.QueryRow(ctx, "SELECT id FROM jobs_claim('w', 1, ARRAY[$1])", j.queue).Scan(&claimed); err != nil || claimed != j.id {
			t.Errorf("claim of queue %s: %d, %v; want its oldest job %d", j.queue, claimed, err, j.id)
		}
	}
	if moved == 0 {
		t.Fatal("no queue's hash changed with the shard count: the test proves nothing")
	}
	q := s.queueOnShard(t, "new", 3)
	if id := one[int64](t, session, "SELECT jobs_enqueue('k', '{}', $1)", q); shardOf(id) != 3 ||
		one[int64](t, s.shards[3], "SELECT count(*) FROM jobs WHERE id = $1", id) != 1 {
		t.Errorf("a new queue routed to shard 3 got job %d", id)
	}

	// Shards are never removed.
	_, err = s.proxy.Exec(ctx, "SELECT jobs_proxy_set_shards(ARRAY['dbname=x', 'dbname=y'])")
	if err == nil {
		t.Error("jobs_proxy_set_shards removed shards")
	}
}

// TestAddShardKeepsUnpinnedQueues: queues the proxy never pinned stay with their jobs when a
// shard is added: one enqueued on its shard directly (the Go driver, the outbox pattern) and
// one enqueued through the proxy in a transaction that rolled back (the job committed on the
// shard, docs/scaling.md "What changes for users", but the pin rolled back). Both are
// chosen so that their hash over the new count names another shard.
func TestAddShardKeepsUnpinnedQueues(t *testing.T) {
	s := newSharded(t, 3)
	ctx := context.Background()
	// moving returns a queue name whose hash over 3 shards is shard and over 4 another one.
	moving := func(prefix string, shard int) string {
		for i := 0; i < 1000; i++ {
			q := fmt.Sprintf("%s-%d", prefix, i)
			if one[int32](t, s.proxy, "SELECT (hashtext($1)::bigint & 2147483647) % 3", q) == int32(shard) &&
				one[int32](t, s.proxy, "SELECT (hashtext($1)::bigint & 2147483647) % 4", q) != int32(shard) {
				return q
			}
		}
		t.Fatalf("no queue name moves away from shard %d", shard)
		return ""
	}
	direct, rolledBack := moving("direct", 1), moving("rolledback", 2)
	directID := one[int64](t, s.shards[1], "SELECT jobs_enqueue('k', '{}', $1)", direct)

	tx, err := s.proxy.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	rolledBackID := one[int64](t, tx, "SELECT jobs_enqueue('k', '{}', $1)", rolledBack)
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	// An enqueue through the proxy is its own transaction on the shard.
	if n := one[int64](t, s.shards[2], "SELECT count(*) FROM jobs WHERE id = $1 AND state = 'queued'", rolledBackID); n != 1 {
		t.Fatalf("job %d enqueued through the proxy in a rolled-back transaction: %d on shard 2, want 1", rolledBackID, n)
	}
	if n := one[int64](t, s.proxy, "SELECT count(*) FROM jobs_proxy_queues WHERE queue IN ($1, $2)", direct, rolledBack); n != 0 {
		t.Fatalf("%d of the queues are pinned before the shard is added; the test proves nothing", n)
	}

	s.addShardDB(t, 3)
	s.setShards(t)

	for _, c := range []struct {
		queue string
		shard int
		id    int64
	}{{direct, 1, directID}, {rolledBack, 2, rolledBackID}} {
		var claimed int64
		if err := s.proxy.QueryRow(ctx, "SELECT id FROM jobs_claim('w', 1, ARRAY[$1])", c.queue).Scan(&claimed); err != nil || claimed != c.id {
			t.Errorf("claim of queue %s after adding a shard: %d, %v; want its job %d on shard %d", c.queue, claimed, err, c.id, c.shard)
		}
		if id := one[int64](t, s.proxy, "SELECT jobs_enqueue('k', '{}', $1)", c.queue); shardOf(id) != c.shard {
			t.Errorf("queue %s moved from shard %d to %d", c.queue, c.shard, shardOf(id))
		}
	}
}
