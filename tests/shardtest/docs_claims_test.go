package shardtest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// TestEnqueueManyPartsCommitOnTheirOwn: docs/scaling.md, "jobs_enqueue_many across shards is
// not all or nothing": a bad element in shard 2's part raises after shard 0's and shard 1's
// parts went in (they stay), shard 2 gets none of its part, and the error names the
// element's index within its shard's part.
func TestEnqueueManyPartsCommitOnTheirOwn(t *testing.T) {
	s := newSharded(t, 3)
	ctx := context.Background()
	q0, q1, q2 := s.queueOnShard(t, "part", 0), s.queueOnShard(t, "part", 1), s.queueOnShard(t, "part", 2)
	// Shard 2's part is elements 2 and 4 of the call; its second one (index 2 within the
	// part) has an empty kind.
	_, err := s.proxy.Exec(ctx, "SELECT * FROM jobs_enqueue_many(ARRAY['a', 'b', 'c', 'd', ''], NULL, ARRAY[$1, $2, $3, $1, $3])", q0, q1, q2)
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != "22023" || !strings.Contains(pgErr.Message, "kinds[2]") {
		t.Fatalf("got %v, want 22023 naming kinds[2] (the index within shard 2's part)", err)
	}
	for shard, want := range []int64{2, 1, 0} {
		if n := one[int64](t, s.shards[shard], "SELECT count(*) FROM jobs"); n != want {
			t.Errorf("shard %d holds %d jobs after the failed call, want %d", shard, n, want)
		}
	}
}

// TestUnreachableShardIsNamed: docs/scaling.md: maintenance through the proxy and jobs_claim
// over every shard skip a shard that cannot be reached with a WARNING naming it, the other
// shards' work goes on, and jobs_metrics and jobs_stats fail rather than show a partial
// picture. The shard is made unreachable by moving it to a port nobody listens on.
func TestUnreachableShardIsNamed(t *testing.T) {
	s := newSharded(t, 2)
	ctx := context.Background()
	q0 := s.queueOnShard(t, "reach", 0)
	id := one[int64](t, s.proxy, "SELECT jobs_enqueue('k', '{}', $1)", q0)
	good := one[string](t, s.proxy, "SELECT o.option_value FROM pg_foreign_server s, pg_options_to_table(s.srvoptions) o WHERE s.srvname = 'skiplock_shards' AND o.option_name = 'p0'")
	if _, err := s.proxy.Exec(ctx, "SELECT jobs_proxy_set_shards(ARRAY[$1, 'host=127.0.0.1 port=1 dbname=gone connect_timeout=2'])", good); err != nil {
		t.Fatal(err)
	}

	cfg, err := pgx.ParseConfig(s.proxyURL)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var warnings []string
	cfg.OnNotice = func(_ *pgconn.PgConn, n *pgconn.Notice) {
		mu.Lock()
		defer mu.Unlock()
		warnings = append(warnings, n.Severity+": "+n.Message)
	}
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	warned := func(what string) {
		t.Helper()
		mu.Lock()
		defer mu.Unlock()
		for _, w := range warnings {
			if strings.HasPrefix(w, "WARNING: skiplock proxy: "+what+" skipped shard 1: ") && strings.Contains(w, "gone") {
				warnings = nil
				return
			}
		}
		t.Errorf("%s: no WARNING naming shard 1 and its database; got %q", what, warnings)
		warnings = nil
	}

	var claimed int64
	if err := conn.QueryRow(ctx, "SELECT id FROM jobs_claim('w', 5)").Scan(&claimed); err != nil || claimed != id {
		t.Fatalf("jobs_claim over both shards: %d, %v; want shard 0's job %d", claimed, err, id)
	}
	warned("jobs_claim")
	for _, call := range []string{"jobs_requeue_expired", "jobs_maintain", "jobs_schedule_tick"} {
		if _, err := conn.Exec(ctx, fmt.Sprintf("SELECT %s()", call)); err != nil {
			t.Errorf("%s with shard 1 unreachable: %v", call, err)
		}
		warned(call)
	}
	for _, call := range []string{"jobs_metrics", "jobs_stats"} {
		if _, err := conn.Exec(ctx, fmt.Sprintf("SELECT * FROM %s()", call)); err == nil || !strings.Contains(err.Error(), "gone") {
			t.Errorf("%s with shard 1 unreachable: %v, want an error naming its database", call, err)
		}
	}
}

// TestMismatchedShardIsNotSkipped: only a shard that cannot be reached is skipped by the
// proxy's loops over the shards; a shard that answers with something else than the proxy
// expects (here a jobs_claim of another shape, as after a skipped migration) makes
// jobs_claim fail, rather than leave that shard's jobs unclaimed behind a WARNING.
func TestMismatchedShardIsNotSkipped(t *testing.T) {
	s := newSharded(t, 2)
	ctx := context.Background()
	for _, sql := range []string{
		`ALTER FUNCTION jobs_claim(text, integer, text[], interval) RENAME TO jobs_claim_orig`,
		`CREATE FUNCTION jobs_claim(worker text, max_jobs integer DEFAULT 1, queues text[] DEFAULT NULL, lease interval DEFAULT '5 minutes')
		 RETURNS TABLE (id bigint) LANGUAGE sql AS $$ SELECT 1::bigint $$`,
	} {
		if _, err := s.shards[1].Exec(ctx, sql); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < 6; i++ {
		_, err := s.proxy.Exec(ctx, "SELECT * FROM jobs_claim('w', 5)")
		if err == nil {
			t.Fatalf("claim %d over a shard whose jobs_claim has another shape: no error (the shard was skipped)", i)
		}
	}
}
