// Package pgtest gives each Go test its own PostgreSQL database.
//
// A test package's TestMain calls [Main]; its tests call [NewDatabase] (a
// fresh database with skiplock installed) or [NewEmptyDatabase], then
// [NewPool]. Crash tests, which must stop and restart the server, take a
// private cluster from [NewServer].
//
// The shared server is chosen once per test process, on first use:
//
//  1. DATABASE_URL, if set: an existing server, reached as a user that can
//     CREATE DATABASE. Databases made here are dropped again.
//  2. Otherwise, if a Docker engine answers within two seconds, a postgres:15
//     container started with testcontainers-go by the dockerpg program
//     (tests/pgtest/dockerpg, a module of its own so that its dependencies stay
//     out of skiplock's go.mod), which pgtest runs with `go run`.
//  3. Otherwise a throwaway local cluster from internal/pglocal, with fsync
//     off: tests crash processes, not machines, so they lose nothing by it.
//
// It is also the test-support layer the test packages share: [NewTestDB] (the
// standard per-test bundle: a database and a session on it), the [Querier]
// helpers [MustExec], [QueryOne] and [QueryList], [RequirePgError], [WaitFor]
// and [NewLogWriter]. A package keeps a bundle of its own only for what is
// particular to it.
//
// Every helper is safe to call from parallel tests.
//
// It is test support, not an API of skiplock: it lives under tests/ rather than internal/
// only so that the tests of the nested modules (contrib/prometheus, contrib/otel,
// tests/cronoracle, ui/browsertest) can import it, and it makes no compatibility promise.
package pgtest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/skiplock/skiplock/internal/pglocal"
)

// setupTimeout bounds choosing and starting the shared server, which may
// include pulling an image.
const setupTimeout = 5 * time.Minute

// testSettings make the clusters pgtest starts faster without changing what
// any test can observe short of a power cut.
var testSettings = map[string]string{"fsync": "off"}

// shared is the server every test of this process uses.
type shared struct {
	adminURL string
	admin    *pgxpool.Pool
	stop     func() error // stops what this process started; nil for DATABASE_URL
}

var (
	mainCalled atomic.Bool

	sharedOnce sync.Once
	sharedSrv  *shared
	sharedErr  error
)

// Main runs the package's tests and then tears down whatever pgtest started:
// the template database and, unless DATABASE_URL was used, the server.
// Call it from TestMain:
//
//	func TestMain(m *testing.M) { pgtest.Main(m) }
func Main(m *testing.M) {
	mainCalled.Store(true)
	code := m.Run()
	if err := teardown(); err != nil {
		fmt.Fprintf(os.Stderr, "pgtest: %v\n", err)
		if code == 0 {
			code = 1
		}
	}
	os.Exit(code)
}

// teardown runs after every test has finished, so nothing races with it.
func teardown() error {
	if sharedSrv == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var errs []error
	if templateName != "" {
		if err := dropDatabase(ctx, sharedSrv.admin, templateName); err != nil {
			errs = append(errs, err)
		}
	}
	sharedSrv.admin.Close()
	if sharedSrv.stop != nil {
		if err := sharedSrv.stop(); err != nil {
			errs = append(errs, fmt.Errorf("failed to stop test server: %w", err))
		}
	}
	return errors.Join(errs...)
}

// server returns the shared server, starting it on first use.
func server(t testing.TB) *shared {
	t.Helper()
	if !mainCalled.Load() {
		t.Fatal("pgtest: the package's TestMain must call pgtest.Main(m), which tears down the test server")
	}
	sharedOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), setupTimeout)
		defer cancel()
		sharedSrv, sharedErr = startShared(ctx)
	})
	if sharedErr != nil {
		t.Fatalf("pgtest: %v", sharedErr)
	}
	return sharedSrv
}

