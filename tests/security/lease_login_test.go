package security_test

import (
	"maps"
	"slices"
	"testing"

	"github.com/skiplock/skiplock/tests/pgtest"
)

// The fenced calls of every form, each trying attempts 1 to 5 of job $1 in one statement: the
// attack a jobs_worker login could make on another login's job, since attempts are small
// integers. Each statement returns how many of its calls acted on the job.
var settleEveryAttempt = map[string]string{
	"jobs_complete": "SELECT count(*) FILTER (WHERE jobs_complete($1, a)) FROM generate_series(1, 5) a",
	"jobs_complete_many": "SELECT count(*) FROM jobs_complete_many(array_fill($1::bigint, ARRAY[5]), " +
		"ARRAY(SELECT generate_series(1, 5)))",
	"jobs_complete_and_claim": "SELECT coalesce(cardinality(completed), 0) FROM jobs_complete_and_claim('thief', " +
		"array_fill($1::bigint, ARRAY[5]), ARRAY(SELECT generate_series(1, 5)), 0)",
	"jobs_fail":      "SELECT count(jobs_fail($1, a, 'stolen')) FROM generate_series(1, 5) a",
	"jobs_heartbeat": "SELECT count(*) FILTER (WHERE jobs_heartbeat($1, a, '100 years')) FROM generate_series(1, 5) a",
	// Not only the extended leases: a row at all would tell the caller the job is running at
	// that attempt.
	"jobs_heartbeat_many": "SELECT count(*) FROM jobs_heartbeat_many(array_fill($1::bigint, ARRAY[5]), " +
		"ARRAY(SELECT generate_series(1, 5)), '100 years')",
	"jobs_snooze": "SELECT count(*) FILTER (WHERE jobs_snooze($1, a, now() + interval '1 day')) FROM generate_series(1, 5) a",
	"jobs_cancel": "SELECT count(*) FILTER (WHERE jobs_cancel($1, a, 'stolen')) FROM generate_series(1, 5) a",
}

// jobRow is the whole row of job id as text, to see that nothing in it changed.
func jobRow(t *testing.T, b *testBundle, id int64) string {
	t.Helper()
	return scalar[string](t, b.super, "SELECT row_to_json(j)::text FROM jobs j WHERE j.id = $1", id)
}

// claimAs claims job id (the only job of queue) through q and returns its attempt.
func claimAs(t *testing.T, q querier, queue string, id int64) int32 {
	t.Helper()
	var gotID int64
	var attempt int32
	if err := q.QueryRow(t.Context(), "SELECT id, attempt FROM jobs_claim('w', 1, ARRAY[$1])", queue).Scan(&gotID, &attempt); err != nil {
		t.Fatalf("failed to claim: %v", err)
	}
	if gotID != id {
		t.Fatalf("claimed job %d, want %d", gotID, id)
	}
	return attempt
}

