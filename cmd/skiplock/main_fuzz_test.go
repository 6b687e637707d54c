package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"regexp"
	"strings"
	"testing"

	"github.com/skiplock/skiplock"
)

// FuzzRunArgs runs the CLI with fuzzed arguments: argv is the argument list joined with NUL
// bytes (which real arguments cannot contain). It never reaches a database: DATABASE_URL is
// unset, PGHOST names a socket directory that does not exist, and calls passing
// --database-url are skipped, so the commands that talk to a database can only fail on
// their arguments or on the missing database; `ui` calls are skipped too (one that parses
// would serve until stopped). For every call:
//
//   - run never panics, and a failing call has an exit code of 1, 2 or 3;
//   - a failing call writes nothing to stdout (no partial install script);
//   - a database command succeeds only by printing its help (-h);
//   - help prints the overview, a command's help, or fails with exit code 3;
//   - an unknown command fails with exit code 2;
//   - a successful `sql` prints one whole script: its header, BEGIN, the schema (quoted as
//     an identifier, so no name can end the statement) when --schema is set, the check that
//     the database is at version --from, one section per migration after it, and the
//     version update and COMMIT at the end;
//   - --from outside 0..latest is refused, whatever integer the flag package accepted.
//
// In a plain `go test` run only the seed corpus (testdata/fuzz/FuzzRunArgs) runs; fuzz it
// with scripts/fuzz.
func FuzzRunArgs(f *testing.F) {
	f.Setenv("DATABASE_URL", "")
	f.Setenv("PGHOST", "/nonexistent/skiplock-fuzz")
	f.Setenv("PGCONNECT_TIMEOUT", "1")
	names, err := fs.Glob(skiplock.Migrations(), "*.sql")
	if err != nil || len(names) == 0 {
		f.Fatalf("no migrations embedded: %v", err)
	}
	latest := len(names)

	f.Fuzz(func(t *testing.T, argv string) {
		var args []string
		if argv != "" {
			args = strings.Split(argv, "\x00")
		}
		if len(args) > 0 && args[0] == "ui" {
			t.Skip("would connect to a database and serve until stopped")
		}
		for _, a := range args {
			if strings.Contains(a, "database-url") {
				t.Skip("would connect to a database")
			}
		}

		var stdout, stderr bytes.Buffer
		e := &env{stdin: strings.NewReader(""), stdout: &stdout, stderr: &stderr, getenv: func(string) string { return "" }}
		err := run(context.Background(), e, args)
		if err != nil && stdout.Len() > 0 {
			t.Fatalf("run(%q) failed (%v) but wrote to stdout:\n%s", args, err, limit(stdout.String()))
		}
		if err != nil {
			if code := exitCode(err); code < exitFailed || code > exitNotFound {
				t.Fatalf("run(%q) = %v with exit code %d", args, err, code)
			}
		}
		if len(args) == 0 {
			if err == nil {
				t.Fatal("run with no arguments succeeded")
			}
			return
		}
		switch args[0] {
		case "-h", "-help", "--help", "help":
			checkHelp(t, args[1:], stdout.String(), err)
			return
		}
		c, rest, lookupErr := lookup(args)
		switch {
		case lookupErr != nil:
			if err == nil || exitCode(err) != exitUsage {
				t.Fatalf("run(%q) = %v, want a usage error (%v)", args, err, lookupErr)
			}
		case c.name == "sql":
			checkSQL(t, rest, latest, stdout.String(), err)
		case err == nil && stdout.String() != c.helpText():
			t.Fatalf("run(%q) succeeded without a database, printing %q", args, limit(stdout.String()))
		}
	})
}

