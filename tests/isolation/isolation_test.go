// Package isolation runs the concurrency specs from go test: each specs/NAME.spec, run by
// PostgreSQL's isolationtester, must print exactly expected/NAME.out.
//
// The work is done by the runner script (tests/isolation/run), the same one CI and
// developers call without Go. This file only supplies a fresh database per spec and the
// isolationtester binary, which ships with the server's development files (Debian:
// postgresql-server-dev-NN, under /usr/lib/postgresql/NN/lib/pgxs).
package isolation

import (
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/skiplock/skiplock/tests/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

func TestIsolation(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("bash not found; the SQL suites need it")
	}
	tester := lookIsolationTester()
	if tester == "" {
		t.Skip("isolationtester: not found in pg_config --pkglibdir or /usr/lib/postgresql/*/lib; " +
			"install the PostgreSQL server development files or set ISOLATIONTESTER")
	}
	env := append(os.Environ(), "ISOLATIONTESTER="+tester)

	specs, err := filepath.Glob(filepath.Join("specs", "*.spec"))
	if err != nil {
		t.Fatal(err)
	}
	if len(specs) == 0 {
		t.Fatal("no specs in specs/")
	}
	for _, spec := range specs {
		name := strings.TrimSuffix(filepath.Base(spec), ".spec")
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			dbURL := pgtest.NewDatabase(t)
			// The runner prints the unified diff of a mismatch, which becomes the failure
			// message; results go to a temporary directory so parallel runs share no file.
			cmd := exec.CommandContext(t.Context(), "bash", "run", "--existing", "--results", t.TempDir(), dbURL, name)
			cmd.Env = env
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("run %s: %v\n%s", name, err, out)
			}
		})
	}
}

// lookIsolationTester finds isolationtester: $ISOLATIONTESTER, then the package library
// directory pg_config reports, then Debian's versioned directories, newest first. It
// returns "" when there is none.
func lookIsolationTester() string {
	const rel = "pgxs/src/test/isolation/isolationtester"
	if p := os.Getenv("ISOLATIONTESTER"); p != "" {
		return p
	}
	if out, err := exec.Command("pg_config", "--pkglibdir").Output(); err == nil {
		if p := filepath.Join(strings.TrimSpace(string(out)), rel); isExecutable(p) {
			return p
		}
	}
	matches, _ := filepath.Glob("/usr/lib/postgresql/*/lib/" + rel)
	sort.Slice(matches, func(i, j int) bool { return major(matches[i]) > major(matches[j]) })
	for _, m := range matches {
		if isExecutable(m) {
			return m
		}
	}
	return ""
}

func isExecutable(path string) bool {
	info, err := os.Stat(path)
	return err == nil && !info.IsDir() && info.Mode()&0o111 != 0
}

// major reads the version directory of /usr/lib/postgresql/<major>/...; 0 if none.
func major(path string) int {
	rest, ok := strings.CutPrefix(path, "/usr/lib/postgresql/")
	if !ok {
		return 0
	}
	n := 0
	for _, r := range rest {
		if r < '0' || r > '9' {
			break
		}
		n = n*10 + int(r-'0')
	}
	return n
}
