package sqltest

import (
	"encoding/json"
	"testing"
)

// Bounds of a fair queue's claim: the group of jobs without a key is found whatever the
// backlog of keyed jobs ahead of it, and a claim passes over a bounded number of keys that
// give it nothing.

// TestFairUnkeyedNotStarved: in a fair queue, 3 jobs without a key enqueued behind 5,000 of a
// big key (and 3 of a small key) are all claimed within 5,000/1,000 + 2 claims of 10: each
// claim's look for them goes on 1,000 ready jobs further from where the previous one stopped.
// A job without a key enqueued later at a better priority is still taken by the next claim
// (the look always starts with the queue's best ready jobs).
func TestFairUnkeyedNotStarved(t *testing.T) {
	t.Parallel()
	b := setup(t)
	mustExec(t, b.Conn, "SELECT jobs_set_concurrency('q', NULL, NULL, fair => true)")
	mustExec(t, b.Conn, `SELECT count(*) FROM jobs_enqueue_many(
		kinds => array_fill('k'::text, ARRAY[5000]), queues => array_fill('q'::text, ARRAY[5000]),
		concurrency_keys => array_fill('big'::text, ARRAY[5000]), notify => false)`)
	mustExec(t, b.Conn, `SELECT count(*) FROM jobs_enqueue_many(
		kinds => array_fill('k'::text, ARRAY[3]), queues => array_fill('q'::text, ARRAY[3]),
		concurrency_keys => array_fill('small'::text, ARRAY[3]), notify => false)`)
	mustExec(t, b.Conn, `SELECT count(*) FROM jobs_enqueue_many(
		kinds => array_fill('k'::text, ARRAY[3]), queues => array_fill('q'::text, ARRAY[3]), notify => false)`)

	claims, big := 0, 0
	for queryOne[int64](t, b.Conn, "SELECT count(*) FROM jobs WHERE queue = 'q' AND concurrency_key IS NULL AND state = 'queued'") > 0 {
		claims++
		if claims > 7 {
			t.Fatalf("after %d claims of 10 (%d of the big key's jobs), jobs without a key are still queued", claims-1, big)
		}
		for _, k := range claimKeys(t, b.Conn, "q", 10) {
			if k == "big" {
				big++
			}
		}
		mustExec(t, b.Conn, "SELECT jobs_complete(id, attempts) FROM jobs WHERE queue = 'q' AND state = 'running'")
	}
	t.Logf("jobs without a key behind 5,000 of a big key: all 3 claimed by claim %d; %d of the big key's jobs started before", claims, big)

	// The look has moved on past the queue's best jobs; a better job without a key is
	// found at once all the same.
	enqueue(t, b.Conn, "queue => 'q', priority => -10")
	enqueue(t, b.Conn, "queue => 'q', priority => 5")
	got := claimKeys(t, b.Conn, "q", 10)
	if len(got) == 0 || got[0] != "" {
		t.Fatalf("claim after a better job without a key took %q, want it first", got)
	}
}

