package security_test

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	osexec "os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/skiplock/skiplock"
	"github.com/skiplock/skiplock/internal/pglocal"
	"github.com/skiplock/skiplock/tests/pgtest"
)

// grantsPresent reports whether the database at url grants the jobs_* roles their functions
// (one probe per role) and the USAGE on the install schema they need to reach them.
func grantsPresent(t *testing.T, url, schema string) bool {
	t.Helper()
	conn := pgtest.NewConn(t, url)
	return scalar[bool](t, conn, `
		SELECT has_function_privilege('jobs_producer', format('%I.jobs_enqueue(text,jsonb,text,timestamptz,integer,integer,text,text,jsonb,boolean,bigint[],text,boolean,text,interval)', $1::text), 'EXECUTE')
		   AND has_function_privilege('jobs_worker', format('%I.jobs_claim(text,integer,text[],interval)', $1::text), 'EXECUTE')
		   AND has_function_privilege('jobs_admin', format('%I.jobs_cancel(bigint)', $1::text), 'EXECUTE')
		   AND has_table_privilege('jobs_admin', format('%I.jobs_settings', $1::text), 'UPDATE')
		   AND has_schema_privilege('jobs_producer', $1::text, 'USAGE')
		   AND has_schema_privilege('jobs_worker', $1::text, 'USAGE')
		   AND has_schema_privilege('jobs_admin', $1::text, 'USAGE')`, schema)
}

// TestRoleCreationIsRaceSafe migrates several databases of one cluster at once while another
// transaction is creating one of the roles: every migration waits for it, then finds the
// role taken (unique_violation), and must carry on rather than fail.
func TestRoleCreationIsRaceSafe(t *testing.T) {
	t.Parallel()
	srv := pgtest.NewServer(t) // a cluster of our own: the roles must not exist yet
	ctx := t.Context()
	admin := pgtest.NewPool(t, srv.URL())
	const n = 4
	for i := range n {
		exec(t, admin, fmt.Sprintf("CREATE DATABASE race_%d", i))
	}

	holder := pgtest.NewConn(t, srv.URL())
	exec(t, holder, "BEGIN")
	exec(t, holder, "CREATE ROLE jobs_producer NOLOGIN")

	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			conn, err := pgx.Connect(ctx, srv.URLFor(fmt.Sprintf("race_%d", i)))
			if err != nil {
				errs[i] = err
				return
			}
			defer conn.Close(context.WithoutCancel(ctx))
			errs[i] = skiplock.Migrate(ctx, conn, nil)
		})
	}

	// Every migration reaches CREATE ROLE jobs_producer and blocks on the uncommitted one.
	deadline := time.Now().Add(time.Minute)
	for scalar[int](t, admin, "SELECT count(*) FROM pg_stat_activity WHERE datname LIKE 'race\\_%' AND wait_event_type = 'Lock'") < n {
		if time.Now().After(deadline) {
			exec(t, holder, "ROLLBACK")
			wg.Wait()
			t.Fatalf("migrations did not all wait for the concurrent CREATE ROLE; errors: %v", errors.Join(errs...))
		}
		time.Sleep(20 * time.Millisecond)
	}
	exec(t, holder, "COMMIT")
	wg.Wait()

	for i, err := range errs {
		if err != nil {
			t.Errorf("migrating race_%d: %v", i, err)
		}
	}
	for i := range n {
		if !grantsPresent(t, srv.URLFor(fmt.Sprintf("race_%d", i)), "public") {
			t.Errorf("race_%d: the jobs_* roles lack their grants", i)
		}
	}
	for _, r := range jobsRoles {
		if scalar[bool](t, admin, "SELECT rolcanlogin FROM pg_roles WHERE rolname = $1", r) {
			t.Errorf("role %s can log in", r)
		}
	}
}

