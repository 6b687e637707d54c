package pgtest

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/skiplock/skiplock/internal/pglocal"
)

func TestMain(m *testing.M) { Main(m) }

const countSkiplockFunctions = `
SELECT count(*)
FROM pg_proc p
JOIN pg_namespace n ON n.oid = p.pronamespace
WHERE n.nspname = 'public'
  AND p.proname LIKE 'jobs\_%'`

func TestNewDatabaseIsolation(t *testing.T) {
	t.Parallel()
	// Each test makes the same table in its own database and sees only its
	// own row.
	for i := range 6 {
		t.Run(fmt.Sprint("Test", i), func(t *testing.T) {
			t.Parallel()
			pool := NewPool(t, NewDatabase(t))
			if n := QueryOne[int](t, pool, countSkiplockFunctions); n == 0 {
				t.Fatal("skiplock is not installed in schema public")
			}
			if _, err := pool.Exec(t.Context(), "CREATE TABLE same_name (i int)"); err != nil {
				t.Fatal(err)
			}
			if _, err := pool.Exec(t.Context(), "INSERT INTO same_name VALUES ($1)", i); err != nil {
				t.Fatal(err)
			}
			if got := QueryOne[string](t, pool, "SELECT string_agg(i::text, ',') FROM same_name"); got != fmt.Sprint(i) {
				t.Errorf("rows = %s, want %d", got, i)
			}
		})
	}
}

func TestNewDatabaseDroppedAtCleanup(t *testing.T) {
	t.Parallel()
	admin := NewPool(t, AdminURL(t))
	var name string
	t.Run("Make", func(t *testing.T) {
		pool := NewPool(t, NewDatabase(t))
		name = QueryOne[string](t, pool, "SELECT current_database()")
		// An open pool must not stop the drop.
	})
	if exists := QueryOne[bool](t, admin, "SELECT EXISTS (SELECT FROM pg_database WHERE datname = $1)", name); exists {
		t.Errorf("database %s still exists after its test ended", name)
	}
}

func TestNewEmptyDatabase(t *testing.T) {
	t.Parallel()
	pool := NewPool(t, NewEmptyDatabase(t))
	if n := QueryOne[int](t, pool, countSkiplockFunctions); n != 0 {
		t.Errorf("%d skiplock functions in an empty database", n)
	}
	if n := QueryOne[int](t, pool, "SELECT count(*) FROM pg_class WHERE relnamespace = 'public'::regnamespace"); n != 0 {
		t.Errorf("%d relations in schema public of an empty database", n)
	}
	conn := NewConn(t, NewEmptyDatabase(t))
	if got := conn.Config().Database; !strings.HasPrefix(got, "skiplock_test_") {
		t.Errorf("database name %q", got)
	}
}

func TestNewServer(t *testing.T) {
	t.Parallel()
	srv := NewServer(t)
	ctx := t.Context()
	pool, err := pgxpool.New(ctx, srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	if _, err := pool.Exec(ctx, "CREATE TABLE kept AS SELECT 1 AS i"); err != nil {
		t.Fatal(err)
	}
	if err := srv.Kill(ctx); err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if err := srv.Restart(ctx, pglocal.StopFast); err != nil {
		t.Fatal(err)
	}
	// The pool's old connections died with the server; it reconnects.
	pool.Reset()
	if n := QueryOne[int](t, pool, "SELECT count(*) FROM kept"); n != 1 {
		t.Errorf("%d rows after kill and restart, want 1", n)
	}
}

// TestDatabaseURL runs this package's other tests in a child process whose
// DATABASE_URL names a private server, then checks that the child left no
// database behind.
func TestDatabaseURL(t *testing.T) {
	t.Parallel()
	if os.Getenv("PGTEST_CHILD") != "" {
		t.Skip("already the child")
	}
	srv := NewServer(t)
	cmd := exec.CommandContext(t.Context(), os.Args[0],
		"-test.run=^(TestNewDatabaseIsolation|TestNewDatabaseDroppedAtCleanup|TestNewEmptyDatabase)$", "-test.v")
	cmd.Env = append(os.Environ(), "PGTEST_CHILD=1", "DATABASE_URL="+srv.URL())
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "pgtest: using DATABASE_URL") {
		t.Errorf("child did not use DATABASE_URL:\n%s", out)
	}

	pool, err := pgxpool.New(t.Context(), srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	left := QueryOne[string](t, pool, "SELECT coalesce(string_agg(datname, ', '), '') FROM pg_database WHERE datname LIKE 'skiplock%'")
	if left != "" {
		t.Errorf("databases left behind: %s", left)
	}
}

func TestDatabaseURLForms(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ admin, want string }{
		{"postgres://u:p@h:5/postgres?sslmode=disable", "postgres://u:p@h:5/x?sslmode=disable"},
		{"postgresql://h/postgres?dbname=postgres&sslmode=disable", "postgresql://h/x?sslmode=disable"},
		{"host=h user=u dbname=postgres", "host=h user=u dbname=postgres dbname='x'"},
	} {
		got, err := databaseURL(tc.admin, "x")
		if err != nil || got != tc.want {
			t.Errorf("databaseURL(%q) = %q, %v; want %q", tc.admin, got, err, tc.want)
		}
	}
	long := databaseName(strings.Repeat("TestSomething/With Spaces-", 10))
	if len(long) > 63 || !strings.HasPrefix(long, "skiplock_test_") || strings.ContainsAny(long, "/ -") {
		t.Errorf("databaseName = %q (%d bytes)", long, len(long))
	}
}

func TestDockerReachableDoesNotHang(t *testing.T) {
	t.Setenv("DOCKER_HOST", "tcp://127.0.0.1:1")
	if dockerReachable() {
		t.Error("a closed port counts as a Docker engine")
	}
}

// TestDockerContainer starts a container through the dockerpg module, as the shared server
// does when a Docker engine answers and DATABASE_URL is unset.
func TestDockerContainer(t *testing.T) {
	t.Parallel()
	if !dockerReachable() {
		t.Skip("no Docker engine answers at DOCKER_HOST or /var/run/docker.sock: " +
			"the testcontainers path (tests/pgtest/dockerpg) is not exercised on this machine")
	}
	url, stop, err := startContainer(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := stop(); err != nil {
			t.Error(err)
		}
	}()
	pool, err := pgxpool.New(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	if v := QueryOne[string](t, pool, "SHOW server_version"); !strings.HasPrefix(v, "15") {
		t.Errorf("server_version = %s, want the %s image's", v, containerImage)
	}
}
