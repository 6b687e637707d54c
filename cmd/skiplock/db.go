package main

import (
	"context"
	"flag"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// dbFlags are the connection flags of every command that talks to the database.
type dbFlags struct {
	url    string
	schema string
}

func (d *dbFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&d.url, "database-url", "", "PostgreSQL connection URL or DSN (default $DATABASE_URL, else the PG* variables: PGHOST, PGPORT, PGUSER, PGDATABASE, ...)")
	fs.StringVar(&d.schema, "schema", "", "schema skiplock is installed in (default: the connection's search_path, usually public)")
}

// connectTimeout bounds the connection attempt (not the command).
const connectTimeout = 30 * time.Second

// connect opens a session: --database-url, else $DATABASE_URL, else what the PG* variables
// and libpq's defaults say (pgx reads them). With --schema the session's search_path is that
// schema, so the commands call skiplock's functions unqualified.
func (d *dbFlags) connect(ctx context.Context, e *env) (*pgx.Conn, error) {
	url := d.url
	if url == "" {
		url = e.getenv("DATABASE_URL")
	}
	cfg, err := pgx.ParseConfig(url)
	if err != nil {
		return nil, usageErrorf("bad database URL: %w", err)
	}
	if d.schema != "" {
		cfg.RuntimeParams["search_path"] = pgx.Identifier{d.schema}.Sanitize()
	}
	// The server's WARNINGs tell what a call left undone (jobs_retry_many leaving jobs it
	// cannot retry, jobs_maintain skipping a step): the person running the command sees them.
	cfg.OnNotice = func(_ *pgconn.PgConn, n *pgconn.Notice) {
		if n.Severity != "WARNING" {
			return
		}
		fmt.Fprintf(e.stderr, "skiplock: warning: %s\n", n.Message)
		if n.Hint != "" {
			fmt.Fprintf(e.stderr, "skiplock: hint: %s\n", n.Hint)
		}
	}
	connectCtx, cancel := context.WithTimeout(ctx, connectTimeout)
	defer cancel()
	conn, err := pgx.ConnectConfig(connectCtx, cfg)
	if err != nil {
		return nil, fmt.Errorf("failed to connect: %w", err)
	}
	return conn, nil
}
