package sqltest

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// listener is a session LISTENing on jobs_ready.
type listener struct {
	conn *pgx.Conn
}

func listen(t *testing.T, b *testBundle) *listener {
	t.Helper()
	l := &listener{conn: b.Connect(t)}
	mustExec(t, l.conn, "LISTEN jobs_ready")
	return l
}

// drain returns the payloads delivered since the last drain. To know that nothing more is
// on its way without waiting for a timeout, it commits an enqueue into queue "sentinel"
// from b.Conn and reads up to that notification: PostgreSQL delivers notifications in
// commit order, so anything committed earlier arrives before it.
func (l *listener) drain(t *testing.T, b *testBundle) []string {
	t.Helper()
	enqueue(t, b.Conn, "queue => 'sentinel'")
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	var payloads []string
	for {
		n, err := l.conn.WaitForNotification(ctx)
		if err != nil {
			t.Fatalf("waiting for notifications (got %v so far): %v", payloads, err)
		}
		if n.Channel != "jobs_ready" {
			t.Fatalf("notification on channel %q", n.Channel)
		}
		if n.Payload == "sentinel" {
			return payloads
		}
		payloads = append(payloads, n.Payload)
	}
}

func requirePayloads(t *testing.T, got []string, want ...string) {
	t.Helper()
	got = slices.Sorted(slices.Values(got))
	want = slices.Sorted(slices.Values(want))
	if !slices.Equal(got, want) {
		t.Fatalf("notifications %q, want %q", got, want)
	}
}

