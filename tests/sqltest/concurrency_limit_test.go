package sqltest

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/skiplock/skiplock/tests/pgtest"
)

// hammerResult is what hammerLimitedQueue saw.
type hammerResult struct {
	maxRunning int64 // most jobs of the queue running in one sample
	maxPerKey  int64 // most running jobs sharing one concurrency_key in one sample
	samples    int64
	claims     int64
	combined   int64 // jobs claimed by jobs_complete_and_claim
}

// hammerLimitedQueue runs 16 sessions that claim from queue q in tight loops (1 to 3 jobs a
// call) while one more session samples the queue's running jobs continuously, each sample
// one snapshot. Even sessions claim with jobs_claim and give each job back at once by
// complete, fail (retried now) or snooze; odd ones cycle through jobs_complete_and_claim,
// each call completing what the previous one claimed (its claim skips the queue while
// another session holds the queue's jobs_queues row, so the two kinds of claim mix).
//
// d is the least it runs; it goes on (up to a minute) until it has 50 claims and 50 samples
// and the most running seen meet seen(maxRunning, maxPerKey), which a loaded machine may
// need longer for: there the sampler's snapshots catch fewer of the moments the queue is
// full.
func hammerLimitedQueue(t *testing.T, b *testBundle, q string, d time.Duration, seen func(maxRunning, maxPerKey int64) bool) hammerResult {
	t.Helper()
	const claimers = 16
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()

	var (
		wg       sync.WaitGroup
		res      hammerResult
		claims   atomic.Int64
		combined atomic.Int64
		samples  atomic.Int64
		most     atomic.Int64 // res.maxRunning, for the goroutine that ends the run
		mostKey  atomic.Int64 // res.maxPerKey, likewise
		mu       sync.Mutex
		errs     []error
	)
	go func() {
		started := time.Now()
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
				if time.Since(started) >= d && claims.Load() >= 50 && samples.Load() >= 50 &&
					seen(most.Load(), mostKey.Load()) {
					cancel()
					return
				}
			}
		}
	}()
	fail := func(err error) {
		mu.Lock()
		defer mu.Unlock()
		errs = append(errs, err)
	}
	conns := make([]*pgx.Conn, claimers+1)
	for i := range conns {
		conns[i] = b.Connect(t)
	}
	for i := range claimers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			conn := conns[i]
			worker := fmt.Sprintf("w%02d", i)
			if i%2 == 1 {
				var held []claimedJob
				for ctx.Err() == nil {
					ids, attempts := fence(held)
					res, err := completeAndClaim(ctx, conn, worker, ids, attempts, 1+rand.IntN(3), []string{q}, "5 minutes")
					if err != nil {
						if ctx.Err() == nil {
							fail(fmt.Errorf("%s: complete and claim: %w", worker, err))
						}
						return
					}
					if len(res.Completed) != len(held) {
						fail(fmt.Errorf("%s: completed %v of %v", worker, res.Completed, ids))
						return
					}
					claims.Add(1)
					combined.Add(int64(len(res.Claimed)))
					held = res.Claimed
				}
				// Not ctx: a job left running would only lower what the sampler sees.
				ids, attempts := fence(held)
				if _, err := completeAndClaim(context.Background(), conn, worker, ids, attempts, 0, nil, "5 minutes"); err != nil {
					fail(fmt.Errorf("%s: last completion: %w", worker, err))
				}
				return
			}
			for ctx.Err() == nil {
				jobs, err := tryClaim(ctx, conn, worker, 1+rand.IntN(3), []string{q}, "5 minutes")
				if err != nil {
					if ctx.Err() == nil {
						fail(fmt.Errorf("%s: claim: %w", worker, err))
					}
					return
				}
				claims.Add(1)
				for _, j := range jobs {
					var sql string
					switch rand.IntN(3) {
					case 0:
						sql = "SELECT jobs_complete($1, $2)"
					case 1:
						sql = "SELECT jobs_fail($1, $2, 'again', now()) IS NOT NULL"
					default:
						sql = "SELECT jobs_snooze($1, $2, now())"
					}
					// Not ctx: a job left running would only lower what the sampler sees.
					var ok bool
					if err := conn.QueryRow(context.Background(), sql, j.ID, j.Attempt).Scan(&ok); err != nil || !ok {
						fail(fmt.Errorf("%s: %s for job %d: %v, %v", worker, sql, j.ID, ok, err))
						return
					}
				}
			}
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		conn := conns[claimers]
		for ctx.Err() == nil {
			var running, perKey int64
			err := conn.QueryRow(ctx, `
				SELECT coalesce(sum(n), 0), coalesce(max(n) FILTER (WHERE key IS NOT NULL), 0)
				FROM (SELECT concurrency_key AS key, count(*) AS n
				      FROM jobs WHERE queue = $1 AND state = 'running'
				      GROUP BY concurrency_key) s`, q).Scan(&running, &perKey)
			if err != nil {
				if ctx.Err() == nil {
					fail(fmt.Errorf("sampler: %w", err))
				}
				return
			}
			res.samples++
			samples.Add(1)
			res.maxRunning = max(res.maxRunning, running)
			res.maxPerKey = max(res.maxPerKey, perKey)
			most.Store(res.maxRunning)
			mostKey.Store(res.maxPerKey)
		}
	}()
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	res.claims = claims.Load()
	res.combined = combined.Load()
	if res.samples < 50 || res.claims < 50 {
		t.Fatalf("only %d samples and %d claims in %s: too few to say anything", res.samples, res.claims, d)
	}
	return res
}

