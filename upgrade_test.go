package skiplock_test

import (
	"testing"

	"github.com/skiplock/skiplock"
	"github.com/skiplock/skiplock/tests/pgtest"
)

// TestUpgradeCarriesEveryJob: a database at the last released version, holding jobs in every
// state, upgrades with every job where it was. The upgrade moves what the old partial indexes
// held into the tables that list jobs (jobs_queued, jobs_claims, jobs_unique_keys,
// jobs_dead_cancelled): jobs_metrics counts the same before and after, those tables agree with
// jobs, the ready jobs and only they are claimed, keys stay taken, the running jobs complete
// once under the attempt they were claimed with, the expired lease is taken back, a
// concurrency limit still counts the jobs that were running, and the dead jobs can be retried.
func TestUpgradeCarriesEveryJob(t *testing.T) {
	t.Parallel()
	releases := readReleases(t)
	b := setup(t)
	migrate(t, b.conn, &skiplock.MigrateOpts{TargetVersion: int32(releases[len(releases)-1].schema)})
	one := func(sql string, args ...any) int64 {
		t.Helper()
		return pgtest.QueryOne[int64](t, b.conn, sql, args...)
	}
	ids := func(sql string, args ...any) []int64 {
		t.Helper()
		rows, err := b.conn.Query(t.Context(), sql, args...)
		if err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
		var out []int64
		for rows.Next() {
			var id int64
			if err := rows.Scan(&id); err != nil {
				t.Fatal(err)
			}
			out = append(out, id)
		}
		if err := rows.Err(); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
		return out
	}

	// Queue a: three ready jobs, one of them keyed, and two scheduled ones.
	ready := []int64{
		one("SELECT jobs_enqueue('k', queue => 'a')"),
		one("SELECT jobs_enqueue('k', queue => 'a', unique_key => 'u1')"),
		one("SELECT jobs_enqueue('k', queue => 'a', concurrency_key => 'c1')"),
	}
	one("SELECT jobs_enqueue('k', queue => 'a', run_at => now() + interval '1 hour')")
	one("SELECT jobs_enqueue('k', queue => 'a', run_at => now() + interval '1 hour')")
	// Queue lim, limited to 2 running: two running, one waiting.
	pgtest.MustExec(t, b.conn, "SELECT jobs_set_concurrency('lim', 2)")
	for range 3 {
		one("SELECT jobs_enqueue('k', queue => 'lim')")
	}
	limRunning := ids("SELECT id FROM jobs_claim('w', 2, '{lim}', '1 hour')")
	// Queue b: three running, one keyed; one of them with an expired lease.
	one("SELECT jobs_enqueue('k', queue => 'b', unique_key => 'u2')")
	one("SELECT jobs_enqueue('k', queue => 'b')")
	one("SELECT jobs_enqueue('k', queue => 'b')")
	bRunning := ids("SELECT id FROM jobs_claim('w', 3, '{b}', '1 hour') ORDER BY id")
	pgtest.MustExec(t, b.conn, "UPDATE jobs SET lease_expires_at = now() - interval '1 second' WHERE id = $1", bRunning[2])
	// Queue c: two dead, one cancelled, one done.
	for range 2 {
		id := one("SELECT jobs_enqueue('k', queue => 'c', max_attempts => 1)")
		one("SELECT count(*) FROM jobs_claim('w', 1, '{c}')")
		pgtest.MustExec(t, b.conn, "SELECT jobs_fail($1, 1, 'boom')", id)
	}
	pgtest.MustExec(t, b.conn, "SELECT jobs_cancel(jobs_enqueue('k', queue => 'c'))")
	done := one("SELECT jobs_enqueue('k', queue => 'c')")
	one("SELECT count(*) FROM jobs_claim('w', 1, '{c}')")
	pgtest.MustExec(t, b.conn, "SELECT jobs_complete($1, 1)", done)

	const counts = `SELECT string_agg(format('%s: %s ready, %s scheduled, %s running (%s expired), %s dead, %s cancelled',
	                                         queue, ready, scheduled, running, running_expired, dead, cancelled), '; ' ORDER BY queue)
	                FROM jobs_metrics() WHERE queue IS NOT NULL`
	before := pgtest.QueryOne[string](t, b.conn, counts)

	migrate(t, b.conn, nil)

	if after := pgtest.QueryOne[string](t, b.conn, counts); after != before {
		t.Fatalf("jobs_metrics after the upgrade:\n%s\nbefore:\n%s", after, before)
	}
	if p := pgtest.StorageProblems(t, b.conn); len(p) > 0 {
		t.Fatalf("after the upgrade the tables that list jobs disagree with jobs:\n%v", p)
	}
	if id := one("SELECT jobs_enqueue('k', queue => 'a', unique_key => 'u1')"); id != ready[1] {
		t.Errorf("enqueue of queued key u1 = %d, want the queued job %d", id, ready[1])
	}
	if id := one("SELECT jobs_enqueue('k', queue => 'b', unique_key => 'u2')"); id != bRunning[0] {
		t.Errorf("enqueue of running key u2 = %d, want the running job %d", id, bRunning[0])
	}
	if n := one("SELECT count(*) FROM jobs_claim('w', 10, '{lim}')"); n != 0 {
		t.Errorf("claimed %d jobs of lim with its 2 slots taken before the upgrade, want 0", n)
	}
	if n := one("SELECT jobs_requeue_expired()"); n != 1 {
		t.Errorf("jobs_requeue_expired = %d, want the 1 job whose lease expired before the upgrade", n)
	}
	if got := ids("SELECT id FROM jobs_claim('w', 10, '{a}') ORDER BY id"); len(got) != 3 ||
		got[0] != ready[0] || got[1] != ready[1] || got[2] != ready[2] {
		t.Errorf("claimed %v of a, want its ready jobs %v", got, ready)
	}
	for _, id := range append(limRunning, bRunning[:2]...) {
		if !pgtest.QueryOne[bool](t, b.conn, "SELECT jobs_complete($1, 1)", id) {
			t.Errorf("job %d, running before the upgrade, could not be completed", id)
		}
		if pgtest.QueryOne[bool](t, b.conn, "SELECT jobs_complete($1, 1)", id) {
			t.Errorf("job %d was completed twice", id)
		}
	}
	if pgtest.QueryOne[bool](t, b.conn, "SELECT jobs_complete($1, 1)", bRunning[2]) {
		t.Errorf("the expired job %d was completed by its old holder", bRunning[2])
	}
	if got := ids("SELECT attempt FROM jobs_claim('w', 10, '{b}')"); len(got) != 1 || got[0] != 2 {
		t.Errorf("claimed attempts %v of b, want the requeued job's attempt 2", got)
	}
	if n := one("SELECT count(*) FROM jobs_claim('w', 10, '{lim}')"); n != 1 {
		t.Errorf("claimed %d jobs of lim after its running jobs completed, want the 1 waiting", n)
	}
	if n := one("SELECT jobs_retry_many()"); n != 2 {
		t.Errorf("jobs_retry_many() = %d, want the 2 dead jobs", n)
	}
	if p := pgtest.StorageProblems(t, b.conn); len(p) > 0 {
		t.Fatalf("the tables that list jobs disagree with jobs:\n%v", p)
	}
}