// checkHelp checks `skiplock help args...`.
func checkHelp(t *testing.T, args []string, out string, err error) {
	t.Helper()
	if len(args) == 0 {
		if err != nil || out != overview() {
			t.Fatalf("help = %v with stdout %q, want the overview", err, limit(out))
		}
		return
	}
	name := strings.Join(args, " ")
	if c := findCommand(name); c != nil {
		if err != nil || out != c.helpText() {
			t.Fatalf("help %q = %v with stdout %q, want its help", name, err, limit(out))
		}
		return
	}
	if isGroup(name) {
		if err != nil || !strings.HasPrefix(out, "usage: skiplock "+name+" ") {
			t.Fatalf("help %q = %v with stdout %q, want the help of its subcommands", name, err, limit(out))
		}
		return
	}
	if err == nil || exitCode(err) != exitNotFound {
		t.Fatalf("help %q = %v, want not found", name, err)
	}
}

// migrationSection matches the line that starts each migration's section of the script,
// "-- migration 004_heartbeat_many_skip_locked.sql" (and not a comment that happens to begin
// with the word).
var migrationSection = regexp.MustCompile(`(?m)^-- migration \d+_\S+\.sql$`)

// checkSQL checks the outcome of `skiplock sql args...` against the same flags parsed here.
func checkSQL(t *testing.T, args []string, latest int, out string, err error) {
	t.Helper()
	fs := flag.NewFlagSet("mirror", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	schema := fs.String("schema", "", "")
	from := fs.Int("from", 0, "")
	positional, parseErr := parseInterspersed(fs, args)
	if parseErr == nil && len(positional) > 0 {
		parseErr = fmt.Errorf("unexpected argument %q", positional[0])
	}
	if errors.Is(parseErr, flag.ErrHelp) {
		if err != nil || out != sqlCommand.helpText() {
			t.Fatalf("sql %q = %v with stdout %q, want its help", args, err, limit(out))
		}
		return
	}
	if err != nil {
		if parseErr == nil && *from >= 0 && *from <= latest {
			t.Fatalf("sql %q: valid flags (schema %q, from %d) failed: %v", args, *schema, *from, err)
		}
		return
	}
	if parseErr != nil {
		t.Fatalf("sql %q succeeded although its flags do not parse: %v", args, parseErr)
	}
	if *from < 0 || *from > latest {
		t.Fatalf("sql %q: --from %d is outside 0..%d but a script was printed:\n%s", args, *from, latest, limit(out))
	}
	if !strings.HasPrefix(out, "-- skiplock install script: ") || !strings.Contains(out, "\nBEGIN;\n") {
		t.Fatalf("sql %q: script does not start with its header and BEGIN:\n%s", args, limit(out))
	}
	if guard := fmt.Sprintf("this script upgrades from version %d,", *from); !strings.Contains(out, guard) {
		t.Fatalf("sql %q: script does not check that the schema is at version %d:\n%s", args, *from, limit(out))
	}
	if end := fmt.Sprintf("\nUPDATE %s SET version = %d;\nCOMMIT;\n", skiplock.VersionTable, latest); !strings.HasSuffix(out, end) {
		t.Fatalf("sql %q: script does not end with %q:\n…%s", args, end, out[max(0, len(out)-500):])
	}
	if n := len(migrationSection.FindAllString(out, -1)); n != latest-*from {
		t.Fatalf("sql %q: %d migration sections, want %d", args, n, latest-*from)
	}
	if *schema != "" {
		quoted := `"` + strings.ReplaceAll(*schema, `"`, `""`) + `"`
		want := "\nCREATE SCHEMA IF NOT EXISTS " + quoted + ";\nSET LOCAL search_path TO " + quoted + ";\n"
		if !strings.Contains(out, want) {
			t.Fatalf("sql %q: script does not create and use schema %s:\n%s", args, quoted, limit(out))
		}
	} else if strings.Contains(out, "CREATE SCHEMA IF NOT EXISTS") {
		t.Fatalf("sql %q: no --schema, but the script creates one", args)
	}
}

// limit cuts a script to its first lines for a failure message.
func limit(s string) string {
	if len(s) > 400 {
		return s[:400] + "\n…"
	}
	return s
}