// enqueueKeyed adds n jobs to queue q with many attempts (they are failed and retried over
// and over), cycling through keys concurrency keys (none when keys is 0).
func enqueueKeyed(t *testing.T, q querier, queue string, n, keys int) {
	t.Helper()
	mustExec(t, q, `SELECT count(*) FROM jobs_enqueue_many(
		kinds => array_fill('k'::text, ARRAY[$2::int]),
		queues => array_fill($1::text, ARRAY[$2::int]),
		max_attempts => array_fill(1000000, ARRAY[$2::int]),
		concurrency_keys => CASE WHEN $3::int > 0
		                         THEN ARRAY(SELECT 'key' || (i % $3::int) FROM generate_series(1, $2::int) i) END)`,
		queue, n, keys)
}

// TestConcurrencyLimitExact: 16 concurrent claimers in tight loops never take a queue over
// max_running, nor a key over per_key, in any sample. The control runs (no limit) show that
// the same load and sampler do see more, so the test would fail without the limit.
func TestConcurrencyLimitExact(t *testing.T) {
	t.Parallel()
	d := 3 * time.Second
	if testing.Short() {
		d = time.Second
	}

	t.Run("MaxRunning3", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		enqueueKeyed(t, b.Conn, "q", 2000, 0)
		mustExec(t, b.Conn, "SELECT jobs_set_concurrency('q', 3)")
		r := hammerLimitedQueue(t, b, "q", d, func(most, _ int64) bool { return most >= 3 })
		t.Logf("max_running 3: most running observed %d in %d samples, %d claims (%d jobs by jobs_complete_and_claim)",
			r.maxRunning, r.samples, r.claims, r.combined)
		if r.maxRunning > 3 {
			t.Fatalf("%d jobs running at once, limit 3", r.maxRunning)
		}
		if r.maxRunning < 3 {
			t.Fatalf("never saw the limit reached (most %d): the load is too light to test it", r.maxRunning)
		}
	})

	t.Run("PerKey1Over20Keys", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		enqueueKeyed(t, b.Conn, "q", 2000, 20)
		mustExec(t, b.Conn, "SELECT jobs_set_concurrency('q', NULL, 1)")
		r := hammerLimitedQueue(t, b, "q", d, func(_, mostKey int64) bool { return mostKey >= 1 })
		t.Logf("per_key 1 over 20 keys: most running of one key %d (of the queue %d) in %d samples, %d claims (%d jobs by jobs_complete_and_claim)",
			r.maxPerKey, r.maxRunning, r.samples, r.claims, r.combined)
		if r.maxPerKey > 1 {
			t.Fatalf("%d jobs of one key running at once, per_key 1", r.maxPerKey)
		}
		if r.maxRunning > 20 {
			t.Fatalf("%d jobs running with 20 keys at per_key 1", r.maxRunning)
		}
	})

	t.Run("ControlWithoutLimit", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		enqueueKeyed(t, b.Conn, "q", 2000, 20)
		r := hammerLimitedQueue(t, b, "q", d, func(most, mostKey int64) bool { return most > 3 && mostKey > 1 })
		t.Logf("no limit: most running %d, most of one key %d in %d samples, %d claims",
			r.maxRunning, r.maxPerKey, r.samples, r.claims)
		if r.maxRunning <= 3 || r.maxPerKey <= 1 {
			t.Fatalf("without limits the sampler saw at most %d running and %d of one key: it cannot catch a broken limit",
				r.maxRunning, r.maxPerKey)
		}
	})
}

