package security_test

import (
	"bufio"
	"bytes"
	"io/fs"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/skiplock/skiplock"
	"github.com/skiplock/skiplock/tests/pgtest"
)

var jobsRoles = []string{"jobs_producer", "jobs_worker", "jobs_admin"}

// grantsListLine is one entry of the list in sql/grants.sql:
//
//	('jobs_claim(text, integer, text[], interval)', '{jobs_worker}'),
var grantsListLine = regexp.MustCompile(`^\s*\('([^']+)',\s*'\{([^}]*)\}'\),?\s*$`)

// grantsList reads sql/grants.sql's list, the one place where each function's roles are
// written: signature as written there → the roles, sorted.
func grantsList(t *testing.T) map[string][]string {
	t.Helper()
	src, err := fs.ReadFile(skiplock.CodePackage(), "grants.sql")
	if err != nil {
		t.Fatal(err)
	}
	list := map[string][]string{}
	lines := bufio.NewScanner(bytes.NewReader(src))
	for lines.Scan() {
		m := grantsListLine.FindStringSubmatch(lines.Text())
		if m == nil {
			continue
		}
		var roles []string
		for _, r := range strings.Split(m[2], ",") {
			if r = strings.TrimSpace(r); r != "" {
				roles = append(roles, r)
			}
		}
		slices.Sort(roles)
		list[m[1]] = roles
	}
	if len(list) < 10 {
		t.Fatalf("found %d ('signature', '{roles}') lines in sql/grants.sql; if the list's layout changed, change grantsListLine too", len(list))
	}
	return list
}

// installedFunction is a function of the install schema as the catalog describes it.
type installedFunction struct {
	oid       uint32
	signature string   // regprocedure text, e.g. jobs_get(bigint)
	call      string   // a call with a NULL for every argument
	private   bool     // named _…
	secdef    bool     // SECURITY DEFINER
	config    []string // proconfig
	public    bool     // PUBLIC may execute it
	granted   []string // the jobs_* roles that may execute it, sorted
	listed    []string // its roles in sql/grants.sql, sorted
	isListed  bool
}