// TestLeaseLogin: a fenced call matches a job only when its own login took the lease, so one
// jobs_worker login cannot settle another's job by guessing its attempt; two connections of
// one login are one trust domain; an admin still cancels any job (docs/security.md, "A
// worker cannot add jobs, nor cancel other jobs").
func TestLeaseLogin(t *testing.T) {
	t.Parallel()

	t.Run("AnotherLoginCannotSettleAtAnyAttempt", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		holder := pgtest.NewConn(t, newLogin(t, b, "app_worker_a", "jobs_worker"))
		thief := pgtest.NewConn(t, newLogin(t, b, "app_worker_b", "jobs_worker"))
		// SET ROLE makes both callers jobs_worker: the lease names the login, not the role.
		exec(t, holder, "SET ROLE jobs_worker")
		exec(t, thief, "SET ROLE jobs_worker")
		id := enqueue(t, b, "work")
		// A job on its third attempt, so that the attempts tried cover the held one and those
		// on either side of it.
		exec(t, b.super, "UPDATE jobs SET attempts = 2 WHERE id = $1", id)
		attempt := claimAs(t, holder, "work", id)
		if attempt != 3 {
			t.Fatalf("claimed at attempt %d, want 3", attempt)
		}
		before := jobRow(t, b, id)

		names := slices.Sorted(maps.Keys(settleEveryAttempt))
		// Each first in a transaction rolled back, so that every function is tried on the
		// job as claimed and a failure names each that acted.
		for _, name := range names {
			tx, err := thief.Begin(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			if n := scalar[int64](t, tx, settleEveryAttempt[name], id); n != 0 {
				t.Errorf("%s from another login acted %d times on the job", name, n)
			}
			if err := tx.Rollback(t.Context()); err != nil {
				t.Fatal(err)
			}
		}
		// Then for good: the job must be exactly as claimed.
		for _, name := range names {
			exec(t, thief, settleEveryAttempt[name], id)
			if after := jobRow(t, b, id); after != before {
				t.Fatalf("%s from another login changed the job:\n before %s\n after  %s", name, before, after)
			}
		}

		if !scalar[bool](t, holder, "SELECT jobs_complete($1, $2)", id, attempt) {
			t.Fatal("the holder's jobs_complete returned false after the other login's attempts")
		}
		if got := jobState(t, b, id); got != "done" {
			t.Errorf("job is %s after the holder completed it, want done", got)
		}
	})

	t.Run("LimitedQueueClaimRecordsTheLogin", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		holder := pgtest.NewConn(t, newLogin(t, b, "app_worker_a", "jobs_worker"))
		thief := pgtest.NewConn(t, newLogin(t, b, "app_worker_b", "jobs_worker"))
		// A concurrency limit sends the claim through _jobs_claim_limited.
		exec(t, b.super, "SELECT jobs_set_concurrency('limited', 10)")
		id := enqueue(t, b, "limited")
		attempt := claimAs(t, holder, "limited", id)
		if scalar[bool](t, thief, "SELECT jobs_complete($1, $2)", id, attempt) {
			t.Error("another login completed a job claimed from a concurrency-limited queue")
		}
		if !scalar[bool](t, holder, "SELECT jobs_complete($1, $2)", id, attempt) {
			t.Error("the holder's jobs_complete returned false")
		}
	})

	t.Run("OneLoginIsOneTrustDomain", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		url := newLogin(t, b, "app_worker", "jobs_worker")
		first, second := pgtest.NewConn(t, url), pgtest.NewConn(t, url)
		id := enqueue(t, b, "work")
		attempt := claimAs(t, first, "work", id)
		if !scalar[bool](t, second, "SELECT jobs_heartbeat($1, $2)", id, attempt) {
			t.Error("jobs_heartbeat from another connection of the claiming login returned false")
		}
		if !scalar[bool](t, second, "SELECT jobs_complete($1, $2)", id, attempt) {
			t.Error("jobs_complete from another connection of the claiming login returned false")
		}
		if got := jobState(t, b, id); got != "done" {
			t.Errorf("job is %s, want done", got)
		}
	})

	t.Run("AdminCancelsAnotherLoginsJob", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		holder := pgtest.NewConn(t, newLogin(t, b, "app_worker", "jobs_worker"))
		admin := pgtest.NewConn(t, newLogin(t, b, "app_admin", "jobs_admin"))
		id := enqueue(t, b, "work")
		attempt := claimAs(t, holder, "work", id)
		if !scalar[bool](t, admin, "SELECT jobs_cancel($1)", id) {
			t.Fatal("the admin's jobs_cancel(id) returned false for a running job another login holds")
		}
		if got := jobState(t, b, id); got != "cancelled" {
			t.Errorf("job is %s after the admin's cancel, want cancelled", got)
		}
		if scalar[bool](t, holder, "SELECT jobs_complete($1, $2)", id, attempt) {
			t.Error("the holder completed a job the admin cancelled")
		}
		// The bulk action is not fenced either.
		other := enqueue(t, b, "work")
		claimAs(t, holder, "work", other)
		if n := scalar[int](t, admin, "SELECT jobs_cancel_many(ids => ARRAY[$1::bigint], states => '{running}')", other); n != 1 {
			t.Errorf("the admin's jobs_cancel_many cancelled %d running jobs of another login, want 1", n)
		}
	})

	t.Run("LeaseLeavesWithTheJob", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		login := newLogin(t, b, "app_worker", "jobs_worker")
		holder := pgtest.NewConn(t, login)
		id := enqueue(t, b, "work")
		claimAs(t, holder, "work", id)
		name := scalar[string](t, b.super, "SELECT lease_role::regrole::text FROM jobs WHERE id = $1", id)
		if want := scalar[string](t, holder, "SELECT session_user::text"); name != want {
			t.Errorf("lease_role = %s, want the claiming login %s", name, want)
		}
		if !scalar[bool](t, holder, "SELECT jobs_snooze($1, 1, now())", id) {
			t.Fatal("jobs_snooze returned false for a held job")
		}
		if scalar[bool](t, b.super, "SELECT lease_role IS NOT NULL FROM jobs WHERE id = $1", id) {
			t.Error("lease_role kept after the job left running")
		}
		// No path out of running may keep it: the table refuses a row that does.
		if code := sqlState(t, b.super, "UPDATE jobs SET lease_role = 'jobs_worker'::regrole WHERE id = $1", id); code != "23514" {
			t.Errorf("a queued job with a lease_role: SQLSTATE %q, want 23514 (check_violation)", code)
		}
	})

	t.Run("LeaseTakenBeforeTheLoginWasRecorded", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		other := pgtest.NewConn(t, newLogin(t, b, "app_worker", "jobs_worker"))
		id := enqueue(t, b, "work")
		attempt := claim(t, b, "work", id)
		// As a lease taken before the upgrade that added lease_role: any login matches.
		exec(t, b.super, "UPDATE jobs SET lease_role = NULL WHERE id = $1", id)
		if !scalar[bool](t, other, "SELECT jobs_complete($1, $2)", id, attempt) {
			t.Error("jobs_complete of a lease without a recorded login returned false")
		}
	})
}