// claimN claims up to n jobs of queue q and returns them.
func claimN(t *testing.T, q querier, queue string, n int) []claimedJob {
	t.Helper()
	return claim(t, q, "w", n, []string{queue}, "1 minute")
}

// TestConcurrencySlotReturns: a slot of a full queue comes back when its job leaves
// running by any path, with nothing to do but that path.
func TestConcurrencySlotReturns(t *testing.T) {
	t.Parallel()
	paths := []struct {
		name string
		sql  string // $1 id, $2 attempt; must return true
	}{
		{"Complete", "SELECT jobs_complete($1, $2)"},
		{"CompleteMany", "SELECT count(*) = 1 FROM jobs_complete_many(ARRAY[$1::bigint], ARRAY[$2::int])"},
		{"FailRetried", "SELECT jobs_fail($1, $2, 'boom', now() + interval '1 hour') = 'queued'"},
		{"FailBackoff", "SELECT jobs_fail($1, $2, 'boom') IS NOT NULL"},
		{"Snooze", "SELECT jobs_snooze($1, $2, now() + interval '1 hour')"},
		{"CancelFenced", "SELECT jobs_cancel($1, $2, 'stop')"},
		{"CancelAdmin", "SELECT jobs_cancel($1) AND $2::int > 0"},
	}
	for _, p := range paths {
		t.Run(p.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			enqueueKeyed(t, b.Conn, "q", 5, 0)
			mustExec(t, b.Conn, "SELECT jobs_set_concurrency('q', 2)")
			jobs := claimN(t, b.Conn, "q", 5)
			if len(jobs) != 2 {
				t.Fatalf("claimed %d jobs at max_running 2", len(jobs))
			}
			if got := claimN(t, b.Conn, "q", 5); len(got) != 0 {
				t.Fatalf("full queue gave %d more jobs", len(got))
			}
			if !queryOne[bool](t, b.Conn, p.sql, jobs[0].ID, jobs[0].Attempt) {
				t.Fatalf("%s returned false", p.sql)
			}
			if got := claimN(t, b.Conn, "q", 5); len(got) != 1 {
				t.Fatalf("after %s, claim got %d jobs, want the 1 freed slot", p.name, len(got))
			}
		})
	}

	t.Run("RequeueExpired", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		enqueueKeyed(t, b.Conn, "q", 5, 3)
		mustExec(t, b.Conn, "SELECT jobs_set_concurrency('q', 2, 1)")
		if jobs := claim(t, b.Conn, "w", 5, []string{"q"}, "100 milliseconds"); len(jobs) != 2 {
			t.Fatalf("claimed %d jobs at max_running 2", len(jobs))
		}
		if got := claimN(t, b.Conn, "q", 5); len(got) != 0 {
			t.Fatalf("full queue gave %d more jobs", len(got))
		}
		waitLeasesExpired(t, b.Conn)
		// The leases have expired, but the jobs still hold their slots until taken back.
		if got := claimN(t, b.Conn, "q", 5); len(got) != 0 {
			t.Fatalf("claim before requeue_expired gave %d jobs", len(got))
		}
		mustExec(t, b.Conn, "SELECT jobs_requeue_expired()")
		if got := claimN(t, b.Conn, "q", 5); len(got) != 2 {
			t.Fatalf("after requeue_expired, claim got %d jobs, want 2", len(got))
		}
	})
}

// TestPerKeyNoHeadOfLineBlocking: a key at its limit holds back no other key, order is kept
// among the rest, and one call never takes a key over per_key.
func TestPerKeyNoHeadOfLineBlocking(t *testing.T) {
	t.Parallel()
	b := setup(t)
	// The best jobs all belong to key a; b, c and one job without a key come after.
	for i := range 3 {
		enqueue(t, b.Conn, fmt.Sprintf("queue => 'q', priority => %d, concurrency_key => 'a'", i))
	}
	b1 := enqueue(t, b.Conn, "queue => 'q', priority => 10, concurrency_key => 'b'")
	enqueue(t, b.Conn, "queue => 'q', priority => 11, concurrency_key => 'b'")
	none := enqueue(t, b.Conn, "queue => 'q', priority => 12")
	c1 := enqueue(t, b.Conn, "queue => 'q', priority => 13, concurrency_key => 'c'")
	mustExec(t, b.Conn, "SELECT jobs_set_concurrency('q', NULL, 1)")

	first := claimN(t, b.Conn, "q", 1)
	if len(first) != 1 {
		t.Fatalf("claimed %d jobs, want 1", len(first))
	}
	// Key a is now at its limit: the next claims pass over its jobs.
	got := claimN(t, b.Conn, "q", 10)
	ids := make([]int64, len(got))
	for i, j := range got {
		ids[i] = j.ID
	}
	want := []int64{b1, none, c1}
	if fmt.Sprint(ids) != fmt.Sprint(want) {
		t.Fatalf("claim with key a at its limit returned %v, want %v (one job per key, in order)", ids, want)
	}
	if n := queryOne[int64](t, b.Conn,
		"SELECT max(n) FROM (SELECT count(*) AS n FROM jobs WHERE state = 'running' AND concurrency_key IS NOT NULL GROUP BY concurrency_key) s"); n != 1 {
		t.Fatalf("%d running jobs share a key, per_key 1", n)
	}
}

