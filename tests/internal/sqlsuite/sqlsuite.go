// Package sqlsuite runs the psql-based suites (tests/regress, tests/isolation) from go test.
// Each suite keeps its own bash runner script, the one CI and developers call without Go;
// this package only finds the PostgreSQL binary a runner needs and runs the runner once per
// test file, in a fresh database.
package sqlsuite

import (
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/skiplock/skiplock/tests/pgtest"
)

// Run runs ./run (the suite's runner, in the test's working directory) once per file
// matching dir/*ext, as a parallel subtest named for the file, each in a database of its own
// from [pgtest.NewDatabase]. env is added to the runner's environment. The test is skipped
// without bash, and fails when dir holds no such file.
func Run(t *testing.T, dir, ext string, env ...string) {
	t.Helper()
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("bash not found; the SQL suites need it")
	}
	files, err := filepath.Glob(filepath.Join(dir, "*"+ext))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatalf("no *%s files in %s/", ext, dir)
	}
	env = append(os.Environ(), env...)
	for _, file := range files {
		name := strings.TrimSuffix(filepath.Base(file), ext)
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			dbURL := pgtest.NewDatabase(t)
			// The runner prints the unified diff of a mismatch, which becomes the failure
			// message; results go to a temporary directory so parallel runs share no file.
			cmd := exec.CommandContext(t.Context(), "bash", "run", "--existing", "--results", t.TempDir(), dbURL, name)
			cmd.Env = env
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("run %s: %v\n%s", name, err, out)
			}
		})
	}
}

// LookVersioned returns the first executable /usr/lib/postgresql/<major>/rel (Debian's
// versioned directories), newest major first, or "" when there is none.
func LookVersioned(rel string) string {
	matches, _ := filepath.Glob(filepath.Join("/usr/lib/postgresql/*", rel))
	sort.Slice(matches, func(i, j int) bool { return major(matches[i]) > major(matches[j]) })
	for _, m := range matches {
		if IsExecutable(m) {
			return m
		}
	}
	return ""
}

// IsExecutable reports whether path is a file with an execute bit set.
func IsExecutable(path string) bool {
	info, err := os.Stat(path)
	return err == nil && !info.IsDir() && info.Mode()&0o111 != 0
}

// major reads the version directory of /usr/lib/postgresql/<major>/...; 0 if none.
func major(path string) int {
	rest, ok := strings.CutPrefix(path, "/usr/lib/postgresql/")
	if !ok {
		return 0
	}
	n := 0
	for _, r := range rest {
		if r < '0' || r > '9' {
			break
		}
		n = n*10 + int(r-'0')
	}
	return n
}
