package shardtest

import (
	"context"
	"errors"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
)

// TestAddShardInOpenTransaction: a proxy session inside a transaction that routed before a
// shard was added never sends a job id of the new shard to another shard (PL/Proxy reloads
// its cluster only when a transaction starts); its next transaction reaches the new shard.
func TestAddShardInOpenTransaction(t *testing.T) {
	s := newSharded(t, 3)
	ctx := context.Background()
	id0 := one[int64](t, s.proxy, "SELECT jobs_enqueue('k', '{}', $1)", s.queueOnShard(t, "open", 0))
	session, err := s.proxy.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer session.Release()
	tx, err := session.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if st := one[string](t, tx, "SELECT state::text FROM jobs_get($1)", id0); st != "queued" {
		t.Fatalf("job %d: %s", id0, st)
	}

	s.addShardDB(t, 3)
	s.setShards(t)
	id3 := one[int64](t, s.shards[3], "SELECT jobs_enqueue('k', '{}', 'open-new')")

	// The transaction's PL/Proxy cluster may still be the 3-shard one, which would send
	// shard 3 to partition 3 % 3 = 0: the routing keeps the count of the transaction's
	// start, so the id is refused rather than answered by shard 0.
	var state *string
	err = tx.QueryRow(ctx, "SELECT state::text FROM jobs_get($1)", id3).Scan(&state)
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != "22023" {
		t.Errorf("jobs_get(%d) of shard 3 in a transaction opened before the shard was added: %v, %v; want 22023 (another shard answered)", id3, deref(state), err)
	}
	_ = tx.Rollback(ctx)
	// A new transaction of the same session routes it to shard 3.
	if st := one[string](t, session, "SELECT state::text FROM jobs_get($1)", id3); st != "queued" {
		t.Errorf("jobs_get(%d) in a new transaction: %s, want queued", id3, st)
	}
}
