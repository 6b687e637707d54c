// Package isolation runs the concurrency specs from go test: each specs/NAME.spec, run by
// PostgreSQL's isolationtester, must print exactly expected/NAME.out or one of its alternatives
// (expected/NAME_1.out to NAME_9.out: another order of completion the spec allows).
//
// The work is done by the runner script (tests/isolation/run), the same one CI and
// developers call without Go. This file only supplies a fresh database per spec and the
// isolationtester binary, which ships with the server's development files (Debian:
// postgresql-server-dev-NN, under /usr/lib/postgresql/NN/lib/pgxs).
package isolation

import (
	"testing"

	"github.com/skiplock/skiplock/tests/internal/sqlsuite"
	"github.com/skiplock/skiplock/tests/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

func TestIsolation(t *testing.T) {
	t.Parallel()
	tester, err := sqlsuite.IsolationTester(t.Context())
	if err != nil {
		t.Skip(err)
	}
	sqlsuite.Run(t, "specs", ".spec", "ISOLATIONTESTER="+tester)
}
