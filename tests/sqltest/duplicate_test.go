package sqltest

import (
	"errors"
	"strconv"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
)

// queuedOfKey counts the queued jobs of (queue, key) and their jobs_queued rows.
func queuedOfKey(t *testing.T, q querier, queue, key string) (jobs, rows int64) {
	t.Helper()
	jobs = queryOne[int64](t, q, "SELECT count(*) FROM jobs WHERE queue = $1 AND unique_key = $2 AND state = 'queued'", queue, key)
	rows = queryOne[int64](t, q,
		`SELECT count(*) FROM jobs_queued q JOIN jobs j ON j.id = q.id
		 WHERE j.queue = $1 AND j.unique_key = $2 AND j.state = 'queued'`, queue, key)
	return jobs, rows
}

func keyHolder(t *testing.T, q querier, queue, key string) *int64 {
	t.Helper()
	ids := queryList[int64](t, q, "SELECT id FROM jobs_unique_keys WHERE queue = $1 AND unique_key = $2", queue, key)
	if len(ids) == 0 {
		return nil
	}
	return &ids[0]
}

func wantSQLState(t *testing.T, err error, code, what string) {
	t.Helper()
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != code {
		t.Fatalf("%s: got %v, want SQLSTATE %s", what, err, code)
	}
}

