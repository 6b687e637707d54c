package skiplock

import (
	"context"
	"embed"
	"fmt"
	"io/fs"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/tern/v2/migrate"
)

// VersionTable is the table (in the install schema) where the installed migration version
// is recorded. It is tern's version table, so the tern CLI can migrate the same schema.
const VersionTable = "jobs_schema_version"

// migrationLockID is the advisory lock tern holds while migrating. InstallSQL takes the
// same lock so a psql install and a concurrent Migrate cannot interleave.
const migrationLockID = 9628173550095224

//go:embed migrations/*.sql all:migrations/snapshots
var migrationsFS embed.FS

//go:embed all:sql
var sqlFS embed.FS

// Migrations returns the tern migration set (migrations/ of this module): one migration per
// release, never changed once released (migrations/RELEASED). A migration that changes
// functions installs the copies of the sql/ files it froze under migrations/snapshots/NNN
// (tern shared templates), then re-applies the grants.
func Migrations() fs.FS {
	sub, err := fs.Sub(migrationsFS, "migrations")
	if err != nil {
		panic(err) // the embedded tree is fixed at compile time
	}
	return sub
}

// CodePackage returns sql/ as a tern code package (migrate.LoadCodePackage): install.sql is
// the complete current install (search_path preamble, every function, grants), and applying
// it to a migrated database changes nothing. Migrations install frozen copies of its files;
// tests check that each file equals its newest frozen copy.
func CodePackage() fs.FS {
	sub, err := fs.Sub(sqlFS, "sql")
	if err != nil {
		panic(err)
	}
	return sub
}

// MigrateOpts configures Migrate. The zero value migrates to the latest version in the
// connection's current schema.
type MigrateOpts struct {
	// Schema to install into. It is created when missing. Defaults to the connection's
	// current schema (the first existing schema of its search_path; usually public).
	Schema string

	// TargetVersion is the migration to stop at. Defaults to 0, meaning the latest.
	TargetVersion int32
}

// Migrate brings the skiplock schema and functions in the target schema up to date. It is
// idempotent and safe to run from several processes at once: tern serialises them with an
// advisory lock and each migration runs in its own transaction.
func Migrate(ctx context.Context, conn *pgx.Conn, opts *MigrateOpts) error {
	return migrateFS(ctx, conn, opts, Migrations())
}

// migrateFS is Migrate with the migration set as a parameter, so tests can replay an older
// set (such as the migrations as they were in git history) the same way.
func migrateFS(ctx context.Context, conn *pgx.Conn, opts *MigrateOpts, migrations fs.FS) error {
	return migrateSet(ctx, conn, opts, migrations, VersionTable)
}

// migrateSet applies a migration set that records its version in versionTableName (of the
// target schema): the shards' set (VersionTable) or the proxy's (ProxyVersionTable).
func migrateSet(ctx context.Context, conn *pgx.Conn, opts *MigrateOpts, migrations fs.FS, versionTableName string) error {
	if opts == nil {
		opts = &MigrateOpts{}
	}
	if opts.TargetVersion < 0 {
		return fmt.Errorf("skiplock: MigrateOpts.TargetVersion must be >= 0, got %d", opts.TargetVersion)
	}

	schema := opts.Schema
	if schema == "" {
		if err := conn.QueryRow(ctx, "SELECT current_schema()").Scan(&schema); err != nil {
			return fmt.Errorf("failed to find current schema: %w", err)
		}
		if schema == "" {
			return fmt.Errorf("skiplock: the connection's search_path names no existing schema; set MigrateOpts.Schema")
		}
	}

	// tern runs RESET ALL after each migration, which would undo a SET search_path. A search_path
	// given at connection start survives RESET, so migrate over a connection opened with it.
	cfg := conn.Config().Copy()
	cfg.RuntimeParams["search_path"] = pgx.Identifier{schema}.Sanitize()
	mconn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return fmt.Errorf("failed to connect for migration: %w", err)
	}
	defer mconn.Close(context.WithoutCancel(ctx))

	if opts.Schema != "" {
		if err := createSchema(ctx, mconn, schema); err != nil {
			return err
		}
	}

	versionTable := pgx.Identifier{schema, versionTableName}.Sanitize()
	m, err := migrate.NewMigrator(ctx, mconn, versionTable)
	if err != nil {
		return fmt.Errorf("failed to prepare migrator: %w", err)
	}
	if err := m.LoadMigrations(migrations); err != nil {
		return fmt.Errorf("failed to load migrations: %w", err)
	}
	target := opts.TargetVersion
	if target == 0 {
		target = int32(len(m.Migrations))
	}
	// tern's own refusal only says the version is out of range; say where such a version
	// comes from.
	if current, err := m.GetCurrentVersion(ctx); err == nil && current > int32(len(m.Migrations)) {
		return fmt.Errorf("skiplock: schema %q is at migration version %d, but this skiplock knows versions up to %d: "+
			"it was migrated by a newer skiplock, or by a development build whose unreleased migrations were "+
			"later folded into one release (migrations/RELEASED); such a database cannot be upgraded in place",
			schema, current, len(m.Migrations))
	}
	if err := m.MigrateTo(ctx, target); err != nil {
		return fmt.Errorf("failed to migrate schema %q: %w", schema, err)
	}
	return nil
}

