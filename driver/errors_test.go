package driver_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/skiplock/skiplock/driver"
	"github.com/skiplock/skiplock/tests/pgtest"
)

// Run gives up, rather than retrying for ever, when claiming cannot work, and its error then
// matches ErrGaveUp with errors.Is while still carrying the database's error.
func TestRunGaveUp(t *testing.T) {
	t.Parallel()

	// runUntilGaveUp runs a client on pool and returns what Run returned, failing the test
	// when Run does not return on its own before the deadline or does not match ErrGaveUp.
	runUntilGaveUp := func(t *testing.T, pool *pgxpool.Pool) *pgconn.PgError {
		t.Helper()
		hs := driver.NewHandlers()
		driver.AddHandler(hs, "noop", func(ctx context.Context, job *driver.Job[struct{}]) error { return nil }, nil)
		client, err := driver.NewClient(pool, &driver.Config{
			Queues:   map[string]driver.QueueConfig{"default": {}},
			Handlers: hs,
			Logger:   testLogger(t),
		})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		err = client.Run(ctx)
		if ctx.Err() != nil {
			t.Fatalf("Run = %v after the deadline, want it to give up before", err)
		}
		if !errors.Is(err, driver.ErrGaveUp) {
			t.Fatalf("Run = %v, want an error matching ErrGaveUp", err)
		}
		var pgErr *pgconn.PgError
		if !errors.As(err, &pgErr) {
			t.Fatalf("Run = %v, want it to wrap the *pgconn.PgError", err)
		}
		t.Logf("Run: %v", err)
		return pgErr
	}

	t.Run("NotInstalled", func(t *testing.T) {
		t.Parallel()
		pool := newPool(t, pgtest.NewEmptyDatabase(t), 4)
		if pgErr := runUntilGaveUp(t, pool); pgErr.Code != "42883" && pgErr.Code != "42P01" && pgErr.Code != "42704" {
			t.Errorf("SQLSTATE %s, want undefined_function, undefined_table or undefined_object", pgErr.Code)
		}
	})

	t.Run("RoleMayNotClaim", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		// A login role with none of skiplock's roles: it may connect but not call jobs_claim.
		pool, err := loginPool(t, b, "driver_nobody_", "", 4)
		if err != nil {
			t.Skipf("cannot create a role on this server: %v", err)
		}
		if pgErr := runUntilGaveUp(t, pool); pgErr.Code != "42501" {
			t.Errorf("SQLSTATE %s, want 42501 (insufficient_privilege)", pgErr.Code)
		}
	})
}
