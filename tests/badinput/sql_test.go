// Package badinput calls every public jobs_* function with bad, extreme and strange input on
// a real server. Each call must either fail with a clear error (SQLSTATE 22023 naming the
// parameter, or another SQLSTATE the function's header documents) and change nothing, or
// succeed with a result the test verifies. property_test.go then interleaves random valid
// and invalid calls and checks the table's invariants after each one.
package badinput

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"

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

// publicFuncs lists every public function with parameters. jobs_requeue_expired() and
// jobs_stats() take none.
var publicFuncs = []sqlFunc{
	{"jobs_enqueue", []sqlParam{
		{name: "kind", typ: "text", valid: "'k'"},
		{name: "payload", typ: "jsonb", valid: `'{"a": 1}'`},
		{name: "queue", typ: "text", valid: "'queued'"},
		{name: "run_at", typ: "timestamptz", valid: "now()"},
		{name: "priority", typ: "integer", valid: "0"},
		{name: "max_attempts", typ: "integer", valid: "5"},
		{name: "unique_key", typ: "text", valid: "'fresh'", nullable: true},
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
	}},
	{"jobs_complete_many", []sqlParam{
		{name: "ids", typ: "bigint[]", valid: "ARRAY[1, 2]",
			nullElem: "ARRAY[1, NULL]", nullElemParam: "ids"},
		{name: "attempts", typ: "integer[]", valid: "ARRAY[1, 1]",
			nullElem: "ARRAY[1, NULL]", nullElemParam: "attempts"},
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
	{"jobs_backoff", []sqlParam{
		{name: "attempt", typ: "integer", valid: "1"},
	}},
	{"jobs_get", []sqlParam{
		{name: "id", typ: "bigint", valid: "1"},
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

// TestValidBaselines: the valid arguments the NULL cases start from are accepted, so each
// NULL case fails because of its NULL and nothing else. Each call runs in a transaction that
// is rolled back; the documented NULLs (defaults) are accepted too.
func TestValidBaselines(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	run := func(t *testing.T, sql string) {
		tx, err := f.Conn.Begin(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = tx.Rollback(context.WithoutCancel(t.Context())) }()
		rows, err := tx.Query(t.Context(), sql)
		if err == nil {
			for rows.Next() {
			}
			rows.Close()
			err = rows.Err()
		}
		if err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	for _, fn := range publicFuncs {
		t.Run(fn.title(), func(t *testing.T) { run(t, fn.callSQL(-1, "")) })
		for i, p := range fn.params {
			if p.nullable {
				t.Run(fn.title()+"/"+p.name+"NullIsDefault", func(t *testing.T) { run(t, fn.callSQL(i, "NULL")) })
			}
			if p.nullElem != "" && p.nullElemParam == "" {
				t.Run(fn.title()+"/"+p.name+"NullElementAllowed", func(t *testing.T) { run(t, fn.callSQL(i, p.nullElem)) })
			}
		}
	}
	f.unchanged(t, f.Conn, "the rolled-back calls")
}

// TestNullArguments: each parameter in turn is NULL (or, for arrays, holds a NULL) while
// the others are valid: 22023 naming that parameter, and no change to any table.
func TestNullArguments(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	type nullCase struct{ name, sql, fn, param string }
	var cases []nullCase
	for _, fn := range publicFuncs {
		for i, p := range fn.params {
			if !p.nullable {
				cases = append(cases, nullCase{fn.title() + "/" + p.name + "Null", fn.callSQL(i, "NULL"), fn.name, p.name})
			}
			if p.nullElemParam != "" {
				cases = append(cases, nullCase{fn.title() + "/" + p.name + "NullElement", fn.callSQL(i, p.nullElem), fn.name, p.nullElemParam})
			}
		}
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			conn := f.Connect(t)
			_, err := call(t.Context(), conn, tc.sql)
			requireInvalid(t, err, tc.fn, tc.param)
			f.unchanged(t, conn, tc.sql)
		})
	}
}

const (
	maxInt32 = math.MaxInt32
	minInt32 = math.MinInt32
	maxInt64 = math.MaxInt64
)

// TestInvalidArguments: empty strings, values over the documented limits (10000+ characters,
// 1e6-element arrays), zero, negative and mixed-sign intervals, leases over 100 years,
// out-of-range integers. Each is refused with 22023 naming the parameter (or another
// documented SQLSTATE) and changes nothing, not even the good elements of a batch.
func TestInvalidArguments(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	long := strings.Repeat("x", 10001)
	million := 1_000_000
	kinds1e6 := make([]string, million)
	for i := range kinds1e6 {
		kinds1e6[i] = "k"
	}
	ids1e6 := make([]int64, million)
	attempts1e6 := make([]int32, million)
	for i := range ids1e6 {
		ids1e6[i] = 1
		attempts1e6[i] = 1
	}

	for _, tc := range []struct {
		name  string
		sql   string
		args  []any
		fn    string
		param string
		code  string // a documented SQLSTATE other than 22023; param is then unused
	}{
		// jobs_enqueue: kind, queue and unique_key are 1 to 200 bytes, counted in bytes.
		{name: "EnqueueKindEmpty", sql: "SELECT jobs_enqueue('')", fn: "jobs_enqueue", param: "kind"},
		{name: "EnqueueKind201Bytes", sql: "SELECT jobs_enqueue(repeat('k', 201))", fn: "jobs_enqueue", param: "kind"},
		{name: "EnqueueKind10001Chars", sql: "SELECT jobs_enqueue($1)", args: []any{long}, fn: "jobs_enqueue", param: "kind"},
		{name: "EnqueueKind51Emoji204Bytes", sql: "SELECT jobs_enqueue($1)", args: []any{strings.Repeat("😀", 51)}, fn: "jobs_enqueue", param: "kind"},
		{name: "EnqueueQueueEmpty", sql: "SELECT jobs_enqueue('k', queue => '')", fn: "jobs_enqueue", param: "queue"},
		{name: "EnqueueQueue10001Chars", sql: "SELECT jobs_enqueue('k', queue => $1)", args: []any{long}, fn: "jobs_enqueue", param: "queue"},
		{name: "EnqueueQueue201BytesOfCombiningMarks", sql: "SELECT jobs_enqueue('k', queue => 'e' || repeat(U&'\\0301', 100))", fn: "jobs_enqueue", param: "queue"},
		{name: "EnqueueUniqueKeyEmpty", sql: "SELECT jobs_enqueue('k', unique_key => '')", fn: "jobs_enqueue", param: "unique_key"},
		{name: "EnqueueUniqueKey10001Chars", sql: "SELECT jobs_enqueue('k', unique_key => $1)", args: []any{long}, fn: "jobs_enqueue", param: "unique_key"},
		{name: "EnqueueMaxAttemptsZero", sql: "SELECT jobs_enqueue('k', max_attempts => 0)", fn: "jobs_enqueue", param: "max_attempts"},
		{name: "EnqueueMaxAttemptsMinInt", sql: "SELECT jobs_enqueue('k', max_attempts => $1)", args: []any{int32(minInt32)}, fn: "jobs_enqueue", param: "max_attempts"},
		// The kind is checked first, but whichever bad parameter is named, nothing changes.
		{name: "EnqueueEverythingWrong", sql: "SELECT jobs_enqueue('', NULL, '', NULL, NULL, 0, '')", fn: "jobs_enqueue", param: "kind"},

		// jobs_enqueue_many: all or nothing, the bad element named with its index.
		{name: "EnqueueManyKinds1e6", sql: "SELECT * FROM jobs_enqueue_many($1)", args: []any{kinds1e6}, fn: "jobs_enqueue_many", param: "kinds"},
		{name: "EnqueueManyKinds100001", sql: "SELECT * FROM jobs_enqueue_many(array_fill('k'::text, ARRAY[100001]))", fn: "jobs_enqueue_many", param: "kinds"},
		{name: "EnqueueManyQueues1e6ForOneKind", sql: "SELECT * FROM jobs_enqueue_many(ARRAY['k'], queues => $1)", args: []any{kinds1e6}, fn: "jobs_enqueue_many", param: "queues"},
		{name: "EnqueueManyLastKindEmpty", sql: "SELECT * FROM jobs_enqueue_many(ARRAY['a', 'b', 'c', ''])", fn: "jobs_enqueue_many", param: "kinds[4]"},
		{name: "EnqueueManyKind201Bytes", sql: "SELECT * FROM jobs_enqueue_many(ARRAY['a', repeat('k', 201)])", fn: "jobs_enqueue_many", param: "kinds[2]"},
		{name: "EnqueueManyQueueEmpty", sql: "SELECT * FROM jobs_enqueue_many(ARRAY['a', 'b'], queues => ARRAY['q', ''])", fn: "jobs_enqueue_many", param: "queues[2]"},
		{name: "EnqueueManyQueue10001Chars", sql: "SELECT * FROM jobs_enqueue_many(ARRAY['a'], queues => ARRAY[$1])", args: []any{long}, fn: "jobs_enqueue_many", param: "queues[1]"},
		{name: "EnqueueManyUniqueKeyEmpty", sql: "SELECT * FROM jobs_enqueue_many(ARRAY['a', 'b'], unique_keys => ARRAY[NULL, ''])", fn: "jobs_enqueue_many", param: "unique_keys[2]"},
		{name: "EnqueueManyUniqueKey201Bytes", sql: "SELECT * FROM jobs_enqueue_many(ARRAY['a'], unique_keys => ARRAY[repeat('u', 201)])", fn: "jobs_enqueue_many", param: "unique_keys[1]"},
		{name: "EnqueueManyMaxAttemptsNegative", sql: "SELECT * FROM jobs_enqueue_many(ARRAY['a', 'b'], max_attempts => ARRAY[1, -1])", fn: "jobs_enqueue_many", param: "max_attempts[2]"},
		{name: "EnqueueManyPrioritiesTooShort", sql: "SELECT * FROM jobs_enqueue_many(ARRAY['a', 'b'], priorities => ARRAY[1])", fn: "jobs_enqueue_many", param: "priorities"},
		{name: "EnqueueManyRunAtsEmptyForTwoKinds", sql: "SELECT * FROM jobs_enqueue_many(ARRAY['a', 'b'], run_ats => '{}')", fn: "jobs_enqueue_many", param: "run_ats"},
		{name: "EnqueueManyUniqueKeysTooLong", sql: "SELECT * FROM jobs_enqueue_many(ARRAY['a'], unique_keys => ARRAY['x', 'y'])", fn: "jobs_enqueue_many", param: "unique_keys"},

		// jobs_claim
		{name: "ClaimWorkerEmpty", sql: "SELECT * FROM jobs_claim('')", fn: "jobs_claim", param: "worker"},
		{name: "ClaimWorker10001Chars", sql: "SELECT * FROM jobs_claim($1)", args: []any{long}, fn: "jobs_claim", param: "worker"},
		{name: "ClaimWorker51Emoji204Bytes", sql: "SELECT * FROM jobs_claim($1)", args: []any{strings.Repeat("🚀", 51)}, fn: "jobs_claim", param: "worker"},
		{name: "ClaimMaxJobsZero", sql: "SELECT * FROM jobs_claim('w', 0)", fn: "jobs_claim", param: "max_jobs"},
		{name: "ClaimMaxJobs10001", sql: "SELECT * FROM jobs_claim('w', 10001)", fn: "jobs_claim", param: "max_jobs"},
		{name: "ClaimMaxJobsMaxInt", sql: "SELECT * FROM jobs_claim('w', $1)", args: []any{int32(maxInt32)}, fn: "jobs_claim", param: "max_jobs"},
		{name: "ClaimMaxJobsMinInt", sql: "SELECT * FROM jobs_claim('w', $1)", args: []any{int32(minInt32)}, fn: "jobs_claim", param: "max_jobs"},
		{name: "ClaimQueuesEmpty", sql: "SELECT * FROM jobs_claim('w', 1, '{}')", fn: "jobs_claim", param: "queues"},
		{name: "ClaimQueuesOnlyNull", sql: "SELECT * FROM jobs_claim('w', 1, ARRAY[NULL]::text[])", fn: "jobs_claim", param: "queues"},
		{name: "ClaimLeaseZero", sql: "SELECT * FROM jobs_claim('w', 1, NULL, '0')", fn: "jobs_claim", param: "lease"},
		{name: "ClaimLeaseMinusOneMicrosecond", sql: "SELECT * FROM jobs_claim('w', 1, NULL, '-1 microsecond')", fn: "jobs_claim", param: "lease"},
		{name: "ClaimLeaseMonthMinus30DaysIsZero", sql: "SELECT * FROM jobs_claim('w', 1, NULL, '1 mon -30 days')", fn: "jobs_claim", param: "lease"},
		{name: "ClaimLeaseDayMinus86400SecondsIsZero", sql: "SELECT * FROM jobs_claim('w', 1, NULL, '1 day -86400 seconds')", fn: "jobs_claim", param: "lease"},
		{name: "ClaimLeaseMonthMinus31DaysIsNegative", sql: "SELECT * FROM jobs_claim('w', 1, NULL, '1 mon -31 days')", fn: "jobs_claim", param: "lease"},
		{name: "ClaimLeaseMostNegative", sql: "SELECT * FROM jobs_claim('w', 1, NULL, '-178000000 years')", fn: "jobs_claim", param: "lease"},
		// A lease is at most 100 years; longer ones, up to those that overflow now() + lease,
		// are refused before any job is claimed. Intervals compare with 1 month = 30 days,
		// so 100 years is 36000 days.
		{name: "ClaimLease100YearsOneMicrosecond", sql: "SELECT * FROM jobs_claim('w', 1, NULL, '100 years 1 microsecond')", fn: "jobs_claim", param: "lease"},
		{name: "ClaimLease36001Days", sql: "SELECT * FROM jobs_claim('w', 1, NULL, '36001 days')", fn: "jobs_claim", param: "lease"},
		{name: "ClaimLeaseThousandYears", sql: "SELECT * FROM jobs_claim('w', 1, NULL, '1000 years')", fn: "jobs_claim", param: "lease"},
		{name: "ClaimLeaseBeyondTimestampRange", sql: "SELECT * FROM jobs_claim('w', 1, NULL, '300000 years')", fn: "jobs_claim", param: "lease"},
		{name: "ClaimLeaseMostPositive", sql: "SELECT * FROM jobs_claim('w', 1, NULL, '178000000 years')", fn: "jobs_claim", param: "lease"},
		{name: "ClaimLeaseMaxMicroseconds", sql: "SELECT * FROM jobs_claim('w', 1, NULL, '9223372036854775807 microseconds')", fn: "jobs_claim", param: "lease"},

		// jobs_complete_many and jobs_heartbeat_many: at most 100000 pairs.
		{name: "CompleteMany1e6", sql: "SELECT * FROM jobs_complete_many($1, $2)", args: []any{ids1e6, attempts1e6}, fn: "jobs_complete_many", param: "ids"},
		{name: "CompleteMany100001", sql: "SELECT * FROM jobs_complete_many(array_fill(1::bigint, ARRAY[100001]), array_fill(1, ARRAY[100001]))", fn: "jobs_complete_many", param: "ids"},
		{name: "CompleteManyAttempts1e6ForOneID", sql: "SELECT * FROM jobs_complete_many(ARRAY[1::bigint], $1)", args: []any{attempts1e6}, fn: "jobs_complete_many", param: "attempts"},
		{name: "CompleteManyIDsEmptyAttemptsNot", sql: "SELECT * FROM jobs_complete_many('{}', ARRAY[1])", fn: "jobs_complete_many", param: "attempts"},
		{name: "HeartbeatMany1e6", sql: "SELECT * FROM jobs_heartbeat_many($1, $2)", args: []any{ids1e6, attempts1e6}, fn: "jobs_heartbeat_many", param: "ids"},
		{name: "HeartbeatManyLeaseZero", sql: "SELECT * FROM jobs_heartbeat_many(ARRAY[1::bigint], ARRAY[1], '0')", fn: "jobs_heartbeat_many", param: "lease"},
		{name: "HeartbeatManyLeaseNegative", sql: "SELECT * FROM jobs_heartbeat_many(ARRAY[1::bigint], ARRAY[1], '-1 hour')", fn: "jobs_heartbeat_many", param: "lease"},
		{name: "HeartbeatManyLeaseMixedSignZero", sql: "SELECT * FROM jobs_heartbeat_many(ARRAY[1::bigint], ARRAY[1], '1 mon -30 days')", fn: "jobs_heartbeat_many", param: "lease"},
		{name: "HeartbeatManyLease100YearsOneMicrosecond", sql: "SELECT * FROM jobs_heartbeat_many(ARRAY[1::bigint], ARRAY[1], '100 years 1 microsecond')", fn: "jobs_heartbeat_many", param: "lease"},
		{name: "HeartbeatManyLeaseBeyondTimestampRange", sql: "SELECT * FROM jobs_heartbeat_many(ARRAY[1::bigint], ARRAY[1], '178000000 years')", fn: "jobs_heartbeat_many", param: "lease"},

		// jobs_heartbeat
		{name: "HeartbeatLeaseZero", sql: "SELECT jobs_heartbeat(1, 1, '0')", fn: "jobs_heartbeat", param: "lease"},
		{name: "HeartbeatLeaseMinusOneMicrosecond", sql: "SELECT jobs_heartbeat(1, 1, '-1 microsecond')", fn: "jobs_heartbeat", param: "lease"},
		{name: "HeartbeatLeaseMonthMinus31Days", sql: "SELECT jobs_heartbeat(1, 1, '1 mon -31 days')", fn: "jobs_heartbeat", param: "lease"},
		{name: "HeartbeatLease100YearsOneMicrosecond", sql: "SELECT jobs_heartbeat(1, 1, '100 years 1 microsecond')", fn: "jobs_heartbeat", param: "lease"},
		{name: "HeartbeatLeaseBeyondTimestampRange", sql: "SELECT jobs_heartbeat(1, 1, '178000000 years')", fn: "jobs_heartbeat", param: "lease"},
		// The lease is checked before the job is looked up: a stale attempt is no excuse.
		{name: "HeartbeatStaleAttemptLeaseBeyondTimestampRange", sql: "SELECT jobs_heartbeat(1, 2, '178000000 years')", fn: "jobs_heartbeat", param: "lease"},

		// jobs_prune
		{name: "PruneOlderThanMinusOneMicrosecond", sql: "SELECT jobs_prune('-1 microsecond')", fn: "jobs_prune", param: "older_than"},
		{name: "PruneOlderThanMixedSignNegative", sql: "SELECT jobs_prune('1 mon -31 days')", fn: "jobs_prune", param: "older_than"},
		{name: "PruneOlderThanMostNegative", sql: "SELECT jobs_prune('-178000000 years')", fn: "jobs_prune", param: "older_than"},
		{name: "PruneMaxJobsZero", sql: "SELECT jobs_prune('0', true, 0)", fn: "jobs_prune", param: "max_jobs"},
		{name: "PruneMaxJobsMinInt", sql: "SELECT jobs_prune('0', true, $1)", args: []any{int32(minInt32)}, fn: "jobs_prune", param: "max_jobs"},

		// jobs_backoff
		{name: "BackoffZero", sql: "SELECT jobs_backoff(0)", fn: "jobs_backoff", param: "attempt"},
		{name: "BackoffMinInt", sql: "SELECT jobs_backoff($1)", args: []any{int32(minInt32)}, fn: "jobs_backoff", param: "attempt"},

		// jobs_retry: documented 23505 when the job's unique_key is held by a live job.
		{name: "RetryUniqueKeyHeldByLiveJob", sql: "SELECT jobs_retry(6)", code: "23505"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			conn := f.Connect(t)
			_, err := call(t.Context(), conn, tc.sql, tc.args...)
			if tc.code != "" {
				if err == nil {
					t.Fatalf("%s succeeded, want SQLSTATE %s", tc.sql, tc.code)
				}
				pgtest.RequirePgError(t, err, tc.code)
			} else {
				requireInvalid(t, err, tc.fn, tc.param)
			}
			f.unchanged(t, conn, tc.sql)
		})
	}
}

// TestHarmlessArguments: calls whose arguments are strange but valid and that the fixture
// gives nothing to do: unknown or extreme ids and attempts, queues that do not exist
// (including injection-looking names), empty batches, the largest limits. Each returns its
// documented "nothing happened" answer and changes nothing.
func TestHarmlessArguments(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	for _, tc := range []struct {
		name string
		sql  string
		args []any
		want string // the rows, formatted with fmt.Sprint
	}{
		{"CompleteMaxInt64ID", "SELECT jobs_complete($1, 1)", []any{int64(maxInt64)}, "[[false]]"},
		{"CompleteNegativeID", "SELECT jobs_complete(-1, 1)", nil, "[[false]]"},
		{"CompleteZeroID", "SELECT jobs_complete(0, 1)", nil, "[[false]]"},
		{"CompleteAttemptMaxInt", "SELECT jobs_complete(1, $1)", []any{int32(maxInt32)}, "[[false]]"},
		{"CompleteAttemptMinInt", "SELECT jobs_complete(1, $1)", []any{int32(minInt32)}, "[[false]]"},
		{"CompleteAttemptZero", "SELECT jobs_complete(1, 0)", nil, "[[false]]"},
		{"CompleteDoneJob", "SELECT jobs_complete(3, 1)", nil, "[[false]]"},
		{"CompleteDeadJob", "SELECT jobs_complete(4, 1)", nil, "[[false]]"},
		{"CompleteQueuedJobAttemptZero", "SELECT jobs_complete(2, 0)", nil, "[[false]]"},
		{"FailAttemptMinusOne", "SELECT jobs_fail(1, -1, 'e')::text", nil, "[[<nil>]]"},
		{"FailMaxInt64ID", "SELECT jobs_fail($1, 1, 'e', '294276-12-31 23:59:59.999999+00')::text", []any{int64(maxInt64)}, "[[<nil>]]"},
		{"HeartbeatStaleAttemptLease100Years", "SELECT jobs_heartbeat(1, 2, '100 years')", nil, "[[false]]"},
		{"HeartbeatNegativeID", "SELECT jobs_heartbeat(-9223372036854775808, 1)", nil, "[[false]]"},
		{"SnoozeStaleAttemptToLatestTimestamp", "SELECT jobs_snooze(1, 2, '294276-12-31 23:59:59.999999+00')", nil, "[[false]]"},
		{"SnoozeUnknownIDToEarliestTimestamp", "SELECT jobs_snooze(99, 1, '4714-11-24 00:00:00+00 BC')", nil, "[[false]]"},
		{"CancelFencedStaleAttempt", "SELECT jobs_cancel(1, 0, '')", nil, "[[false]]"},
		{"CancelMaxInt64ID", "SELECT jobs_cancel($1)", []any{int64(maxInt64)}, "[[false]]"},
		{"CancelDoneJob", "SELECT jobs_cancel(3)", nil, "[[false]]"},
		{"RetryQueuedJob", "SELECT jobs_retry(2)", nil, "[[false]]"},
		{"RetryRunningJob", "SELECT jobs_retry(1)", nil, "[[false]]"},
		{"RetryNegativeID", "SELECT jobs_retry(-1)", nil, "[[false]]"},
		{"GetZeroID", "SELECT * FROM jobs_get(0)", nil, "[]"},
		{"GetMaxInt64ID", "SELECT * FROM jobs_get($1)", []any{int64(maxInt64)}, "[]"},
		{"CompleteManyEmpty", "SELECT * FROM jobs_complete_many('{}', '{}')", nil, "[]"},
		{"CompleteManyUnknownIDs", "SELECT * FROM jobs_complete_many(ARRAY[0, -1, $1::bigint], ARRAY[1, 1, 1])", []any{int64(maxInt64)}, "[]"},
		{"CompleteManyStaleAttempts", "SELECT * FROM jobs_complete_many(ARRAY[1, 1, 2], ARRAY[0, 2, 0])", nil, "[]"},
		{"CompleteMany100000Unknown", "SELECT * FROM jobs_complete_many(array_fill(0::bigint, ARRAY[100000]), array_fill(1, ARRAY[100000]))", nil, "[]"},
		{"HeartbeatManyEmpty", "SELECT * FROM jobs_heartbeat_many('{}', '{}', '1 microsecond')", nil, "[]"},
		{"HeartbeatManyStale", "SELECT * FROM jobs_heartbeat_many(ARRAY[1, 3, 4], ARRAY[2, 1, 1])", nil, "[]"},
		{"EnqueueManyEmpty", "SELECT * FROM jobs_enqueue_many('{}')", nil, "[]"},
		{"EnqueueManyEmptyWithEmptyArrays", "SELECT * FROM jobs_enqueue_many('{}', '{}', '{}', '{}', '{}', '{}', '{}')", nil, "[]"},
		{"ClaimUnknownQueue", "SELECT id FROM jobs_claim('w', 10000, ARRAY['nope'])", nil, "[]"},
		{"ClaimEmptyQueueName", "SELECT id FROM jobs_claim('w', 1, ARRAY[''])", nil, "[]"},
		{"ClaimInjectionQueueName", "SELECT id FROM jobs_claim('w', 1, ARRAY[$1])", []any{"queued' OR '1'='1"}, "[]"},
		{"ClaimInjectionQueueNames", "SELECT id FROM jobs_claim('w', 5, $1)", []any{[]string{"queued'; --", "u\\", "%", "_", "queued "}}, "[]"},
		{"ClaimRunningQueueOnly", "SELECT id FROM jobs_claim('w', 1, ARRAY['running', 'done', 'dead', 'cancelled'])", nil, "[]"},
		{"PruneNothingOldEnough", "SELECT jobs_prune('1000 years', true, $1)", []any{int32(maxInt32)}, "[[0]]"},
		// now() - older_than would overflow the timestamp range: nothing finished that long
		// ago, so 0, not an error.
		{"PruneOlderThanBeyondTimestampRange", "SELECT jobs_prune('300000 years', true, $1)", []any{int32(maxInt32)}, "[[0]]"},
		{"PruneOlderThanMostPositive", "SELECT jobs_prune('178000000 years', true)", nil, "[[0]]"},
		{"PruneOlderThanMaxMicroseconds", "SELECT jobs_prune('9223372036854775807 microseconds', true)", nil, "[[0]]"},
		{"RequeueExpiredNothingExpired", "SELECT jobs_requeue_expired()", nil, "[[0]]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			conn := f.Connect(t)
			got, err := call(t.Context(), conn, tc.sql, tc.args...)
			if err != nil {
				t.Fatalf("%s: %v", tc.sql, err)
			}
			if s := fmt.Sprint(got); s != tc.want {
				t.Errorf("%s = %s, want %s", tc.sql, s, tc.want)
			}
			f.unchanged(t, conn, tc.sql)
		})
	}

	t.Run("BackoffExtremeAttempts", func(t *testing.T) {
		t.Parallel()
		conn := f.Connect(t)
		// Defaults: base 1 s, cap 1 h, jitter 25%.
		for _, tc := range []struct {
			attempt  int32
			min, max time.Duration
		}{
			{1, 750 * time.Millisecond, 1250 * time.Millisecond},
			{32, 45 * time.Minute, 75 * time.Minute},
			{101, 45 * time.Minute, 75 * time.Minute},
			{maxInt32, 45 * time.Minute, 75 * time.Minute},
		} {
			d := queryOne[time.Duration](t, conn, "SELECT jobs_backoff($1)", tc.attempt)
			if d < tc.min || d > tc.max {
				t.Errorf("jobs_backoff(%d) = %s, want between %s and %s", tc.attempt, d, tc.min, tc.max)
			}
		}
		f.unchanged(t, conn, "jobs_backoff")
	})
}

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

// weirdStrings are valid kinds, queues, workers, unique keys and error texts (non-empty,
// at most 200 bytes, no NUL) that a careless function would mangle: quotes, semicolons,
// backslashes, format specifiers, LIKE wildcards, control characters, emoji, right-to-left
// text, combining marks and SQL-injection attempts.
var weirdStrings = []struct{ name, s string }{
	{"SingleQuotes", "it's a 'job''"},
	{"DoubleQuotes", `say "hi" ""`},
	{"Semicolons", "a;b; ;"},
	{"Backslashes", `C:\new\table\\ \' \"`},
	{"DollarQuotes", "$$ $skiplock$ $1"},
	{"FormatSpecifiers", "%s %I %L %1$s %% %n %x"},
	{"LikeWildcards", `%_\%`},
	{"Whitespace", " \t\r\n "},
	{"ControlCharacters", "\x01\x1b[31mred\x1b[0m\x7f\b"},
	{"Emoji", "📦🚀✨👩‍👩‍👧‍👦🏳️‍🌈"},
	{"RightToLeft", "שלום עולם مرحبا بالعالم \u202eabc"},
	{"CombiningMarks", "e\u0301 a\u0308\u0323 Z\u0324\u0354\u0367\u0311\u0313"},
	{"ZeroWidth", "a\u200bb\u200c\u200d\ufeff"},
	{"InjectionQuote", "'); DROP TABLE jobs; --"},
	{"InjectionDollar", "$$; DELETE FROM jobs; SELECT $$"},
	{"InjectionComment", "x'/**/OR/**/'1'='1"},
	{"InjectionIdentifier", `"; TRUNCATE jobs_settings; --`},
	{"JSONText", `{"a": [1, "two"]}`},
	{"Exactly200BytesOfEmoji", strings.Repeat("😀", 50)},
	{"Exactly200BytesASCII", strings.Repeat("k", 200)},
}

// TestWeirdStringsRoundTrip: a weird string used as kind, queue, worker, unique key or error
// text comes back byte for byte wherever the API returns it.
func TestWeirdStringsRoundTrip(t *testing.T) {
	t.Parallel()
	for _, ws := range weirdStrings {
		t.Run(ws.name, func(t *testing.T) {
			t.Parallel()
			if len(ws.s) > 200 || strings.ContainsRune(ws.s, 0) || !utf8.ValidString(ws.s) {
				t.Fatalf("bad test string %q", ws.s)
			}
			b := setup(t)
			s := ws.s

			t.Run("Kind", func(t *testing.T) {
				conn := b.Connect(t)
				id := queryOne[int64](t, conn, "SELECT jobs_enqueue($1, queue => 'kind')", s)
				ids := mustCall(t, conn, "SELECT * FROM jobs_enqueue_many(ARRAY[$1::text, 'plain', $1::text], queues => ARRAY['kind', 'kind', 'kind'])", s)
				got := claimAll(t, conn, s, 10, []string{"kind"}, "1 hour")
				if len(got) != 4 {
					t.Fatalf("claimed %d jobs, want 4", len(got))
				}
				wantKinds := map[int64]string{id: s, ids[0][0].(int64): s, ids[1][0].(int64): "plain", ids[2][0].(int64): s}
				for _, j := range got {
					if j.Kind != wantKinds[j.ID] {
						t.Errorf("job %d: claimed kind %q, want %q", j.ID, j.Kind, wantKinds[j.ID])
					}
				}
			})

			t.Run("Queue", func(t *testing.T) {
				conn := b.Connect(t)
				mustCall(t, conn, "LISTEN jobs_ready")
				id := queryOne[int64](t, conn, "SELECT jobs_enqueue('k', queue => $1)", s)
				ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
				defer cancel()
				n, err := conn.WaitForNotification(ctx)
				if err != nil {
					t.Fatalf("no jobs_ready notification: %v", err)
				}
				if n.Channel != "jobs_ready" || n.Payload != s {
					t.Errorf("notification %q on %q, want the queue %q on jobs_ready", n.Payload, n.Channel, s)
				}
				many := mustCall(t, conn, "SELECT * FROM jobs_enqueue_many(ARRAY['k'], queues => ARRAY[$1])", s)
				if !slices.Contains(statsWork(t, conn), s+"/queued/2") {
					t.Errorf("jobs_stats has no row %q: %q", s+"/queued/2", statsWork(t, conn))
				}
				got := claimAll(t, conn, "w", 10, []string{s, "other"}, "1 hour")
				if len(got) != 2 || got[0].ID != id || got[1].ID != many[0][0].(int64) {
					t.Fatalf("claimed %+v, want jobs %d and %v", got, id, many[0][0])
				}
				for _, j := range got {
					if j.Queue != s {
						t.Errorf("job %d: claimed from queue %q, want %q", j.ID, j.Queue, s)
					}
				}
			})

			t.Run("Worker", func(t *testing.T) {
				conn := b.Connect(t)
				id := queryOne[int64](t, conn, "SELECT jobs_enqueue('k', queue => 'worker')")
				j := claimAll(t, conn, s, 1, []string{"worker"}, "1 hour")
				if len(j) != 1 {
					t.Fatalf("claimed %d jobs, want 1", len(j))
				}
				if r := getJob(t, conn, id); r.LeaseHolder == nil || *r.LeaseHolder != s {
					t.Fatalf("lease_holder = %v, want %q", r.LeaseHolder, s)
				}
				mustCall(t, conn, "SELECT jobs_fail($1, 1, 'first', now())", id)
				// The second attempt's lease expires; jobs_requeue_expired names the holder.
				if j := claimAll(t, conn, s, 1, []string{"worker"}, "1 microsecond"); len(j) != 1 {
					t.Fatalf("claimed %d jobs, want 1", len(j))
				}
				time.Sleep(5 * time.Millisecond)
				if n := queryOne[int32](t, conn, "SELECT jobs_requeue_expired()"); n != 1 {
					t.Fatalf("jobs_requeue_expired() = %d, want 1", n)
				}
				r := getJob(t, conn, id)
				if len(r.Errors) != 2 {
					t.Fatalf("errors = %+v, want 2 entries", r.Errors)
				}
				for _, e := range r.Errors {
					if e.Worker == nil || *e.Worker != s {
						t.Errorf("errors entry %+v: worker %v, want %q", e, e.Worker, s)
					}
				}
				if r.LastError == nil || !strings.Contains(*r.LastError, "(held by "+s+", attempt 2)") {
					t.Errorf("last_error = %v, want it to name the holder %q", r.LastError, s)
				}
			})

			t.Run("UniqueKey", func(t *testing.T) {
				conn := b.Connect(t)
				id := queryOne[int64](t, conn, "SELECT jobs_enqueue('k', queue => 'key', unique_key => $1)", s)
				again := queryOne[int64](t, conn, "SELECT jobs_enqueue('other', queue => 'key', unique_key => $1)", s)
				// A key one byte shorter or longer is another key.
				other := s + " "
				if len(other) > 200 {
					_, size := utf8.DecodeLastRuneInString(s)
					other = s[:len(s)-size]
				}
				many := mustCall(t, conn, "SELECT * FROM jobs_enqueue_many(ARRAY['a', 'b'], queues => ARRAY['key', 'key'], unique_keys => ARRAY[$1::text, $2::text])", s, other)
				if again != id || many[0][0].(int64) != id {
					t.Errorf("enqueues with the same key returned %d, %d and %d, want %d each time", id, again, many[0][0], id)
				}
				if many[1][0].(int64) == id {
					t.Errorf("keys %q and %q share job %d", s, other, id)
				}
				if r := getJob(t, conn, id); r.UniqueKey == nil || *r.UniqueKey != s || r.Kind != "k" {
					t.Errorf("job %d has unique_key %v and kind %q, want %q and k", id, r.UniqueKey, r.Kind, s)
				}
			})

			t.Run("ErrorText", func(t *testing.T) {
				conn := b.Connect(t)
				id := queryOne[int64](t, conn, "SELECT jobs_enqueue('k', queue => 'error')")
				claimOne(t, conn, "w", "error")
				if st := queryOne[string](t, conn, "SELECT jobs_fail($1, 1, $2, now())::text", id, s); st != "queued" {
					t.Fatalf("jobs_fail returned %q, want queued", st)
				}
				if got := queryOne[*string](t, conn, "SELECT last_error FROM jobs_get($1)", id); got == nil || *got != s {
					t.Errorf("jobs_get last_error = %v, want %q", got, s)
				}
				claimOne(t, conn, "w", "error")
				if ok := queryOne[bool](t, conn, "SELECT jobs_cancel($1, 2, $2)", id, s); !ok {
					t.Fatal("jobs_cancel(id, 2, error) returned false for a held job")
				}
				r := getJob(t, conn, id)
				if r.State != "cancelled" || r.LastError == nil || *r.LastError != s || len(r.Errors) != 2 {
					t.Fatalf("job is %+v, want cancelled with last_error %q and 2 errors", r, s)
				}
				for i, e := range r.Errors {
					if e.Error != s || e.Attempt != int32(i+1) {
						t.Errorf("errors[%d] = %+v, want attempt %d and error %q", i, e, i+1, s)
					}
				}
			})
		})
	}
}

// TestPayloads: any JSON value is a payload (the API asks only for non-NULL jsonb), and the
// claim returns it as the server normalised it; JSON null is not SQL NULL.
func TestPayloads(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for _, tc := range []struct{ name, in, want string }{
		{"JSONNull", "null", "null"},
		{"EmptyArray", "[]", "[]"},
		{"String", `"s"`, `"s"`},
		{"Number", "1", "1"},
		{"False", "false", "false"},
		{"HugeNumber", "1e400", "1" + strings.Repeat("0", 400)},
		{"StringWithEscapes", `"\u0000 is not allowed but \n, \" and \\ are"`, ``},
		{"NestedWithUnicode", `{"🚀": ["שלום", {"e\u0301": null}]}`, ``},
		{"InjectionLooking", `{"kind": "'); DROP TABLE jobs; --"}`, `{"kind": "'); DROP TABLE jobs; --"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			conn := b.Connect(t)
			queue := "payload-" + tc.name
			_, err := call(t.Context(), conn, "SELECT jobs_enqueue('k', $1::jsonb, $2)", tc.in, queue)
			if tc.name == "StringWithEscapes" {
				// \u0000 cannot be stored in jsonb: PostgreSQL refuses the value itself
				// (22P05) before jobs_enqueue runs.
				if err == nil {
					t.Fatal("a jsonb string with \\u0000 was accepted")
				}
				pgtest.RequirePgError(t, err, "22P05")
				return
			}
			if err != nil {
				t.Fatalf("jobs_enqueue with payload %s: %v", tc.in, err)
			}
			many := mustCall(t, conn, "SELECT * FROM jobs_enqueue_many(ARRAY['k'], ARRAY[$1::jsonb], ARRAY[$2])", tc.in, queue)
			got := claimAll(t, conn, "w", 10, []string{queue}, "1 hour")
			if len(got) != 2 || got[1].ID != many[0][0].(int64) {
				t.Fatalf("claimed %+v, want 2 jobs", got)
			}
			for _, j := range got {
				if tc.want != "" && j.Payload != tc.want {
					t.Errorf("claimed payload %s, want %s", j.Payload, tc.want)
				}
				if !jsonEqual(t, j.Payload, tc.in) {
					t.Errorf("claimed payload %s is not the JSON value %s", j.Payload, tc.in)
				}
			}
		})
	}

	t.Run("TenMegabytes", func(t *testing.T) {
		t.Parallel()
		conn := b.Connect(t)
		// 10 MB of JSON: a long string with escapes and non-ASCII, and a big array.
		var sb strings.Builder
		for sb.Len() < 10<<20 {
			sb.WriteString(`quote " backslash \ newline` + "\n" + `emoji 🚀 rtl שלום `)
		}
		blob := sb.String()
		payload, err := json.Marshal(map[string]any{"blob": blob, "n": 42})
		if err != nil {
			t.Fatal(err)
		}
		if len(payload) < 10<<20 {
			t.Fatalf("payload is only %d bytes", len(payload))
		}
		id := queryOne[int64](t, conn, "SELECT jobs_enqueue('big', $1::jsonb, 'big')", string(payload))
		got := claimAll(t, conn, "w", 1, []string{"big"}, "1 hour")
		if len(got) != 1 || got[0].ID != id {
			t.Fatalf("claimed %d jobs, want job %d", len(got), id)
		}
		var back struct {
			Blob string `json:"blob"`
			N    int    `json:"n"`
		}
		if err := json.Unmarshal([]byte(got[0].Payload), &back); err != nil {
			t.Fatalf("claimed payload is not JSON: %v", err)
		}
		if back.Blob != blob || back.N != 42 {
			t.Errorf("the 10 MB payload changed on the way (blob %d bytes, want %d; n = %d)", len(back.Blob), len(blob), back.N)
		}
	})
}

func jsonEqual(t *testing.T, a, b string) bool {
	t.Helper()
	var va, vb any
	da, db := json.NewDecoder(strings.NewReader(a)), json.NewDecoder(strings.NewReader(b))
	da.UseNumber()
	db.UseNumber()
	if err := da.Decode(&va); err != nil {
		t.Fatalf("%s: %v", a, err)
	}
	if err := db.Decode(&vb); err != nil {
		t.Fatalf("%s: %v", b, err)
	}
	return reflect.DeepEqual(normalizeNumbers(va), normalizeNumbers(vb))
}

// normalizeNumbers makes 1e400 and 1000…0 compare equal, as they do in jsonb.
func normalizeNumbers(v any) any {
	switch v := v.(type) {
	case json.Number:
		s := v.String()
		if mant, exp, ok := strings.Cut(s, "e"); ok {
			if n, err := strconv.Atoi(exp); err == nil && n >= 0 && !strings.Contains(mant, ".") {
				return mant + strings.Repeat("0", n)
			}
		}
		return s
	case []any:
		for i := range v {
			v[i] = normalizeNumbers(v[i])
		}
	case map[string]any:
		for k := range v {
			v[k] = normalizeNumbers(v[k])
		}
	}
	return v
}

// TestExtremeValues: the largest and smallest values the parameters accept behave as
// documented, in a database of their own each.
func TestExtremeValues(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		run  func(t *testing.T, conn *pgx.Conn)
	}{
		{"PriorityMinAndMaxInt", func(t *testing.T, conn *pgx.Conn) {
			hi := queryOne[int64](t, conn, "SELECT jobs_enqueue('k', priority => $1)", int32(maxInt32))
			mid := queryOne[int64](t, conn, "SELECT jobs_enqueue('k')")
			lo := queryOne[int64](t, conn, "SELECT jobs_enqueue('k', priority => $1)", int32(minInt32))
			got := claimAll(t, conn, "w", 3, nil, "1 hour")
			if len(got) != 3 || got[0].ID != lo || got[1].ID != mid || got[2].ID != hi {
				t.Errorf("claimed %+v, want jobs %d, %d, %d (lowest priority value first)", got, lo, mid, hi)
			}
		}},
		{"MaxAttemptsMaxIntFailsAndRetries", func(t *testing.T, conn *pgx.Conn) {
			id := queryOne[int64](t, conn, "SELECT jobs_enqueue('k', max_attempts => $1)", int32(maxInt32))
			claimOne(t, conn, "w", "default")
			if st := queryOne[string](t, conn, "SELECT jobs_fail($1, 1, 'e')::text", id); st != "queued" {
				t.Errorf("jobs_fail = %s, want queued", st)
			}
		}},
		{"SnoozeWithMaxIntMaxAttempts", func(t *testing.T, conn *pgx.Conn) {
			// jobs_snooze raises max_attempts by one so the snoozed attempt is free. At
			// the integer's limit it saturates instead of overflowing: the snooze works
			// and max_attempts stays at the limit.
			id := queryOne[int64](t, conn, "SELECT jobs_enqueue('k', max_attempts => $1)", int32(maxInt32-1))
			for attempt := int32(1); attempt <= 3; attempt++ {
				claimOne(t, conn, "w", "default")
				ok, err := call(t.Context(), conn, "SELECT jobs_snooze($1, $2, now())", id, attempt)
				if err != nil {
					t.Fatalf("jobs_snooze (attempt %d) of a job with max_attempts near %d: %v", attempt, maxInt32, err)
				}
				if fmt.Sprint(ok) != "[[true]]" {
					t.Fatalf("jobs_snooze (attempt %d) = %v, want true", attempt, ok)
				}
				if r := getJob(t, conn, id); r.State != "queued" || r.Attempts != attempt || r.MaxAttempts != maxInt32 {
					t.Errorf("after snooze %d: %+v, want queued, attempts %d, max_attempts %d", attempt, r, attempt, maxInt32)
				}
			}
		}},
		{"EnqueueMany100000", func(t *testing.T, conn *pgx.Conn) {
			ids := mustCall(t, conn, "SELECT * FROM jobs_enqueue_many(array_fill('k'::text, ARRAY[100000]))")
			if len(ids) != 100000 {
				t.Fatalf("jobs_enqueue_many returned %d ids, want 100000", len(ids))
			}
			for i := 1; i < len(ids); i++ {
				if ids[i][0].(int64) <= ids[i-1][0].(int64) {
					t.Fatalf("ids not in input order at %d: %v after %v", i, ids[i][0], ids[i-1][0])
				}
			}
			if n := queryOne[int64](t, conn, "SELECT count(*) FROM jobs WHERE state = 'queued'"); n != 100000 {
				t.Errorf("%d queued jobs, want 100000", n)
			}
		}},
		{"ClaimMaxJobs10000", func(t *testing.T, conn *pgx.Conn) {
			mustCall(t, conn, "SELECT * FROM jobs_enqueue_many(array_fill('k'::text, ARRAY[10001]))")
			if got := claimAll(t, conn, "w", 10000, nil, "1 hour"); len(got) != 10000 {
				t.Errorf("jobs_claim(max_jobs => 10000) claimed %d jobs", len(got))
			}
		}},
		{"ErrorText20000EmojiKeepsFirst10000Characters", func(t *testing.T, conn *pgx.Conn) {
			id := queryOne[int64](t, conn, "SELECT jobs_enqueue('k')")
			claimOne(t, conn, "w", "default")
			long := strings.Repeat("😀", 10000) + strings.Repeat("é", 10000)
			mustCall(t, conn, "SELECT jobs_fail($1, 1, $2)", id, long)
			r := getJob(t, conn, id)
			want := strings.Repeat("😀", 10000)
			if r.LastError == nil || *r.LastError != want || len(r.Errors) != 1 || r.Errors[0].Error != want {
				t.Errorf("stored error of %d characters, want the first 10000 characters", utf8.RuneCountInString(deref(r.LastError)))
			}
		}},
		{"ErrorTextEmpty", func(t *testing.T, conn *pgx.Conn) {
			id := queryOne[int64](t, conn, "SELECT jobs_enqueue('k')")
			claimOne(t, conn, "w", "default")
			mustCall(t, conn, "SELECT jobs_fail($1, 1, '')", id)
			if r := getJob(t, conn, id); r.LastError == nil || *r.LastError != "" || len(r.Errors) != 1 {
				t.Errorf("after jobs_fail with error '': last_error %v, errors %+v", r.LastError, r.Errors)
			}
		}},
		{"UniqueKeysCompareBytes", func(t *testing.T, conn *pgx.Conn) {
			// é precomposed and e + combining acute look the same but are different keys;
			// so are keys differing in case or a trailing space.
			ids := mustCall(t, conn, "SELECT * FROM jobs_enqueue_many(ARRAY['k', 'k', 'k', 'k', 'k'], unique_keys => ARRAY[$1, $2, 'Key', 'key', 'key '])",
				"\u00e9", "e\u0301")
			seen := map[int64]bool{}
			for _, r := range ids {
				seen[r[0].(int64)] = true
			}
			if len(seen) != 5 {
				t.Errorf("5 distinct keys got %d distinct jobs: %v", len(seen), ids)
			}
		}},
		{"ClaimLeaseOneMicrosecond", func(t *testing.T, conn *pgx.Conn) {
			id := queryOne[int64](t, conn, "SELECT jobs_enqueue('k')")
			if got := claimAll(t, conn, "w", 1, nil, "1 microsecond"); len(got) != 1 {
				t.Fatalf("claimed %d jobs, want 1", len(got))
			}
			time.Sleep(2 * time.Millisecond)
			if n := queryOne[int32](t, conn, "SELECT jobs_requeue_expired()"); n != 1 {
				t.Errorf("jobs_requeue_expired() = %d after a 1µs lease, want 1", n)
			}
			if r := getJob(t, conn, id); r.State != "queued" || r.Attempts != 1 {
				t.Errorf("job is %+v, want queued after 1 attempt", r)
			}
		}},
		{"ClaimLeaseMixedSignPositive", func(t *testing.T, conn *pgx.Conn) {
			// -1 month + 31 days is one day by PostgreSQL's interval comparison.
			queryOne[int64](t, conn, "SELECT jobs_enqueue('k')")
			if got := claimAll(t, conn, "w", 1, nil, "-1 mon 31 days"); len(got) != 1 {
				t.Fatalf("claimed %d jobs, want 1", len(got))
			}
		}},
		{"ClaimLeaseHundredYears", func(t *testing.T, conn *pgx.Conn) {
			// 100 years is the longest lease; longer ones are refused (TestInvalidArguments).
			id := queryOne[int64](t, conn, "SELECT jobs_enqueue('k')")
			if got := claimAll(t, conn, "w", 1, nil, "100 years"); len(got) != 1 {
				t.Fatalf("claimed %d jobs, want 1", len(got))
			}
			if ok := queryOne[bool](t, conn, "SELECT lease_expires_at > now() + interval '99 years' FROM jobs WHERE id = $1", id); !ok {
				t.Error("lease of 100 years not recorded")
			}
		}},
		{"HeartbeatLeaseHundredYears", func(t *testing.T, conn *pgx.Conn) {
			id := queryOne[int64](t, conn, "SELECT jobs_enqueue('k')")
			claimOne(t, conn, "w", "default")
			if ok := queryOne[bool](t, conn, "SELECT jobs_heartbeat($1, 1, '100 years')", id); !ok {
				t.Fatal("jobs_heartbeat with a lease of 100 years returned false")
			}
			if got := mustCall(t, conn, "SELECT * FROM jobs_heartbeat_many(ARRAY[$1::bigint], ARRAY[1], '100 years')", id); fmt.Sprint(got) != fmt.Sprintf("[[%d true]]", id) {
				t.Errorf("jobs_heartbeat_many = %v, want job %d extended", got, id)
			}
			if ok := queryOne[bool](t, conn, "SELECT lease_expires_at > now() + interval '99 years' FROM jobs WHERE id = $1", id); !ok {
				t.Error("lease of 100 years not recorded")
			}
		}},
		{"PruneOlderThanZeroPrunesEveryFinishedJob", func(t *testing.T, conn *pgx.Conn) {
			done := queryOne[int64](t, conn, "SELECT jobs_enqueue('k')")
			claimOne(t, conn, "w", "default")
			mustCall(t, conn, "SELECT jobs_complete($1, 1)", done)
			mustCall(t, conn, "SELECT jobs_cancel(jobs_enqueue('k', queue => 'c'))")
			live := queryOne[int64](t, conn, "SELECT jobs_enqueue('k', queue => 'live')")
			if n := queryOne[int32](t, conn, "SELECT jobs_prune('0', false, $1)", int32(maxInt32)); n != 2 {
				t.Errorf("jobs_prune('0') = %d, want 2", n)
			}
			if n := queryOne[int64](t, conn, "SELECT count(*) FROM jobs"); n != 1 || getJob(t, conn, live).State != "queued" {
				t.Errorf("%d jobs left, want only the queued one", n)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			tc.run(t, b.Conn)
		})
	}
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

// TestInfiniteTimestamps: 'infinity' and '-infinity' are timestamps PostgreSQL accepts
// wherever the API takes one, but a job's time must be finite: each function refuses them
// with 22023 naming the parameter, whether written in the SQL or sent as a bound value,
// and changes nothing (the job a fail or snooze aimed at is still running). jobs_stats
// keeps working.
func TestInfiniteTimestamps(t *testing.T) {
	t.Parallel()
	inf := pgtype.Timestamptz{InfinityModifier: pgtype.Infinity, Valid: true}
	minusInf := pgtype.Timestamptz{InfinityModifier: pgtype.NegativeInfinity, Valid: true}
	type infCase struct {
		name  string
		held  bool // the call aims at a running job, passed as $1 (and the time as $2)
		sql   string
		arg   any // the time, when the SQL does not write it
		fn    string
		param string
	}
	var cases []infCase
	for _, v := range []struct {
		name, lit string
		bound     pgtype.Timestamptz
	}{{"Infinity", "'infinity'", inf}, {"MinusInfinity", "'-infinity'", minusInf}} {
		cases = append(cases,
			infCase{"Enqueue" + v.name, false, "SELECT jobs_enqueue('k', queue => 'q', run_at => " + v.lit + ")", nil, "jobs_enqueue", "run_at"},
			infCase{"Enqueue" + v.name + "Bound", false, "SELECT jobs_enqueue('k', queue => 'q', run_at => $1)", v.bound, "jobs_enqueue", "run_at"},
			infCase{"EnqueueMany" + v.name, false, "SELECT * FROM jobs_enqueue_many(ARRAY['k'], queues => ARRAY['q'], run_ats => ARRAY[" + v.lit + "::timestamptz])", nil, "jobs_enqueue_many", "run_ats[1]"},
			// All or nothing: the good elements before the infinite one are not enqueued.
			infCase{"EnqueueMany" + v.name + "ThirdBound", false, "SELECT * FROM jobs_enqueue_many(ARRAY['a', 'b', 'c'], run_ats => $1)",
				[]pgtype.Timestamptz{at(time.Now()), at(time.Now().Add(-time.Hour)), v.bound}, "jobs_enqueue_many", "run_ats[3]"},
			infCase{"Fail" + v.name, true, "SELECT jobs_fail($1, 1, 'e', " + v.lit + ")", nil, "jobs_fail", "retry_at"},
			infCase{"Fail" + v.name + "Bound", true, "SELECT jobs_fail($1, 1, 'e', $2)", v.bound, "jobs_fail", "retry_at"},
			infCase{"Snooze" + v.name, true, "SELECT jobs_snooze($1, 1, " + v.lit + ")", nil, "jobs_snooze", "run_at"},
			infCase{"Snooze" + v.name + "Bound", true, "SELECT jobs_snooze($1, 1, $2)", v.bound, "jobs_snooze", "run_at"},
		)
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			conn := b.Conn
			id := queryOne[int64](t, conn, "SELECT jobs_enqueue('k', queue => 'q')")
			var args []any
			if tc.held {
				claimOne(t, conn, "w", "q")
				args = append(args, id)
			}
			if tc.arg != nil {
				args = append(args, tc.arg)
			}
			refuse(t, conn, tc.fn, tc.param, tc.sql, args...)
			want := "q/queued/1"
			if tc.held {
				want = "q/running/1"
			}
			if stats := statsWork(t, conn); !reflect.DeepEqual(stats, []string{want}) {
				t.Errorf("jobs_stats = %q, want only %s", stats, want)
			}
		})
	}
}

