package security_test

import (
	"context"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/skiplock/skiplock"
	"github.com/skiplock/skiplock/tests/pgtest"
)

// The tests here each check a sentence of docs/security.md that no other test covers; the
// sentence is quoted (or named) in the test's comment.

// TestMetricsScraperNeedsOnlyItsFunction: "A scraper that should see counts and nothing else
// can be given EXECUTE on jobs_metrics() alone (with USAGE on the schema)."
func TestMetricsScraperNeedsOnlyItsFunction(t *testing.T) {
	t.Parallel()
	b := setup(t)
	url := newLogin(t, b, "app_scraper")
	name := scalar[string](t, pgtest.NewConn(t, url), "SELECT session_user::text")
	exec(t, b.super, "GRANT EXECUTE ON FUNCTION jobs_metrics() TO "+pgx.Identifier{name}.Sanitize())
	exec(t, b.super, "GRANT USAGE ON SCHEMA public TO "+pgx.Identifier{name}.Sanitize())
	enqueue(t, b, "q")
	scraper := pgtest.NewConn(t, url)
	mustAllow(t, scraper, "SELECT * FROM jobs_metrics()")
	mustDeny(t, scraper, "SELECT * FROM jobs_stats()", "SELECT jobs_get(1)", "SELECT * FROM jobs")
}

// TestAnyJobCanBeLookedUp: "Any job id can be looked up, so do not put secrets in error
// messages": a producer reads the progress, last_error included, of a job it did not enqueue.
func TestAnyJobCanBeLookedUp(t *testing.T) {
	t.Parallel()
	b := setup(t)
	producer := pgtest.NewConn(t, newLogin(t, b, "app_producer", "jobs_producer"))
	id := enqueue(t, b, "other_app")
	exec(t, b.super, "SELECT jobs_fail($1, $2, 'token abc123 rejected')", id, claim(t, b, "other_app", id))
	if got := scalar[string](t, producer, "SELECT last_error FROM jobs_get($1)", id); got != "token abc123 rejected" {
		t.Errorf("jobs_get(another login's job).last_error = %q, want it readable", got)
	}
}

// TestRolesDoNotSeparateQueues: "A jobs_worker may claim from every queue and a
// jobs_producer may enqueue into every queue of the database."
func TestRolesDoNotSeparateQueues(t *testing.T) {
	t.Parallel()
	b := setup(t)
	producer := pgtest.NewConn(t, newLogin(t, b, "app_producer", "jobs_producer"))
	worker := pgtest.NewConn(t, newLogin(t, b, "app_worker", "jobs_worker"))
	for _, q := range []string{"billing", "reports"} {
		exec(t, producer, "SELECT jobs_enqueue('k', queue => $1)", q)
	}
	got := scalar[[]string](t, worker, "SELECT array_agg(queue ORDER BY queue) FROM jobs_claim('w', 10)")
	if !slices.Equal(got, []string{"billing", "reports"}) {
		t.Errorf("a worker claimed from queues %v, want billing and reports", got)
	}

	// "Use separate databases to keep tenants apart: separate install schemas of one
	// database are granted to the same three roles, so a jobs_worker works them all."
	if err := skiplock.Migrate(t.Context(), pgtest.NewConn(t, b.url), &skiplock.MigrateOpts{Schema: "tenant_b"}); err != nil {
		t.Fatal(err)
	}
	exec(t, b.super, "SELECT tenant_b.jobs_enqueue('k', queue => 'tenant_b_queue')")
	if got := scalar[string](t, worker, "SELECT queue FROM tenant_b.jobs_claim('w')"); got != "tenant_b_queue" {
		t.Errorf("a worker claimed %q from another install schema, want tenant_b_queue", got)
	}
}

// TestAnyoneListensToJobsReady: "PostgreSQL has no privileges on LISTEN: any user can listen
// on the jobs_ready channel, whose payload is a queue name."
func TestAnyoneListensToJobsReady(t *testing.T) {
	t.Parallel()
	b := setup(t)
	nobody := pgtest.NewConn(t, newLogin(t, b, "app_nobody"))
	exec(t, nobody, "LISTEN jobs_ready")
	enqueue(t, b, "payroll")
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	n, err := nobody.WaitForNotification(ctx)
	if err != nil {
		t.Fatalf("a login granted nothing got no jobs_ready notification: %v", err)
	}
	if n.Payload != "payroll" {
		t.Errorf("jobs_ready payload = %q, want the queue name payroll", n.Payload)
	}
}

// TestNoInheritLoginSetsRole: "a login created NOINHERIT must run SET ROLE jobs_worker
// first". The lease it takes is still its own login's, not jobs_worker's.
func TestNoInheritLoginSetsRole(t *testing.T) {
	t.Parallel()
	b := setup(t)
	url := newLogin(t, b, "app_noinherit", "jobs_worker")
	conn := pgtest.NewConn(t, url)
	login := scalar[string](t, conn, "SELECT session_user::text")
	exec(t, b.super, "ALTER ROLE "+pgx.Identifier{login}.Sanitize()+" NOINHERIT")
	conn = pgtest.NewConn(t, url)
	id := enqueue(t, b, "q")
	mustDeny(t, conn, "SELECT * FROM jobs_claim('w')")
	exec(t, conn, "SET ROLE jobs_worker")
	attempt := claimAs(t, conn, "q", id)
	if got := scalar[string](t, b.super, "SELECT lease_role::regrole::text FROM jobs WHERE id = $1", id); got != login {
		t.Errorf("lease_role = %s, want the login %s", got, login)
	}
	if !scalar[bool](t, conn, "SELECT jobs_complete($1, $2)", id, attempt) {
		t.Error("jobs_complete after SET ROLE returned false")
	}
}

