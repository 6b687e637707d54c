package skiplock_test

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/jackc/pgx/v5"

	"github.com/skiplock/skiplock"
	"github.com/skiplock/skiplock/tests/pgtest"
)

// releasedCommit is the last commit whose migrations 004 and 005 reinstalled every function
// from a full copy of sql/. They were then rewritten to install only what they change; the
// schema each version leaves must not have changed.
const releasedCommit = "4fee611"

// releasedDigests pins the sha256 of schemaDigest after migrating a fresh database to each
// released version, in a dedicated schema (the digest names neither the schema nor the
// installing role): every version up to the last release of migrations/RELEASED, no other.
// Released versions never change, so neither may these. Recorded on PostgreSQL 15 by a
// superuser (the jobs_* roles exist and hold their grants).
var releasedDigests = map[int32]string{
	1: "55c7e9a67c293170c504f0c5d58bb38a9e0143fc5dd04903d3a25534e8a7c52c",
	2: "20b88dcbab89c46c26b8424c1ef39b41b2679993c80884ecff0d56853797448d",
	3: "527692a2ddf377f372c637ddc6241c0d4211858625af71a381f22b12ac4ab872",
	4: "cae34ea01cc143ac72145f5ac6c5e4dc9a7c10c1750cc1d8cdac8da43f31acbd",
	5: "40f9f5567aa21545b91a81ed3e99761058ac7cb94dc11e317491a6716383d930",
	6: "6a3a6ae27942ddb6d8e3af9162453a2bd8fa1ae233c7a14054fa77ee7e252953",
}

// TestRewrittenMigrationsKeepTheirEffect migrates fresh databases one version at a time and
// compares each released version's schema (migrations/RELEASED) with the pinned digest and,
// for the versions before the first tag, when the repository's history has it, with the
// schema the migrations as released at releasedCommit leave.
func TestRewrittenMigrationsKeepTheirEffect(t *testing.T) {
	t.Parallel()
	const schema = "history"
	releases := readReleases(t)
	lastReleased := int32(releases[len(releases)-1].schema)
	var untagged int32 // the versions in use before the first tag, which releasedCommit has
	for _, r := range releases {
		if r.name == "untagged" {
			untagged = int32(r.schema)
		}
	}
	for v := range releasedDigests {
		if v < 1 || v > lastReleased {
			t.Errorf("releasedDigests pins version %d, which %s does not release (versions 1 to %d)", v, releaseMarker, lastReleased)
		}
	}

	t.Run("DigestsArePinned", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		for v := int32(1); v <= lastReleased; v++ {
			migrate(t, b.conn, &skiplock.MigrateOpts{Schema: schema, TargetVersion: v})
			if v == 3 && !pgtest.QueryOne[bool](t, b.conn, "SELECT count(*) = 3 FROM pg_roles WHERE rolname IN ('jobs_producer', 'jobs_worker', 'jobs_admin')") {
				t.Skip("the jobs_* roles do not exist (the test database's user lacks CREATEROLE): the pinned digests include their grants")
			}
			digest := schemaDigest(t, b.conn, schema)
			sum := sha256.Sum256([]byte(digest))
			got := hex.EncodeToString(sum[:])
			t.Logf("version %d: digest sha256 %s", v, got)
			want, ok := releasedDigests[v]
			if !ok {
				t.Errorf("version %d is released (%s) but releasedDigests does not pin its digest: add %d: %q", v, releaseMarker, v, got)
				continue
			}
			if got != want {
				t.Errorf("version %d: the schema's digest has sha256 %s, want %s: a released migration (or one of the frozen files it installs) changed, or schemaDigest did. The digest:\n%s",
					v, got, want, digest)
			}
		}
	})

	t.Run("SameAsReleasedFilesInGitHistory", func(t *testing.T) {
		t.Parallel()
		released := gitMigrations(t, releasedCommit)
		old, current := setup(t), setup(t)
		for v := int32(1); v <= untagged; v++ {
			opts := &skiplock.MigrateOpts{Schema: schema, TargetVersion: v}
			if err := skiplock.MigrateFS(t.Context(), old.conn, opts, released); err != nil {
				t.Fatalf("migrating to %d with the migrations of %s: %v", v, releasedCommit, err)
			}
			migrate(t, current.conn, opts)
			want, got := schemaDigest(t, old.conn, schema), schemaDigest(t, current.conn, schema)
			if got != want {
				t.Fatalf("version %d: the schema differs from the one the migrations of %s leave (-released, +now):\n%s",
					v, releasedCommit, lineDiff(want, got))
			}
			sum := sha256.Sum256([]byte(got))
			t.Logf("version %d: same schema as the migrations of %s (digest sha256 %s, %d objects)",
				v, releasedCommit, hex.EncodeToString(sum[:]), strings.Count(got, "\n")+1)
			if v >= 4 { // the rewritten versions: pg_dump shows what the digest leaves out
				t.Run(fmt.Sprintf("PgDumpAtVersion%d", v), func(t *testing.T) {
					if want, got := dumpSchema(t, old.url), dumpSchema(t, current.url); got != want {
						t.Fatalf("pg_dump differs from that of the migrations of %s (-released, +now):\n%s", releasedCommit, lineDiff(want, got))
					}
				})
			}
		}
		// The same job, claimed before the upgrade, is held and completable after it in both.
		for _, b := range []*testBundle{old, current} {
			q := func(fn string) string { return pgx.Identifier{schema, fn}.Sanitize() }
			id := pgtest.QueryOne[int64](t, b.conn, "SELECT "+q("jobs_enqueue")+"('k')")
			pgtest.QueryOne[int64](t, b.conn, "SELECT id FROM "+q("jobs_claim")+"('w')")
			if !pgtest.QueryOne[bool](t, b.conn, "SELECT extended FROM "+q("jobs_heartbeat_many")+"(ARRAY[$1::bigint], ARRAY[1])", id) ||
				!pgtest.QueryOne[bool](t, b.conn, "SELECT "+q("jobs_complete")+"($1, 1)", id) {
				t.Fatal("a job claimed at version 5 could not be heartbeated and completed")
			}
		}
	})
}

