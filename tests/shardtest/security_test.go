package shardtest

import (
	"context"
	"errors"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/skiplock/skiplock"
	"github.com/skiplock/skiplock/internal/pglocal"
)

// TestProxyGrants: PUBLIC may execute no function of the proxy's install, and the jobs_*
// roles mean on the proxy what they mean on the shards: the proxy reaches the shards as the
// caller, so a worker login claims and completes through the proxy but cannot enqueue, and a
// producer enqueues but cannot claim.
func TestProxyGrants(t *testing.T) {
	s := newSharded(t, 2)
	ctx := context.Background()

	rows, err := s.proxy.Query(ctx, `
		SELECT p.oid::regprocedure::text
		FROM pg_proc p
		WHERE p.pronamespace = 'public'::regnamespace
		  AND p.prolang <> (SELECT oid FROM pg_language WHERE lanname = 'c')
		  AND has_function_privilege('public', p.oid, 'EXECUTE')`)
	if err != nil {
		t.Fatal(err)
	}
	publicFns, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	if len(publicFns) > 0 {
		t.Errorf("PUBLIC may execute %v on the proxy; list them in sql/proxy/grants.sql", publicFns)
	}

	servers := append([]*pglocal.Server{s.c.proxy}, s.c.shards[:2]...)
	login := func(name, role string) {
		for _, srv := range servers {
			admin, err := pgx.Connect(ctx, srv.URL())
			if err != nil {
				t.Fatal(err)
			}
			if _, err := admin.Exec(ctx, "CREATE ROLE "+name+" LOGIN IN ROLE "+role); err != nil {
				t.Fatal(err)
			}
			_ = admin.Close(ctx)
		}
		t.Cleanup(func() {
			for _, srv := range servers {
				admin, err := pgx.Connect(ctx, srv.URL())
				if err != nil {
					continue
				}
				_, _ = admin.Exec(ctx, "DROP ROLE IF EXISTS "+name)
				_ = admin.Close(ctx)
			}
		})
	}
	as := func(name string) *pgx.Conn {
		u, err := url.Parse(s.proxyURL)
		if err != nil {
			t.Fatal(err)
		}
		u.User = url.User(name)
		conn, err := pgx.Connect(ctx, u.String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = conn.Close(ctx) })
		return conn
	}
	denied := func(what string, err error) {
		t.Helper()
		var pgErr *pgconn.PgError
		if !errors.As(err, &pgErr) || pgErr.Code != "42501" {
			t.Errorf("%s: got %v, want 42501 (permission denied)", what, err)
		}
	}
	suffix := s.name[len(s.name)-8:]
	producer, worker := "prod_"+suffix, "work_"+suffix
	login(producer, "jobs_producer")
	login(worker, "jobs_worker")

	p, w := as(producer), as(worker)
	q := s.queueOnShard(t, "grants", 1)
	var id int64
	if err := p.QueryRow(ctx, "SELECT jobs_enqueue('k', '{}', $1)", q).Scan(&id); err != nil {
		t.Fatalf("producer enqueue through the proxy: %v", err)
	}
	if !one[bool](t, s.shards[1], "SELECT lease_holder IS NULL AND state = 'queued' FROM jobs WHERE id = $1", id) {
		t.Fatalf("job %d not queued on shard 1", id)
	}
	_, err = p.Exec(ctx, "SELECT * FROM jobs_claim('p', 1)")
	denied("producer jobs_claim", err)

	_, err = w.Exec(ctx, "SELECT jobs_enqueue('k', '{}', $1)", q)
	denied("worker jobs_enqueue", err)
	var attempt int32
	if err := w.QueryRow(ctx, "SELECT id, attempt FROM jobs_claim('w', 1, ARRAY[$1])", q).Scan(&id, &attempt); err != nil {
		t.Fatalf("worker claim through the proxy: %v", err)
	}
	if !one[bool](t, w, "SELECT jobs_complete($1, $2)", id, attempt) {
		t.Error("worker complete through the proxy returned false")
	}
	// The shard checks the caller again: a worker calling the shard's jobs_enqueue through
	// the proxy's helper for it is refused there.
	_, err = w.Exec(ctx, "SELECT * FROM _jobs_proxy_enqueue_many_on(1, ARRAY['k'], NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, true, NULL, NULL)")
	denied("worker _jobs_proxy_enqueue_many_on", err)
}

