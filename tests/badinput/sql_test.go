// Package badinput calls every public jobs_* function with bad, extreme and strange input on
// a real server. Each call must either fail with a clear error (SQLSTATE 22023 naming the
// parameter, or another SQLSTATE the function's header documents) and change nothing, or
// succeed with a result the test verifies. property_test.go then interleaves random valid
// and invalid calls and checks the table's invariants after each one.
package badinput

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/skiplock/skiplock/tests/internal/jobstest"
	"github.com/skiplock/skiplock/tests/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// testBundle is one test's database (skiplock installed, nothing else) and a session on it:
// pgtest's standard bundle.
type testBundle = pgtest.TestDB

func setup(t *testing.T) *testBundle {
	t.Helper()
	return pgtest.NewTestDB(t)
}

// call runs sql and reads all its rows: a set-returning function may raise while its rows
// stream, after Query itself has returned.
func call(ctx context.Context, conn *pgx.Conn, sql string, args ...any) ([][]any, error) {
	rows, err := conn.Query(ctx, sql, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out [][]any
	for rows.Next() {
		v, err := rows.Values()
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, rows.Err()
}

func mustCall(t *testing.T, conn *pgx.Conn, sql string, args ...any) [][]any {
	t.Helper()
	out, err := call(t.Context(), conn, sql, args...)
	if err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return out
}

// queryOne runs a query returning one row of one value and returns it.
func queryOne[T any](t *testing.T, conn *pgx.Conn, sql string, args ...any) T {
	t.Helper()
	return pgtest.QueryOne[T](t, conn, sql, args...)
}

// requireInvalid checks that err is the error _jobs_invalid raises for param of fn:
// SQLSTATE 22023, the message '<fn>: <param> <problem>' and param in the COLUMN field.
func requireInvalid(t *testing.T, err error, fn, param string) {
	t.Helper()
	pgErr := jobstest.RequireInvalid(t, err, param)
	if prefix := fn + ": " + param + " "; !strings.HasPrefix(pgErr.Message, prefix) {
		t.Errorf("message %q does not start with %q", pgErr.Message, prefix)
	}
}

func asPgError(err error) *pgconn.PgError {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return pgErr
	}
	return nil
}

// A fixture is a database with a job in every state, for calls that must change nothing to
// aim at: a function that acted before it validated its arguments shows in the checksum.
//
//	id 1  running, queue 'running', attempt 1 (held by 'w' for an hour), unique_key 'held'
//	id 2  queued and ready, queue 'queued'
//	id 3  done, queue 'done'
//	id 4  dead, queue 'dead'
//	id 5  cancelled, queue 'cancelled'
//	id 6  dead, queue 'u', unique_key 'dup'
//	id 7  queued, queue 'u', unique_key 'dup' (so retrying job 6 violates the key)
//
// and one disabled schedule, 'fixed', for the schedule functions to aim at.
type fixture struct {
	*testBundle
	before string // checksum of the finished fixture
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	b := setup(t)
	c := b.Conn
	for _, sql := range []string{
		"SELECT jobs_enqueue('k', queue => 'running', unique_key => 'held')",
		"SELECT * FROM jobs_claim('w', 1, ARRAY['running'], '1 hour')",
		"SELECT jobs_enqueue('k', queue => 'queued', run_at => now() - interval '1 minute')",
		"SELECT jobs_enqueue('k', queue => 'done')",
		"SELECT * FROM jobs_claim('w', 1, ARRAY['done'])",
		"SELECT jobs_complete(3, 1)",
		"SELECT jobs_enqueue('k', queue => 'dead', max_attempts => 1)",
		"SELECT * FROM jobs_claim('w', 1, ARRAY['dead'])",
		"SELECT jobs_fail(4, 1, 'boom')",
		"SELECT jobs_enqueue('k', queue => 'cancelled')",
		"SELECT jobs_cancel(5)",
		"SELECT jobs_enqueue('k', queue => 'u', unique_key => 'dup', max_attempts => 1)",
		"SELECT * FROM jobs_claim('w', 1, ARRAY['u'])",
		"SELECT jobs_fail(6, 1, 'boom')",
		"SELECT jobs_enqueue('k', queue => 'u', unique_key => 'dup')",
		"SELECT jobs_schedule('fixed', '0 3 * * *', 'k', queue => 'queued', enabled => false)",
	} {
		mustCall(t, c, sql)
	}
	got := queryOne[string](t, c, "SELECT string_agg(id || ':' || state || ':' || attempts, ' ' ORDER BY id) FROM jobs")
	if want := "1:running:1 2:queued:0 3:done:1 4:dead:1 5:cancelled:0 6:dead:1 7:queued:0"; got != want {
		t.Fatalf("fixture is %q, want %q", got, want)
	}
	return &fixture{testBundle: b, before: jobstest.TableChecksum(t, c)}
}

// unchanged fails the test when the fixture's tables differ from how they were built.
func (f *fixture) unchanged(t *testing.T, conn *pgx.Conn, what string) {
	t.Helper()
	if after := jobstest.TableChecksum(t, conn); after != f.before {
		t.Errorf("%s changed the tables", what)
	}
}

// sqlParam is one parameter of a public function, with a valid argument aimed at the
// fixture's jobs, so that a call that wrongly succeeded would change the fixture.
type sqlParam struct {
	name  string
	typ   string
	valid string // SQL expression of a valid argument

	// nullable: NULL is a documented value (a default for all, or "no unique key").
	nullable bool

	// nullElem, for arrays: the same argument with a NULL element, and the parameter the
	// error must name ("" when a NULL element is allowed).
	nullElem, nullElemParam string
}

type sqlFunc struct {
	name   string
	params []sqlParam
}

// publicFuncs lists every public function with parameters. jobs_requeue_expired(),
// jobs_stats() and jobs_metrics() take none.
var publicFuncs = []sqlFunc{
	{"jobs_enqueue", []sqlParam{
		{name: "kind", typ: "text", valid: "'k'"},
		{name: "payload", typ: "jsonb", valid: `'{"a": 1}'`},
		{name: "queue", typ: "text", valid: "'queued'"},
		{name: "run_at", typ: "timestamptz", valid: "now()"},
		{name: "priority", typ: "integer", valid: "0"},
		{name: "max_attempts", typ: "integer", valid: "5"},
		{name: "unique_key", typ: "text", valid: "'fresh'", nullable: true},
		{name: "concurrency_key", typ: "text", valid: "'ck'", nullable: true},
		{name: "meta", typ: "jsonb", valid: `'{"m": "1"}'`, nullable: true},
		{name: "notify", typ: "boolean", valid: "false"},
		{name: "depends_on", typ: "bigint[]", valid: "ARRAY[3]", nullable: true,
			nullElem: "ARRAY[3, NULL]", nullElemParam: "depends_on"},
		{name: "on_parent_failure", typ: "text", valid: "'run'"},
		{name: "notify_finished", typ: "boolean", valid: "true"},
	}},
	{"jobs_enqueue_workflow", []sqlParam{
		{name: "steps", typ: "jsonb", valid: `'[{"name": "a", "kind": "k", "queue": "queued"}, {"name": "b", "kind": "k", "depends_on": ["a"]}]'`},
	}},
	{"jobs_enqueue_many", []sqlParam{
		{name: "kinds", typ: "text[]", valid: "ARRAY['a', 'b']",
			nullElem: "ARRAY['a', NULL]", nullElemParam: "kinds[2]"},
		{name: "payloads", typ: "jsonb[]", valid: `ARRAY['{}', '[]']::jsonb[]`, nullable: true,
			nullElem: `ARRAY['{}', NULL]::jsonb[]`, nullElemParam: "payloads[2]"},
		{name: "queues", typ: "text[]", valid: "ARRAY['queued', 'u']", nullable: true,
			nullElem: "ARRAY['queued', NULL]", nullElemParam: "queues[2]"},
		{name: "run_ats", typ: "timestamptz[]", valid: "ARRAY[now(), now()]", nullable: true,
			nullElem: "ARRAY[now(), NULL]", nullElemParam: "run_ats[2]"},
		{name: "priorities", typ: "integer[]", valid: "ARRAY[1, 2]", nullable: true,
			nullElem: "ARRAY[1, NULL]", nullElemParam: "priorities[2]"},
		{name: "max_attempts", typ: "integer[]", valid: "ARRAY[3, 4]", nullable: true,
			nullElem: "ARRAY[3, NULL]", nullElemParam: "max_attempts[2]"},
		{name: "unique_keys", typ: "text[]", valid: "ARRAY['x', 'y']", nullable: true,
			nullElem: "ARRAY['x', NULL]"},
		{name: "concurrency_keys", typ: "text[]", valid: "ARRAY['c', 'd']", nullable: true,
			nullElem: "ARRAY['c', NULL]"},
		{name: "metas", typ: "jsonb[]", valid: `ARRAY['{}', '{"m": "1"}']::jsonb[]`, nullable: true,
			nullElem: `ARRAY['{}', NULL]::jsonb[]`},
		{name: "notify", typ: "boolean", valid: "false"},
	}},
	{"jobs_claim", []sqlParam{
		{name: "worker", typ: "text", valid: "'w2'"},
		{name: "max_jobs", typ: "integer", valid: "10"},
		{name: "queues", typ: "text[]", valid: "ARRAY['queued']", nullable: true,
			nullElem: "ARRAY['queued', NULL]", nullElemParam: "queues"},
		{name: "lease", typ: "interval", valid: "'1 minute'"},
	}},
	{"jobs_complete", []sqlParam{
		{name: "id", typ: "bigint", valid: "1"},
		{name: "attempt", typ: "integer", valid: "1"},
		{name: "result", typ: "jsonb", valid: `'{"r": 1}'`, nullable: true},
	}},
	{"jobs_complete_many", []sqlParam{
		{name: "ids", typ: "bigint[]", valid: "ARRAY[1, 2]",
			nullElem: "ARRAY[1, NULL]", nullElemParam: "ids"},
		{name: "attempts", typ: "integer[]", valid: "ARRAY[1, 1]",
			nullElem: "ARRAY[1, NULL]", nullElemParam: "attempts"},
		{name: "results", typ: "jsonb[]", valid: `ARRAY['1', '{"r": 2}']::jsonb[]`, nullable: true,
			nullElem: `ARRAY['1', NULL]::jsonb[]`},
	}},
	{"jobs_checkpoint", []sqlParam{
		{name: "id", typ: "bigint", valid: "1"},
		{name: "attempt", typ: "integer", valid: "1"},
		{name: "step", typ: "text", valid: "'s'"},
		{name: "value", typ: "jsonb", valid: `'{"v": 1}'`},
	}},
	{"jobs_progress", []sqlParam{
		{name: "id", typ: "bigint", valid: "1"},
		{name: "attempt", typ: "integer", valid: "1"},
		{name: "progress", typ: "jsonb", valid: "'50'", nullable: true},
	}},
	{"jobs_complete_and_claim", []sqlParam{
		{name: "worker", typ: "text", valid: "'w2'"},
		{name: "ids", typ: "bigint[]", valid: "ARRAY[1]",
			nullElem: "ARRAY[NULL]::bigint[]", nullElemParam: "ids"},
		{name: "attempts", typ: "integer[]", valid: "ARRAY[1]",
			nullElem: "ARRAY[NULL]::integer[]", nullElemParam: "attempts"},
		{name: "max_jobs", typ: "integer", valid: "10"},
		{name: "queues", typ: "text[]", valid: "ARRAY['queued']", nullable: true,
			nullElem: "ARRAY['queued', NULL]", nullElemParam: "queues"},
		{name: "lease", typ: "interval", valid: "'1 minute'"},
		{name: "results", typ: "jsonb[]", valid: `ARRAY['1']::jsonb[]`, nullable: true,
			nullElem: `ARRAY[NULL]::jsonb[]`},
	}},
	{"jobs_fail", []sqlParam{
		{name: "id", typ: "bigint", valid: "1"},
		{name: "attempt", typ: "integer", valid: "1"},
		{name: "error", typ: "text", valid: "'e'"},
		{name: "retry_at", typ: "timestamptz", valid: "now()", nullable: true},
	}},
	{"jobs_heartbeat", []sqlParam{
		{name: "id", typ: "bigint", valid: "1"},
		{name: "attempt", typ: "integer", valid: "1"},
		{name: "lease", typ: "interval", valid: "'2 hours'"},
	}},
	{"jobs_heartbeat_many", []sqlParam{
		{name: "ids", typ: "bigint[]", valid: "ARRAY[1, 2]",
			nullElem: "ARRAY[NULL, 2]", nullElemParam: "ids"},
		{name: "attempts", typ: "integer[]", valid: "ARRAY[1, 1]",
			nullElem: "ARRAY[NULL, 1]", nullElemParam: "attempts"},
		{name: "lease", typ: "interval", valid: "'2 hours'"},
	}},
	{"jobs_snooze", []sqlParam{
		{name: "id", typ: "bigint", valid: "1"},
		{name: "attempt", typ: "integer", valid: "1"},
		{name: "run_at", typ: "timestamptz", valid: "now() + interval '1 day'"},
	}},
	{"jobs_cancel", []sqlParam{
		{name: "id", typ: "bigint", valid: "2"},
	}},
	{"jobs_cancel", []sqlParam{
		{name: "id", typ: "bigint", valid: "1"},
		{name: "attempt", typ: "integer", valid: "1"},
		{name: "error", typ: "text", valid: "'give up'"},
	}},
	{"jobs_retry", []sqlParam{
		{name: "id", typ: "bigint", valid: "4"},
	}},
	{"jobs_prune", []sqlParam{
		{name: "older_than", typ: "interval", valid: "'0'"},
		{name: "include_dead", typ: "boolean", valid: "true"},
		{name: "max_jobs", typ: "integer", valid: "100"},
	}},
	{"jobs_retry_many", []sqlParam{
		{name: "ids", typ: "bigint[]", valid: "ARRAY[4]", nullable: true, nullElem: "ARRAY[4, NULL]"},
		{name: "queue", typ: "text", valid: "'dead'", nullable: true},
		{name: "kind", typ: "text", valid: "'k'", nullable: true},
		{name: "states", typ: "jobs_state[]", valid: "'{dead}'",
			nullElem: "ARRAY['dead', NULL]::jobs_state[]", nullElemParam: "states"},
		{name: "max_jobs", typ: "integer", valid: "10"},
	}},
	{"jobs_cancel_many", []sqlParam{
		{name: "ids", typ: "bigint[]", valid: "ARRAY[2]", nullable: true, nullElem: "ARRAY[2, NULL]"},
		{name: "queue", typ: "text", valid: "'queued'", nullable: true},
		{name: "kind", typ: "text", valid: "'k'", nullable: true},
		{name: "states", typ: "jobs_state[]", valid: "'{queued}'",
			nullElem: "ARRAY['queued', NULL]::jobs_state[]", nullElemParam: "states"},
		{name: "max_jobs", typ: "integer", valid: "10"},
	}},
	{"jobs_delete_many", []sqlParam{
		{name: "ids", typ: "bigint[]", valid: "ARRAY[3]", nullable: true, nullElem: "ARRAY[3, NULL]"},
		{name: "queue", typ: "text", valid: "'done'", nullable: true},
		{name: "kind", typ: "text", valid: "'k'", nullable: true},
		{name: "states", typ: "jobs_state[]", valid: "'{done}'",
			nullElem: "ARRAY['done', NULL]::jobs_state[]", nullElemParam: "states"},
		{name: "max_jobs", typ: "integer", valid: "10"},
	}},
	{"jobs_maintain", []sqlParam{
		{name: "max_jobs", typ: "integer", valid: "10"},
	}},
	{"jobs_backoff", []sqlParam{
		{name: "attempt", typ: "integer", valid: "1"},
	}},
	{"jobs_get", []sqlParam{
		{name: "id", typ: "bigint", valid: "1"},
	}},
	{"jobs_result", []sqlParam{
		{name: "id", typ: "bigint", valid: "1"},
	}},
	{"jobs_cancel_workflow", []sqlParam{
		{name: "workflow_id", typ: "bigint", valid: "2"},
	}},
	{"jobs_cron_next", []sqlParam{
		{name: "cron", typ: "text", valid: "'*/5 * * * *'"},
		{name: "after", typ: "timestamptz", valid: "now()"},
		{name: "timezone", typ: "text", valid: "'Europe/Berlin'"},
	}},
	{"jobs_schedule", []sqlParam{
		{name: "name", typ: "text", valid: "'s'"},
		{name: "cron", typ: "text", valid: "'*/5 * * * *'"},
		{name: "kind", typ: "text", valid: "'k'"},
		{name: "payload", typ: "jsonb", valid: `'{"a": 1}'`},
		{name: "queue", typ: "text", valid: "'queued'"},
		{name: "timezone", typ: "text", valid: "'Europe/Berlin'"},
		{name: "priority", typ: "integer", valid: "0"},
		{name: "max_attempts", typ: "integer", valid: "5"},
		{name: "enabled", typ: "boolean", valid: "true"},
	}},
	{"jobs_unschedule", []sqlParam{
		{name: "name", typ: "text", valid: "'s'"},
	}},
	{"jobs_schedule_run", []sqlParam{
		{name: "name", typ: "text", valid: "'fixed'"},
	}},
	{"jobs_schedule_set_enabled", []sqlParam{
		{name: "name", typ: "text", valid: "'fixed'"},
		{name: "enabled", typ: "boolean", valid: "true"},
	}},
	{"jobs_queue_limited", []sqlParam{
		{name: "queue", typ: "text", valid: "'queued'"},
	}},
	{"jobs_set_concurrency", []sqlParam{
		{name: "queue", typ: "text", valid: "'queued'"},
		{name: "max_running", typ: "integer", valid: "5", nullable: true},
		{name: "per_key", typ: "integer", valid: "2", nullable: true},
		{name: "fair", typ: "boolean", valid: "true", nullable: true},
		{name: "ordered", typ: "boolean", valid: "true", nullable: true},
	}},
	{"jobs_set_rate_limit", []sqlParam{
		{name: "queue", typ: "text", valid: "'queued'"},
		{name: "max_starts", typ: "integer", valid: "5", nullable: true},
		{name: "per", typ: "interval", valid: "'1 second'"},
		{name: "per_key", typ: "boolean", valid: "true"},
	}},
	{"jobs_inspect", []sqlParam{
		{name: "id", typ: "bigint", valid: "1"},
	}},
	{"jobs_list", []sqlParam{
		{name: "state", typ: "jobs_state", valid: "'dead'", nullable: true},
		{name: "queue", typ: "text", valid: "'dead'", nullable: true},
		{name: "kind", typ: "text", valid: "'k'", nullable: true},
		{name: "max_jobs", typ: "integer", valid: "10"},
		{name: "before_id", typ: "bigint", valid: "5", nullable: true},
	}},
}

// callSQL builds SELECT * FROM f(...) with the valid arguments, argument i replaced by
// replacement when i >= 0. Every argument is cast, so overloads resolve.
func (f sqlFunc) callSQL(i int, replacement string) string {
	args := make([]string, len(f.params))
	for j, p := range f.params {
		v := p.valid
		if j == i {
			v = replacement
		}
		args[j] = "(" + v + ")::" + p.typ
	}
	return "SELECT * FROM " + f.name + "(" + strings.Join(args, ", ") + ")"
}

func (f sqlFunc) title() string {
	return fmt.Sprintf("%s%d", strings.TrimPrefix(f.name, "jobs_"), len(f.params))
}

const (
	maxInt32 = math.MaxInt32
	minInt32 = math.MinInt32
	maxInt64 = math.MaxInt64
)

// claimed is one row of jobs_claim, with the payload as the server prints it.
type claimed struct {
	ID      int64
	Queue   string
	Kind    string
	Payload string
	Attempt int32
}

func claimAll(t *testing.T, conn *pgx.Conn, worker string, maxJobs int, queues []string, lease string) []claimed {
	t.Helper()
	rows, err := conn.Query(t.Context(),
		"SELECT id, queue, kind, payload::text, attempt FROM jobs_claim($1, $2, $3, $4::interval)",
		worker, maxJobs, queues, lease)
	if err != nil {
		t.Fatalf("jobs_claim: %v", err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowToStructByPos[claimed])
	if err != nil {
		t.Fatalf("jobs_claim: %v", err)
	}
	return out
}

func claimOne(t *testing.T, conn *pgx.Conn, worker, queue string) claimed {
	t.Helper()
	got := claimAll(t, conn, worker, 1, []string{queue}, "1 hour")
	if len(got) != 1 {
		t.Fatalf("jobs_claim(%q, 1, [%q]) returned %d jobs, want 1", worker, queue, len(got))
	}
	return got[0]
}

// jobRow is a jobs row as the tests look at it; timestamps as text, so infinity fits.
type jobRow struct {
	State       string
	Queue       string
	Kind        string
	Payload     string
	Attempts    int32
	MaxAttempts int32
	RunAt       string
	LeaseHolder *string
	LastError   *string
	UniqueKey   *string
	Errors      []jobError
}

type jobError struct {
	Attempt int32   `json:"attempt"`
	Error   string  `json:"error"`
	Worker  *string `json:"worker"`
}

func getJob(t *testing.T, conn *pgx.Conn, id int64) jobRow {
	t.Helper()
	var r jobRow
	err := conn.QueryRow(t.Context(),
		`SELECT state::text, queue, kind, payload::text, attempts, max_attempts, run_at::text, lease_holder,
		        last_error, unique_key, errors
		 FROM jobs WHERE id = $1`, id).
		Scan(&r.State, &r.Queue, &r.Kind, &r.Payload, &r.Attempts, &r.MaxAttempts, &r.RunAt, &r.LeaseHolder,
			&r.LastError, &r.UniqueKey, &r.Errors)
	if err != nil {
		t.Fatalf("failed to read job %d: %v", id, err)
	}
	return r
}

// statsWork checks that jobs_stats still answers and returns its rows as "queue/state/jobs".
func statsWork(t *testing.T, conn *pgx.Conn) []string {
	t.Helper()
	rows, err := call(t.Context(), conn, "SELECT queue, state::text, jobs FROM jobs_stats()")
	if err != nil {
		t.Fatalf("jobs_stats() failed: %v", err)
	}
	var out []string
	for _, r := range rows {
		out = append(out, fmt.Sprintf("%s/%s/%d", r[0], r[1], r[2]))
	}
	return out
}

func deref(s *string) string {
	if s == nil {
		return "<NULL>"
	}
	return *s
}

// refuse runs a call that must fail with the 22023 error naming param of fn and leave the
// tables as they were.
func refuse(t *testing.T, conn *pgx.Conn, fn, param, sql string, args ...any) {
	t.Helper()
	before := jobstest.TableChecksum(t, conn)
	_, err := call(t.Context(), conn, sql, args...)
	requireInvalid(t, err, fn, param)
	if jobstest.TableChecksum(t, conn) != before {
		t.Errorf("%s failed but changed the tables", sql)
	}
}
