package sqltest

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/skiplock/skiplock/tests/pgtest"
)

// Flow shaping: fair sharing between keys, ordered keys and rate limits per key
// (jobs_set_concurrency's fair and ordered, jobs_set_rate_limit's per_key).

// claimKeys claims up to n jobs of queue q and returns their concurrency keys in claim order
// ("" for none).
func claimKeys(t *testing.T, q querier, queue string, n int) []string {
	t.Helper()
	return queryList[string](t, q, `
		SELECT coalesce(j.concurrency_key, '')
		FROM jobs_claim('w', $2, ARRAY[$1]) c
		JOIN jobs j ON j.id = c.id
		ORDER BY c.priority, c.run_at, c.id`, queue, n)
}

// TestFlowSettings: fair and ordered NULL keep what is set, false switches them off, the
// row goes once nothing is set, and every reader of the settings sees them.
func TestFlowSettings(t *testing.T) {
	t.Parallel()
	b := setup(t)
	row := func() string {
		return queryOne[string](t, b.Conn, `
			SELECT coalesce((SELECT format('%s %s %s %s %s', max_running, per_key, fair, ordered, rate_per_key)
			                 FROM jobs_queues WHERE queue = 'q'), 'no row')`)
	}
	mustExec(t, b.Conn, "SELECT jobs_set_concurrency('q', NULL, NULL, fair => true)")
	if got := row(); got != "  t f f" {
		t.Fatalf("fair only: %q", got)
	}
	if !queryOne[bool](t, b.Conn, "SELECT jobs_queue_limited('q')") {
		t.Fatal("jobs_queue_limited of a fair queue is false")
	}
	// Two and three arguments leave fair and ordered alone.
	mustExec(t, b.Conn, "SELECT jobs_set_concurrency('q', 5)")
	mustExec(t, b.Conn, "SELECT jobs_set_concurrency('q', 5, 2, ordered => true)")
	if got := row(); got != "5 2 t t f" {
		t.Fatalf("after max_running 5, per_key 2, ordered: %q", got)
	}
	mustExec(t, b.Conn, "SELECT jobs_set_rate_limit('q', 3, '1 second', per_key => true)")
	if got := row(); got != "5 2 t t t" {
		t.Fatalf("after a rate per key: %q", got)
	}
	m := queryOne[string](t, b.Conn, "SELECT format('%s %s %s', fair, ordered, rate_per_key) FROM jobs_metrics() WHERE queue = 'q'")
	if m != "t t t" {
		t.Fatalf("jobs_metrics: fair ordered rate_per_key = %q", m)
	}
	if got := queryOne[*bool](t, b.Conn, "SELECT fair FROM jobs_metrics() WHERE queue IS NULL"); got != nil {
		t.Fatalf("jobs_metrics' total row has fair %v, want NULL", *got)
	}
	mustExec(t, b.Conn, "SELECT jobs_set_rate_limit('q', NULL, NULL)")
	mustExec(t, b.Conn, "SELECT jobs_set_concurrency('q', NULL, NULL)")
	if got := row(); got != "  t t f" {
		t.Fatalf("limits removed, fair and ordered kept: %q", got)
	}
	mustExec(t, b.Conn, "SELECT jobs_set_concurrency('q', NULL, NULL, fair => false)")
	if got := row(); got != "  f t f" {
		t.Fatalf("fair off: %q", got)
	}
	mustExec(t, b.Conn, "SELECT jobs_set_concurrency('q', NULL, NULL, ordered => false)")
	if got := row(); got != "no row" {
		t.Fatalf("nothing set: %q", got)
	}
	// A pause and a resume keep fair.
	mustExec(t, b.Conn, "SELECT jobs_set_concurrency('q', NULL, NULL, fair => true)")
	mustExec(t, b.Conn, "SELECT jobs_pause('q')")
	mustExec(t, b.Conn, "SELECT jobs_resume('q')")
	if got := row(); got != "  t f f" {
		t.Fatalf("after pause and resume: %q", got)
	}
}

