package sqltest

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/skiplock/skiplock/tests/pgtest"
)

// enqueueKeyConcurrently has every conn begin a transaction, waits until all have, then lets
// them enqueue (queue, key) at the same moment and commit. meanwhile, when not nil, runs
// once they have been let go. It returns the id each got.
func enqueueKeyConcurrently(t *testing.T, conns []*pgx.Conn, queue, key string, meanwhile func()) []int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()

	ids := make([]int64, len(conns))
	errs := make([]error, len(conns))
	var ready, done sync.WaitGroup
	start := make(chan struct{})
	for i, conn := range conns {
		ready.Add(1)
		done.Add(1)
		go func() {
			defer done.Done()
			tx, err := conn.Begin(ctx)
			ready.Done()
			if err != nil {
				errs[i] = err
				return
			}
			defer tx.Rollback(context.Background())
			<-start
			if err := tx.QueryRow(ctx, "SELECT jobs_enqueue('k', queue => $1, unique_key => $2)", queue, key).Scan(&ids[i]); err != nil {
				errs[i] = fmt.Errorf("jobs_enqueue: %w", err)
				return
			}
			errs[i] = tx.Commit(ctx)
		}()
	}
	ready.Wait()
	close(start)
	if meanwhile != nil {
		meanwhile()
	}
	done.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("session %d: %v", i, err)
		}
	}
	return ids
}

