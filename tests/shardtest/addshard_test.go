package shardtest

import (
	"context"
	"testing"
)

// TestAddShard: a proxy of 3 shards gets a 4th. Existing ids still reach their jobs, existing
// queues stay on their shards (also the ones whose hash now points elsewhere), new queues
// can land on the new shard, and a proxy session opened before the change sees it at once.
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
