package skiplockotel_test

import (
	"testing"

	"github.com/skiplock/skiplock/tests/pgtest"
)

func TestMain(m *testing.M) {
	pgtest.Main(m)
}
