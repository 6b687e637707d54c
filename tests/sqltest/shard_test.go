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

// TestRetryKeepsTheShard: jobs_set_shard's promise (every queued or running job's id names
// this shard) holds after it too: jobs_retry refuses a finished job created before the
// shard number was set, whose id names another shard (a router would send its completion
// there, and the job would run until dead again), and jobs_retry_many leaves such jobs
// alone with a WARNING; jobs whose id names this shard are retried as usual.
func TestRetryKeepsTheShard(t *testing.T) {
	t.Parallel()
	b := setup(t)
	dead := enqueue(t, b.Conn, "queue => 'a', max_attempts => 1") // id 1: names shard 1
	j := claimOne(t, b.Conn, "w", "a", "1 minute")
	mustExec(t, b.Conn, "SELECT jobs_fail($1, $2, 'boom')", dead, j.Attempt)
	cancelled := enqueue(t, b.Conn, "queue => 'a'") // id 2: names shard 2
	mustExec(t, b.Conn, "SELECT jobs_cancel($1)", cancelled)

	mustExec(t, b.Conn, "SELECT jobs_set_shard(5)")
	routable := enqueue(t, b.Conn, "queue => 'a', max_attempts => 1")
	j = claimOne(t, b.Conn, "w", "a", "1 minute")
	mustExec(t, b.Conn, "SELECT jobs_fail($1, $2, 'boom')", routable, j.Attempt)

	for _, id := range []int64{dead, cancelled} {
		_, err := b.Conn.Exec(t.Context(), "SELECT jobs_retry($1)", id)
		var pgErr *pgconn.PgError
		if !errors.As(err, &pgErr) || pgErr.Code != "55000" {
			t.Errorf("jobs_retry(%d) on shard 5: err = %v, want SQLSTATE 55000", id, err)
		}
	}
	if !queryOne[bool](t, b.Conn, "SELECT jobs_retry($1)", routable) {
		t.Fatalf("jobs_retry(%d), a job of shard 5, returned false", routable)
	}

	conn, warnings := connectWithWarnings(t, b)
	for _, call := range []string{
		"SELECT jobs_retry_many(states => '{dead, cancelled}')",
		"SELECT jobs_retry_many(ids => ARRAY[1, 2], states => '{dead, cancelled}')",
	} {
		if n := queryOne[int32](t, conn, call); n != 0 {
			t.Errorf("%s = %d, want 0", call, n)
		}
	}
	if w := warnings(); len(w) != 2 || !containsAll(w[0], "left 2 matching jobs alone (the lowest id 1)", "another shard than this one, 5") {
		t.Errorf("jobs_retry_many warnings %q, want one per call naming 2 jobs of other shards", w)
	}
	if got := queryOne[string](t, b.Conn, "SELECT string_agg(id || ':' || state, ' ' ORDER BY id) FROM jobs WHERE id % 1024 <> 5"); got != "1:dead 2:cancelled" {
		t.Errorf("jobs of other shards after the retries: %s, want 1:dead 2:cancelled", got)
	}
}
