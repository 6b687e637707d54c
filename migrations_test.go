package skiplock_test

import (
	"bytes"
	"fmt"
	"io/fs"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/skiplock/skiplock"
)

// The two ways a migration installs frozen sql/ files: a tern shared template (one file,
// named by its path under migrations/) or install_snapshot (a whole frozen code package,
// as migration 002 does).
var (
	templateRef        = regexp.MustCompile(`\{\{-?\s*template\s+"([^"]+)"`)
	installSnapshotRef = regexp.MustCompile(`\{\{-?\s*install_snapshot\s+"([^"]+)"`)
)

// migrationSet is the embedded migrations/ read once: each migration's text by number, and
// for each sql/ path (functions/jobs_claim.sql, grants.sql) the numbers of the migrations
// that froze a copy of it under snapshots/NNN, ascending.
type migrationSet struct {
	files  fs.FS
	texts  map[int]string // migration number → its file's text
	names  map[int]string // migration number → its file name
	frozen map[string][]int
}

func loadMigrationSet(t *testing.T) *migrationSet {
	t.Helper()
	ms := &migrationSet{files: skiplock.Migrations(), texts: map[int]string{}, names: map[int]string{}, frozen: map[string][]int{}}
	names, err := fs.Glob(ms.files, "*.sql")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range names {
		n, err := strconv.Atoi(strings.SplitN(name, "_", 2)[0])
		if err != nil {
			t.Fatalf("migration %s: name does not start with its number", name)
		}
		text, err := fs.ReadFile(ms.files, name)
		if err != nil {
			t.Fatal(err)
		}
		ms.texts[n], ms.names[n] = string(text), name
	}
	for file := range readTree(t, ms.files, "snapshots") {
		dir, rest, _ := strings.Cut(strings.TrimPrefix(file, "snapshots/"), "/")
		n, err := strconv.Atoi(dir)
		if err != nil || rest == "" {
			t.Fatalf("migrations/%s: frozen files live in migrations/snapshots/NNN/", file)
		}
		ms.frozen[rest] = append(ms.frozen[rest], n)
	}
	for _, numbers := range ms.frozen {
		slices.Sort(numbers)
	}
	return ms
}

// newestFrozen returns the path (under migrations/) of the newest copy of sqlPath frozen by
// migration n or an earlier one, or "" when there is none.
func (ms *migrationSet) newestFrozen(sqlPath string, n int) string {
	newest := -1
	for _, m := range ms.frozen[sqlPath] {
		if m <= n {
			newest = m
		}
	}
	if newest < 0 {
		return ""
	}
	return fmt.Sprintf("snapshots/%03d/%s", newest, sqlPath)
}

// installs lists the frozen files migration n installs, in order: its template references,
// and for install_snapshot the package's install.sql and every file that includes.
func (ms *migrationSet) installs(t *testing.T, n int) []string {
	t.Helper()
	var files []string
	for _, m := range installSnapshotRef.FindAllStringSubmatch(ms.texts[n], -1) {
		dir := "snapshots/" + m[1]
		install, err := fs.ReadFile(ms.files, dir+"/install.sql")
		if err != nil {
			t.Fatalf("%s: install_snapshot %q: %v", ms.names[n], m[1], err)
		}
		files = append(files, dir+"/install.sql")
		for _, inc := range templateRef.FindAllStringSubmatch(string(install), -1) {
			files = append(files, dir+"/"+inc[1])
		}
	}
	for _, m := range templateRef.FindAllStringSubmatch(ms.texts[n], -1) {
		files = append(files, m[1])
	}
	return files
}

func (ms *migrationSet) numbers() []int {
	var ns []int
	for n := range ms.texts {
		ns = append(ns, n)
	}
	slices.Sort(ns)
	return ns
}

