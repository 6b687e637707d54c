package shardtest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

// TestExactlyOnceAcrossShards: 8 workers claim and complete through the proxy, all at once,
// jobs spread over every shard: each job is claimed once and completed once, none is left.
func TestExactlyOnceAcrossShards(t *testing.T) {
	s := newSharded(t, shardClusters)
	ctx := context.Background()
	const perShard = 150
	for i := range s.shards {
		q := s.queueOnShard(t, "once", i)
		kinds := make([]string, perShard)
		for k := range kinds {
			kinds[k] = "once"
		}
		if _, err := s.proxy.Exec(ctx, "SELECT count(*) FROM jobs_enqueue_many($1, NULL, array_fill($2::text, ARRAY[$3::integer]))", kinds, q, perShard); err != nil {
			t.Fatal(err)
		}
	}
	total := perShard * len(s.shards)

	var mu sync.Mutex
	claims := map[int64]int{}
	completions := map[int64]int{}
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			worker := fmt.Sprintf("w%d", w)
			empty := 0
			for empty < 3 {
				rows, err := s.proxy.Query(ctx, "SELECT id, attempt FROM jobs_claim($1, 5)", worker)
				if err != nil {
					errs <- err
					return
				}
				type job struct {
					id      int64
					attempt int32
				}
				var got []job
				for rows.Next() {
					var j job
					if err := rows.Scan(&j.id, &j.attempt); err != nil {
						errs <- err
						return
					}
					got = append(got, j)
				}
				if err := rows.Err(); err != nil {
					errs <- err
					return
				}
				if len(got) == 0 {
					empty++
					continue
				}
				empty = 0
				for _, j := range got {
					mu.Lock()
					claims[j.id]++
					mu.Unlock()
					var ok bool
					if err := s.proxy.QueryRow(ctx, "SELECT jobs_complete($1, $2)", j.id, j.attempt).Scan(&ok); err != nil {
						errs <- err
						return
					}
					if ok {
						mu.Lock()
						completions[j.id]++
						mu.Unlock()
					}
				}
			}
		}(w)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	for id, n := range claims {
		if n != 1 {
			t.Errorf("job %d claimed %d times", id, n)
		}
		if completions[id] != 1 {
			t.Errorf("job %d completed %d times", id, completions[id])
		}
	}
	if len(claims) != total {
		t.Errorf("claimed %d distinct jobs, want %d", len(claims), total)
	}
	for i, sh := range s.shards {
		if n := one[int64](t, sh, "SELECT count(*) FROM jobs WHERE state <> 'done'"); n != 0 {
			t.Errorf("shard %d: %d jobs not done", i, n)
		}
		if n := one[int64](t, sh, "SELECT count(*) FROM jobs WHERE state = 'done'"); n != perShard {
			t.Errorf("shard %d: %d jobs done, want %d", i, n, perShard)
		}
	}
}

// TestFencingAcrossShards: a job whose lease expired and that was claimed again holds a new
// attempt; the stale attempt is refused through the proxy, on every shard.
func TestFencingAcrossShards(t *testing.T) {
	s := newSharded(t, shardClusters)
	for i := range s.shards {
		q := s.queueOnShard(t, "fence", i)
		id := one[int64](t, s.proxy, "SELECT jobs_enqueue('k', '{}', $1)", q)
		if a := one[int32](t, s.proxy, "SELECT attempt FROM jobs_claim('old', 1, ARRAY[$1], '1 millisecond')", q); a != 1 {
			t.Fatalf("first attempt %d", a)
		}
		time.Sleep(5 * time.Millisecond)
		one[int32](t, s.proxy, "SELECT jobs_requeue_expired()")
		if a := one[int32](t, s.proxy, "SELECT attempt FROM jobs_claim('new', 1, ARRAY[$1])", q); a != 2 {
			t.Fatalf("shard %d: second claim got attempt %d, want 2", i, a)
		}
		for _, call := range []string{
			"SELECT jobs_complete($1, 1)",
			"SELECT jobs_heartbeat($1, 1)",
			"SELECT jobs_snooze($1, 1, now())",
			"SELECT jobs_cancel($1, 1, 'stale')",
			"SELECT count(*) > 0 FROM jobs_complete_many(ARRAY[$1::bigint], ARRAY[1])",
		} {
			if one[bool](t, s.proxy, call, id) {
				t.Errorf("shard %d: %s with the stale attempt 1 succeeded", i, call)
			}
		}
		if st := one[*string](t, s.proxy, "SELECT jobs_fail($1, 1, 'stale')::text", id); st != nil {
			t.Errorf("shard %d: stale jobs_fail answered %s, want NULL", i, *st)
		}
		if !one[bool](t, s.proxy, "SELECT jobs_complete($1, 2)", id) {
			t.Errorf("shard %d: the current attempt 2 was refused", i)
		}
	}
}

// TestUnmappedID: an id whose low bits name no configured shard is a 22023 naming the
// parameter, from every id-taking function, and no shard is asked.
func TestUnmappedID(t *testing.T) {
	s := newSharded(t, 2)
	ctx := context.Background()
	good := one[int64](t, s.proxy, "SELECT jobs_enqueue('k', '{}', $1)", s.queueOnShard(t, "unmapped", 1))
	unmapped := int64(1024*7 + 3) // shard 3 of a 2-shard proxy
	for _, c := range []struct{ sql, column string }{
		{"SELECT jobs_complete($1, 1)", "id"},
		{"SELECT jobs_fail($1, 1, 'x')", "id"},
		{"SELECT jobs_heartbeat($1, 1)", "id"},
		{"SELECT jobs_snooze($1, 1, now())", "id"},
		{"SELECT jobs_cancel($1)", "id"},
		{"SELECT jobs_cancel($1, 1, 'x')", "id"},
		{"SELECT jobs_retry($1)", "id"},
		{"SELECT * FROM jobs_get($1)", "id"},
		{"SELECT * FROM jobs_inspect($1)", "id"},
		{"SELECT * FROM jobs_complete_many(ARRAY[$2::bigint, $1::bigint], ARRAY[1, 1])", "ids"},
		{"SELECT * FROM jobs_heartbeat_many(ARRAY[$2::bigint, $1::bigint], ARRAY[1, 1])", "ids"},
		{"SELECT * FROM jobs_claim_on(($1 % 1024)::integer, 'w')", "shard"},
	} {
		args := []any{unmapped}
		if strings.Contains(c.sql, "$2") {
			args = append(args, good)
		}
		_, err := s.proxy.Exec(ctx, c.sql, args...)
		var pgErr *pgconn.PgError
		if !errors.As(err, &pgErr) || pgErr.Code != "22023" || pgErr.ColumnName != c.column {
			t.Errorf("%s: got %v, want 22023 naming %s", c.sql, err, c.column)
		}
	}
	// The good id of the failed batch calls was not touched.
	if st := one[string](t, s.shards[1], "SELECT state::text FROM jobs WHERE id = $1", good); st != "queued" {
		t.Errorf("the good job is %s", st)
	}
}
