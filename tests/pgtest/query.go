package pgtest

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// The helpers run their statements under context.Background(), not t.Context(), so that
// they work in cleanups too, after t.Context() is cancelled.

// Querier is what the query helpers run statements on: a *pgx.Conn, a *pgxpool.Pool or a
// pgx.Tx (the same methods as driver.Executor).
type Querier interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// MustExec runs sql, failing the test if it fails.
func MustExec(t testing.TB, q Querier, sql string, args ...any) {
	t.Helper()
	if _, err := q.Exec(context.Background(), sql, args...); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

// QueryOne runs a query returning one row of one value and returns the value, failing the
// test if the query fails or returns no row.
func QueryOne[T any](t testing.TB, q Querier, sql string, args ...any) T {
	t.Helper()
	var v T
	if err := q.QueryRow(context.Background(), sql, args...).Scan(&v); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return v
}

// QueryList runs a query returning rows of one value and returns the values in order,
// failing the test if the query fails.
func QueryList[T any](t testing.TB, q Querier, sql string, args ...any) []T {
	t.Helper()
	rows, err := q.Query(context.Background(), sql, args...)
	if err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	list, err := pgx.CollectRows(rows, pgx.RowTo[T])
	if err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return list
}
