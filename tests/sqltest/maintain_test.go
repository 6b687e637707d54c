package sqltest

import (
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
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

// connectWithWarnings opens another session on the test's database that collects the
// messages of the WARNINGs the server sends it.
func connectWithWarnings(t *testing.T, b *testBundle) (*pgx.Conn, func() []string) {
	t.Helper()
	cfg, err := pgx.ParseConfig(b.URL)
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu       sync.Mutex
		warnings []string
	)
	cfg.OnNotice = func(_ *pgconn.PgConn, n *pgconn.Notice) {
		if n.Severity == "WARNING" {
			mu.Lock()
			defer mu.Unlock()
			warnings = append(warnings, n.Message)
		}
	}
	conn, err := pgx.ConnectConfig(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close(t.Context()) })
	return conn, func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), warnings...)
	}
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
		// A done row from before done_retention became 0 (with 0, completion itself deletes
		// the job: complete_deletes_test.go); finished_at is an earlier transaction's now().
		insertFinished(t, b.Conn, 1, "done", "q", "1 millisecond")
		mustExec(t, b.Conn, "UPDATE jobs_settings SET done_retention = '0'")
		if m := maintain(t, b.Conn, 10000); m.PrunedDone != 1 {
			t.Fatalf("jobs_maintain() = %+v, want the done job pruned", m)
		}
	})

	// With done_retention 0 completions delete, and every live job is older than the cutoff:
	// the done pass must look at the lowest max_jobs ids, not walk the whole backlog each
	// round (counted in the round's own transaction: pg_stat_xact_user_tables).
	t.Run("ZeroRetentionWalksOnlyTheLowestIDs", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		insertFinished(t, b.Conn, 50, "done", "q", "1 hour")
		mustExec(t, b.Conn, "SELECT jobs_enqueue_many(array_fill('k'::text, ARRAY[50000]))")
		insertFinished(t, b.Conn, 1, "done", "q", "1 hour") // behind the backlog: a later round
		mustExec(t, b.Conn, "UPDATE jobs_settings SET done_retention = '0'")
		mustExec(t, b.Conn, "ANALYZE jobs")
		tx, err := b.Conn.Begin(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback(t.Context())
		m := maintain(t, tx, 100)
		fetched := queryOne[int64](t, tx, "SELECT coalesce(idx_tup_fetch, 0) + seq_tup_read FROM pg_stat_xact_user_tables WHERE relname = 'jobs'")
		if m.PrunedDone != 50 {
			t.Fatalf("jobs_maintain(100) = %+v, want the 50 old done jobs pruned", m)
		}
		if fetched > 1000 {
			t.Fatalf("jobs_maintain(100) read %d rows of jobs, want a window of about 100 (not the 50,000 queued jobs)", fetched)
		}
	})

	// The bounded window must not stay on the lowest ids forever: done rows behind more than
	// max_jobs jobs that are kept (dead ones with dead_retention NULL, here; long-delayed
	// queued ones likewise) are pruned too, within a few rounds. Such rows come from before
	// the switch to 0, and from completions that ran concurrently with it. Regression: every
	// round looked at the same lowest max_jobs ids, all dead, and the done rows stayed.
	t.Run("ZeroRetentionReachesDoneRowsBehindKeptJobs", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		mustExec(t, b.Conn, "UPDATE jobs_settings SET dead_retention = NULL")
		insertFinished(t, b.Conn, 30, "dead", "q", "1 hour")
		insertFinished(t, b.Conn, 3, "done", "q", "1 hour")
		insertFinished(t, b.Conn, 30, "dead", "q", "1 hour")
		insertFinished(t, b.Conn, 2, "done", "q", "1 hour")
		mustExec(t, b.Conn, "UPDATE jobs_settings SET done_retention = '0'")
		var pruned int32
		for range 60 {
			m := maintain(t, b.Conn, 10)
			if m.PrunedDone > 10 {
				t.Fatalf("a round pruned %d done jobs, more than max_jobs 10", m.PrunedDone)
			}
			pruned += m.PrunedDone
			if pruned == 5 {
				break
			}
		}
		if pruned != 5 {
			t.Fatalf("60 rounds of jobs_maintain(10) pruned %d of the 5 done jobs behind 30 kept dead ones", pruned)
		}
		if n := queryOne[int](t, b.Conn, "SELECT count(*) FROM jobs WHERE state = 'dead'"); n != 60 {
			t.Fatalf("%d dead jobs left, want all 60 kept", n)
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

	// An application row referencing a finished job through a foreign key without ON DELETE
	// (the outbox pattern) makes deleting that job fail with 23503. Before, that rolled back
	// the whole round, the requeue included, and as the same job came first in every batch,
	// expired leases were never taken back again. Now the referenced jobs stay, with a
	// WARNING, and every round still requeues and prunes the jobs around them.
	t.Run("ReferencedJobsNeitherStopTheRequeueNorThePruning", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		mustExec(t, b.Conn, "CREATE TABLE orders (id bigserial PRIMARY KEY, job_id bigint NOT NULL REFERENCES jobs (id))")
		insertFinished(t, b.Conn, 25, "done", "q", "2 days")
		insertFinished(t, b.Conn, 3, "dead", "q", "31 days")
		done := queryList[int64](t, b.Conn, "SELECT id FROM jobs WHERE state = 'done' ORDER BY id")
		dead := queryList[int64](t, b.Conn, "SELECT id FROM jobs WHERE state = 'dead' ORDER BY id")
		// The first job of the first two batches of 10, and one dead job.
		referenced := []int64{done[0], done[12], dead[1]}
		for _, id := range referenced {
			mustExec(t, b.Conn, "INSERT INTO orders (job_id) VALUES ($1)", id)
		}
		conn, warnings := connectWithWarnings(t, b)

		var got []maintenance
		for round := range 5 {
			expiring := enqueue(t, b.Conn, "")
			claimOne(t, b.Conn, "w", "", "1 millisecond")
			waitLeasesExpired(t, b.Conn)
			m := maintain(t, conn, 10)
			got = append(got, m)
			if m.Requeued != 1 || getJob(t, b.Conn, expiring).State != "queued" {
				t.Fatalf("round %d: %+v, want the expired lease of job %d taken back", round, m, expiring)
			}
			mustExec(t, b.Conn, "SELECT jobs_cancel($1)", expiring) // out of the next rounds' claims
			mustExec(t, b.Conn, "UPDATE jobs SET finished_at = now() - interval '1 hour' WHERE id = $1", expiring)
			if !m.More {
				break
			}
		}
		want := []maintenance{
			{Ran: true, Requeued: 1, PrunedDone: 9, PrunedDead: 2, More: true}, // batch ids 1-10
			{Ran: true, Requeued: 1, PrunedDone: 8, More: true},                // 1, 11-19
			{Ran: true, Requeued: 1, PrunedDone: 6},                            // 1, 13, 20-25
		}
		if len(got) != len(want) {
			t.Fatalf("rounds: %+v, want %+v", got, want)
		}
		for i := range want {
			if got[i] != want[i] {
				t.Errorf("round %d: %+v, want %+v", i, got[i], want[i])
			}
		}
		left := queryList[int64](t, b.Conn, "SELECT id FROM jobs WHERE state IN ('done', 'dead') ORDER BY id")
		if len(left) != 3 || left[0] != referenced[0] || left[1] != referenced[1] || left[2] != referenced[2] {
			t.Errorf("done and dead jobs left: %v, want only the referenced %v", left, referenced)
		}
		w := warnings()
		if len(w) != 3 || !strings.Contains(w[0], "2 jobs past their retention were left in place") {
			t.Errorf("warnings %q, want one per round, the first saying 2 jobs were left in place", w)
		}
	})

	// Whatever else makes a prune fail (here a trigger) does not undo the requeue nor the
	// other states' prunes either; it becomes a WARNING.
	t.Run("FailingPruneDoesNotStopTheRequeue", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		insertFinished(t, b.Conn, 2, "done", "q", "2 days")
		insertFinished(t, b.Conn, 3, "cancelled", "q", "8 days")
		mustExec(t, b.Conn, `CREATE FUNCTION refuse_done_delete() RETURNS trigger LANGUAGE plpgsql AS $$
			BEGIN
				IF OLD.state = 'done' THEN
					RAISE EXCEPTION 'done jobs are kept' USING ERRCODE = 'P0001';
				END IF;
				RETURN OLD;
			END $$`)
		mustExec(t, b.Conn, "CREATE TRIGGER refuse_done_delete BEFORE DELETE ON jobs FOR EACH ROW EXECUTE FUNCTION refuse_done_delete()")
		id := enqueue(t, b.Conn, "")
		claimOne(t, b.Conn, "w", "", "1 millisecond")
		waitLeasesExpired(t, b.Conn)
		conn, warnings := connectWithWarnings(t, b)
		if m := maintain(t, conn, 10000); m != (maintenance{Ran: true, Requeued: 1, PrunedCancelled: 3}) {
			t.Fatalf("jobs_maintain() = %+v, want the lease taken back and the cancelled jobs pruned", m)
		}
		if getJob(t, b.Conn, id).State != "queued" {
			t.Fatal("the expired job was not requeued")
		}
		if w := warnings(); len(w) != 1 || !strings.Contains(w[0], "pruning done jobs failed (SQLSTATE P0001): done jobs are kept") {
			t.Errorf("warnings %q, want one about the done prune", w)
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
		// Each caller goes on until one of its rounds says nothing more is due. A call that
		// finds the other's round in progress returns at once; it waits a moment and calls
		// again, and only a deadline, not a count of calls, bounds the loop (on a loaded
		// machine most calls may find a round in progress).
		deadline := time.Now().Add(time.Minute)
		for _, c := range conns {
			wg.Go(func() {
				for time.Now().Before(deadline) {
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
					if !m.Ran {
						time.Sleep(time.Millisecond)
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
