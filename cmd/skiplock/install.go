package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"math"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/skiplock/skiplock"
)

var migrateCommand = &command{
	name:     "migrate",
	synopsis: "[--shard N | --proxy [--shards URL,URL,...]] [flags]",
	summary:  "apply skiplock's migrations up to the latest version (idempotent)",
	help: `Applies every migration the database lacks, in one transaction each, and prints the
installed version. Running it again changes nothing. With --schema, skiplock is installed in
that schema (created if missing). Needs the privileges of the schema's owner.

Sharding (docs/scaling.md): --shard N migrates, then makes the database shard N
(jobs_set_shard: every new job id carries N in its low 10 bits). --proxy installs the
PL/Proxy side instead (its own migrations; needs a superuser for the plproxy extension), and
--shards sets the shards it routes to, shard 0 first, as postgres:// URLs or libpq
key=value strings; a longer list later adds shards (existing ones are never removed).

  skiplock migrate --database-url "$SHARD0_URL" --shard 0
  skiplock migrate --database-url "$PROXY_URL" --proxy --shards "$SHARD0_URL,$SHARD1_URL"

Output: "skiplock schema is at version N" ("skiplock proxy schema is at version N, M
shards" with --proxy).
`,
	db: true,
	setup: func(fs *flag.FlagSet) func(context.Context, *call) error {
		shard := fs.Int("shard", -1, "make the database shard N (0 to 1023) after migrating (default: not a shard)")
		proxy := fs.Bool("proxy", false, "install the PL/Proxy side of a sharded skiplock instead (docs/scaling.md)")
		shards := fs.String("shards", "", "with --proxy: the shards' connection URLs, comma-separated, shard 0 first")
		return func(ctx context.Context, c *call) error {
			if len(c.args) > 0 {
				return usageErrorf("migrate: unexpected argument %q", c.args[0])
			}
			schema := schemaFlag(fs)
			if *proxy {
				return migrateProxy(ctx, c, schema, *shard, *shards)
			}
			if *shards != "" {
				return usageErrorf("migrate: --shards needs --proxy")
			}
			if *shard < -1 || *shard > 1023 {
				return usageErrorf("migrate: --shard must be 0 to 1023, got %d", *shard)
			}
			if err := skiplock.Migrate(ctx, c.conn, &skiplock.MigrateOpts{Schema: schema}); err != nil {
				return err
			}
			if *shard >= 0 {
				if _, err := c.conn.Exec(ctx, "SELECT "+qualified(schema, "jobs_set_shard")+"($1)", *shard); err != nil {
					return fmt.Errorf("failed to make the database shard %d: %w", *shard, err)
				}
			}
			version, err := readVersion(ctx, c, schema, skiplock.VersionTable)
			if err != nil {
				return err
			}
			if *shard >= 0 {
				_, err = fmt.Fprintf(c.stdout, "skiplock schema is at version %d, shard %d\n", version, *shard)
				return err
			}
			_, err = fmt.Fprintf(c.stdout, "skiplock schema is at version %d\n", version)
			return err
		}
	},
}

// migrateProxy is migrate --proxy.
func migrateProxy(ctx context.Context, c *call, schema string, shard int, shards string) error {
	if shard != -1 {
		return usageErrorf("migrate: --shard and --proxy exclude each other (a proxy holds no jobs)")
	}
	var list []string
	if shards != "" {
		list = strings.Split(shards, ",")
	}
	if err := skiplock.MigrateProxy(ctx, c.conn, &skiplock.MigrateProxyOpts{Schema: schema, Shards: list}); err != nil {
		return err
	}
	version, err := readVersion(ctx, c, schema, skiplock.ProxyVersionTable)
	if err != nil {
		return err
	}
	var count int
	// The configured count (routing takes up an added shard a second later).
	if err := c.conn.QueryRow(ctx, "SELECT shards FROM "+qualified(schema, "jobs_proxy_cluster")).Scan(&count); err != nil {
		return fmt.Errorf("failed to count the proxy's shards: %w", err)
	}
	_, err = fmt.Fprintf(c.stdout, "skiplock proxy schema is at version %d, %d shards\n", version, count)
	return err
}

// qualified names a function of the install schema ("" : the search_path's).
func qualified(schema, name string) string {
	if schema == "" {
		return pgx.Identifier{name}.Sanitize()
	}
	return pgx.Identifier{schema, name}.Sanitize()
}

// readVersion reads a migration set's installed version.
func readVersion(ctx context.Context, c *call, schema, versionTable string) (int32, error) {
	table := pgx.Identifier{versionTable}
	if schema != "" {
		table = pgx.Identifier{schema, versionTable}
	}
	var version int32
	if err := c.conn.QueryRow(ctx, "SELECT version FROM "+table.Sanitize()).Scan(&version); err != nil {
		return 0, fmt.Errorf("failed to read installed version: %w", err)
	}
	return version, nil
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
	synopsis: "[--schema NAME] [--from N] [--proxy [--shards URL,URL,...]]",
	summary:  "print the complete install SQL (for psql or another migration tool)",
	help: `Prints one script that installs skiplock (or, with --from, upgrades it from that
installed version) in a single transaction; it refuses to run against a database at another
version. Needs no database.

  skiplock sql | psql "$DATABASE_URL"

With --proxy, the script installs the PL/Proxy side of a sharded skiplock instead (see
migrate --proxy), and with --shards it ends by setting the shards (jobs_proxy_set_shards).
`,
	setup: func(fs *flag.FlagSet) func(context.Context, *call) error {
		schema := fs.String("schema", "", "schema to install into (default: the session's current schema, usually public)")
		from := fs.Int("from", 0, "installed version to upgrade from (0: a fresh install)")
		proxy := fs.Bool("proxy", false, "print the PL/Proxy side's install script instead (docs/scaling.md)")
		shards := fs.String("shards", "", "with --proxy: the shards' connection URLs, comma-separated, shard 0 first")
		return func(_ context.Context, c *call) error {
			if len(c.args) > 0 {
				return usageErrorf("sql: unexpected argument %q", c.args[0])
			}
			if *from < 0 || *from > math.MaxInt32 {
				return usageErrorf("sql: --from must be an installed version (0 or more), got %d", *from)
			}
			if *shards != "" && !*proxy {
				return usageErrorf("sql: --shards needs --proxy")
			}
			opts := &skiplock.InstallSQLOpts{Schema: *schema, FromVersion: int32(*from)}
			var script string
			var err error
			if *proxy {
				var list []string
				if *shards != "" {
					list = strings.Split(*shards, ",")
				}
				script, err = skiplock.ProxyInstallSQL(opts, list)
			} else {
				script, err = skiplock.InstallSQL(opts)
			}
			if err != nil {
				return &exitError{code: exitUsage, err: fmt.Errorf("sql: %w", err)}
			}
			_, err = io.WriteString(c.stdout, script)
			return err
		}
	},
}
