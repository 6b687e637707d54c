package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestFindPeersDir(t *testing.T) {
	t.Parallel()

	// checkout makes a skiplock checkout with both harnesses, the river one a module of
	// its own, under a parent directory that is a module of another name.
	checkout := func(t *testing.T) (parent, root string) {
		t.Helper()
		parent = t.TempDir()
		root = filepath.Join(parent, "src", "skiplock")
		write := func(rel, content string) {
			t.Helper()
			p := filepath.Join(root, rel)
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.WriteFile(filepath.Join(parent, "go.mod"), []byte("module example.com/other\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		write("go.mod", "// A comment first.\nmodule "+skiplockModule+"\n\ngo 1.26.8\n")
		write("cmd/bench/peers/river/go.mod", "module "+skiplockModule+"/cmd/bench/peers/river\n")
		write("cmd/bench/peers/graphile-worker/package.json", "{}\n")
		write("docs/performance.md", "\n")
		return parent, root
	}

	t.Run("FromAnyDirectoryInsideTheCheckout", func(t *testing.T) {
		t.Parallel()
		_, root := checkout(t)
		want := filepath.Join(root, "cmd", "bench", "peers")
		for _, start := range []string{root, filepath.Join(root, "docs"), want, filepath.Join(want, "river")} {
			got, err := findPeersDirFrom(start)
			if err != nil || got != want {
				t.Errorf("from %s: got %q, %v; want %q", start, got, err, want)
			}
		}
	})

	t.Run("FallsBackToTheNextStart", func(t *testing.T) {
		t.Parallel()
		parent, root := checkout(t)
		got, err := findPeersDirFrom(parent, filepath.Join(root, "docs"))
		if want := filepath.Join(root, "cmd", "bench", "peers"); err != nil || got != want {
			t.Errorf("got %q, %v; want %q", got, err, want)
		}
	})

	t.Run("NoCheckout", func(t *testing.T) {
		t.Parallel()
		parent, _ := checkout(t)
		_, err := findPeersDirFrom(parent, t.TempDir())
		if err == nil || !strings.Contains(err.Error(), "-peers-dir") {
			t.Errorf("err = %v, want one that points to -peers-dir", err)
		}
	})

	t.Run("CheckoutWithoutHarnesses", func(t *testing.T) {
		t.Parallel()
		_, root := checkout(t)
		if err := os.Remove(filepath.Join(root, "cmd", "bench", "peers", "graphile-worker", "package.json")); err != nil {
			t.Fatal(err)
		}
		_, err := findPeersDirFrom(root)
		if err == nil || !strings.Contains(err.Error(), filepath.Join("graphile-worker", "package.json")) {
			t.Errorf("err = %v, want one naming the missing file", err)
		}
	})

	t.Run("ThisCheckout", func(t *testing.T) {
		t.Parallel()
		// go test runs in cmd/bench: the harnesses committed next to it are found.
		dir, err := findPeersDir()
		if err != nil {
			t.Fatal(err)
		}
		wd, _ := os.Getwd()
		if want := filepath.Join(wd, "peers"); dir != want {
			t.Errorf("findPeersDir() = %q, want %q", dir, want)
		}
	})
}

func TestModulePath(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for content, want := range map[string]string{
		"module github.com/skiplock/skiplock\n":             "github.com/skiplock/skiplock",
		"// x\n\nmodule\t\"example.com/quoted\" // comment": "example.com/quoted",
		"modulefoo bar\n": "",
		"go 1.26\n":       "",
	} {
		p := filepath.Join(dir, "go.mod")
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		if got := modulePath(p); got != want {
			t.Errorf("modulePath(%q) = %q, want %q", content, got, want)
		}
	}
	if got := modulePath(filepath.Join(dir, "missing")); got != "" {
		t.Errorf("modulePath of a missing file = %q", got)
	}
}
