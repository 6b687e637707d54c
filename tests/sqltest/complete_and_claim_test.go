package sqltest

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// cycleResult is what one jobs_complete_and_claim call returned.
type cycleResult struct {
	Completed []int64
	Claimed   []claimedJob
	Rows      int // result rows, the empty-claim row included
}

// completeAndClaim calls jobs_complete_and_claim; queues nil means NULL (every queue).
func completeAndClaim(ctx context.Context, q querier, worker string, ids []int64, attempts []int32, maxJobs int,
	queues []string, lease string) (cycleResult, error) {
	var res cycleResult
	rows, err := q.Query(ctx,
		`SELECT completed, id, queue, kind, attempt, max_attempts, priority, run_at, lease_expires_at
		 FROM jobs_complete_and_claim($1, $2, $3, $4, $5, $6::interval)`, worker, ids, attempts, maxJobs, queues, lease)
	if err != nil {
		return res, err
	}
	defer rows.Close()
	for rows.Next() {
		var completed []int64
		var id, queue, kind, attempt, maxAttempts, priority, runAt, leaseExpiresAt any
		if err := rows.Scan(&completed, &id, &queue, &kind, &attempt, &maxAttempts, &priority, &runAt, &leaseExpiresAt); err != nil {
			return res, err
		}
		res.Rows++
		if res.Rows == 1 {
			if completed == nil {
				return res, fmt.Errorf("first row has completed NULL")
			}
			res.Completed = completed
		} else if completed != nil {
			return res, fmt.Errorf("row %d has completed %v, want NULL after the first row", res.Rows, completed)
		}
		if id == nil {
			continue
		}
		res.Claimed = append(res.Claimed, claimedJob{
			ID: id.(int64), Queue: queue.(string), Kind: kind.(string), Attempt: attempt.(int32),
			MaxAttempts: maxAttempts.(int32), Priority: priority.(int32), RunAt: runAt.(time.Time),
			LeaseExpiresAt: leaseExpiresAt.(time.Time),
		})
	}
	if err := rows.Err(); err != nil {
		return res, err
	}
	if res.Rows == 0 {
		return res, fmt.Errorf("no rows, want at least one")
	}
	if len(res.Claimed) > 0 && res.Rows != len(res.Claimed) {
		return res, fmt.Errorf("%d rows for %d claimed jobs, want one row per job", res.Rows, len(res.Claimed))
	}
	return res, nil
}

func mustCompleteAndClaim(t *testing.T, q querier, worker string, ids []int64, attempts []int32, maxJobs int,
	queues []string, lease string) cycleResult {
	t.Helper()
	res, err := completeAndClaim(t.Context(), q, worker, ids, attempts, maxJobs, queues, lease)
	if err != nil {
		t.Fatalf("jobs_complete_and_claim: %v", err)
	}
	return res
}

func fence(jobs []claimedJob) ([]int64, []int32) {
	ids := make([]int64, len(jobs))
	attempts := make([]int32, len(jobs))
	for i, j := range jobs {
		ids[i], attempts[i] = j.ID, j.Attempt
	}
	return ids, attempts
}

