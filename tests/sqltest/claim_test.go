package sqltest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/skiplock/skiplock/tests/pgtest"
)

// TestClaimConcurrentSessions: 16 sessions claim 20,000 jobs (2,000 under -short) in
// batches and complete them in batches; every job must be claimed exactly once.
func TestClaimConcurrentSessions(t *testing.T) {
	t.Parallel()

	const (
		numWorkers = 16
		batch      = 50
	)
	numJobs := 20000
	if testing.Short() {
		numJobs = 2000
	}
	b := setup(t)

	// Half the jobs in queue a, half in b, enqueued with one call.
	mustExec(t, b.Conn, `SELECT count(*) FROM jobs_enqueue_many(
		kinds  => array_fill('work'::text, ARRAY[$1::int]),
		queues => ARRAY(SELECT CASE WHEN i % 2 = 0 THEN 'a' ELSE 'b' END FROM generate_series(1, $1::int) i))`, numJobs)

	// Each worker takes a different path through jobs_claim: one queue, two queues, all queues.
	queueSets := [][]string{{"a"}, {"b"}, {"a", "b"}, nil}

	type claimRecord struct {
		worker  string
		attempt int32
	}
	var (
		mu       sync.Mutex
		claims   = make(map[int64][]claimRecord, numJobs)
		claimed  atomic.Int64
		workerWG sync.WaitGroup
		errs     = make(chan error, numWorkers)
	)
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()

	conns := make([]*pgx.Conn, numWorkers)
	for i := range conns {
		conns[i] = b.Connect(t)
	}
	start := make(chan struct{})
	for i := range numWorkers {
		workerWG.Add(1)
		go func() {
			defer workerWG.Done()
			conn := conns[i]
			worker := fmt.Sprintf("worker-%02d", i)
			queues := queueSets[i%len(queueSets)]
			<-start
			for claimed.Load() < int64(numJobs) {
				jobs, err := tryClaim(ctx, conn, worker, batch, queues, "5 minutes")
				if err != nil {
					errs <- fmt.Errorf("%s: claim: %w", worker, err)
					return
				}
				if len(jobs) == 0 {
					// What is left is locked by other claimers right now, or in a queue this
					// worker does not read; look again shortly.
					select {
					case <-ctx.Done():
						errs <- fmt.Errorf("%s: gave up with %d of %d jobs claimed", worker, claimed.Load(), numJobs)
						return
					case <-time.After(2 * time.Millisecond):
					}
					continue
				}
				ids := make([]int64, len(jobs))
				attempts := make([]int32, len(jobs))
				mu.Lock()
				for k, j := range jobs {
					ids[k], attempts[k] = j.ID, j.Attempt
					claims[j.ID] = append(claims[j.ID], claimRecord{worker, j.Attempt})
				}
				mu.Unlock()
				claimed.Add(int64(len(jobs)))

				rows, err := conn.Query(ctx, "SELECT * FROM jobs_complete_many($1, $2)", ids, attempts)
				if err != nil {
					errs <- fmt.Errorf("%s: complete_many: %w", worker, err)
					return
				}
				done, err := pgx.CollectRows(rows, pgx.RowTo[int64])
				if err != nil {
					errs <- fmt.Errorf("%s: complete_many: %w", worker, err)
					return
				}
				slices.Sort(done)
				slices.Sort(ids)
				if !slices.Equal(done, ids) {
					errs <- fmt.Errorf("%s: jobs_complete_many completed %d of the %d jobs it was given", worker, len(done), len(ids))
					return
				}
			}
		}()
	}
	close(start)
	workerWG.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if t.Failed() {
		t.FailNow()
	}

	ids := queryList[int64](t, b.Conn, "SELECT id FROM jobs ORDER BY id")
	if len(ids) != numJobs {
		t.Fatalf("jobs table has %d rows, want %d", len(ids), numJobs)
	}
	var duplicates, missing int
	for _, id := range ids {
		switch c := claims[id]; {
		case len(c) == 0:
			missing++
		case len(c) > 1:
			duplicates++
			if duplicates <= 5 {
				t.Errorf("job %d claimed %d times: %v", id, len(c), c)
			}
		}
	}
	if duplicates > 0 || missing > 0 || len(claims) != numJobs {
		t.Fatalf("%d jobs claimed more than once, %d never claimed, %d distinct ids claimed (want %d)",
			duplicates, missing, len(claims), numJobs)
	}

	var notDone, badAttempts int64
	if err := b.Conn.QueryRow(t.Context(), `SELECT count(*) FILTER (WHERE state <> 'done' OR finished_at IS NULL),
	                                               count(*) FILTER (WHERE attempts <> 1)
	                                        FROM jobs`).Scan(&notDone, &badAttempts); err != nil {
		t.Fatal(err)
	}
	if notDone != 0 || badAttempts != 0 {
		t.Fatalf("%d jobs not done, %d jobs with attempts <> 1", notDone, badAttempts)
	}
}

