package skiplockprom

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

const rulesFile = "../../docs/prometheus-rules.yml"

// TestAlertingRules checks docs/prometheus-rules.yml with `promtool check rules`, and runs
// testdata/rules_test.yml, in which each alert fires on the series that should fire it.
func TestAlertingRules(t *testing.T) {
	t.Parallel()
	tool := promtool(t)
	for _, args := range [][]string{{"check", "rules", rulesFile}, {"test", "rules", "testdata/rules_test.yml"}} {
		out, err := exec.Command(tool, args...).CombinedOutput()
		if err != nil {
			t.Fatalf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		t.Logf("promtool %s:\n%s", strings.Join(args, " "), out)
	}
}

// TestOperationsDocShowsTheRules checks that docs/operations.md shows the rules file as it is.
func TestOperationsDocShowsTheRules(t *testing.T) {
	t.Parallel()
	rules, err := os.ReadFile(rulesFile)
	if err != nil {
		t.Fatal(err)
	}
	doc, err := os.ReadFile("../../docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(doc), "```yaml\n"+string(rules)+"```\n") {
		t.Fatalf("docs/operations.md does not show %s verbatim in a yaml block", rulesFile)
	}
}