// TestLoweringLimit: a limit below the running count stops new claims until running falls
// below it; the running jobs are not touched.
func TestLoweringLimit(t *testing.T) {
	t.Parallel()
	b := setup(t)
	enqueueKeyed(t, b.Conn, "q", 10, 0)
	mustExec(t, b.Conn, "SELECT jobs_set_concurrency('q', 5)")
	jobs := claimN(t, b.Conn, "q", 10)
	if len(jobs) != 5 {
		t.Fatalf("claimed %d jobs at max_running 5", len(jobs))
	}
	mustExec(t, b.Conn, "SELECT jobs_set_concurrency('q', 2)")
	if n := queryOne[int64](t, b.Conn, "SELECT count(*) FROM jobs WHERE state = 'running'"); n != 5 {
		t.Fatalf("%d jobs running after lowering the limit, want the 5 untouched", n)
	}
	for i, want := range []int{0, 0, 0, 1} {
		mustExec(t, b.Conn, "SELECT jobs_complete($1, $2)", jobs[i].ID, jobs[i].Attempt)
		// running is now 4, 3, 2, 1.
		if got := claimN(t, b.Conn, "q", 10); len(got) != want {
			t.Fatalf("with %d running at max_running 2, claim got %d jobs, want %d", 4-i, len(got), want)
		}
	}
	// Removing the limit lets the rest go.
	mustExec(t, b.Conn, "SELECT jobs_set_concurrency('q', NULL)")
	if got := claimN(t, b.Conn, "q", 10); len(got) != 4 {
		t.Fatalf("after removing the limit, claim got %d jobs, want the 4 left", len(got))
	}
	if n := queryOne[int64](t, b.Conn, "SELECT count(*) FROM jobs_queues"); n != 0 {
		t.Fatalf("%d jobs_queues rows after removing every setting, want 0", n)
	}
}

// TestLimitedClaimNeedsReadCommitted: in REPEATABLE READ or SERIALIZABLE the claim's
// snapshot predates the previous claimer's commit, so a limited claim refuses with 0A000
// rather than risk going over; unlimited and merely paused queues claim as before.
func TestLimitedClaimNeedsReadCommitted(t *testing.T) {
	t.Parallel()
	b := setup(t)
	enqueueKeyed(t, b.Conn, "limited", 3, 0)
	enqueueKeyed(t, b.Conn, "free", 3, 0)
	enqueueKeyed(t, b.Conn, "paused", 3, 0)
	mustExec(t, b.Conn, "SELECT jobs_set_concurrency('limited', 5)")
	mustExec(t, b.Conn, "SELECT jobs_pause('paused')")

	for _, iso := range []pgx.TxIsoLevel{pgx.RepeatableRead, pgx.Serializable} {
		for _, queues := range [][]string{{"limited"}, nil} {
			tx, err := b.Conn.BeginTx(t.Context(), pgx.TxOptions{IsoLevel: iso})
			if err != nil {
				t.Fatal(err)
			}
			_, err = tryClaim(t.Context(), tx, "w", 1, queues, "1 minute")
			pgtest.RequirePgError(t, err, "0A000")
			_ = tx.Rollback(t.Context())
		}
		tx, err := b.Conn.BeginTx(t.Context(), pgx.TxOptions{IsoLevel: iso})
		if err != nil {
			t.Fatal(err)
		}
		if got := claim(t, tx, "w", 10, []string{"free", "paused"}, "1 minute"); len(got) != 3 {
			t.Fatalf("%s claim of an unlimited and a paused queue got %d jobs, want 3", iso, len(got))
		}
		_ = tx.Rollback(t.Context())
	}
}

