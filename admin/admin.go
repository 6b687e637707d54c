package admin

import (
	"context"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// DB is what the calls run on: a *pgxpool.Pool, a *pgx.Conn or a pgx.Tx. Through a pool each
// call commits on its own, as the SQL API asks of loops over the bulk functions
// (jobs_retry_many and its siblings); through a pgx.Tx the calls join that transaction.
type DB interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}

// Options configure [New]. The zero value calls the functions found on the connection's
// search_path.
type Options struct {
	// Schema is the schema skiplock is installed in. Defaults to empty: the connection's
	// search_path.
	Schema string
}

// Client calls skiplock's operator functions on a database. It holds no state of its own
// beyond the DB and the schema, so it is safe for concurrent use when its DB is (a pool is).
type Client struct {
	db     DB
	schema string
}

// New returns a Client calling the functions installed in opts.Schema through db. A nil opts
// is the zero Options.
func New(db DB, opts *Options) *Client {
	if opts == nil {
		opts = &Options{}
	}
	return &Client{db: db, schema: opts.Schema}
}

// fn is the schema-qualified, quoted name of a skiplock function or type.
func (c *Client) fn(name string) string {
	if c.schema == "" {
		return pgx.Identifier{name}.Sanitize()
	}
	return pgx.Identifier{c.schema, name}.Sanitize()
}
