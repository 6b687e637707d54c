package security_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/skiplock/skiplock/tests/pgtest"
)

// The roles each skiplock function is granted to. Every function in the install schema must
// be listed: TestPrivilegeCatalog fails on one that is not, so a new function cannot ship
// callable by PUBLIC or by no role at all unnoticed.
var functionGrants = map[string][]string{
	"_jobs_check_fence_arrays(text,bigint[],integer[])":                           nil,
	"_jobs_invalid(text,text,text)":                                               nil,
	"jobs_backoff(integer)":                                                       {"jobs_worker", "jobs_admin"},
	"jobs_cancel(bigint)":                                                         {"jobs_admin"},
	"jobs_cancel(bigint,integer,text)":                                            {"jobs_worker"},
	"jobs_claim(text,integer,text[],interval)":                                    {"jobs_worker"},
	"jobs_complete(bigint,integer)":                                               {"jobs_worker"},
	"jobs_complete_many(bigint[],integer[])":                                      {"jobs_worker"},
	"jobs_enqueue(text,jsonb,text,timestamp with time zone,integer,integer,text)": {"jobs_producer"},
	"jobs_enqueue_many(text[],jsonb[],text[],timestamp with time zone[],integer[],integer[],text[])": {"jobs_producer"},
	"jobs_fail(bigint,integer,text,timestamp with time zone)":                                        {"jobs_worker"},
	"jobs_get(bigint)":                                     {"jobs_producer", "jobs_worker", "jobs_admin"},
	"jobs_heartbeat(bigint,integer,interval)":              {"jobs_worker"},
	"jobs_heartbeat_many(bigint[],integer[],interval)":     {"jobs_worker"},
	"jobs_prune(interval,boolean,integer)":                 {"jobs_admin"},
	"jobs_requeue_expired()":                               {"jobs_worker", "jobs_admin"},
	"jobs_retry(bigint)":                                   {"jobs_admin"},
	"jobs_snooze(bigint,integer,timestamp with time zone)": {"jobs_worker"},
	"jobs_stats()":                                         {"jobs_worker", "jobs_admin"},
}

var jobsRoles = []string{"jobs_producer", "jobs_worker", "jobs_admin"}

func TestPrivilegeCatalog(t *testing.T) {
	t.Parallel()
	b := setup(t)

	t.Run("FunctionsGrantedExactlyToTheirRoles", func(t *testing.T) {
		rows, err := b.super.Query(t.Context(), `
			SELECT p.oid::regprocedure::text,
			       p.proname NOT LIKE '\_%',
			       p.prosecdef,
			       coalesce(p.proconfig, '{}'),
			       has_function_privilege('public', p.oid, 'EXECUTE'),
			       array(SELECT r FROM unnest($1::text[]) AS r WHERE has_function_privilege(r, p.oid, 'EXECUTE'))
			FROM pg_proc p
			WHERE p.pronamespace = 'public'::regnamespace
			  AND (p.proname LIKE 'jobs\_%' OR p.proname LIKE '\_jobs\_%')
			ORDER BY 1`, jobsRoles)
		if err != nil {
			t.Fatal(err)
		}
		seen := map[string]bool{}
		for rows.Next() {
			var sig string
			var public, secdef, publicExec bool
			var config, granted []string
			if err := rows.Scan(&sig, &public, &secdef, &config, &publicExec, &granted); err != nil {
				t.Fatal(err)
			}
			seen[sig] = true
			want, ok := functionGrants[sig]
			if !ok {
				t.Errorf("%s: not in functionGrants; grant it to its roles in a migration and list it here", sig)
				continue
			}
			if publicExec {
				t.Errorf("%s: PUBLIC may execute it", sig)
			}
			if !slices.Equal(granted, want) {
				t.Errorf("%s: executable by %v, want %v", sig, granted, want)
			}
			if public && !secdef {
				t.Errorf("%s: not SECURITY DEFINER", sig)
			}
			if !slices.Contains(config, "search_path=public, pg_temp") {
				t.Errorf("%s: settings %v, want search_path pinned to public, pg_temp", sig, config)
			}
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		for sig := range functionGrants {
			if !seen[sig] {
				t.Errorf("%s: listed in functionGrants but not installed", sig)
			}
		}
	})

	t.Run("OnlyAdminHasTablePrivilegesOnSettings", func(t *testing.T) {
		// Every privilege on a relation of the install schema held by anyone but its owner,
		// PUBLIC included (grantee 0), down to single columns.
		rows, err := b.super.Query(t.Context(), `
			SELECT c.relname || ':' || CASE WHEN a.grantee = 0 THEN 'PUBLIC' ELSE a.grantee::regrole::text END
			       || ':' || a.privilege_type
			FROM pg_class c, aclexplode(c.relacl) a
			WHERE c.relnamespace = 'public'::regnamespace AND a.grantee <> c.relowner
			UNION ALL
			SELECT c.relname || '.' || at.attname || ':' || a.grantee::regrole::text || ':' || a.privilege_type
			FROM pg_class c
			JOIN pg_attribute at ON at.attrelid = c.oid, aclexplode(at.attacl) a
			WHERE c.relnamespace = 'public'::regnamespace
			ORDER BY 1`)
		if err != nil {
			t.Fatal(err)
		}
		got, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			t.Fatal(err)
		}
		want := []string{"jobs_settings:jobs_admin:SELECT", "jobs_settings:jobs_admin:UPDATE"}
		if !slices.Equal(got, want) {
			t.Errorf("table privileges = %v, want %v", got, want)
		}
	})

	t.Run("RolesCannotLogIn", func(t *testing.T) {
		for _, r := range jobsRoles {
			if scalar[bool](t, b.super, "SELECT rolcanlogin OR rolsuper OR rolcreaterole OR rolcreatedb OR rolbypassrls FROM pg_roles WHERE rolname = $1", r) {
				t.Errorf("role %s has LOGIN or another attribute; want NOLOGIN and nothing else", r)
			}
		}
	})
}

