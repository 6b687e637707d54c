package security_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/skiplock/skiplock/tests/pgtest"
)

// decoys are what a caller plants to take over SECURITY DEFINER code that resolves names
// through the caller's search_path: look-alikes of the tables, functions and operators
// skiplock's functions use, each recording in evil.hijack_log that it ran (with the owner's
// rights, had the attack worked).
const decoys = `
CREATE TABLE evil.hijack_log (what text NOT NULL);

CREATE FUNCTION evil.now() RETURNS timestamptz LANGUAGE plpgsql SET search_path = pg_catalog AS $$
BEGIN INSERT INTO evil.hijack_log VALUES ('now'); RETURN '2000-01-01 00:00:00+00'; END $$;

CREATE FUNCTION evil.random() RETURNS double precision LANGUAGE plpgsql SET search_path = pg_catalog AS $$
BEGIN INSERT INTO evil.hijack_log VALUES ('random'); RETURN 0; END $$;

CREATE FUNCTION evil.pg_notify(text, text) RETURNS void LANGUAGE plpgsql SET search_path = pg_catalog AS $$
BEGIN INSERT INTO evil.hijack_log VALUES ('pg_notify'); END $$;

CREATE FUNCTION evil.jobs_backoff(integer) RETURNS interval LANGUAGE plpgsql SET search_path = pg_catalog AS $$
BEGIN INSERT INTO evil.hijack_log VALUES ('jobs_backoff'); RETURN '1000 days'; END $$;

CREATE FUNCTION evil._jobs_invalid(text, text, text) RETURNS void LANGUAGE plpgsql SET search_path = pg_catalog AS $$
BEGIN INSERT INTO evil.hijack_log VALUES ('_jobs_invalid'); END $$;

-- Equality that always holds: it would cancel every job, or complete another worker's.
CREATE FUNCTION evil.eq_bigint(bigint, bigint) RETURNS boolean LANGUAGE plpgsql SET search_path = pg_catalog AS $$
BEGIN INSERT INTO evil.hijack_log VALUES ('= bigint'); RETURN true; END $$;
CREATE OPERATOR evil.= (LEFTARG = bigint, RIGHTARG = bigint, FUNCTION = evil.eq_bigint);

CREATE FUNCTION evil.eq_integer(integer, integer) RETURNS boolean LANGUAGE plpgsql SET search_path = pg_catalog AS $$
BEGIN INSERT INTO evil.hijack_log VALUES ('= integer'); RETURN true; END $$;
CREATE OPERATOR evil.= (LEFTARG = integer, RIGHTARG = integer, FUNCTION = evil.eq_integer);

CREATE FUNCTION evil.eq_text(text, text) RETURNS boolean LANGUAGE plpgsql SET search_path = pg_catalog AS $$
BEGIN INSERT INTO evil.hijack_log VALUES ('= text'); RETURN true; END $$;
CREATE OPERATOR evil.= (LEFTARG = text, RIGHTARG = text, FUNCTION = evil.eq_text);

-- Temporary relations come first on a search_path that does not name pg_temp.
CREATE TEMP TABLE jobs_settings (singleton boolean, backoff_base interval, backoff_cap interval, backoff_jitter real);
INSERT INTO jobs_settings VALUES (true, '1000 days', '1000 days', 0);
`

// unpinnedProbe is the control: a SECURITY DEFINER function like skiplock's but without a
// pinned search_path. The decoys must take it over, or the test proves nothing.
const unpinnedProbe = `
CREATE FUNCTION public.unpinned_probe()
RETURNS TABLE (now_ts timestamptz, base interval, eq boolean, jobs_rows bigint)
LANGUAGE plpgsql
SECURITY DEFINER
AS $$
BEGIN
    PERFORM pg_notify('probe', 'x');
    RETURN QUERY SELECT now(), (SELECT s.backoff_base FROM jobs_settings s), 1::bigint = 2::bigint, (SELECT count(*) FROM jobs);
END;
$$;
`

