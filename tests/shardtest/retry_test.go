package shardtest

import (
	"context"
	"errors"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
)

// TestRetryKeepsJobsReachable: a job retried on a shard and then claimed and completed
// through the proxy completes on that shard. A finished job whose id names another shard
// (created before jobs_set_shard) cannot be retried: queued again, the proxy would send its
// completion to the shard its id names, and the job would run until dead again.
func TestRetryKeepsJobsReachable(t *testing.T) {
	s := newSharded(t, 2)
	ctx := context.Background()
	p, sh := s.proxy, s.shards[1]
	q := s.queueOnShard(t, "retry", 1)

	// Two dead jobs on shard 1, enqueued through the proxy; one then gets an id of shard 0,
	// as a job created before jobs_set_shard(1) may have.
	const strayID = 1024 * 1000
	var dead []int64
	for range 2 {
		dead = append(dead, one[int64](t, p, "SELECT jobs_enqueue('k', '{}', $1, max_attempts => 1)", q))
	}
	for range 2 {
		var id int64
		var attempt int32
		if err := p.QueryRow(ctx, "SELECT id, attempt FROM jobs_claim('w', 1, ARRAY[$1])", q).Scan(&id, &attempt); err != nil {
			t.Fatal(err)
		}
		if st := one[string](t, p, "SELECT jobs_fail($1, $2, 'boom')::text", id, attempt); st != "dead" {
			t.Fatalf("jobs_fail = %s, want dead", st)
		}
	}
	if _, err := sh.Exec(ctx, "UPDATE jobs SET id = $1 WHERE id = $2", strayID, dead[1]); err != nil {
		t.Fatal(err)
	}
	// The table that lists the dead jobs too, as if the job had been created with that id.
	if _, err := sh.Exec(ctx, "UPDATE jobs_dead_cancelled SET id = $1 WHERE id = $2", strayID, dead[1]); err != nil {
		t.Fatal(err)
	}

	// Through the proxy the id leads to shard 0, which does not hold the job.
	if one[bool](t, p, "SELECT jobs_retry($1)", strayID) {
		t.Fatalf("jobs_retry(%d) through the proxy returned true", strayID)
	}
	// On the shard (as the dashboard and the CLI retry): the stray job is refused.
	_, err := sh.Exec(ctx, "SELECT jobs_retry($1)", strayID)
	if err == nil {
		// What the refusal prevents: the proxy hands the job out, then sends its completion
		// to shard 0.
		var attempt int32
		if err := p.QueryRow(ctx, "SELECT attempt FROM jobs_claim('w', 10, NULL) WHERE id = $1", strayID).Scan(&attempt); err != nil {
			t.Fatal(err)
		}
		completed := one[bool](t, p, "SELECT jobs_complete($1, $2)", strayID, attempt)
		t.Fatalf("jobs_retry(%d) on shard 1 queued the job; claimed through the proxy, its jobs_complete returned %v "+
			"and it is %s on shard 1; want SQLSTATE 55000", strayID, completed,
			one[string](t, sh, "SELECT state::text FROM jobs WHERE id = $1", strayID))
	}
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != "55000" {
		t.Fatalf("jobs_retry(%d) on shard 1: err = %v, want SQLSTATE 55000", strayID, err)
	}
	if n := one[int32](t, sh, "SELECT jobs_retry_many(queue => $1)", q); n != 1 {
		t.Fatalf("jobs_retry_many on shard 1 retried %d jobs, want 1 (not the stray one)", n)
	}

	// The retried job goes through the proxy and completes on shard 1.
	var id int64
	var attempt int32
	if err := p.QueryRow(ctx, "SELECT id, attempt FROM jobs_claim('w', 10, NULL)").Scan(&id, &attempt); err != nil {
		t.Fatal(err)
	}
	if id != dead[0] || attempt != 2 {
		t.Fatalf("claimed job %d at attempt %d through the proxy, want job %d at attempt 2", id, attempt, dead[0])
	}
	if !one[bool](t, p, "SELECT jobs_complete($1, $2)", id, attempt) {
		t.Fatalf("jobs_complete(%d, 2) through the proxy returned false", id)
	}
	for _, c := range []struct {
		id   int64
		want string
	}{{dead[0], "done"}, {strayID, "dead"}} {
		if st := one[string](t, sh, "SELECT state::text FROM jobs WHERE id = $1", c.id); st != c.want {
			t.Errorf("job %d on shard 1 is %s, want %s", c.id, st, c.want)
		}
	}
	if n := one[int64](t, sh, "SELECT count(*) FROM jobs WHERE state IN ('queued', 'running')"); n != 0 {
		t.Errorf("%d jobs left queued or running on shard 1", n)
	}
}