// roleCalls is one call of every kind a role might attempt, on a database with no jobs (so
// the allowed ones succeed and change nothing).
var roleCalls = []struct {
	sql   string
	roles []string // roles allowed to run it
}{
	{"SELECT jobs_enqueue('x', queue => 'never')", []string{"jobs_producer"}},
	{"SELECT jobs_enqueue_many(ARRAY['x'], queues => ARRAY['never'])", []string{"jobs_producer"}},
	{"SELECT * FROM jobs_get(1)", []string{"jobs_producer", "jobs_worker", "jobs_admin"}},
	{"SELECT * FROM jobs_claim('w', 1, ARRAY['empty'])", []string{"jobs_worker"}},
	{"SELECT jobs_complete(1, 1)", []string{"jobs_worker"}},
	{"SELECT jobs_complete_many(ARRAY[1]::bigint[], ARRAY[1])", []string{"jobs_worker"}},
	{"SELECT jobs_fail(1, 1, 'e')", []string{"jobs_worker"}},
	{"SELECT jobs_heartbeat(1, 1)", []string{"jobs_worker"}},
	{"SELECT jobs_heartbeat_many(ARRAY[1]::bigint[], ARRAY[1])", []string{"jobs_worker"}},
	{"SELECT jobs_snooze(1, 1, now())", []string{"jobs_worker"}},
	{"SELECT jobs_requeue_expired()", []string{"jobs_worker", "jobs_admin"}},
	{"SELECT * FROM jobs_stats()", []string{"jobs_worker", "jobs_admin"}},
	{"SELECT jobs_backoff(1)", []string{"jobs_worker", "jobs_admin"}},
	{"SELECT jobs_cancel(1)", []string{"jobs_admin"}},
	{"SELECT jobs_retry(1)", []string{"jobs_admin"}},
	{"SELECT jobs_prune()", []string{"jobs_admin"}},
	{"SELECT * FROM jobs_settings", []string{"jobs_admin"}},
	{"UPDATE jobs_settings SET backoff_jitter = backoff_jitter", []string{"jobs_admin"}},
	{"SELECT _jobs_invalid('f', 'p', 'is bad')", nil},
	{"SELECT _jobs_check_fence_arrays('f', ARRAY[1]::bigint[], ARRAY[1])", nil},
	{"INSERT INTO jobs_settings DEFAULT VALUES", nil},
	{"DELETE FROM jobs_settings", nil},
	{"TRUNCATE jobs_settings", nil},
	{"SELECT * FROM jobs", nil},
	{"SELECT count(*) FROM jobs", nil},
	{"INSERT INTO jobs (kind) VALUES ('x')", nil},
	{"UPDATE jobs SET priority = 1", nil},
	{"DELETE FROM jobs", nil},
	{"TRUNCATE jobs", nil},
	{"SELECT nextval('jobs_id_seq')", nil},
	{"SELECT * FROM jobs_schema_version", nil},
	{"UPDATE jobs_schema_version SET version = 0", nil},
}

