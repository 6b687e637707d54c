package shardtest

import (
	"context"
	"io/fs"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/skiplock/skiplock"
)

// TestProxyInstallSQL: the script `skiplock sql --proxy --shards` prints makes an empty
// database a proxy of those shards, as MigrateProxy does, and MigrateProxy then finds
// nothing to do.
func TestProxyInstallSQL(t *testing.T) {
	s := newSharded(t, 2)
	ctx := context.Background()
	script, err := skiplock.ProxyInstallSQL(nil, s.shardURLs)
	if err != nil {
		t.Fatal(err)
	}
	admin, err := pgx.Connect(ctx, s.c.proxy.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(ctx)
	db := s.name + "_sql"
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{db}.Sanitize()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = admin.Exec(ctx, "DROP DATABASE "+pgx.Identifier{db}.Sanitize()+" WITH (FORCE)") })
	conn, err := pgx.Connect(ctx, s.c.proxy.URLFor(db))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, script, pgx.QueryExecModeSimpleProtocol); err != nil {
		t.Fatalf("the proxy install script: %v", err)
	}
	id := one[int64](t, conn, "SELECT jobs_enqueue('k', '{}', 'installed')")
	if n := one[int64](t, s.shards[shardOf(id)], "SELECT count(*) FROM jobs WHERE id = $1", id); n != 1 {
		t.Errorf("job %d is not on shard %d", id, shardOf(id))
	}
	if err := skiplock.MigrateProxy(ctx, conn, &skiplock.MigrateProxyOpts{Shards: s.shardURLs}); err != nil {
		t.Fatalf("MigrateProxy after the script: %v", err)
	}
	migrations, err := fs.Glob(skiplock.ProxyMigrations(), "*.sql")
	if err != nil {
		t.Fatal(err)
	}
	if v := one[int32](t, conn, "SELECT version FROM "+skiplock.ProxyVersionTable); v != int32(len(migrations)) {
		t.Errorf("proxy version %d, want %d (the newest proxy migration)", v, len(migrations))
	}
}
