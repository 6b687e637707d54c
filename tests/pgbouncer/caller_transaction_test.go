package pgbouncer_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/skiplock/skiplock/driver"
	"github.com/skiplock/skiplock/tests/pgtest"
)

// A caller transaction through PgBouncer keeps its server connection to the end: the job
// enqueued in it and the caller's own write commit or roll back together, and the
// notification is sent at commit only.
func TestCallerTransaction(t *testing.T) {
	skipIfShort(t)
	t.Parallel()
	b := setup(t)
	pool := b.pooledPool(t, "exec", 10)
	ctx := t.Context()
	mustExec(t, b.direct, "CREATE TABLE accounts (email text PRIMARY KEY)")
	mustExec(t, b.direct, "GRANT ALL ON accounts TO PUBLIC")

	listener := pgtest.NewConn(t, b.directURL)
	if _, err := listener.Exec(ctx, "LISTEN jobs_ready"); err != nil {
		t.Fatal(err)
	}
	for _, commit := range []bool{false, true} {
		tx, err := pool.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tx.Exec(ctx, "INSERT INTO accounts (email) VALUES ($1)", fmt.Sprintf("a%v@example.com", commit)); err != nil {
			t.Fatal(err)
		}
		id, err := driver.Enqueue(ctx, tx, "welcome", map[string]bool{"commit": commit}, &driver.EnqueueOpts{Queue: "mail"})
		if err != nil {
			t.Fatal(err)
		}
		// Other clients keep PgBouncer's other server connections busy meanwhile.
		for range 20 {
			if _, err := driver.Enqueue(ctx, pool, "other", nil, &driver.EnqueueOpts{Queue: "other"}); err != nil {
				t.Fatal(err)
			}
		}
		if commit {
			err = tx.Commit(ctx)
		} else {
			err = tx.Rollback(ctx)
		}
		if err != nil {
			t.Fatal(err)
		}
		jobs := queryInt(t, b.direct, "SELECT count(*) FROM jobs WHERE id = $1", id)
		accounts := queryInt(t, b.direct, "SELECT count(*) FROM accounts WHERE email = $1", fmt.Sprintf("a%v@example.com", commit))
		if want := map[bool]int{false: 0, true: 1}[commit]; jobs != want || accounts != want {
			t.Errorf("commit=%v: %d jobs and %d accounts, want %d of each", commit, jobs, accounts, want)
		}
	}
	// The notifications seen: "other" at each autocommit enqueue, "mail" once, for the
	// committed transaction.
	mail := 0
	for {
		wctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
		note, err := listener.WaitForNotification(wctx)
		cancel()
		if errors.Is(err, context.DeadlineExceeded) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if note.Payload == "mail" {
			mail++
		}
	}
	if mail != 1 {
		t.Errorf("%d notifications for queue mail, want 1 (the committed transaction's)", mail)
	}
}