// TestUniqueKeyReplace owns on_duplicate 'replace' (debounce): a waiting or queued job of the
// key is changed in place; a running one is superseded by a new job, which never lets it
// come back to queued.
func TestUniqueKeyReplace(t *testing.T) {
	t.Parallel()

	t.Run("QueuedJobTakesTheNewFieldsInPlace", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		first := enqueue(t, b.Conn, `queue => 'q', unique_key => 'k', payload => '{"v": 1}', run_at => '2100-01-01 00:00:00+00'`)
		again := enqueue(t, b.Conn, `queue => 'q', unique_key => 'k', payload => '{"v": 2}', run_at => '2100-01-02 00:00:00+00',
			priority => 7, max_attempts => 2, on_duplicate => 'replace'`)
		if again != first {
			t.Fatalf("replace of a queued job returned %d, want its id %d", again, first)
		}
		if ok := queryOne[bool](t, b.Conn, `SELECT payload = '{"v": 2}' AND priority = 7 AND max_attempts = 2
			AND run_at = '2100-01-02 00:00:00+00' AND state = 'queued' FROM jobs WHERE id = $1`, first); !ok {
			t.Fatal("the replaced job does not have the new payload, priority, max_attempts and run_at")
		}
		if ok := queryOne[bool](t, b.Conn, `SELECT count(*) = 1 AND bool_and(priority = 7 AND run_at = '2100-01-02 00:00:00+00')
			FROM jobs_queued WHERE id = $1`, first); !ok {
			t.Fatal("the jobs_queued row did not move with the replaced job (want one row with the new priority and run_at)")
		}
		if n := queryOne[int64](t, b.Conn, "SELECT count(*) FROM jobs"); n != 1 {
			t.Fatalf("%d jobs, want 1", n)
		}
		// Keep still returns it and changes nothing.
		if id := enqueue(t, b.Conn, `queue => 'q', unique_key => 'k', payload => '{"v": 3}'`); id != first {
			t.Fatalf("keep returned %d, want %d", id, first)
		}
		if v := queryOne[int64](t, b.Conn, "SELECT (payload->>'v')::bigint FROM jobs WHERE id = $1", first); v != 2 {
			t.Fatalf("keep changed the payload to v=%d", v)
		}
	})

	t.Run("DebounceMovesRunAtToTheLastCall", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		var id int64
		for i := range 5 {
			got := queryOne[int64](t, b.Conn, `SELECT jobs_enqueue('reindex', jsonb_build_object('n', $1::int), queue => 'q',
				unique_key => 'doc-1', run_at => '2100-01-01 00:00:00+00'::timestamptz + interval '10 seconds' * ($1::int + 1),
				on_duplicate => 'replace')`, i)
			if i > 0 && got != id {
				t.Fatalf("call %d returned %d, want %d", i, got, id)
			}
			id = got
		}
		if ok := queryOne[bool](t, b.Conn, `SELECT payload = '{"n": 4}' AND run_at = '2100-01-01 00:00:50+00' FROM jobs WHERE id = $1`, id); !ok {
			t.Fatal("the debounced job does not carry the last call's payload and run_at")
		}
		if jobs := claim(t, b.Conn, "w", 10, []string{"q"}, "1 minute"); len(jobs) != 0 {
			t.Fatalf("claimed %d jobs before the debounced run_at", len(jobs))
		}
	})

	t.Run("WaitingJobTakesTheNewFieldsInPlace", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		parent := enqueue(t, b.Conn, "queue => 'q'")
		child := queryOne[int64](t, b.Conn, `SELECT jobs_enqueue('test_kind', queue => 'q', unique_key => 'c',
			depends_on => ARRAY[$1]::bigint[])`, parent)
		got := queryOne[int64](t, b.Conn, `SELECT jobs_enqueue('test_kind', '{"v": 2}', queue => 'q', unique_key => 'c',
			priority => 4, on_duplicate => 'replace')`)
		if got != child {
			t.Fatalf("replace of a waiting job returned %d, want %d", got, child)
		}
		if ok := queryOne[bool](t, b.Conn, `SELECT state = 'waiting' AND payload = '{"v": 2}' AND priority = 4 AND depends_on = ARRAY[$2]::bigint[]
			FROM jobs WHERE id = $1`, child, parent); !ok {
			t.Fatal("the waiting job was not replaced in place (state waiting, new payload and priority, same parents)")
		}
		if n := queryOne[int64](t, b.Conn, "SELECT count(*) FROM jobs_queued WHERE id = $1", child); n != 0 {
			t.Fatalf("the waiting job got %d jobs_queued rows", n)
		}
	})

	t.Run("RunningJobIsSupersededByANewJob", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		old := enqueue(t, b.Conn, `queue => 'q', unique_key => 'k', payload => '{"v": 1}'`)
		j := claimOne(t, b.Conn, "w", "q", "1 minute")
		next := enqueue(t, b.Conn, `queue => 'q', unique_key => 'k', payload => '{"v": 2}', on_duplicate => 'replace'`)
		if next == old {
			t.Fatal("replace of a running job returned the running job")
		}
		if h := keyHolder(t, b.Conn, "q", "k"); h == nil || *h != next {
			t.Fatalf("the key is held by %v, want the new job %d", h, next)
		}
		if s := queryOne[int64](t, b.Conn, "SELECT superseded_by FROM jobs WHERE id = $1", old); s != next {
			t.Fatalf("superseded_by = %d, want %d", s, next)
		}
		// A second replace changes the new (queued) job in place; keep returns it.
		if id := enqueue(t, b.Conn, `queue => 'q', unique_key => 'k', payload => '{"v": 3}', on_duplicate => 'replace'`); id != next {
			t.Fatalf("second replace returned %d, want %d", id, next)
		}
		if id := enqueue(t, b.Conn, `queue => 'q', unique_key => 'k'`); id != next {
			t.Fatalf("keep returned %d, want %d", id, next)
		}
		// The old job's completion does not free the new job's key.
		mustExec(t, b.Conn, "SELECT jobs_complete($1, $2)", old, j.Attempt)
		if h := keyHolder(t, b.Conn, "q", "k"); h == nil || *h != next {
			t.Fatalf("after the old job completed the key is held by %v, want %d", h, next)
		}
		if jobs, rows := queuedOfKey(t, b.Conn, "q", "k"); jobs != 1 || rows != 1 {
			t.Fatalf("%d queued jobs (%d jobs_queued rows) of the key, want 1", jobs, rows)
		}
	})

	// Each way a superseded running job could come back to queued ends it cancelled.
	for _, tc := range []struct {
		name string
		back func(t *testing.T, b *testBundle, id int64, attempt int32) string
	}{
		{"Fail", func(t *testing.T, b *testBundle, id int64, attempt int32) string {
			return queryOne[string](t, b.Conn, "SELECT jobs_fail($1, $2, 'boom')::text", id, attempt)
		}},
		{"Snooze", func(t *testing.T, b *testBundle, id int64, attempt int32) string {
			if !queryOne[bool](t, b.Conn, "SELECT jobs_snooze($1, $2, now())", id, attempt) {
				t.Fatal("jobs_snooze returned false")
			}
			return ""
		}},
		{"RequeueExpired", func(t *testing.T, b *testBundle, id int64, attempt int32) string {
			waitLeasesExpired(t, b.Conn)
			if n := queryOne[int64](t, b.Conn, "SELECT jobs_requeue_expired()"); n != 1 {
				t.Fatalf("jobs_requeue_expired returned %d, want 1", n)
			}
			return ""
		}},
	} {
		t.Run("SupersededJobComingBackIsCancelled/"+tc.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			old := enqueue(t, b.Conn, `queue => 'q', unique_key => 'k'`)
			j := claimOne(t, b.Conn, "w", "q", "50 milliseconds")
			next := enqueue(t, b.Conn, `queue => 'q', unique_key => 'k', on_duplicate => 'replace'`)
			if got := tc.back(t, b, old, j.Attempt); got != "" && got != "cancelled" {
				t.Fatalf("the call returned %q, want cancelled", got)
			}
			r := getJob(t, b.Conn, old)
			want := "superseded by job " + strconv.FormatInt(next, 10)
			if r.State != "cancelled" || r.LastError == nil || *r.LastError != want || r.FinishedAt == nil {
				t.Fatalf("superseded job: state %s, last_error %v, want cancelled with %q", r.State, r.LastError, want)
			}
			if r.Errors[len(r.Errors)-1].Error != want {
				t.Fatalf("errors history ends with %q, want %q", r.Errors[len(r.Errors)-1].Error, want)
			}
			if jobs, rows := queuedOfKey(t, b.Conn, "q", "k"); jobs != 1 || rows != 1 {
				t.Fatalf("%d queued jobs (%d jobs_queued rows) of the key, want 1 (the new job)", jobs, rows)
			}
			if n := queryOne[int64](t, b.Conn, "SELECT count(*) FROM jobs_queued WHERE id = $1", old); n != 0 {
				t.Fatalf("the superseded job has %d jobs_queued rows", n)
			}
		})
	}

	t.Run("RetryOfASupersededJob", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		old := enqueue(t, b.Conn, `queue => 'q', unique_key => 'k'`)
		j := claimOne(t, b.Conn, "w", "q", "1 minute")
		next := enqueue(t, b.Conn, `queue => 'q', unique_key => 'k', on_duplicate => 'replace'`)
		mustExec(t, b.Conn, "SELECT jobs_fail($1, $2, 'boom')", old, j.Attempt)
		// While the new job is live the key is taken: 23505, as for any retry of a keyed job.
		_, err := b.Conn.Exec(t.Context(), "SELECT jobs_retry($1)", old)
		wantSQLState(t, err, "23505", "jobs_retry of a superseded job while its key's job is queued")
		// Once the new job is done, the retried job takes its key and runs like any other:
		// failing again, it is queued again (it holds its key).
		n := claimOne(t, b.Conn, "w", "q", "1 minute")
		mustExec(t, b.Conn, "SELECT jobs_complete($1, $2)", next, n.Attempt)
		mustExec(t, b.Conn, "SELECT jobs_retry($1)", old)
		if h := keyHolder(t, b.Conn, "q", "k"); h == nil || *h != old {
			t.Fatalf("the retried job does not hold its key (holder %v)", h)
		}
		again := claimOne(t, b.Conn, "w", "q", "1 minute")
		if state := queryOne[string](t, b.Conn, "SELECT jobs_fail($1, $2, 'again')::text", old, again.Attempt); state != "queued" {
			t.Fatalf("the retried job failing with attempts left became %s, want queued", state)
		}
	})

	t.Run("RunningJobWithUniqueForIsKept", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		old := enqueue(t, b.Conn, `queue => 'q', unique_key => 'k', unique_for => '1 hour'`)
		claimOne(t, b.Conn, "w", "q", "1 minute")
		if id := enqueue(t, b.Conn, `queue => 'q', unique_key => 'k', on_duplicate => 'replace', unique_for => '1 hour'`); id != old {
			t.Fatalf("replace of a running job enqueued with unique_for returned %d, want the running job %d", id, old)
		}
		if n := queryOne[int64](t, b.Conn, "SELECT count(*) FROM jobs"); n != 1 {
			t.Fatalf("%d jobs, want 1", n)
		}
	})

	t.Run("EnqueueManyLastElementWins", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		running := enqueue(t, b.Conn, `queue => 'q', unique_key => 'r'`)
		claimOne(t, b.Conn, "w", "q", "1 minute")
		ids := queryList[int64](t, b.Conn, `SELECT * FROM jobs_enqueue_many(
			kinds         => ARRAY['d', 'd', 'd', 'test_kind', 'test_kind'],
			payloads      => ARRAY['{"n": 1}', '{"n": 2}', '{"n": 3}', '{"n": 4}', '{"n": 5}']::jsonb[],
			queues        => ARRAY['q', 'q', 'q', 'q', 'q'],
			unique_keys   => ARRAY['d', 'd', 'd', 'r', 'r'],
			on_duplicates => ARRAY['keep', 'replace', 'keep', 'replace', 'replace'])`)
		if ids[0] != ids[1] || ids[1] != ids[2] {
			t.Fatalf("elements of one key got ids %v, want one job", ids[:3])
		}
		if n := queryOne[int64](t, b.Conn, "SELECT (payload->>'n')::bigint FROM jobs WHERE id = $1", ids[0]); n != 2 {
			t.Fatalf("the key's job has payload n=%d, want 2 (the replace; the later keep changes nothing)", n)
		}
		if ids[3] == running || ids[4] != ids[3] {
			t.Fatalf("replaces of a running key's job got %v, want one new job after %d", ids[3:], running)
		}
		if n := queryOne[int64](t, b.Conn, "SELECT (payload->>'n')::bigint FROM jobs WHERE id = $1", ids[3]); n != 5 {
			t.Fatalf("the job after the running one has payload n=%d, want 5", n)
		}
		if jobs, rows := queuedOfKey(t, b.Conn, "q", "r"); jobs != 1 || rows != 1 {
			t.Fatalf("%d queued jobs (%d rows) of key r, want 1", jobs, rows)
		}
	})
}

