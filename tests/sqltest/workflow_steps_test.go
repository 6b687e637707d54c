package sqltest

import (
	"strings"
	"testing"

	"github.com/skiplock/skiplock/tests/pgtest"
)

// jobs_enqueue_workflow refuses a step field of the wrong JSON type or an unknown field, naming
// steps, rather than reading 5 as the queue "5" or dropping a misspelt depends_on; nothing is
// added.
func TestEnqueueWorkflowRefusesMistypedFields(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for _, c := range []struct{ step, problem string }{
		{`{"name": "a", "kind": "k", "queue": 5}`, "queue must be a JSON string"},
		{`{"name": "a", "kind": "k", "queue": {"x": 1}}`, "queue must be a JSON string"},
		{`{"name": "a", "kind": "k", "concurrency_key": 7}`, "concurrency_key must be a JSON string"},
		{`{"name": "a", "kind": "k", "priority": "3"}`, "priority must be a JSON integer"},
		{`{"name": "a", "kind": "k", "max_attempts": true}`, "max_attempts must be a JSON integer"},
		{`{"name": "a", "kind": "k", "notify_finished": "yes"}`, "notify_finished must be a JSON boolean"},
		{`{"name": "a", "kind": "k", "run_at": 1}`, "run_at must be a JSON string"},
		{`{"name": "a", "kind": 1}`, "kind must be a JSON string"},
		{`{"name": "a", "kind": "k", "dependson": ["b"]}`, `unknown field "dependson"`},
		{`{"name": "a", "kind": "k", "unique_key": "u"}`, `unknown field "unique_key"`},
	} {
		err := b.Conn.QueryRow(t.Context(), "SELECT count(*) FROM jobs_enqueue_workflow($1::jsonb)", "["+c.step+"]").Scan(new(int))
		if pgErr := pgtest.RequirePgError(t, err, "22023"); pgErr.ColumnName != "steps" || !strings.Contains(pgErr.Message, c.problem) {
			t.Errorf("step %s: %v, want 22023 naming steps: %s", c.step, err, c.problem)
		}
	}
	if n := queryOne[int](t, b.Conn, "SELECT count(*) FROM jobs"); n != 0 {
		t.Fatalf("%d jobs after refused workflows, want 0", n)
	}
}

// An unknown parent is refused even when the job's unique_key is held by a live job (the
// enqueue would otherwise return that job's id without looking at the parents).
func TestEnqueueRefusesUnknownParentWithAHeldKey(t *testing.T) {
	t.Parallel()
	b := setup(t)
	held := queryOne[int64](t, b.Conn, "SELECT jobs_enqueue('k', unique_key => 'u')")
	_, err := b.Conn.Exec(t.Context(), "SELECT jobs_enqueue('k', unique_key => 'u', depends_on => ARRAY[$1::bigint + 1000])", held)
	if pgErr := pgtest.RequirePgError(t, err, "22023"); pgErr.ColumnName != "depends_on" {
		t.Fatalf("unknown parent with a held key: %v, want 22023 naming depends_on", err)
	}
	if got := queryOne[int64](t, b.Conn, "SELECT jobs_enqueue('k', unique_key => 'u', depends_on => ARRAY[$1::bigint])", held); got != held {
		t.Fatalf("a known parent with a held key returned %d, want the live job %d", got, held)
	}
}