// TestSearchPathHijack plays a caller who may call every skiplock function and puts a schema
// of its own, full of decoys, first on its search_path (pg_catalog after it, so even built-ins
// resolve to the decoys). skiplock's functions pin their search_path to the install schema,
// so they must find the real objects: results stay right and no decoy ever runs.
func TestSearchPathHijack(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := t.Context()
	attackerURL := newLogin(t, b, "app_attacker", "jobs_producer", "jobs_worker", "jobs_admin")
	attacker := scalar[string](t, pgtest.NewConn(t, attackerURL), "SELECT current_user")

	exec(t, b.super, "CREATE SCHEMA evil AUTHORIZATION "+pgx.Identifier{attacker}.Sanitize())
	// A jobs table look-alike, for functions that would write the attacker's table instead.
	exec(t, b.super, "CREATE TABLE evil.jobs (LIKE public.jobs INCLUDING DEFAULTS INCLUDING IDENTITY INCLUDING CONSTRAINTS)")
	exec(t, b.super, "ALTER TABLE evil.jobs OWNER TO "+pgx.Identifier{attacker}.Sanitize())
	exec(t, b.super, unpinnedProbe)
	existing := enqueue(t, b, "existing") // so that counting evil.jobs (empty) is distinguishable

	conn := pgtest.NewConn(t, attackerURL)
	exec(t, conn, "SET search_path = evil, pg_catalog, public")
	exec(t, conn, decoys)

	t.Run("DecoysTakeOverUnpinnedCode", func(t *testing.T) {
		var nowTS time.Time
		var base time.Duration
		var eq bool
		var jobsRows int64
		if err := conn.QueryRow(ctx, "SELECT * FROM unpinned_probe()").Scan(&nowTS, &base, &eq, &jobsRows); err != nil {
			t.Fatal(err)
		}
		if nowTS.Year() != 2000 || base != 1000*24*time.Hour || !eq || jobsRows != 0 {
			t.Errorf("unpinned probe = (%v, %v, %v, %d), want the decoys' (2000-01-01, 1000 days, true, 0)", nowTS, base, eq, jobsRows)
		}
		got := scalar[[]string](t, b.super, "SELECT coalesce(array_agg(DISTINCT what ORDER BY what), '{}') FROM evil.hijack_log")
		want := []string{"= bigint", "now", "pg_notify"}
		if !slices.Equal(got, want) {
			t.Errorf("decoys run by the unpinned probe = %v, want %v", got, want)
		}
		exec(t, b.super, "TRUNCATE evil.hijack_log")
	})
	if t.Failed() {
		t.FailNow()
	}

	t.Run("SkiplockFunctionsUseTheRealObjects", func(t *testing.T) {
		listener := pgtest.NewConn(t, b.url)
		exec(t, listener, "LISTEN jobs_ready")

		before := scalar[time.Time](t, b.super, "SELECT clock_timestamp()")
		a := scalar[int64](t, conn, "SELECT jobs_enqueue('hijack', queue => 'q1')")
		c := scalar[int64](t, conn, "SELECT jobs_enqueue('hijack', queue => 'q1')")
		if n := scalar[int](t, conn, "SELECT count(*) FROM jobs_enqueue_many(ARRAY['m1', 'm2'], queues => ARRAY['q2', 'q2'])"); n != 2 {
			t.Errorf("jobs_enqueue_many returned %d ids, want 2", n)
		}
		u1 := scalar[int64](t, conn, "SELECT jobs_enqueue('u', queue => 'q3', unique_key => 'k1')")
		u2 := scalar[int64](t, conn, "SELECT jobs_enqueue('u', queue => 'q3', unique_key => 'k2')")
		if u1 == u2 {
			t.Errorf("different unique keys got the same job %d", u1)
		}
		// A decoy _jobs_invalid would swallow the error.
		if code := sqlState(t, conn, "SELECT jobs_enqueue('')"); code != "22023" {
			t.Errorf("jobs_enqueue(''): SQLSTATE %q, want 22023", code)
		}

		notifyCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		n, err := listener.WaitForNotification(notifyCtx)
		if err != nil {
			t.Fatalf("no jobs_ready notification: %v", err)
		}
		if n.Payload != "q1" {
			t.Errorf("notification payload %q, want q1", n.Payload)
		}

		var runAt time.Time
		if err := conn.QueryRow(ctx, "SELECT run_at FROM jobs_get($1)", a).Scan(&runAt); err != nil {
			t.Fatal(err)
		}
		if runAt.Before(before.Add(-time.Minute)) {
			t.Errorf("run_at = %v, want about %v (the real now())", runAt, before)
		}

		var claimed int64
		var attempt int32
		if err := conn.QueryRow(ctx, "SELECT id, attempt FROM jobs_claim('w', 1, ARRAY['q1'])").Scan(&claimed, &attempt); err != nil {
			t.Fatal(err)
		}
		if claimed != a || attempt != 1 {
			t.Fatalf("claimed (%d, %d), want (%d, 1)", claimed, attempt, a)
		}
		// Fencing uses the real integer equality: a stale attempt is refused.
		if scalar[bool](t, conn, "SELECT jobs_complete($1, 2)", a) {
			t.Error("jobs_complete with a wrong attempt returned true")
		}
		if scalar[bool](t, conn, "SELECT jobs_heartbeat($1, 2)", a) {
			t.Error("jobs_heartbeat with a wrong attempt returned true")
		}
		if got := scalar[string](t, conn, "SELECT jobs_fail($1, 1, 'boom')::text", a); got != "queued" {
			t.Errorf("jobs_fail = %s, want queued", got)
		}
		// The real backoff is 0.75-1.25 s after the real now(); the decoys give 1000 days
		// after 2000-01-01.
		retryAt := scalar[time.Time](t, b.super, "SELECT run_at FROM jobs WHERE id = $1", a)
		if delay := retryAt.Sub(before); delay < 700*time.Millisecond || delay > time.Minute {
			t.Errorf("retry at %v, %v after the test's start; want about 1s, from the real jobs_settings and jobs_backoff", retryAt, delay)
		}

		// Cancelling one job leaves the others alone.
		if !scalar[bool](t, conn, "SELECT jobs_cancel($1)", c) {
			t.Error("jobs_cancel returned false")
		}
		if n := scalar[int](t, b.super, "SELECT count(*) FROM jobs WHERE state = 'cancelled'"); n != 1 {
			t.Errorf("%d jobs cancelled, want 1", n)
		}
		if !scalar[bool](t, conn, "SELECT jobs_retry($1)", c) {
			t.Error("jobs_retry returned false")
		}
		exec(t, conn, "SELECT jobs_requeue_expired()")
		exec(t, conn, "SELECT jobs_prune()")
		// The caller's own calls resolve through its search_path, so name the real ones.
		exec(t, conn, "SELECT public.jobs_backoff(2)")
		exec(t, conn, "SELECT * FROM jobs_stats()")
		exec(t, conn, "SELECT jobs_complete_many($1, ARRAY[1])", []int64{a})
		exec(t, conn, "SELECT jobs_heartbeat_many($1, ARRAY[1])", []int64{a})
		exec(t, conn, "SELECT jobs_snooze($1, 1, pg_catalog.now())", a)

		if n := scalar[int64](t, b.super, "SELECT count(*) FROM jobs"); n != 7 {
			t.Errorf("public.jobs has %d jobs, want 7", n)
		}
		if got := jobState(t, b, existing); got != "queued" {
			t.Errorf("the existing job is %s, want queued", got)
		}
		if got := scalar[[]string](t, b.super, "SELECT coalesce(array_agg(what), '{}') FROM evil.hijack_log"); len(got) != 0 {
			t.Errorf("decoys ran inside skiplock functions: %v", got)
		}
		if n := scalar[int64](t, b.super, "SELECT count(*) FROM evil.jobs"); n != 0 {
			t.Errorf("evil.jobs has %d rows, want 0", n)
		}
	})
}