func TestRolesCallOnlyWhatTheyAreGranted(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for _, role := range append([]string{"none"}, jobsRoles...) {
		t.Run(role, func(t *testing.T) {
			var grants []string
			if role != "none" {
				grants = []string{role}
			}
			pool := pgtest.NewPool(t, newLogin(t, b, "app_"+strings.TrimPrefix(role, "jobs_"), grants...))
			for _, c := range roleCalls {
				if slices.Contains(c.roles, role) {
					mustAllow(t, pool, c.sql)
				} else {
					mustDeny(t, pool, c.sql)
				}
			}
		})
	}
	if n := scalar[int](t, b.super, "SELECT count(*) FROM jobs"); n != 2 {
		t.Errorf("jobs = %d, want the 2 the producer enqueued", n)
	}
}

// TestNoGrantExecutesNothing calls every skiplock function the catalog lists, as a login
// that was granted nothing: PUBLIC's default EXECUTE must be revoked from each.
func TestNoGrantExecutesNothing(t *testing.T) {
	t.Parallel()
	b := setup(t)
	rows, err := b.super.Query(t.Context(), `
		SELECT format('SELECT %I(%s)', p.proname,
		              (SELECT string_agg(format('NULL::%s', format_type(a.t, NULL)), ', ' ORDER BY a.n)
		               FROM unnest(p.proargtypes::oid[]) WITH ORDINALITY AS a(t, n)))
		FROM pg_proc p
		WHERE p.pronamespace = 'public'::regnamespace
		  AND (p.proname LIKE 'jobs\_%' OR p.proname LIKE '\_jobs\_%')
		ORDER BY 1`)
	if err != nil {
		t.Fatal(err)
	}
	calls, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	if len(calls) < len(functionGrants) {
		t.Fatalf("found %d skiplock functions, want at least %d", len(calls), len(functionGrants))
	}
	nobody := pgtest.NewPool(t, newLogin(t, b, "app_nobody"))
	mustDeny(t, nobody, calls...)
}

