package skiplock_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	ternmigrate "github.com/jackc/tern/v2/migrate"

	"github.com/skiplock/skiplock"
	"github.com/skiplock/skiplock/internal/pglocal"
	"github.com/skiplock/skiplock/tests/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// latestVersion is the number of migrations, the version a full migration reaches.
func latestVersion(t *testing.T) int32 {
	t.Helper()
	names, err := fs.Glob(skiplock.Migrations(), "*.sql")
	if err != nil {
		t.Fatal(err)
	}
	if len(names) == 0 {
		t.Fatal("no migrations embedded")
	}
	return int32(len(names))
}

// testBundle is one test's empty database (no skiplock installed) and a connection to it.
type testBundle struct {
	url  string
	conn *pgx.Conn
}

func setup(t *testing.T) *testBundle {
	t.Helper()
	url := pgtest.NewEmptyDatabase(t)
	return &testBundle{url: url, conn: pgtest.NewConn(t, url)}
}

func migrate(t *testing.T, conn *pgx.Conn, opts *skiplock.MigrateOpts) {
	t.Helper()
	if err := skiplock.Migrate(t.Context(), conn, opts); err != nil {
		t.Fatalf("Migrate(%+v): %v", opts, err)
	}
}

// schemaDigest describes every object of schema, one sorted line per object: relations
// (columns, index definition, storage options, privileges, comment), constraints, types
// (with enum labels), functions (arguments with defaults, result, language, volatility,
// strictness, SECURITY DEFINER, settings, a hash of the body, privileges, comment) and the
// schema's own privileges. Two installs with the same digest are the same install.
//
// It names neither the schema nor the installing role: the schema's quoted name is written
// @schema@ where it qualifies a name or a pinned search_path, and privileges list the owner
// as "owner", PUBLIC as "PUBLIC" (a missing ACL spelled out as its default) and grants in
// name order. So digests compare across schemas and servers, and can be pinned.
func schemaDigest(t *testing.T, conn *pgx.Conn, schema string) string {
	t.Helper()
	// acl renders an aclitem[] (NULL meaning the default for kind and owner) without the
	// owner's name and in a fixed order; the trailing * marks a grant option.
	acl := func(items, kind, owner string) string {
		return fmt.Sprintf(`(SELECT coalesce(string_agg(e, ',' ORDER BY e), '')
			FROM (SELECT CASE WHEN a.grantee = 0 THEN 'PUBLIC' WHEN a.grantee = %[3]s THEN 'owner'
			                  ELSE a.grantee::regrole::text END
			             || ':' || a.privilege_type || CASE WHEN a.is_grantable THEN '*' ELSE '' END AS e
			      FROM aclexplode(coalesce(%[1]s, acldefault('%[2]s', %[3]s))) AS a) AS acl)`, items, kind, owner)
	}
	return pgtest.QueryOne[string](t, conn, `
		WITH target AS (
		    SELECT n.oid, quote_ident(n.nspname) AS quoted, n.nspowner, n.nspacl
		    FROM pg_namespace n WHERE n.nspname = $1
		)
		SELECT coalesce(string_agg(replace(replace(d, target.quoted || '.', '@schema@.'),
		                                   'search_path=' || target.quoted || ',', 'search_path=@schema@,'),
		                           E'\n' ORDER BY d), '')
		FROM target, LATERAL (
		    SELECT format('schema acl=%s', `+acl("target.nspacl", "n", "target.nspowner")+`)
		    UNION ALL
		    SELECT format('rel %s %s %s cols=%s options=%s acl=%s comment=%s', c.relname, c.relkind, pg_get_indexdef(c.oid),
		                  (SELECT string_agg(format('%s:%s', a.attname, format_type(a.atttypid, a.atttypmod)), ',' ORDER BY a.attnum)
		                   FROM pg_attribute a WHERE a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped),
		                  c.reloptions,
		                  CASE WHEN c.relkind IN ('r', 'S', 'v', 'm', 'p') THEN `+acl("c.relacl", "r", "c.relowner")+` END,
		                  md5(coalesce(obj_description(c.oid, 'pg_class'), '')))
		    FROM pg_class c WHERE c.relnamespace = target.oid
		    UNION ALL
		    SELECT format('con %s %s', con.conname, pg_get_constraintdef(con.oid))
		    FROM pg_constraint con WHERE con.connamespace = target.oid
		    UNION ALL
		    SELECT format('type %s %s %s', ty.typname, ty.typtype,
		                  (SELECT string_agg(e.enumlabel, ',' ORDER BY e.enumsortorder) FROM pg_enum e WHERE e.enumtypid = ty.oid))
		    FROM pg_type ty WHERE ty.typnamespace = target.oid
		    UNION ALL
		    SELECT format('func %s(%s) -> %s %s volatile=%s strict=%s parallel=%s secdef=%s config=%s src=%s acl=%s comment=%s',
		                  p.proname, pg_get_function_arguments(p.oid), pg_get_function_result(p.oid), l.lanname,
		                  p.provolatile, p.proisstrict, p.proparallel, p.prosecdef, p.proconfig, md5(p.prosrc),
		                  `+acl("p.proacl", "f", "p.proowner")+`,
		                  md5(coalesce(obj_description(p.oid, 'pg_proc'), '')))
		    FROM pg_proc p JOIN pg_language l ON l.oid = p.prolang WHERE p.pronamespace = target.oid
		) AS objects(d)`, schema)
}

