package security_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/skiplock/skiplock/tests/pgtest"
)

func TestProducer(t *testing.T) {
	t.Parallel()

	t.Run("EnqueuesAndReadsProgress", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		producer := pgtest.NewPool(t, newLogin(t, b, "app_producer", "jobs_producer"))

		id := scalar[int64](t, producer, "SELECT jobs_enqueue('email', '{\"to\": \"a@example.com\"}', 'mail')")
		ids := scalar[[]int64](t, producer, "SELECT array_agg(i) FROM jobs_enqueue_many(ARRAY['a', 'b'], queues => ARRAY['mail', 'mail']) AS i")
		if len(ids) != 2 {
			t.Fatalf("jobs_enqueue_many ids = %v, want 2", ids)
		}
		if got := scalar[string](t, producer, "SELECT state::text FROM jobs_get($1)", id); got != "queued" {
			t.Errorf("state = %q, want queued", got)
		}

		// A worker fails the job; the producer sees the outcome through jobs_get.
		attempt := claim(t, b, "mail", id)
		exec(t, b.super, "SELECT jobs_fail($1, $2, 'smtp timeout')", id, attempt)
		var state, lastError string
		var attempts int32
		if err := producer.QueryRow(t.Context(), "SELECT state::text, attempts, last_error FROM jobs_get($1)", id).Scan(&state, &attempts, &lastError); err != nil {
			t.Fatal(err)
		}
		if state != "queued" || attempts != 1 || lastError != "smtp timeout" {
			t.Errorf("jobs_get = (%s, %d, %q), want (queued, 1, \"smtp timeout\")", state, attempts, lastError)
		}

		// jobs_get shows progress, never the payload or where the job runs.
		rows, err := producer.Query(t.Context(), "SELECT * FROM jobs_get($1)", id)
		if err != nil {
			t.Fatal(err)
		}
		var cols []string
		for _, f := range rows.FieldDescriptions() {
			cols = append(cols, f.Name)
		}
		rows.Close()
		want := []string{"state", "attempts", "max_attempts", "run_at", "last_error", "created_at", "finished_at", "meta",
			"result", "progress", "workflow_id", "depends_on"}
		if !slices.Equal(cols, want) {
			t.Errorf("jobs_get columns = %v, want %v", cols, want)
		}
		if n := scalar[int](t, producer, "SELECT count(*) FROM jobs_get(-1)"); n != 0 {
			t.Errorf("jobs_get(unknown) returned %d rows, want 0", n)
		}
		if code := sqlState(t, producer, "SELECT * FROM jobs_get(NULL)"); code != "22023" {
			t.Errorf("jobs_get(NULL): SQLSTATE %q, want 22023", code)
		}
	})

	t.Run("CannotWorkOrAdministerJobs", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		producer := pgtest.NewPool(t, newLogin(t, b, "app_producer", "jobs_producer"))
		queued := scalar[int64](t, producer, "SELECT jobs_enqueue('a', queue => 'q')")
		running := scalar[int64](t, producer, "SELECT jobs_enqueue('b', queue => 'r')")
		attempt := claim(t, b, "r", running)

		mustDeny(t, producer,
			"SELECT * FROM jobs_claim('thief', 10)",
			fmt.Sprintf("SELECT jobs_complete(%d, %d)", running, attempt),
			fmt.Sprintf("SELECT jobs_fail(%d, %d, 'x')", running, attempt),
			fmt.Sprintf("SELECT jobs_heartbeat(%d, %d)", running, attempt),
			fmt.Sprintf("SELECT jobs_snooze(%d, %d, now())", running, attempt),
			fmt.Sprintf("SELECT jobs_cancel(%d)", queued),
			"SELECT jobs_prune('0 seconds', true)",
			fmt.Sprintf("SELECT * FROM jobs WHERE id = %d", queued),
			fmt.Sprintf("UPDATE jobs SET state = 'done' WHERE id = %d", queued),
			fmt.Sprintf("DELETE FROM jobs WHERE id = %d", queued),
			"SELECT * FROM jobs_settings",
			"UPDATE jobs_settings SET backoff_base = '1 day'",
		)
		if got := jobState(t, b, queued); got != "queued" {
			t.Errorf("queued job is %s after the producer's denied calls", got)
		}
		if got := jobState(t, b, running); got != "running" {
			t.Errorf("running job is %s after the producer's denied calls", got)
		}
	})

	t.Run("CannotReachOtherTablesThroughFunctions", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		exec(t, b.super, "CREATE TABLE secret (v text); INSERT INTO secret VALUES ('s3cr3t')")
		producer := pgtest.NewPool(t, newLogin(t, b, "app_producer", "jobs_producer"))

		// The functions run static SQL: hostile arguments are data, never code.
		hostile := []string{
			"x'); DELETE FROM secret; --",
			"x'; UPDATE jobs_settings SET backoff_base = '1 day'; --",
			`x"; DROP TABLE secret; --`,
			"x$$; DELETE FROM secret; $$",
		}
		for _, s := range hostile {
			id := scalar[int64](t, producer,
				"SELECT jobs_enqueue($1, jsonb_build_object('k', $1::text), $1, unique_key => $1)", s)
			var kind, queue, key string
			if err := b.super.QueryRow(t.Context(), "SELECT kind, queue, unique_key FROM jobs WHERE id = $1", id).Scan(&kind, &queue, &key); err != nil {
				t.Fatal(err)
			}
			if kind != s || queue != s || key != s {
				t.Errorf("stored (%q, %q, %q), want %q verbatim", kind, queue, key, s)
			}
			if n := scalar[int](t, producer, "SELECT count(*) FROM jobs_enqueue_many(ARRAY[$1], queues => ARRAY[$1])", s); n != 1 {
				t.Errorf("jobs_enqueue_many returned %d ids, want 1", n)
			}
		}
		if got := scalar[string](t, b.super, "SELECT string_agg(v, ',') FROM secret"); got != "s3cr3t" {
			t.Errorf("secret = %q, want it untouched", got)
		}
		if got := scalar[string](t, b.super, "SELECT backoff_base::text FROM jobs_settings"); got != "00:00:01" {
			t.Errorf("backoff_base = %s, want the default 00:00:01", got)
		}
		mustDeny(t, producer, "SELECT * FROM secret", "DELETE FROM secret")
	})
}

