package sqltest

import (
	"slices"
	"testing"
	"time"

	"github.com/skiplock/skiplock/tests/pgtest"
)

// TestForeignKeyReferencesDoNotBlock: an application table with a foreign key to jobs(id),
// written in a transaction that stays open, holds FOR KEY SHARE locks on the jobs it
// references (the outbox pattern: an order row pointing at its job). Those locks must not
// hide a job from jobs_claim, nor make jobs_heartbeat_many, jobs_requeue_expired or
// jobs_complete_many skip it or wait for it: the functions lock rows FOR NO KEY UPDATE,
// which does not conflict with FOR KEY SHARE.
func TestForeignKeyReferencesDoNotBlock(t *testing.T) {
	t.Parallel()
	b := setup(t)
	mustExec(t, b.Conn, "CREATE TABLE orders (id bigserial PRIMARY KEY, job_id bigint NOT NULL REFERENCES jobs (id))")
	running := enqueue(t, b.Conn, "")
	claimOne(t, b.Conn, "w", "", "1 hour")
	expiring := enqueue(t, b.Conn, "")
	claimOne(t, b.Conn, "w", "", "1 millisecond")
	queued := enqueue(t, b.Conn, "")

	app := b.Connect(t)
	tx, err := app.Begin(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	mustExec(t, tx, "INSERT INTO orders (job_id) VALUES ($1), ($2), ($3)", running, expiring, queued)
	pgtest.WaitFor(t, 10*time.Second, "the short lease to pass", func() bool {
		return queryOne[bool](t, b.Conn, "SELECT lease_expires_at < clock_timestamp() FROM jobs WHERE id = $1", expiring)
	})

	// A call that waited for the application's locks would fail here instead of hanging.
	mustExec(t, b.Conn, "SET statement_timeout = '5s'")
	if got := claim(t, b.Conn, "w2", 10, nil, "1 hour"); len(got) != 1 || got[0].ID != queued {
		t.Errorf("jobs_claim returned %+v, want only the queued job %d", got, queued)
	}
	if got := queryOne[bool](t, b.Conn, "SELECT extended FROM jobs_heartbeat_many(ARRAY[$1::bigint], ARRAY[1])", running); !got {
		t.Errorf("jobs_heartbeat_many did not extend job %d", running)
	}
	if got := queryOne[int](t, b.Conn, "SELECT jobs_requeue_expired()"); got != 1 {
		t.Errorf("jobs_requeue_expired() = %d, want 1 (job %d)", got, expiring)
	}
	if got := queryList[int64](t, b.Conn, "SELECT * FROM jobs_complete_many(ARRAY[$1::bigint], ARRAY[1])", running); !slices.Equal(got, []int64{running}) {
		t.Errorf("jobs_complete_many returned %v, want [%d]", got, running)
	}

	if err := tx.Commit(t.Context()); err != nil {
		t.Fatal(err)
	}
	if n := queryOne[int](t, b.Conn, "SELECT count(*) FROM orders"); n != 3 {
		t.Fatalf("%d orders committed, want 3", n)
	}
}