// installedFunctions lists every function of the public schema of the test database (which
// holds nothing but skiplock), matched with sql/grants.sql's list by resolving each listed
// signature in the catalog, so spelling (timestamptz, spaces) does not matter.
func installedFunctions(t *testing.T, super *pgxpool.Pool) []installedFunction {
	t.Helper()
	list := grantsList(t)
	listedByOID := map[uint32][]string{}
	for sig, roles := range list {
		oid := scalar[*uint32](t, super, "SELECT to_regprocedure('public.' || $1)::oid", sig)
		if oid == nil {
			t.Errorf("sql/grants.sql lists %s, which is not installed", sig)
			continue
		}
		listedByOID[*oid] = roles
	}
	rows, err := super.Query(t.Context(), `
		SELECT p.oid, p.oid::regprocedure::text,
		       format('SELECT %I.%I(%s)', n.nspname, p.proname,
		              (SELECT string_agg(format('NULL::%s', format_type(a.t, NULL)), ', ' ORDER BY a.n)
		               FROM unnest(p.proargtypes::oid[]) WITH ORDINALITY AS a(t, n))),
		       p.proname LIKE '\_%', p.prosecdef, coalesce(p.proconfig, '{}'),
		       has_function_privilege('public', p.oid, 'EXECUTE'),
		       array(SELECT r FROM unnest($1::text[]) AS r WHERE has_function_privilege(r, p.oid, 'EXECUTE') ORDER BY r)
		FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
		WHERE n.nspname = 'public'
		ORDER BY 2`, jobsRoles)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var fns []installedFunction
	for rows.Next() {
		var f installedFunction
		if err := rows.Scan(&f.oid, &f.signature, &f.call, &f.private, &f.secdef, &f.config, &f.public, &f.granted); err != nil {
			t.Fatal(err)
		}
		f.listed, f.isListed = listedByOID[f.oid]
		fns = append(fns, f)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if len(fns) < len(list) {
		t.Fatalf("found %d functions in schema public, fewer than the %d sql/grants.sql lists", len(fns), len(list))
	}
	return fns
}

func TestPrivilegeCatalog(t *testing.T) {
	t.Parallel()
	b := setup(t)

	// Every function is in sql/grants.sql's list, which is what revokes PUBLIC's EXECUTE:
	// a function missing there would be callable by every user, with the owner's rights.
	t.Run("FunctionsGrantedExactlyToTheirRoles", func(t *testing.T) {
		for _, f := range installedFunctions(t, b.super) {
			if !f.isListed {
				t.Errorf("%s: not in sql/grants.sql's list, so nothing revoked PUBLIC's EXECUTE on it: list it there with its roles, then scripts/new-migration", f.signature)
			}
			if f.public {
				t.Errorf("%s: PUBLIC may execute it", f.signature)
			}
			if f.isListed && !slices.Equal(f.granted, f.listed) {
				t.Errorf("%s: executable by %v, but sql/grants.sql lists %v", f.signature, f.granted, f.listed)
			}
			if f.private && len(f.listed) > 0 {
				t.Errorf("%s: a private helper granted to %v; only the functions that use it should run it", f.signature, f.listed)
			}
			if !f.private && !f.secdef {
				t.Errorf("%s: not SECURITY DEFINER", f.signature)
			}
			if !f.private && len(f.listed) == 0 {
				t.Errorf("%s: a public function that no role may call", f.signature)
			}
			if !slices.Contains(f.config, "search_path=public, pg_temp") {
				t.Errorf("%s: settings %v, want search_path pinned to public, pg_temp", f.signature, f.config)
			}
		}
	})

	t.Run("OnlyAdminHasTablePrivileges", func(t *testing.T) {
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
		want := []string{"jobs_queues:jobs_admin:SELECT", "jobs_schedules:jobs_admin:SELECT", "jobs_settings:jobs_admin:SELECT", "jobs_settings:jobs_admin:UPDATE"}
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

// tableCalls touch the tables directly; only jobs_admin may read and update jobs_settings,
// and read jobs_queues.
var tableCalls = []struct {
	sql   string
	roles []string // roles allowed to run it
}{
	{"SELECT * FROM jobs_settings", []string{"jobs_admin"}},
	{"UPDATE jobs_settings SET backoff_jitter = backoff_jitter", []string{"jobs_admin"}},
	{"INSERT INTO jobs_settings DEFAULT VALUES", nil},
	{"DELETE FROM jobs_settings", nil},
	{"TRUNCATE jobs_settings", nil},
	{"SELECT * FROM jobs_queues", []string{"jobs_admin"}},
	{"UPDATE jobs_queues SET paused = paused", nil},
	{"DELETE FROM jobs_queues", nil},
	{"SELECT * FROM jobs_queue_starts", nil},
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

// TestRolesCallOnlyWhatTheyAreGranted logs in as each role, and as a login granted nothing
// (what PUBLIC may do), and calls every function of the install schema with NULL arguments,
// each in a transaction rolled back afterwards. A call the role is granted (by sql/grants.sql's
// list) must get past the privilege check: it may succeed or reject its NULLs (22023), but not
// fail with insufficient_privilege (42501). Every other call must fail with 42501.
func TestRolesCallOnlyWhatTheyAreGranted(t *testing.T) {
	t.Parallel()
	b := setup(t)
	functions := installedFunctions(t, b.super)
	for _, role := range append([]string{"none"}, jobsRoles...) {
		t.Run(role, func(t *testing.T) {
			var grants []string
			if role != "none" {
				grants = []string{role}
			}
			pool := pgtest.NewPool(t, newLogin(t, b, "app_"+strings.TrimPrefix(role, "jobs_"), grants...))
			for _, f := range functions {
				tx, err := pool.Begin(t.Context())
				if err != nil {
					t.Fatal(err)
				}
				code := sqlState(t, tx, f.call)
				if err := tx.Rollback(t.Context()); err != nil {
					t.Fatal(err)
				}
				switch allowed := slices.Contains(f.listed, role); {
				case allowed && code == "42501":
					t.Errorf("%s: %s may not call it, but sql/grants.sql grants it", f.signature, role)
				case !allowed && code != "42501":
					t.Errorf("%s: %s may call it (SQLSTATE %q), but sql/grants.sql does not grant it", f.signature, role, code)
				}
			}
			for _, c := range tableCalls {
				if slices.Contains(c.roles, role) {
					mustAllow(t, pool, c.sql)
				} else {
					mustDeny(t, pool, c.sql)
				}
			}
		})
	}
}

// docsRoleRow matches a row of the roles table in docs/security.md: | `jobs_worker` | … | … |
var docsRoleRow = regexp.MustCompile("^\\| `(jobs_[a-z]+)` \\| ([^|]*) \\|")

// TestSecurityDocListsTheGrants: docs/security.md names, for each role, the functions it may
// call (before a ';') and the tables it may use (after it). Those names must be exactly what
// the install grants, so the table cannot drift from sql/grants.sql.
func TestSecurityDocListsTheGrants(t *testing.T) {
	t.Parallel()
	b := setup(t)
	doc, err := os.ReadFile("../../docs/security.md")
	if err != nil {
		t.Fatal(err)
	}
	identifier := regexp.MustCompile("`(jobs_[a-z_]+)`")
	names := func(s string) []string {
		var out []string
		for _, m := range identifier.FindAllStringSubmatch(s, -1) {
			out = append(out, m[1])
		}
		slices.Sort(out)
		return slices.Compact(out)
	}
	seen := map[string]bool{}
	for _, line := range strings.Split(string(doc), "\n") {
		m := docsRoleRow.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		role := m[1]
		seen[role] = true
		functionsPart, tablesPart, _ := strings.Cut(m[2], ";")
		wantFunctions := scalar[[]string](t, b.super, `
			SELECT coalesce(array_agg(DISTINCT p.proname ORDER BY p.proname), '{}')
			FROM pg_proc p
			WHERE p.pronamespace = 'public'::regnamespace AND has_function_privilege($1, p.oid, 'EXECUTE')`, role)
		if got := names(functionsPart); !slices.Equal(got, wantFunctions) {
			t.Errorf("docs/security.md says %s may call %v; it may call %v", role, got, wantFunctions)
		}
		wantTables := scalar[[]string](t, b.super, `
			SELECT coalesce(array_agg(c.relname ORDER BY c.relname), '{}')
			FROM pg_class c
			WHERE c.relnamespace = 'public'::regnamespace AND c.relkind = 'r'
			  AND has_table_privilege($1, c.oid, 'SELECT, INSERT, UPDATE, DELETE, TRUNCATE')`, role)
		if got := names(tablesPart); !slices.Equal(got, wantTables) {
			t.Errorf("docs/security.md says %s may use tables %v; it may use %v", role, got, wantTables)
		}
	}
	for _, r := range jobsRoles {
		if !seen[r] {
			t.Errorf("docs/security.md has no row | `%s` | … in its roles table", r)
		}
	}
}