func createSchema(ctx context.Context, conn *pgx.Conn, schema string) error {
	// Under tern's lock: two processes creating the same schema at once would otherwise race
	// on pg_namespace's unique index even with IF NOT EXISTS.
	if _, err := conn.Exec(ctx, "SELECT pg_advisory_lock($1)", int64(migrationLockID)); err != nil {
		return fmt.Errorf("failed to lock for schema creation: %w", err)
	}
	_, err := conn.Exec(ctx, "CREATE SCHEMA IF NOT EXISTS "+pgx.Identifier{schema}.Sanitize())
	if _, unlockErr := conn.Exec(ctx, "SELECT pg_advisory_unlock($1)", int64(migrationLockID)); err == nil && unlockErr != nil {
		err = unlockErr
	}
	if err != nil {
		return fmt.Errorf("failed to create schema %q: %w", schema, err)
	}
	return nil
}

// InstallSQLOpts configures InstallSQL. The zero value gives a complete fresh install into
// the current schema.
type InstallSQLOpts struct {
	// Schema to install into; the script creates it and installs there. Defaults to "",
	// meaning the current schema of the session that runs the script.
	Schema string

	// FromVersion is the version already installed; the script applies only the migrations
	// after it, and refuses to run when the database is at another version. Defaults to 0
	// (nothing installed).
	FromVersion int32
}

// InstallSQL returns a plain SQL script, for psql or another migration tool, that does what
// Migrate does: it applies the migrations after FromVersion in one transaction and records
// the version in VersionTable, so Migrate and the tern CLI can carry on from it later.
func InstallSQL(opts *InstallSQLOpts) (string, error) {
	return installSQLSet(opts, Migrations(), VersionTable, "skiplock sql", "")
}

// installSQLSet is InstallSQL for a migration set recording its version in versionTable;
// tool names the command that prints it, and tail is SQL run before the COMMIT.
func installSQLSet(opts *InstallSQLOpts, migrations fs.FS, versionTable, tool, tail string) (string, error) {
	if opts == nil {
		opts = &InstallSQLOpts{}
	}
	m, err := migrate.NewMigrator(context.Background(), nil, versionTable)
	if err != nil {
		return "", fmt.Errorf("failed to prepare migrator: %w", err)
	}
	if err := m.LoadMigrations(migrations); err != nil {
		return "", fmt.Errorf("failed to load migrations: %w", err)
	}
	latest := int32(len(m.Migrations))
	if opts.FromVersion < 0 || opts.FromVersion > latest {
		return "", fmt.Errorf("skiplock: InstallSQLOpts.FromVersion must be between 0 and %d, got %d", latest, opts.FromVersion)
	}

	var b strings.Builder
	if opts.FromVersion == latest {
		fmt.Fprintf(&b, "-- skiplock install script: version %d is the latest; nothing to apply (printed by `%s`).\n", latest, tool)
	} else {
		fmt.Fprintf(&b, "-- skiplock install script: migrations %d to %d (printed by `%s`).\n", opts.FromVersion+1, latest, tool)
	}
	b.WriteString("-- Run it as one transaction, e.g. psql -v ON_ERROR_STOP=1 -f install.sql\n")
	b.WriteString("BEGIN;\n")
	fmt.Fprintf(&b, "SELECT pg_advisory_xact_lock(%d) AS skiplock_migration_lock;\n", int64(migrationLockID))
	if opts.Schema != "" {
		s := pgx.Identifier{opts.Schema}.Sanitize()
		fmt.Fprintf(&b, "CREATE SCHEMA IF NOT EXISTS %s;\nSET LOCAL search_path TO %s;\n", s, s)
	}
	// The same version table tern creates, so the tern CLI and Migrate can continue from here.
	fmt.Fprintf(&b, "CREATE TABLE IF NOT EXISTS %s(version int4 not null);\n", versionTable)
	fmt.Fprintf(&b, "INSERT INTO %[1]s(version) SELECT 0 WHERE NOT EXISTS (SELECT FROM %[1]s);\n", versionTable)
	fmt.Fprintf(&b, `DO $skiplock$
BEGIN
    IF (SELECT version FROM %[1]s) <> %[2]d THEN
        RAISE EXCEPTION 'skiplock: this script upgrades from version %[2]d, but the schema is at version %%', (SELECT version FROM %[1]s)
            USING HINT = 'print the right script with: skiplock sql --from <installed version>';
    END IF;
END;
$skiplock$;
`, versionTable, opts.FromVersion)
	for _, mig := range m.Migrations[opts.FromVersion:] {
		fmt.Fprintf(&b, "\n-- migration %s\n%s\n", mig.Name, strings.TrimSpace(mig.UpSQL))
	}
	fmt.Fprintf(&b, "\nUPDATE %s SET version = %d;\n", versionTable, latest)
	b.WriteString(tail)
	b.WriteString("COMMIT;\n")
	return b.String(), nil
}