// TestFairRoundRobin: one job per key per turn, the turn going on where the last claim
// stopped; jobs without a key are one group in the turn; a batch that one turn does not fill
// takes more of each key; priority orders the jobs within a key.
func TestFairRoundRobin(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for i := range 5 {
		enqueue(t, b.Conn, fmt.Sprintf("queue => 'q', concurrency_key => 'a', priority => %d", 10-i))
	}
	for range 3 {
		enqueue(t, b.Conn, "queue => 'q', concurrency_key => 'b'")
	}
	enqueue(t, b.Conn, "queue => 'q'")
	enqueue(t, b.Conn, "queue => 'q', concurrency_key => 'c'")
	mustExec(t, b.Conn, "SELECT jobs_set_concurrency('q', NULL, NULL, fair => true)")

	var order []string
	for range 4 {
		order = append(order, claimKeys(t, b.Conn, "q", 1)...)
	}
	if got := fmt.Sprint(order); got != "[a b c ]" {
		t.Fatalf("claims of 1 took keys %s, want a b c and the job without a key", got)
	}
	// The best job of a comes first: the last enqueued (priority 6).
	if p := queryOne[int32](t, b.Conn, "SELECT priority FROM jobs WHERE concurrency_key = 'a' AND state = 'running'"); p != 6 {
		t.Fatalf("a's first job has priority %d, want its best, 6", p)
	}
	// Left: a 4, b 2. A batch of 5 takes one of each, then the rest in shares.
	got := claimKeys(t, b.Conn, "q", 5)
	sort.Strings(got)
	if fmt.Sprint(got) != "[a a a b b]" {
		t.Fatalf("batch of 5 took %v, want a a a b b", got)
	}
	if got := claimKeys(t, b.Conn, "q", 5); fmt.Sprint(got) != "[a]" {
		t.Fatalf("last claim took %v, want a", got)
	}
}

// TestFairNoStarvation: a key with 100,000 ready jobs enqueued first does not starve one with
// 10 enqueued after them: all 10 start before the big key's 200th, with claims of 1 job,
// batches of 10, and 16 concurrent claimers of 1 to 3 jobs.
func TestFairNoStarvation(t *testing.T) {
	t.Parallel()
	const big = 100000
	for _, c := range []struct {
		name      string
		claimers  int
		batch     int // 0: 1 to 3 at random
		perKeyCap string
	}{
		{"Claims1", 1, 1, "NULL"},
		{"Batches10", 1, 10, "NULL"},
		{"Concurrent16PerKey3", 16, 0, "3"},
		{"ControlNotFair", 1, 10, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			start := time.Now()
			mustExec(t, b.Conn, `SELECT count(*) FROM jobs_enqueue_many(
				kinds => array_fill('k'::text, ARRAY[$1::int]), queues => array_fill('q'::text, ARRAY[$1::int]),
				concurrency_keys => array_fill('big'::text, ARRAY[$1::int]), notify => false)`, big)
			mustExec(t, b.Conn, `SELECT count(*) FROM jobs_enqueue_many(
				kinds => array_fill('k'::text, ARRAY[10]), queues => array_fill('q'::text, ARRAY[10]),
				concurrency_keys => array_fill('small'::text, ARRAY[10]), notify => false)`)
			mustExec(t, b.Conn, "ANALYZE jobs_queued")
			t.Logf("enqueued %d + 10 jobs in %s", big, time.Since(start).Round(time.Millisecond))
			if c.perKeyCap == "" {
				// Without fair, the first 200 starts are all the big key's: the test can
				// tell.
				mustExec(t, b.Conn, "SELECT jobs_set_concurrency('q', 100000)")
				for range 20 {
					claimN(t, b.Conn, "q", 10)
				}
				if n := queryOne[int64](t, b.Conn, "SELECT count(*) FROM jobs WHERE concurrency_key = 'small' AND state <> 'queued'"); n != 0 {
					t.Fatalf("without fair, %d of the small key's jobs started among the first 200", n)
				}
				return
			}
			mustExec(t, b.Conn, "SELECT jobs_set_concurrency('q', NULL, "+c.perKeyCap+", fair => true)")

			// Each claimer completes what it claims, and stops once the small key is done.
			ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
			defer cancel()
			var (
				wg   sync.WaitGroup
				mu   sync.Mutex
				errs []error
				seq  atomic.Int64
			)
			for i := range c.claimers {
				conn := b.Connect(t)
				wg.Add(1)
				go func() {
					defer wg.Done()
					for ctx.Err() == nil {
						n := c.batch
						if n == 0 {
							n = 1 + rand.IntN(3)
						}
						jobs, err := tryClaim(ctx, conn, fmt.Sprintf("w%02d", i), n, []string{"q"}, "1 minute")
						if err == nil {
							for _, j := range jobs {
								if _, err = conn.Exec(ctx, "SELECT jobs_complete($1, $2)", j.ID, j.Attempt); err != nil {
									break
								}
							}
						}
						if err != nil {
							if ctx.Err() == nil {
								mu.Lock()
								errs = append(errs, err)
								mu.Unlock()
							}
							return
						}
						seq.Add(1)
						var left int64
						if err := conn.QueryRow(ctx, "SELECT count(*) FROM jobs WHERE concurrency_key = 'small' AND state <> 'done'").Scan(&left); err != nil || left == 0 {
							cancel()
							return
						}
					}
				}()
			}
			wg.Wait()
			if err := errors.Join(errs...); err != nil {
				t.Fatal(err)
			}
			// Starts in claim order (started_at, the claim's now(); id within a claim). The
			// small key's last start's position among all starts, and how many big jobs
			// started at or before it (ties of concurrent claims counted against it).
			smallDone := queryOne[int64](t, b.Conn, "SELECT count(*) FROM jobs WHERE concurrency_key = 'small' AND state = 'done'")
			if smallDone != 10 {
				t.Fatalf("the small key's jobs done: %d of 10", smallDone)
			}
			bigBefore := queryOne[int64](t, b.Conn, `
				SELECT count(*) FROM jobs
				WHERE concurrency_key = 'big' AND started_at <= (SELECT max(started_at) FROM jobs WHERE concurrency_key = 'small')`)
			pos := queryOne[int64](t, b.Conn, `
				SELECT count(*) FROM jobs
				WHERE started_at <= (SELECT max(started_at) FROM jobs WHERE concurrency_key = 'small')`)
			t.Logf("%s: big key %d jobs vs small key 10: the small key's last start is start %d of all; %d of the big key's started by then (claims %d)",
				c.name, big, pos, bigBefore, seq.Load())
			if bigBefore >= 200 || pos >= 200 {
				t.Fatalf("the small key's last job started at position %d, after %d of the big key's: starved", pos, bigBefore)
			}
		})
	}
}

