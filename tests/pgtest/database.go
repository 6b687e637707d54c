package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/skiplock/skiplock"
)

// processTag names this process's databases. The pid alone is not enough:
// test processes on several machines or containers may share one
// DATABASE_URL.
var processTag = func() string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return fmt.Sprintf("%d_%s", os.Getpid(), hex.EncodeToString(b))
}()

var (
	dbCounter atomic.Int64

	templateOnce sync.Once
	templateName string // set once the template exists; dropped by Main
	templateErr  error
)

// NewDatabase creates a database with skiplock installed in schema public
// and drops it when the test ends. It returns the database's URL.
//
// The first call of a process migrates a template database; each call then
// copies it with CREATE DATABASE ... TEMPLATE, which is much faster than
// migrating.
func NewDatabase(t testing.TB) string {
	t.Helper()
	srv := server(t)
	templateOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), setupTimeout)
		defer cancel()
		templateErr = createTemplate(ctx, srv)
	})
	if templateErr != nil {
		t.Fatalf("pgtest: %v", templateErr)
	}
	return newDatabase(t, srv, templateName)
}

// NewEmptyDatabase creates a database without skiplock, for migration
// tests, and drops it when the test ends. It returns the database's URL.
func NewEmptyDatabase(t testing.TB) string {
	t.Helper()
	return newDatabase(t, server(t), "template0")
}

func newDatabase(t testing.TB, srv *shared, template string) string {
	t.Helper()
	name := databaseName(t.Name())
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	sql := fmt.Sprintf("CREATE DATABASE %s TEMPLATE %s",
		pgx.Identifier{name}.Sanitize(), pgx.Identifier{template}.Sanitize())
	if _, err := srv.admin.Exec(ctx, sql); err != nil {
		t.Fatalf("pgtest: failed to create database %s: %v", name, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := dropDatabase(ctx, srv.admin, name); err != nil {
			t.Errorf("pgtest: %v", err)
		}
	})
	u, err := databaseURL(srv.adminURL, name)
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	return u
}

// createTemplate makes the database NewDatabase copies.
func createTemplate(ctx context.Context, srv *shared) error {
	name := "skiplock_tmpl_" + processTag
	if _, err := srv.admin.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()+" TEMPLATE template0"); err != nil {
		return fmt.Errorf("failed to create template database: %w", err)
	}
	templateName = name // from here on Main drops it, whatever happens next

	u, err := databaseURL(srv.adminURL, name)
	if err != nil {
		return err
	}
	conn, err := pgx.Connect(ctx, u)
	if err != nil {
		return fmt.Errorf("failed to connect to template database: %w", err)
	}
	err = skiplock.Migrate(ctx, conn, &skiplock.MigrateOpts{})
	if cerr := conn.Close(ctx); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("failed to install skiplock in template database: %w", err)
	}
	// A connection to the template, even autovacuum's, would make copies
	// fail; nobody has a reason to connect to it.
	if _, err := srv.admin.Exec(ctx, "ALTER DATABASE "+pgx.Identifier{name}.Sanitize()+" ALLOW_CONNECTIONS false"); err != nil {
		return fmt.Errorf("failed to close template database to connections: %w", err)
	}
	return nil
}

func dropDatabase(ctx context.Context, admin *pgxpool.Pool, name string) error {
	// FORCE: a test may end with connections still open, or leaked.
	if _, err := admin.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)"); err != nil {
		return fmt.Errorf("failed to drop database %s: %w", name, err)
	}
	return nil
}

// databaseName builds a unique database name that says which test made it,
// for whoever lists the databases of a shared server.
func databaseName(testName string) string {
	prefix := fmt.Sprintf("skiplock_test_%s_%d_", processTag, dbCounter.Add(1))
	var b strings.Builder
	b.WriteString(prefix)
	for _, r := range strings.ToLower(testName) {
		if b.Len() >= 63 { // NAMEDATALEN - 1
			break
		}
		if (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9') {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
		}
	}
	return b.String()
}

// databaseURL points adminURL, in URL or keyword/value form, at dbname.
func databaseURL(adminURL, dbname string) (string, error) {
	if !strings.HasPrefix(adminURL, "postgres://") && !strings.HasPrefix(adminURL, "postgresql://") {
		// Later keywords win in keyword/value strings.
		return adminURL + " dbname='" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(dbname) + "'", nil
	}
	u, err := url.Parse(adminURL)
	if err != nil {
		return "", fmt.Errorf("failed to parse server URL: %w", err)
	}
	u.Path = "/" + dbname
	u.RawPath = ""
	if q := u.Query(); q.Has("dbname") {
		q.Del("dbname")
		u.RawQuery = q.Encode()
	}
	return u.String(), nil
}
