package skiplock_test

import (
	"bytes"
	"io/fs"
	"strings"
	"testing"

	"github.com/skiplock/skiplock"
)

// TestProxyCopiesOfPrivateHelpersEqualTheShards: the proxy installs its own copies of the
// shard's private helpers (argument checks and their errors, _jobs_*), so that a bad call
// fails on the proxy exactly as on a shard, before any shard is asked. Each copy is the
// shard's file byte for byte; a change to one is made to both (and frozen in both sets).
func TestProxyCopiesOfPrivateHelpersEqualTheShards(t *testing.T) {
	t.Parallel()
	proxy, shard := skiplock.ProxyCodePackage(), skiplock.CodePackage()
	helpers, err := fs.Glob(proxy, "functions/_jobs_*.sql")
	if err != nil {
		t.Fatal(err)
	}
	copies := 0
	for _, name := range helpers {
		theirs, err := fs.ReadFile(shard, name)
		if err != nil {
			continue // the proxy's own helper (_jobs_proxy_*, ...)
		}
		copies++
		ours, err := fs.ReadFile(proxy, name)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(ours, theirs) {
			t.Errorf("sql/proxy/%s differs from sql/%s: make the proxy's copy equal to the shard's", name, name)
		}
	}
	if copies == 0 {
		t.Fatalf("no proxy helper has a copy in sql/functions (looked at %d files of sql/proxy/functions)", len(helpers))
	}
	t.Logf("%d proxy copies of shard helpers, equal", copies)
}

// proxyOwnCopies are the proxy's functions that run on the proxy itself with the shard's body
// (the subscriptions of topics are the proxy's own), and the search_path preamble. Each
// equals the shard's file but for its leading comment, which says where it runs.
var proxyOwnCopies = []string{"search_path.sql", "functions/jobs_subscribe.sql",
	"functions/jobs_unsubscribe.sql", "functions/jobs_subscriptions.sql"}

// TestProxyOwnCopiesEqualTheShards: a change to the shard's subscription functions or preamble
// is made to the proxy's too.
func TestProxyOwnCopiesEqualTheShards(t *testing.T) {
	t.Parallel()
	proxy, shard := skiplock.ProxyCodePackage(), skiplock.CodePackage()
	for _, name := range proxyOwnCopies {
		ours, err := fs.ReadFile(proxy, name)
		if err != nil {
			t.Fatal(err)
		}
		theirs, err := fs.ReadFile(shard, name)
		if err != nil {
			t.Fatal(err)
		}
		if withoutLeadingComment(string(ours)) != withoutLeadingComment(string(theirs)) {
			t.Errorf("sql/proxy/%s differs from sql/%s below their leading comments: make the proxy's copy equal to the shard's", name, name)
		}
	}
}

// withoutLeadingComment drops the comment lines a SQL file starts with.
func withoutLeadingComment(text string) string {
	for strings.HasPrefix(text, "--") {
		_, text, _ = strings.Cut(text, "\n")
	}
	return text
}
