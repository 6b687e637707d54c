package sqltest

import (
	"testing"
)

func TestInspect(t *testing.T) {
	t.Parallel()

	t.Run("TheWholeRowWithPayloadAndErrors", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		id := enqueue(t, b.Conn, `payload => '{"to": "a@example.com"}', max_attempts => 3, unique_key => 'u1'`)
		j := claimOne(t, b.Conn, "worker-1", "default", "1 hour")
		mustExec(t, b.Conn, "SELECT jobs_fail($1, $2, 'first', now())", id, j.Attempt)
		j = claimOne(t, b.Conn, "worker-2", "default", "1 hour")

		var (
			payload, errors, holder, uniqueKey string
			attempts                           int32
			leased                             bool
		)
		err := b.Conn.QueryRow(t.Context(), `
			SELECT payload::text, errors::text, lease_holder, unique_key, attempts, lease_expires_at > now()
			FROM jobs_inspect($1)`, id).Scan(&payload, &errors, &holder, &uniqueKey, &attempts, &leased)
		if err != nil {
			t.Fatal(err)
		}
		if payload != `{"to": "a@example.com"}` || holder != "worker-2" || uniqueKey != "u1" || attempts != 2 || !leased {
			t.Fatalf("jobs_inspect = payload %s holder %s key %s attempts %d leased %v", payload, holder, uniqueKey, attempts, leased)
		}
		if !containsAll(errors, `"attempt": 1`, `"error": "first"`, `"worker": "worker-1"`) {
			t.Fatalf("error history %s, want attempt 1's error by worker-1", errors)
		}
		// Every column of the table, in its order.
		if same := queryOne[bool](t, b.Conn, "SELECT (SELECT j FROM jobs j WHERE id = $1) = (SELECT i FROM jobs_inspect($1) i)", id); !same {
			t.Fatal("jobs_inspect's row differs from the table's")
		}
	})

	t.Run("UnknownIDNoRows", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		if n := queryOne[int64](t, b.Conn, "SELECT count(*) FROM jobs_inspect(42)"); n != 0 {
			t.Fatalf("jobs_inspect(42) returned %d rows, want none", n)
		}
	})
}
