// Package shardtest checks the PL/Proxy side of a sharded skiplock (docs/scaling.md) on real
// clusters: one proxy cluster and four shard clusters (internal/pglocal), started once for
// the package. Each test makes its own proxy database and its own database on each shard
// cluster, so the tests share nothing but the clusters; they run one at a time (the restart
// test stops a shard cluster). The package skips, with one line, when PL/Proxy
// (Debian's postgresql-NN-plproxy) is not installed.
package shardtest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/skiplock/skiplock"
	"github.com/skiplock/skiplock/internal/pglocal"
)

// shardClusters is how many shard clusters the package starts: the 1 proxy + 4 shards.
const shardClusters = 4

// clusters are the package's servers, started by the first test that needs them.
type clusters struct {
	proxy  *pglocal.Server
	shards []*pglocal.Server
}

var (
	clustersOnce sync.Once
	clustersVal  *clusters
	clustersErr  error
	clustersSkip string
)

func TestMain(m *testing.M) {
	code := m.Run()
	if clustersVal != nil {
		for _, s := range append([]*pglocal.Server{clustersVal.proxy}, clustersVal.shards...) {
			if s == nil {
				continue
			}
			if err := s.Close(); err != nil {
				fmt.Fprintf(os.Stderr, "shardtest: %v\n", err)
				code = 1
			}
		}
	}
	os.Exit(code)
}

// getClusters starts (once) the proxy cluster, checks that PL/Proxy is available there, then
// starts the shard clusters and migrates a template database on each (skiplock on the shards,
// the proxy migrations on the proxy).
func getClusters(t *testing.T) *clusters {
	t.Helper()
	clustersOnce.Do(func() {
		clustersVal, clustersSkip, clustersErr = startClusters()
	})
	if clustersSkip != "" {
		t.Skip(clustersSkip)
	}
	if clustersErr != nil {
		t.Fatalf("shardtest: %v", clustersErr)
	}
	return clustersVal
}

const templateDB = "skiplock_template"

func startClusters() (*clusters, string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	settings := map[string]string{"fsync": "off", "max_connections": "100"}
	c := &clusters{}
	proxy, err := pglocal.Start(ctx, &pglocal.Options{Settings: settings})
	if errors.Is(err, pglocal.ErrBinariesNotFound) {
		return nil, fmt.Sprintf("no local PostgreSQL: %v", err), nil
	}
	if err != nil {
		return nil, "", err
	}
	clustersVal = c // closed by TestMain whatever happens next
	c.proxy = proxy
	conn, err := pgx.Connect(ctx, proxy.URL())
	if err != nil {
		return c, "", err
	}
	var available bool
	err = conn.QueryRow(ctx, "SELECT EXISTS (SELECT FROM pg_available_extensions WHERE name = 'plproxy')").Scan(&available)
	_ = conn.Close(ctx)
	if err != nil {
		return c, "", err
	}
	if !available {
		return c, "PL/Proxy is not installed (apt-get install postgresql-NN-plproxy; scripts/test does it as root)", nil
	}
	if err := makeTemplate(ctx, proxy, func(conn *pgx.Conn) error { return skiplock.MigrateProxy(ctx, conn, nil) }); err != nil {
		return c, "", fmt.Errorf("proxy template: %w", err)
	}
	for i := 0; i < shardClusters; i++ {
		s, err := pglocal.Start(ctx, &pglocal.Options{Settings: settings})
		if err != nil {
			return c, "", err
		}
		c.shards = append(c.shards, s)
		if err := makeTemplate(ctx, s, func(conn *pgx.Conn) error { return skiplock.Migrate(ctx, conn, nil) }); err != nil {
			return c, "", fmt.Errorf("shard %d template: %w", i, err)
		}
	}
	return c, "", nil
}

func makeTemplate(ctx context.Context, srv *pglocal.Server, migrate func(*pgx.Conn) error) error {
	admin, err := pgx.Connect(ctx, srv.URL())
	if err != nil {
		return err
	}
	defer admin.Close(ctx)
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+templateDB); err != nil {
		return err
	}
	conn, err := pgx.Connect(ctx, srv.URLFor(templateDB))
	if err != nil {
		return err
	}
	err = migrate(conn)
	_ = conn.Close(ctx)
	return err
}
