package security_test

import (
	"bytes"
	"context"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/skiplock/skiplock/tests/pgtest"
)

// TestLeaseRoleSurvivesDataRestore: the jobs table's data, copied out as pg_dump does (COPY
// ... TO STDOUT, text), loads into a fresh install where the login that held a lease does
// not exist (another cluster: pg_dump of one database carries no roles). A regrole column
// writes each running job's lease_role as the login's name, and reading it back raises
// 42704 for a name the target lacks: the COPY of the whole table fails, queued jobs included.
func TestLeaseRoleSurvivesDataRestore(t *testing.T) {

	t.Parallel()
	b := setup(t)
	login := newLogin(t, b, "Dump.Worker", "jobs_worker")
	holder := pgtest.NewConn(t, login)
	queued := enqueue(t, b, "dump")
	running := enqueue(t, b, "dump")
	claimAs(t, holder, "dump", queued) // the lower id is claimed first
	_ = running

	conn, err := b.super.Acquire(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	var data bytes.Buffer
	if _, err := conn.Conn().PgConn().CopyTo(t.Context(), &data, "COPY jobs TO STDOUT"); err != nil {
		t.Fatalf("COPY jobs TO STDOUT: %v", err)
	}
	// The target cluster has no such login: here, the login goes by another name.
	name := loginName(t, b, queued)
	renamed := "renamed_" + randomHex(t, 4)
	exec(t, b.super, "ALTER ROLE "+pgx.Identifier{name}.Sanitize()+" RENAME TO "+pgx.Identifier{renamed}.Sanitize())
	t.Cleanup(func() {
		if _, err := b.super.Exec(context.Background(), "ALTER ROLE "+pgx.Identifier{renamed}.Sanitize()+" RENAME TO "+pgx.Identifier{name}.Sanitize()); err != nil {
			t.Errorf("failed to rename the login back: %v", err)
		}
	})

	target := pgtest.NewConn(t, pgtest.NewDatabase(t))
	if _, err := target.PgConn().CopyFrom(t.Context(), &data, "COPY jobs FROM STDIN"); err != nil {
		t.Fatalf("restoring the jobs table's data into a database without the lease's login: %v", err)
	}
	if n := scalar[int64](t, target, "SELECT count(*) FROM jobs"); n != 2 {
		t.Fatalf("restored %d jobs, want 2", n)
	}
}

func loginName(t *testing.T, b *testBundle, id int64) string {
	t.Helper()
	return scalar[string](t, b.super, "SELECT r.rolname::text FROM jobs j JOIN pg_roles r ON r.oid = j.lease_role WHERE j.id = $1", id)
}