// TestInstallSchemaOverloadWins shows the risk docs/security.md ("Install into a dedicated
// schema") warns of, which the pinned search_path cannot prevent: whoever may create objects
// in the install schema can plant an exact-match overload, cardinality(text[]), that wins over
// the built-in cardinality(anyarray) and runs inside jobs_claim as the functions' owner
// whenever a worker claims.
func TestInstallSchemaOverloadWins(t *testing.T) {
	t.Parallel()
	b := setup(t)
	// Planted by the database's owner here; on PostgreSQL 14 and older anyone could.
	exec(t, b.super, `
		CREATE TABLE planted_log (ran_as text NOT NULL);
		CREATE FUNCTION public.cardinality(text[]) RETURNS integer LANGUAGE sql
			AS $$ INSERT INTO public.planted_log VALUES (current_user) RETURNING 1 $$`)
	worker := pgtest.NewConn(t, newLogin(t, b, "app_worker", "jobs_worker"))
	workerName := scalar[string](t, worker, "SELECT session_user::text")
	enqueue(t, b, "q")
	exec(t, worker, "SELECT * FROM jobs_claim('w', 1, ARRAY['q'])")
	owner := scalar[string](t, b.super, "SELECT pg_get_userbyid(proowner)::text FROM pg_proc WHERE oid = 'jobs_claim'::regproc")
	ranAs := scalar[[]string](t, b.super, "SELECT coalesce(array_agg(ran_as), '{}') FROM planted_log")
	if len(ranAs) == 0 {
		t.Fatal("the planted cardinality(text[]) did not run inside jobs_claim; docs/security.md's example no longer holds")
	}
	for _, r := range ranAs {
		if r != owner || r == workerName {
			t.Errorf("the planted function ran as %s, want the owner %s (not the worker %s)", r, owner, workerName)
		}
	}
}