// TestInstallWithoutCreateRole installs as a database owner who may not create roles: the
// migration must succeed, skip the missing roles with a NOTICE, and leave everything closed.
// Then it follows docs/security.md: a superuser creates the roles and the owner runs
// sql/grants.sql again, after which the grants are in place.
func TestInstallWithoutCreateRole(t *testing.T) {
	t.Parallel()
	srv := pgtest.NewServer(t)
	ctx := t.Context()
	admin := pgtest.NewPool(t, srv.URL())
	exec(t, admin, "CREATE ROLE installer LOGIN")
	exec(t, admin, "CREATE DATABASE app1 OWNER installer")
	exec(t, admin, "CREATE DATABASE app2 OWNER installer")

	// migrate runs Migrate as installer and returns the notices it raised.
	migrate := func(dbname string) []string {
		t.Helper()
		cfg, err := pgx.ParseConfig(srv.URLFor(dbname))
		if err != nil {
			t.Fatal(err)
		}
		cfg.User = "installer"
		var mu sync.Mutex
		var notices []string
		cfg.OnNotice = func(_ *pgconn.PgConn, n *pgconn.Notice) {
			mu.Lock()
			defer mu.Unlock()
			notices = append(notices, n.Message)
		}
		conn, err := pgx.ConnectConfig(ctx, cfg)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(context.WithoutCancel(ctx))
		if err := skiplock.Migrate(ctx, conn, nil); err != nil {
			t.Fatalf("Migrate as installer without CREATEROLE: %v", err)
		}
		mu.Lock()
		defer mu.Unlock()
		return notices
	}
	installerURL := func(dbname string) string {
		return userURL(t, srv.URLFor(dbname), "installer", "unused")
	}

	notices := migrate("app1")
	for _, r := range jobsRoles {
		want := "skiplock: cannot create role " + r
		if !slices.ContainsFunc(notices, func(n string) bool { return strings.HasPrefix(n, want) }) {
			t.Errorf("no notice %q among %q", want, notices)
		}
	}
	if n := scalar[int](t, admin, "SELECT count(*) FROM pg_roles WHERE rolname LIKE 'jobs\\_%'"); n != 0 {
		t.Fatalf("%d jobs_* roles exist; the installer should not have been able to create them", n)
	}
	app1 := pgtest.NewConn(t, installerURL("app1"))
	if n := scalar[int](t, app1, `
		SELECT count(*) FROM pg_proc
		WHERE pronamespace = 'public'::regnamespace AND proname LIKE 'jobs\_%'
		  AND has_function_privilege('public', oid, 'EXECUTE')`); n != 0 {
		t.Errorf("PUBLIC may execute %d skiplock functions", n)
	}

	// The documented fix: a superuser creates the roles, the owner re-runs sql/grants.sql.
	exec(t, admin, "CREATE ROLE jobs_producer NOLOGIN; CREATE ROLE jobs_worker NOLOGIN; CREATE ROLE jobs_admin NOLOGIN")
	grantsSQL, err := fs.ReadFile(skiplock.CodePackage(), "grants.sql")
	if err != nil {
		t.Fatal(err)
	}
	exec(t, app1, string(grantsSQL))
	if !grantsPresent(t, installerURL("app1"), "public") {
		t.Error("app1: grants missing after re-running sql/grants.sql")
	}

	// With the roles in place, an installer without CREATEROLE needs nothing more.
	for _, n := range migrate("app2") {
		if strings.HasPrefix(n, "skiplock: cannot") {
			t.Errorf("notice when the roles exist: %q", n)
		}
	}
	if !grantsPresent(t, installerURL("app2"), "public") {
		t.Error("app2: grants missing")
	}
}

