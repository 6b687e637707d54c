package pglocal

import (
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// pgbinScript is the shell version of the search, relative to this package's directory.
const pgbinScript = "../../scripts/lib/pgbin.sh"

// shellSearch runs a function of scripts/lib/pgbin.sh in the current environment and
// returns what it printed, or "" when it failed.
func shellSearch(t *testing.T, call string) string {
	t.Helper()
	out, err := exec.CommandContext(t.Context(), "bash", "-c", `source "$0" && `+call, pgbinScript).Output()
	if err != nil {
		var exitErr *exec.ExitError
		if !errors.As(err, &exitErr) {
			t.Fatalf("bash: %v", err)
		}
		return ""
	}
	return strings.TrimSpace(string(out))
}

// goServerDir is FindBinaries without the apt-get install, which a test must not start.
func goServerDir(t *testing.T) string {
	t.Helper()
	if os.Getenv("PGBIN") != "" {
		dir, _ := FindBinaries(t.Context())
		return dir
	}
	dir, _ := searchBinaries(t.Context(), debianLibRoot)
	return dir
}

// TestShellSearchAgrees checks that scripts/lib/pgbin.sh, which scripts/test and the psql
// suites' runners use, finds the same server directory and programs as FindBinaries and
// Tool, with PGBIN unset, set to the found directory, and set to a directory holding
// nothing.
func TestShellSearchAgrees(t *testing.T) {
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("bash not found")
	}
	programs := []string{"psql", "pg_dump", "pg_config", "initdb", "sh", "skiplock-no-such-program"}
	check := func(t *testing.T) {
		t.Helper()
		if got, want := shellSearch(t, "pg_server_bin_dir"), goServerDir(t); got != want {
			t.Errorf("pg_server_bin_dir = %q, FindBinaries = %q", got, want)
		}
		for _, name := range programs {
			want, _ := Tool(name)
			if got := shellSearch(t, "pg_tool "+name); got != want {
				t.Errorf("pg_tool %s = %q, Tool = %q", name, got, want)
			}
		}
	}

	t.Setenv("PGBIN", "")
	check(t)
	dir := goServerDir(t)
	if dir == "" {
		t.Log("no PostgreSQL server binaries here: only the search that finds nothing was compared")
	} else {
		if want, _ := Tool("psql"); want == "" {
			t.Errorf("Tool(psql) found nothing although the server binaries are in %s", dir)
		}
		t.Setenv("PGBIN", dir)
		check(t)
	}
	t.Setenv("PGBIN", t.TempDir())
	check(t)
}

func TestToolPGBIN(t *testing.T) {
	empty := t.TempDir()
	t.Setenv("PGBIN", empty)
	// A wrong PGBIN is reported, not silently replaced by another find.
	if p, err := Tool("sh"); !errors.Is(err, ErrToolNotFound) {
		t.Errorf("Tool(sh) with an empty PGBIN = %q, %v; want ErrToolNotFound", p, err)
	}
	if _, err := Tool("../sh"); err == nil {
		t.Error("Tool accepted a path")
	}
}
