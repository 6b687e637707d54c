package shardtest

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/tern/v2/migrate"

	"github.com/skiplock/skiplock"
)

// lastReleasedProxy is the last proxy migration of the newest release (the third field of
// the last line of migrations/RELEASED).
func lastReleasedProxy(t *testing.T) int32 {
	t.Helper()
	b, err := os.ReadFile("../../migrations/RELEASED")
	if err != nil {
		t.Fatal(err)
	}
	var last []string
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) == 4 && !strings.HasPrefix(line, "#") {
			last = f
		}
	}
	if last == nil {
		t.Fatal("migrations/RELEASED lists no release")
	}
	n, err := strconv.Atoi(last[2])
	if err != nil {
		t.Fatalf("migrations/RELEASED, release %s: proxy migration %q: %v", last[0], last[2], err)
	}
	return int32(n)
}

// TestProxyUpgradeFromLastRelease: a proxy at the last released proxy migration, in front of
// shards already at the current version (shards first: docs/scaling.md, "Upgrading"), still
// enqueues, but its claims fail until MigrateProxy upgrades it, since the shards' jobs_claimed
// has more columns than the old proxy's type; the job such a claim took on its shard comes
// back when its lease expires. After the upgrade, in the same session, the job enqueued
// before it is claimed, completed with a result and releases a child enqueued with
// depends_on through the proxy.
func TestProxyUpgradeFromLastRelease(t *testing.T) {
	s := newSharded(t, 2)
	ctx := context.Background()
	released := lastReleasedProxy(t)

	admin, err := pgx.Connect(ctx, s.c.proxy.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(ctx)
	db := s.name + "_old"
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{db}.Sanitize()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = admin.Exec(ctx, "DROP DATABASE "+pgx.Identifier{db}.Sanitize()+" WITH (FORCE)") })
	conn, err := pgx.Connect(ctx, s.c.proxy.URLFor(db))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	m, err := migrate.NewMigrator(ctx, conn, skiplock.ProxyVersionTable)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.LoadMigrations(skiplock.ProxyMigrations()); err != nil {
		t.Fatal(err)
	}
	if err := m.MigrateTo(ctx, released); err != nil {
		t.Fatalf("proxy migrations up to the release's %d: %v", released, err)
	}
	connstrs := make([]string, len(s.shardURLs))
	for i, u := range s.shardURLs {
		if connstrs[i], err = skiplock.ProxyConnString(u); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := conn.Exec(ctx, "SELECT jobs_proxy_set_shards($1)", connstrs); err != nil {
		t.Fatal(err)
	}

	q := s.queueOnShard(t, "upgrade", 1)
	parent := one[int64](t, conn, "SELECT jobs_enqueue('parent', '{}', $1)", q)
	if shardOf(parent) != 1 {
		t.Fatalf("the released proxy put job %d on shard %d, want 1", parent, shardOf(parent))
	}
	// The shard claims the job and commits, then the proxy cannot take the row: the job
	// stays running, held by nobody, until its lease expires.
	_, err = conn.Exec(ctx, "SELECT * FROM jobs_claim('w', 1, ARRAY[$1], '1 millisecond')", q)
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != "XX000" || !strings.Contains(pgErr.Message, "Got too many fields") {
		t.Errorf("a claim through the released proxy in front of upgraded shards: got %v, want PL/Proxy's XX000 (too many fields)", err)
	}
	if st := one[string](t, s.shards[1], "SELECT state::text FROM jobs WHERE id = $1", parent); st != "running" {
		t.Errorf("after the failed claim the job is %s on its shard, want running (claimed there, lost on the way)", st)
	}

	if err := skiplock.MigrateProxy(ctx, conn, nil); err != nil {
		t.Fatalf("MigrateProxy from the release: %v", err)
	}
	migrations, err := fs.Glob(skiplock.ProxyMigrations(), "*.sql")
	if err != nil {
		t.Fatal(err)
	}
	if v := one[int32](t, conn, "SELECT version FROM "+skiplock.ProxyVersionTable); v != int32(len(migrations)) {
		t.Errorf("proxy version %d after MigrateProxy, want %d", v, len(migrations))
	}

	time.Sleep(20 * time.Millisecond)
	if n := one[int32](t, conn, "SELECT jobs_requeue_expired()"); n != 1 {
		t.Errorf("jobs_requeue_expired through the upgraded proxy = %d, want 1 (the claim the old proxy lost)", n)
	}
	child := one[int64](t, conn, "SELECT jobs_enqueue('child', '{}', $1, depends_on => ARRAY[$2::bigint])", q, parent)
	var id int64
	var attempt int32
	var parentResults *string
	if err := conn.QueryRow(ctx, "SELECT id, attempt, parent_results::text FROM jobs_claim('w', 1, ARRAY[$1])", q).
		Scan(&id, &attempt, &parentResults); err != nil || id != parent || parentResults != nil {
		t.Fatalf("claim through the upgraded proxy: job %d, parent_results %v, %v; want job %d, NULL", id, deref(parentResults), err, parent)
	}
	if !one[bool](t, conn, "SELECT jobs_complete($1, $2, '\"ok\"')", id, attempt) {
		t.Fatal("jobs_complete with a result through the upgraded proxy returned false")
	}
	if err := conn.QueryRow(ctx, "SELECT id, parent_results::text FROM jobs_claim('w', 1, ARRAY[$1])", q).
		Scan(&id, &parentResults); err != nil || id != child || deref(parentResults) != fmt.Sprintf(`{"%d": "ok"}`, parent) {
		t.Fatalf("the child through the upgraded proxy: job %d, parent_results %v, %v; want job %d with the parent's result", id, deref(parentResults), err, child)
	}
}
