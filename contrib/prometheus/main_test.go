package skiplockprom

import (
	"bytes"
	"os/exec"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/expfmt"

	"github.com/skiplock/skiplock/tests/pgtest"
)

func TestMain(m *testing.M) {
	pgtest.Main(m)
}

// exposition is what a scrape of reg returns, in the Prometheus text format.
func exposition(t *testing.T, reg *prometheus.Registry) string {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatalf("Gather: %v", err)
	}
	var buf bytes.Buffer
	enc := expfmt.NewEncoder(&buf, expfmt.NewFormat(expfmt.TypeTextPlain))
	for _, f := range families {
		if err := enc.Encode(f); err != nil {
			t.Fatalf("Encode: %v", err)
		}
	}
	return buf.String()
}

// promtool returns the path of Debian's promtool (package prometheus), or skips the test.
func promtool(t *testing.T) string {
	t.Helper()
	path, err := exec.LookPath("promtool")
	if err != nil {
		t.Skip("promtool not found: install Debian's prometheus package (scripts/test does as root)")
	}
	return path
}
