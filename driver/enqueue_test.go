package driver_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/skiplock/skiplock/driver"
	"github.com/skiplock/skiplock/tests/pgtest"
)

type enqueuedRow struct {
	Queue       string
	Kind        string
	Payload     json.RawMessage
	RunAt       time.Time
	Priority    int
	MaxAttempts int
	UniqueKey   *string
	CreatedAt   time.Time
}

func readEnqueued(t *testing.T, db driver.Executor, id int64) enqueuedRow {
	t.Helper()
	var r enqueuedRow
	if err := db.QueryRow(context.Background(),
		"SELECT queue, kind, payload, run_at, priority, max_attempts, unique_key, created_at FROM jobs WHERE id = $1", id).
		Scan(&r.Queue, &r.Kind, &r.Payload, &r.RunAt, &r.Priority, &r.MaxAttempts, &r.UniqueKey, &r.CreatedAt); err != nil {
		t.Fatal(err)
	}
	return r
}

func TestEnqueue(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()

	t.Run("Defaults", func(t *testing.T) {
		t.Parallel()
		id := mustEnqueue(t, b.pool, "k", nil, nil)
		r := readEnqueued(t, b.pool, id)
		if r.Queue != driver.QueueDefault || r.Kind != "k" || string(r.Payload) != "{}" || r.Priority != 0 ||
			r.MaxAttempts != driver.MaxAttemptsDefault || r.UniqueKey != nil || !r.RunAt.Equal(r.CreatedAt) {
			t.Fatalf("row = %+v", r)
		}
	})

	t.Run("Options", func(t *testing.T) {
		t.Parallel()
		at := time.Date(2030, 1, 2, 3, 4, 5, 6000, time.UTC)
		id := mustEnqueue(t, b.pool, "k", map[string]int{"n": 1}, &driver.EnqueueOpts{
			Queue: "mail", RunAt: at, Priority: -3, MaxAttempts: 9, UniqueKey: "opt-key",
		})
		r := readEnqueued(t, b.pool, id)
		if r.Queue != "mail" || string(r.Payload) != `{"n": 1}` || !r.RunAt.Equal(at) || r.Priority != -3 ||
			r.MaxAttempts != 9 || r.UniqueKey == nil || *r.UniqueKey != "opt-key" {
			t.Fatalf("row = %+v", r)
		}
	})

	t.Run("DelayUsesDatabaseClock", func(t *testing.T) {
		t.Parallel()
		id := mustEnqueue(t, b.pool, "k", nil, &driver.EnqueueOpts{Delay: time.Hour})
		r := readEnqueued(t, b.pool, id)
		if d := r.RunAt.Sub(r.CreatedAt); d != time.Hour {
			t.Fatalf("run_at - created_at = %s, want 1h", d)
		}
	})

	t.Run("RawMessagePayload", func(t *testing.T) {
		t.Parallel()
		id := mustEnqueue(t, b.pool, "k", json.RawMessage(`[1,2]`), nil)
		if r := readEnqueued(t, b.pool, id); string(r.Payload) != "[1, 2]" {
			t.Fatalf("payload = %s", r.Payload)
		}
	})

	t.Run("CommitsAndRollsBackWithTheCallersTransaction", func(t *testing.T) {
		t.Parallel()
		tx, err := b.pool.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		rolledBack := mustEnqueue(t, tx, "k", nil, &driver.EnqueueOpts{Queue: "txq"})
		if err := tx.Rollback(ctx); err != nil {
			t.Fatal(err)
		}
		tx, err = b.pool.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		committed := mustEnqueue(t, tx, "k", nil, &driver.EnqueueOpts{Queue: "txq"})
		if n := queryInt(t, b.pool, "SELECT count(*) FROM jobs WHERE id = $1", committed); n != 0 {
			t.Fatal("job visible before commit")
		}
		if err := tx.Commit(ctx); err != nil {
			t.Fatal(err)
		}
		if n := queryInt(t, b.pool, "SELECT count(*) FROM jobs WHERE id = ANY($1)", []int64{rolledBack, committed}); n != 1 {
			t.Fatalf("%d of the rolled-back and committed jobs exist, want 1", n)
		}
	})

	t.Run("UniqueKeyReturnsLiveJob", func(t *testing.T) {
		t.Parallel()
		first := mustEnqueue(t, b.pool, "k", nil, &driver.EnqueueOpts{UniqueKey: "once"})
		second := mustEnqueue(t, b.pool, "k", nil, &driver.EnqueueOpts{UniqueKey: "once"})
		if first != second {
			t.Fatalf("ids %d and %d, want the same", first, second)
		}
	})

	t.Run("DebounceReplacesQueuedJob", func(t *testing.T) {
		t.Parallel()
		opts := func(delay time.Duration) *driver.EnqueueOpts {
			return &driver.EnqueueOpts{Queue: "debounce", UniqueKey: "doc-7", OnDuplicate: driver.DuplicateReplace,
				Delay: delay, Priority: 2}
		}
		first := mustEnqueue(t, b.pool, "reindex", map[string]int{"rev": 1}, opts(time.Hour))
		second := mustEnqueue(t, b.pool, "reindex", map[string]int{"rev": 2}, opts(2*time.Hour))
		if second != first {
			t.Fatalf("the replace returned %d, want the queued job %d", second, first)
		}
		if n := queryInt(t, b.pool, `SELECT count(*) FROM jobs WHERE id = $1 AND payload = '{"rev": 2}'
			AND run_at > now() + interval '90 minutes' AND priority = 2`, first); n != 1 {
			t.Fatal("the queued job did not take the replace's payload and run time")
		}
		if n := queryInt(t, b.pool, "SELECT count(*) FROM jobs WHERE queue = 'debounce'"); n != 1 {
			t.Fatalf("%d jobs in the queue, want 1", n)
		}
		// Without OnDuplicate (keep), the job stays as it is.
		if id := mustEnqueue(t, b.pool, "reindex", map[string]int{"rev": 3}, &driver.EnqueueOpts{Queue: "debounce", UniqueKey: "doc-7"}); id != first {
			t.Fatalf("keep returned %d, want %d", id, first)
		}
		if n := queryInt(t, b.pool, `SELECT count(*) FROM jobs WHERE id = $1 AND payload = '{"rev": 2}'`, first); n != 1 {
			t.Fatal("keep changed the payload")
		}
	})

	t.Run("ThrottleHoldsKeyAfterFinish", func(t *testing.T) {
		t.Parallel()
		opts := &driver.EnqueueOpts{Queue: "throttle", UniqueKey: "digest", UniqueFor: time.Hour}
		first := mustEnqueue(t, b.pool, "digest", nil, opts)
		if _, err := b.pool.Exec(ctx, "SELECT jobs_cancel($1)", first); err != nil {
			t.Fatal(err)
		}
		if id := mustEnqueue(t, b.pool, "digest", nil, opts); id != first {
			t.Fatalf("enqueue within UniqueFor of the job's end returned %d, want the finished job %d", id, first)
		}
		if n := queryInt(t, b.pool, "SELECT count(*) FROM jobs WHERE queue = 'throttle'"); n != 1 {
			t.Fatalf("%d jobs in the queue, want 1", n)
		}
	})

	t.Run("InvalidOptions", func(t *testing.T) {
		t.Parallel()
		tests := []struct {
			name  string
			kind  string
			pay   any
			opts  *driver.EnqueueOpts
			field string
			sql   bool // reported by the SQL function
		}{
			{"EmptyKind", "", nil, nil, "Kind", false},
			{"LongKind", strings.Repeat("k", 201), nil, nil, "kind", true},
			{"LongQueue", "k", nil, &driver.EnqueueOpts{Queue: strings.Repeat("q", 201)}, "queue", true},
			{"RunAtAndDelay", "k", nil, &driver.EnqueueOpts{RunAt: time.Now(), Delay: time.Second}, "EnqueueOpts.Delay", false},
			{"NegativeDelay", "k", nil, &driver.EnqueueOpts{Delay: -time.Second}, "EnqueueOpts.Delay", false},
			{"NegativeMaxAttempts", "k", nil, &driver.EnqueueOpts{MaxAttempts: -1}, "EnqueueOpts.MaxAttempts", false},
			{"UnencodablePayload", "k", func() {}, nil, "Payload", false},
			// Text the server refuses on input (SQLSTATE 22021) is named like any bad argument.
			{"InvalidUTF8Kind", "k\xff", nil, nil, "Kind", false},
			{"NULInQueue", "k", nil, &driver.EnqueueOpts{Queue: "q\x00"}, "EnqueueOpts.Queue", false},
			{"InvalidUTF8UniqueKey", "k", nil, &driver.EnqueueOpts{UniqueKey: "\xc3"}, "EnqueueOpts.UniqueKey", false},
			{"NULInConcurrencyKey", "k", nil, &driver.EnqueueOpts{ConcurrencyKey: "\x00"}, "EnqueueOpts.ConcurrencyKey", false},
			{"NegativeUniqueFor", "k", nil, &driver.EnqueueOpts{UniqueKey: "u", UniqueFor: -time.Second}, "EnqueueOpts.UniqueFor", false},
			{"UnknownOnDuplicate", "k", nil, &driver.EnqueueOpts{UniqueKey: "u", OnDuplicate: "update"}, "on_duplicate", true},
			{"ReplaceWithoutUniqueKey", "k", nil, &driver.EnqueueOpts{OnDuplicate: driver.DuplicateReplace}, "on_duplicate", true},
			{"UniqueForWithoutUniqueKey", "k", nil, &driver.EnqueueOpts{UniqueFor: time.Hour}, "unique_for", true},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				t.Parallel()
				_, err := driver.Enqueue(ctx, b.pool, tt.kind, tt.pay, tt.opts)
				var ie *driver.InvalidError
				if !errors.As(err, &ie) || ie.Field != tt.field {
					t.Fatalf("Enqueue = %v, want an *InvalidError for %s", err, tt.field)
				}
				var pgErr *pgconn.PgError
				if errors.As(err, &pgErr) != tt.sql {
					t.Fatalf("error %v: from SQL = %v, want %v", err, !tt.sql, tt.sql)
				}
			})
		}
	})
}