// TestSetConcurrencyBadInput: bad arguments raise 22023 naming the parameter and change
// nothing.
func TestSetConcurrencyBadInput(t *testing.T) {
	t.Parallel()
	b := setup(t)
	mustExec(t, b.Conn, "SELECT jobs_set_concurrency('q', 4, 2)")
	for _, c := range []struct{ args, param string }{
		{"NULL, 1", "queue"},
		{"'', 1", "queue"},
		{"repeat('x', 201), 1", "queue"},
		{"'q', 0", "max_running"},
		{"'q', -1", "max_running"},
		{"'q', 1, 0", "per_key"},
		{"'q', NULL, -5", "per_key"},
		{"'q', 0, fair => false", "max_running"},
		{"'q', 1, 0, ordered => true", "per_key"},
	} {
		_, err := b.Conn.Exec(t.Context(), "SELECT jobs_set_concurrency("+c.args+")")
		if pgErr := pgtest.RequirePgError(t, err, "22023"); pgErr.ColumnName != c.param {
			t.Fatalf("jobs_set_concurrency(%s): error names %q, want %q", c.args, pgErr.ColumnName, c.param)
		}
	}
	for _, c := range []struct{ args, param string }{
		{"'k', concurrency_key => ''", "concurrency_key"},
		{"'k', concurrency_key => repeat('x', 201)", "concurrency_key"},
	} {
		_, err := b.Conn.Exec(t.Context(), "SELECT jobs_enqueue("+c.args+")")
		if pgErr := pgtest.RequirePgError(t, err, "22023"); pgErr.ColumnName != c.param {
			t.Fatalf("jobs_enqueue(%s): error names %q, want %q", c.args, pgErr.ColumnName, c.param)
		}
	}
	_, err := b.Conn.Exec(t.Context(), "SELECT jobs_enqueue_many(ARRAY['k', 'k'], concurrency_keys => ARRAY['a', ''])")
	if pgErr := pgtest.RequirePgError(t, err, "22023"); pgErr.ColumnName != "concurrency_keys[2]" {
		t.Fatalf("jobs_enqueue_many: error names %q, want concurrency_keys[2]", pgErr.ColumnName)
	}
	if s := queryOne[string](t, b.Conn, "SELECT format('%s/%s/%s/%s', max_running, per_key, fair, ordered) FROM jobs_queues WHERE queue = 'q'"); s != "4/2/f/f" {
		t.Fatalf("settings after bad calls %s, want 4/2/f/f", s)
	}
	if n := queryOne[int64](t, b.Conn, "SELECT count(*) FROM jobs"); n != 0 {
		t.Fatalf("%d jobs after bad enqueues, want 0", n)
	}
}

// TestSlotReturnNotifies: every path that takes a job of a concurrency-limited queue out of
// running NOTIFYs jobs_ready with the queue name, so a worker whose claim the limit cut
// short claims as soon as a slot comes back; the same calls on a queue without limits send
// nothing new.
func TestSlotReturnNotifies(t *testing.T) {
	t.Parallel()
	b := setup(t)
	l := listen(t, b)
	enqueueKeyed(t, b.Conn, "q", 10, 0)
	enqueueKeyed(t, b.Conn, "free", 10, 0)
	mustExec(t, b.Conn, "SELECT jobs_set_concurrency('q', 10)")
	mustExec(t, b.Conn, "UPDATE jobs SET max_attempts = 1 WHERE id IN (SELECT max(id) FROM jobs GROUP BY queue)")
	l.drain(t, b)

	for _, queue := range []string{"q", "free"} {
		jobs := claim(t, b.Conn, "w", 10, []string{queue}, "1 hour")
		if len(jobs) != 10 {
			t.Fatalf("claimed %d jobs of %s, want 10", len(jobs), queue)
		}
		var want []string
		if queue == "q" {
			want = []string{"q"}
		}
		for i, sql := range []string{
			"SELECT jobs_complete($1, $2)",
			"SELECT count(*) = 1 FROM jobs_complete_many(ARRAY[$1::bigint], ARRAY[$2::int])",
			"SELECT jobs_fail($1, $2, 'boom', now() + interval '1 hour') IS NOT NULL",
			"SELECT jobs_snooze($1, $2, now() + interval '1 hour')",
			"SELECT jobs_cancel($1, $2, 'stop')",
			"SELECT jobs_cancel($1) AND $2::int > 0",
		} {
			if !queryOne[bool](t, b.Conn, sql, jobs[i].ID, jobs[i].Attempt) {
				t.Fatalf("%s: %s returned false", queue, sql)
			}
			requirePayloads(t, l.drain(t, b), want...)
		}
	}
	// Lease expiry of a last attempt (dead, so nothing new is ready): only the limited
	// queue's slot return is announced.
	mustExec(t, b.Conn, "UPDATE jobs SET lease_expires_at = now() - interval '1 second' WHERE state = 'running' AND max_attempts = 1")
	// Their claims too: jobs_requeue_expired looks at a claim once its expires_at has passed.
	mustExec(t, b.Conn, "UPDATE jobs_claims c SET expires_at = now() - interval '1 second' FROM jobs j WHERE j.claim_id = c.claim_id AND j.state = 'running' AND j.max_attempts = 1")
	if n := queryOne[int32](t, b.Conn, "SELECT jobs_requeue_expired()"); n != 2 {
		t.Fatalf("jobs_requeue_expired took back %d jobs, want 2", n)
	}
	requirePayloads(t, l.drain(t, b), "q")
}