// gitMigrations reads migrations/ as it was at rev (a commit or a tag) from the repository's
// git history, or skips the test when the history is not there (a shallow clone, a source
// archive, a module download, a tag not yet made) or git is missing.
func gitMigrations(t *testing.T, rev string) fstest.MapFS {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skipf("git is not installed: cannot read the migrations of %s", rev)
	}
	if out, err := exec.Command("git", "cat-file", "-e", rev+"^{commit}").CombinedOutput(); err != nil {
		t.Skipf("the repository's git history has no %s (shallow clone, no .git, or not tagged yet: %v %s); "+
			"the digests and the files' sums in %s still check the released versions", rev, err, strings.TrimSpace(string(out)), releaseMarker)
	}
	var stderr bytes.Buffer
	cmd := exec.Command("git", "archive", "--format=tar", rev, "migrations")
	cmd.Stderr = &stderr
	archive, err := cmd.Output()
	if err != nil {
		t.Fatalf("git archive %s migrations: %v\n%s", rev, err, stderr.String())
	}
	files := fstest.MapFS{}
	r := tar.NewReader(bytes.NewReader(archive))
	for {
		h, err := r.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("reading git archive %s migrations: %v", rev, err)
		}
		if h.Typeflag != tar.TypeReg {
			continue
		}
		body, err := io.ReadAll(r)
		if err != nil {
			t.Fatal(err)
		}
		files[strings.TrimPrefix(h.Name, "migrations/")] = &fstest.MapFile{Data: body, Mode: 0o644}
	}
	if len(files) == 0 {
		t.Fatalf("git archive %s migrations: no files", rev)
	}
	return files
}
