package main

// The workflow scenario drains workflows instead of independent jobs: -workflows diamonds
// of four no-op jobs (a -> b, c -> d) enqueued with jobs_enqueue_workflow, then worked by the
// same client as work_drain's. Only the a steps are queued at first; b and c become queued in
// the transaction that completes their a, d in the one that completes the later of its b and
// c. Its ratio to work_drain is what the dependencies cost a drain: the waiting jobs, their
// release by the completions (_jobs_finished locks and updates each child), and claims that
// find fewer jobs ready at once. Opt-in (-scenarios work_drain,workflow for the ratio): the
// untimed enqueue of its 40,000 jobs takes longer than the rest of a default run's drains.

import (
	"context"
	"flag"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/skiplock/skiplock/cmd/bench/internal/benchresult"
)

// workflowBatch is how many workflows one statement (and so one transaction) enqueues.
const workflowBatch = 100

func registerWorkflowFlags(fs *flag.FlagSet, cfg *config) {
	fs.IntVar(&cfg.workflows, "workflows", 10000, "workflow: diamonds of 4 jobs (a -> b, c -> d) enqueued, so 4 times this many jobs")
}

// diamond is the steps argument of jobs_enqueue_workflow for diamond w: no-op jobs a -> b,
// c -> d, whose payloads number them 4w to 4w+3 (as work_drain's are numbered).
func diamond(w int64, at time.Time) string {
	step := func(k int64, name, dependsOn string) string {
		return fmt.Sprintf(`{"name":%q,"kind":%q,"payload":%s,"depends_on":[%s]}`,
			name, benchKind, payload(4*w+k, at), dependsOn)
	}
	return "[" + strings.Join([]string{
		step(0, "a", ""), step(1, "b", `"a"`), step(2, "c", `"a"`), step(3, "d", `"b","c"`),
	}, ",") + "]"
}

// enqueueDiamonds enqueues n diamonds, workflowBatch to a statement: one
// jobs_enqueue_workflow call per diamond, a transaction per batch.
func enqueueDiamonds(ctx context.Context, pool *pgxpool.Pool, n int) error {
	now := time.Now()
	for off := 0; off < n; off += workflowBatch {
		size := min(workflowBatch, n-off)
		steps := make([]string, size)
		for i := range steps {
			steps[i] = diamond(int64(off+i), now)
		}
		var jobs int
		if err := pool.QueryRow(ctx, `
			SELECT count(*)
			FROM unnest($1::jsonb[]) AS w(steps)
			CROSS JOIN LATERAL jobs_enqueue_workflow(w.steps) AS s`, steps).Scan(&jobs); err != nil {
			return fmt.Errorf("failed to enqueue workflows: %w", err)
		}
		if jobs != 4*size {
			return fmt.Errorf("jobs_enqueue_workflow returned %d steps for %d diamonds", jobs, size)
		}
	}
	return nil
}

// workflowDrain: -workflows diamonds enqueued (untimed), then the workers start as in
// work_drain; time from starting them to the last completion committed, over all the jobs.
func (r *runner) workflowDrain(ctx context.Context) (*result, error) {
	pool, err := r.e.newPool(ctx, r.cfg.pool)
	if err != nil {
		return nil, err
	}
	defer pool.Close()
	n := int64(4 * r.cfg.workflows)

	logf("workflow: enqueuing %d diamonds (%d jobs), %d per transaction", r.cfg.workflows, n, workflowBatch)
	began := time.Now()
	if err := enqueueDiamonds(ctx, pool, r.cfg.workflows); err != nil {
		return nil, err
	}
	enqueued := time.Since(began)
	logf("workflow: %d jobs enqueued in %s", n, enqueued.Round(time.Millisecond))

	res, err := r.drain(ctx, pool, "workflow", r.cfg.workers, n, 0, nil)
	if err != nil {
		return nil, err
	}
	res.Add("workflows", r.cfg.workflows)
	res.Add("shape", "diamond a -> b, c -> d")
	res.Add("enqueue", fmt.Sprintf("jobs_enqueue_workflow, %d workflows per statement (not timed in jobs_per_sec)", workflowBatch))
	res.Add("enqueue_jobs_per_sec", benchresult.Round(float64(n)/enqueued.Seconds(), 0))
	res.note("%d diamonds of 4 jobs", r.cfg.workflows)
	res.note("enqueue %.0f jobs/s", float64(n)/enqueued.Seconds())
	res.Add("workers", r.cfg.workers) // over the run's -workers among the common fields
	res.note("%d slots", r.cfg.workers)
	return res, nil
}
