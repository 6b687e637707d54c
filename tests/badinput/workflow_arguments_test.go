package badinput

import (
	"strings"
	"testing"

	"github.com/skiplock/skiplock/tests/pgtest"
)

// TestWorkflowInvalidArguments: the parameters of dependencies, workflows, results,
// checkpoints and progress. Each bad value is refused with 22023 naming the parameter and
// changes nothing: no job, no dependency, no parent marked as having children.
func TestWorkflowInvalidArguments(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	bigJSON := "('\"' || repeat('x', 1048576) || '\"')::jsonb"
	for _, tc := range []struct {
		name  string
		sql   string
		args  []any
		fn    string
		param string
	}{
		// jobs_enqueue: depends_on names existing jobs, one-dimensional, no NULL, at most 10000.
		{name: "EnqueueDependsOnUnknownID", sql: "SELECT jobs_enqueue('k', depends_on => ARRAY[999999])", fn: "jobs_enqueue", param: "depends_on"},
		{name: "EnqueueDependsOnUnknownAmongKnown", sql: "SELECT jobs_enqueue('k', depends_on => ARRAY[1, 3, 999999])", fn: "jobs_enqueue", param: "depends_on"},
		{name: "EnqueueDependsOnNegativeID", sql: "SELECT jobs_enqueue('k', depends_on => ARRAY[-1])", fn: "jobs_enqueue", param: "depends_on"},
		{name: "EnqueueDependsOnOnlyNull", sql: "SELECT jobs_enqueue('k', depends_on => ARRAY[NULL]::bigint[])", fn: "jobs_enqueue", param: "depends_on"},
		{name: "EnqueueDependsOnTwoDimensional", sql: "SELECT jobs_enqueue('k', depends_on => ARRAY[[1, 2], [3, 4]]::bigint[])", fn: "jobs_enqueue", param: "depends_on"},
		{name: "EnqueueDependsOn10001", sql: "SELECT jobs_enqueue('k', depends_on => (SELECT array_agg(g::bigint) FROM generate_series(1, 10001) AS g))", fn: "jobs_enqueue", param: "depends_on"},
		{name: "EnqueueDependsOnUnknownWithUniqueKey", sql: "SELECT jobs_enqueue('k', unique_key => 'fresh', depends_on => ARRAY[999999])", fn: "jobs_enqueue", param: "depends_on"},
		{name: "EnqueueOnParentFailureUnknown", sql: "SELECT jobs_enqueue('k', depends_on => ARRAY[1], on_parent_failure => 'ignore')", fn: "jobs_enqueue", param: "on_parent_failure"},
		{name: "EnqueueOnParentFailureEmpty", sql: "SELECT jobs_enqueue('k', on_parent_failure => '')", fn: "jobs_enqueue", param: "on_parent_failure"},
		{name: "EnqueueOnParentFailureCapitalised", sql: "SELECT jobs_enqueue('k', depends_on => ARRAY[1], on_parent_failure => 'Cancel')", fn: "jobs_enqueue", param: "on_parent_failure"},
		{name: "EnqueueOnParentFailureNullWithoutParents", sql: "SELECT jobs_enqueue('k', on_parent_failure => NULL)", fn: "jobs_enqueue", param: "on_parent_failure"},
		{name: "EnqueueNotifyFinishedNull", sql: "SELECT jobs_enqueue('k', notify_finished => NULL)", fn: "jobs_enqueue", param: "notify_finished"},

		// jobs_enqueue_workflow: every malformed step names steps; all or nothing.
		{name: "WorkflowStepsObject", sql: `SELECT * FROM jobs_enqueue_workflow('{"name": "a", "kind": "k"}')`, fn: "jobs_enqueue_workflow", param: "steps"},
		{name: "WorkflowStepsEmpty", sql: "SELECT * FROM jobs_enqueue_workflow('[]')", fn: "jobs_enqueue_workflow", param: "steps"},
		{name: "WorkflowStepsJSONNull", sql: "SELECT * FROM jobs_enqueue_workflow('null')", fn: "jobs_enqueue_workflow", param: "steps"},
		{name: "WorkflowStepNotAnObject", sql: `SELECT * FROM jobs_enqueue_workflow('[{"name": "a", "kind": "k"}, 1]')`, fn: "jobs_enqueue_workflow", param: "steps"},
		{name: "WorkflowStepWithoutName", sql: `SELECT * FROM jobs_enqueue_workflow('[{"kind": "k"}]')`, fn: "jobs_enqueue_workflow", param: "steps"},
		{name: "WorkflowStepNameEmpty", sql: `SELECT * FROM jobs_enqueue_workflow('[{"name": "", "kind": "k"}]')`, fn: "jobs_enqueue_workflow", param: "steps"},
		{name: "WorkflowStepNameNumber", sql: `SELECT * FROM jobs_enqueue_workflow('[{"name": 1, "kind": "k"}]')`, fn: "jobs_enqueue_workflow", param: "steps"},
		{name: "WorkflowStepName201Bytes", sql: `SELECT * FROM jobs_enqueue_workflow(jsonb_build_array(jsonb_build_object('name', repeat('n', 201), 'kind', 'k')))`, fn: "jobs_enqueue_workflow", param: "steps"},
		{name: "WorkflowStepWithoutKind", sql: `SELECT * FROM jobs_enqueue_workflow('[{"name": "a"}]')`, fn: "jobs_enqueue_workflow", param: "steps"},
		{name: "WorkflowStepKindNumber", sql: `SELECT * FROM jobs_enqueue_workflow('[{"name": "a", "kind": 1}]')`, fn: "jobs_enqueue_workflow", param: "steps"},
		{name: "WorkflowStepKind201Bytes", sql: `SELECT * FROM jobs_enqueue_workflow(jsonb_build_array(jsonb_build_object('name', 'a', 'kind', repeat('k', 201))))`, fn: "jobs_enqueue_workflow", param: "steps"},
		{name: "WorkflowDependsOnString", sql: `SELECT * FROM jobs_enqueue_workflow('[{"name": "a", "kind": "k"}, {"name": "b", "kind": "k", "depends_on": "a"}]')`, fn: "jobs_enqueue_workflow", param: "steps"},
		{name: "WorkflowDependsOnNumber", sql: `SELECT * FROM jobs_enqueue_workflow('[{"name": "a", "kind": "k"}, {"name": "b", "kind": "k", "depends_on": [1]}]')`, fn: "jobs_enqueue_workflow", param: "steps"},
		{name: "WorkflowDependsOnUnknown", sql: `SELECT * FROM jobs_enqueue_workflow('[{"name": "a", "kind": "k", "depends_on": ["z"]}]')`, fn: "jobs_enqueue_workflow", param: "steps"},
		{name: "WorkflowSelfDependency", sql: `SELECT * FROM jobs_enqueue_workflow('[{"name": "a", "kind": "k", "depends_on": ["a"]}]')`, fn: "jobs_enqueue_workflow", param: "steps"},
		{name: "WorkflowDuplicateName", sql: `SELECT * FROM jobs_enqueue_workflow('[{"name": "a", "kind": "k"}, {"name": "a", "kind": "k"}]')`, fn: "jobs_enqueue_workflow", param: "steps"},
		{name: "WorkflowPriorityNotAnInteger", sql: `SELECT * FROM jobs_enqueue_workflow('[{"name": "a", "kind": "k", "priority": 1.5}]')`, fn: "jobs_enqueue_workflow", param: "steps"},
		{name: "WorkflowPriorityWord", sql: `SELECT * FROM jobs_enqueue_workflow('[{"name": "a", "kind": "k", "priority": "high"}]')`, fn: "jobs_enqueue_workflow", param: "steps"},
		{name: "WorkflowPriorityOverflow", sql: `SELECT * FROM jobs_enqueue_workflow('[{"name": "a", "kind": "k", "priority": 2147483648}]')`, fn: "jobs_enqueue_workflow", param: "steps"},
		{name: "WorkflowMaxAttemptsZero", sql: `SELECT * FROM jobs_enqueue_workflow('[{"name": "a", "kind": "k"}, {"name": "b", "kind": "k", "depends_on": ["a"], "max_attempts": 0}]')`, fn: "jobs_enqueue_workflow", param: "steps"},
		{name: "WorkflowRunAtNotATimestamp", sql: `SELECT * FROM jobs_enqueue_workflow('[{"name": "a", "kind": "k", "run_at": "soon"}]')`, fn: "jobs_enqueue_workflow", param: "steps"},
		{name: "WorkflowRunAtInfinity", sql: `SELECT * FROM jobs_enqueue_workflow('[{"name": "a", "kind": "k", "run_at": "infinity"}]')`, fn: "jobs_enqueue_workflow", param: "steps"},
		{name: "WorkflowQueueEmpty", sql: `SELECT * FROM jobs_enqueue_workflow('[{"name": "a", "kind": "k", "queue": ""}]')`, fn: "jobs_enqueue_workflow", param: "steps"},
		{name: "WorkflowConcurrencyKeyEmpty", sql: `SELECT * FROM jobs_enqueue_workflow('[{"name": "a", "kind": "k", "concurrency_key": ""}]')`, fn: "jobs_enqueue_workflow", param: "steps"},
		{name: "WorkflowMetaArray", sql: `SELECT * FROM jobs_enqueue_workflow('[{"name": "a", "kind": "k", "meta": []}]')`, fn: "jobs_enqueue_workflow", param: "steps"},
		{name: "WorkflowOnParentFailureUnknown", sql: `SELECT * FROM jobs_enqueue_workflow('[{"name": "a", "kind": "k"}, {"name": "b", "kind": "k", "depends_on": ["a"], "on_parent_failure": "ignore"}]')`, fn: "jobs_enqueue_workflow", param: "steps"},
		{name: "WorkflowNotifyFinishedWord", sql: `SELECT * FROM jobs_enqueue_workflow('[{"name": "a", "kind": "k", "notify_finished": "maybe"}]')`, fn: "jobs_enqueue_workflow", param: "steps"},
		{name: "WorkflowSteps10001", sql: `SELECT * FROM jobs_enqueue_workflow((SELECT jsonb_agg(jsonb_build_object('name', g::text, 'kind', 'k')) FROM generate_series(1, 10001) AS g))`, fn: "jobs_enqueue_workflow", param: "steps"},

		// jobs_checkpoint and jobs_progress, also for a job the caller holds (job 1).
		{name: "CheckpointStepEmpty", sql: "SELECT jobs_checkpoint(1, 1, '', '1')", fn: "jobs_checkpoint", param: "step"},
		{name: "CheckpointStep201Bytes", sql: "SELECT jobs_checkpoint(1, 1, repeat('s', 201), '1')", fn: "jobs_checkpoint", param: "step"},
		{name: "CheckpointValueSQLNull", sql: "SELECT jobs_checkpoint(1, 1, 's', NULL)", fn: "jobs_checkpoint", param: "value"},
		{name: "CheckpointValueOver1MB", sql: "SELECT jobs_checkpoint(1, 1, 's', " + bigJSON + ")", fn: "jobs_checkpoint", param: "value"},
		{name: "CheckpointValueOver1MBStaleAttempt", sql: "SELECT jobs_checkpoint(1, 2, 's', " + bigJSON + ")", fn: "jobs_checkpoint", param: "value"},
		{name: "ProgressOver1MB", sql: "SELECT jobs_progress(1, 1, " + bigJSON + ")", fn: "jobs_progress", param: "progress"},

		// Results: one per pair, one-dimensional, at most 1 MB each.
		{name: "CompleteResultOver1MB", sql: "SELECT jobs_complete(1, 1, " + bigJSON + ")", fn: "jobs_complete", param: "result"},
		{name: "CompleteManyResultsTooLong", sql: `SELECT * FROM jobs_complete_many(ARRAY[1], ARRAY[1], ARRAY['1', '2']::jsonb[])`, fn: "jobs_complete_many", param: "results"},
		{name: "CompleteManyResultsEmptyForOnePair", sql: `SELECT * FROM jobs_complete_many(ARRAY[1], ARRAY[1], '{}'::jsonb[])`, fn: "jobs_complete_many", param: "results"},
		{name: "CompleteManyResultsTwoDimensional", sql: `SELECT * FROM jobs_complete_many(ARRAY[1, 2], ARRAY[1, 1], ARRAY[['1'], ['2']]::jsonb[])`, fn: "jobs_complete_many", param: "results"},
		{name: "CompleteManyResultOver1MB", sql: "SELECT * FROM jobs_complete_many(ARRAY[1, 2], ARRAY[1, 1], ARRAY['1', " + bigJSON + "])", fn: "jobs_complete_many", param: "results"},
		{name: "CompleteAndClaimResultsTooShort", sql: `SELECT * FROM jobs_complete_and_claim('w', ARRAY[1, 2], ARRAY[1, 1], results => ARRAY['1']::jsonb[])`, fn: "jobs_complete_and_claim", param: "results"},
		{name: "CompleteAndClaimResultOver1MB", sql: "SELECT * FROM jobs_complete_and_claim('w', ARRAY[1], ARRAY[1], results => ARRAY[" + bigJSON + "])", fn: "jobs_complete_and_claim", param: "results"},

		// The bulk actions: waiting jobs can be cancelled, not retried.
		{name: "RetryManyStatesWaiting", sql: "SELECT jobs_retry_many(states => '{waiting}')", fn: "jobs_retry_many", param: "states"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			conn := f.Connect(t)
			_, err := call(t.Context(), conn, tc.sql, tc.args...)
			requireInvalid(t, err, tc.fn, tc.param)
			f.unchanged(t, conn, tc.sql)
			if n := queryOne[int64](t, conn, "SELECT (SELECT count(*) FROM jobs_dependencies) + (SELECT count(*) FROM jobs WHERE has_children)"); n != 0 {
				t.Errorf("%s left %d dependencies or parents", tc.sql, n)
			}
		})
	}
}