// TestCompleteAndClaim covers jobs_complete_and_claim's own promises; the rules it borrows
// from jobs_complete_many and jobs_claim are tested with them.
func TestCompleteAndClaim(t *testing.T) {
	t.Parallel()

	t.Run("CompletesThenClaimsInOrder", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		first := enqueue(t, b.Conn, "")
		low := enqueue(t, b.Conn, "priority => 5")
		high := enqueue(t, b.Conn, "priority => 1")
		held := claim(t, b.Conn, "w", 1, nil, "1 minute")
		if len(held) != 1 || held[0].ID != first {
			t.Fatalf("setup claim = %+v, want job %d", held, first)
		}
		ids, attempts := fence(held)
		res := mustCompleteAndClaim(t, b.Conn, "w", ids, attempts, 5, nil, "1 minute")
		if !slices.Equal(res.Completed, []int64{first}) {
			t.Fatalf("completed = %v, want [%d]", res.Completed, first)
		}
		var got []int64
		for _, j := range res.Claimed {
			got = append(got, j.ID)
		}
		if want := []int64{high, low}; !slices.Equal(got, want) {
			t.Fatalf("claimed %v, want %v (jobs_claim's priority order)", got, want)
		}
		if r := getJob(t, b.Conn, first); r.State != "done" || r.FinishedAt == nil {
			t.Fatalf("completed job is %s (finished_at %v), want done", r.State, r.FinishedAt)
		}
		if r := getJob(t, b.Conn, high); r.State != "running" || r.LeaseHolder == nil || *r.LeaseHolder != "w" {
			t.Fatalf("claimed job is %s held by %v, want running held by w", r.State, r.LeaseHolder)
		}
	})

	t.Run("NothingClaimedStillReportsCompletions", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		enqueue(t, b.Conn, "")
		ids, attempts := fence(claim(t, b.Conn, "w", 1, nil, "1 minute"))
		res := mustCompleteAndClaim(t, b.Conn, "w", ids, attempts, 10, []string{"default"}, "1 minute")
		if res.Rows != 1 || len(res.Claimed) != 0 || !slices.Equal(res.Completed, ids) {
			t.Fatalf("got %+v, want one row with completed %v and no job", res, ids)
		}
		res = mustCompleteAndClaim(t, b.Conn, "w", []int64{}, []int32{}, 10, nil, "1 minute")
		if res.Rows != 1 || len(res.Claimed) != 0 || res.Completed == nil || len(res.Completed) != 0 {
			t.Fatalf("empty call returned %+v, want one row with completed {} and no job", res)
		}
	})

	t.Run("MaxJobsZeroCompletesOnly", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		enqueue(t, b.Conn, "")
		waiting := enqueue(t, b.Conn, "")
		ids, attempts := fence(claim(t, b.Conn, "w", 1, nil, "1 minute"))
		res := mustCompleteAndClaim(t, b.Conn, "w", ids, attempts, 0, nil, "1 minute")
		if !slices.Equal(res.Completed, ids) || len(res.Claimed) != 0 {
			t.Fatalf("got %+v, want completed %v and no claim", res, ids)
		}
		if r := getJob(t, b.Conn, waiting); r.State != "queued" {
			t.Fatalf("other job is %s, want queued", r.State)
		}
	})

	// A pair whose attempt is stale (the job expired and was claimed again) completes
	// nothing, and the job claimed again carries the next attempt number.
	t.Run("StalePairIsNotCompleted", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		id := enqueue(t, b.Conn, "")
		old := claim(t, b.Conn, "w1", 1, nil, "1 millisecond")
		waitLeasesExpired(t, b.Conn)
		if n := queryOne[int32](t, b.Conn, "SELECT jobs_requeue_expired()"); n != 1 {
			t.Fatalf("jobs_requeue_expired = %d, want 1", n)
		}
		res := mustCompleteAndClaim(t, b.Conn, "w2", []int64{}, []int32{}, 1, nil, "1 minute")
		if len(res.Claimed) != 1 || res.Claimed[0].ID != id || res.Claimed[0].Attempt != old[0].Attempt+1 {
			t.Fatalf("reclaim = %+v, want job %d at attempt %d", res.Claimed, id, old[0].Attempt+1)
		}
		ids, attempts := fence(old)
		res = mustCompleteAndClaim(t, b.Conn, "w1", ids, attempts, 1, nil, "1 minute")
		if len(res.Completed) != 0 || len(res.Claimed) != 0 {
			t.Fatalf("stale call returned %+v, want nothing completed or claimed", res)
		}
		if r := getJob(t, b.Conn, id); r.State != "running" || *r.LeaseHolder != "w2" || r.Attempts != old[0].Attempt+1 {
			t.Fatalf("job is %s held by %v at attempt %d, want running held by w2", r.State, *r.LeaseHolder, r.Attempts)
		}
	})

	// The completions run first, so the slot of a concurrency-limited queue that they give
	// back is taken by the claim of the same call.
	t.Run("CompletionFreesSlotForTheClaim", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		mustExec(t, b.Conn, "SELECT jobs_set_concurrency('lim', 1)")
		enqueue(t, b.Conn, "queue => 'lim'")
		next := enqueue(t, b.Conn, "queue => 'lim'")
		ids, attempts := fence(claim(t, b.Conn, "w", 2, []string{"lim"}, "1 minute"))
		if len(ids) != 1 {
			t.Fatalf("limited claim took %d jobs, want 1", len(ids))
		}
		res := mustCompleteAndClaim(t, b.Conn, "w", ids, attempts, 2, []string{"lim"}, "1 minute")
		if len(res.Claimed) != 1 || res.Claimed[0].ID != next {
			t.Fatalf("claimed %+v, want job %d in the slot the completion freed", res.Claimed, next)
		}
	})
}

