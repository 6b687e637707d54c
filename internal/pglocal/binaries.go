package pglocal

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
)

// MinMajorVersion is the oldest PostgreSQL major version FindBinaries
// accepts. skiplock relies on DROP DATABASE ... WITH (FORCE), added in 13.
const MinMajorVersion = 13

// ErrBinariesNotFound is returned by FindBinaries and Start when no usable
// PostgreSQL server binaries exist and they could not be installed. Its
// message is the one line a developer needs to fix that.
var ErrBinariesNotFound = errors.New("PostgreSQL 13+ server binaries not found: " +
	"install them with `sudo apt-get install postgresql` (or set PGBIN or DATABASE_URL)")

// debianLibRoot is where Debian and Ubuntu put each major version's server
// binaries (/usr/lib/postgresql/15/bin); they are not on PATH there.
const debianLibRoot = "/usr/lib/postgresql"

// installMu makes goroutines of one process that all miss the binaries wait
// for a single apt-get run instead of racing for the dpkg lock.
var installMu sync.Mutex

// FindBinaries returns the directory holding initdb, pg_ctl and postgres.
//
// It looks, in order, at the PGBIN environment variable, at the newest
// /usr/lib/postgresql/<major>/bin of at least MinMajorVersion, and at initdb
// on PATH. When none is found, the process runs as root and apt-get exists,
// it installs the Debian packages postgresql and postgresql-contrib, showing
// apt's output on stderr, and searches again. Otherwise it returns
// ErrBinariesNotFound.
//
// A PGBIN that does not hold usable binaries is an error rather than a
// reason to look elsewhere: whoever set it meant that directory.
func FindBinaries(ctx context.Context) (string, error) {
	if dir := os.Getenv("PGBIN"); dir != "" {
		if err := checkBinDir(ctx, dir); err != nil {
			return "", fmt.Errorf("failed to use PGBIN: %w", err)
		}
		return dir, nil
	}
	if dir, ok := searchBinaries(ctx, debianLibRoot); ok {
		return dir, nil
	}
	if os.Geteuid() != 0 {
		return "", ErrBinariesNotFound
	}
	if _, err := exec.LookPath("apt-get"); err != nil {
		return "", ErrBinariesNotFound
	}

	installMu.Lock()
	defer installMu.Unlock()
	// Another goroutine may have installed them while this one waited.
	if dir, ok := searchBinaries(ctx, debianLibRoot); ok {
		return dir, nil
	}
	if err := aptInstall(ctx); err != nil {
		return "", fmt.Errorf("%w (automatic install failed: %v)", ErrBinariesNotFound, err)
	}
	if dir, ok := searchBinaries(ctx, debianLibRoot); ok {
		return dir, nil
	}
	return "", ErrBinariesNotFound
}

// searchBinaries looks under libRoot (the Debian layout), then on PATH.
func searchBinaries(ctx context.Context, libRoot string) (string, bool) {
	for _, dir := range versionedBinDirs(libRoot, "initdb") {
		if checkBinDir(ctx, dir) == nil {
			return dir, true
		}
	}
	initdb, err := exec.LookPath("initdb")
	if err != nil {
		return "", false
	}
	// Distributions often link /usr/bin/initdb into a versioned directory;
	// the other binaries are only guaranteed to sit next to the real file.
	if resolved, err := filepath.EvalSymlinks(initdb); err == nil {
		initdb = resolved
	}
	dir := filepath.Dir(initdb)
	if checkBinDir(ctx, dir) != nil {
		return "", false
	}
	return dir, true
}

// ErrToolNotFound is returned by Tool when no directory it searches holds the program.
var ErrToolNotFound = errors.New("PostgreSQL program not found: install PostgreSQL's client programs " +
	"(`sudo apt-get install postgresql-client`) or set PGBIN")