func TestEnqueueMany(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()

	t.Run("ThousandsInOrderWithOneWakeUpPerQueue", func(t *testing.T) {
		t.Parallel()
		listener := pgtest.NewConn(t, b.url)
		if _, err := listener.Exec(ctx, "LISTEN jobs_ready"); err != nil {
			t.Fatal(err)
		}
		const n = 5000
		params := make([]driver.EnqueueParams, n)
		for i := range params {
			params[i] = driver.EnqueueParams{Kind: "bulk", Payload: map[string]int{"i": i}}
			if i%2 == 1 {
				params[i].Opts = &driver.EnqueueOpts{Queue: "bulk-odd"}
			} else {
				params[i].Opts = &driver.EnqueueOpts{Queue: "bulk-even"}
			}
		}
		ids, err := driver.EnqueueMany(ctx, b.pool, params)
		if err != nil {
			t.Fatal(err)
		}
		if len(ids) != n {
			t.Fatalf("got %d ids, want %d", len(ids), n)
		}
		for i := range ids {
			var got int
			if i%997 != 0 {
				continue
			}
			if err := b.pool.QueryRow(ctx, "SELECT (payload->>'i')::int FROM jobs WHERE id = $1", ids[i]).Scan(&got); err != nil || got != i {
				t.Fatalf("ids[%d] is the job with payload i=%d (%v)", i, got, err)
			}
		}
		// Wait up to 10 s for both notifications, then 300 ms more for any duplicate.
		queues := map[string]int{}
		deadline := time.Now().Add(10 * time.Second)
		for {
			if queues["bulk-odd"] > 0 && queues["bulk-even"] > 0 {
				deadline = time.Now().Add(300 * time.Millisecond)
			}
			wctx, cancel := context.WithDeadline(ctx, deadline)
			note, err := listener.WaitForNotification(wctx)
			cancel()
			if err != nil {
				break
			}
			queues[note.Payload]++
		}
		// Sibling subtests enqueue into other queues of the same database meanwhile, so only
		// the two queues of this call are counted.
		if queues["bulk-odd"] != 1 || queues["bulk-even"] != 1 {
			t.Fatalf("notifications per queue = %v, want one for each of bulk-odd and bulk-even", queues)
		}
	})

	t.Run("MixedOptions", func(t *testing.T) {
		t.Parallel()
		at := time.Date(2031, 5, 6, 7, 8, 9, 0, time.UTC)
		ids, err := driver.EnqueueMany(ctx, b.pool, []driver.EnqueueParams{
			{Kind: "a"},
			{Kind: "b", Opts: &driver.EnqueueOpts{RunAt: at, Priority: 5, MaxAttempts: 2, UniqueKey: "mixed"}},
			{Kind: "c", Opts: &driver.EnqueueOpts{Delay: time.Minute, Queue: "mixq"}},
			{Kind: "d", Opts: &driver.EnqueueOpts{UniqueKey: "mixed"}},
		})
		if err != nil {
			t.Fatal(err)
		}
		a, bb, c := readEnqueued(t, b.pool, ids[0]), readEnqueued(t, b.pool, ids[1]), readEnqueued(t, b.pool, ids[2])
		if a.Kind != "a" || a.Queue != "default" || !a.RunAt.Equal(a.CreatedAt) || a.MaxAttempts != 5 || a.UniqueKey != nil {
			t.Errorf("job a = %+v", a)
		}
		if !bb.RunAt.Equal(at) || bb.Priority != 5 || bb.MaxAttempts != 2 || *bb.UniqueKey != "mixed" {
			t.Errorf("job b = %+v", bb)
		}
		if c.Queue != "mixq" || c.RunAt.Sub(c.CreatedAt) != time.Minute {
			t.Errorf("job c = %+v", c)
		}
		if ids[3] != ids[1] {
			t.Errorf("job d got id %d, want the id of b (%d), which holds its unique key", ids[3], ids[1])
		}
	})

	t.Run("OnDuplicateAndUniqueFor", func(t *testing.T) {
		t.Parallel()
		ids, err := driver.EnqueueMany(ctx, b.pool, []driver.EnqueueParams{
			{Kind: "a", Payload: map[string]int{"n": 1}, Opts: &driver.EnqueueOpts{Queue: "dupq", UniqueKey: "d"}},
			{Kind: "a", Payload: map[string]int{"n": 2}, Opts: &driver.EnqueueOpts{Queue: "dupq", UniqueKey: "d", OnDuplicate: driver.DuplicateReplace}},
			{Kind: "b", Opts: &driver.EnqueueOpts{Queue: "dupq", UniqueKey: "t", UniqueFor: time.Hour}},
		})
		if err != nil {
			t.Fatal(err)
		}
		if ids[0] != ids[1] {
			t.Fatalf("two jobs of one key got ids %v, want one job", ids[:2])
		}
		if n := queryInt(t, b.pool, `SELECT count(*) FROM jobs WHERE id = $1 AND payload = '{"n": 2}'`, ids[0]); n != 1 {
			t.Fatal("the replacing element's payload is not the job's")
		}
		if n := queryInt(t, b.pool, `SELECT count(*) FROM jobs WHERE id = $1 AND unique_for = interval '1 hour'`, ids[2]); n != 1 {
			t.Fatal("UniqueFor was not stored")
		}
	})

	t.Run("BadElementAddsNothing", func(t *testing.T) {
		t.Parallel()
		_, err := driver.EnqueueMany(ctx, b.pool, []driver.EnqueueParams{
			{Kind: "fine", Opts: &driver.EnqueueOpts{Queue: "allornothing"}},
			{Kind: "fine", Opts: &driver.EnqueueOpts{Queue: strings.Repeat("q", 201)}},
		})
		var ie *driver.InvalidError
		if !errors.As(err, &ie) || ie.Field != "queues[2]" {
			t.Fatalf("EnqueueMany = %v, want an *InvalidError for queues[2]", err)
		}
		if n := queryInt(t, b.pool, "SELECT count(*) FROM jobs WHERE queue = 'allornothing'"); n != 0 {
			t.Fatalf("%d jobs added", n)
		}
		_, err = driver.EnqueueMany(ctx, b.pool, []driver.EnqueueParams{{Kind: "fine"}, {Kind: ""}})
		if !errors.As(err, &ie) || ie.Field != "EnqueueParams[1].Kind" {
			t.Fatalf("EnqueueMany = %v, want an *InvalidError for EnqueueParams[1].Kind", err)
		}
	})

	t.Run("Empty", func(t *testing.T) {
		t.Parallel()
		ids, err := driver.EnqueueMany(ctx, b.pool, nil)
		if err != nil || len(ids) != 0 {
			t.Fatalf("EnqueueMany(nil) = %v, %v", ids, err)
		}
	})
}
