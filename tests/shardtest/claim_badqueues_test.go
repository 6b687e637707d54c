package shardtest

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
)

// TestClaimNullQueueClaimsNothing: jobs_claim through the proxy with queues on several shards
// and a NULL among them raises 22023 naming queues, as one server does, before any shard has
// claimed a job (PL/Proxy passes on the message, not the COLUMN field): no job is left running (until its lease expires) by a call that failed. The
// shards are asked from a random start, so the call is repeated until the NULL's shard would
// have come after a good one many times over.
func TestClaimNullQueueClaimsNothing(t *testing.T) {
	s := newSharded(t, 3)
	ctx := context.Background()
	q1, q2 := s.queueOnShard(t, "nullq", 1), s.queueOnShard(t, "nullq", 2)
	for _, q := range []string{q1, q2} {
		if _, err := s.proxy.Exec(ctx, "SELECT jobs_enqueue_many(array_fill('k'::text, ARRAY[20]), NULL, array_fill($1::text, ARRAY[20]))", q); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < 12; i++ {
		_, err := s.proxy.Exec(ctx, "SELECT * FROM jobs_claim('w', 5, ARRAY[$1, $2, NULL])", q1, q2)
		var pgErr *pgconn.PgError
		if !errors.As(err, &pgErr) || pgErr.Code != "22023" || !strings.Contains(pgErr.Message, "queues") {
			t.Fatalf("claim %d with a NULL queue: got %v, want 22023 naming queues", i, err)
		}
		for shard := 1; shard <= 2; shard++ {
			if n := one[int64](t, s.shards[shard], "SELECT count(*) FROM jobs WHERE state = 'running'"); n != 0 {
				t.Fatalf("claim %d with a NULL queue failed but left %d jobs running on shard %d", i, n, shard)
			}
		}
	}
}
