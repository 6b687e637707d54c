package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
)

// skiplockModule is the module path of the repository the peer harnesses live in.
const skiplockModule = "github.com/skiplock/skiplock"

// peersSubdir is where the harnesses live inside the repository.
var peersSubdir = filepath.Join("cmd", "bench", "peers")

// findPeersDir locates cmd/bench/peers of the skiplock checkout: first above the working
// directory (go run ./cmd/bench from anywhere inside a clone), then above this file's
// source (a binary built from a checkout, run from elsewhere).
func findPeersDir() (string, error) {
	var starts []string
	if wd, err := os.Getwd(); err == nil {
		starts = append(starts, wd)
	}
	if _, file, _, ok := runtime.Caller(0); ok && filepath.IsAbs(file) {
		starts = append(starts, filepath.Dir(file))
	}
	return findPeersDirFrom(starts...)
}

// findPeersDirFrom walks up from each start in turn to the directory whose go.mod is
// skiplock's module (skipping the harnesses' own go.mod files on the way) and returns its
// cmd/bench/peers, which must hold both harnesses.
func findPeersDirFrom(starts ...string) (string, error) {
	for _, start := range starts {
		root, ok := findModuleRoot(start)
		if !ok {
			continue
		}
		dir := filepath.Join(root, peersSubdir)
		var missing []string
		for _, f := range []string{filepath.Join("river", "go.mod"), filepath.Join("graphile-worker", "package.json")} {
			if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
				missing = append(missing, f)
			}
		}
		if len(missing) > 0 {
			return "", fmt.Errorf("the skiplock checkout at %s has no peer harnesses (%s missing in %s)",
				root, strings.Join(missing, ", "), dir)
		}
		return dir, nil
	}
	return "", errors.New("no skiplock checkout found above the working directory or the bench's source: " +
		"run the bench from inside a clone, or give -peers-dir")
}

// findModuleRoot returns the nearest directory at or above dir whose go.mod declares
// skiplockModule.
func findModuleRoot(dir string) (string, bool) {
	dir = filepath.Clean(dir)
	for {
		if modulePath(filepath.Join(dir, "go.mod")) == skiplockModule {
			return dir, true
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", false
		}
		dir = parent
	}
}

// modulePath returns the module path a go.mod file declares, or "" when there is none.
func modulePath(gomod string) string {
	b, err := os.ReadFile(gomod)
	if err != nil {
		return ""
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if rest, ok := strings.CutPrefix(line, "module"); ok && rest != "" && (rest[0] == ' ' || rest[0] == '\t') {
			rest, _, _ = strings.Cut(rest, "//") // a trailing comment
			return strings.Trim(strings.TrimSpace(rest), `"`)
		}
	}
	return ""
}
