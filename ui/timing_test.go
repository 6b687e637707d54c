package ui_test

import (
	"fmt"
	"sort"
	"testing"
	"time"
)

// TestPagesWithMillionDoneJobs: every page answers in under 200 ms with 1,000,000 done jobs
// in the table (100,000 under -short), besides 10,000 queued, 100 running, 1,000 dead and
// 100 cancelled jobs. The best of three requests of each page is asserted and logged. The
// exceptions are the lists of a rare queue's or kind's old jobs without a state or as done
// (see slow below).
func TestPagesWithMillionDoneJobs(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	done := 1_000_000
	if testing.Short() {
		done = 100_000
	}
	// A queue whose few jobs are older than every done job: a list of it without a state
	// filter is the worst case of jobs_list.
	exec(t, b, `SELECT jobs_enqueue_many(ARRAY['rare', 'rare'], queues => ARRAY['rare', 'rare'])`)
	exec(t, b, `INSERT INTO jobs (kind, queue, state, attempts, lease_holder, created_at, started_at, finished_at)
		SELECT 'old', 'default', 'done', 1, 'w', now() - interval '1 hour', now() - interval '1 hour', now() - interval '1 hour'
		FROM generate_series(1, $1)`, done)
	seedDead(t, b, 1000, "hooks", "deliver", "HTTP 503")
	exec(t, b, `SELECT jobs_enqueue_many(array_fill('cleanup'::text, ARRAY[100]), queues => array_fill('bulk'::text, ARRAY[100]))`)
	exec(t, b, `SELECT jobs_cancel_many(queue => 'bulk')`)
	exec(t, b, `SELECT jobs_enqueue_many(array_fill('send'::text, ARRAY[10100]), queues => array_fill('mail'::text, ARRAY[10100]))`)
	exec(t, b, `SELECT count(*) FROM jobs_claim('w', 100, ARRAY['mail'])`)
	exec(t, b, `SELECT jobs_schedule('nightly', '0 3 * * *', 'report')`)
	workflow := count(t, b, `SELECT min(id) FROM jobs_enqueue_workflow('[{"name": "a", "kind": "a", "queue": "wf"},
		{"name": "b", "kind": "b", "queue": "wf", "depends_on": ["a"]}]')`)
	exec(t, b, `VACUUM ANALYZE jobs`)
	deadID := count(t, b, `SELECT max(id) FROM jobs WHERE state = 'dead'`)
	doneID := count(t, b, `SELECT min(id) FROM jobs WHERE state = 'done'`)

	paths := []string{
		"/", "/jobs", "/jobs?state=queued", "/jobs?state=running", "/jobs?state=done", "/jobs?state=dead",
		"/jobs?state=cancelled", "/jobs?queue=mail", "/jobs?state=queued&queue=mail", "/jobs?state=done&queue=default&kind=old",
		fmt.Sprintf("/jobs?state=done&before=%d", doneID+PageSizeForTest*10),
		"/dead", "/dead?queue=hooks", "/dead?queue=hooks&kind=deliver",
		fmt.Sprintf("/jobs/%d", deadID), fmt.Sprintf("/jobs/%d", doneID), "/schedules", "/queues/mail", "/queues/default",
		"/jobs?state=waiting", fmt.Sprintf("/workflows/%d", workflow),
	}
	// The worst cases of jobs_list: a queue or kind whose jobs are all older than the done
	// ones, listed without a state or as done, walks every done job by id (no index leads to a
	// queue's done jobs). No link of the dashboard leads there (the overview's links name a
	// state that has an index); they are measured and bounded loosely, not held to 200 ms.
	slow := map[string]bool{"/jobs?queue=rare": true, "/jobs?kind=rare": true, "/jobs?state=done&queue=rare": true}
	for path := range slow {
		paths = append(paths, path)
	}
	type timing struct {
		path string
		best time.Duration
	}
	var timings []timing
	for _, path := range paths {
		best := time.Hour
		for range 3 {
			start := time.Now()
			b.mustGet(t, path)
			best = min(best, time.Since(start))
		}
		timings = append(timings, timing{path, best})
		if limit := pick(slow[path], 2*time.Second, 200*time.Millisecond); best > limit {
			t.Errorf("GET %s took %v with %d done jobs, want under %v", path, best, done, limit)
		}
	}
	sort.Slice(timings, func(i, j int) bool { return timings[i].best > timings[j].best })
	for _, tm := range timings {
		t.Logf("%-50s %v", tm.path, tm.best.Round(10*time.Microsecond))
	}
}

func pick(cond bool, yes, no time.Duration) time.Duration {
	if cond {
		return yes
	}
	return no
}

// PageSizeForTest is ui.PageSize, kept short for the paths above.
const PageSizeForTest = 50
