// Package security_test proves skiplock's least-privilege model on a real server: what the
// jobs_producer, jobs_worker and jobs_admin roles can and cannot do, that PUBLIC can call
// nothing, that the SECURITY DEFINER functions ignore objects planted on a caller's
// search_path, and that installing creates the roles safely. See docs/security.md.
package security_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/skiplock/skiplock/tests/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// testBundle is one test's database: its URL and a superuser pool to arrange and inspect it.
type testBundle struct {
	url   string
	super *pgxpool.Pool
}

func setup(t *testing.T) *testBundle {
	t.Helper()
	url := pgtest.NewDatabase(t)
	return &testBundle{url: url, super: pgtest.NewPool(t, url)}
}

// newLogin creates a LOGIN role with a unique name (roles are global to the cluster, and
// tests run in parallel), grants it the given roles and returns a URL that connects to the
// test's database as it. The role, and whatever it owns in the database, is dropped when the
// test ends, before the database itself.
func newLogin(t *testing.T, b *testBundle, prefix string, grants ...string) string {
	t.Helper()
	ctx := t.Context()
	name := prefix + "_" + randomHex(t, 6)
	password := randomHex(t, 16)
	if _, err := b.super.Exec(ctx, "CREATE ROLE "+pgx.Identifier{name}.Sanitize()+" LOGIN PASSWORD '"+password+"'"); err != nil {
		t.Fatalf("failed to create role %s: %v", name, err)
	}
	t.Cleanup(func() { dropRole(t, b.super, name) })
	for _, g := range grants {
		if _, err := b.super.Exec(ctx, "GRANT "+pgx.Identifier{g}.Sanitize()+" TO "+pgx.Identifier{name}.Sanitize()); err != nil {
			t.Fatalf("failed to grant %s to %s: %v", g, name, err)
		}
	}
	return userURL(t, b.url, name, password)
}

func dropRole(t *testing.T, pool *pgxpool.Pool, name string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	id := pgx.Identifier{name}.Sanitize()
	// DROP OWNED removes the role's objects and privileges in this database, the only one it
	// was used in; DROP ROLE then also removes its memberships.
	if _, err := pool.Exec(ctx, "DROP OWNED BY "+id); err != nil {
		t.Errorf("failed to drop objects of role %s: %v", name, err)
	}
	if _, err := pool.Exec(ctx, "DROP ROLE "+id); err != nil {
		t.Errorf("failed to drop role %s: %v", name, err)
	}
}

// userURL points dbURL, in URL or keyword/value form, at user and password.
func userURL(t *testing.T, dbURL, user, password string) string {
	t.Helper()
	if !strings.HasPrefix(dbURL, "postgres://") && !strings.HasPrefix(dbURL, "postgresql://") {
		// Later keywords win in keyword/value strings; user and password need no quoting.
		return dbURL + " user=" + user + " password=" + password
	}
	u, err := url.Parse(dbURL)
	if err != nil {
		t.Fatalf("failed to parse database URL: %v", err)
	}
	u.User = url.UserPassword(user, password)
	q := u.Query()
	q.Del("user")
	q.Del("password")
	u.RawQuery = q.Encode()
	return u.String()
}

func randomHex(t *testing.T, n int) string {
	t.Helper()
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// querier is a pool, a connection or a transaction.
type querier = pgtest.Querier

func scalar[T any](t *testing.T, q querier, sql string, args ...any) T {
	t.Helper()
	return pgtest.QueryOne[T](t, q, sql, args...)
}

func exec(t *testing.T, q querier, sql string, args ...any) {
	t.Helper()
	pgtest.MustExec(t, q, sql, args...)
}

// sqlState runs sql (rows are read and dropped) and returns the SQLSTATE it failed with, or
// "" when it succeeded.
func sqlState(t *testing.T, q querier, sql string, args ...any) string {
	t.Helper()
	// Exec reads the whole result, so errors raised while producing rows surface too.
	_, err := q.Exec(t.Context(), sql, args...)
	if err == nil {
		return ""
	}
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) {
		t.Fatalf("%s: %v", sql, err)
	}
	return pgErr.Code
}

// mustDeny checks that each statement fails with insufficient_privilege (42501).
func mustDeny(t *testing.T, q querier, stmts ...string) {
	t.Helper()
	for _, sql := range stmts {
		if code := sqlState(t, q, sql); code != "42501" {
			t.Errorf("%s: SQLSTATE %q, want 42501 (insufficient_privilege)", sql, code)
		}
	}
}

// mustAllow checks that each statement succeeds.
func mustAllow(t *testing.T, q querier, stmts ...string) {
	t.Helper()
	for _, sql := range stmts {
		if _, err := q.Exec(t.Context(), sql); err != nil {
			t.Errorf("%s: %v", sql, err)
		}
	}
}

// enqueue adds a job as the superuser and returns its id.
func enqueue(t *testing.T, b *testBundle, queue string) int64 {
	t.Helper()
	return scalar[int64](t, b.super, "SELECT jobs_enqueue('test', queue => $1)", queue)
}

// claim claims the given job as the superuser and returns its attempt.
func claim(t *testing.T, b *testBundle, queue string, id int64) int32 {
	t.Helper()
	var gotID int64
	var attempt int32
	if err := b.super.QueryRow(t.Context(), "SELECT id, attempt FROM jobs_claim('w', 1, ARRAY[$1])", queue).Scan(&gotID, &attempt); err != nil {
		t.Fatalf("failed to claim: %v", err)
	}
	if gotID != id {
		t.Fatalf("claimed job %d, want %d", gotID, id)
	}
	return attempt
}

func jobState(t *testing.T, b *testBundle, id int64) string {
	t.Helper()
	return scalar[string](t, b.super, "SELECT state::text FROM jobs WHERE id = $1", id)
}

// expireLease makes a running job's lease run out now, as time would: the job's lease and
// its claim's expires_at (jobs_requeue_expired looks at a claim once that has passed).
func expireLease(t *testing.T, b *testBundle, id int64) {
	t.Helper()
	exec(t, b.super, "UPDATE jobs SET lease_expires_at = now() - interval '1 second' WHERE id = $1", id)
	exec(t, b.super, "UPDATE jobs_claims c SET expires_at = now() - interval '1 second' FROM jobs j WHERE j.id = $1 AND c.claim_id = j.claim_id", id)
}
