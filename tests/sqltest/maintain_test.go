package sqltest

import (
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
)

// maintenance is the row jobs_maintain returns.
type maintenance struct {
	Ran                                               bool
	Requeued, PrunedDone, PrunedCancelled, PrunedDead int32
	More                                              bool
}

func maintain(t *testing.T, q querier, maxJobs int) maintenance {
	t.Helper()
	var m maintenance
	if err := q.QueryRow(t.Context(),
		"SELECT ran, requeued, pruned_done, pruned_cancelled, pruned_dead, more FROM jobs_maintain($1)", maxJobs).
		Scan(&m.Ran, &m.Requeued, &m.PrunedDone, &m.PrunedCancelled, &m.PrunedDead, &m.More); err != nil {
		t.Fatalf("jobs_maintain: %v", err)
	}
	return m
}

// insertFinished inserts n jobs in state that were created and finished age ago.
func insertFinished(t *testing.T, q querier, n int, state, queue, age string) {
	t.Helper()
	mustExec(t, q, `INSERT INTO jobs (kind, queue, state, attempts, lease_holder, created_at, finished_at)
		SELECT 'old', $3, $2::jobs_state, 1, 'w', now() - $4::interval, now() - $4::interval
		FROM generate_series(1, $1)`, n, state, queue, age)
}

