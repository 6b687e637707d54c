package skiplock_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// releaseRepo is a throwaway git repository holding a copy of what scripts/new-migration and
// scripts/release work on: scripts/, sql/, migrations/ and CHANGELOG.md.
type releaseRepo struct {
	t   *testing.T
	dir string
}

func newReleaseRepo(t *testing.T) *releaseRepo {
	t.Helper()
	for _, tool := range []string{"git", "bash"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s is not installed: cannot run scripts/release", tool)
		}
	}
	r := &releaseRepo{t: t, dir: t.TempDir()}
	for _, top := range []string{"scripts", "sql", "migrations", "CHANGELOG.md"} {
		if out, err := exec.Command("cp", "-a", top, r.dir+"/").CombinedOutput(); err != nil {
			t.Fatalf("cp %s: %v\n%s", top, err, out)
		}
	}
	r.git("init", "-q")
	r.git("add", "-A")
	r.git("commit", "-q", "-m", "copy")
	return r
}

// run runs a command in the repository and returns its combined output and error.
func (r *releaseRepo) run(name string, args ...string) (string, error) {
	cmd := exec.Command(name, args...)
	cmd.Dir = r.dir
	cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com",
		"GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.com", "GIT_CONFIG_GLOBAL=/dev/null")
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func (r *releaseRepo) must(name string, args ...string) string {
	r.t.Helper()
	out, err := r.run(name, args...)
	if err != nil {
		r.t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return out
}

func (r *releaseRepo) git(args ...string) string { r.t.Helper(); return r.must("git", args...) }

func (r *releaseRepo) read(path string) string {
	r.t.Helper()
	b, err := os.ReadFile(filepath.Join(r.dir, path))
	if err != nil {
		r.t.Fatal(err)
	}
	return string(b)
}

func (r *releaseRepo) write(path, text string) {
	r.t.Helper()
	if err := os.WriteFile(filepath.Join(r.dir, path), []byte(text), 0o644); err != nil {
		r.t.Fatal(err)
	}
}

func (r *releaseRepo) exists(path string) bool {
	_, err := os.Stat(filepath.Join(r.dir, path))
	return err == nil
}

// TestReleaseScript walks a release's life on a copy of the repository: scripts/new-migration
// opens the next release's migration and amends it, scripts/release refuses what is not ready
// and then records the release, and the next change opens the migration after it.
func TestReleaseScript(t *testing.T) {
	t.Parallel()
	r := newReleaseRepo(t)
	// Start from a released state: whatever the copy has open is released as v8.0.0.
	r.write("CHANGELOG.md", strings.Replace(r.read("CHANGELOG.md"), "## [Unreleased]\n", "## [Unreleased]\n\n### Added\n\n- The test's first release.\n", 1))
	for _, dir := range []string{"migrations", "migrations/proxy"} {
		open, _ := filepath.Glob(filepath.Join(r.dir, dir, "[0-9][0-9][0-9]_unreleased.sql"))
		for _, f := range open {
			b, _ := os.ReadFile(f)
			r.write(strings.TrimPrefix(f, r.dir+"/"), strings.ReplaceAll(string(b), "WRITE HERE", "written"))
		}
	}
	r.git("commit", "-q", "-am", "ready")
	r.must("scripts/release", "v8.0.0")
	releases := readReleasesFile(t, filepath.Join(r.dir, "migrations/RELEASED"))
	last := releases[len(releases)-1]
	open := fmt.Sprintf("migrations/%03d_unreleased.sql", last.schema+1)
	openSnap := fmt.Sprintf("migrations/snapshots/%03d", last.schema+1)

	if out, err := r.run("scripts/release", "v8.0.0"); err == nil || !strings.Contains(out, "not newer") {
		t.Fatalf("scripts/release v8.0.0 (the last release again) = %v\n%s\nwant a refusal saying it is not newer", err, out)
	}
	if out, err := r.run("scripts/release", "1.0"); err == nil || !strings.Contains(out, "v1.2.3") {
		t.Fatalf("scripts/release 1.0 = %v\n%s\nwant a refusal showing the form of a version", err, out)
	}

	// Two changes to sql/ go into one open migration.
	notify, claim := r.read("sql/functions/jobs_notify.sql"), r.read("sql/functions/jobs_claim.sql")
	r.write("sql/functions/jobs_notify.sql", notify+"-- first change\n")
	r.must("scripts/new-migration")
	r.write("sql/functions/jobs_claim.sql", claim+"-- second change\n")
	if out, err := r.run("scripts/new-migration", "--check"); err == nil || !strings.Contains(out, "stale") {
		t.Fatalf("scripts/new-migration --check after a second change = %v\n%s\nwant it to say the open migration is stale", err, out)
	}
	r.must("scripts/new-migration")
	text := r.read(open)
	for _, want := range []string{
		`{{ template "` + strings.TrimPrefix(openSnap, "migrations/") + `/functions/jobs_notify.sql" . }}`,
		`{{ template "` + strings.TrimPrefix(openSnap, "migrations/") + `/functions/jobs_claim.sql" . }}`,
		"WRITE HERE",
	} {
		if !strings.Contains(text, want) {
			t.Fatalf("%s lacks %q:\n%s", open, want, text)
		}
	}
	if n := strings.Count(r.git("status", "--porcelain", "migrations"), "_unreleased.sql"); n != 1 {
		t.Fatalf("two changes made %d open migrations, want 1:\n%s", n, r.git("status", "--porcelain"))
	}
	// Hand-written statements survive an amend; a change undone drops out.
	r.write(open, strings.Replace(text, "WRITE HERE", "a test release:", 1)+"")
	hand := strings.Replace(r.read(open), "-- Generated by", "CREATE TABLE t (id int);\n\n-- Generated by", 1)
	r.write(open, hand)
	r.write("sql/functions/jobs_notify.sql", notify)
	r.must("scripts/new-migration")
	text = r.read(open)
	if !strings.Contains(text, "CREATE TABLE t (id int);") || strings.Contains(text, "jobs_notify.sql") ||
		r.exists(openSnap+"/functions/jobs_notify.sql") || !r.exists(openSnap+"/functions/jobs_claim.sql") {
		t.Fatalf("after undoing one change and amending, %s (and its snapshots) should keep the hand-written table and jobs_claim only:\n%s", open, text)
	}

	// Not ready: a dirty tree, then a placeholder header.
	if out, err := r.run("scripts/release", "v9.0.0"); err == nil || !strings.Contains(out, "uncommitted") {
		t.Fatalf("scripts/release on a dirty tree = %v\n%s", err, out)
	}
	r.write(open, strings.Replace(text, "a test release:", "WRITE HERE", 1))
	r.write("CHANGELOG.md", strings.Replace(r.read("CHANGELOG.md"), "## [Unreleased]\n", "## [Unreleased]\n\n### Added\n\n- Table `t`.\n", 1))
	r.git("add", "-A")
	r.git("commit", "-q", "-m", "change")
	if out, err := r.run("scripts/release", "v9.0.0"); err == nil || !strings.Contains(out, "WRITE HERE") {
		t.Fatalf("scripts/release with the placeholder header = %v\n%s", err, out)
	}
	// A proxy migration with its placeholder stops the release before anything moves.
	r.write(open, text)
	proxyClaim := r.read("sql/proxy/functions/jobs_claim.sql")
	r.write("sql/proxy/functions/jobs_claim.sql", proxyClaim+"-- a proxy change\n")
	r.must("scripts/new-migration", "--proxy")
	proxyOpen := fmt.Sprintf("migrations/proxy/%03d_unreleased.sql", last.proxy+1)
	r.git("add", "-A")
	r.git("commit", "-q", "-m", "proxy change")
	if out, err := r.run("scripts/release", "v9.0.0"); err == nil || !strings.Contains(out, proxyOpen) || !r.exists(open) {
		t.Fatalf("scripts/release with the proxy's placeholder = %v\n%s\nwant a refusal naming %s, and %s not moved", err, out, proxyOpen, open)
	}
	r.write(proxyOpen, strings.ReplaceAll(r.read(proxyOpen), "WRITE HERE", "a proxy test release:"))
	r.git("commit", "-q", "-am", "header")

	out := r.must("scripts/release", "--tag", "--date", "2030-01-02", "v9.0.0")
	released := fmt.Sprintf("migrations/%03d_v9_0_0.sql", last.schema+1)
	if !r.exists(released) || r.exists(open) {
		t.Fatalf("after scripts/release: %s exists %v, %s exists %v; want only the former\n%s", released, r.exists(released), open, r.exists(open), out)
	}
	marker := strings.TrimSpace(r.read("migrations/RELEASED"))
	lines := strings.Split(marker, "\n")
	fields := strings.Fields(lines[len(lines)-1])
	if len(fields) != 4 || fields[0] != "v9.0.0" || fields[1] != fmt.Sprint(last.schema+1) || fields[2] != fmt.Sprint(last.proxy+1) {
		t.Fatalf("migrations/RELEASED's last line = %q, want v9.0.0 %d %d SUM", lines[len(lines)-1], last.schema+1, last.proxy+1)
	}
	if !r.exists(fmt.Sprintf("migrations/proxy/%03d_v9_0_0.sql", last.proxy+1)) {
		t.Fatalf("the open proxy migration was not named after the release")
	}
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chdir(r.dir); err != nil { // releaseFilesSum reads relative paths
		t.Fatal(err)
	}
	sum := releaseFilesSum(t, last.schema+1, last.proxy+1)
	if err := os.Chdir(wd); err != nil {
		t.Fatal(err)
	}
	if fields[3] != sum {
		t.Fatalf("migrations/RELEASED records sum %s, the files' sum is %s", fields[3], sum)
	}
	changelog := r.read("CHANGELOG.md")
	if !strings.Contains(changelog, "## [Unreleased]\n\n## [9.0.0] - 2030-01-02\n") {
		t.Fatalf("CHANGELOG.md lacks an empty [Unreleased] above [9.0.0] - 2030-01-02:\n%.600s", changelog)
	}
	if st := r.git("status", "--porcelain"); st != "" {
		t.Fatalf("scripts/release left changes uncommitted:\n%s", st)
	}
	if got := strings.TrimSpace(r.git("rev-parse", "v9.0.0^{commit}")); got != strings.TrimSpace(r.git("rev-parse", "HEAD")) {
		t.Fatalf("the tag v9.0.0 is on %s, want the release commit", got)
	}
	if out, err := r.run("scripts/release", "v9.0.1"); err == nil || !strings.Contains(out, "lists no change") {
		t.Fatalf("scripts/release with an empty [Unreleased] = %v\n%s", err, out)
	}

	// The next change opens the migration after the release.
	r.write("sql/functions/jobs_notify.sql", notify+"-- after the release\n")
	r.must("scripts/new-migration")
	next := fmt.Sprintf("migrations/%03d_unreleased.sql", last.schema+2)
	if !r.exists(next) || r.git("status", "--porcelain", released) != "" {
		t.Fatalf("a change after the release should open %s and leave %s alone:\n%s", next, released, r.git("status", "--porcelain"))
	}
}

// TestReleaseRefusesAnOpenMigrationItDoesNotRelease: a migration after the last release that
// is not named NNN_unreleased.sql would ship in the release's build without being released
// (and be amended later), so scripts/new-migration --check and scripts/release refuse it, for
// migrations/ and migrations/proxy alike, before anything moves.
func TestReleaseRefusesAnOpenMigrationItDoesNotRelease(t *testing.T) {
	t.Parallel()
	for _, dir := range []string{"migrations", "migrations/proxy"} {
		t.Run(strings.ReplaceAll(dir, "/", "_"), func(t *testing.T) {
			t.Parallel()
			r := newReleaseRepo(t)
			releases := readReleasesFile(t, filepath.Join(r.dir, "migrations/RELEASED"))
			last := releases[len(releases)-1]
			n, flag := last.schema+1, []string{"--check"}
			if dir == "migrations/proxy" {
				n, flag = last.proxy+1, []string{"--proxy", "--check"}
			}
			open := fmt.Sprintf("%s/%03d_unreleased.sql", dir, n)
			if !r.exists(open) {
				t.Skipf("the copy has no open migration %s", open)
			}
			renamed := fmt.Sprintf("%s/%03d_storage.sql", dir, n)
			r.git("mv", open, renamed)
			r.git("commit", "-q", "-m", "the open migration under another name")
			if out, err := r.run("scripts/new-migration", flag...); err == nil || !strings.Contains(out, renamed) {
				t.Errorf("scripts/new-migration %s = %v, want a refusal naming %s:\n%s", strings.Join(flag, " "), err, renamed, out)
			}
			out, err := r.run("scripts/release", "v8.0.0")
			if err == nil || !strings.Contains(out, renamed) {
				t.Errorf("scripts/release v8.0.0 = %v, want a refusal naming %s:\n%s", err, renamed, out)
			}
			if st := r.git("status", "--porcelain"); st != "" || !r.exists(renamed) {
				t.Errorf("the refused release moved files (%s exists: %v):\n%s", renamed, r.exists(renamed), st)
			}
		})
	}
}

// TestNewMigrationReinstallsEveryFunctionForASearchPathChange: each function keeps the
// search_path it was created with, so a change of the preamble alone must create every
// function again in the open migration, after the new preamble.
func TestNewMigrationReinstallsEveryFunctionForASearchPathChange(t *testing.T) {
	t.Parallel()
	for _, set := range []struct{ sqldir, migdir, field string }{{"sql", "migrations", ""}, {"sql/proxy", "migrations/proxy", "--proxy"}} {
		t.Run(strings.ReplaceAll(set.migdir, "/", "_"), func(t *testing.T) {
			t.Parallel()
			r := newReleaseRepo(t)
			releases := readReleasesFile(t, filepath.Join(r.dir, "migrations/RELEASED"))
			last := releases[len(releases)-1]
			n := last.schema + 1
			if set.field != "" {
				n = last.proxy + 1
			}
			args := []string{}
			if set.field != "" {
				args = append(args, set.field)
			}
			r.write(set.sqldir+"/search_path.sql", r.read(set.sqldir+"/search_path.sql")+"-- a preamble change\n")
			r.must("scripts/new-migration", args...)
			r.must("scripts/new-migration", append(args, "--check")...)
			migration := r.read(fmt.Sprintf("%s/%03d_unreleased.sql", set.migdir, n))
			preamble := fmt.Sprintf(`{{ template "snapshots/%03d/search_path.sql" . }}`, n)
			at := strings.Index(migration, preamble)
			if at < 0 {
				t.Fatalf("the open migration does not install the new preamble %s:\n%s", preamble, migration)
			}
			install := r.read(set.sqldir + "/install.sql")
			for _, m := range regexp.MustCompile(`"(functions/[^"]+\.sql)"`).FindAllStringSubmatch(install, -1) {
				fn := fmt.Sprintf(`{{ template "snapshots/%03d/%s" . }}`, n, m[1])
				if i := strings.Index(migration, fn); i < at {
					t.Errorf("the open migration does not create %s after the preamble", m[1])
				}
			}
		})
	}
}

// TestNewMigrationRefusesAMigrationTernLoadsButItDoesNotSee: tern loads every migrations/*.sql
// named \A(\d+)_.+\.sql\z (and skiplock embeds migrations/*.sql), while the scripts and the
// release sums read three-digit numbers: a migration named 8_extra.sql after the open 007
// would be migration 8 of the build yet missing from the release's sum, so
// scripts/new-migration (and with it scripts/release) refuses it.
func TestNewMigrationRefusesAMigrationTernLoadsButItDoesNotSee(t *testing.T) {
	t.Parallel()
	r := newReleaseRepo(t)
	releases := readReleasesFile(t, filepath.Join(r.dir, "migrations/RELEASED"))
	extra := fmt.Sprintf("migrations/%d_extra.sql", releases[len(releases)-1].schema+2)
	r.write(extra, "-- an extra migration\nCREATE TABLE jobs_extra (id int);\n")
	r.git("add", "-A")
	r.git("commit", "-q", "-m", "an extra migration under a short number")
	if out, err := r.run("scripts/new-migration", "--check"); err == nil || !strings.Contains(out, extra) {
		t.Errorf("scripts/new-migration --check = %v, want a refusal naming %s (tern loads it):\n%s", err, extra, out)
	}
}