// TestUniqueKeyUniqueFor owns unique_for (throttle): the key stays taken for the period
// after its job finished, whatever ended it and whatever deleted the row.
func TestUniqueKeyUniqueFor(t *testing.T) {
	t.Parallel()

	for _, end := range []string{"done", "dead", "cancelled", "deleted"} {
		t.Run("KeyHeldAfter/"+end, func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			if end == "deleted" {
				mustExec(t, b.Conn, "UPDATE jobs_settings SET done_retention = '0'")
			}
			first := enqueue(t, b.Conn, `queue => 'q', unique_key => 'k', unique_for => '1 hour', max_attempts => 1`)
			j := claimOne(t, b.Conn, "w", "q", "1 minute")
			switch end {
			case "done", "deleted":
				mustExec(t, b.Conn, "SELECT jobs_complete($1, $2)", first, j.Attempt)
			case "dead":
				mustExec(t, b.Conn, "SELECT jobs_fail($1, $2, 'boom')", first, j.Attempt)
			case "cancelled":
				mustExec(t, b.Conn, "SELECT jobs_cancel($1)", first)
			}
			if n := queryOne[int64](t, b.Conn, "SELECT count(*) FROM jobs"); (end == "deleted") != (n == 0) {
				t.Fatalf("%d jobs left after the job ended %s", n, end)
			}
			if ok := queryOne[bool](t, b.Conn, `SELECT k.held_until = coalesce(j.finished_at + interval '1 hour', k.held_until)
				AND k.held_until BETWEEN now() + interval '59 minutes' AND now() + interval '61 minutes'
				FROM jobs_unique_keys k LEFT JOIN jobs j ON j.id = k.id WHERE k.id = $1`, first); !ok {
				t.Fatal("the key row is not held until the end + unique_for")
			}
			for _, mode := range []string{"keep", "replace"} {
				if id := enqueue(t, b.Conn, `queue => 'q', unique_key => 'k', on_duplicate => '`+mode+`'`); id != first {
					t.Fatalf("%s within the period returned %d, want the finished job %d", mode, id, first)
				}
			}
			if n := queryOne[int64](t, b.Conn, "SELECT count(*) FROM jobs WHERE state <> 'done' AND state <> 'dead' AND state <> 'cancelled'"); n != 0 {
				t.Fatalf("%d live jobs within the period", n)
			}
			// The period ends: the next enqueue takes the key, with run_at not before the end.
			mustExec(t, b.Conn, "UPDATE jobs_unique_keys SET held_until = now() - interval '1 second'")
			mustExec(t, b.Conn, "UPDATE jobs_unique_keys SET held_until = '2000-01-01 00:00:00+00'")
			next := enqueue(t, b.Conn, `queue => 'q', unique_key => 'k', run_at => '1999-01-01 00:00:00+00'`)
			if next == first {
				t.Fatal("the enqueue after the period returned the finished job")
			}
			if ok := queryOne[bool](t, b.Conn, `SELECT run_at = '2000-01-01 00:00:00+00' FROM jobs WHERE id = $1`, next); !ok {
				t.Fatal("the job after the period may start before the period's end (run_at earlier than held_until)")
			}
			if h := keyHolder(t, b.Conn, "q", "k"); h == nil || *h != next {
				t.Fatalf("key holder %v, want %d", h, next)
			}
		})
	}

	t.Run("RetryOfTheJobHoldingThePeriod", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		first := enqueue(t, b.Conn, `queue => 'q', unique_key => 'k', unique_for => '1 hour', max_attempts => 1`)
		j := claimOne(t, b.Conn, "w", "q", "1 minute")
		mustExec(t, b.Conn, "SELECT jobs_fail($1, $2, 'boom')", first, j.Attempt)
		// Another finished job of the key cannot come back while the period holds it.
		other := enqueue(t, b.Conn, `queue => 'q', unique_key => 'other'`)
		mustExec(t, b.Conn, "SELECT jobs_cancel($1)", other)
		mustExec(t, b.Conn, "UPDATE jobs SET unique_key = 'k' WHERE id = $1", other)
		_, err := b.Conn.Exec(t.Context(), "SELECT jobs_retry($1)", other)
		wantSQLState(t, err, "23505", "jobs_retry of another job of a key in its period")
		if n := queryOne[int64](t, b.Conn, "SELECT jobs_retry_many(ids => ARRAY[$1]::bigint[], states => '{dead,cancelled}')", other); n != 0 {
			t.Fatalf("jobs_retry_many retried %d jobs of a key in another job's period", n)
		}
		// The job whose end holds the period takes its key back.
		mustExec(t, b.Conn, "SELECT jobs_retry($1)", first)
		if ok := queryOne[bool](t, b.Conn, `SELECT id = $1 AND held_until IS NULL FROM jobs_unique_keys WHERE unique_key = 'k'`, first); !ok {
			t.Fatal("the retried job does not hold its key as a live job")
		}
		if n := queryOne[int64](t, b.Conn, "SELECT jobs_retry_many(ids => ARRAY[$1]::bigint[], states => '{dead,cancelled}')", other); n != 0 {
			t.Fatalf("jobs_retry_many retried %d jobs of a key a live job holds", n)
		}
	})

	t.Run("RetryManyOfTheJobHoldingThePeriod", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		first := enqueue(t, b.Conn, `queue => 'q', unique_key => 'k', unique_for => '1 hour'`)
		mustExec(t, b.Conn, "SELECT jobs_cancel($1)", first)
		if n := queryOne[int64](t, b.Conn, "SELECT jobs_retry_many(ids => ARRAY[$1]::bigint[], states => '{dead,cancelled}')", first); n != 1 {
			t.Fatalf("jobs_retry_many retried %d jobs, want 1 (the job whose end holds the period)", n)
		}
		if ok := queryOne[bool](t, b.Conn, `SELECT id = $1 AND held_until IS NULL FROM jobs_unique_keys WHERE unique_key = 'k'`, first); !ok {
			t.Fatal("the job retried by jobs_retry_many does not hold its key as a live job")
		}
	})

	t.Run("RetentionKeepsThePeriod", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		first := enqueue(t, b.Conn, `queue => 'q', unique_key => 'k', unique_for => '1 hour'`)
		j := claimOne(t, b.Conn, "w", "q", "1 minute")
		mustExec(t, b.Conn, "SELECT jobs_complete($1, $2)", first, j.Attempt)
		mustExec(t, b.Conn, "UPDATE jobs SET created_at = created_at - interval '1 day', finished_at = finished_at - interval '1 day' WHERE id = $1", first)
		mustExec(t, b.Conn, "UPDATE jobs_settings SET done_retention = '1 minute'")
		mustExec(t, b.Conn, "SELECT jobs_maintain()")
		if n := queryOne[int64](t, b.Conn, "SELECT count(*) FROM jobs"); n != 0 {
			t.Fatalf("retention left %d jobs", n)
		}
		if id := enqueue(t, b.Conn, `queue => 'q', unique_key => 'k'`); id != first {
			t.Fatalf("enqueue within the period after the job was pruned returned %d, want %d (the period holds)", id, first)
		}
	})

	t.Run("MaintainRemovesEndedPeriods", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		for _, key := range []string{"a", "b", "c"} {
			id := enqueue(t, b.Conn, `queue => 'q', unique_key => '`+key+`', unique_for => '1 hour'`)
			mustExec(t, b.Conn, "SELECT jobs_cancel($1)", id)
		}
		mustExec(t, b.Conn, "UPDATE jobs_unique_keys SET held_until = now() - interval '1 second' WHERE unique_key IN ('a', 'b')")
		if more := queryOne[bool](t, b.Conn, "SELECT more FROM jobs_maintain(1)"); !more {
			t.Fatal("a full batch of ended periods did not ask for another round")
		}
		mustExec(t, b.Conn, "SELECT jobs_maintain(1)")
		if keys := queryList[string](t, b.Conn, "SELECT unique_key FROM jobs_unique_keys ORDER BY 1"); len(keys) != 1 || keys[0] != "c" {
			t.Fatalf("key rows left %v, want [c] (the period not over)", keys)
		}
	})

	t.Run("EnqueueManyUniqueFors", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		ids := queryList[int64](t, b.Conn, `SELECT * FROM jobs_enqueue_many(ARRAY['a', 'b'], unique_keys => ARRAY['x', 'y'],
			unique_fors => ARRAY['1 hour', NULL]::interval[])`)
		mustExec(t, b.Conn, "SELECT jobs_cancel(id) FROM unnest($1::bigint[]) AS id", ids)
		again := queryList[int64](t, b.Conn, `SELECT * FROM jobs_enqueue_many(ARRAY['a', 'b'], unique_keys => ARRAY['x', 'y'])`)
		if again[0] != ids[0] {
			t.Fatalf("key x (unique_for 1 hour) gave %d, want the cancelled job %d", again[0], ids[0])
		}
		if again[1] == ids[1] {
			t.Fatal("key y (no unique_for) was still taken after its job was cancelled")
		}
	})
}