// TestFairLimitsExact: 16 concurrent claimers on a fair queue with per_key (and max_running)
// never take a key over per_key nor the queue over max_running.
func TestFairLimitsExact(t *testing.T) {
	t.Parallel()
	d := 3 * time.Second
	if testing.Short() {
		d = time.Second
	}
	t.Run("PerKey2Over20Keys", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		enqueueKeyed(t, b.Conn, "q", 2000, 20)
		mustExec(t, b.Conn, "SELECT jobs_set_concurrency('q', NULL, 2, fair => true)")
		r := hammerLimitedQueue(t, b, "q", d, func(_, mostKey int64) bool { return mostKey >= 2 })
		t.Logf("fair, per_key 2 over 20 keys: most running of one key %d (of the queue %d) in %d samples, %d claims (%d by jobs_complete_and_claim)",
			r.maxPerKey, r.maxRunning, r.samples, r.claims, r.combined)
		if r.maxPerKey > 2 {
			t.Fatalf("%d jobs of one key running at once, per_key 2", r.maxPerKey)
		}
		if r.maxPerKey < 2 {
			t.Fatalf("never saw a key at its limit (most %d): the load is too light to test it", r.maxPerKey)
		}
	})
	t.Run("MaxRunning5PerKey1", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		enqueueKeyed(t, b.Conn, "q", 2000, 3)
		enqueueKeyed(t, b.Conn, "q", 500, 0)
		mustExec(t, b.Conn, "SELECT jobs_set_concurrency('q', 5, 1, fair => true)")
		r := hammerLimitedQueue(t, b, "q", d, func(most, mostKey int64) bool { return most >= 5 && mostKey >= 1 })
		t.Logf("fair, max_running 5, per_key 1 over 3 keys and jobs without a key: most running %d, of one key %d in %d samples, %d claims",
			r.maxRunning, r.maxPerKey, r.samples, r.claims)
		if r.maxPerKey > 1 || r.maxRunning > 5 {
			t.Fatalf("most running %d (limit 5), of one key %d (limit 1)", r.maxRunning, r.maxPerKey)
		}
	})
}

