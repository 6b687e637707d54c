package shardtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/skiplock/skiplock"
	"github.com/skiplock/skiplock/internal/pglocal"
)

// sharded is one test's sharded skiplock: a proxy database (named name) and one database per
// shard (name_sN, so that errors naming a shard's database tell the shards apart).
type sharded struct {
	c         *clusters
	name      string
	proxyURL  string
	proxy     *pgxpool.Pool // superuser pool on the proxy database
	shardURLs []string
	shards    []*pgxpool.Pool // superuser pools on the shard databases, shard i at index i
}

var nonWord = regexp.MustCompile(`[^a-z0-9]+`)

// newSharded creates the test's databases: shards 0..n-1 (on shard clusters 0..n-1, each
// made shard i with jobs_set_shard) and a proxy database routing to them.
func newSharded(t *testing.T, n int) *sharded {
	t.Helper()
	c := getClusters(t)
	suffix := make([]byte, 4)
	_, _ = rand.Read(suffix)
	name := nonWord.ReplaceAllString(strings.ToLower(t.Name()), "_")
	if len(name) > 40 {
		name = name[:40]
	}
	s := &sharded{c: c, name: name + "_" + hex.EncodeToString(suffix)}
	for i := 0; i < n; i++ {
		s.addShardDB(t, i)
	}
	s.proxyURL = s.createDB(t, c.proxy, s.name)
	s.proxy = newPool(t, s.proxyURL)
	s.setShards(t)
	return s
}

// addShardDB creates shard i's database on shard cluster i.
func (s *sharded) addShardDB(t *testing.T, i int) {
	t.Helper()
	url := s.createDB(t, s.c.shards[i], fmt.Sprintf("%s_s%d", s.name, i))
	pool := newPool(t, url)
	if _, err := pool.Exec(context.Background(), "SELECT jobs_set_shard($1)", i); err != nil {
		t.Fatalf("jobs_set_shard(%d): %v", i, err)
	}
	s.shardURLs = append(s.shardURLs, url)
	s.shards = append(s.shards, pool)
}

// setShards points the proxy at the shard databases (jobs_proxy_set_shards).
func (s *sharded) setShards(t *testing.T) {
	t.Helper()
	connstrs := make([]string, len(s.shardURLs))
	for i, u := range s.shardURLs {
		cs, err := skiplock.ProxyConnString(u)
		if err != nil {
			t.Fatal(err)
		}
		connstrs[i] = cs
	}
	if _, err := s.proxy.Exec(context.Background(), "SELECT jobs_proxy_set_shards($1)", connstrs); err != nil {
		t.Fatalf("jobs_proxy_set_shards: %v", err)
	}
	// Routing counts added shards in transactions that start a second after the change
	// (_jobs_proxy_shard_count); the first configuration counts at once.
	deadline := time.Now().Add(10 * time.Second)
	for one[int32](t, s.proxy, "SELECT _jobs_proxy_shard_count()") != int32(len(connstrs)) {
		if time.Now().After(deadline) {
			t.Fatalf("the proxy does not route to its %d shards 10s after jobs_proxy_set_shards", len(connstrs))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// createDB creates database name (from the template) on srv, dropped when the test ends.
func (s *sharded) createDB(t *testing.T, srv *pglocal.Server, name string) string {
	t.Helper()
	ctx := context.Background()
	admin, err := pgx.Connect(ctx, srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(ctx)
	db := pgx.Identifier{name}.Sanitize()
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+db+" TEMPLATE "+templateDB); err != nil {
		t.Fatalf("create database: %v", err)
	}
	t.Cleanup(func() {
		admin, err := pgx.Connect(ctx, srv.URL())
		if err != nil {
			return // the test stopped this cluster for good; TestMain removes it
		}
		defer admin.Close(ctx)
		if _, err := admin.Exec(ctx, "DROP DATABASE IF EXISTS "+db+" WITH (FORCE)"); err != nil {
			t.Errorf("drop database: %v", err)
		}
	})
	return srv.URLFor(name)
}

func newPool(t *testing.T, url string) *pgxpool.Pool {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxConns = 10
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// one runs a query returning one value.
func one[T any](t *testing.T, q interface {
	QueryRow(context.Context, string, ...any) pgx.Row
}, sql string, args ...any) T {
	t.Helper()
	var v T
	if err := q.QueryRow(context.Background(), sql, args...).Scan(&v); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return v
}

// shardOf is the shard a job id names.
func shardOf(id int64) int { return int(id % 1024) }

// queueOnShard returns a new queue name (prefix-N) that the proxy puts on the given shard,
// by asking its routing for names until one lands there. It pins nothing.
func (s *sharded) queueOnShard(t *testing.T, prefix string, shard int) string {
	t.Helper()
	for i := 0; i < 1000; i++ {
		q := prefix + "-" + strings.Repeat("x", i%3) + string(rune('a'+i%26)) + hex.EncodeToString([]byte{byte(i >> 8), byte(i)})
		if one[int32](t, s.proxy, "SELECT _jobs_proxy_queue_shard('test', $1, false)", q) == int32(shard) {
			return q
		}
	}
	t.Fatalf("no queue name lands on shard %d", shard)
	return ""
}
