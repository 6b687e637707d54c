package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"math"

	"github.com/jackc/pgx/v5"

	"github.com/skiplock/skiplock"
)

var migrateCommand = &command{
	name:     "migrate",
	synopsis: "[flags]",
	summary:  "apply skiplock's migrations up to the latest version (idempotent)",
	help: `Applies every migration the database lacks, in one transaction each, and prints the
installed version. Running it again changes nothing. With --schema, skiplock is installed in
that schema (created if missing). Needs the privileges of the schema's owner.

Output: "skiplock schema is at version N".
`,
	db: true,
	setup: func(fs *flag.FlagSet) func(context.Context, *call) error {
		return func(ctx context.Context, c *call) error {
			if len(c.args) > 0 {
				return usageErrorf("migrate: unexpected argument %q", c.args[0])
			}
			schema := schemaFlag(fs)
			if err := skiplock.Migrate(ctx, c.conn, &skiplock.MigrateOpts{Schema: schema}); err != nil {
				return err
			}
			table := pgx.Identifier{skiplock.VersionTable}
			if schema != "" {
				table = pgx.Identifier{schema, skiplock.VersionTable}
			}
			var version int32
			if err := c.conn.QueryRow(ctx, "SELECT version FROM "+table.Sanitize()).Scan(&version); err != nil {
				return fmt.Errorf("failed to read installed version: %w", err)
			}
			_, err := fmt.Fprintf(c.stdout, "skiplock schema is at version %d\n", version)
			return err
		}
	},
}

// schemaFlag reads --schema back from a parsed flag set.
func schemaFlag(fs *flag.FlagSet) string {
	if f := fs.Lookup("schema"); f != nil {
		return f.Value.String()
	}
	return ""
}

var sqlCommand = &command{
	name:     "sql",
	synopsis: "[--schema NAME] [--from N]",
	summary:  "print the complete install SQL (for psql or another migration tool)",
	help: `Prints one script that installs skiplock (or, with --from, upgrades it from that
installed version) in a single transaction; it refuses to run against a database at another
version. Needs no database.

  skiplock sql | psql "$DATABASE_URL"
`,
	setup: func(fs *flag.FlagSet) func(context.Context, *call) error {
		schema := fs.String("schema", "", "schema to install into (default: the session's current schema, usually public)")
		from := fs.Int("from", 0, "installed version to upgrade from (0: a fresh install)")
		return func(_ context.Context, c *call) error {
			if len(c.args) > 0 {
				return usageErrorf("sql: unexpected argument %q", c.args[0])
			}
			if *from < 0 || *from > math.MaxInt32 {
				return usageErrorf("sql: --from must be an installed version (0 or more), got %d", *from)
			}
			script, err := skiplock.InstallSQL(&skiplock.InstallSQLOpts{Schema: *schema, FromVersion: int32(*from)})
			if err != nil {
				return &exitError{code: exitUsage, err: fmt.Errorf("sql: %w", err)}
			}
			_, err = io.WriteString(c.stdout, script)
			return err
		}
	},
}
