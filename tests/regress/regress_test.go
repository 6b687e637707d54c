// Package regress runs the psql-only regression suite from go test: each sql/NAME.sql, fed
// to psql, must print exactly expected/NAME.out.
//
// The work is done by the runner script (tests/regress/run), the same one CI and developers
// call without Go, so that both agree on psql's flags and on how output is normalised. This
// file only supplies a fresh database per file and a psql binary.
package regress

import (
	"testing"

	"github.com/skiplock/skiplock/tests/internal/sqlsuite"
	"github.com/skiplock/skiplock/tests/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

func TestRegress(t *testing.T) {
	t.Parallel()
	psql, err := sqlsuite.Psql()
	if err != nil {
		t.Skip(err)
	}
	sqlsuite.Run(t, "sql", ".sql", "PSQL="+psql)
}