// TestLimitedClaimTakesTheBestAcrossQueues: whichever path each requested queue takes
// (max_running alone, the key walk, a rate limit's log, no limit at all), one claim returns
// the best max_jobs of what every queue's limits let in, in (priority, run_at, id) order.
func TestLimitedClaimTakesTheBestAcrossQueues(t *testing.T) {
	t.Parallel()
	b := setup(t)
	enqueue := func(queue, key string, priorities ...int) {
		t.Helper()
		for _, p := range priorities {
			mustExec(t, b.Conn, "SELECT jobs_enqueue('k', queue => $1, priority => $2, concurrency_key => nullif($3, ''))",
				queue, p, key)
		}
	}
	check := func(name string, got []claimedJob, want ...string) {
		t.Helper()
		var seen []string
		for _, j := range got {
			seen = append(seen, fmt.Sprintf("%s%d", j.Queue, j.Priority))
		}
		if fmt.Sprint(seen) != fmt.Sprint(want) {
			t.Fatalf("%s: claimed %v, want %v", name, seen, want)
		}
	}

	// Two limited queues: a by max_running (4 of its 5 jobs let in), b by per_key (2 of the
	// key's 3): the best 5 of those 6.
	mustExec(t, b.Conn, "SELECT jobs_set_concurrency('a', 4), jobs_set_concurrency('b', NULL, 2)")
	enqueue("a", "", 9, 7, 5, 3, 1)
	enqueue("b", "k", 6, 4, 2)
	check("a and b", claim(t, b.Conn, "w", 5, []string{"a", "b"}, "1 minute"), "a1", "b2", "a3", "b4", "a5")

	// One rate-limited queue: 3 starts an hour, logged.
	mustExec(t, b.Conn, "SELECT jobs_set_rate_limit('r', 3, '1 hour')")
	enqueue("r", "", 3, 1, 2, 0)
	check("r", claim(t, b.Conn, "w", 10, []string{"r"}, "1 minute"), "r0", "r1", "r2")
	if n := queryOne[int64](t, b.Conn, "SELECT count(*) FROM jobs_queue_starts WHERE queue = 'r'"); n != 3 {
		t.Fatalf("%d starts of r logged, want 3", n)
	}
	check("r again", claim(t, b.Conn, "w", 10, []string{"r"}, "1 minute"))

	// A limited queue beside one without limits.
	mustExec(t, b.Conn, "SELECT jobs_set_concurrency('c', 2)")
	enqueue("c", "", 5, 4, 1)
	enqueue("u", "", 6, 3, 2)
	check("c and u", claim(t, b.Conn, "w", 4, []string{"c", "u"}, "1 minute"), "c1", "u2", "u3", "c4")

	// jobs_complete_and_claim of one limited queue: its jobs in claim order.
	mustExec(t, b.Conn, "SELECT jobs_set_concurrency('d', 3)")
	enqueue("d", "", 5, 4, 3, 2, 1)
	rows, err := b.Conn.Query(t.Context(),
		"SELECT queue, priority FROM jobs_complete_and_claim('w', '{}', '{}', 10, '{d}') WHERE id IS NOT NULL")
	if err != nil {
		t.Fatal(err)
	}
	got, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (claimedJob, error) {
		var j claimedJob
		return j, r.Scan(&j.Queue, &j.Priority)
	})
	if err != nil {
		t.Fatal(err)
	}
	check("d", got, "d1", "d2", "d3")
}