// TestDedicatedSchema installs into a schema of its own, as docs/security.md recommends: the
// roles get USAGE on it and reach the functions by qualified name, and nobody else may create
// objects there.
func TestDedicatedSchema(t *testing.T) {
	t.Parallel()
	url := pgtest.NewEmptyDatabase(t)
	super := pgtest.NewConn(t, url)
	if err := skiplock.Migrate(t.Context(), super, &skiplock.MigrateOpts{Schema: "skiplock"}); err != nil {
		t.Fatal(err)
	}
	b := &testBundle{url: url, super: pgtest.NewPool(t, url)}
	if !grantsPresent(t, url, "skiplock") {
		t.Fatal("the jobs_* roles lack their grants in schema skiplock")
	}
	if scalar[bool](t, b.super, "SELECT has_schema_privilege('public', 'skiplock', 'CREATE') OR has_schema_privilege('public', 'skiplock', 'USAGE')") {
		t.Error("PUBLIC has privileges on schema skiplock")
	}

	producer := pgtest.NewPool(t, newLogin(t, b, "app_producer", "jobs_producer"))
	id := scalar[int64](t, producer, "SELECT skiplock.jobs_enqueue('x')")
	if got := scalar[string](t, producer, "SELECT state::text FROM skiplock.jobs_get($1)", id); got != "queued" {
		t.Errorf("state = %s, want queued", got)
	}
	mustDeny(t, producer,
		"CREATE TABLE skiplock.jobs_decoy (i int)",
		"SELECT * FROM skiplock.jobs_claim('w')",
		"SELECT * FROM skiplock.jobs",
	)
	nobody := pgtest.NewPool(t, newLogin(t, b, "app_nobody"))
	mustDeny(t, nobody, "SELECT skiplock.jobs_enqueue('x')", "SELECT * FROM skiplock.jobs_get(1)")
}

// TestWarnsWhenPublicMayCreate installs into a schema where every role may create objects
// (public before PostgreSQL 15): the install works but warns, since such a schema lets any
// user plant an overload that skiplock's SECURITY DEFINER functions would call.
func TestWarnsWhenPublicMayCreate(t *testing.T) {
	t.Parallel()
	url := pgtest.NewEmptyDatabase(t)
	exec(t, pgtest.NewConn(t, url), "GRANT CREATE ON SCHEMA public TO PUBLIC")

	cfg, err := pgx.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var warnings []string
	cfg.OnNotice = func(_ *pgconn.PgConn, n *pgconn.Notice) {
		mu.Lock()
		defer mu.Unlock()
		if n.Severity == "WARNING" {
			warnings = append(warnings, n.Message)
		}
	}
	conn, err := pgx.ConnectConfig(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.WithoutCancel(t.Context()))
	if err := skiplock.Migrate(t.Context(), conn, nil); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	want := "skiplock: every role may create objects in schema public"
	if !slices.ContainsFunc(warnings, func(w string) bool { return strings.HasPrefix(w, want) }) {
		t.Errorf("warnings = %q, want one starting %q", warnings, want)
	}
}