// TestSQLFilesAreFrozen: migrations install frozen copies of sql/ files, never sql/ itself,
// so an edit to sql/ reaches no database until a new migration freezes it.
func TestSQLFilesAreFrozen(t *testing.T) {
	t.Parallel()
	ms := loadMigrationSet(t)
	latest := ms.numbers()[len(ms.numbers())-1]

	t.Run("EachSQLFileEqualsItsNewestFrozenCopy", func(t *testing.T) {
		t.Parallel()
		var problems []string
		for name, body := range readTree(t, skiplock.CodePackage(), ".") {
			if name == "install.sql" { // the current install's glue: never frozen
				continue
			}
			if strings.HasPrefix(name, "proxy/") { // the proxy's own set: TestProxySQLFilesAreFrozen
				continue
			}
			frozen := ms.newestFrozen(name, latest)
			if frozen == "" {
				problems = append(problems, fmt.Sprintf("sql/%s has no frozen copy in migrations/snapshots", name))
				continue
			}
			if b, err := fs.ReadFile(ms.files, frozen); err != nil || !bytes.Equal(b, body) {
				problems = append(problems, fmt.Sprintf("sql/%s differs from its newest frozen copy, migrations/%s", name, frozen))
			}
		}
		if len(problems) > 0 {
			slices.Sort(problems)
			t.Fatalf("sql/ has changes that no migration installs:\n  %s\n"+
				"Freeze them into the next release's open migration, with the glue that installs them, with:\n\n"+
				"    scripts/new-migration\n\n"+
				"(see CONTRIBUTING.md, \"Changing the SQL\").", strings.Join(problems, "\n  "))
		}
	})

	t.Run("EveryFrozenFileIsInstalledByItsMigration", func(t *testing.T) {
		t.Parallel()
		installed := map[string]bool{}
		for _, n := range ms.numbers() {
			for _, f := range ms.installs(t, n) {
				if _, err := fs.Stat(ms.files, f); err != nil {
					t.Errorf("%s installs %s, which does not exist", ms.names[n], f)
				}
				if strings.HasPrefix(f, fmt.Sprintf("snapshots/%03d/", n)) {
					installed[f] = true
				}
			}
		}
		for f := range readTree(t, ms.files, "snapshots") {
			if !installed[f] {
				t.Errorf("migrations/%s is frozen but its migration does not install it", f)
			}
		}
	})

	// What scripts/new-migration writes, checked for every migration, hand-edited or not:
	// the functions it installs are its own frozen copies, preceded by the search_path
	// preamble and followed by the grants, both the newest frozen copies as of that migration.
	// So every function is created with its search_path pinned and its grants re-applied.
	t.Run("FunctionsAreInstalledBetweenPreambleAndGrants", func(t *testing.T) {
		t.Parallel()
		for _, n := range ms.numbers() {
			refs := templateRef.FindAllStringSubmatch(ms.texts[n], -1)
			var installs []string
			for _, m := range refs {
				installs = append(installs, m[1])
			}
			if strings.Contains(ms.texts[n], "WRITE HERE") {
				t.Errorf("%s: write its header comment in place of scripts/new-migration's placeholder", ms.names[n])
			}
			hasFunctions := slices.ContainsFunc(installs, func(f string) bool { return strings.Contains(f, "/functions/") })
			if !hasFunctions {
				continue
			}
			name := ms.names[n]
			preamble, grants := ms.newestFrozen("search_path.sql", n), ms.newestFrozen("grants.sql", n)
			if installs[0] != preamble {
				t.Errorf("%s: installs %s first, want the newest frozen preamble %s", name, installs[0], preamble)
			}
			if last := installs[len(installs)-1]; last != grants {
				t.Errorf("%s: installs %s last, want the newest frozen grants %s", name, last, grants)
			}
			for _, f := range installs[1 : len(installs)-1] {
				if dir := path.Dir(f); dir != fmt.Sprintf("snapshots/%03d/functions", n) {
					t.Errorf("%s: installs %s between preamble and grants, want only its own frozen functions (snapshots/%03d/functions/)", name, f, n)
				}
			}
		}
	})
}

// readTree reads every file of fsys under dir into a map keyed by slash-separated path
// (relative to fsys).
func readTree(t *testing.T, fsys fs.FS, dir string) map[string][]byte {
	t.Helper()
	files := map[string][]byte{}
	err := fs.WalkDir(fsys, dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(fsys, path)
		files[path] = b
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatalf("no files under %s", dir)
	}
	return files
}