// orderJob is a job of the ordering tests, with the keys jobs_claim orders by.
type orderJob struct {
	id       int64
	queue    string
	priority int32
	runAt    time.Time
}

// enqueueShuffled adds n jobs per queue with random priorities and run_ats drawn from a few
// fixed values in the past (so ties happen on every key), in random order, and returns them.
func enqueueShuffled(t *testing.T, b *testBundle, queues []string, n int) []orderJob {
	t.Helper()
	rng := rand.New(rand.NewPCG(1, 2))
	type spec struct {
		queue    string
		priority int32
		ageSecs  int
	}
	var specs []spec
	for _, q := range queues {
		for range n {
			specs = append(specs, spec{q, int32(rng.IntN(3) - 1), 10 * (1 + rng.IntN(3))})
		}
	}
	rng.Shuffle(len(specs), func(i, j int) { specs[i], specs[j] = specs[j], specs[i] })

	var jobs []orderJob
	for _, s := range specs {
		var j orderJob
		j.id = queryOne[int64](t, b.Conn,
			`SELECT jobs_enqueue('k', queue => $1, priority => $2,
			                     run_at => timestamptz '2020-01-01 00:00:00Z' + make_interval(secs => $3))`,
			s.queue, s.priority, s.ageSecs)
		err := b.Conn.QueryRow(t.Context(), "SELECT queue, priority, run_at FROM jobs WHERE id = $1", j.id).
			Scan(&j.queue, &j.priority, &j.runAt)
		if err != nil {
			t.Fatal(err)
		}
		jobs = append(jobs, j)
	}
	return jobs
}

// bestFirst sorts jobs into jobs_claim's order: priority, then run_at, then id.
func bestFirst(jobs []orderJob) []orderJob {
	sorted := slices.Clone(jobs)
	slices.SortFunc(sorted, func(a, b orderJob) int {
		if a.priority != b.priority {
			return int(a.priority - b.priority)
		}
		if c := a.runAt.Compare(b.runAt); c != 0 {
			return c
		}
		return int(a.id - b.id)
	})
	return sorted
}

func idsOf[T any](items []T, id func(T) int64) []int64 {
	ids := make([]int64, len(items))
	for i, it := range items {
		ids[i] = id(it)
	}
	return ids
}

