package shardtest

import (
	"context"
	"errors"
	"net/url"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

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
	_, err = w.Exec(ctx, "SELECT * FROM _jobs_proxy_enqueue_many_on(1, ARRAY['k'], NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, true)")
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
