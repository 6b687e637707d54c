package shardtest

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// TestProxyMatchesTheShards: every public function of the proxy (but its own, jobs_claim_on
// and jobs_proxy_*) has the overloads of the shard's function of that name, with the same
// arguments, defaults and result, so that a call through the proxy takes what a call on one
// server takes; the result types the proxy declares have the shards' columns (PL/Proxy
// refuses rows with more or fewer fields), jobs_inspect's row a subset of the shard's
// jobs, and jobs_state the shards' labels in their order.
func TestProxyMatchesTheShards(t *testing.T) {
	s := newSharded(t, 1)
	ctx := context.Background()
	strs := func(pool *pgxpool.Pool, sql string, args ...any) []string {
		t.Helper()
		rows, err := pool.Query(ctx, sql, args...)
		if err != nil {
			t.Fatal(err)
		}
		out, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	const signatures = `
		SELECT p.proname || '(' || pg_get_function_arguments(p.oid) || ') -> ' || pg_get_function_result(p.oid)
		FROM pg_proc p
		WHERE p.pronamespace = 'public'::regnamespace AND p.proname = ANY ($1)
		ORDER BY 1`
	names := strs(s.proxy, `
		SELECT DISTINCT p.proname::text
		FROM pg_proc p
		WHERE p.pronamespace = 'public'::regnamespace AND p.proname LIKE 'jobs\_%'
		  AND p.proname NOT LIKE 'jobs\_proxy\_%' AND p.proname <> 'jobs_claim_on'
		ORDER BY 1`)
	if len(names) < 20 {
		t.Fatalf("the proxy has %d public functions: %v", len(names), names)
	}
	proxy, shard := strs(s.proxy, signatures, names), strs(s.shards[0], signatures, names)
	for _, sig := range proxy {
		if !slices.Contains(shard, sig) {
			t.Errorf("the proxy's %s is not the shard's", sig)
		}
	}
	for _, sig := range shard {
		if !slices.Contains(proxy, sig) {
			t.Errorf("the shard's %s has no proxy function of that form", sig)
		}
	}

	const attributes = `
		SELECT a.attname || ' ' || format_type(a.atttypid, a.atttypmod)
		FROM pg_attribute a
		WHERE a.attrelid = to_regclass($1) AND a.attnum > 0 AND NOT a.attisdropped
		ORDER BY a.attnum`
	for _, typ := range strs(s.proxy, `
		SELECT c.relname::text FROM pg_class c
		WHERE c.relnamespace = 'public'::regnamespace AND c.relkind = 'c' ORDER BY 1`) {
		ours, theirs := strs(s.proxy, attributes, typ), strs(s.shards[0], attributes, typ)
		if typ == "jobs" {
			for _, a := range ours {
				if !slices.Contains(theirs, a) {
					t.Errorf("the proxy's type jobs has %s, which the shard's jobs has not", a)
				}
			}
			continue
		}
		if !slices.Equal(ours, theirs) {
			t.Errorf("type %s: the proxy's columns\n\t%s\nthe shard's\n\t%s", typ, strings.Join(ours, ", "), strings.Join(theirs, ", "))
		}
	}
	const labels = "SELECT enumlabel::text FROM pg_enum WHERE enumtypid = 'jobs_state'::regtype ORDER BY enumsortorder"
	if ours, theirs := strs(s.proxy, labels), strs(s.shards[0], labels); !slices.Equal(ours, theirs) {
		t.Errorf("jobs_state: the proxy's labels %v, the shard's %v", ours, theirs)
	}
}
