package pgtest

import (
	"testing"

	"github.com/jackc/pgx/v5"
)

// EnqueueWorkflow calls jobs_enqueue_workflow(steps) on q and returns each step's job id by
// name, failing the test if the call fails.
func EnqueueWorkflow(t testing.TB, q Querier, steps string) map[string]int64 {
	t.Helper()
	rows, err := q.Query(t.Context(), "SELECT name, id FROM jobs_enqueue_workflow($1::jsonb)", steps)
	if err != nil {
		t.Fatalf("jobs_enqueue_workflow: %v", err)
	}
	type step struct {
		Name string
		ID   int64
	}
	got, err := pgx.CollectRows(rows, pgx.RowToStructByPos[step])
	if err != nil {
		t.Fatalf("jobs_enqueue_workflow: %v", err)
	}
	ids := make(map[string]int64, len(got))
	for _, s := range got {
		ids[s.Name] = s.ID
	}
	return ids
}
