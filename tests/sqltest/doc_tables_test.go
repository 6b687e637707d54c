package sqltest

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestSQLAPIDocListsEveryColumn: the column tables of docs/sql-api.md ("The `jobs` table",
// "Settings: `jobs_settings`") name exactly the columns an install has, so a column added by
// a migration cannot go undocumented (jobs_settings.shard once did).
func TestSQLAPIDocListsEveryColumn(t *testing.T) {
	t.Parallel()
	b := setup(t)
	doc, err := os.ReadFile("../../docs/sql-api.md")
	if err != nil {
		t.Fatal(err)
	}
	row := regexp.MustCompile("^\\| `([a-z_]+)` \\|")
	for _, tc := range []struct{ heading, table string }{
		{"### The `jobs` table", "jobs"},
		{"### Settings: `jobs_settings`", "jobs_settings"},
	} {
		_, section, found := strings.Cut(string(doc), "\n"+tc.heading+"\n")
		if !found {
			t.Fatalf("docs/sql-api.md has no heading %q", tc.heading)
		}
		section, _, _ = strings.Cut(section, "\n### ")
		var documented []string
		for line := range strings.SplitSeq(section, "\n") {
			if m := row.FindStringSubmatch(line); m != nil {
				documented = append(documented, m[1])
			}
		}
		slices.Sort(documented)
		columns := queryOne[[]string](t, b.Conn, `
			SELECT array_agg(a.attname::text ORDER BY a.attname)
			FROM pg_attribute a
			WHERE a.attrelid = to_regclass($1) AND a.attnum > 0 AND NOT a.attisdropped`, tc.table)
		if !slices.Equal(documented, columns) {
			t.Errorf("docs/sql-api.md %q lists %v; the table has %v", tc.heading, documented, columns)
		}
	}
}