func TestClaimOrder(t *testing.T) {
	t.Parallel()

	orderID := func(j orderJob) int64 { return j.id }
	claimedID := func(j claimedJob) int64 { return j.ID }

	// claimAll claims until nothing is left, maxJobs at a time, checking that each batch
	// comes back best first, and returns the ids in claim order.
	claimAll := func(t *testing.T, b *testBundle, maxJobs int, queues []string) []int64 {
		t.Helper()
		var ids []int64
		for {
			jobs := claim(t, b.Conn, "w", maxJobs, queues, "1 minute")
			if len(jobs) == 0 {
				return ids
			}
			if len(jobs) > maxJobs {
				t.Fatalf("claimed %d jobs with max_jobs %d", len(jobs), maxJobs)
			}
			for k := 1; k < len(jobs); k++ {
				p, c := jobs[k-1], jobs[k]
				if p.Priority > c.Priority || (p.Priority == c.Priority && (p.RunAt.After(c.RunAt) ||
					(p.RunAt.Equal(c.RunAt) && p.ID > c.ID))) {
					t.Fatalf("batch not in (priority, run_at, id) order: %+v before %+v", p, c)
				}
			}
			ids = append(ids, idsOf(jobs, claimedID)...)
		}
	}

	for _, tc := range []struct {
		name     string
		enqueued []string // queues that get jobs
		queues   []string // claim argument
	}{
		{"OneQueue", []string{"a", "b"}, []string{"a"}},
		{"TwoQueues", []string{"a", "b", "c"}, []string{"a", "b"}},
		{"AllQueues", []string{"a", "b", "c"}, nil},
	} {
		want := func(jobs []orderJob) []int64 {
			var in []orderJob
			for _, j := range jobs {
				if tc.queues == nil || slices.Contains(tc.queues, j.queue) {
					in = append(in, j)
				}
			}
			return idsOf(bestFirst(in), orderID)
		}
		for _, maxJobs := range []int{1, 7} {
			t.Run(fmt.Sprintf("%sMaxJobs%dByPriorityRunAtID", tc.name, maxJobs), func(t *testing.T) {
				t.Parallel()
				b := setup(t)
				jobs := enqueueShuffled(t, b, tc.enqueued, 15)
				got := claimAll(t, b, maxJobs, tc.queues)
				if w := want(jobs); !slices.Equal(got, w) {
					t.Fatalf("claim order\n got %v\nwant %v", got, w)
				}
				// Jobs of queues that were not asked for are untouched.
				left := queryOne[int64](t, b.Conn, "SELECT count(*) FROM jobs WHERE state = 'queued'")
				if wantLeft := int64(len(jobs) - len(got)); left != wantLeft {
					t.Fatalf("%d jobs still queued, want %d", left, wantLeft)
				}
			})
		}
	}

	t.Run("BatchTakesBestAcrossQueues", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		// Queue a holds many low-priority jobs, queue b a few urgent ones: a batch over both
		// must take b's first, not the first max_jobs of one queue.
		var urgent []int64
		for range 10 {
			enqueue(t, b.Conn, "queue => 'a', priority => 5")
		}
		for range 3 {
			urgent = append(urgent, enqueue(t, b.Conn, "queue => 'b', priority => 1"))
		}
		for _, queues := range [][]string{{"a", "b"}, nil} {
			mustExec(t, b.Conn, "UPDATE jobs SET state = 'queued', attempts = 0, lease_expires_at = NULL, lease_role = NULL")
			jobs := claim(t, b.Conn, "w", 4, queues, "1 minute")
			if len(jobs) != 4 {
				t.Fatalf("queues %v: claimed %d jobs, want 4", queues, len(jobs))
			}
			if got := idsOf(jobs[:3], claimedID); !slices.Equal(got, urgent) {
				t.Fatalf("queues %v: first three claimed %v, want the urgent jobs %v", queues, got, urgent)
			}
			if jobs[3].Queue != "a" {
				t.Fatalf("queues %v: fourth job from queue %s, want a", queues, jobs[3].Queue)
			}
		}
	})

	t.Run("ReturnsRunningJobWithNewAttemptAndLease", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		id := enqueue(t, b.Conn, "payload => '{\"x\": 1}', queue => 'q', priority => 3, max_attempts => 7")
		tx, err := b.Conn.Begin(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback(t.Context())
		j := claimOne(t, tx, "worker-1", "q", "90 seconds")
		now := queryOne[time.Time](t, tx, "SELECT now()")
		if j.ID != id || j.Attempt != 1 || j.MaxAttempts != 7 || j.Priority != 3 || j.Queue != "q" || j.Kind != "test_kind" {
			t.Fatalf("claimed %+v", j)
		}
		if want := now.Add(90 * time.Second); !j.LeaseExpiresAt.Equal(want) {
			t.Fatalf("lease_expires_at = %s, want now() + lease = %s", j.LeaseExpiresAt, want)
		}
		r := getJob(t, tx, id)
		if r.State != "running" || r.Attempts != 1 || r.LeaseHolder == nil || *r.LeaseHolder != "worker-1" {
			t.Fatalf("job after claim: %+v", r)
		}
	})
}

