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

// TestClaimShardErrorAfterClaims: when a shard asked by jobs_claim (queues NULL, every shard
// in turn from a random start) fails with an error other than being unreachable after other
// shards had already claimed jobs, the call returns those jobs, with a WARNING, instead of
// raising: every job left running on a shard is one the caller got. Shard 2 fails every
// claim (a trigger on jobs there), and the call is repeated until shard 2 has come after a
// claiming shard many times over.
func TestClaimShardErrorAfterClaims(t *testing.T) {
	s := newSharded(t, 3)
	ctx := context.Background()
	for _, sql := range []string{
		`CREATE FUNCTION boom() RETURNS trigger LANGUAGE plpgsql AS $$BEGIN RAISE EXCEPTION 'boom on shard 2'; END$$`,
		`CREATE TRIGGER boom BEFORE UPDATE ON jobs FOR EACH ROW EXECUTE FUNCTION boom()`,
	} {
		if _, err := s.shards[2].Exec(ctx, sql); err != nil {
			t.Fatal(err)
		}
	}
	got := map[int64]bool{}
	raised := 0
	for i := 0; i < 12; i++ {
		for shard := 0; shard < 3; shard++ {
			one[int64](t, s.shards[shard], "SELECT jobs_enqueue('k', '{}', 'halfway')")
		}
		rows, err := s.proxy.Query(ctx, "SELECT id FROM jobs_claim('w', 10)")
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			var id int64
			if err := rows.Scan(&id); err != nil {
				t.Fatal(err)
			}
			got[id] = true
		}
		if err := rows.Err(); err != nil {
			if !strings.Contains(err.Error(), "boom on shard 2") {
				t.Fatalf("claim %d: %v", i, err)
			}
			raised++ // shard 2 was asked first: nothing was claimed
		}
		running := 0
		for shard := 0; shard < 2; shard++ {
			running += int(one[int64](t, s.shards[shard], "SELECT count(*) FROM jobs WHERE state = 'running'"))
		}
		if running != len(got) {
			t.Fatalf("claim %d: %d jobs running on shards 0 and 1, the callers got %d", i, running, len(got))
		}
	}
	if raised == 12 {
		t.Fatal("shard 2 was asked first every time: the test proves nothing")
	}
}
