package sqltest

import (
	"errors"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
)

// TestSetShard: after jobs_set_shard(n) every new job id has id % 1024 = n and is larger
// than every id before it; unfinished jobs that would be out of a router's reach block it.
func TestSetShard(t *testing.T) {
	t.Parallel()

	t.Run("NewIdsCarryTheShard", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		if queryOne[*int32](t, b.Conn, "SELECT jobs_shard()") != nil {
			t.Fatal("jobs_shard() is set on a fresh install")
		}
		before := enqueue(t, b.Conn, "queue => 'a'")
		claimed := claimOne(t, b.Conn, "w", "a", "1 minute")
		mustExec(t, b.Conn, "SELECT jobs_complete($1, $2)", claimed.ID, claimed.Attempt)

		mustExec(t, b.Conn, "SELECT jobs_set_shard(5)")
		if got := queryOne[int32](t, b.Conn, "SELECT jobs_shard()"); got != 5 {
			t.Fatalf("jobs_shard() = %d, want 5", got)
		}
		last := before
		for range 3 {
			id := enqueue(t, b.Conn, "queue => 'a'")
			if id%1024 != 5 || id <= last {
				t.Fatalf("id %d after jobs_set_shard(5) (previous %d): want id %% 1024 = 5 and increasing", id, last)
			}
			last = id
		}
		ids := queryList[int64](t, b.Conn, "SELECT jobs_enqueue_many(kinds => ARRAY['k', 'k'])")
		for _, id := range ids {
			if id%1024 != 5 || id <= last {
				t.Fatalf("jobs_enqueue_many id %d: want id %% 1024 = 5 and above %d", id, last)
			}
			last = id
		}

		// Again with the same shard: ids keep increasing (they never go back).
		mustExec(t, b.Conn, "SELECT jobs_set_shard(5)")
		if id := enqueue(t, b.Conn, "queue => 'a'"); id%1024 != 5 || id <= last {
			t.Fatalf("id %d after a second jobs_set_shard(5): want id %% 1024 = 5 and above %d", id, last)
		}
	})

	t.Run("RefusedWhileUnfinishedJobsWouldBeOutOfReach", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		enqueue(t, b.Conn, "queue => 'a'") // id 1: shard 1 would reach it, shard 2 not
		_, err := b.Conn.Exec(t.Context(), "SELECT jobs_set_shard(2)")
		var pgErr *pgconn.PgError
		if !errors.As(err, &pgErr) || pgErr.Code != "55000" {
			t.Fatalf("jobs_set_shard(2) with a queued job of id 1: err = %v, want SQLSTATE 55000", err)
		}
		if queryOne[*int32](t, b.Conn, "SELECT jobs_shard()") != nil {
			t.Fatal("the refused call set the shard")
		}
		// The job the refusal protected is untouched, and its own shard number is accepted.
		mustExec(t, b.Conn, "SELECT jobs_set_shard(1)")
		if id := enqueue(t, b.Conn, "queue => 'a'"); id%1024 != 1 {
			t.Fatalf("id %d after jobs_set_shard(1), want id %% 1024 = 1", id)
		}
	})
}