func TestClaimFutureJobs(t *testing.T) {
	t.Parallel()

	t.Run("InvisibleUntilDue", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		// A job not yet due, however urgent, is skipped, and does not hold back a ready job
		// enqueued after it.
		enqueue(t, b.Conn, "queue => 'a', priority => -10, run_at => now() + interval '1 hour'")
		ready := enqueue(t, b.Conn, "queue => 'a'")
		for _, queues := range [][]string{{"a"}, {"a", "b"}, nil} {
			jobs := claim(t, b.Conn, "w", 10, queues, "1 minute")
			if len(jobs) != 1 || jobs[0].ID != ready {
				t.Fatalf("queues %v: claimed %v, want only the ready job %d", queues, jobs, ready)
			}
			mustExec(t, b.Conn, "UPDATE jobs SET state = 'queued', attempts = 0, lease_expires_at = NULL, lease_role = NULL WHERE id = $1", ready)
		}
	})

	t.Run("ClaimableOnceDue", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		// Due in a second by the server's clock. Poll, each claim in a transaction whose now()
		// is the claim's clock: no claim before run_at may return it, and none after may miss it.
		id := queryOne[int64](t, b.Conn,
			"SELECT jobs_enqueue('k', queue => 'a', run_at => clock_timestamp() + interval '1 second')")
		runAt := getJob(t, b.Conn, id).RunAt
		emptyPolls := 0
		pgtest.WaitFor(t, 10*time.Second, "the future job to become claimable", func() bool {
			tx, err := b.Conn.Begin(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			defer tx.Rollback(t.Context())
			now := queryOne[time.Time](t, tx, "SELECT now()")
			jobs := claim(t, tx, "w", 10, []string{"a", "b"}, "1 minute")
			if err := tx.Commit(t.Context()); err != nil {
				t.Fatal(err)
			}
			switch {
			case len(jobs) == 0 && now.Before(runAt):
				emptyPolls++
				return false
			case len(jobs) == 0:
				t.Fatalf("a claim at %s, after run_at %s, did not return the due job", now, runAt)
			case len(jobs) != 1 || jobs[0].ID != id || now.Before(runAt):
				t.Fatalf("a claim at %s returned %+v, want job %d due at %s", now, jobs, id, runAt)
			}
			return true
		})
		t.Logf("%d claims before run_at returned nothing", emptyPolls)
	})

	t.Run("DueAfterRunAtMovedBack", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		id := enqueue(t, b.Conn, "run_at => now() + interval '1 hour'")
		if jobs := claim(t, b.Conn, "w", 10, nil, "1 minute"); len(jobs) != 0 {
			t.Fatalf("claimed %v before run_at", jobs)
		}
		mustExec(t, b.Conn, "UPDATE jobs SET run_at = now() - interval '1 second' WHERE id = $1", id)
		if j := claimOne(t, b.Conn, "w", "", "1 minute"); j.ID != id {
			t.Fatalf("claimed %d, want %d", j.ID, id)
		}
	})

	t.Run("EmptyQueueReturnsNoRows", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		enqueue(t, b.Conn, "queue => 'other'")
		for _, queues := range [][]string{{"a"}, {"a", "b"}} {
			if jobs := claim(t, b.Conn, "w", 10, queues, "1 minute"); len(jobs) != 0 {
				t.Fatalf("queues %v: claimed %v", queues, jobs)
			}
		}
	})
}