func TestUniqueKey(t *testing.T) {
	t.Parallel()

	t.Run("ConcurrentEnqueuesMakeOneJob", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		conns := make([]*pgx.Conn, 16)
		for i := range conns {
			conns[i] = b.Connect(t)
		}
		for round := range 5 {
			key := fmt.Sprintf("key-%d", round)
			ids := enqueueKeyConcurrently(t, conns, "q", key, nil)
			jobIDs := queryList[int64](t, b.Conn, "SELECT id FROM jobs WHERE unique_key = $1", key)
			if len(jobIDs) != 1 {
				t.Fatalf("round %d: %d jobs with key %s, want 1", round, len(jobIDs), key)
			}
			for i, id := range ids {
				if id != jobIDs[0] {
					t.Fatalf("round %d: session %d got id %d, want the one job's id %d (all: %v)", round, i, id, jobIDs[0], ids)
				}
			}
		}
	})

	t.Run("WaitersTakeOverFromRolledBackInsert", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		// A first session holds an uncommitted insert of the key; the others block on it and,
		// once it rolls back, exactly one of them must insert.
		holder, err := b.Connect(t).Begin(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		enqueue(t, holder, "queue => 'q', unique_key => 'k1'")
		conns := make([]*pgx.Conn, 8)
		for i := range conns {
			conns[i] = b.Connect(t)
		}
		ids := enqueueKeyConcurrently(t, conns, "q", "k1", func() {
			// Roll back once every waiter is blocked on the holder's row.
			pgtest.WaitFor(t, 10*time.Second, "the enqueuers to block", func() bool {
				return queryOne[int64](t, b.Conn,
					"SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'") == int64(len(conns))
			})
			if err := holder.Rollback(t.Context()); err != nil {
				t.Error(err)
			}
		})
		jobIDs := queryList[int64](t, b.Conn, "SELECT id FROM jobs WHERE unique_key = 'k1'")
		if len(jobIDs) != 1 {
			t.Fatalf("%d jobs with key k1, want 1", len(jobIDs))
		}
		for i, id := range ids {
			if id != jobIDs[0] {
				t.Fatalf("session %d got id %d, want the one job's id %d (all: %v)", i, id, jobIDs[0], ids)
			}
		}
	})

	t.Run("KeyIsFreeAgainOnceJobFinishes", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		first := enqueue(t, b.Conn, "queue => 'q', unique_key => 'k'")
		j := claimOne(t, b.Conn, "w", "q", "1 minute")
		if again := enqueue(t, b.Conn, "queue => 'q', unique_key => 'k'"); again != first {
			t.Fatalf("enqueue while the keyed job runs returned %d, want %d", again, first)
		}
		mustExec(t, b.Conn, "SELECT jobs_complete($1, $2)", first, j.Attempt)
		second := enqueue(t, b.Conn, "queue => 'q', unique_key => 'k'")
		if second == first {
			t.Fatalf("enqueue after the keyed job completed returned the done job %d", first)
		}
		mustExec(t, b.Conn, "SELECT jobs_cancel($1)", second)
		third := enqueue(t, b.Conn, "queue => 'q', unique_key => 'k'")
		if third == first || third == second {
			t.Fatalf("enqueue after the keyed job was cancelled returned an old job %d", third)
		}
		if n := queryOne[int64](t, b.Conn, "SELECT count(*) FROM jobs WHERE unique_key = 'k'"); n != 3 {
			t.Fatalf("%d jobs with key k, want 3 (done, cancelled, queued)", n)
		}
	})

	t.Run("OtherQueueIsIndependent", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		a := enqueue(t, b.Conn, "queue => 'a', unique_key => 'k'")
		other := enqueue(t, b.Conn, "queue => 'b', unique_key => 'k'")
		if a == other {
			t.Fatalf("the same key in queues a and b gave the same job %d", a)
		}
		if again := enqueue(t, b.Conn, "queue => 'b', unique_key => 'k'"); again != other {
			t.Fatalf("second enqueue into b returned %d, want %d", again, other)
		}
		if plain := enqueue(t, b.Conn, "queue => 'a'"); plain == a {
			t.Fatal("an enqueue without a key was deduplicated")
		}
	})

	t.Run("EnqueueManyDuplicateKeysShareOneJob", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		existing := enqueue(t, b.Conn, "queue => 'q', unique_key => 'held'")
		ids := queryList[int64](t, b.Conn, `SELECT * FROM jobs_enqueue_many(
			kinds       => ARRAY['a', 'b', 'c', 'd', 'e', 'f'],
			queues      => ARRAY['q', 'q', 'q', 'other', 'q', 'q'],
			unique_keys => ARRAY['dup', 'dup', NULL, 'dup', 'held', NULL])`)
		if len(ids) != 6 {
			t.Fatalf("jobs_enqueue_many returned %d ids, want 6: %v", len(ids), ids)
		}
		if ids[0] != ids[1] {
			t.Fatalf("duplicate keys in one call got ids %d and %d, want the same", ids[0], ids[1])
		}
		if ids[3] == ids[0] {
			t.Fatal("the same key in another queue shared the job")
		}
		if ids[4] != existing {
			t.Fatalf("a key already held returned %d, want the live job %d", ids[4], existing)
		}
		distinct := slices.Compact(slices.Sorted(slices.Values(ids)))
		if len(distinct) != 5 {
			t.Fatalf("ids %v: want 5 distinct jobs (4 new, 1 existing)", ids)
		}
		if n := queryOne[int64](t, b.Conn, "SELECT count(*) FROM jobs"); n != 5 {
			t.Fatalf("%d jobs in the table, want 5 (1 existing + 4 new)", n)
		}
		if kind := queryOne[string](t, b.Conn, "SELECT kind FROM jobs WHERE id = $1", ids[0]); kind != "a" {
			t.Fatalf("the keyed job has kind %s, want a (the first of the call)", kind)
		}
		for i, id := range ids {
			if q := queryOne[string](t, b.Conn, "SELECT queue FROM jobs WHERE id = $1", id); q != []string{"q", "q", "q", "other", "q", "q"}[i] {
				t.Fatalf("ids[%d] = %d is in queue %s", i, id, q)
			}
		}
	})

	t.Run("EnqueueManyWithoutKeysKeepsInputOrder", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		ids := queryList[int64](t, b.Conn, `SELECT * FROM jobs_enqueue_many(
			kinds    => ARRAY['k1', 'k2', 'k3'],
			payloads => ARRAY['{"n": 1}', '{"n": 2}', '{"n": 3}']::jsonb[],
			queues   => ARRAY['a', 'b', 'a'])`)
		got := queryList[string](t, b.Conn, "SELECT kind || ':' || queue || ':' || (payload->>'n') FROM jobs WHERE id = ANY($1) ORDER BY array_position($1, id)", ids)
		if want := []string{"k1:a:1", "k2:b:2", "k3:a:3"}; !slices.Equal(got, want) {
			t.Fatalf("jobs by returned id = %v, want %v", got, want)
		}
	})
}