func TestNotify(t *testing.T) {
	t.Parallel()

	t.Run("CommittedEnqueueNotifiesQueueAtCommit", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		l := listen(t, b)

		enqueue(t, b.Connect(t), "queue => 'q'")
		requirePayloads(t, l.drain(t, b), "q")

		// Inside an open transaction nothing is sent yet.
		tx, err := b.Connect(t).Begin(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		enqueue(t, tx, "queue => 'q2'")
		requirePayloads(t, l.drain(t, b))
		if err := tx.Commit(t.Context()); err != nil {
			t.Fatal(err)
		}
		requirePayloads(t, l.drain(t, b), "q2")
	})

	t.Run("RolledBackEnqueueIsSilent", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		l := listen(t, b)
		tx, err := b.Connect(t).Begin(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		enqueue(t, tx, "queue => 'q'")
		mustExec(t, tx, "SELECT jobs_enqueue_many(ARRAY['a', 'b'], queues => ARRAY['q', 'r'])")
		if err := tx.Rollback(t.Context()); err != nil {
			t.Fatal(err)
		}
		requirePayloads(t, l.drain(t, b))
	})

	t.Run("NotifyFalseIsSilent", func(t *testing.T) {
		// notify => false sends nothing, for one job and for many; the default (and an
		// explicit true) sends one notification per queue; jobs_notify sends one.
		t.Parallel()
		b := setup(t)
		l := listen(t, b)
		enqueue(t, b.Conn, "queue => 'q', notify => false")
		mustExec(t, b.Conn, "SELECT jobs_enqueue_many(ARRAY['a', 'b'], queues => ARRAY['q', 'r'], notify => false)")
		requirePayloads(t, l.drain(t, b))
		if n := queryOne[int64](t, b.Conn, "SELECT count(*) FROM jobs WHERE queue IN ('q', 'r') AND state = 'queued'"); n != 3 {
			t.Fatalf("%d jobs queued, want 3: notify => false must still enqueue", n)
		}

		enqueue(t, b.Conn, "queue => 'q'")
		requirePayloads(t, l.drain(t, b), "q")
		enqueue(t, b.Conn, "queue => 'q', notify => true")
		requirePayloads(t, l.drain(t, b), "q")
		mustExec(t, b.Conn, "SELECT jobs_enqueue_many(ARRAY['a', 'b', 'c'], queues => ARRAY['q', 'r', 'q'])")
		requirePayloads(t, l.drain(t, b), "q", "r")

		mustExec(t, b.Conn, "SELECT jobs_notify('q')")
		requirePayloads(t, l.drain(t, b), "q")
		// jobs_notify inside a transaction that rolls back wakes no one.
		tx, err := b.Connect(t).Begin(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		mustExec(t, tx, "SELECT jobs_notify('q')")
		if err := tx.Rollback(t.Context()); err != nil {
			t.Fatal(err)
		}
		requirePayloads(t, l.drain(t, b))
	})

	t.Run("EnqueueManyNotifiesOncePerQueue", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		l := listen(t, b)
		tx, err := b.Connect(t).Begin(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		n := queryOne[int64](t, tx, `SELECT count(*) FROM jobs_enqueue_many(
			kinds  => array_fill('k'::text, ARRAY[1000]),
			queues => ARRAY(SELECT CASE WHEN i % 2 = 0 THEN 'a' ELSE 'b' END FROM generate_series(1, 1000) i))`)
		if n != 1000 {
			t.Fatalf("enqueued %d jobs, want 1000", n)
		}
		if err := tx.Commit(t.Context()); err != nil {
			t.Fatal(err)
		}
		requirePayloads(t, l.drain(t, b), "a", "b")
	})

	t.Run("EnqueueManyNotifiesNewReadyJobsOnly", func(t *testing.T) {
		// Elements that got an existing live job through their unique key, and jobs not
		// yet due, wake nobody; a queue that got a new ready job is notified once.
		t.Parallel()
		b := setup(t)
		l := listen(t, b)
		held := enqueue(t, b.Conn, "queue => 'q', unique_key => 'x'")
		requirePayloads(t, l.drain(t, b), "q")
		for _, tc := range []struct {
			name, sql string
			want      []string
		}{
			{"AllDeduplicated", "SELECT * FROM jobs_enqueue_many(ARRAY['a', 'b'], queues => ARRAY['q', 'q'], unique_keys => ARRAY['x', 'x'])", nil},
			{"NotDue", "SELECT * FROM jobs_enqueue_many(ARRAY['a'], queues => ARRAY['later'], run_ats => ARRAY[now() + interval '1 hour'])", nil},
			{"OneNewInAnotherQueue", "SELECT * FROM jobs_enqueue_many(ARRAY['a', 'b'], queues => ARRAY['q', 'r'], unique_keys => ARRAY['x', 'x'])", []string{"r"}},
			{"NewTwiceSameKey", "SELECT * FROM jobs_enqueue_many(ARRAY['a', 'b'], queues => ARRAY['s', 's'], unique_keys => ARRAY['y', 'y'])", []string{"s"}},
		} {
			ids := queryList[int64](t, b.Conn, tc.sql)
			if tc.name == "AllDeduplicated" && !slices.Equal(ids, []int64{held, held}) {
				t.Errorf("%s: jobs_enqueue_many = %v, want the held job %d twice", tc.name, ids, held)
			}
			requirePayloads(t, l.drain(t, b), tc.want...)
		}
	})

	t.Run("FutureJobIsSilent", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		l := listen(t, b)
		enqueue(t, b.Conn, "queue => 'q', run_at => now() + interval '1 hour'")
		requirePayloads(t, l.drain(t, b))
		// In a batch, only the queue with a job ready now is woken.
		mustExec(t, b.Conn, `SELECT jobs_enqueue_many(ARRAY['k', 'k', 'k'],
			queues  => ARRAY['later', 'now', 'later'],
			run_ats => ARRAY[now() + interval '1 hour', now(), now() + interval '1 minute'])`)
		requirePayloads(t, l.drain(t, b), "now")
	})

	t.Run("JobReadyAgainNotifies", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		l := listen(t, b)
		id := enqueue(t, b.Conn, "queue => 'q', max_attempts => 1")
		requirePayloads(t, l.drain(t, b), "q")

		// Failure with a retry due at once wakes the queue; one in the future does not.
		mustExec(t, b.Conn, "UPDATE jobs SET max_attempts = 10 WHERE id = $1", id)
		j := claimOne(t, b.Conn, "w", "q", "1 minute")
		mustExec(t, b.Conn, "SELECT jobs_fail($1, $2, 'boom', retry_at => now())", id, j.Attempt)
		requirePayloads(t, l.drain(t, b), "q")
		j = claimOne(t, b.Conn, "w", "q", "1 minute")
		mustExec(t, b.Conn, "SELECT jobs_fail($1, $2, 'boom')", id, j.Attempt)
		requirePayloads(t, l.drain(t, b))

		// The same for snooze.
		mustExec(t, b.Conn, "UPDATE jobs SET run_at = now() WHERE id = $1", id)
		j = claimOne(t, b.Conn, "w", "q", "1 minute")
		mustExec(t, b.Conn, "SELECT jobs_snooze($1, $2, now())", id, j.Attempt)
		requirePayloads(t, l.drain(t, b), "q")
		j = claimOne(t, b.Conn, "w", "q", "1 minute")
		mustExec(t, b.Conn, "SELECT jobs_snooze($1, $2, now() + interval '1 hour')", id, j.Attempt)
		requirePayloads(t, l.drain(t, b))

		// A retried job, and a job taken back from an expired lease.
		mustExec(t, b.Conn, "SELECT jobs_cancel($1)", id)
		mustExec(t, b.Conn, "SELECT jobs_retry($1)", id)
		requirePayloads(t, l.drain(t, b), "q")
		claimOne(t, b.Conn, "w", "q", "50 milliseconds")
		waitLeasesExpired(t, b.Conn)
		if n := queryOne[int32](t, b.Conn, "SELECT jobs_requeue_expired()"); n != 1 {
			t.Fatalf("jobs_requeue_expired() = %d, want 1", n)
		}
		requirePayloads(t, l.drain(t, b), "q")
	})
}