// TestUnusualArrays: arrays PostgreSQL accepts for an array parameter but that are not the
// plain one-dimensional, 1-based arrays clients send. Other lower bounds work like the plain
// array with the same elements in the same order; more than one dimension is refused with
// 22023 naming the parameter, and nothing changes.
func TestUnusualArrays(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		run  func(t *testing.T, conn *pgx.Conn)
	}{
		{"ClaimOneQueueLowerBoundZero", func(t *testing.T, conn *pgx.Conn) {
			id := queryOne[int64](t, conn, "SELECT jobs_enqueue('k', queue => 'q')")
			got := mustCall(t, conn, "SELECT id FROM jobs_claim('w', 1, '[0:0]={q}'::text[])")
			if fmt.Sprint(got) != fmt.Sprintf("[[%d]]", id) {
				t.Errorf("jobs_claim with queues '[0:0]={q}' claimed %v, want job %d of queue q", got, id)
			}
		}},
		{"ClaimOneQueueLowerBoundTwoOnlyThatQueue", func(t *testing.T, conn *pgx.Conn) {
			queryOne[int64](t, conn, "SELECT jobs_enqueue('k', queue => 'p', priority => -1)")
			id := queryOne[int64](t, conn, "SELECT jobs_enqueue('k', queue => 'q')")
			got := mustCall(t, conn, "SELECT id FROM jobs_claim('w', 10, '[2:2]={q}'::text[])")
			if fmt.Sprint(got) != fmt.Sprintf("[[%d]]", id) {
				t.Errorf("jobs_claim with queues '[2:2]={q}' claimed %v, want only job %d of queue q", got, id)
			}
		}},
		{"ClaimTwoQueuesLowerBoundFive", func(t *testing.T, conn *pgx.Conn) {
			a := queryOne[int64](t, conn, "SELECT jobs_enqueue('k', queue => 'a')")
			bb := queryOne[int64](t, conn, "SELECT jobs_enqueue('k', queue => 'b')")
			queryOne[int64](t, conn, "SELECT jobs_enqueue('k', queue => 'c')")
			got := mustCall(t, conn, "SELECT id FROM jobs_claim('w', 3, '[5:6]={a,b}'::text[])")
			if fmt.Sprint(got) != fmt.Sprintf("[[%d] [%d]]", a, bb) {
				t.Errorf("claimed %v, want jobs %d and %d", got, a, bb)
			}
		}},
		{"ClaimOneQueueTwoDimensional", func(t *testing.T, conn *pgx.Conn) {
			queryOne[int64](t, conn, "SELECT jobs_enqueue('k', queue => 'q')")
			refuse(t, conn, "jobs_claim", "queues", "SELECT id FROM jobs_claim('w', 1, '{{q}}'::text[])")
		}},
		{"ClaimQueuesTwoByTwoBound", func(t *testing.T, conn *pgx.Conn) {
			queryOne[int64](t, conn, "SELECT jobs_enqueue('k', queue => 'q')")
			refuse(t, conn, "jobs_claim", "queues", "SELECT id FROM jobs_claim('w', 10, $1)", [][]string{{"q", "a"}, {"b", "c"}})
		}},
		{"EnqueueManyQueuesLowerBoundZeroWithHeldKey", func(t *testing.T, conn *pgx.Conn) {
			// Job 'held' holds key k in queue q. Element 1 names (q, k) and must get the
			// held job; element 2 (r, x) is new.
			held := queryOne[int64](t, conn, "SELECT jobs_enqueue('held', queue => 'q', unique_key => 'k')")
			got := mustCall(t, conn,
				"SELECT * FROM jobs_enqueue_many(ARRAY['a', 'b'], queues => '[0:1]={q,r}'::text[], unique_keys => ARRAY['k', 'x'])")
			if len(got) != 2 || got[0][0].(int64) != held || got[1][0].(int64) == held {
				t.Fatalf("jobs_enqueue_many returned %v, want the held job %d, then a new one", got, held)
			}
			if j := getJob(t, conn, held); j.Kind != "held" || j.Queue != "q" {
				t.Errorf("the held job became %+v", j)
			}
			if j := getJob(t, conn, got[1][0].(int64)); j.Kind != "b" || j.Queue != "r" || deref(j.UniqueKey) != "x" {
				t.Errorf("element 2 was stored as kind %q, queue %q, unique_key %s; want b, r, x", j.Kind, j.Queue, deref(j.UniqueKey))
			}
			if n := queryOne[int64](t, conn, "SELECT count(*) FROM jobs"); n != 2 {
				t.Errorf("%d jobs, want the held job and one new job", n)
			}
		}},
		{"EnqueueManyKindsLowerBoundZeroWithUniqueKeys", func(t *testing.T, conn *pgx.Conn) {
			got := mustCall(t, conn, "SELECT * FROM jobs_enqueue_many('[0:1]={a,b}'::text[], unique_keys => ARRAY['x', 'x'])")
			if len(got) != 2 || got[0][0] != got[1][0] {
				t.Fatalf("two elements with key x returned %v, want the same job twice", got)
			}
			if j := getJob(t, conn, got[0][0].(int64)); j.Kind != "a" {
				t.Errorf("the job holding key x has kind %q, want a (the first element)", j.Kind)
			}
		}},
		{"EnqueueManyEveryArrayOwnLowerBound", func(t *testing.T, conn *pgx.Conn) {
			// Element i of each array goes with element i of the others, counted from each
			// array's own lower bound.
			got := mustCall(t, conn, `SELECT * FROM jobs_enqueue_many(
				'[0:1]={a,b}'::text[], '[-3:-2]={"{\"n\": 1}","{\"n\": 2}"}'::jsonb[], '[7:8]={q,r}'::text[],
				'[2:3]={2001-01-01 00:00:00+00,2002-02-02 00:00:00+00}'::timestamptz[], ARRAY[10, 20],
				'[100:101]={3,4}'::int[], '[0:1]={x,NULL}'::text[])`)
			if len(got) != 2 {
				t.Fatalf("jobs_enqueue_many returned %v, want 2 jobs", got)
			}
			for i, want := range []string{
				`a {"n": 1} q 2001-01-01 00:00:00+00 10 3 x`,
				`b {"n": 2} r 2002-02-02 00:00:00+00 20 4 <NULL>`,
			} {
				s := queryOne[string](t, conn, `SELECT concat_ws(' ', kind, payload, queue, (run_at AT TIME ZONE 'UTC') || '+00',
				                                         priority, max_attempts, coalesce(unique_key, '<NULL>'))
				                                FROM jobs WHERE id = $1`, got[i][0])
				if s != want {
					t.Errorf("element %d was stored as %q, want %q", i+1, s, want)
				}
			}
		}},
		{"EnqueueManyBadElementLowerBoundZeroNamedByPosition", func(t *testing.T, conn *pgx.Conn) {
			// The element is named by its position counted from 1, whatever the lower bound.
			refuse(t, conn, "jobs_enqueue_many", "kinds[2]", "SELECT * FROM jobs_enqueue_many('[0:2]={a,\"\",c}'::text[])")
			refuse(t, conn, "jobs_enqueue_many", "queues[1]", "SELECT * FROM jobs_enqueue_many(ARRAY['a'], queues => '[5:5]={\"\"}'::text[])")
		}},
		{"EnqueueManyKindsTwoDimensional", func(t *testing.T, conn *pgx.Conn) {
			refuse(t, conn, "jobs_enqueue_many", "kinds", "SELECT * FROM jobs_enqueue_many('{{a,b},{c,d}}'::text[])")
			refuse(t, conn, "jobs_enqueue_many", "kinds", "SELECT * FROM jobs_enqueue_many('{{a}}'::text[])")
		}},
		{"EnqueueManyEachArrayTwoDimensional", func(t *testing.T, conn *pgx.Conn) {
			// Two elements in a 2x1 array, as many as kinds has: the dimensions, not the
			// length, are what is wrong.
			twoD := []string{`'{{a},{b}}'::text[]`, `'{{"{}"},{"[]"}}'::jsonb[]`, `'{{q},{r}}'::text[]`,
				`'{{2001-01-01},{2002-01-01}}'::timestamptz[]`, `'{{1},{2}}'::int[]`, `'{{3},{4}}'::int[]`, `'{{x},{y}}'::text[]`}
			for i, param := range []string{"kinds", "payloads", "queues", "run_ats", "priorities", "max_attempts", "unique_keys"} {
				args := []string{"ARRAY['a', 'b']", "NULL", "NULL", "NULL", "NULL", "NULL", "NULL"}
				args[i] = twoD[i]
				refuse(t, conn, "jobs_enqueue_many", param, "SELECT * FROM jobs_enqueue_many("+strings.Join(args, ", ")+")")
			}
		}},
		{"CompleteManyLowerBounds", func(t *testing.T, conn *pgx.Conn) {
			id := queryOne[int64](t, conn, "SELECT jobs_enqueue('k')")
			claimOne(t, conn, "w", "default")
			got := mustCall(t, conn, "SELECT * FROM jobs_complete_many($1::bigint[], '[3:3]={1}'::int[])", fmt.Sprintf("[0:0]={%d}", id))
			if fmt.Sprint(got) != fmt.Sprintf("[[%d]]", id) || getJob(t, conn, id).State != "done" {
				t.Errorf("jobs_complete_many('[0:0]={%d}', '[3:3]={1}') = %v, want job %d done", id, got, id)
			}
		}},
		{"HeartbeatManyLowerBounds", func(t *testing.T, conn *pgx.Conn) {
			a := queryOne[int64](t, conn, "SELECT jobs_enqueue('k')")
			bb := queryOne[int64](t, conn, "SELECT jobs_enqueue('k')")
			claimAll(t, conn, "w", 2, nil, "1 minute")
			got := mustCall(t, conn, "SELECT * FROM jobs_heartbeat_many($1::bigint[], '[-1:0]={1,1}'::int[], '1 day') ORDER BY 1",
				fmt.Sprintf("[5:6]={%d,%d}", a, bb))
			if fmt.Sprint(got) != fmt.Sprintf("[[%d true] [%d true]]", a, bb) {
				t.Errorf("jobs_heartbeat_many = %v, want jobs %d and %d extended", got, a, bb)
			}
		}},
		{"CompleteManyTwoDimensional", func(t *testing.T, conn *pgx.Conn) {
			id := queryOne[int64](t, conn, "SELECT jobs_enqueue('k')")
			claimOne(t, conn, "w", "default")
			refuse(t, conn, "jobs_complete_many", "ids", "SELECT * FROM jobs_complete_many($1::bigint[], '{{1}}'::int[])", fmt.Sprintf("{{%d}}", id))
			refuse(t, conn, "jobs_complete_many", "ids", "SELECT * FROM jobs_complete_many($1::bigint[], '{1}'::int[])", fmt.Sprintf("{{%d}}", id))
			refuse(t, conn, "jobs_complete_many", "attempts", "SELECT * FROM jobs_complete_many(ARRAY[$1::bigint], $2)", id, [][]int32{{1}})
		}},
		{"HeartbeatManyTwoDimensional", func(t *testing.T, conn *pgx.Conn) {
			id := queryOne[int64](t, conn, "SELECT jobs_enqueue('k')")
			claimOne(t, conn, "w", "default")
			refuse(t, conn, "jobs_heartbeat_many", "ids", "SELECT * FROM jobs_heartbeat_many($1, ARRAY[1, 1], '1 day')", [][]int64{{id}, {id}})
			refuse(t, conn, "jobs_heartbeat_many", "attempts", "SELECT * FROM jobs_heartbeat_many(ARRAY[$1::bigint], '{{1}}'::int[], '1 day')", id)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			tc.run(t, b.Conn)
		})
	}
}

