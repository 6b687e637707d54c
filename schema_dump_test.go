package skiplock_test

import (
	"flag"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/skiplock/skiplock"
)

var updateSchemaDump = flag.Bool("update", false, "TestSchemaDump: rewrite "+schemaDumpFile+" from a fresh install instead of comparing with it")

// schemaDumpFile is the committed dump of a fresh install: every schema change shows up in it
// as one reviewable diff, whichever migration and frozen file it came from.
const schemaDumpFile = "tests/schema.sql"

// schemaDumpSchema is the dedicated schema the dump is taken from (install into one, as
// docs/security.md recommends; public would drag in its version-specific privileges).
const schemaDumpSchema = "skiplock"

const schemaDumpHeader = `-- A fresh install of skiplock (every migration) into schema ` + schemaDumpSchema + `: pg_dump --schema-only
-- --no-owner --schema=` + schemaDumpSchema + `, without pg_dump's comments and SET lines. Generated: TestSchemaDump
-- fails when it is stale. Regenerate it with
--
--     go test -run TestSchemaDump . -update

`

// pgDumpNoise matches the lines of pg_dump's output that depend on pg_dump's version or say
// nothing about the schema: its comment blocks and banners (at the start of a line; function
// bodies are indented or dollar-quoted on the CREATE line), the session SETs at the top and
// the \restrict lines of recent minor versions.
var pgDumpNoise = regexp.MustCompile(`^(--( (Name|Dumped|PostgreSQL database dump|TOC entry|Data for Name)\b.*)?|SET [a-z_]+ = .*;|SELECT pg_catalog\.set_config\('search_path', '', false\);|\\(un)?restrict .*)$`)

// normaliseDump drops pgDumpNoise lines and squeezes runs of blank lines into one.
func normaliseDump(dump string) string {
	var kept []string
	blank := true // drop blank lines at the start
	for _, line := range strings.Split(dump, "\n") {
		line = strings.TrimRight(line, " \t")
		if pgDumpNoise.MatchString(line) {
			continue
		}
		if line == "" {
			if blank {
				continue
			}
			blank = true
		} else {
			blank = false
		}
		kept = append(kept, line)
	}
	return strings.TrimSpace(strings.Join(kept, "\n")) + "\n"
}

// TestSchemaDump compares a fresh install's normalised pg_dump with the committed one.
func TestSchemaDump(t *testing.T) {
	t.Parallel()
	b := setup(t)
	migrate(t, b.conn, &skiplock.MigrateOpts{Schema: schemaDumpSchema})
	got := schemaDumpHeader + normaliseDump(pgDump(t, b.url, "--schema="+schemaDumpSchema))

	if *updateSchemaDump {
		if err := os.WriteFile(schemaDumpFile, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("wrote %s", schemaDumpFile)
		return
	}
	want, err := os.ReadFile(schemaDumpFile)
	if err != nil {
		t.Fatalf("%v; create it with: go test -run TestSchemaDump . -update", err)
	}
	if got != string(want) {
		t.Fatalf("a fresh install's schema differs from %s (-committed, +fresh install):\n%s\n\n"+
			"If the change is intended, regenerate the file and commit it with the change:\n\n"+
			"    go test -run TestSchemaDump . -update",
			schemaDumpFile, orderedDiff(string(want), got))
	}
}

// orderedDiff shows how b differs from a line by line, in order (a longest common
// subsequence): removed lines with "- ", added ones with "+ ", one line of context around
// each change, and "..." where unchanged lines are left out.
func orderedDiff(a, b string) string {
	x, y := strings.Split(a, "\n"), strings.Split(b, "\n")
	// lcs[i][j] is the length of the longest common subsequence of x[i:] and y[j:].
	lcs := make([][]int32, len(x)+1)
	for i := range lcs {
		lcs[i] = make([]int32, len(y)+1)
	}
	for i := len(x) - 1; i >= 0; i-- {
		for j := len(y) - 1; j >= 0; j-- {
			if x[i] == y[j] {
				lcs[i][j] = lcs[i+1][j+1] + 1
			} else {
				lcs[i][j] = max(lcs[i+1][j], lcs[i][j+1])
			}
		}
	}
	type line struct {
		op   byte // ' ', '-' or '+'
		text string
	}
	var lines []line
	i, j := 0, 0
	for i < len(x) || j < len(y) {
		switch {
		case i < len(x) && j < len(y) && x[i] == y[j]:
			lines = append(lines, line{' ', x[i]})
			i, j = i+1, j+1
		case i < len(x) && (j == len(y) || lcs[i+1][j] >= lcs[i][j+1]):
			lines = append(lines, line{'-', x[i]})
			i++
		default:
			lines = append(lines, line{'+', y[j]})
			j++
		}
	}
	changed := func(k int) bool { return k >= 0 && k < len(lines) && lines[k].op != ' ' }
	var out []string
	skipped := false
	for k, l := range lines {
		if l.op == ' ' && !changed(k-1) && !changed(k+1) {
			skipped = true
			continue
		}
		if skipped {
			out = append(out, "...")
			skipped = false
		}
		out = append(out, string(l.op)+" "+l.text)
	}
	return strings.Join(out, "\n")
}