// TestAdminWorksWhenAlsoGrantedWorker: "An admin does not produce or work. Grant it
// jobs_producer or jobs_worker too if an operator should."
func TestAdminWorksWhenAlsoGrantedWorker(t *testing.T) {
	t.Parallel()
	b := setup(t)
	operator := pgtest.NewConn(t, newLogin(t, b, "app_operator", "jobs_admin", "jobs_producer", "jobs_worker"))
	id := scalar[int64](t, operator, "SELECT jobs_enqueue('k', queue => 'q')")
	attempt := claimAs(t, operator, "q", id)
	if !scalar[bool](t, operator, "SELECT jobs_complete($1, $2)", id, attempt) {
		t.Error("an admin also granted jobs_worker could not complete its job")
	}
}

// TestWorkerLoginReachesEveryDatabaseItMayConnectTo: "membership in jobs_worker lets a login
// work the queues of every such database it may CONNECT to", and REVOKE CONNECT … FROM
// PUBLIC closes a database to it.
func TestWorkerLoginReachesEveryDatabaseItMayConnectTo(t *testing.T) {
	t.Parallel()
	b := setup(t)
	other := setup(t)
	urlHere := newLogin(t, b, "app_worker", "jobs_worker")
	login := scalar[string](t, pgtest.NewConn(t, urlHere), "SELECT session_user::text")
	// The same login, pointed at the other database.
	urlThere := strings.Replace(urlHere,
		"/"+scalar[string](t, b.super, "SELECT current_database()::text"),
		"/"+scalar[string](t, other.super, "SELECT current_database()::text"), 1)
	id := enqueue(t, other, "q")
	there := pgtest.NewConn(t, urlThere)
	if got := scalar[string](t, there, "SELECT session_user::text"); got != login {
		t.Fatalf("connected to the other database as %s, want %s", got, login)
	}
	claimAs(t, there, "q", id)

	dbThere := scalar[string](t, other.super, "SELECT current_database()::text")
	exec(t, other.super, "REVOKE CONNECT ON DATABASE "+pgx.Identifier{dbThere}.Sanitize()+" FROM PUBLIC")
	if conn, err := pgx.Connect(t.Context(), urlThere); err == nil {
		_ = conn.Close(t.Context())
		t.Error("the login connected to a database after REVOKE CONNECT … FROM PUBLIC")
	}
}

// TestMonitoringQueries runs the two queries of docs/security.md's "Checking the grants", as
// written there but for the test's install schema and login: PUBLIC may execute nothing, and
// a worker login may execute exactly the functions of jobs_worker's row of the roles table.
func TestMonitoringQueries(t *testing.T) {
	t.Parallel()
	b := setup(t)
	doc, err := os.ReadFile("../../docs/security.md")
	if err != nil {
		t.Fatal(err)
	}
	_, after, ok := strings.Cut(string(doc), "The same from SQL, for monitoring")
	if !ok {
		t.Fatal("docs/security.md has no paragraph \"The same from SQL, for monitoring\"")
	}
	block := regexp.MustCompile("(?s)```sql\n(.*?)```").FindStringSubmatch(after)
	if block == nil {
		t.Fatal("no sql block after \"The same from SQL, for monitoring\"")
	}
	queries := strings.Split(strings.TrimSpace(block[1]), ";")
	queries = slices.DeleteFunc(queries, func(q string) bool { return strings.TrimSpace(q) == "" })
	if len(queries) != 2 {
		t.Fatalf("the monitoring block has %d queries, want 2", len(queries))
	}
	url := newLogin(t, b, "app_worker", "jobs_worker")
	login := scalar[string](t, pgtest.NewConn(t, url), "SELECT session_user::text")
	run := func(q string) []string {
		q = strings.ReplaceAll(q, "'skiplock'::regnamespace", "'public'::regnamespace")
		q = strings.ReplaceAll(q, "'app_worker'", "'"+login+"'")
		rows, err := b.super.Query(t.Context(), "SELECT f::text FROM ("+q+") AS r(f)")
		if err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		got, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	if got := run(queries[0]); len(got) != 0 {
		t.Errorf("PUBLIC may execute %v", got)
	}
	var names []string
	for _, f := range run(queries[1]) {
		name, _, _ := strings.Cut(f, "(")
		names = append(names, name)
	}
	slices.Sort(names)
	names = slices.Compact(names)
	want := scalar[[]string](t, b.super, `
		SELECT array_agg(DISTINCT p.proname ORDER BY p.proname)
		FROM pg_proc p
		WHERE p.pronamespace = 'public'::regnamespace AND has_function_privilege('jobs_worker', p.oid, 'EXECUTE')`)
	if !slices.Equal(names, want) {
		t.Errorf("the worker login may execute %v, want jobs_worker's %v", names, want)
	}
}
