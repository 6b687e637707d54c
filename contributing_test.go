package skiplock_test

import (
	"os"
	"regexp"
	"strings"
	"testing"
)

// TestContributingMapNamesRealTests: every row of CONTRIBUTING.md's "Where each promise is
// tested" names a file that exists and, where it names a test, a test of that file: a Go
// func TestX(, a Python def test_x(, a Node test('x'.
func TestContributingMapNamesRealTests(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("CONTRIBUTING.md")
	if err != nil {
		t.Fatal(err)
	}
	text := string(b)
	start := strings.Index(text, "### Where each promise is tested")
	if start < 0 {
		t.Fatal(`CONTRIBUTING.md has no "### Where each promise is tested"`)
	}
	section := text[start:]
	if end := strings.Index(section[4:], "\n#"); end >= 0 {
		section = section[:end+4]
	}
	row := regexp.MustCompile("(?m)^\\| [^|]+ \\| `([^`]+)` \\| (?:`([^`]+)`)? \\|$")
	rows := row.FindAllStringSubmatch(section, -1)
	if len(rows) < 20 {
		t.Fatalf("the map has %d rows: did its form change?", len(rows))
	}
	for _, r := range rows {
		file, name := r[1], r[2]
		src, err := os.ReadFile(file)
		if err != nil {
			t.Errorf("the map names %s: %v", file, err)
			continue
		}
		if name == "" {
			continue
		}
		var decl string
		switch {
		case strings.HasSuffix(file, ".go"):
			decl = "func " + name + "("
		case strings.HasSuffix(file, ".py"):
			decl = "def " + name + "("
		case strings.HasSuffix(file, ".js"):
			decl = "test('" + name + "'"
		default:
			decl = name
		}
		if !strings.Contains(string(src), decl) {
			t.Errorf("the map names %s in %s, which has no %q", name, file, decl)
		}
	}
}