// TestInstallIntoSchemaOwnedByAnother follows docs/security.md where the installer may
// create objects in the install schema but does not own it: the grants raise a NOTICE that
// they cannot give the roles USAGE, the roles cannot reach the functions until the schema's
// owner runs the GRANT USAGE the notice names, and the owner of the functions can re-run
// sql/grants.sql with psql and PGOPTIONS, as shown there, any time (it is idempotent). With
// MigrateOpts.Schema the installer needs CREATE on the database too: CREATE SCHEMA IF NOT
// EXISTS checks it before it looks for the schema. Without it, Migrate installs into the
// first schema of the connection's search_path.
func TestInstallIntoSchemaOwnedByAnother(t *testing.T) {
	t.Parallel()
	url := pgtest.NewEmptyDatabase(t)
	super := pgtest.NewPool(t, url)
	b := &testBundle{url: url, super: super}
	installerURL := newLogin(t, b, "installer")
	installer := scalar[string](t, pgtest.NewConn(t, installerURL), "SELECT session_user::text")
	// As docs/security.md advises, a superuser creates the roles before installing (the
	// installer may not), unless an install on this cluster already did.
	exec(t, super, `DO $$
		DECLARE r text;
		BEGIN
			FOREACH r IN ARRAY ARRAY['jobs_producer', 'jobs_worker', 'jobs_admin'] LOOP
				BEGIN
					EXECUTE format('CREATE ROLE %I NOLOGIN', r);
				EXCEPTION WHEN duplicate_object OR unique_violation THEN
					NULL;
				END;
			END LOOP;
		END $$`)
	exec(t, super, "CREATE SCHEMA shared")
	exec(t, super, "GRANT USAGE, CREATE ON SCHEMA shared TO "+pgx.Identifier{installer}.Sanitize())

	cfg, err := pgx.ParseConfig(installerURL)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var notices []string
	cfg.OnNotice = func(_ *pgconn.PgConn, n *pgconn.Notice) {
		mu.Lock()
		defer mu.Unlock()
		notices = append(notices, n.Message)
	}
	cfg.RuntimeParams["search_path"] = "shared"
	conn, err := pgx.ConnectConfig(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.WithoutCancel(t.Context()))
	var pgErr *pgconn.PgError
	if err := skiplock.Migrate(t.Context(), conn, &skiplock.MigrateOpts{Schema: "shared"}); !errors.As(err, &pgErr) || pgErr.Code != "42501" {
		t.Errorf("Migrate with Schema by an installer without CREATE on the database: %v, want 42501", err)
	}
	if err := skiplock.Migrate(t.Context(), conn, nil); err != nil {
		t.Fatalf("Migrate into a schema the installer does not own: %v", err)
	}
	mu.Lock()
	want := "skiplock: cannot grant USAGE on schema shared"
	if !slices.ContainsFunc(notices, func(n string) bool { return strings.HasPrefix(n, want) }) {
		t.Errorf("notices = %q, want one starting %q", notices, want)
	}
	mu.Unlock()

	producer := pgtest.NewConn(t, newLogin(t, b, "app_producer", "jobs_producer"))
	mustDeny(t, producer, "SELECT shared.jobs_enqueue('x')")
	exec(t, super, "GRANT USAGE ON SCHEMA shared TO jobs_producer, jobs_worker, jobs_admin")
	mustAllow(t, producer, "SELECT shared.jobs_enqueue('x')")

	psql, err := pglocal.Tool("psql")
	if err != nil {
		t.Fatal(err)
	}
	grantsFile, err := filepath.Abs("../../sql/grants.sql")
	if err != nil {
		t.Fatal(err)
	}
	cmd := osexec.CommandContext(t.Context(), psql, "-X", "-q", "-v", "ON_ERROR_STOP=1", "-f", grantsFile, installerURL)
	cmd.Env = append(os.Environ(), "PGOPTIONS=-c search_path=shared")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("psql -f sql/grants.sql as the installer: %v\n%s", err, out)
	}
	if !grantsPresent(t, url, "shared") {
		t.Error("grants missing after re-running sql/grants.sql in schema shared")
	}
	mustAllow(t, producer, "SELECT shared.jobs_enqueue('x')")
}

// TestMigrationsRevokeInTheSameTransaction: "sql/grants.sql revokes it in the same
// transaction that creates the functions". tern runs each migration in one transaction unless
// the file turns that off, and every migration that creates functions ends with grants.sql
// (TestSQLFilesAreFrozen/FunctionsAreInstalledBetweenPreambleAndGrants in the root package),
// so none may turn it off; the install script of skiplock sql is one transaction too.
func TestMigrationsRevokeInTheSameTransaction(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob("../../migrations/*.sql")
	if err != nil || len(files) == 0 {
		t.Fatalf("no migrations found: %v", err)
	}
	for _, f := range files {
		text, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(text), "tern: disable-tx") {
			t.Errorf("%s runs outside a transaction: its functions would be executable by PUBLIC until its grants run", f)
		}
	}
	script, err := skiplock.InstallSQL(&skiplock.InstallSQLOpts{})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(script, "\nBEGIN;\n") || !strings.HasSuffix(strings.TrimSpace(script), "COMMIT;") {
		t.Error("the install script of skiplock sql is not one transaction")
	}
}
