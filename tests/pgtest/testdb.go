package pgtest

import (
	"testing"

	"github.com/jackc/pgx/v5"
)

// TestDB is the standard per-test bundle of the SQL test packages: a database of the
// test's own with skiplock installed, and a session on it. Packages that need more (a
// pool, a logger, a PgBouncer) keep a bundle of their own.
type TestDB struct {
	// URL is the database's URL, for more sessions or pools.
	URL string
	// Conn is a session on the database, closed when the test ends.
	Conn *pgx.Conn
}

// NewTestDB creates the test's database (see NewDatabase) and opens a session on it.
// Everything is closed and dropped when the test ends.
func NewTestDB(t testing.TB) *TestDB {
	t.Helper()
	url := NewDatabase(t)
	return &TestDB{URL: url, Conn: NewConn(t, url)}
}

// Connect opens another session on the database, closed when the test ends.
func (db *TestDB) Connect(t testing.TB) *pgx.Conn {
	t.Helper()
	return NewConn(t, db.URL)
}