// TestEnqueueManyNotifiesNewReadyJobsOnly: jobs_enqueue_many notifies jobs_ready once per
// queue that got a new job ready now; elements that got an existing live job through their
// unique key, and jobs not yet due, wake nobody.
func TestEnqueueManyNotifiesNewReadyJobsOnly(t *testing.T) {
	t.Parallel()
	b := setup(t)
	conn := b.Conn
	mustCall(t, conn, "LISTEN jobs_ready")
	next := func() string {
		t.Helper()
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		defer cancel()
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			t.Fatalf("no jobs_ready notification: %v", err)
		}
		return n.Payload
	}
	// marker enqueues into queue marker and returns what was notified before its own
	// notification, which comes last.
	marker := func() []string {
		t.Helper()
		queryOne[int64](t, conn, "SELECT jobs_enqueue('k', queue => 'marker')")
		var got []string
		for p := next(); p != "marker"; p = next() {
			got = append(got, p)
		}
		return got
	}
	held := queryOne[int64](t, conn, "SELECT jobs_enqueue('k', queue => 'q', unique_key => 'x')")
	if got := marker(); !reflect.DeepEqual(got, []string{"q"}) {
		t.Fatalf("jobs_enqueue notified %q, want q", got)
	}
	for _, tc := range []struct {
		name, sql string
		want      []string
	}{
		{"AllDeduplicated", "SELECT * FROM jobs_enqueue_many(ARRAY['a', 'b'], queues => ARRAY['q', 'q'], unique_keys => ARRAY['x', 'x'])", nil},
		{"NotDue", "SELECT * FROM jobs_enqueue_many(ARRAY['a'], queues => ARRAY['later'], run_ats => ARRAY[now() + interval '1 hour'])", nil},
		{"OneNewInAnotherQueue", "SELECT * FROM jobs_enqueue_many(ARRAY['a', 'b'], queues => ARRAY['q', 'r'], unique_keys => ARRAY['x', 'x'])", []string{"r"}},
		{"NewTwiceSameKey", "SELECT * FROM jobs_enqueue_many(ARRAY['a', 'b'], queues => ARRAY['s', 's'], unique_keys => ARRAY['y', 'y'])", []string{"s"}},
	} {
		rows := mustCall(t, conn, tc.sql)
		if tc.name == "AllDeduplicated" && fmt.Sprint(rows) != fmt.Sprintf("[[%d] [%d]]", held, held) {
			t.Errorf("%s: jobs_enqueue_many = %v, want the held job %d twice", tc.name, rows, held)
		}
		if got := marker(); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: notified %q, want %q", tc.name, got, tc.want)
		}
	}
}
