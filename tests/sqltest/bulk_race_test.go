package sqltest

import (
	"sync"
	"testing"
	"time"
)

// TestBulkActionsRaceWorkers: jobs_cancel_many, jobs_retry_many and jobs_delete_many loop
// while four sessions claim and complete jobs and another enqueues. No call fails (no
// deadlock, no unique violation), and no job a worker completed comes back: a completion
// that returned the job's id leaves it done (or deleted), and a job cancelled under its
// worker refuses that worker's completion.
func TestBulkActionsRaceWorkers(t *testing.T) {
	t.Parallel()
	b := setup(t)
	mustExec(t, b.Conn, "SELECT jobs_enqueue_many(array_fill('k'::text, ARRAY[2000]))")
	duration := 3 * time.Second
	if testing.Short() {
		duration = time.Second
	}
	deadline := time.Now().Add(duration)
	// On a loaded machine a second may pass before every session got a call in: the race
	// goes on past the deadline, up to a minute, until every path was taken.
	hardDeadline := time.Now().Add(time.Minute)

	var (
		wg        sync.WaitGroup
		mu        sync.Mutex
		completed []int64
		counts    = map[string]int64{}
	)
	paths := []string{"completed", "fenced", "enqueued", "cancelled", "cancelled running", "retried", "deleted"}
	running := func() bool {
		now := time.Now()
		if now.Before(deadline) {
			return true
		}
		if now.After(hardDeadline) {
			return false
		}
		mu.Lock()
		defer mu.Unlock()
		for _, p := range paths {
			if counts[p] == 0 {
				return true
			}
		}
		return false
	}
	for w := range 4 {
		conn := b.Connect(t)
		wg.Go(func() {
			for running() {
				jobs, err := tryClaim(t.Context(), conn, "w"+string(rune('0'+w)), 10, nil, "1 minute")
				if err != nil {
					t.Errorf("jobs_claim: %v", err)
					return
				}
				time.Sleep(time.Millisecond) // the handlers' work, during which a bulk cancel may come
				ids := make([]int64, len(jobs))
				attempts := make([]int32, len(jobs))
				for i, j := range jobs {
					ids[i], attempts[i] = j.ID, j.Attempt
				}
				rows, err := conn.Query(t.Context(), "SELECT * FROM jobs_complete_many($1, $2)", ids, attempts)
				if err != nil {
					t.Errorf("jobs_complete_many: %v", err)
					return
				}
				var done []int64
				for rows.Next() {
					var id int64
					if err := rows.Scan(&id); err != nil {
						t.Error(err)
					}
					done = append(done, id)
				}
				rows.Close()
				if err := rows.Err(); err != nil {
					t.Errorf("jobs_complete_many: %v", err)
					return
				}
				mu.Lock()
				completed = append(completed, done...)
				counts["completed"] += int64(len(done))
				counts["fenced"] += int64(len(jobs) - len(done))
				mu.Unlock()
			}
		})
	}
	for _, call := range []struct{ name, sql string }{
		{"enqueued", "SELECT count(*) FROM jobs_enqueue_many(array_fill('k'::text, ARRAY[20]))"},
		{"cancelled", "SELECT jobs_cancel_many(max_jobs => 20)"},
		{"cancelled running", "SELECT jobs_cancel_many(states => '{running}', max_jobs => 5)"},
		{"retried", "SELECT jobs_retry_many(states => '{cancelled}', max_jobs => 40)"},
		{"deleted", "SELECT jobs_delete_many(states => '{done}', max_jobs => 50)"},
	} {
		conn := b.Connect(t)
		wg.Go(func() {
			for running() {
				var n int64
				if err := conn.QueryRow(t.Context(), call.sql).Scan(&n); err != nil {
					t.Errorf("%s: %v", call.sql, err)
					return
				}
				mu.Lock()
				counts[call.name] += n
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	t.Logf("in %v or more: %v", duration, counts)
	for _, p := range paths {
		if counts[p] == 0 {
			t.Errorf("the race did not exercise every path (%s) within a minute: %v", p, counts)
		}
	}
	if n := queryOne[int64](t, b.Conn, "SELECT count(*) FROM jobs WHERE id = ANY ($1) AND state <> 'done'", completed); n != 0 {
		t.Fatalf("%d jobs a worker completed are no longer done", n)
	}
}