// skiplockObjects counts the relations and functions named jobs* or _jobs* in schema.
func skiplockObjects(t *testing.T, conn *pgx.Conn, schema string) (relations, functions int64) {
	t.Helper()
	relations = pgtest.QueryOne[int64](t, conn, `SELECT count(*) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
		WHERE n.nspname = $1 AND c.relname LIKE 'jobs%'`, schema)
	functions = pgtest.QueryOne[int64](t, conn, `SELECT count(*) FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
		WHERE n.nspname = $1 AND (p.proname LIKE 'jobs%' OR p.proname LIKE '\_jobs%')`, schema)
	return relations, functions
}

func installedVersion(t *testing.T, conn *pgx.Conn, schema string) int32 {
	t.Helper()
	return pgtest.QueryOne[int32](t, conn, "SELECT version FROM "+pgx.Identifier{schema, skiplock.VersionTable}.Sanitize())
}

// connectWithSearchPath opens a session whose search_path is path (set at connection start,
// so nothing in the session can have changed it).
func connectWithSearchPath(t *testing.T, url, path string) *pgx.Conn {
	t.Helper()
	cfg, err := pgx.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	cfg.RuntimeParams["search_path"] = path
	conn, err := pgx.ConnectConfig(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close(context.Background()) })
	return conn
}