// TestSetShardsRefusesPasswords: every login of the proxy can read pg_foreign_server, the
// shards' connection strings included, so jobs_proxy_set_shards refuses one that carries a
// password (key=value or URL form), with 22023 naming connstrs and without repeating it, and
// the server's options keep no password.
func TestSetShardsRefusesPasswords(t *testing.T) {
	s := newSharded(t, 1)
	ctx := context.Background()
	good := one[string](t, s.proxy, "SELECT o.option_value FROM pg_foreign_server s, pg_options_to_table(s.srvoptions) o WHERE s.srvname = 'skiplock_shards' AND o.option_name = 'p0'")
	for _, bad := range []string{
		good + " password=s3cret-pw",
		good + " PASSWORD = 's3cret-pw'",
		"postgres://app:s3cret-pw@db1/jobs",
		"postgresql://app@db1/jobs?sslmode=disable&password=s3cret-pw",
	} {
		_, err := s.proxy.Exec(ctx, "SELECT jobs_proxy_set_shards(ARRAY[$1, $2])", good, bad)
		var pgErr *pgconn.PgError
		if !errors.As(err, &pgErr) || pgErr.Code != "22023" || pgErr.ColumnName != "connstrs" {
			t.Errorf("jobs_proxy_set_shards with %q: got %v, want 22023 naming connstrs", bad, err)
			continue
		}
		if strings.Contains(pgErr.Message+pgErr.Detail+pgErr.Hint, "s3cret-pw") {
			t.Errorf("jobs_proxy_set_shards with %q: the error repeats the password: %v", bad, err)
		}
	}
	if leaked := one[bool](t, s.proxy, "SELECT EXISTS (SELECT FROM pg_foreign_server WHERE array_to_string(srvoptions, ' ') LIKE '%s3cret-pw%')"); leaked {
		t.Error("a refused password reached pg_foreign_server")
	}
	// A password-free string is still taken.
	if _, err := s.proxy.Exec(ctx, "SELECT jobs_proxy_set_shards(ARRAY[$1])", good); err != nil {
		t.Errorf("jobs_proxy_set_shards without a password: %v", err)
	}
}

// workerLogins creates LOGIN roles in jobs_worker, named after the test's databases, on the
// proxy and the first two shards, and returns a function connecting to the proxy as one.
func workerLogins(t *testing.T, s *sharded, prefixes ...string) ([]string, func(string) *pgx.Conn) {
	ctx := context.Background()
	suffix := s.name[len(s.name)-8:]
	var names []string
	for _, p := range prefixes {
		names = append(names, p+"_"+suffix)
	}
	for _, srv := range append([]*pglocal.Server{s.c.proxy}, s.c.shards[:2]...) {
		admin, err := pgx.Connect(ctx, srv.URL())
		if err != nil {
			t.Fatal(err)
		}
		for _, name := range names {
			if _, err := admin.Exec(ctx, "CREATE ROLE "+name+" LOGIN IN ROLE jobs_worker"); err != nil {
				t.Fatal(err)
			}
		}
		_ = admin.Close(ctx)
		t.Cleanup(func() {
			admin, err := pgx.Connect(context.Background(), srv.URL())
			if err != nil {
				return
			}
			for _, name := range names {
				_, _ = admin.Exec(context.Background(), "DROP ROLE IF EXISTS "+name)
			}
			_ = admin.Close(context.Background())
		})
	}
	return names, func(name string) *pgx.Conn {
		u, err := url.Parse(s.proxyURL)
		if err != nil {
			t.Fatal(err)
		}
		u.User = url.User(name)
		conn, err := pgx.Connect(ctx, u.String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = conn.Close(ctx) })
		return conn
	}
}

