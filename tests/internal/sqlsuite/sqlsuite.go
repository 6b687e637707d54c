// Package sqlsuite runs the psql-based suites (tests/regress, tests/isolation) from go test.
// Each suite keeps its own bash runner script, the one CI and developers call without Go;
// this package only finds the PostgreSQL program a runner needs, in the order of
// internal/pglocal and scripts/lib/pgbin.sh, and runs the runner once per test file, in a
// fresh database.
package sqlsuite

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/skiplock/skiplock/internal/pglocal"
	"github.com/skiplock/skiplock/tests/pgtest"
)

// Run runs ./run (the suite's runner, in the test's working directory) once per file
// matching dir/*ext, as a parallel subtest named for the file, each in a database of its own
// from [pgtest.NewDatabase]. env is added to the runner's environment. The test is skipped
// without bash, and fails when dir holds no such file.
func Run(t *testing.T, dir, ext string, env ...string) {
	t.Helper()
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("bash not found; the SQL suites need it")
	}
	files, err := filepath.Glob(filepath.Join(dir, "*"+ext))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatalf("no *%s files in %s/", ext, dir)
	}
	env = append(os.Environ(), env...)
	for _, file := range files {
		name := strings.TrimSuffix(filepath.Base(file), ext)
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

// Psql returns the psql the suites run: $PSQL when set, else the one [pglocal.Tool] finds
// (the order of scripts/lib/pgbin.sh, which the runners use without Go).
func Psql() (string, error) {
	if p := os.Getenv("PSQL"); p != "" {
		return p, nil
	}
	p, err := pglocal.Tool("psql")
	if err != nil {
		return "", fmt.Errorf("failed to find psql (set PSQL to choose one): %w", err)
	}
	return p, nil
}

// IsolationTester returns PostgreSQL's isolationtester: $ISOLATIONTESTER when set, else the
// one in the package library directory of the pg_config [pglocal.Tool] finds, as the
// runner's find_isolationtester does. It ships with the server's development files
// (Debian: postgresql-server-dev-NN).
func IsolationTester(ctx context.Context) (string, error) {
	if p := os.Getenv("ISOLATIONTESTER"); p != "" {
		return p, nil
	}
	pgConfig, err := pglocal.Tool("pg_config")
	if err != nil {
		return "", fmt.Errorf("failed to find isolationtester (set ISOLATIONTESTER to choose one): %w", err)
	}
	out, err := exec.CommandContext(ctx, pgConfig, "--pkglibdir").Output()
	if err != nil {
		return "", fmt.Errorf("failed to run %s --pkglibdir: %w", pgConfig, err)
	}
	p := filepath.Join(strings.TrimSpace(string(out)), "pgxs", "src", "test", "isolation", "isolationtester")
	if info, err := os.Stat(p); err != nil || info.IsDir() || info.Mode()&0o111 == 0 {
		return "", fmt.Errorf("failed to find isolationtester at %s: install the PostgreSQL server "+
			"development files (Debian: postgresql-server-dev-NN) or set ISOLATIONTESTER", p)
	}
	return p, nil
}
