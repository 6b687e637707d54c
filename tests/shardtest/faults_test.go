package shardtest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/skiplock/skiplock/internal/pglocal"
)

// TestShardDown stops one shard's cluster under a running proxy: calls for its jobs and
// queues fail with an error naming the shard's address, every other shard's calls go on
// (claims across shards skip the dead one), its jobs wait, and after its restart every job
// is done exactly once.
func TestShardDown(t *testing.T) {
	if testing.Short() {
		t.Skip("restarts a shard cluster; skipped under -short")
	}
	s := newSharded(t, shardClusters)
	ctx := context.Background()
	const down = 2
	const perShard = 30
	queues := make([]string, len(s.shards))
	for i := range s.shards {
		queues[i] = s.queueOnShard(t, "down", i)
		for k := 0; k < perShard; k++ {
			one[int64](t, s.proxy, "SELECT jobs_enqueue('k', '{}', $1)", queues[i])
		}
	}
	var heldID int64
	var heldAttempt int32
	if err := s.proxy.QueryRow(ctx, "SELECT id, attempt FROM jobs_claim('w', 1, ARRAY[$1])", queues[down]).Scan(&heldID, &heldAttempt); err != nil {
		t.Fatal(err)
	}
	completed := map[int64]int{}
	complete := func(id int64, attempt int32) error {
		var ok bool
		if err := s.proxy.QueryRow(ctx, "SELECT jobs_complete($1, $2)", id, attempt).Scan(&ok); err != nil {
			return err
		}
		if ok {
			completed[id]++
		}
		return nil
	}

	srv := s.c.shards[down]
	if err := srv.Stop(ctx, pglocal.StopFast); err != nil {
		t.Fatal(err)
	}
	restarted := false
	t.Cleanup(func() {
		if !restarted {
			_ = srv.Start(context.Background())
		}
	})
	// PL/Proxy's errors name the shard's database ("[name_s2] ..."); a new connection's
	// failure names its address too.
	db := fmt.Sprintf("[%s_s%d]", s.name, down)
	namesShard := func(what string, err error) {
		t.Helper()
		var pgErr *pgconn.PgError
		if !errors.As(err, &pgErr) || !strings.Contains(pgErr.Message, db) {
			t.Errorf("%s with shard %d down: got %v, want an error naming its database %s", what, down, err, db)
		}
	}

	// Calls for the dead shard fail, naming it: on one proxy session, first (when that session
	// had a connection to the shard) on the connection the shutdown ended, then on a new one,
	// which is refused.
	conn, err := s.proxy.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	_, err = conn.Exec(ctx, "SELECT jobs_complete($1, $2)", heldID, heldAttempt)
	namesShard("jobs_complete", err)
	_, err = conn.Exec(ctx, "SELECT jobs_complete($1, $2)", heldID, heldAttempt)
	conn.Release()
	namesShard("jobs_complete", err)
	if port := fmt.Sprintf("port %d", srv.Port()); err == nil || !strings.Contains(err.Error(), port) {
		t.Errorf("jobs_complete on a new connection to the stopped shard: got %v, want its address (%s)", err, port)
	}
	_, err = s.proxy.Exec(ctx, "SELECT jobs_enqueue('k', '{}', $1)", queues[down])
	namesShard("jobs_enqueue", err)
	_, err = s.proxy.Exec(ctx, "SELECT * FROM jobs_get($1)", heldID)
	namesShard("jobs_get", err)
	_, err = s.proxy.Exec(ctx, "SELECT * FROM jobs_metrics()")
	namesShard("jobs_metrics", err)

	// The others flow: enqueues, claims over every shard (skipping the dead one), completions.
	for i := range s.shards {
		if i != down {
			one[int64](t, s.proxy, "SELECT jobs_enqueue('k', '{}', $1)", queues[i])
		}
	}
	drain := func() int {
		n := 0
		for {
			rows, err := s.proxy.Query(ctx, "SELECT id, attempt FROM jobs_claim('w', 10)")
			if err != nil {
				t.Fatalf("jobs_claim over every shard: %v", err)
			}
			type job struct {
				id      int64
				attempt int32
			}
			var got []job
			for rows.Next() {
				var j job
				if err := rows.Scan(&j.id, &j.attempt); err != nil {
					t.Fatal(err)
				}
				got = append(got, j)
			}
			if err := rows.Err(); err != nil {
				t.Fatal(err)
			}
			if len(got) == 0 {
				return n
			}
			for _, j := range got {
				if !restarted && shardOf(j.id) == down {
					t.Fatalf("claimed job %d of the stopped shard", j.id)
				}
				if err := complete(j.id, j.attempt); err != nil {
					t.Fatalf("jobs_complete(%d): %v", j.id, err)
				}
				n++
			}
		}
	}
	if n := drain(); n != 3*(perShard+1) {
		t.Errorf("drained %d jobs from the live shards, want %d", n, 3*(perShard+1))
	}
	if ran := one[bool](t, s.proxy, "SELECT ran FROM jobs_maintain()"); !ran {
		t.Error("jobs_maintain did not run on the live shards")
	}

	// Back up: the dead shard's jobs waited, the held one is still held, nothing was lost.
	if err := srv.Start(ctx); err != nil {
		t.Fatal(err)
	}
	restarted = true
	s.shards[down].Reset() // the test's own pool held connections the stop ended
	if n := one[int64](t, s.shards[down], "SELECT count(*) FROM jobs WHERE state = 'queued'"); n != perShard-1 {
		t.Errorf("shard %d holds %d queued jobs after its restart, want %d", down, n, perShard-1)
	}
	if err := complete(heldID, heldAttempt); err != nil {
		t.Fatalf("jobs_complete of the held job after the restart: %v", err)
	}
	if n := drain(); n != perShard-1 {
		t.Errorf("drained %d jobs after the restart, want %d", n, perShard-1)
	}
	for id, n := range completed {
		if n != 1 {
			t.Errorf("job %d completed %d times", id, n)
		}
	}
	for i, sh := range s.shards {
		if n := one[int64](t, sh, "SELECT count(*) FROM jobs WHERE state <> 'done'"); n != 0 {
			t.Errorf("shard %d: %d jobs not done (lost)", i, n)
		}
	}
	if len(completed) != len(s.shards)*perShard+3 {
		t.Errorf("%d jobs completed, want %d", len(completed), len(s.shards)*perShard+3)
	}
}