func startShared(ctx context.Context) (*shared, error) {
	var s shared
	var where string
	switch {
	case os.Getenv("DATABASE_URL") != "":
		s.adminURL = os.Getenv("DATABASE_URL")
		where = "DATABASE_URL"
	case dockerReachable():
		url, stop, err := startContainer(ctx)
		if err == nil {
			s.adminURL, s.stop = url, stop
			where = "a " + containerImage + " container at " + url
			break
		}
		// An engine that cannot pull or run the image is no reason to fail
		// when a local cluster would do.
		fmt.Fprintf(os.Stderr, "pgtest: failed to start a %s container, falling back to a local cluster: %v\n", containerImage, err)
		fallthrough
	default:
		srv, err := pglocal.Start(ctx, &pglocal.Options{Settings: testSettings})
		if err != nil {
			return nil, err
		}
		s.adminURL, s.stop = srv.URL(), srv.Close
		where = "a local cluster at " + srv.URL() + " (data in " + srv.DataDir() + ")"
	}

	cfg, err := pgxpool.ParseConfig(s.adminURL)
	if err == nil {
		// CREATE and DROP DATABASE only; parallel tests queue briefly.
		cfg.MaxConns = 4
		s.admin, err = pgxpool.NewWithConfig(ctx, cfg)
	}
	if err == nil {
		err = s.admin.Ping(ctx)
	}
	if err != nil {
		if s.admin != nil {
			s.admin.Close()
		}
		if s.stop != nil {
			_ = s.stop()
		}
		return nil, fmt.Errorf("failed to connect to test server (%s): %w", where, err)
	}
	fmt.Fprintf(os.Stderr, "pgtest: using %s\n", where)
	return &s, nil
}

// AdminURL is the URL of the shared server's maintenance database, as a
// user that may create databases. Tests should not create objects there.
func AdminURL(t testing.TB) string {
	t.Helper()
	return server(t).adminURL
}

// NewPool opens a pool to url and closes it when the test ends.
func NewPool(t testing.TB, url string) *pgxpool.Pool {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		t.Fatalf("pgtest: failed to create pool: %v", err)
	}
	t.Cleanup(pool.Close)
	if err := pool.Ping(ctx); err != nil {
		t.Fatalf("pgtest: failed to connect: %v", err)
	}
	return pool
}

// NewConn opens a connection to url and closes it when the test ends.
func NewConn(t testing.TB, url string) *pgx.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatalf("pgtest: failed to connect: %v", err)
	}
	t.Cleanup(func() { _ = conn.Close(context.Background()) })
	return conn
}

// NewServer starts a private local cluster for one test and closes it when
// the test ends. It is always a pglocal cluster, even with DATABASE_URL set,
// because its test may stop, kill and restart it. The test is skipped when
// no PostgreSQL binaries can be found (see [pglocal.FindBinaries]).
func NewServer(t testing.TB) *pglocal.Server {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), setupTimeout)
	defer cancel()
	srv, err := pglocal.Start(ctx, &pglocal.Options{Settings: testSettings, Logf: t.Logf})
	if errors.Is(err, pglocal.ErrBinariesNotFound) {
		t.Skipf("pgtest: no local PostgreSQL for a private server: %v", err)
	}
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	t.Cleanup(func() {
		if err := srv.Close(); err != nil {
			t.Errorf("pgtest: %v", err)
		}
	})
	return srv
}

// RequirePgError checks that err is a PostgreSQL error with SQLSTATE code and returns it.
func RequirePgError(t testing.TB, err error, code string) *pgconn.PgError {
	t.Helper()
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) {
		t.Fatalf("got error %v, want a PostgreSQL error with SQLSTATE %s", err, code)
	}
	if pgErr.Code != code {
		t.Fatalf("got SQLSTATE %s (%s), want %s", pgErr.Code, pgErr.Message, code)
	}
	return pgErr
}

// WaitFor polls cond every 10ms until it holds, failing the test after timeout. what
// names the awaited condition in the failure.
func WaitFor(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
