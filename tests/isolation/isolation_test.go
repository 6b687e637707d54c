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
	"strings"
	"testing"

	"github.com/skiplock/skiplock/tests/internal/sqlsuite"
	"github.com/skiplock/skiplock/tests/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

func TestIsolation(t *testing.T) {
	t.Parallel()
	tester := lookIsolationTester()
	if tester == "" {
		t.Skip("isolationtester: not found in pg_config --pkglibdir or /usr/lib/postgresql/*/lib; " +
			"install the PostgreSQL server development files or set ISOLATIONTESTER")
	}
	sqlsuite.Run(t, "specs", ".spec", "ISOLATIONTESTER="+tester)
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
		if p := filepath.Join(strings.TrimSpace(string(out)), rel); sqlsuite.IsExecutable(p) {
			return p
		}
	}
	return sqlsuite.LookVersioned("lib/" + rel)
}