func TestMigrate(t *testing.T) {
	t.Parallel()

	t.Run("IsIdempotent", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		migrate(t, b.conn, nil)
		if v := installedVersion(t, b.conn, "public"); v != latestVersion(t) {
			t.Fatalf("installed version %d, want %d", v, latestVersion(t))
		}
		first := schemaDigest(t, b.conn, "public")
		pgtest.MustExec(t, b.conn, "SELECT jobs_enqueue('survivor')")
		pgtest.MustExec(t, b.conn, "UPDATE jobs_settings SET backoff_base = '7 seconds'")

		migrate(t, b.conn, nil)
		migrate(t, b.conn, &skiplock.MigrateOpts{Schema: "public"})
		if v := installedVersion(t, b.conn, "public"); v != latestVersion(t) {
			t.Fatalf("installed version %d after migrating again, want %d", v, latestVersion(t))
		}
		if again := schemaDigest(t, b.conn, "public"); again != first {
			t.Fatalf("migrating again changed the schema:\n%s", lineDiff(first, again))
		}
		if n := pgtest.QueryOne[int64](t, b.conn, "SELECT count(*) FROM jobs WHERE kind = 'survivor'"); n != 1 {
			t.Fatal("migrating again lost a job")
		}
		if base := pgtest.QueryOne[string](t, b.conn, "SELECT backoff_base::text FROM jobs_settings"); base != "00:00:07" {
			t.Fatalf("migrating again reset jobs_settings.backoff_base to %s", base)
		}
	})

	// A database upgraded one migration at a time, with a job running across the upgrades,
	// ends up the same as a fresh install (functions, settings and grants included), and the
	// job is still held and can be heartbeated and completed with the newest functions.
	t.Run("UpgradesOneVersionAtATime", func(t *testing.T) {
		t.Parallel()
		fresh := setup(t)
		migrate(t, fresh.conn, nil)
		want := schemaDigest(t, fresh.conn, "public")

		b := setup(t)
		var id int64
		for v := int32(1); v <= latestVersion(t); v++ {
			migrate(t, b.conn, &skiplock.MigrateOpts{TargetVersion: v})
			if got := installedVersion(t, b.conn, "public"); got != v {
				t.Fatalf("after Migrate to %d the installed version is %d", v, got)
			}
			if v == 2 {
				id = pgtest.QueryOne[int64](t, b.conn, "SELECT jobs_enqueue('survivor')")
				if got := pgtest.QueryOne[int64](t, b.conn, "SELECT id FROM jobs_claim('w', lease => '1 hour')"); got != id {
					t.Fatalf("claimed job %d, want %d", got, id)
				}
			}
		}
		if got := schemaDigest(t, b.conn, "public"); got != want {
			t.Fatalf("upgraded one version at a time, the schema differs from a fresh install:\n%s\nwant:\n%s", got, want)
		}
		if !pgtest.QueryOne[bool](t, b.conn, "SELECT extended FROM jobs_heartbeat_many(ARRAY[$1::bigint], ARRAY[1])", id) {
			t.Fatal("the job claimed before the upgrades was not extended by jobs_heartbeat_many")
		}
		if !pgtest.QueryOne[bool](t, b.conn, "SELECT jobs_complete($1, 1)", id) {
			t.Fatal("the job claimed before the upgrades could not be completed")
		}
	})

	// sql/ is the complete current install: applied (as the tern code package it is) to a
	// database at the latest version, it changes nothing, grants included. So the migrations
	// installed everything sql/ holds, and grants.sql can be re-run at any time.
	t.Run("ReapplyingSQLChangesNothing", func(t *testing.T) {
		t.Parallel()
		code, err := ternmigrate.LoadCodePackage(skiplock.CodePackage())
		if err != nil {
			t.Fatalf("failed to load sql/ as a tern code package: %v", err)
		}
		for _, schema := range []string{"public", "reapplied"} {
			b := setup(t)
			migrate(t, b.conn, &skiplock.MigrateOpts{Schema: schema})
			before := schemaDigest(t, b.conn, schema)
			conn := connectWithSearchPath(t, b.url, pgx.Identifier{schema}.Sanitize())
			if err := ternmigrate.InstallCodePackage(t.Context(), conn, nil, code); err != nil {
				t.Fatalf("schema %s: failed to apply sql/install.sql: %v", schema, err)
			}
			if after := schemaDigest(t, b.conn, schema); after != before {
				t.Fatalf("schema %s: applying sql/ after migrating changed the schema; a change to sql/ is missing from the migrations:\n%s",
					schema, lineDiff(before, after))
			}
		}
	})

	t.Run("IntoNamedSchemaWorksFromAnySearchPath", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		const schema = "queue_stuff"
		migrate(t, b.conn, &skiplock.MigrateOpts{Schema: schema})
		migrate(t, b.conn, &skiplock.MigrateOpts{Schema: schema}) // idempotent here too

		if rels, funcs := skiplockObjects(t, b.conn, schema); rels < 3 || funcs < 10 {
			t.Fatalf("schema %s holds %d jobs relations and %d functions, want the whole install", schema, rels, funcs)
		}
		for _, table := range []string{"jobs", "jobs_settings", skiplock.VersionTable} {
			if !pgtest.QueryOne[bool](t, b.conn, "SELECT to_regclass($1) IS NOT NULL", schema+"."+table) {
				t.Fatalf("%s.%s does not exist", schema, table)
			}
		}
		if rels, funcs := skiplockObjects(t, b.conn, "public"); rels != 0 || funcs != 0 {
			t.Fatalf("public got %d jobs relations and %d functions, want none", rels, funcs)
		}
		if v := installedVersion(t, b.conn, schema); v != latestVersion(t) {
			t.Fatalf("installed version %d, want %d", v, latestVersion(t))
		}
		// The caller's connection keeps its own search_path.
		if path := pgtest.QueryOne[string](t, b.conn, "SHOW search_path"); strings.Contains(path, schema) {
			t.Fatalf("Migrate changed the caller's search_path to %s", path)
		}

		// A decoy jobs table on the caller's path must not stand in for the real one.
		pgtest.MustExec(t, b.conn, "CREATE SCHEMA elsewhere")
		pgtest.MustExec(t, b.conn, "CREATE TABLE elsewhere.jobs (id bigint, state text)")
		for _, path := range []string{"elsewhere", "public", `""`, "does_not_exist"} {
			conn := connectWithSearchPath(t, b.url, path)
			q := func(fn string) string { return pgx.Identifier{schema}.Sanitize() + "." + fn }
			id := pgtest.QueryOne[int64](t, conn, "SELECT "+q("jobs_enqueue")+"('k', queue => 'named')")
			var claimed int64
			var attempt int32
			if err := conn.QueryRow(t.Context(), "SELECT id, attempt FROM "+q("jobs_claim")+"('w', 1, ARRAY['named'])").
				Scan(&claimed, &attempt); err != nil {
				t.Fatalf("search_path %s: jobs_claim: %v", path, err)
			}
			if claimed != id {
				t.Fatalf("search_path %s: claimed %d, want %d", path, claimed, id)
			}
			if !pgtest.QueryOne[bool](t, conn, "SELECT "+q("jobs_complete")+"($1, $2)", id, attempt) {
				t.Fatalf("search_path %s: jobs_complete returned false", path)
			}
			if n := pgtest.QueryOne[int64](t, conn, "SELECT jobs FROM "+q("jobs_stats")+"() WHERE queue = 'named' AND state = 'done'"); n < 1 {
				t.Fatalf("search_path %s: jobs_stats counted %d done jobs", path, n)
			}
		}
		if n := pgtest.QueryOne[int64](t, b.conn, "SELECT count(*) FROM "+pgx.Identifier{schema, "jobs"}.Sanitize()+" WHERE state = 'done'"); n != 4 {
			t.Fatalf("%s.jobs has %d done jobs, want 4", schema, n)
		}
		if n := pgtest.QueryOne[int64](t, b.conn, "SELECT count(*) FROM elsewhere.jobs"); n != 0 {
			t.Fatalf("the decoy table got %d rows", n)
		}
	})

	t.Run("ConcurrentOnFreshDatabase", func(t *testing.T) {
		t.Parallel()
		for _, schema := range []string{"", "concurrent_schema"} {
			b := setup(t)
			conns := make([]*pgx.Conn, 4)
			for i := range conns {
				conns[i] = pgtest.NewConn(t, b.url)
			}
			errs := make([]error, len(conns))
			var wg sync.WaitGroup
			start := make(chan struct{})
			for i, conn := range conns {
				wg.Add(1)
				go func() {
					defer wg.Done()
					<-start
					errs[i] = skiplock.Migrate(t.Context(), conn, &skiplock.MigrateOpts{Schema: schema})
				}()
			}
			close(start)
			wg.Wait()
			for i, err := range errs {
				if err != nil {
					t.Fatalf("schema %q: Migrate %d of %d failed: %v", schema, i+1, len(conns), err)
				}
			}
			target := schema
			if target == "" {
				target = "public"
			}
			if v := installedVersion(t, b.conn, target); v != latestVersion(t) {
				t.Fatalf("schema %q: installed version %d, want %d", schema, v, latestVersion(t))
			}
			if n := pgtest.QueryOne[int64](t, b.conn, "SELECT count(*) FROM "+pgx.Identifier{target, skiplock.VersionTable}.Sanitize()); n != 1 {
				t.Fatalf("schema %q: version table has %d rows", schema, n)
			}
			// And the install works.
			id := pgtest.QueryOne[int64](t, b.conn, "SELECT "+pgx.Identifier{target, "jobs_enqueue"}.Sanitize()+"('k')")
			if id < 1 {
				t.Fatalf("schema %q: jobs_enqueue returned %d", schema, id)
			}
		}
	})

	t.Run("NegativeTargetVersionIsRefused", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		err := skiplock.Migrate(t.Context(), b.conn, &skiplock.MigrateOpts{TargetVersion: -1})
		if err == nil || !strings.Contains(err.Error(), "TargetVersion") {
			t.Fatalf("Migrate with TargetVersion -1 = %v, want an error naming TargetVersion", err)
		}
	})
}