func TestWorker(t *testing.T) {
	t.Parallel()

	t.Run("RunsJobs", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		worker := pgtest.NewPool(t, newLogin(t, b, "app_worker", "jobs_worker"))
		var ids []int64
		for range 5 {
			ids = append(ids, enqueue(t, b, "work"))
		}

		rows, err := worker.Query(t.Context(), "SELECT id, attempt FROM jobs_claim('w1', 5, ARRAY['work'], '1 minute')")
		if err != nil {
			t.Fatal(err)
		}
		type claimed struct {
			ID      int64
			Attempt int32
		}
		got, err := pgx.CollectRows(rows, pgx.RowToStructByPos[claimed])
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 5 {
			t.Fatalf("claimed %d jobs, want 5", len(got))
		}
		for i, c := range got {
			if c.ID != ids[i] || c.Attempt != 1 {
				t.Fatalf("claim %d = %+v, want id %d attempt 1", i, c, ids[i])
			}
		}

		if !scalar[bool](t, worker, "SELECT jobs_heartbeat($1, 1, '2 minutes')", ids[0]) {
			t.Error("jobs_heartbeat returned false for a held job")
		}
		if n := scalar[int](t, worker, "SELECT count(*) FROM jobs_heartbeat_many($1, ARRAY[1, 1])", ids[:2]); n != 2 {
			t.Errorf("jobs_heartbeat_many extended %d leases, want 2", n)
		}
		if !scalar[bool](t, worker, "SELECT jobs_complete($1, 1)", ids[0]) {
			t.Error("jobs_complete returned false for a held job")
		}
		if n := scalar[int](t, worker, "SELECT count(*) FROM jobs_complete_many($1, ARRAY[1])", ids[1:2]); n != 1 {
			t.Errorf("jobs_complete_many completed %d jobs, want 1", n)
		}
		if got := scalar[string](t, worker, "SELECT jobs_fail($1, 1, 'boom')::text", ids[2]); got != "queued" {
			t.Errorf("jobs_fail = %s, want queued", got)
		}
		if !scalar[bool](t, worker, "SELECT jobs_snooze($1, 1, now() + interval '1 hour')", ids[3]) {
			t.Error("jobs_snooze returned false for a held job")
		}
		expireLease(t, b, ids[4])
		if n := scalar[int](t, worker, "SELECT jobs_requeue_expired()"); n != 1 {
			t.Errorf("jobs_requeue_expired = %d, want 1", n)
		}
		if n := scalar[int64](t, worker, "SELECT sum(jobs) FROM jobs_stats()"); n != 5 {
			t.Errorf("jobs_stats counts %d jobs, want 5", n)
		}
		if got := scalar[string](t, worker, "SELECT last_error FROM jobs_get($1)", ids[2]); got != "boom" {
			t.Errorf("jobs_get last_error = %q, want boom", got)
		}

		want := []string{"done", "done", "queued", "queued", "queued"}
		for i, id := range ids {
			if got := jobState(t, b, id); got != want[i] {
				t.Errorf("job %d is %s, want %s", i, got, want[i])
			}
		}
	})

	t.Run("CannotEnqueueOrAdminister", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		worker := pgtest.NewPool(t, newLogin(t, b, "app_worker", "jobs_worker"))
		id := enqueue(t, b, "work")
		exec(t, b.super, "SELECT jobs_cancel($1)", id)

		mustDeny(t, worker,
			"SELECT jobs_enqueue('evil', queue => 'payments')",
			"SELECT jobs_enqueue_many(ARRAY['evil'], queues => ARRAY['payments'])",
			fmt.Sprintf("SELECT jobs_retry(%d)", id),
			fmt.Sprintf("SELECT jobs_cancel(%d)", id),
			"SELECT jobs_prune('0 seconds', true)",
			"SELECT * FROM jobs",
			fmt.Sprintf("UPDATE jobs SET state = 'queued' WHERE id = %d", id),
			"INSERT INTO jobs (kind, queue) VALUES ('evil', 'payments')",
			"UPDATE jobs_settings SET backoff_cap = '1 second', backoff_base = '1 second'",
		)
		if got := jobState(t, b, id); got != "cancelled" {
			t.Errorf("job is %s after the worker's denied retry, want cancelled", got)
		}
		if n := scalar[int](t, b.super, "SELECT count(*) FROM jobs"); n != 1 {
			t.Errorf("jobs = %d after the worker's denied enqueues, want 1", n)
		}
	})

	t.Run("EnqueuesWhenAlsoGrantedProducer", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		worker := pgtest.NewPool(t, newLogin(t, b, "app_worker", "jobs_worker", "jobs_producer"))
		id := scalar[int64](t, worker, "SELECT jobs_enqueue('follow-up', queue => 'next')")
		if got := jobState(t, b, id); got != "queued" {
			t.Errorf("follow-up job is %s, want queued", got)
		}
	})
}