func TestProducer(t *testing.T) {
	t.Parallel()

	t.Run("EnqueuesAndReadsProgress", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		producer := pgtest.NewPool(t, newLogin(t, b, "app_producer", "jobs_producer"))

		id := scalar[int64](t, producer, "SELECT jobs_enqueue('email', '{\"to\": \"a@example.com\"}', 'mail')")
		ids := scalar[[]int64](t, producer, "SELECT array_agg(i) FROM jobs_enqueue_many(ARRAY['a', 'b'], queues => ARRAY['mail', 'mail']) AS i")
		if len(ids) != 2 {
			t.Fatalf("jobs_enqueue_many ids = %v, want 2", ids)
		}
		if got := scalar[string](t, producer, "SELECT state::text FROM jobs_get($1)", id); got != "queued" {
			t.Errorf("state = %q, want queued", got)
		}

		// A worker fails the job; the producer sees the outcome through jobs_get.
		attempt := claim(t, b, "mail", id)
		exec(t, b.super, "SELECT jobs_fail($1, $2, 'smtp timeout')", id, attempt)
		var state, lastError string
		var attempts int32
		if err := producer.QueryRow(t.Context(), "SELECT state::text, attempts, last_error FROM jobs_get($1)", id).Scan(&state, &attempts, &lastError); err != nil {
			t.Fatal(err)
		}
		if state != "queued" || attempts != 1 || lastError != "smtp timeout" {
			t.Errorf("jobs_get = (%s, %d, %q), want (queued, 1, \"smtp timeout\")", state, attempts, lastError)
		}

		// jobs_get shows progress, never the payload or where the job runs.
		rows, err := producer.Query(t.Context(), "SELECT * FROM jobs_get($1)", id)
		if err != nil {
			t.Fatal(err)
		}
		var cols []string
		for _, f := range rows.FieldDescriptions() {
			cols = append(cols, f.Name)
		}
		rows.Close()
		want := []string{"state", "attempts", "max_attempts", "run_at", "last_error", "created_at", "finished_at"}
		if !slices.Equal(cols, want) {
			t.Errorf("jobs_get columns = %v, want %v", cols, want)
		}
		if n := scalar[int](t, producer, "SELECT count(*) FROM jobs_get(-1)"); n != 0 {
			t.Errorf("jobs_get(unknown) returned %d rows, want 0", n)
		}
		if code := sqlState(t, producer, "SELECT * FROM jobs_get(NULL)"); code != "22023" {
			t.Errorf("jobs_get(NULL): SQLSTATE %q, want 22023", code)
		}
	})

	t.Run("CannotWorkOrAdministerJobs", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		producer := pgtest.NewPool(t, newLogin(t, b, "app_producer", "jobs_producer"))
		queued := scalar[int64](t, producer, "SELECT jobs_enqueue('a', queue => 'q')")
		running := scalar[int64](t, producer, "SELECT jobs_enqueue('b', queue => 'r')")
		attempt := claim(t, b, "r", running)

		mustDeny(t, producer,
			"SELECT * FROM jobs_claim('thief', 10)",
			fmt.Sprintf("SELECT jobs_complete(%d, %d)", running, attempt),
			fmt.Sprintf("SELECT jobs_fail(%d, %d, 'x')", running, attempt),
			fmt.Sprintf("SELECT jobs_heartbeat(%d, %d)", running, attempt),
			fmt.Sprintf("SELECT jobs_snooze(%d, %d, now())", running, attempt),
			fmt.Sprintf("SELECT jobs_cancel(%d)", queued),
			"SELECT jobs_prune('0 seconds', true)",
			fmt.Sprintf("SELECT * FROM jobs WHERE id = %d", queued),
			fmt.Sprintf("UPDATE jobs SET state = 'done' WHERE id = %d", queued),
			fmt.Sprintf("DELETE FROM jobs WHERE id = %d", queued),
			"SELECT * FROM jobs_settings",
			"UPDATE jobs_settings SET backoff_base = '1 day'",
		)
		if got := jobState(t, b, queued); got != "queued" {
			t.Errorf("queued job is %s after the producer's denied calls", got)
		}
		if got := jobState(t, b, running); got != "running" {
			t.Errorf("running job is %s after the producer's denied calls", got)
		}
	})

	t.Run("CannotReachOtherTablesThroughFunctions", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		exec(t, b.super, "CREATE TABLE secret (v text); INSERT INTO secret VALUES ('s3cr3t')")
		producer := pgtest.NewPool(t, newLogin(t, b, "app_producer", "jobs_producer"))

		// The functions run static SQL: hostile arguments are data, never code.
		hostile := []string{
			"x'); DELETE FROM secret; --",
			"x'; UPDATE jobs_settings SET backoff_base = '1 day'; --",
			`x"; DROP TABLE secret; --`,
			"x$$; DELETE FROM secret; $$",
		}
		for _, s := range hostile {
			id := scalar[int64](t, producer,
				"SELECT jobs_enqueue($1, jsonb_build_object('k', $1::text), $1, unique_key => $1)", s)
			var kind, queue, key string
			if err := b.super.QueryRow(t.Context(), "SELECT kind, queue, unique_key FROM jobs WHERE id = $1", id).Scan(&kind, &queue, &key); err != nil {
				t.Fatal(err)
			}
			if kind != s || queue != s || key != s {
				t.Errorf("stored (%q, %q, %q), want %q verbatim", kind, queue, key, s)
			}
			if n := scalar[int](t, producer, "SELECT count(*) FROM jobs_enqueue_many(ARRAY[$1], queues => ARRAY[$1])", s); n != 1 {
				t.Errorf("jobs_enqueue_many returned %d ids, want 1", n)
			}
		}
		if got := scalar[string](t, b.super, "SELECT string_agg(v, ',') FROM secret"); got != "s3cr3t" {
			t.Errorf("secret = %q, want it untouched", got)
		}
		if got := scalar[string](t, b.super, "SELECT backoff_base::text FROM jobs_settings"); got != "00:00:01" {
			t.Errorf("backoff_base = %s, want the default 00:00:01", got)
		}
		mustDeny(t, producer, "SELECT * FROM secret", "DELETE FROM secret")
	})
}

