package main

import (
	"context"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/skiplock/skiplock/cmd/bench/internal/wait"
)

// explainer prints the plan of jobs_claim's query once a condition holds; see explainWhen.
type explainer struct{ done chan struct{} }

func (x *explainer) wait() {
	if x != nil {
		<-x.done
	}
}

// explainWhen waits (in the background) until cond holds, then claims -workers jobs and
// completes them in a transaction that it rolls back, with auto_explain sending the plans
// of the statements inside jobs_claim and jobs_complete_many as notices, and prints them
// to stderr.
func (r *runner) explainWhen(ctx context.Context, scenario string, cond func() bool) *explainer {
	x := &explainer{done: make(chan struct{})}
	go func() {
		defer close(x.done)
		for !cond() {
			if wait.Sleep(ctx, 5*time.Millisecond) != nil {
				return
			}
		}
		cc, err := pgx.ParseConfig(r.e.url)
		if err != nil {
			logf("explain: %v", err)
			return
		}
		cc.RuntimeParams["search_path"] = pgx.Identifier{r.cfg.schema}.Sanitize()
		var mu sync.Mutex
		var plans []string
		cc.OnNotice = func(_ *pgconn.PgConn, n *pgconn.Notice) {
			mu.Lock()
			plans = append(plans, n.Message)
			mu.Unlock()
		}
		conn, err := pgx.ConnectConfig(ctx, cc)
		if err != nil {
			logf("explain: %v", err)
			return
		}
		defer conn.Close(context.WithoutCancel(ctx))
		for _, s := range []string{
			"LOAD 'auto_explain'",
			"SET auto_explain.log_min_duration = 0",
			"SET auto_explain.log_analyze = on",
			"SET auto_explain.log_buffers = on",
			"SET auto_explain.log_timing = on",
			"SET auto_explain.log_nested_statements = on",
			"SET auto_explain.log_level = notice",
		} {
			if _, err := conn.Exec(ctx, s); err != nil {
				logf("explain: %s: %v", s, err)
				return
			}
		}
		tx, err := conn.Begin(ctx)
		if err != nil {
			logf("explain: %v", err)
			return
		}
		// Claim a batch and complete it, as a worker does, then undo both.
		var claimed int
		err = tx.QueryRow(ctx, `
			WITH c AS MATERIALIZED (SELECT id, attempt FROM jobs_claim('bench-explain', $1, $2))
			SELECT count(*) FROM jobs_complete_many(
			    coalesce((SELECT array_agg(id) FROM c), '{}'), coalesce((SELECT array_agg(attempt) FROM c), '{}'))`,
			r.cfg.workers, []string{benchQueue}).Scan(&claimed)
		_ = tx.Rollback(ctx)
		if err != nil {
			logf("explain: %v", err)
			return
		}
		mu.Lock()
		defer mu.Unlock()
		fmt.Fprintf(os.Stderr, "\n==== %s: plans of jobs_claim(max_jobs => %d) + jobs_complete_many under load (%d jobs, rolled back) ====\n",
			scenario, r.cfg.workers, claimed)
		for _, p := range plans {
			fmt.Fprintln(os.Stderr, p)
		}
		fmt.Fprintln(os.Stderr, "====")
	}()
	return x
}
