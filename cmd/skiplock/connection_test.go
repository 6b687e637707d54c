package main

import (
	"fmt"
	"net/url"
	"strings"
	"testing"

	"github.com/skiplock/skiplock/admin"
	"github.com/skiplock/skiplock/tests/pgtest"
)

// TestConnection: --database-url wins over DATABASE_URL, which wins over the PG* variables;
// --schema finds skiplock in another schema. Not parallel: it sets PG* variables.
func TestConnection(t *testing.T) {
	db := setup(t)
	other := setup(t)
	pgtest.MustExec(t, db.Conn, "SELECT jobs_enqueue('in-db')")
	pgtest.MustExec(t, other.Conn, "SELECT jobs_enqueue('in-other')")

	kinds := func(r result) string {
		t.Helper()
		var page struct {
			Jobs []admin.ListedJob `json:"jobs"`
		}
		r.decode(t, &page)
		var ks []string
		for _, j := range page.Jobs {
			ks = append(ks, j.Kind)
		}
		return strings.Join(ks, " ")
	}

	// DATABASE_URL.
	if k := kinds(cli(t, db.URL, "list", "-o", "json")); k != "in-db" {
		t.Fatalf("with DATABASE_URL: %q", k)
	}
	// --database-url over DATABASE_URL.
	if k := kinds(cli(t, db.URL, "list", "-o", "json", "--database-url", other.URL)); k != "in-other" {
		t.Fatalf("with --database-url: %q", k)
	}
	// The PG* variables when neither is set.
	u, err := url.Parse(other.URL)
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("PGHOST", u.Hostname())
	t.Setenv("PGPORT", u.Port())
	t.Setenv("PGUSER", u.User.Username())
	if p, ok := u.User.Password(); ok {
		t.Setenv("PGPASSWORD", p)
	}
	t.Setenv("PGDATABASE", strings.TrimPrefix(u.Path, "/"))
	t.Setenv("PGSSLMODE", u.Query().Get("sslmode"))
	if k := kinds(cliWith(t, t.Context(), cliOpts{}, "list", "-o", "json")); k != "in-other" {
		t.Fatalf("with the PG* variables: %q", k)
	}

	// --schema: migrate into a schema of its own, then use it.
	empty := pgtest.NewEmptyDatabase(t)
	if out := cli(t, empty, "migrate", "--schema", "queue one").ok(t); !strings.HasPrefix(out, "skiplock schema is at version ") {
		t.Fatalf("migrate --schema: %q", out)
	}
	cli(t, empty, "enqueue", "k", "--schema", "queue one").ok(t)
	if k := kinds(cli(t, empty, "list", "-o", "json", "--schema", "queue one")); k != "k" {
		t.Fatalf("list --schema: %q", k)
	}
	cli(t, empty, "list").fails(t, exitFailed, "failed to list jobs")

	cliWith(t, t.Context(), cliOpts{}, "list", "--database-url", "postgres://%zz").fails(t, exitUsage, "bad database URL")
}

// TestAdminRoleNeedsNoTableAccess: a login with only jobs_admin (no privilege on the jobs
// table) runs the operator's commands, since each is a call of a SECURITY DEFINER function.
func TestAdminRoleNeedsNoTableAccess(t *testing.T) {
	t.Parallel()
	db := setup(t)
	id := deadJob(t, db, "mail", "email", "boom")
	pgtest.MustExec(t, db.Conn, "SELECT jobs_schedule('nightly', '0 3 * * *', 'report')")
	role := "cli_admin_" + strings.ReplaceAll(strings.ToLower(t.Name()), "/", "_")
	pgtest.MustExec(t, db.Conn, fmt.Sprintf("DROP ROLE IF EXISTS %s", role))
	pgtest.MustExec(t, db.Conn, fmt.Sprintf("CREATE ROLE %s LOGIN PASSWORD 'pw' IN ROLE jobs_admin", role))
	t.Cleanup(func() { _, _ = db.Conn.Exec(t.Context(), "DROP ROLE IF EXISTS "+role) })

	u, err := url.Parse(db.URL)
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.UserPassword(role, "pw")
	admin := u.String()

	cli(t, admin, "list", "--state", "dead").ok(t)
	cli(t, admin, "show", fmt.Sprint(id)).ok(t)
	cli(t, admin, "queues").ok(t)
	cli(t, admin, "stats").ok(t)
	cli(t, admin, "schedule", "list").ok(t)
	cli(t, admin, "schedule", "run", "nightly").ok(t)
	cli(t, admin, "pause", "mail").ok(t)
	cli(t, admin, "limit", "mail", "--max-running", "2").ok(t)
	cli(t, admin, "retry", "--dry-run").ok(t)
	if out := cli(t, admin, "retry", "--yes").ok(t); out != "retried 1 jobs\n" {
		t.Fatalf("retry as jobs_admin: %q", out)
	}
	cli(t, admin, "maintain").ok(t)
	cli(t, admin, "wait", fmt.Sprint(id), "--timeout", "100ms").fails(t, exitTimeout, "still queued")
	// A workflow: shown (jobs_workflow) and cancelled.
	wf := pgtest.QueryOne[int64](t, db.Conn, `SELECT min(id) FROM jobs_enqueue_workflow('[{"name": "a", "kind": "a"}]')`)
	if out := cli(t, admin, "workflow", "show", fmt.Sprint(wf)).ok(t); !strings.Contains(out, "queued") {
		t.Fatalf("workflow show as jobs_admin: %q", out)
	}
	if out := cli(t, admin, "workflow", "cancel", fmt.Sprint(wf)).ok(t); out != fmt.Sprintf("cancelled 1 jobs of workflow %d\n", wf) {
		t.Fatalf("workflow cancel as jobs_admin: %q", out)
	}
	// Enqueueing is the producer's.
	cli(t, admin, "enqueue", "k").fails(t, exitFailed, "permission denied for function jobs_enqueue")
}
