package skiplock_test

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/skiplock/skiplock"
	"github.com/skiplock/skiplock/tests/pgtest"
)

// releaseMarker is the one place that says what is released; scripts/lib/release.sh reads it
// for scripts/new-migration and scripts/release.
const releaseMarker = "migrations/RELEASED"

// release is one line of releaseMarker.
type release struct {
	name          string // the git tag, or "untagged"
	schema, proxy int    // the last migration of each set the release contains
	sum           string // releaseFilesSum(schema, proxy) when it was released
}

var releaseName = regexp.MustCompile(`^(untagged|v(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*))$`)

// readReleases parses releaseMarker.
func readReleases(t *testing.T) []release {
	t.Helper()
	return readReleasesFile(t, releaseMarker)
}

// readReleasesFile parses a release marker at path.
func readReleasesFile(t *testing.T, path string) []release {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var releases []release
	sc := bufio.NewScanner(f)
	for line := 1; sc.Scan(); line++ {
		text := strings.TrimSpace(sc.Text())
		if text == "" || strings.HasPrefix(text, "#") {
			continue
		}
		fields := strings.Fields(text)
		if len(fields) != 4 || !releaseName.MatchString(fields[0]) || len(fields[3]) != 64 {
			t.Fatalf("%s:%d: want RELEASE SCHEMA PROXY SHA256, got %q", path, line, text)
		}
		r := release{name: fields[0], sum: fields[3]}
		var errS, errP error
		r.schema, errS = strconv.Atoi(fields[1])
		r.proxy, errP = strconv.Atoi(fields[2])
		if errS != nil || errP != nil {
			t.Fatalf("%s:%d: migration numbers must be integers: %q", path, line, text)
		}
		releases = append(releases, r)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if len(releases) == 0 {
		t.Fatalf("%s lists no release", path)
	}
	return releases
}

// releaseFiles lists, sorted as scripts/lib/release.sh sorts them (bytewise), the files of
// the migrations up to schema and, under migrations/proxy, up to proxy, with the snapshots
// they froze.
func releaseFiles(t *testing.T, schema, proxy int) []string {
	t.Helper()
	var files []string
	for dir, limit := range map[string]int{"migrations": schema, "migrations/proxy": proxy} {
		names, err := filepath.Glob(dir + "/[0-9][0-9][0-9]_*.sql")
		if err != nil {
			t.Fatal(err)
		}
		for _, name := range names {
			if n, _ := strconv.Atoi(filepath.Base(name)[:3]); n <= limit {
				files = append(files, name)
			}
		}
		snaps, _ := filepath.Glob(dir + "/snapshots/[0-9][0-9][0-9]")
		for _, snap := range snaps {
			if n, _ := strconv.Atoi(filepath.Base(snap)); n > limit {
				continue
			}
			err := filepath.WalkDir(snap, func(path string, d os.DirEntry, err error) error {
				if err == nil && !d.IsDir() {
					files = append(files, path)
				}
				return err
			})
			if err != nil {
				t.Fatal(err)
			}
		}
	}
	slices.Sort(files)
	return files
}

// releaseFilesSum is release_files_sum of scripts/lib/release.sh: the sha256 of sha256sum's
// listing ("HASH  PATH" lines) of releaseFiles.
func releaseFilesSum(t *testing.T, schema, proxy int) string {
	t.Helper()
	var listing strings.Builder
	for _, f := range releaseFiles(t, schema, proxy) {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(b)
		fmt.Fprintf(&listing, "%s  %s\n", hex.EncodeToString(sum[:]), f)
	}
	sum := sha256.Sum256([]byte(listing.String()))
	return hex.EncodeToString(sum[:])
}

// TestReleasedMigrationsAreFrozen: the migrations of every release in releaseMarker are the
// files it was released with, and since the last release there is at most one migration per
// set, the open one that scripts/new-migration keeps in step with sql/.
func TestReleasedMigrationsAreFrozen(t *testing.T) {
	t.Parallel()
	releases := readReleases(t)
	for i, r := range releases {
		if i > 0 {
			prev := releases[i-1]
			if r.name == "untagged" || r.schema < prev.schema || r.proxy < prev.proxy {
				t.Errorf("%s: %s (%d, %d) after %s (%d, %d): releases are tagged after the first line and never go back",
					releaseMarker, r.name, r.schema, r.proxy, prev.name, prev.schema, prev.proxy)
			}
		}
		if got := releaseFilesSum(t, r.schema, r.proxy); got != r.sum {
			t.Errorf("the migrations of release %s (up to %03d, proxy up to %03d) changed: their files' sum is %s, %s records %s.\n"+
				"Released migrations and their snapshots never change: undo the edit, and put the change in the open migration (scripts/new-migration).",
				r.name, r.schema, r.proxy, got, releaseMarker, r.sum)
		}
	}
	last := releases[len(releases)-1]
	for dir, released := range map[string]int{"migrations": last.schema, "migrations/proxy": last.proxy} {
		// tern runs any NUMBER_NAME.sql; the sums and the scripts read three-digit numbers.
		all, _ := filepath.Glob(dir + "/[0-9]*_*.sql")
		for _, name := range all {
			if !regexp.MustCompile(`^[0-9]{3}_`).MatchString(filepath.Base(name)) {
				t.Errorf("%s: tern runs it as a migration, but migrations are numbered with three digits (NNN_name.sql): fold it into the open migration", name)
			}
		}
		names, _ := filepath.Glob(dir + "/[0-9][0-9][0-9]_*.sql")
		snaps, _ := filepath.Glob(dir + "/snapshots/[0-9][0-9][0-9]")
		for _, name := range append(names, snaps...) {
			n, _ := strconv.Atoi(filepath.Base(name)[:3])
			if n > released+1 {
				t.Errorf("%s: after release %s (%03d) only the open migration %03d may exist: fold it into that one", name, last.name, released, released+1)
			}
			if n == released+1 && strings.HasSuffix(name, ".sql") && filepath.Base(name) != fmt.Sprintf("%03d_unreleased.sql", n) {
				t.Errorf("%s: the open migration is named %03d_unreleased.sql until scripts/release names it after its release", name, n)
			}
		}
	}

	// What scripts/new-migration would write is what the open migrations hold.
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("bash is not installed: cannot run scripts/new-migration --check")
	}
	for _, args := range [][]string{{"--check"}, {"--proxy", "--check"}} {
		if out, err := exec.Command("scripts/new-migration", args...).CombinedOutput(); err != nil {
			t.Errorf("scripts/new-migration %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
}

// TestUpgradeFromEachReleasedVersion: a database at any released version, holding a running
// job, upgrades to the latest version with the schema of a fresh install (digest and pg_dump),
// and the job stays held and completable.
func TestUpgradeFromEachReleasedVersion(t *testing.T) {
	t.Parallel()
	releases := readReleases(t)
	latest := latestVersion(t)
	fresh := setup(t)
	migrate(t, fresh.conn, nil)
	wantDigest, wantDump := schemaDigest(t, fresh.conn, "public"), dumpSchema(t, fresh.url)
	for v := int32(1); v < latest && v <= int32(releases[len(releases)-1].schema); v++ {
		t.Run(fmt.Sprintf("FromVersion%d", v), func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			migrate(t, b.conn, &skiplock.MigrateOpts{TargetVersion: v})
			var id int64
			if v >= 2 { // version 1 has the table but not the functions
				id = pgtest.QueryOne[int64](t, b.conn, "SELECT jobs_enqueue('survivor')")
				pgtest.QueryOne[int64](t, b.conn, "SELECT id FROM jobs_claim('w', lease => '1 hour')")
			}
			migrate(t, b.conn, nil)
			if got := schemaDigest(t, b.conn, "public"); got != wantDigest {
				t.Fatalf("upgraded from %d, the schema differs from a fresh install (-fresh, +upgraded):\n%s", v, lineDiff(wantDigest, got))
			}
			if got := dumpSchema(t, b.url); got != wantDump {
				t.Fatalf("upgraded from %d, pg_dump differs from a fresh install's (-fresh, +upgraded):\n%s", v, lineDiff(wantDump, got))
			}
			if id != 0 && !pgtest.QueryOne[bool](t, b.conn, "SELECT jobs_complete($1, 1)", id) {
				t.Fatalf("the job claimed at version %d could not be completed after the upgrade", v)
			}
		})
	}
}

// TestMigrateRefusesUnknownVersion: a schema at a version this build does not know (a newer
// skiplock's, or a development build's whose migrations were folded into a release) is
// refused with an error that says so, and left as it is.
func TestMigrateRefusesUnknownVersion(t *testing.T) {
	t.Parallel()
	b := setup(t)
	migrate(t, b.conn, nil)
	table := pgx.Identifier{"public", skiplock.VersionTable}.Sanitize()
	pgtest.MustExec(t, b.conn, "UPDATE "+table+" SET version = 22")
	err := skiplock.Migrate(t.Context(), b.conn, nil)
	if err == nil || !strings.Contains(err.Error(), "at migration version 22") || !strings.Contains(err.Error(), "folded") {
		t.Fatalf("Migrate of a schema at version 22 = %v, want an error naming the version and why it is unknown", err)
	}
	if v := pgtest.QueryOne[int32](t, b.conn, "SELECT version FROM "+table); v != 22 {
		t.Fatalf("the version table says %d after the refused Migrate, want 22 untouched", v)
	}
}

// TestTaggedReleasesMatchGit: where the repository has a release's tag, the migrations of that
// release are byte for byte the files at the tag (the sums of releaseMarker check the same
// without git history).
func TestTaggedReleasesMatchGit(t *testing.T) {
	t.Parallel()
	for _, r := range readReleases(t) {
		if r.name == "untagged" {
			continue // TestRewrittenMigrationsKeepTheirEffect compares them with releasedCommit
		}
		t.Run(r.name, func(t *testing.T) {
			t.Parallel()
			tagged := gitMigrations(t, "refs/tags/"+r.name)
			for _, f := range releaseFiles(t, r.schema, r.proxy) {
				now, err := os.ReadFile(f)
				if err != nil {
					t.Fatal(err)
				}
				at, ok := tagged[strings.TrimPrefix(f, "migrations/")]
				if !ok {
					t.Errorf("%s is not in the tag %s", f, r.name)
				} else if string(at.Data) != string(now) {
					t.Errorf("%s differs from the tag %s: released files never change", f, r.name)
				}
			}
		})
	}
}