func TestAdmin(t *testing.T) {
	t.Parallel()

	t.Run("CancelsRetriesPrunesAndTunesBackoff", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		admin := pgtest.NewPool(t, newLogin(t, b, "app_admin", "jobs_admin"))
		id := enqueue(t, b, "q")
		done := enqueue(t, b, "d")
		exec(t, b.super, "SELECT jobs_complete($1, $2)", done, claim(t, b, "d", done))

		if !scalar[bool](t, admin, "SELECT jobs_cancel($1)", id) {
			t.Error("jobs_cancel returned false for a queued job")
		}
		if got := jobState(t, b, id); got != "cancelled" {
			t.Errorf("after jobs_cancel the job is %s", got)
		}
		if !scalar[bool](t, admin, "SELECT jobs_retry($1)", id) {
			t.Error("jobs_retry returned false for a cancelled job")
		}
		if got := jobState(t, b, id); got != "queued" {
			t.Errorf("after jobs_retry the job is %s", got)
		}
		if n := scalar[int](t, admin, "SELECT jobs_prune('0 seconds')"); n != 1 {
			t.Errorf("jobs_prune deleted %d jobs, want 1", n)
		}
		if n := scalar[int](t, b.super, "SELECT count(*) FROM jobs WHERE id = $1", done); n != 0 {
			t.Error("the done job survived jobs_prune")
		}

		exec(t, admin, "UPDATE jobs_settings SET backoff_base = '10 seconds', backoff_cap = '10 seconds', backoff_jitter = 0")
		if got := scalar[time.Duration](t, admin, "SELECT jobs_backoff(3)"); got != 10*time.Second {
			t.Errorf("jobs_backoff after UPDATE jobs_settings = %v, want 10s", got)
		}
		if n := scalar[int64](t, admin, "SELECT sum(jobs) FROM jobs_stats()"); n != 1 {
			t.Errorf("jobs_stats counts %d jobs, want 1", n)
		}
	})

	t.Run("CannotProduceOrWork", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		admin := pgtest.NewPool(t, newLogin(t, b, "app_admin", "jobs_admin"))
		id := enqueue(t, b, "q")
		mustDeny(t, admin,
			"SELECT jobs_enqueue('x')",
			"SELECT * FROM jobs_claim('admin')",
			fmt.Sprintf("SELECT jobs_complete(%d, 1)", id),
			"SELECT * FROM jobs",
			"DELETE FROM jobs",
			"DELETE FROM jobs_settings",
			"INSERT INTO jobs_settings DEFAULT VALUES",
		)
		if got := jobState(t, b, id); got != "queued" {
			t.Errorf("job is %s after the admin's denied claim, want queued", got)
		}
	})
}
