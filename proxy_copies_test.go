package skiplock_test

import (
	"bytes"
	"io/fs"
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
