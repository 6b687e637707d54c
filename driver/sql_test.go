package driver

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// sqlStatement matches a string that is a SQL statement or the start of one: after blanks,
// comments and opening parentheses, its first word, then a word not ending in a colon (which
// "LISTEN disabled: polling" of a log message does) or the end of the string ("LISTEN " + a
// channel's name).
var sqlStatement = regexp.MustCompile(`(?is)^(\s|--[^\n]*\n|/\*.*?\*/|\()*` +
	`(SELECT|INSERT|UPDATE|DELETE|MERGE|WITH|VALUES|SHOW|EXPLAIN|COPY|LISTEN|UNLISTEN|NOTIFY|SET|RESET|CALL|TRUNCATE|DISCARD)` +
	`\s+(\S*[^\s:](\s|$)|$)`)

// TestSQLFileListsEveryStatement: sql.go is the driver↔SQL contract, so no other file of the
// driver writes a statement of its own.
func TestSQLFileListsEveryStatement(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	found := 0
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			lit, ok := n.(*ast.BasicLit)
			if !ok || lit.Kind != token.STRING {
				return true
			}
			s, err := strconv.Unquote(lit.Value)
			if err != nil || !sqlStatement.MatchString(s) {
				return true
			}
			if name == "sql.go" {
				found++
			} else {
				t.Errorf("%s: a SQL statement outside sql.go: %.60q", fset.Position(lit.Pos()), s)
			}
			return true
		})
	}
	if found < 10 {
		t.Fatalf("sql.go holds %d statements: is the pattern still finding them?", found)
	}
}

// TestSQLStatementPatternFindsCasts: statements whose first word after the keyword holds a
// cast (sql.go's own "SELECT state::text, ... FROM jobs_get($1)") or that follow a comment
// spanning lines are statements too, and a log message is not.
func TestSQLStatementPatternFindsCasts(t *testing.T) {
	t.Parallel()
	for _, s := range []string{
		"SELECT state::text, attempts FROM jobs_get($1)",
		"SELECT $1::bigint",
		"SELECT count(*)::int FROM jobs",
		"/* a comment\n   on two lines */ SELECT 1",
	} {
		if !sqlStatement.MatchString(s) {
			t.Errorf("sqlStatement does not match %q", s)
		}
	}
	for _, s := range []string{"LISTEN disabled: polling every 1s", "listening for wake-ups on jobs_ready"} {
		if sqlStatement.MatchString(s) {
			t.Errorf("sqlStatement matches the log message %q", s)
		}
	}
}