// pgTool finds a PostgreSQL client program where the server binaries are looked for
// (pglocal.Tool). It skips the test when there is none: without local binaries the tests
// run against DATABASE_URL only.
func pgTool(t *testing.T, name string) string {
	t.Helper()
	p, err := pglocal.Tool(name)
	if errors.Is(err, pglocal.ErrToolNotFound) {
		t.Skipf("%v: install PostgreSQL's client programs", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// pgEnv is the environment for psql and pg_dump: ours, less PG* variables that could point
// them elsewhere or change their output.
func pgEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "PG") {
			env = append(env, kv)
		}
	}
	return env
}

// runPsql runs script through psql -v ON_ERROR_STOP=1 -f, as a user of `skiplock sql`
// would, and returns psql's output and error.
func runPsql(t *testing.T, url, script string) (string, error) {
	t.Helper()
	file := filepath.Join(t.TempDir(), "install.sql")
	if err := os.WriteFile(file, []byte(script), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(t.Context(), pgTool(t, "psql"), "-X", "-q", "-v", "ON_ERROR_STOP=1", "-d", url, "-f", file)
	cmd.Env = pgEnv()
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func mustPsql(t *testing.T, url, script string) {
	t.Helper()
	if out, err := runPsql(t, url, script); err != nil {
		t.Fatalf("psql -v ON_ERROR_STOP=1 -f install.sql: %v\n%s", err, out)
	}
}

func installSQL(t *testing.T, opts *skiplock.InstallSQLOpts) string {
	t.Helper()
	script, err := skiplock.InstallSQL(opts)
	if err != nil {
		t.Fatalf("InstallSQL(%+v): %v", opts, err)
	}
	return script
}

// pgDump runs pg_dump --schema-only --no-owner on the database at url, with args added, and
// returns its output.
func pgDump(t *testing.T, url string, args ...string) string {
	t.Helper()
	pgDump := pgTool(t, "pg_dump")
	args = append([]string{"--schema-only", "--no-owner"}, args...)
	// pg_dump from 17.6, 16.10, 15.14, 14.19 and 13.22 wraps its output in \restrict KEY ...
	// \unrestrict KEY with a random key unless one is given.
	if help, err := exec.Command(pgDump, "--help").Output(); err == nil && bytes.Contains(help, []byte("--restrict-key")) {
		args = append(args, "--restrict-key=skiplocktest")
	}
	cmd := exec.CommandContext(t.Context(), pgDump, append(args, "-d", url)...)
	cmd.Env = pgEnv()
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("pg_dump: %v\n%s", err, stderr.String())
	}
	return string(out)
}

// dumpSchema is pg_dump --schema-only --no-owner of the database, without comment lines and
// blank lines (the only lines that may differ between two equal schemas).
func dumpSchema(t *testing.T, url string) string {
	t.Helper()
	var kept []string
	for _, line := range strings.Split(pgDump(t, url), "\n") {
		if trimmed := strings.TrimSpace(line); trimmed == "" || strings.HasPrefix(trimmed, "--") {
			continue
		}
		kept = append(kept, line)
	}
	return strings.Join(kept, "\n")
}

// lineDiff shows the lines only in a (-) and only in b (+), for a readable failure.
func lineDiff(a, b string) string {
	count := func(s string) map[string]int {
		m := map[string]int{}
		for _, l := range strings.Split(s, "\n") {
			m[l]++
		}
		return m
	}
	ca, cb := count(a), count(b)
	var out []string
	for _, l := range strings.Split(a, "\n") {
		if cb[l] < ca[l] {
			out = append(out, "- "+l)
			ca[l]--
		}
	}
	ca = count(a)
	for _, l := range strings.Split(b, "\n") {
		if ca[l] < cb[l] {
			out = append(out, "+ "+l)
			cb[l]--
		}
	}
	if len(out) == 0 {
		return "(same lines, in another order)"
	}
	if len(out) > 60 {
		out = append(out[:60], fmt.Sprintf("... and %d more lines", len(out)-60))
	}
	return strings.Join(out, "\n")
}

func TestInstallSQL(t *testing.T) {
	t.Parallel()

	for _, schema := range []string{"", "named_schema"} {
		name := "PsqlInstallMatchesMigrate"
		if schema != "" {
			name += "IntoNamedSchema"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			a, b := setup(t), setup(t)
			mustPsql(t, a.url, installSQL(t, &skiplock.InstallSQLOpts{Schema: schema}))
			migrate(t, b.conn, &skiplock.MigrateOpts{Schema: schema})

			dumpA, dumpB := dumpSchema(t, a.url), dumpSchema(t, b.url)
			if !strings.Contains(dumpB, "jobs_claim") {
				t.Fatalf("the dump of the migrated database has no jobs_claim:\n%s", dumpB)
			}
			if dumpA != dumpB {
				t.Fatalf("pg_dump of the psql install (-) differs from that of Migrate (+):\n%s", lineDiff(dumpA, dumpB))
			}
			target := schema
			if target == "" {
				target = "public"
			}
			if v := installedVersion(t, a.conn, target); v != latestVersion(t) {
				t.Fatalf("psql install recorded version %d, want %d", v, latestVersion(t))
			}
		})
	}

	t.Run("FromLatestIsNoop", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		migrate(t, b.conn, nil)
		pgtest.MustExec(t, b.conn, "SELECT jobs_enqueue('survivor')")
		before := dumpSchema(t, b.url)

		script := installSQL(t, &skiplock.InstallSQLOpts{FromVersion: latestVersion(t)})
		if strings.Contains(script, "-- migration ") {
			t.Fatalf("the script from the latest version applies migrations:\n%s", script)
		}
		mustPsql(t, b.url, script)
		mustPsql(t, b.url, script)
		if after := dumpSchema(t, b.url); after != before {
			t.Fatalf("the no-op script changed the schema:\n%s", lineDiff(before, after))
		}
		if v := installedVersion(t, b.conn, "public"); v != latestVersion(t) {
			t.Fatalf("version %d after the no-op script, want %d", v, latestVersion(t))
		}
		if n := pgtest.QueryOne[int64](t, b.conn, "SELECT count(*) FROM jobs"); n != 1 {
			t.Fatalf("%d jobs after the no-op script, want 1", n)
		}
	})

	t.Run("RefusesDatabaseAtAnotherVersion", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		// A script that upgrades from the latest version must not run on an empty database.
		out, err := runPsql(t, b.url, installSQL(t, &skiplock.InstallSQLOpts{FromVersion: latestVersion(t)}))
		if err == nil {
			t.Fatalf("the script for version %d ran on an empty database:\n%s", latestVersion(t), out)
		}
		if !strings.Contains(out, "skiplock sql --from") {
			t.Fatalf("psql failed without the hint to print the right script:\n%s", out)
		}
		if pgtest.QueryOne[bool](t, b.conn, "SELECT to_regclass('jobs') IS NOT NULL") {
			t.Fatal("the refused script left a jobs table behind")
		}
	})

	t.Run("MigrateContinuesFromPsqlInstall", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		mustPsql(t, b.url, installSQL(t, nil))
		before := schemaDigest(t, b.conn, "public")
		migrate(t, b.conn, nil)
		if after := schemaDigest(t, b.conn, "public"); after != before {
			t.Fatalf("Migrate after a psql install changed the schema:\n%s", lineDiff(before, after))
		}
	})

	t.Run("FromVersionOutOfRangeIsRefused", func(t *testing.T) {
		t.Parallel()
		for _, v := range []int32{-1, latestVersion(t) + 1} {
			if _, err := skiplock.InstallSQL(&skiplock.InstallSQLOpts{FromVersion: v}); err == nil ||
				!strings.Contains(err.Error(), "FromVersion") {
				t.Fatalf("InstallSQL(FromVersion: %d) = %v, want an error naming FromVersion", v, err)
			}
		}
	})
}