func TestWorker(t *testing.T) {
	t.Parallel()

	t.Run("RunsJobs", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		worker := pgtest.NewPool(t, newLogin(t, b, "app_worker", "jobs_worker"))
		var ids []int64
		for range 5 {
			ids = append(ids, enqueue(t, b, "work"))
		}

		rows, err := worker.Query(t.Context(), "SELECT id, attempt FROM jobs_claim('w1', 5, ARRAY['work'], '1 minute')")
		if err != nil {
			t.Fatal(err)
		}
		type claimed struct {
			ID      int64
			Attempt int32
		}
		got, err := pgx.CollectRows(rows, pgx.RowToStructByPos[claimed])
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 5 {
			t.Fatalf("claimed %d jobs, want 5", len(got))
		}
		for i, c := range got {
			if c.ID != ids[i] || c.Attempt != 1 {
				t.Fatalf("claim %d = %+v, want id %d attempt 1", i, c, ids[i])
			}
		}

		if !scalar[bool](t, worker, "SELECT jobs_heartbeat($1, 1, '2 minutes')", ids[0]) {
			t.Error("jobs_heartbeat returned false for a held job")
		}
		if n := scalar[int](t, worker, "SELECT count(*) FROM jobs_heartbeat_many($1, ARRAY[1, 1])", ids[:2]); n != 2 {
			t.Errorf("jobs_heartbeat_many extended %d leases, want 2", n)
		}
		if !scalar[bool](t, worker, "SELECT jobs_complete($1, 1)", ids[0]) {
			t.Error("jobs_complete returned false for a held job")
		}
		if n := scalar[int](t, worker, "SELECT count(*) FROM jobs_complete_many($1, ARRAY[1])", ids[1:2]); n != 1 {
			t.Errorf("jobs_complete_many completed %d jobs, want 1", n)
		}
		if got := scalar[string](t, worker, "SELECT jobs_fail($1, 1, 'boom')::text", ids[2]); got != "queued" {
			t.Errorf("jobs_fail = %s, want queued", got)
		}
		if !scalar[bool](t, worker, "SELECT jobs_snooze($1, 1, now() + interval '1 hour')", ids[3]) {
			t.Error("jobs_snooze returned false for a held job")
		}
		exec(t, b.super, "UPDATE jobs SET lease_expires_at = now() - interval '1 second' WHERE id = $1", ids[4])
		if n := scalar[int](t, worker, "SELECT jobs_requeue_expired()"); n != 1 {
			t.Errorf("jobs_requeue_expired = %d, want 1", n)
		}
		if n := scalar[int64](t, worker, "SELECT sum(jobs) FROM jobs_stats()"); n != 5 {
			t.Errorf("jobs_stats counts %d jobs, want 5", n)
		}
		if got := scalar[string](t, worker, "SELECT last_error FROM jobs_get($1)", ids[2]); got != "boom" {
			t.Errorf("jobs_get last_error = %q, want boom", got)
		}

		want := []string{"done", "done", "queued", "queued", "queued"}
		for i, id := range ids {
			if got := jobState(t, b, id); got != want[i] {
				t.Errorf("job %d is %s, want %s", i, got, want[i])
			}
		}
	})

	t.Run("CannotEnqueueOrAdminister", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		worker := pgtest.NewPool(t, newLogin(t, b, "app_worker", "jobs_worker"))
		id := enqueue(t, b, "work")
		exec(t, b.super, "SELECT jobs_cancel($1)", id)

		mustDeny(t, worker,
			"SELECT jobs_enqueue('evil', queue => 'payments')",
			"SELECT jobs_enqueue_many(ARRAY['evil'], queues => ARRAY['payments'])",
			fmt.Sprintf("SELECT jobs_retry(%d)", id),
			fmt.Sprintf("SELECT jobs_cancel(%d)", id),
			"SELECT jobs_prune('0 seconds', true)",
			"SELECT * FROM jobs",
			fmt.Sprintf("UPDATE jobs SET state = 'queued' WHERE id = %d", id),
			"INSERT INTO jobs (kind, queue) VALUES ('evil', 'payments')",
			"UPDATE jobs_settings SET backoff_cap = '1 second', backoff_base = '1 second'",
		)
		if got := jobState(t, b, id); got != "cancelled" {
			t.Errorf("job is %s after the worker's denied retry, want cancelled", got)
		}
		if n := scalar[int](t, b.super, "SELECT count(*) FROM jobs"); n != 1 {
			t.Errorf("jobs = %d after the worker's denied enqueues, want 1", n)
		}
	})

	t.Run("EnqueuesWhenAlsoGrantedProducer", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		worker := pgtest.NewPool(t, newLogin(t, b, "app_worker", "jobs_worker", "jobs_producer"))
		id := scalar[int64](t, worker, "SELECT jobs_enqueue('follow-up', queue => 'next')")
		if got := jobState(t, b, id); got != "queued" {
			t.Errorf("follow-up job is %s, want queued", got)
		}
	})
}