func TestMaintain(t *testing.T) {
	t.Parallel()

	t.Run("RetentionDefaults", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		got := queryOne[string](t, b.Conn,
			"SELECT done_retention || ' ' || cancelled_retention || ' ' || dead_retention FROM jobs_settings")
		if got != "1 day 7 days 30 days" {
			t.Fatalf("retention defaults %q, want 1 day, 7 days, 30 days", got)
		}
	})

	t.Run("PrunesEachStatePastItsRetentionOnly", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		// In id order, as a real table: old jobs first, recent ones last.
		insertFinished(t, b.Conn, 30, "done", "q", "2 days")
		insertFinished(t, b.Conn, 5, "dead", "q", "31 days")
		insertFinished(t, b.Conn, 7, "cancelled", "q", "8 days")
		insertFinished(t, b.Conn, 4, "dead", "q", "8 days")      // kept: dead is kept 30 days
		insertFinished(t, b.Conn, 3, "cancelled", "q", "2 days") // kept
		insertFinished(t, b.Conn, 20, "done", "q", "23 hours")   // kept
		live := enqueue(t, b.Conn, "")

		m := maintain(t, b.Conn, 10000)
		if want := (maintenance{Ran: true, PrunedDone: 30, PrunedCancelled: 7, PrunedDead: 5}); m != want {
			t.Fatalf("jobs_maintain() = %+v, want %+v", m, want)
		}
		if got := queryOne[string](t, b.Conn,
			"SELECT string_agg(state || '=' || n, ' ' ORDER BY state) FROM (SELECT state, count(*) AS n FROM jobs GROUP BY state) s"); got != "queued=1 done=20 dead=4 cancelled=3" {
			t.Fatalf("jobs left: %s", got)
		}
		if getJob(t, b.Conn, live).State != "queued" {
			t.Fatal("the queued job changed")
		}
		if m := maintain(t, b.Conn, 10000); m != (maintenance{Ran: true}) {
			t.Fatalf("second round = %+v, want nothing done", m)
		}
	})

	t.Run("NullRetentionKeepsForever", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		insertFinished(t, b.Conn, 3, "done", "q", "10 years")
		insertFinished(t, b.Conn, 3, "dead", "q", "10 years")
		insertFinished(t, b.Conn, 3, "cancelled", "q", "10 years")
		mustExec(t, b.Conn, "UPDATE jobs_settings SET done_retention = NULL, dead_retention = NULL")
		m := maintain(t, b.Conn, 10000)
		if m.PrunedDone != 0 || m.PrunedDead != 0 || m.PrunedCancelled != 3 {
			t.Fatalf("jobs_maintain() = %+v, want only the 3 cancelled jobs pruned", m)
		}
	})

	t.Run("ZeroRetentionPrunesAtOnce", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		mustExec(t, b.Conn, "UPDATE jobs_settings SET done_retention = '0'")
		id := enqueue(t, b.Conn, "")
		j := claimOne(t, b.Conn, "w", "", "1 minute")
		mustExec(t, b.Conn, "SELECT jobs_complete($1, $2)", id, j.Attempt)
		// finished_at is the completing transaction's now(), before this one's.
		if m := maintain(t, b.Conn, 10000); m.PrunedDone != 1 {
			t.Fatalf("jobs_maintain() = %+v, want the done job pruned", m)
		}
	})

	t.Run("BoundedRoundSaysMore", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		insertFinished(t, b.Conn, 25, "done", "q", "2 days")
		var total int32
		rounds := 0
		for {
			m := maintain(t, b.Conn, 10)
			rounds++
			total += m.PrunedDone
			if m.PrunedDone > 10 {
				t.Fatalf("a round pruned %d jobs, more than max_jobs 10", m.PrunedDone)
			}
			if !m.More {
				break
			}
			if rounds > 10 {
				t.Fatal("more stays true")
			}
		}
		if total != 25 || rounds != 3 {
			t.Fatalf("pruned %d jobs in %d rounds, want 25 in 3", total, rounds)
		}
	})

	t.Run("RequeuesExpiredLeases", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		id := enqueue(t, b.Conn, "")
		claimOne(t, b.Conn, "w", "", "1 millisecond")
		waitLeasesExpired(t, b.Conn)
		if m := maintain(t, b.Conn, 10000); m.Requeued != 1 {
			t.Fatalf("jobs_maintain() = %+v, want 1 requeued", m)
		}
		if getJob(t, b.Conn, id).State != "queued" {
			t.Fatal("the expired job was not requeued")
		}
	})

	// A round in progress makes other callers return at once with ran = false; they
	// neither wait nor repeat its work.
	t.Run("ConcurrentCallerSkipsTheRoundInProgress", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		insertFinished(t, b.Conn, 5, "done", "q", "2 days")
		tx, err := b.Conn.Begin(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = tx.Rollback(t.Context()) }()
		if m := maintain(t, tx, 10000); !m.Ran || m.PrunedDone != 5 {
			t.Fatalf("first caller: %+v", m)
		}
		other := b.Connect(t)
		if m := maintain(t, other, 10000); m != (maintenance{}) {
			t.Fatalf("second caller during the first's round: %+v, want ran = false and nothing done", m)
		}
		if err := tx.Commit(t.Context()); err != nil {
			t.Fatal(err)
		}
		if m := maintain(t, other, 10000); !m.Ran || m.PrunedDone != 0 {
			t.Fatalf("second caller after the round: %+v, want ran and nothing left", m)
		}
	})

	// Two sessions calling jobs_maintain in a loop over a backlog: every due job is pruned
	// once, the counts add up to the backlog, and nothing else goes.
	t.Run("TwoCallersPruneEachJobOnce", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		insertFinished(t, b.Conn, 5000, "done", "q", "2 days")
		insertFinished(t, b.Conn, 100, "done", "q", "1 hour")
		conns := []*pgx.Conn{b.Connect(t), b.Connect(t)}
		var (
			wg                   sync.WaitGroup
			mu                   sync.Mutex
			pruned, ran, skipped int
		)
		for _, c := range conns {
			wg.Go(func() {
				for range 200 {
					m := maintain(t, c, 100)
					mu.Lock()
					pruned += int(m.PrunedDone)
					if m.Ran {
						ran++
					} else {
						skipped++
					}
					mu.Unlock()
					if m.Ran && !m.More {
						return
					}
				}
			})
		}
		wg.Wait()
		if pruned != 5000 {
			t.Fatalf("the callers pruned %d jobs in all, want 5000", pruned)
		}
		if n := queryOne[int64](t, b.Conn, "SELECT count(*) FROM jobs"); n != 100 {
			t.Fatalf("%d jobs left, want the 100 recent ones", n)
		}
		t.Logf("%d rounds ran, %d calls found a round in progress", ran, skipped)
	})
}