// TestFairWalkBounded: a fair queue with 20,000 keys whose one job each is an hour away (the
// shape debounced jobs give) and one key with a ready job. A claim passes over at most 1,000
// keys that give it nothing and leaves the queue's cursor at the last one (so it looked at
// exactly 1,000 keys: the cursor says where it stopped), its buffer reads stay bounded, and
// the ready key's job is claimed within 20,000/1,000 + 1 claims.
func TestFairWalkBounded(t *testing.T) {
	t.Parallel()
	b := setup(t)
	mustExec(t, b.Conn, "SELECT jobs_set_concurrency('q', NULL, NULL, fair => true)")
	mustExec(t, b.Conn, `SELECT count(*) FROM jobs_enqueue_many(
		kinds => array_fill('k'::text, ARRAY[20000]), queues => array_fill('q'::text, ARRAY[20000]),
		run_ats => array_fill(now() + interval '1 hour', ARRAY[20000]),
		concurrency_keys => ARRAY(SELECT 'k' || lpad(i::text, 6, '0') FROM generate_series(1, 20000) i),
		notify => false)`)
	enqueue(t, b.Conn, "queue => 'q', concurrency_key => 'zzz'")
	mustExec(t, b.Conn, "ANALYZE jobs_queued")

	// Buffers touched by one claim (the function's statements are counted in its scan node),
	// rolled back; then the same claim for real.
	tx, err := b.Conn.Begin(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var plan []struct {
		Plan struct {
			SharedHit  int64 `json:"Shared Hit Blocks"`
			SharedRead int64 `json:"Shared Read Blocks"`
		} `json:"Plan"`
	}
	var raw []byte
	if err := tx.QueryRow(t.Context(), "EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) SELECT * FROM jobs_claim('w', 1, '{q}')").Scan(&raw); err != nil {
		t.Fatal(err)
	}
	if err := tx.Rollback(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, &plan); err != nil {
		t.Fatal(err)
	}
	buffers := plan[0].Plan.SharedHit + plan[0].Plan.SharedRead
	if buffers > 20000 {
		t.Errorf("one claim touched %d buffers, want at most 20,000 (a walk of 1,000 keys)", buffers)
	}
	if got := claimKeys(t, b.Conn, "q", 1); len(got) != 0 {
		t.Fatalf("first claim took %v, want nothing (the ready key is after 20,000 others)", got)
	}
	if c := queryOne[string](t, b.Conn, "SELECT rr_cursor FROM jobs_queues WHERE queue = 'q'"); c != "k001000" {
		t.Fatalf("after one claim the cursor is %q, want k001000 (1,000 keys passed over)", c)
	}
	claims := 1
	for {
		claims++
		got := claimKeys(t, b.Conn, "q", 1)
		if len(got) == 1 && got[0] == "zzz" {
			break
		}
		if len(got) != 0 || claims >= 21 {
			t.Fatalf("claim %d took %v; want nothing until zzz, by claim 21", claims, got)
		}
	}
	t.Logf("one claim of 1: %d buffers; the ready key's job claimed by claim %d", buffers, claims)
	// Round-robin goes on: the next idle claims start at the first keys again.
	if got := claimKeys(t, b.Conn, "q", 1); len(got) != 0 {
		t.Fatalf("claim after zzz took %v, want nothing", got)
	}
}

// TestRatePerKeyUnkeyedNotStarved: in a queue that is not fair, with a rate per key (5 an
// hour), 3 jobs without a key enqueued behind 5,000 of a big key are claimed within
// 5,000/1,000 + 2 claims of 10, although the big key's budget is spent after its first 5
// starts and its jobs fill the queue's best ready jobs (before, they waited for the big key's
// whole backlog: 1,000 hours).
func TestRatePerKeyUnkeyedNotStarved(t *testing.T) {
	t.Parallel()
	b := setup(t)
	mustExec(t, b.Conn, "SELECT jobs_set_rate_limit('q', 5, '1 hour', per_key => true)")
	mustExec(t, b.Conn, `SELECT count(*) FROM jobs_enqueue_many(
		kinds => array_fill('k'::text, ARRAY[5000]), queues => array_fill('q'::text, ARRAY[5000]),
		concurrency_keys => array_fill('big'::text, ARRAY[5000]), notify => false)`)
	mustExec(t, b.Conn, `SELECT count(*) FROM jobs_enqueue_many(
		kinds => array_fill('k'::text, ARRAY[3]), queues => array_fill('q'::text, ARRAY[3]), notify => false)`)

	claims, big := 0, 0
	for queryOne[int64](t, b.Conn, "SELECT count(*) FROM jobs WHERE queue = 'q' AND concurrency_key IS NULL AND state = 'queued'") > 0 {
		claims++
		if claims > 7 {
			t.Fatalf("after %d claims of 10 (%d of the big key's jobs), jobs without a key are still queued", claims-1, big)
		}
		for _, k := range claimKeys(t, b.Conn, "q", 10) {
			if k == "big" {
				big++
			}
		}
		mustExec(t, b.Conn, "SELECT jobs_complete(id, attempts) FROM jobs WHERE queue = 'q' AND state = 'running'")
	}
	if big != 5 {
		t.Fatalf("%d of the big key's jobs started, want its rate, 5", big)
	}
	t.Logf("jobs without a key behind 5,000 of a key at its rate: all 3 claimed by claim %d", claims)
}