func TestAdmin(t *testing.T) {
	t.Parallel()

	t.Run("CancelsRetriesPrunesAndTunesBackoff", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		admin := pgtest.NewPool(t, newLogin(t, b, "app_admin", "jobs_admin"))
		id := enqueue(t, b, "q")
		done := enqueue(t, b, "d")
		exec(t, b.super, "SELECT jobs_complete($1, $2)", done, claim(t, b, "d", done))

		if !scalar[bool](t, admin, "SELECT jobs_cancel($1)", id) {
			t.Error("jobs_cancel returned false for a queued job")
		}
		if got := jobState(t, b, id); got != "cancelled" {
			t.Errorf("after jobs_cancel the job is %s", got)
		}
		if !scalar[bool](t, admin, "SELECT jobs_retry($1)", id) {
			t.Error("jobs_retry returned false for a cancelled job")
		}
		if got := jobState(t, b, id); got != "queued" {
			t.Errorf("after jobs_retry the job is %s", got)
		}
		if n := scalar[int](t, admin, "SELECT jobs_prune('0 seconds')"); n != 1 {
			t.Errorf("jobs_prune deleted %d jobs, want 1", n)
		}
		if n := scalar[int](t, b.super, "SELECT count(*) FROM jobs WHERE id = $1", done); n != 0 {
			t.Error("the done job survived jobs_prune")
		}

		exec(t, admin, "UPDATE jobs_settings SET backoff_base = '10 seconds', backoff_cap = '10 seconds', backoff_jitter = 0")
		if got := scalar[time.Duration](t, admin, "SELECT jobs_backoff(3)"); got != 10*time.Second {
			t.Errorf("jobs_backoff after UPDATE jobs_settings = %v, want 10s", got)
		}
		if n := scalar[int64](t, admin, "SELECT sum(jobs) FROM jobs_stats()"); n != 1 {
			t.Errorf("jobs_stats counts %d jobs, want 1", n)
		}
	})

	t.Run("CannotProduceOrWork", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		admin := pgtest.NewPool(t, newLogin(t, b, "app_admin", "jobs_admin"))
		id := enqueue(t, b, "q")
		mustDeny(t, admin,
			"SELECT jobs_enqueue('x')",
			"SELECT * FROM jobs_claim('admin')",
			fmt.Sprintf("SELECT jobs_complete(%d, 1)", id),
			"SELECT * FROM jobs",
			"DELETE FROM jobs",
			"DELETE FROM jobs_settings",
			"INSERT INTO jobs_settings DEFAULT VALUES",
		)
		if got := jobState(t, b, id); got != "queued" {
			t.Errorf("job is %s after the admin's denied claim, want queued", got)
		}
	})
}