// TestCompleteAndClaimConcurrentCallers: sessions cycle through jobs_complete_and_claim,
// each completing what it claimed in its previous call, until every job is done. Every job
// must be claimed exactly once, every call must complete exactly the pairs its caller held
// (no caller completes a job another caller claimed, and no claim returns a job completed
// by another), and every job ends done.
func TestCompleteAndClaimConcurrentCallers(t *testing.T) {
	t.Parallel()

	const (
		numWorkers = 8
		batch      = 25
	)
	numJobs := 10000
	if testing.Short() {
		numJobs = 2000
	}
	b := setup(t)
	mustExec(t, b.Conn, `SELECT count(*) FROM jobs_enqueue_many(
		kinds  => array_fill('work'::text, ARRAY[$1::int]),
		queues => ARRAY(SELECT CASE WHEN i % 2 = 0 THEN 'a' ELSE 'b' END FROM generate_series(1, $1::int) i))`, numJobs)
	queueSets := [][]string{{"a"}, {"b"}, {"a", "b"}, nil}

	var (
		mu        sync.Mutex
		claimedBy = make(map[int64]string, numJobs)
		wg        sync.WaitGroup
		errs      = make(chan error, numWorkers)
	)
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	conns := make([]*pgx.Conn, numWorkers)
	for i := range conns {
		conns[i] = b.Connect(t)
	}
	start := make(chan struct{})
	for i := range numWorkers {
		wg.Go(func() {
			worker := fmt.Sprintf("worker-%02d", i)
			queues := queueSets[i%len(queueSets)]
			var held []claimedJob
			emptyInARow := 0
			<-start
			for {
				ids, attempts := fence(held)
				res, err := completeAndClaim(ctx, conns[i], worker, ids, attempts, batch, queues, "5 minutes")
				if err != nil {
					errs <- fmt.Errorf("%s: %w", worker, err)
					return
				}
				slices.Sort(ids)
				if !slices.Equal(res.Completed, ids) {
					errs <- fmt.Errorf("%s: completed %v of the pairs it held %v", worker, res.Completed, ids)
					return
				}
				mu.Lock()
				for _, j := range res.Claimed {
					if other, ok := claimedBy[j.ID]; ok {
						errs <- fmt.Errorf("%s: claimed job %d, already claimed by %s", worker, j.ID, other)
					}
					claimedBy[j.ID] = worker
				}
				mu.Unlock()
				held = res.Claimed
				if len(held) > 0 {
					emptyInARow = 0
					continue
				}
				// What is left is locked by other claimers or in queues this worker does not
				// read; stop once nothing has come for a while.
				if emptyInARow++; emptyInARow > 20 || ctx.Err() != nil {
					return
				}
				time.Sleep(2 * time.Millisecond)
			}
		})
	}
	close(start)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if got := len(claimedBy); got != numJobs {
		t.Errorf("%d distinct jobs claimed, want %d", got, numJobs)
	}
	if n := queryOne[int64](t, b.Conn, "SELECT count(*) FROM jobs WHERE state <> 'done' OR attempts <> 1"); n != 0 {
		t.Errorf("%d jobs not done at attempt 1", n)
	}
}