// TestProxyLeaseLogin: through the proxy, as on one database, a worker login cannot settle a
// job another worker login holds, because PL/Proxy reaches the shard as the caller's login
// (docs/security.md, "One worker login cannot settle another login's jobs"): the shard's
// claim records that login, and the other login's fenced calls at every attempt change
// nothing.
func TestProxyLeaseLogin(t *testing.T) {
	s := newSharded(t, 2)
	ctx := context.Background()
	names, as := workerLogins(t, s, "holder", "thief")
	holder, thief := names[0], names[1]
	// Each login reaches the shards as itself, through a user mapping of its own (as
	// docs/scaling.md sets them up), not as the user of the shards' connection strings.
	connstrs := make([]string, len(s.shardURLs))
	for i, u := range s.shardURLs {
		cs, err := skiplock.ProxyConnString(u)
		if err != nil {
			t.Fatal(err)
		}
		connstrs[i] = regexp.MustCompile(`\buser=\S+`).ReplaceAllString(cs, "")
	}
	if _, err := s.proxy.Exec(ctx, "SELECT jobs_proxy_set_shards($1)", connstrs); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{holder, thief, "postgres"} {
		if _, err := s.proxy.Exec(ctx, "CREATE USER MAPPING FOR "+name+" SERVER skiplock_shards OPTIONS (user '"+name+"')"); err != nil {
			t.Fatal(err)
		}
		// Before the role is dropped, which a mapping would prevent.
		t.Cleanup(func() {
			_, _ = s.proxy.Exec(context.Background(), "DROP USER MAPPING IF EXISTS FOR "+name+" SERVER skiplock_shards")
		})
	}
	h, th := as(holder), as(thief)
	q := s.queueOnShard(t, "lease_login", 1)
	if _, err := s.proxy.Exec(ctx, "SELECT jobs_enqueue('k', '{}', $1)", q); err != nil {
		t.Fatal(err)
	}
	var id int64
	var attempt int32
	if err := h.QueryRow(ctx, "SELECT id, attempt FROM jobs_claim('h', 1, ARRAY[$1])", q).Scan(&id, &attempt); err != nil {
		t.Fatalf("claim through the proxy: %v", err)
	}
	if got := one[string](t, s.shards[1], "SELECT lease_role::regrole::text FROM jobs WHERE id = $1", id); got != holder {
		t.Fatalf("the shard recorded lease_role %s, want the caller's login %s", got, holder)
	}
	for _, sql := range []string{
		"SELECT count(*) FILTER (WHERE jobs_complete($1, a)) FROM generate_series(1, 5) a",
		"SELECT count(*) FILTER (WHERE jobs_heartbeat($1, a)) FROM generate_series(1, 5) a",
		"SELECT count(jobs_fail($1, a, 'stolen')) FROM generate_series(1, 5) a",
		"SELECT count(*) FILTER (WHERE jobs_snooze($1, a, now())) FROM generate_series(1, 5) a",
		"SELECT count(*) FILTER (WHERE jobs_cancel($1, a, 'stolen')) FROM generate_series(1, 5) a",
		"SELECT count(*) FROM jobs_complete_many(array_fill($1::bigint, ARRAY[5]), ARRAY(SELECT generate_series(1, 5)))",
		"SELECT count(*) FROM jobs_heartbeat_many(array_fill($1::bigint, ARRAY[5]), ARRAY(SELECT generate_series(1, 5)))",
	} {
		if n := one[int64](t, th, sql, id); n != 0 {
			t.Errorf("%s: another login acted %d times on the job through the proxy", sql, n)
		}
	}
	if !one[bool](t, h, "SELECT jobs_complete($1, $2)", id, attempt) {
		t.Error("the holder's complete through the proxy returned false")
	}
}

// TestProxySharedShardLoginIsOneTrustDomain: when every caller of the proxy reaches the
// shards as one login (here the user in the shards' connection strings), the shards record
// that login for every lease, so the proxy's worker logins are one trust domain there
// (docs/security.md): one completes a job another claimed.
func TestProxySharedShardLoginIsOneTrustDomain(t *testing.T) {
	s := newSharded(t, 2)
	ctx := context.Background()
	names, as := workerLogins(t, s, "first", "second")
	first, second := as(names[0]), as(names[1])
	q := s.queueOnShard(t, "shared_login", 1)
	if _, err := s.proxy.Exec(ctx, "SELECT jobs_enqueue('k', '{}', $1)", q); err != nil {
		t.Fatal(err)
	}
	var id int64
	var attempt int32
	if err := first.QueryRow(ctx, "SELECT id, attempt FROM jobs_claim('f', 1, ARRAY[$1])", q).Scan(&id, &attempt); err != nil {
		t.Fatalf("claim through the proxy: %v", err)
	}
	shardLogin := one[string](t, s.shards[1], "SELECT current_user::text")
	if got := one[string](t, s.shards[1], "SELECT lease_role::regrole::text FROM jobs WHERE id = $1", id); got != shardLogin {
		t.Fatalf("the shard recorded lease_role %s, want the shared shard login %s", got, shardLogin)
	}
	if !one[bool](t, second, "SELECT jobs_complete($1, $2)", id, attempt) {
		t.Error("with one shared shard login, another proxy login could not complete the job")
	}
}
