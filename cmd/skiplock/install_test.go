package main

import (
	"strings"
	"testing"

	"github.com/skiplock/skiplock/tests/pgtest"
)

// TestMigrateShard: migrate --shard N migrates and makes the database shard N; the proxy
// flags are checked before anything runs (the proxy itself is tested in tests/shardtest).
func TestMigrateShard(t *testing.T) {
	t.Parallel()
	empty := pgtest.NewEmptyDatabase(t)
	if out := cli(t, empty, "migrate", "--shard", "5").ok(t); !strings.HasSuffix(out, ", shard 5\n") {
		t.Fatalf("migrate --shard 5: %q", out)
	}
	conn := pgtest.NewConn(t, empty)
	if n := pgtest.QueryOne[int32](t, conn, "SELECT jobs_shard()"); n != 5 {
		t.Fatalf("jobs_shard() = %d, want 5", n)
	}
	var id int64
	if err := conn.QueryRow(t.Context(), "SELECT jobs_enqueue('k')").Scan(&id); err != nil || id%1024 != 5 {
		t.Fatalf("job id %d (%v) does not carry shard 5", id, err)
	}
	cli(t, empty, "migrate", "--shard", "1024").fails(t, exitUsage, "--shard must be 0 to 1023")
	cli(t, empty, "migrate", "--shards", "postgres://x/y").fails(t, exitUsage, "--shards needs --proxy")
	cli(t, empty, "migrate", "--proxy", "--shard", "1").fails(t, exitUsage, "exclude each other")
	cli(t, empty, "sql", "--shards", "postgres://x/y").fails(t, exitUsage, "--shards needs --proxy")
	if out := cli(t, empty, "sql", "--proxy", "--shards", "postgres://h1/a,host=h2 dbname=b").ok(t); !strings.Contains(out, "SELECT jobs_proxy_set_shards(ARRAY['dbname=''a'' host=''h1''', 'host=h2 dbname=b']::text[]);") {
		t.Fatalf("sql --proxy --shards does not end by setting the shards:\n%s", out[max(0, len(out)-400):])
	}
}