// Tool returns the path of one of PostgreSQL's programs (psql, pg_dump, pg_config...),
// searched in the order FindBinaries uses: PGBIN when set (and then only there, because
// whoever set it meant that directory), else the newest /usr/lib/postgresql/<major>/bin of
// at least MinMajorVersion that holds it, else PATH. Unlike FindBinaries it installs
// nothing; when the program is found nowhere the error wraps ErrToolNotFound.
//
// scripts/lib/pgbin.sh is the same search for the shell scripts (pg_tool); a test checks
// that the two agree.
func Tool(name string) (string, error) {
	if strings.ContainsRune(name, filepath.Separator) {
		return "", fmt.Errorf("invalid program name %q: must not contain a path separator", name)
	}
	if dir := os.Getenv("PGBIN"); dir != "" {
		p := filepath.Join(dir, name)
		if !isExecutable(p) {
			return "", fmt.Errorf("failed to use PGBIN: %w: no executable %s", ErrToolNotFound, p)
		}
		return p, nil
	}
	if dirs := versionedBinDirs(debianLibRoot, name); len(dirs) > 0 {
		return filepath.Join(dirs[0], name), nil
	}
	if p, err := exec.LookPath(name); err == nil {
		return p, nil
	}
	return "", fmt.Errorf("%w: no %s in %s/<major>/bin or on PATH", ErrToolNotFound, name, debianLibRoot)
}

// versionedBinDirs lists libRoot/<major>/bin directories that hold the executable program
// and whose major version is new enough, newest first.
func versionedBinDirs(libRoot, program string) []string {
	matches, _ := filepath.Glob(filepath.Join(libRoot, "*", "bin", program))
	type candidate struct {
		dir   string
		major int
	}
	var found []candidate
	for _, m := range matches {
		if !isExecutable(m) {
			continue
		}
		binDir := filepath.Dir(m)
		name := filepath.Base(filepath.Dir(binDir))
		// "9.6" is major 9; "15" is major 15. Anything else is not ours.
		major, err := strconv.Atoi(strings.SplitN(name, ".", 2)[0])
		if err != nil || major < MinMajorVersion {
			continue
		}
		found = append(found, candidate{binDir, major})
	}
	sort.Slice(found, func(i, j int) bool { return found[i].major > found[j].major })
	dirs := make([]string, len(found))
	for i, c := range found {
		dirs[i] = c.dir
	}
	return dirs
}

// isExecutable reports whether path is a file with an execute bit set.
func isExecutable(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0
}

var versionRE = regexp.MustCompile(`\(PostgreSQL\) (\d+)`)

// checkBinDir verifies that dir holds the programs Start runs and that they
// are at least MinMajorVersion.
func checkBinDir(ctx context.Context, dir string) error {
	for _, name := range []string{"initdb", "pg_ctl", "postgres"} {
		if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
			return fmt.Errorf("failed to find %s in %s: %w", name, dir, err)
		}
	}
	major, err := binMajorVersion(ctx, dir)
	if err != nil {
		return err
	}
	if major < MinMajorVersion {
		return fmt.Errorf("PostgreSQL %d in %s is older than %d", major, dir, MinMajorVersion)
	}
	return nil
}

// binMajorVersion asks the postgres binary in dir for its major version.
func binMajorVersion(ctx context.Context, dir string) (int, error) {
	out, err := exec.CommandContext(ctx, filepath.Join(dir, "postgres"), "--version").Output()
	if err != nil {
		return 0, fmt.Errorf("failed to run %s --version: %w", filepath.Join(dir, "postgres"), err)
	}
	m := versionRE.FindSubmatch(out)
	if m == nil {
		return 0, fmt.Errorf("failed to parse PostgreSQL version from %q", strings.TrimSpace(string(out)))
	}
	return strconv.Atoi(string(m[1]))
}

// aptInstall installs the server packages with apt-get. Its output goes to
// stderr so that a long download is visibly progress, not a hang.
func aptInstall(ctx context.Context) error {
	fmt.Fprintln(os.Stderr, "pglocal: PostgreSQL server binaries not found; installing them with apt-get (running as root)")
	// Packages installed by other tools in parallel (another test binary
	// doing the same) hold the dpkg lock; wait for it instead of failing.
	lockWait := "-o=DPkg::Lock::Timeout=600"
	steps := [][]string{
		{"apt-get", lockWait, "update"},
		{"apt-get", lockWait, "install", "-y", "--no-install-recommends", "postgresql", "postgresql-contrib"},
	}
	for _, args := range steps {
		cmd := exec.CommandContext(ctx, args[0], args[1:]...)
		cmd.Stdout = os.Stderr
		cmd.Stderr = os.Stderr
		cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("failed to run %s: %w", strings.Join(args, " "), err)
		}
	}
	return nil
}
