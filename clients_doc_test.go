package skiplock_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// docs/clients.md's parity table names, for each row and client, the test that covers it;
// each named test must exist, and each client's column must name the row's own test where
// the row asks for one (Python and Node: a test named after the row).
func TestClientsDocNamesRealTests(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile("docs/clients.md")
	if err != nil {
		t.Fatal(err)
	}
	_, table, ok := strings.Cut(string(doc), "\n## Parity\n")
	if !ok {
		t.Fatal("docs/clients.md has no Parity section")
	}
	table, _, _ = strings.Cut(table, "\n## ")
	read := func(glob string) string {
		files, err := filepath.Glob(glob)
		if err != nil || len(files) == 0 {
			t.Fatalf("no files %s: %v", glob, err)
		}
		var b strings.Builder
		for _, f := range files {
			src, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			b.Write(src)
		}
		return b.String()
	}
	goDriver := read("driver/*_test.go")
	work := read("cmd/skiplock/work_test.go")
	python := read("clients/python/tests/test_*.py")
	node := read("clients/node/test/*.test.js")
	// goTestExists: TestX, or TestX/Sub with a t.Run("Sub" in the file set.
	goTestExists := func(src, name string) bool {
		top, sub, _ := strings.Cut(name, "/")
		return strings.Contains(src, "func "+top+"(t *testing.T)") && (sub == "" || strings.Contains(src, `t.Run("`+sub+`"`))
	}
	ticked := regexp.MustCompile("`([^`]+)`")
	rows := 0
	for line := range strings.Lines(table) {
		cells := strings.Split(strings.TrimSpace(line), "|")
		if len(cells) != 8 || !strings.HasPrefix(strings.TrimSpace(cells[1]), "`") {
			continue // the header, its rule, prose
		}
		rows++
		row := strings.Trim(strings.TrimSpace(cells[1]), "`")
		for _, m := range ticked.FindAllStringSubmatch(cells[3], -1) {
			if !goTestExists(goDriver, m[1]) {
				t.Errorf("row %s: Go driver test %s not found in driver/*_test.go", row, m[1])
			}
		}
		if got := strings.Trim(strings.TrimSpace(cells[4]), "`"); got != "test_"+row || !strings.Contains(python, "def "+got+"(") {
			t.Errorf("row %s: Python test %q, want test_%s, defined in clients/python/tests/", row, got, row)
		}
		if got := strings.Trim(strings.TrimSpace(cells[5]), "`"); got != row || !strings.Contains(node, "test('"+got+"'") {
			t.Errorf("row %s: Node test %q, want %s, defined in clients/node/test/", row, got, row)
		}
		for _, m := range ticked.FindAllStringSubmatch(cells[6], -1) {
			if !goTestExists(work, m[1]) {
				t.Errorf("row %s: work --exec test %s not found in cmd/skiplock/work_test.go", row, m[1])
			}
		}
	}
	if rows != 16 {
		t.Fatalf("docs/clients.md's parity table has %d rows, want 16", rows)
	}
}
