// Package regress runs the psql-only regression suite from go test: each sql/NAME.sql, fed
// to psql, must print exactly expected/NAME.out.
//
// The work is done by the runner script (tests/regress/run), the same one CI and developers
// call without Go, so that both agree on psql's flags and on how output is normalised. This
// file only supplies a fresh database per file and a psql binary.
package regress

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

func TestRegress(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("bash not found; the SQL suites need it")
	}
	psql := lookPsql()
	if psql == "" {
		t.Skip("psql: not found on PATH or in /usr/lib/postgresql/*/bin; install the PostgreSQL client or set PSQL")
	}
	env := append(os.Environ(), "PSQL="+psql)

	files, err := filepath.Glob(filepath.Join("sql", "*.sql"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("no tests in sql/")
	}
	for _, file := range files {
		name := strings.TrimSuffix(filepath.Base(file), ".sql")
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

// lookPsql finds psql: $PSQL, then PATH, then Debian's versioned directories, newest
// first. It returns "" when there is none.
func lookPsql() string {
	if p := os.Getenv("PSQL"); p != "" {
		return p
	}
	if p, err := exec.LookPath("psql"); err == nil {
		return p
	}
	matches, _ := filepath.Glob("/usr/lib/postgresql/*/bin/psql")
	sort.Slice(matches, func(i, j int) bool { return major(matches[i]) > major(matches[j]) })
	for _, m := range matches {
		if info, err := os.Stat(m); err == nil && !info.IsDir() && info.Mode()&0o111 != 0 {
			return m
		}
	}
	return ""
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