// TestWorkflowLooseStepFields: step fields that are not strings where jobs_enqueue takes
// text are refused, as a field of the wrong type, rather than turned into text.
func TestWorkflowLooseStepFields(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	for _, tc := range []struct{ name, steps string }{
		{"QueueNumber", `[{"name": "a", "kind": "k", "queue": 5}]`},
		{"QueueObject", `[{"name": "a", "kind": "k", "queue": {"q": 1}}]`},
		{"ConcurrencyKeyNumber", `[{"name": "a", "kind": "k", "concurrency_key": 7}]`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			conn := f.Connect(t)
			// In a transaction rolled back at once, so an accepted step leaves no job behind.
			tx, err := conn.Begin(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			var got string
			var id int64
			err = tx.QueryRow(t.Context(), "SELECT id FROM jobs_enqueue_workflow($1::jsonb)", tc.steps).Scan(&id)
			if err == nil {
				got = queryOne[string](t, conn, "SELECT queue || '/' || coalesce(concurrency_key, '') FROM jobs WHERE id = $1", id)
			}
			_ = tx.Rollback(t.Context())
			if err == nil {
				t.Fatalf("jobs_enqueue_workflow(%s) accepted the step: queue/concurrency_key %q", tc.steps, got)
			}
			pgErr := pgtest.RequirePgError(t, err, "22023")
			if !strings.HasPrefix(pgErr.Message, "jobs_enqueue_workflow: steps ") {
				t.Errorf("message %q", pgErr.Message)
			}
			f.unchanged(t, conn, tc.steps)
		})
	}
}
