package skiplock

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"sort"
	"strings"

	"github.com/jackc/pgx/v5"
)

// ProxyVersionTable is the table (in the proxy's install schema) where the installed proxy
// migration version is recorded: the proxy's migrations are a set of their own.
const ProxyVersionTable = "jobs_proxy_schema_version"

//go:embed migrations/proxy/*.sql all:migrations/proxy/snapshots
var proxyMigrationsFS embed.FS

// ProxyMigrations returns the proxy's tern migration set (migrations/proxy of this module):
// the PL/Proxy side of a sharded skiplock (docs/scaling.md), one migration per release like
// Migrations.
func ProxyMigrations() fs.FS {
	sub, err := fs.Sub(proxyMigrationsFS, "migrations/proxy")
	if err != nil {
		panic(err) // the embedded tree is fixed at compile time
	}
	return sub
}

// ProxyCodePackage returns sql/proxy as a tern code package: install.sql is the complete
// current install of the proxy functions; the proxy migrations install frozen copies of its
// files.
func ProxyCodePackage() fs.FS {
	sub, err := fs.Sub(sqlFS, "sql/proxy")
	if err != nil {
		panic(err)
	}
	return sub
}

// MigrateProxyOpts configures MigrateProxy. The zero value migrates the proxy functions into
// the connection's current schema and leaves the shard list as it is.
type MigrateProxyOpts struct {
	// Schema to install into, as MigrateOpts.Schema. Defaults to the current schema.
	Schema string

	// Shards are the shards' connection URLs or libpq key=value strings, shard 0 first (see
	// ProxyConnString). When not empty, MigrateProxy sets them with jobs_proxy_set_shards,
	// which adds shards and moves them but never removes one. Defaults to nil: no change.
	Shards []string
}

// MigrateProxy makes the database a skiplock proxy: it applies the proxy migrations (the
// plproxy extension, which needs a superuser, and the PL/Proxy functions with the names
// and arguments of the SQL API), then sets the shards when opts.Shards is not empty.
// Idempotent, like Migrate.
func MigrateProxy(ctx context.Context, conn *pgx.Conn, opts *MigrateProxyOpts) error {
	if opts == nil {
		opts = &MigrateProxyOpts{}
	}
	if err := migrateSet(ctx, conn, &MigrateOpts{Schema: opts.Schema}, ProxyMigrations(), ProxyVersionTable); err != nil {
		return err
	}
	if len(opts.Shards) == 0 {
		return nil
	}
	call, err := setShardsSQL(opts.Schema, opts.Shards)
	if err != nil {
		return err
	}
	if _, err := conn.Exec(ctx, call); err != nil {
		return fmt.Errorf("failed to set the proxy's shards: %w", err)
	}
	return nil
}

// ProxyInstallSQL returns a plain SQL script that does what MigrateProxy does: the proxy
// migrations after opts.FromVersion, then (with shards) jobs_proxy_set_shards, in one
// transaction.
func ProxyInstallSQL(opts *InstallSQLOpts, shards []string) (string, error) {
	if opts == nil {
		opts = &InstallSQLOpts{}
	}
	tail := ""
	if len(shards) > 0 {
		call, err := setShardsSQL("", shards)
		if err != nil {
			return "", err
		}
		tail = call + ";\n"
	}
	return installSQLSet(opts, ProxyMigrations(), ProxyVersionTable, "skiplock sql --proxy", tail)
}

// setShardsSQL is the jobs_proxy_set_shards call for shards (schema "" : unqualified).
func setShardsSQL(schema string, shards []string) (string, error) {
	quoted := make([]string, len(shards))
	for i, s := range shards {
		cs, err := ProxyConnString(s)
		if err != nil {
			return "", fmt.Errorf("shard %d: %w", i, err)
		}
		quoted[i] = "'" + strings.ReplaceAll(cs, "'", "''") + "'"
	}
	fn := "jobs_proxy_set_shards"
	if schema != "" {
		fn = pgx.Identifier{schema, fn}.Sanitize()
	}
	return fmt.Sprintf("SELECT %s(ARRAY[%s]::text[])", fn, strings.Join(quoted, ", ")), nil
}

// ProxyConnString turns a shard's postgres:// URL into the libpq key=value form PL/Proxy
// needs (it appends its own keys, such as the user, to the string, which a URL cannot
// take). A string that is not a URL is returned as it is. The user, when the URL has one,
// stays in the string: every caller then reaches the shard as that user (see
// docs/scaling.md for the alternatives). A URL with a password is an error: every login of
// the proxy can read the connection strings (pg_foreign_server), so passwords go in user
// mappings, and jobs_proxy_set_shards refuses them too.
func ProxyConnString(shard string) (string, error) {
	if !strings.HasPrefix(shard, "postgres://") && !strings.HasPrefix(shard, "postgresql://") {
		if strings.TrimSpace(shard) == "" {
			return "", fmt.Errorf("empty shard connection string")
		}
		return shard, nil
	}
	u, err := url.Parse(shard)
	if err != nil {
		// url.Error quotes the whole URL, password included: keep only the cause.
		var urlErr *url.Error
		if errors.As(err, &urlErr) {
			err = urlErr.Err
		}
		return "", fmt.Errorf("failed to parse shard URL: %w", err)
	}
	if _, ok := u.User.Password(); ok || u.Query().Has("password") {
		// The URL is not quoted: the error may be logged.
		return "", errors.New("the shard URL carries a password, which every login of the proxy could read in pg_foreign_server: give it in a user mapping (docs/scaling.md, Credentials)")
	}
	kv := map[string]string{}
	if h := u.Hostname(); h != "" {
		kv["host"] = h
	}
	if p := u.Port(); p != "" {
		kv["port"] = p
	}
	if db := strings.TrimPrefix(u.Path, "/"); db != "" {
		kv["dbname"] = db
	}
	if u.User != nil {
		kv["user"] = u.User.Username()
	}
	for k, vs := range u.Query() {
		if len(vs) > 0 {
			kv[k] = vs[len(vs)-1]
		}
	}
	keys := make([]string, 0, len(kv))
	for k := range kv {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		v := strings.ReplaceAll(strings.ReplaceAll(kv[k], `\`, `\\`), `'`, `\'`)
		parts[i] = k + "='" + v + "'"
	}
	return strings.Join(parts, " "), nil
}