// orderedRun drains an ordered queue with 16 concurrent claimers that complete, fail (retried
// a few milliseconds later, or dead at the last attempt) or snooze what they claim, logging
// every start (a row in start_log, numbered, before the job is finished). It returns the
// order violations: starts of a job of a key after a start of a later job of that key (a
// failed head must run again, or die, before the next job starts), and the most running jobs
// of one key seen by a sampler.
func orderedRun(t *testing.T, b *testBundle, q string) (violations, mostKey, starts int64) {
	t.Helper()
	const claimers = 16
	mustExec(t, b.Conn, "CREATE TABLE start_log (seq bigserial, id bigint, key text)")
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	var (
		wg, sw sync.WaitGroup
		mu     sync.Mutex
		errs   []error
		most   atomic.Int64
	)
	fail := func(err error) {
		mu.Lock()
		defer mu.Unlock()
		errs = append(errs, err)
	}
	sampler := b.Connect(t)
	sctx, stop := context.WithCancel(ctx)
	sw.Add(1)
	go func() {
		defer sw.Done()
		for sctx.Err() == nil {
			var n int64
			if err := sampler.QueryRow(sctx, `SELECT coalesce(max(n), 0) FROM (SELECT count(*) AS n FROM jobs
				WHERE queue = $1 AND state = 'running' AND concurrency_key IS NOT NULL GROUP BY concurrency_key) s`, q).Scan(&n); err != nil {
				if sctx.Err() == nil {
					fail(fmt.Errorf("sampler: %w", err))
				}
				return
			}
			if n > most.Load() {
				most.Store(n)
			}
		}
	}()
	for i := range claimers {
		conn := b.Connect(t)
		wg.Add(1)
		go func() {
			defer wg.Done()
			idle := 0
			for ctx.Err() == nil {
				jobs, err := tryClaim(ctx, conn, fmt.Sprintf("w%02d", i), 1+rand.IntN(3), []string{q}, "1 minute")
				if err != nil {
					fail(fmt.Errorf("claim: %w", err))
					return
				}
				if len(jobs) == 0 {
					var left int64
					if err := conn.QueryRow(ctx, "SELECT count(*) FROM jobs WHERE queue = $1 AND state IN ('queued', 'running')", q).Scan(&left); err != nil {
						fail(err)
						return
					}
					if left == 0 {
						return
					}
					idle++
					time.Sleep(time.Duration(min(idle, 10)) * time.Millisecond)
					continue
				}
				idle = 0
				for _, j := range jobs {
					if _, err := conn.Exec(ctx, "INSERT INTO start_log (id, key) SELECT id, concurrency_key FROM jobs WHERE id = $1", j.ID); err != nil {
						fail(err)
						return
					}
					var sql string
					switch r := rand.IntN(10); {
					case r < 6:
						sql = "SELECT jobs_complete($1, $2)::text"
					case r < 9:
						sql = "SELECT jobs_fail($1, $2, 'again', now() + interval '5 milliseconds')::text"
					default:
						sql = "SELECT jobs_snooze($1, $2, now() + interval '3 milliseconds')::text"
					}
					var out string
					if err := conn.QueryRow(ctx, sql, j.ID, j.Attempt).Scan(&out); err != nil {
						fail(fmt.Errorf("%s for job %d: %w", sql, j.ID, err))
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	stop()
	sw.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	if left := queryOne[int64](t, b.Conn, "SELECT count(*) FROM jobs WHERE queue = $1 AND state NOT IN ('done', 'dead')", q); left != 0 {
		t.Fatalf("%d jobs neither done nor dead: a key is stuck", left)
	}
	violations = queryOne[int64](t, b.Conn, `
		SELECT count(*) FROM (
		    SELECT id, lag(id) OVER (PARTITION BY key ORDER BY seq) AS prev FROM start_log WHERE key IS NOT NULL) s
		WHERE id < prev`)
	starts = queryOne[int64](t, b.Conn, "SELECT count(*) FROM start_log")
	return violations, most.Load(), starts
}

// TestOrderedKeysExact: with 16 concurrent claimers and failures, retries and snoozes mixed
// in, the jobs of a key start one at a time, in id order, a failed job running again (or
// dying) before the next job of its key starts; every job ends done or dead.
func TestOrderedKeysExact(t *testing.T) {
	t.Parallel()
	for _, fair := range []bool{false, true} {
		t.Run(fmt.Sprintf("Fair%v", fair), func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			// 20 keys of 30 jobs, a few attempts each: some die, which releases the next.
			mustExec(t, b.Conn, `SELECT count(*) FROM jobs_enqueue_many(
				kinds => array_fill('k'::text, ARRAY[600]), queues => array_fill('q'::text, ARRAY[600]),
				max_attempts => array_fill(3, ARRAY[600]),
				priorities => ARRAY(SELECT (random() * 5)::int FROM generate_series(1, 600)),
				concurrency_keys => ARRAY(SELECT 'key' || (i % 20) FROM generate_series(1, 600) i))`)
			mustExec(t, b.Conn, "SELECT jobs_set_concurrency('q', NULL, NULL, fair => $1, ordered => true)", fair)
			v, most, starts := orderedRun(t, b, "q")
			dead := queryOne[int64](t, b.Conn, "SELECT count(*) FROM jobs WHERE state = 'dead'")
			t.Logf("ordered (fair %v), 20 keys x 30 jobs, 16 claimers: %d starts, %d dead, order violations %d, most running of one key %d",
				fair, starts, dead, v, most)
			if v != 0 {
				t.Fatalf("%d order violations", v)
			}
			if most > 1 {
				t.Fatalf("%d jobs of one key running at once", most)
			}
			if dead == 0 {
				t.Fatal("no job died: dead releasing the next job was not tested")
			}
		})
	}
}

// TestOrderedHeadHoldsKey: a job queued for its retry holds back the later jobs of its key
// (not other keys, nor jobs without a key, which are not ordered); done, dead and cancelled
// release the next; cancel and retry run it again first.
func TestOrderedHeadHoldsKey(t *testing.T) {
	t.Parallel()
	b := setup(t)
	a1 := enqueue(t, b.Conn, "queue => 'q', concurrency_key => 'a', priority => 9, max_attempts => 2")
	a2 := enqueue(t, b.Conn, "queue => 'q', concurrency_key => 'a', priority => 0")
	a3 := enqueue(t, b.Conn, "queue => 'q', concurrency_key => 'a', priority => 0")
	b1 := enqueue(t, b.Conn, "queue => 'q', concurrency_key => 'b'")
	enqueue(t, b.Conn, "queue => 'q'")
	enqueue(t, b.Conn, "queue => 'q'")
	mustExec(t, b.Conn, "SELECT jobs_set_concurrency('q', NULL, NULL, ordered => true)")

	ids := func(jobs []claimedJob) []int64 { return idsOf(jobs, func(j claimedJob) int64 { return j.ID }) }
	// a's head is a1 (lowest id), whatever the priorities; both unkeyed jobs come at once.
	first := claimN(t, b.Conn, "q", 10)
	if got := ids(first); len(got) != 4 || !containsID(got, a1) || !containsID(got, b1) {
		t.Fatalf("first claim %v, want a1 %d, b1 %d and the two jobs without a key", got, a1, b1)
	}
	if got := claimN(t, b.Conn, "q", 10); len(got) != 0 {
		t.Fatalf("a and b are running, yet the claim took %v", ids(got))
	}
	var a1Job claimedJob
	for _, j := range first {
		if j.ID == a1 {
			a1Job = j
		}
	}
	// a1 fails, to be retried in an hour: it holds a2 and a3 back.
	mustExec(t, b.Conn, "SELECT jobs_fail($1, $2, 'boom', now() + interval '1 hour')", a1, a1Job.Attempt)
	if got := claimN(t, b.Conn, "q", 10); len(got) != 0 {
		t.Fatalf("a's head waits for its retry, yet the claim took %v", ids(got))
	}
	// Cancel and retry in one transaction: a1 runs now, before a2.
	tx, err := b.Conn.Begin(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	mustExec(t, tx, "SELECT jobs_cancel($1)", a1)
	mustExec(t, tx, "SELECT jobs_retry($1)", a1)
	if err := tx.Commit(t.Context()); err != nil {
		t.Fatal(err)
	}
	again := claimN(t, b.Conn, "q", 10)
	if got := ids(again); len(got) != 1 || got[0] != a1 {
		t.Fatalf("after cancel and retry, claim took %v, want a1 %d", got, a1)
	}
	// Its last attempt fails: dead releases a2.
	if st := queryOne[string](t, b.Conn, "SELECT jobs_fail($1, $2, 'boom')::text", a1, again[0].Attempt); st != "dead" {
		t.Fatalf("a1 is %s, want dead", st)
	}
	next := claimN(t, b.Conn, "q", 10)
	if got := ids(next); len(got) != 1 || got[0] != a2 {
		t.Fatalf("after a1 died, claim took %v, want a2 %d", got, a2)
	}
	// a2 snoozed holds a3; cancelled, it releases a3.
	mustExec(t, b.Conn, "SELECT jobs_snooze($1, $2, now() + interval '1 hour')", a2, next[0].Attempt)
	if got := claimN(t, b.Conn, "q", 10); len(got) != 0 {
		t.Fatalf("a2 snoozed, yet the claim took %v", ids(got))
	}
	mustExec(t, b.Conn, "SELECT jobs_cancel($1)", a2)
	if got := ids(claimN(t, b.Conn, "q", 10)); len(got) != 1 || got[0] != a3 {
		t.Fatalf("after a2 was cancelled, claim took %v, want a3 %d", got, a3)
	}
}

// TestOrderedWaitingJobJoinsWhenQueued: a job waiting for its parent is not queued, so it
// holds its key's later jobs back no more than a job not yet enqueued would; once its parent
// is done it takes its place in the key's order by id.
func TestOrderedWaitingJobJoinsWhenQueued(t *testing.T) {
	t.Parallel()
	b := setup(t)
	mustExec(t, b.Conn, "SELECT jobs_set_concurrency('q', NULL, NULL, ordered => true)")
	parent := enqueue(t, b.Conn, "queue => 'parents'")
	waiting := enqueue(t, b.Conn, fmt.Sprintf("queue => 'q', concurrency_key => 'acct', depends_on => ARRAY[%d]::bigint[]", parent))
	later := enqueue(t, b.Conn, "queue => 'q', concurrency_key => 'acct'")

	ids := func(jobs []claimedJob) []int64 { return idsOf(jobs, func(j claimedJob) int64 { return j.ID }) }
	got := claimN(t, b.Conn, "q", 10)
	if len(got) != 1 || got[0].ID != later {
		t.Fatalf("claim took %v, want the queued job %d (the waiting %d holds nothing back)", ids(got), later, waiting)
	}
	// The parent finishes while the later job runs: the waiting job is queued, and an
	// enqueue after it comes after it.
	p := claimOne(t, b.Conn, "w", "parents", "1 hour")
	mustExec(t, b.Conn, "SELECT jobs_complete($1, $2)", p.ID, p.Attempt)
	last := enqueue(t, b.Conn, "queue => 'q', concurrency_key => 'acct'")
	if more := claimN(t, b.Conn, "q", 10); len(more) != 0 {
		t.Fatalf("acct runs %d, yet the claim took %v", later, ids(more))
	}
	mustExec(t, b.Conn, "SELECT jobs_complete($1, $2)", got[0].ID, got[0].Attempt)
	for _, want := range []int64{waiting, last} {
		next := claimN(t, b.Conn, "q", 10)
		if len(next) != 1 || next[0].ID != want {
			t.Fatalf("claim took %v, want %d", ids(next), want)
		}
		mustExec(t, b.Conn, "SELECT jobs_complete($1, $2)", next[0].ID, next[0].Attempt)
	}
}

func containsID(ids []int64, id int64) bool {
	for _, x := range ids {
		if x == id {
			return true
		}
	}
	return false
}

// TestRatePerKeyExact: 16 concurrent claimers against max_starts 3 per 500ms per key, over 4
// keys and jobs without a key (a group of their own): no window of 500ms holds more than 3
// starts of one key (every window that begins at a start is checked), and every key used
// most of its budget.
func TestRatePerKeyExact(t *testing.T) {
	t.Parallel()
	const (
		claimers  = 16
		maxStarts = 3
		per       = 500 * time.Millisecond
		d         = 2500 * time.Millisecond
	)
	for _, fair := range []bool{false, true} {
		t.Run(fmt.Sprintf("Fair%v", fair), func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			// Keys key0 to key3 and no key, interleaved in enqueue order.
			mustExec(t, b.Conn, `SELECT count(*) FROM jobs_enqueue_many(
				kinds => array_fill('k'::text, ARRAY[1000]), queues => array_fill('q'::text, ARRAY[1000]),
				concurrency_keys => ARRAY(SELECT CASE WHEN i % 5 < 4 THEN 'key' || (i % 5) END FROM generate_series(1, 1000) i))`)
			mustExec(t, b.Conn, "SELECT jobs_set_rate_limit('q', $1, $2, per_key => true)", maxStarts, per)
			mustExec(t, b.Conn, "SELECT jobs_set_concurrency('q', NULL, NULL, fair => $1)", fair)

			conns := make([]*pgx.Conn, claimers)
			for i := range conns {
				conns[i] = b.Connect(t)
			}
			ctx, cancel := context.WithTimeout(t.Context(), d)
			defer cancel()
			var (
				wg   sync.WaitGroup
				mu   sync.Mutex
				errs []error
			)
			for i := range claimers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for ctx.Err() == nil {
						jobs, err := tryClaim(ctx, conns[i], fmt.Sprintf("w%d", i), 1+rand.IntN(3), []string{"q"}, "1 minute")
						if err == nil {
							for _, j := range jobs {
								if _, err = conns[i].Exec(context.Background(), "SELECT jobs_complete($1, $2)", j.ID, j.Attempt); err != nil {
									break
								}
							}
						}
						if err != nil {
							if ctx.Err() == nil {
								mu.Lock()
								errs = append(errs, err)
								mu.Unlock()
							}
							return
						}
					}
				}()
			}
			wg.Wait()
			if err := errors.Join(errs...); err != nil {
				t.Fatal(err)
			}
			type keyStarts struct {
				Key    string
				Starts int64
				Worst  int64
			}
			// Per key, its starts and the most of them in any window [t, t + per) that
			// begins at one of them.
			lines := queryList[string](t, b.Conn, `
				SELECT format('%s %s %s', coalesce(j.concurrency_key, '(none)'), count(*),
				       max((SELECT count(*) FROM jobs j2
				            WHERE j2.concurrency_key IS NOT DISTINCT FROM j.concurrency_key
				              AND j2.started_at >= j.started_at AND j2.started_at < j.started_at + $1::interval)))
				FROM jobs j WHERE j.started_at IS NOT NULL
				GROUP BY j.concurrency_key ORDER BY 1`, per)
			rows := make([]keyStarts, len(lines))
			for i, l := range lines {
				if _, err := fmt.Sscan(l, &rows[i].Key, &rows[i].Starts, &rows[i].Worst); err != nil {
					t.Fatalf("%q: %v", l, err)
				}
			}
			if len(rows) != 5 {
				t.Fatalf("starts of %d groups, want 4 keys and the jobs without one: %+v", len(rows), rows)
			}
			for _, r := range rows {
				t.Logf("rate %d per %s per key (fair %v): %s: %d starts in %s, most in one window %d", maxStarts, per, fair, r.Key, r.Starts, d, r.Worst)
				if r.Worst > maxStarts {
					t.Fatalf("key %s: %d starts within one window of %s, limit %d", r.Key, r.Worst, per, maxStarts)
				}
				// More than one window's budget at least: the window slides for every group
				// (a loaded machine may lose windows, so no more is asked).
				if min := int64(maxStarts + 1); r.Starts < min {
					t.Fatalf("key %s: only %d starts in %s: the limit is held too tight", r.Key, r.Starts, d)
				}
			}
		})
	}
}

// TestRatePerKeyNextStart: jobs_next_start of a queue with a rate per key is the moment the
// first full key gets a start back, NULL when no key is full.
func TestRatePerKeyNextStart(t *testing.T) {
	t.Parallel()
	b := setup(t)
	enqueueKeyed(t, b.Conn, "q", 10, 2)
	mustExec(t, b.Conn, "SELECT jobs_set_rate_limit('q', 2, '1 hour', per_key => true)")
	if v := queryOne[*time.Time](t, b.Conn, "SELECT jobs_next_start('q')"); v != nil {
		t.Fatalf("no key full, jobs_next_start = %v, want NULL", v)
	}
	if got := claimN(t, b.Conn, "q", 10); len(got) != 4 {
		t.Fatalf("claim took %d jobs, want 2 of each of the 2 keys", len(got))
	}
	if got := claimN(t, b.Conn, "q", 10); len(got) != 0 {
		t.Fatalf("both keys spent, claim took %d", len(got))
	}
	if !queryOne[bool](t, b.Conn, `
		SELECT jobs_next_start('q') = (SELECT min(started_at) FROM jobs WHERE queue = 'q') + interval '1 hour'`) {
		t.Fatal("jobs_next_start is not the first start plus the window")
	}
	// A job of a new key starts at once: its window is empty.
	enqueue(t, b.Conn, "queue => 'q', concurrency_key => 'other'")
	if got := claimN(t, b.Conn, "q", 10); len(got) != 1 {
		t.Fatalf("a new key's job: claim took %d, want 1", len(got))
	}
}

// TestFlowHandoverExcluded: jobs_complete_and_claim hands a freed slot over without the
// queue's row only for max_running alone: a fair or ordered queue with max_running, whose
// row another transaction holds, gives nothing (the control, max_running alone, hands over).
func TestFlowHandoverExcluded(t *testing.T) {
	t.Parallel()
	for setting, want := range map[string]int{"fair => true": 0, "ordered => true": 0, "fair => false": 1} {
		t.Run(setting, func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			enqueueKeyed(t, b.Conn, "q", 10, 5)
			mustExec(t, b.Conn, "SELECT jobs_set_concurrency('q', 1, NULL, "+setting+")")
			j := claimN(t, b.Conn, "q", 1)
			if len(j) != 1 {
				t.Fatalf("claimed %d", len(j))
			}
			holder := b.Connect(t)
			tx, err := holder.Begin(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = tx.Rollback(context.Background()) }()
			mustExec(t, tx, "SELECT FROM jobs_queues WHERE queue = 'q' FOR UPDATE")
			res, err := completeAndClaim(t.Context(), b.Conn, "w", []int64{j[0].ID}, []int32{j[0].Attempt}, 1, []string{"q"}, "1 minute")
			if err != nil {
				t.Fatal(err)
			}
			if len(res.Completed) != 1 || len(res.Claimed) != want {
				t.Fatalf("completed %v, claimed %d jobs; want the completion and %d handed over", res.Completed, len(res.Claimed), want)
			}
		})
	}
}

// TestFlowRepeatableRead: a claim of a fair or ordered queue (no limit) in a REPEATABLE READ
// transaction is refused (0A000), as for limited queues: its snapshot could predate the
// previous claim's commit, so the turn or the key's running job would be misread.
func TestFlowRepeatableRead(t *testing.T) {
	t.Parallel()
	for _, setting := range []string{"fair => true", "ordered => true"} {
		t.Run(setting, func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			enqueueKeyed(t, b.Conn, "q", 3, 2)
			mustExec(t, b.Conn, "SELECT jobs_set_concurrency('q', NULL, NULL, "+setting+")")
			tx, err := b.Conn.BeginTx(t.Context(), pgx.TxOptions{IsoLevel: pgx.RepeatableRead})
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = tx.Rollback(context.Background()) }()
			_, err = tryClaim(t.Context(), tx, "w", 1, []string{"q"}, "1 minute")
			pgtest.RequirePgError(t, err, "0A000")
		})
	}
}

// TestOrderedNotify: in an ordered queue (no limit), a job that leaves running by
// completion, death or cancel NOTIFYs jobs_ready with the queue name, since its key's next
// job may now run; a queue without settings is not notified for it.
func TestOrderedNotify(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for range 4 {
		enqueue(t, b.Conn, "queue => 'o', concurrency_key => 'a', max_attempts => 1")
		enqueue(t, b.Conn, "queue => 'plain', concurrency_key => 'a', max_attempts => 1")
	}
	mustExec(t, b.Conn, "SELECT jobs_set_concurrency('o', NULL, NULL, ordered => true)")
	l := listen(t, b)
	for _, outcome := range []string{
		"SELECT jobs_complete($1, $2)",
		"SELECT jobs_fail($1, $2, 'boom') IS NOT NULL",
		"SELECT jobs_cancel($1, $2, 'stop')",
	} {
		for _, q := range []string{"o", "plain"} {
			j := claimN(t, b.Conn, q, 1)
			if len(j) != 1 {
				t.Fatalf("%s: claimed %d", q, len(j))
			}
			mustExec(t, b.Conn, outcome, j[0].ID, j[0].Attempt)
		}
		requirePayloads(t, l.drain(t, b), "o")
	}
}
