package badinput

import (
	"cmp"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
)

// invariantsSQL returns one line per violated invariant. Each invariant comes from a CHECK
// constraint of migrations/001_jobs_schema.sql or from the promises in the function headers
// (sql/functions/*.sql), as the comment before it says.
const invariantsSQL = `
SELECT format('job %s (%s): %s', j.id, j.state, v.problem)
FROM jobs j
CROSS JOIN LATERAL (VALUES
    -- jobs_lease_valid: exactly the running jobs have a lease, and a lease has a holder.
    ((j.state = 'running') <> (j.lease_expires_at IS NOT NULL), 'running <=> lease_expires_at set'),
    (j.state = 'running' AND j.lease_holder IS NULL, 'running without lease_holder'),
    -- jobs_attempts_valid, jobs_max_attempts_valid.
    (j.attempts < 0, 'attempts < 0'),
    (j.max_attempts < 1, 'max_attempts < 1'),
    -- jobs_queue_valid, jobs_kind_valid: 1 to 200 bytes.
    (j.queue = '' OR octet_length(j.queue) > 200, 'queue not 1 to 200 bytes'),
    (j.kind = '' OR octet_length(j.kind) > 200, 'kind not 1 to 200 bytes'),
    -- jobs_enqueue: unique_key is NULL or 1 to 200 bytes.
    (j.unique_key = '' OR octet_length(j.unique_key) > 200, 'unique_key not NULL or 1 to 200 bytes'),
    -- jobs_errors_is_array.
    (jsonb_typeof(j.errors) <> 'array', 'errors not an array'),
    -- A queued job has an attempt left: enqueue starts at 0 < max_attempts (>= 1);
    -- jobs_fail and jobs_requeue_expired requeue only while attempts < max_attempts;
    -- jobs_snooze raises max_attempts by one; jobs_retry raises it to at least attempts + 1.
    (j.state = 'queued' AND j.attempts >= j.max_attempts, 'queued with no attempt left'),
    -- jobs_claim takes only queued jobs and adds one: 1 <= attempts <= max_attempts.
    (j.state = 'running' AND (j.attempts < 1 OR j.attempts > j.max_attempts), 'running attempt outside 1..max_attempts'),
    -- jobs_fail and jobs_requeue_expired make a job dead only when attempts reached max_attempts.
    (j.state = 'dead' AND j.attempts < j.max_attempts, 'dead with attempts left'),
    -- jobs_complete completes running jobs only, which were claimed at least once.
    (j.state = 'done' AND j.attempts < 1, 'done without an attempt'),
    -- Every claim sets lease_holder and nothing clears it ("the record of who ran it
    -- last"), and only a claim adds an attempt.
    ((j.attempts > 0) <> (j.lease_holder IS NOT NULL), 'attempts > 0 <=> lease_holder set'),
    -- jobs_claim's worker is 1 to 200 bytes.
    (j.lease_holder = '' OR octet_length(j.lease_holder) > 200, 'lease_holder not 1 to 200 bytes'),
    -- finished_at is set by the moves to done, dead and cancelled, cleared by jobs_retry.
    ((j.finished_at IS NOT NULL) <> (j.state IN ('done', 'dead', 'cancelled')), 'finished_at set <=> finished'),
    (j.finished_at < j.created_at, 'finished before created'),
    -- jobs_fail, jobs_cancel(id, attempt, error) and jobs_requeue_expired set last_error
    -- and append the same text to errors; nothing else writes either.
    ((j.last_error IS NOT NULL) <> (jsonb_array_length(j.errors) > 0), 'last_error set <=> errors non-empty'),
    (j.last_error IS DISTINCT FROM (j.errors -> -1 ->> 'error'), 'last_error is not the last errors entry'),
    -- error texts are stored up to 10000 characters.
    (char_length(j.last_error) > 10000, 'last_error longer than 10000 characters'),
    -- Each of those acts on a running job at its current attempt and ends that attempt, so
    -- an attempt has at most one entry, in order: attempts strictly increase, 1..attempts.
    (jsonb_array_length(j.errors) > j.attempts, 'more errors entries than attempts'),
    -- _jobs_errors_append keeps the first entry and the newest 99.
    (jsonb_array_length(j.errors) > 100, 'more than 100 errors entries'),
    (EXISTS (SELECT FROM jsonb_array_elements(j.errors) WITH ORDINALITY AS e(v, n)
             WHERE (e.v ->> 'attempt')::int NOT BETWEEN 1 AND j.attempts
                OR e.v ->> 'error' IS NULL
                OR (e.n > 1 AND (e.v ->> 'attempt')::int <= (j.errors -> (e.n::int - 2) ->> 'attempt')::int)),
     'errors entries not increasing attempts within 1..attempts'),
    -- jobs_unique_key_idx: at most one live job per (queue, unique_key).
    (j.unique_key IS NOT NULL AND j.state IN ('queued', 'running') AND EXISTS (
        SELECT FROM jobs o WHERE o.id <> j.id AND o.queue = j.queue AND o.unique_key = j.unique_key
                              AND o.state IN ('queued', 'running')), 'unique_key shared by live jobs')
) AS v(bad, problem)
WHERE v.bad IS TRUE
UNION ALL
SELECT 'jobs_settings does not have exactly one row' WHERE (SELECT count(*) FROM jobs_settings) <> 1`

// TestRandomCallsKeepInvariants interleaves random valid and invalid calls of every public
// function (about a quarter of the calls have one bad argument) for a few seconds. After
// each call it checks:
//
//   - an invalid call failed with 22023 naming the bad parameter and changed nothing;
//   - a valid call returned what its header promises for the state before it (a model of
//     each function below), changed only the jobs it may change, and changed them as
//     promised;
//   - the invariants of invariantsSQL hold for every job.
//
// The seed is logged; BADINPUT_SEED=<seed> replays a run (the calls, not the clock).
//
// The extremes the table tests cover are in the mix too: infinite timestamps, leases over
// 100 years and two-dimensional arrays among the invalid arguments; max_attempts at 2^31-1
// (which jobs_snooze saturates), the 100-year lease and retentions past the timestamp range
// among the valid ones.
func TestRandomCallsKeepInvariants(t *testing.T) {
	t.Parallel()
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("BADINPUT_SEED"); s != "" {
		var err error
		if seed, err = strconv.ParseUint(s, 10, 64); err != nil {
			t.Fatalf("BADINPUT_SEED=%q: %v", s, err)
		}
	}
	budget := 5 * time.Second
	if testing.Short() {
		budget = time.Second
	}
	b := setup(t)
	// The models add years as the server does in UTC (checkExtended, opPrune).
	mustCall(t, b.Conn, "SET TimeZone = 'UTC'")
	p := &propRun{t: t, conn: b.Conn, seed: seed, rng: rand.New(rand.NewPCG(seed, 0x5eed))}
	p.pre = p.snapshot()
	deadline := time.Now().Add(budget)
	counts := map[string]int{}
	for time.Now().Before(deadline) {
		o := p.randomOp()
		p.step(o)
		key := o.name
		if o.bad != "" {
			key += " (invalid)"
		}
		counts[key]++
	}
	t.Logf("seed %d: %d calls, %d jobs at the end: %v", seed, p.steps, len(p.pre.jobs), counts)
}

// propRun is one run of the property test.
type propRun struct {
	t       *testing.T
	conn    *pgx.Conn
	seed    uint64
	rng     *rand.Rand
	steps   int
	pre     *snapshot
	history []string // the last calls, for the failure message
}

// op is one call. bad names the parameter given an invalid argument ("" for a valid call);
// check verifies a valid call's result and changes against the state before it.
type op struct {
	name  string
	fn    string
	sql   string
	args  []any
	bad   string
	check func(p *propRun, pre, post *snapshot, rows [][]any, err error)
}

type snapJob struct {
	ID             int64
	Queue          string
	Kind           string
	Payload        string
	State          string
	Priority       int32
	Attempts       int32
	MaxAttempts    int32
	RunAt          pgtype.Timestamptz
	LeaseHolder    *string
	LeaseExpiresAt pgtype.Timestamptz
	LastError      *string
	ErrorsLen      int32
	UniqueKey      *string
	FinishedAt     pgtype.Timestamptz
	Raw            string // the whole row as text
}

// String shows every field but Raw, pointers dereferenced.
func (j snapJob) String() string {
	return fmt.Sprintf("id=%d queue=%s kind=%s payload=%s state=%s priority=%d attempts=%d/%d run_at=%s holder=%s lease=%s last_error=%s errors=%d key=%s finished=%s",
		j.ID, short(j.Queue), short(j.Kind), j.Payload, j.State, j.Priority, j.Attempts, j.MaxAttempts, tsString(j.RunAt),
		quotePtr(j.LeaseHolder), tsString(j.LeaseExpiresAt), quotePtr(j.LastError), j.ErrorsLen, quotePtr(j.UniqueKey),
		tsString(j.FinishedAt))
}

func quotePtr(s *string) string {
	if s == nil {
		return "NULL"
	}
	return short(*s)
}

// short quotes s, cut to its first 60 bytes.
func short(s string) string {
	if len(s) > 60 {
		return strconv.Quote(s[:60]) + fmt.Sprintf("…(%d bytes)", len(s))
	}
	return strconv.Quote(s)
}

func (j *snapJob) live() bool { return j.State == "queued" || j.State == "running" }

func (j *snapJob) held(attempt int32) bool { return j.State == "running" && j.Attempts == attempt }

type snapshot struct {
	clock    pgtype.Timestamptz // clock_timestamp() just before the rows were read
	jobs     map[int64]*snapJob
	settings string
}

func (p *propRun) snapshot() *snapshot {
	p.t.Helper()
	s := &snapshot{jobs: map[int64]*snapJob{}}
	ctx := p.t.Context()
	if err := p.conn.QueryRow(ctx, "SELECT clock_timestamp(), (SELECT string_agg(s::text, ',') FROM jobs_settings s)").
		Scan(&s.clock, &s.settings); err != nil {
		p.t.Fatalf("snapshot: %v", err)
	}
	rows, err := p.conn.Query(ctx,
		`SELECT id, queue, kind, payload::text, state::text, priority, attempts, max_attempts, run_at, lease_holder,
		        lease_expires_at, last_error, jsonb_array_length(errors), unique_key, finished_at, j::text
		 FROM jobs j`)
	if err != nil {
		p.t.Fatalf("snapshot: %v", err)
	}
	jobs, err := pgx.CollectRows(rows, pgx.RowToAddrOfStructByPos[snapJob])
	if err != nil {
		p.t.Fatalf("snapshot: %v", err)
	}
	for _, j := range jobs {
		s.jobs[j.ID] = j
	}
	return s
}

func (p *propRun) fail(format string, args ...any) {
	p.t.Helper()
	p.t.Fatalf("seed %d, call %d: %s\nlast calls (newest last):\n  %s", p.seed, p.steps,
		fmt.Sprintf(format, args...), strings.Join(p.history, "\n  "))
}

func (p *propRun) step(o op) {
	p.t.Helper()
	p.steps++
	desc := fmt.Sprintf("%s %s", o.sql, formatArgs(o.args))
	if o.bad != "" {
		desc += "   [invalid " + o.bad + "]"
	}
	p.history = append(p.history, desc)
	if len(p.history) > 15 {
		p.history = p.history[1:]
	}

	pre := p.pre
	rows, err := call(p.t.Context(), p.conn, o.sql, o.args...)
	post := p.snapshot()
	if o.bad != "" {
		if err == nil {
			p.fail("invalid %s accepted", o.bad)
		}
		if msg := invalidMismatch(err, o.fn, o.bad); msg != "" {
			p.fail("%s", msg)
		}
		p.onlyChanged(pre, post, nil)
	} else {
		o.check(p, pre, post, rows, err)
	}

	violations, verr := call(p.t.Context(), p.conn, invariantsSQL)
	if verr != nil {
		p.fail("invariants query: %v", verr)
	}
	if len(violations) > 0 {
		p.fail("invariants violated: %v", violations)
	}
	p.pre = post
}

// invalidMismatch describes how err differs from _jobs_invalid's error for param of fn.
func invalidMismatch(err error, fn, param string) string {
	pgErr := asPgError(err)
	switch {
	case pgErr == nil:
		return fmt.Sprintf("got %v, want SQLSTATE 22023 naming %s", err, param)
	case pgErr.Code != "22023":
		return fmt.Sprintf("got SQLSTATE %s (%s), want 22023 naming %s", pgErr.Code, pgErr.Message, param)
	case pgErr.ColumnName != param || !strings.HasPrefix(pgErr.Message, fn+": "+param+" "):
		return fmt.Sprintf("error %q (COLUMN %q) does not name %s of %s", pgErr.Message, pgErr.ColumnName, param, fn)
	}
	return ""
}

func formatArgs(args []any) string {
	parts := make([]string, len(args))
	for i, a := range args {
		var s string
		switch v := a.(type) {
		case nil:
			s = "NULL"
		case string:
			s = short(v)
		case *string:
			if v == nil {
				s = "NULL"
			} else {
				s = strconv.Quote(*v)
			}
		case pgtype.Timestamptz:
			s = tsString(v)
		case []*string:
			var e []string
			for _, x := range v {
				e = append(e, quotePtr(x))
			}
			s = "{" + strings.Join(e, ",") + "}"
		case []*int32:
			var e []string
			for _, x := range v {
				if x == nil {
					e = append(e, "NULL")
				} else {
					e = append(e, strconv.Itoa(int(*x)))
				}
			}
			s = "{" + strings.Join(e, ",") + "}"
		case []*int64:
			var e []string
			for _, x := range v {
				if x == nil {
					e = append(e, "NULL")
				} else {
					e = append(e, strconv.FormatInt(*x, 10))
				}
			}
			s = "{" + strings.Join(e, ",") + "}"
		case []pgtype.Timestamptz:
			var e []string
			for _, x := range v {
				e = append(e, tsString(x))
			}
			s = "{" + strings.Join(e, ",") + "}"
		default:
			s = fmt.Sprint(v)
		}
		parts[i] = s
	}
	return "(" + strings.Join(parts, ", ") + ")"
}

// onlyChanged fails unless every job outside allowed is exactly as before, no job outside
// allowed appeared or vanished, and jobs_settings is unchanged.
func (p *propRun) onlyChanged(pre, post *snapshot, allowed map[int64]bool) {
	p.t.Helper()
	for id, j := range pre.jobs {
		if allowed[id] {
			continue
		}
		after, ok := post.jobs[id]
		switch {
		case !ok:
			p.fail("job %d vanished", id)
		case after.Raw != j.Raw:
			p.fail("job %d changed:\n  before %s\n  after  %s", id, j, after)
		}
	}
	for id := range post.jobs {
		if _, ok := pre.jobs[id]; !ok && !allowed[id] {
			p.fail("job %d appeared: %s", id, post.jobs[id])
		}
	}
	if post.settings != pre.settings {
		p.fail("jobs_settings changed from %s to %s", pre.settings, post.settings)
	}
}

// same fails unless a and b agree on every field but the ones listed.
func (p *propRun) same(what string, a, b *snapJob, except ...string) {
	p.t.Helper()
	x, y := *a, *b
	x.Raw, y.Raw = "", ""
	for _, f := range except {
		switch f {
		case "State":
			x.State = y.State
		case "Attempts":
			x.Attempts = y.Attempts
		case "MaxAttempts":
			x.MaxAttempts = y.MaxAttempts
		case "RunAt":
			x.RunAt = y.RunAt
		case "LeaseHolder":
			x.LeaseHolder = y.LeaseHolder
		case "LeaseExpiresAt":
			x.LeaseExpiresAt = y.LeaseExpiresAt
		case "LastError":
			x.LastError = y.LastError
		case "ErrorsLen":
			x.ErrorsLen = y.ErrorsLen
		case "FinishedAt":
			x.FinishedAt = y.FinishedAt
		default:
			panic("same: unknown field " + f)
		}
	}
	if x.String() != y.String() {
		p.fail("%s: job %d changed beyond %v:\n  before %s\n  after  %s", what, a.ID, except, a, b)
	}
}

func tsCmp(a, b pgtype.Timestamptz) int {
	if a.InfinityModifier != b.InfinityModifier {
		return cmp.Compare(a.InfinityModifier, b.InfinityModifier)
	}
	if a.InfinityModifier != pgtype.Finite {
		return 0
	}
	return a.Time.Compare(b.Time)
}

func tsString(ts pgtype.Timestamptz) string {
	switch {
	case !ts.Valid:
		return "NULL"
	case ts.InfinityModifier == pgtype.Infinity:
		return "infinity"
	case ts.InfinityModifier == pgtype.NegativeInfinity:
		return "-infinity"
	}
	return ts.Time.UTC().Format("2006-01-02 15:04:05.000000")
}

func at(t time.Time) pgtype.Timestamptz {
	return pgtype.Timestamptz{Time: t.Truncate(time.Microsecond), Valid: true}
}

// truncated is what the functions store of an error text: its first 10000 characters.
func truncated(s string) string {
	if utf8.RuneCountInString(s) <= 10000 {
		return s
	}
	return string([]rune(s)[:10000])
}

func strPtr(v any) *string {
	switch v := v.(type) {
	case string:
		return &v
	case *string:
		return v
	}
	return nil
}

func eqPtr(a, b *string) bool { return (a == nil) == (b == nil) && (a == nil || *a == *b) }

// pick chooses from a list.
func pick[T any](p *propRun, list ...T) T { return list[p.rng.IntN(len(list))] }

// arg is one parameter of a generated call: a valid value and the invalid ones.
type arg struct {
	name    string
	valid   any
	invalid []any
}

// args returns the values to call with: all valid, or, for about a quarter of the calls,
// one of them replaced by an invalid value; bad names that parameter.
func (p *propRun) args(list ...arg) (vals []any, bad string) {
	vals = make([]any, len(list))
	var withInvalid []int
	for i, a := range list {
		vals[i] = a.valid
		if len(a.invalid) > 0 {
			withInvalid = append(withInvalid, i)
		}
	}
	if len(withInvalid) > 0 && p.rng.IntN(4) == 0 {
		i := withInvalid[p.rng.IntN(len(withInvalid))]
		vals[i] = list[i].invalid[p.rng.IntN(len(list[i].invalid))]
		bad = list[i].name
	}
	return vals, bad
}

var (
	propQueues  = []string{"q1", "q2", "q'3;\\"}
	propKinds   = []string{"k", "send_email", "'); DROP TABLE jobs; --", "📦", "e\u0301", strings.Repeat("k", 200)}
	propWorkers = []string{"w1", "w2", "w'3 \\ 🚀"}
	tooLong     = strings.Repeat("x", 201)
)

// Intervals the generator uses, with their length for the models: a duration, or a number
// of calendar years.
var (
	propIntervals = map[string]time.Duration{
		"1 hour":           time.Hour,
		"10 minutes":       10 * time.Minute,
		"100 milliseconds": 100 * time.Millisecond,
		"1 microsecond":    time.Microsecond,
		"0":                0,
	}
	propYears = map[string]int{
		"100 years":       100,
		"1000 years":      1000,
		"178000000 years": 178000000,
	}
)

// shift is t plus (sign 1) or minus (sign -1) the interval iv, computed as the server does
// in a session whose TimeZone is UTC.
func shift(t time.Time, iv string, sign int) time.Time {
	if y, ok := propYears[iv]; ok {
		return t.UTC().AddDate(sign*y, 0, 0)
	}
	d, ok := propIntervals[iv]
	if !ok {
		panic("shift: unknown interval " + iv)
	}
	return t.Add(time.Duration(sign) * d)
}

// Leases over 100 years, up to past the timestamp range: refused.
var propLongLeases = []any{"100 years 1 microsecond", "36001 days", "1000 years", "178000000 years"}

// Infinite timestamps: refused wherever a job's time is given.
var propInfinite = []any{
	pgtype.Timestamptz{InfinityModifier: pgtype.Infinity, Valid: true},
	pgtype.Timestamptz{InfinityModifier: pgtype.NegativeInfinity, Valid: true},
}

func (p *propRun) runAt() pgtype.Timestamptz {
	now := time.Now()
	return pick(p,
		at(now), at(now.Add(-time.Second)), at(now.Add(200*time.Millisecond)), at(now.Add(time.Hour)),
		at(time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)), at(time.Date(9999, 12, 31, 0, 0, 0, 0, time.UTC)))
}

// target picks an (id, attempt) pair: usually a running job's current token, sometimes a
// stale or future attempt, a finished or queued job, or an id that does not exist.
func (p *propRun) target() (int64, int32) {
	var running, all []*snapJob
	for _, j := range p.pre.jobs {
		all = append(all, j)
		if j.State == "running" {
			running = append(running, j)
		}
	}
	slices.SortFunc(running, func(a, b *snapJob) int { return cmp.Compare(a.ID, b.ID) })
	slices.SortFunc(all, func(a, b *snapJob) int { return cmp.Compare(a.ID, b.ID) })
	switch r := p.rng.IntN(10); {
	case r < 5 && len(running) > 0:
		j := pick(p, running...)
		return j.ID, j.Attempts
	case r < 7 && len(running) > 0:
		j := pick(p, running...)
		return j.ID, j.Attempts + pick(p, int32(-1), 1)
	case r < 9 && len(all) > 0:
		j := pick(p, all...)
		return j.ID, j.Attempts + pick(p, int32(-1), 0, 1)
	default:
		return pick(p, int64(0), int64(-1), int64(1)<<40), 1
	}
}

func (p *propRun) randomOp() op {
	n := len(p.pre.jobs)
	type gen struct {
		weight int
		make   func() op
	}
	enqueueWeight := 20
	if n > 150 {
		enqueueWeight = 0 // keep the table small so that each step stays fast
	}
	gens := []gen{
		{enqueueWeight, p.opEnqueue},
		{enqueueWeight / 2, p.opEnqueueMany},
		{18, p.opClaim},
		{8, p.opComplete},
		{4, p.opCompleteMany},
		{8, p.opFail},
		{4, p.opHeartbeat},
		{3, p.opHeartbeatMany},
		{4, p.opSnooze},
		{4, p.opCancel},
		{3, p.opCancelFenced},
		{4, p.opRetry},
		{4, p.opRequeueExpired},
		{3, p.opPrune},
		{2, p.opStats},
		{2, p.opGet},
		{1, p.opBackoff},
	}
	total := 0
	for _, g := range gens {
		total += g.weight
	}
	r := p.rng.IntN(total)
	for _, g := range gens {
		if r < g.weight {
			return g.make()
		}
		r -= g.weight
	}
	panic("unreachable")
}

// enqueueSpec is one job to enqueue, for the models.
type enqueueSpec struct {
	kind, payload, queue string
	runAt                *pgtype.Timestamptz // nil: now()
	priority, maxAtt     int32
	key                  *string
}

// checkEnqueued checks the result of enqueueing specs in order: each spec either got the
// live job holding its (queue, key), before the call or from an earlier spec, or a new job
// built from the spec. Nothing else changes.
func (p *propRun) checkEnqueued(pre, post *snapshot, specs []enqueueSpec, got []int64) {
	p.t.Helper()
	if len(got) != len(specs) {
		p.fail("%d ids for %d jobs", len(got), len(specs))
	}
	holder := map[[2]string]int64{}
	for _, j := range pre.jobs {
		if j.UniqueKey != nil && j.live() {
			holder[[2]string{j.Queue, *j.UniqueKey}] = j.ID
		}
	}
	created := map[int64]bool{}
	for i, s := range specs {
		if s.key != nil {
			if id, ok := holder[[2]string{s.queue, *s.key}]; ok {
				if got[i] != id {
					p.fail("job %d with unique key %q got id %d, want the live holder %d", i+1, *s.key, got[i], id)
				}
				continue
			}
		}
		id := got[i]
		if _, ok := pre.jobs[id]; ok || created[id] {
			p.fail("job %d got id %d, which is not new", i+1, id)
		}
		created[id] = true
		if s.key != nil {
			holder[[2]string{s.queue, *s.key}] = id
		}
		j, ok := post.jobs[id]
		if !ok {
			p.fail("job %d: id %d is not in the table", i+1, id)
		}
		if j.State != "queued" || j.Kind != s.kind || j.Queue != s.queue || j.Priority != s.priority ||
			j.MaxAttempts != s.maxAtt || j.Attempts != 0 || !eqPtr(j.UniqueKey, s.key) || j.LeaseHolder != nil ||
			j.LeaseExpiresAt.Valid || j.LastError != nil || j.ErrorsLen != 0 || j.FinishedAt.Valid ||
			(s.runAt != nil && tsCmp(j.RunAt, *s.runAt) != 0) || !jsonEqual(p.t, j.Payload, s.payload) {
			p.fail("job %d was stored as %s, want %+v", i+1, j, s)
		}
	}
	p.onlyChanged(pre, post, created)
}

func (p *propRun) opEnqueue() op {
	var key any
	if p.rng.IntN(2) == 0 {
		key = pick(p, "u1", "u2", "ü'\\")
	}
	vals, bad := p.args(
		arg{"kind", pick(p, propKinds...), []any{nil, "", tooLong}},
		arg{"payload", pick(p, "{}", `{"a": [1, "b"]}`, "null", "[]", `"s"`, "1"), []any{nil}},
		arg{"queue", pick(p, propQueues...), []any{nil, "", tooLong}},
		arg{"run_at", p.runAt(), append([]any{nil}, propInfinite...)},
		arg{"priority", pick(p, int32(0), 1, -5, maxInt32, minInt32), []any{nil}},
		arg{"max_attempts", pick(p, int32(1), 2, 3, 1000, maxInt32-1, maxInt32), []any{nil, int32(0), int32(-1), int32(minInt32)}},
		arg{"unique_key", key, []any{"", tooLong}},
	)
	return op{
		name: "enqueue", fn: "jobs_enqueue", bad: bad, args: vals,
		sql: "SELECT jobs_enqueue($1::text, $2::jsonb, $3::text, $4::timestamptz, $5::int, $6::int, $7::text)",
		check: func(p *propRun, pre, post *snapshot, rows [][]any, err error) {
			if err != nil {
				p.fail("valid call failed: %v", err)
			}
			ts := vals[3].(pgtype.Timestamptz)
			spec := enqueueSpec{vals[0].(string), vals[1].(string), vals[2].(string), &ts, vals[4].(int32), vals[5].(int32), strPtr(vals[6])}
			p.checkEnqueued(pre, post, []enqueueSpec{spec}, []int64{rows[0][0].(int64)})
		},
	}
}

func (p *propRun) opEnqueueMany() op {
	n := 1 + p.rng.IntN(4)
	kinds := make([]*string, n)
	payloads := make([]*string, n)
	queues := make([]*string, n)
	runAts := make([]pgtype.Timestamptz, n)
	priorities := make([]*int32, n)
	maxAtts := make([]*int32, n)
	keys := make([]*string, n)
	for i := range n {
		kinds[i] = new(pick(p, propKinds...))
		payloads[i] = new(pick(p, "{}", `{"i": 1}`, "[]", "null"))
		queues[i] = new(pick(p, propQueues...))
		runAts[i] = p.runAt()
		priorities[i] = new(pick(p, int32(0), 3, -3))
		maxAtts[i] = new(pick(p, int32(1), 2, 4, maxInt32))
		if p.rng.IntN(2) == 0 {
			keys[i] = new(pick(p, "u1", "u2"))
		}
	}
	// Arrays other than kinds may be NULL: every job takes the default.
	var payloadsArg, prioritiesArg, maxAttsArg, keysArg, runAtsArg any = payloads, priorities, maxAtts, keys, runAts
	if p.rng.IntN(4) == 0 {
		payloadsArg = nil
	}
	if p.rng.IntN(4) == 0 {
		prioritiesArg = nil
	}
	if p.rng.IntN(4) == 0 {
		maxAttsArg = nil
	}
	if p.rng.IntN(4) == 0 {
		keysArg = nil
	}
	if p.rng.IntN(4) == 0 {
		runAtsArg = nil
	}

	bad := ""
	if p.rng.IntN(4) == 0 {
		// One bad element (all or nothing), a bad length or no kinds at all.
		i := p.rng.IntN(n)
		elem := fmt.Sprintf("[%d]", i+1)
		switch p.rng.IntN(8) {
		case 0:
			kinds[i], bad = pick(p, nil, new(""), new(tooLong)), "kinds"+elem
		case 1:
			payloads[i], payloadsArg, bad = nil, payloads, "payloads"+elem
		case 2:
			queues[i], bad = pick(p, nil, new(""), new(tooLong)), "queues"+elem
		case 3:
			maxAtts[i], maxAttsArg, bad = pick(p, nil, new(int32(0))), maxAtts, "max_attempts"+elem
		case 4:
			keys[i], keysArg, bad = pick(p, new(""), new(tooLong)), keys, "unique_keys"+elem
		case 5:
			prioritiesArg, bad = append(priorities, new(int32(1))), "priorities"
		case 6:
			bad = "kinds"
		case 7:
			runAts[i], runAtsArg, bad = pick(p, propInfinite...).(pgtype.Timestamptz), runAts, "run_ats"+elem
		}
	}
	var kindsArg any = kinds
	if bad == "kinds" {
		kindsArg = nil
	}
	// The first bad element is the one reported; the generator makes at most one.
	args := []any{kindsArg, payloadsArg, queues, runAtsArg, prioritiesArg, maxAttsArg, keysArg}
	return op{
		name: "enqueue_many", fn: "jobs_enqueue_many", bad: bad, args: args,
		sql: "SELECT * FROM jobs_enqueue_many($1::text[], $2::jsonb[], $3::text[], $4::timestamptz[], $5::int[], $6::int[], $7::text[])",
		check: func(p *propRun, pre, post *snapshot, rows [][]any, err error) {
			if err != nil {
				p.fail("valid call failed: %v", err)
			}
			specs := make([]enqueueSpec, n)
			got := make([]int64, len(rows))
			for i := range rows {
				got[i] = rows[i][0].(int64)
			}
			for i := range n {
				s := enqueueSpec{kind: *kinds[i], payload: "{}", queue: *queues[i], priority: 0, maxAtt: 5}
				if payloadsArg != nil {
					s.payload = *payloads[i]
				}
				if runAtsArg != nil {
					s.runAt = &runAts[i]
				}
				if prioritiesArg != nil {
					s.priority = *priorities[i]
				}
				if maxAttsArg != nil {
					s.maxAtt = *maxAtts[i]
				}
				if keysArg != nil {
					s.key = keys[i]
				}
				specs[i] = s
			}
			p.checkEnqueued(pre, post, specs, got)
		},
	}
}

// jobOrder is jobs_claim's order: priority, run_at, id.
func jobOrder(a, b *snapJob) int {
	if c := cmp.Compare(a.Priority, b.Priority); c != 0 {
		return c
	}
	if c := tsCmp(a.RunAt, b.RunAt); c != 0 {
		return c
	}
	return cmp.Compare(a.ID, b.ID)
}

func (p *propRun) opClaim() op {
	var queues any
	switch p.rng.IntN(4) {
	case 0:
		queues = nil
	case 1:
		queues = []string{pick(p, propQueues...)}
	case 2:
		queues = []string{"q1", "q2"}
	default:
		queues = []string{propQueues[2], "q2", "nope"}
	}
	vals, bad := p.args(
		arg{"worker", pick(p, propWorkers...), []any{nil, "", tooLong}},
		arg{"max_jobs", pick(p, int32(1), 2, 3, 10), []any{nil, int32(0), int32(-1), int32(10001)}},
		arg{"queues", queues, []any{[]string{}, []*string{new("q1"), nil}, [][]string{{"q1"}, {"q2"}}}},
		arg{"lease", pick(p, "1 hour", "10 minutes", "100 milliseconds", "1 microsecond", "100 years"),
			append([]any{nil, "0", "-1 second", "1 mon -31 days"}, propLongLeases...)},
	)
	return op{
		name: "claim", fn: "jobs_claim", bad: bad, args: vals,
		sql: "SELECT id, queue, kind, payload::text, attempt, max_attempts, priority FROM jobs_claim($1::text, $2::int, $3::text[], $4::interval)",
		check: func(p *propRun, pre, post *snapshot, rows [][]any, err error) {
			if err != nil {
				p.fail("valid call failed: %v", err)
			}
			worker, maxJobs := vals[0].(string), int(vals[1].(int32))
			var inQueues func(string) bool
			if qs, ok := vals[2].([]string); ok {
				inQueues = func(q string) bool { return slices.Contains(qs, q) }
			} else {
				inQueues = func(string) bool { return true }
			}
			if len(rows) > maxJobs {
				p.fail("claimed %d jobs with max_jobs %d", len(rows), maxJobs)
			}
			claimed := map[int64]bool{}
			var prev *snapJob
			for _, r := range rows {
				id := r[0].(int64)
				before, after := pre.jobs[id], post.jobs[id]
				switch {
				case claimed[id]:
					p.fail("job %d claimed twice", id)
				case before == nil || after == nil:
					p.fail("claimed job %d is not in the table", id)
				case before.State != "queued" || tsCmp(before.RunAt, post.clock) > 0 || !inQueues(before.Queue):
					p.fail("claimed job %d was not ready in the queues: %s", id, before)
				case prev != nil && jobOrder(prev, before) > 0:
					p.fail("claimed job %d after job %d, out of (priority, run_at, id) order", id, prev.ID)
				case after.State != "running" || after.Attempts != before.Attempts+1 || !eqPtr(after.LeaseHolder, &worker) ||
					!after.LeaseExpiresAt.Valid:
					p.fail("claimed job %d is %s, want running at attempt %d held by %q", id, after, before.Attempts+1, worker)
				case r[1] != after.Queue || r[2] != after.Kind || !jsonEqual(p.t, r[3].(string), after.Payload) ||
					r[4] != after.Attempts || r[5] != after.MaxAttempts || r[6] != after.Priority:
					p.fail("jobs_claim returned %v for job %s", r, after)
				}
				p.same("claim", before, after, "State", "Attempts", "LeaseHolder", "LeaseExpiresAt")
				claimed[id] = true
				prev = before
			}
			// A job surely ready at the call (queued, due before the snapshot's clock) and
			// not claimed means the claim was full, and every claimed job ranks before it.
			for _, j := range pre.jobs {
				if claimed[j.ID] || j.State != "queued" || !inQueues(j.Queue) || tsCmp(j.RunAt, pre.clock) > 0 {
					continue
				}
				if len(rows) < maxJobs {
					p.fail("job %d was ready but not claimed (%d of max %d claimed): %s", j.ID, len(rows), maxJobs, j)
				}
				if prev != nil && jobOrder(prev, j) > 0 {
					p.fail("job %d was claimed although job %d ranks before it", prev.ID, j.ID)
				}
			}
			p.onlyChanged(pre, post, claimed)
		},
	}
}

func (p *propRun) opComplete() op {
	id, attempt := p.target()
	vals, bad := p.args(arg{"id", id, []any{nil}}, arg{"attempt", attempt, []any{nil}})
	return op{
		name: "complete", fn: "jobs_complete", bad: bad, args: vals,
		sql: "SELECT jobs_complete($1::bigint, $2::int)",
		check: func(p *propRun, pre, post *snapshot, rows [][]any, err error) {
			if err != nil {
				p.fail("valid call failed: %v", err)
			}
			j := pre.jobs[id]
			held := j != nil && j.held(attempt)
			if rows[0][0] != held {
				p.fail("jobs_complete returned %v, want %v for %v", rows[0][0], held, j)
			}
			if held {
				after := post.jobs[id]
				if after.State != "done" || after.LeaseExpiresAt.Valid || !after.FinishedAt.Valid {
					p.fail("completed job is %s", after)
				}
				p.same("complete", j, after, "State", "LeaseExpiresAt", "FinishedAt")
			}
			p.onlyChanged(pre, post, map[int64]bool{id: held})
		},
	}
}

// pairs picks up to four (id, attempt) pairs.
func (p *propRun) pairs() ([]int64, []int32) {
	n := p.rng.IntN(5)
	ids, attempts := make([]int64, n), make([]int32, n)
	for i := range n {
		ids[i], attempts[i] = p.target()
	}
	return ids, attempts
}

// returnedEachOnce fails the run unless rows (one id per row) name each job of held once.
func (p *propRun) returnedEachOnce(fn string, rows [][]any, held map[int64]bool) {
	got := map[int64]bool{}
	for _, r := range rows {
		got[r[0].(int64)] = true
	}
	if fmt.Sprint(got) != fmt.Sprint(held) || len(rows) != len(held) {
		p.fail("%s returned %v, want each of %v once", fn, rows, held)
	}
}

// heldPairs is the set of ids whose pair names the job's current attempt while it runs.
func heldPairs(pre *snapshot, ids []int64, attempts []int32) map[int64]bool {
	held := map[int64]bool{}
	for i, id := range ids {
		if j := pre.jobs[id]; j != nil && j.held(attempts[i]) {
			held[id] = true
		}
	}
	return held
}

func (p *propRun) opCompleteMany() op {
	ids, attempts := p.pairs()
	vals, bad := p.args(
		arg{"ids", ids, []any{nil, []*int64{new(int64(1)), nil}, [][]int64{{1}, {2}}}},
		arg{"attempts", attempts, []any{nil, append(slices.Clone(attempts), 1), [][]int32{{1}}}},
	)
	if bad == "ids" && vals[0] != nil && vals[1] != nil {
		vals[1] = []int32{1, 1} // as long as the bad ids, so that ids is what is wrong
	}
	return op{
		name: "complete_many", fn: "jobs_complete_many", bad: bad, args: vals,
		sql: "SELECT * FROM jobs_complete_many($1::bigint[], $2::int[])",
		check: func(p *propRun, pre, post *snapshot, rows [][]any, err error) {
			if err != nil {
				p.fail("valid call failed: %v", err)
			}
			held := heldPairs(pre, ids, attempts)
			p.returnedEachOnce("jobs_complete_many", rows, held)
			for id := range held {
				after := post.jobs[id]
				if after.State != "done" || after.LeaseExpiresAt.Valid || !after.FinishedAt.Valid {
					p.fail("completed job is %s", after)
				}
				p.same("complete_many", pre.jobs[id], after, "State", "LeaseExpiresAt", "FinishedAt")
			}
			p.onlyChanged(pre, post, held)
		},
	}
}

func (p *propRun) opFail() op {
	id, attempt := p.target()
	var retryAt any
	if p.rng.IntN(2) == 0 {
		retryAt = p.runAt()
	}
	vals, bad := p.args(
		arg{"id", id, []any{nil}},
		arg{"attempt", attempt, []any{nil}},
		arg{"error", pick(p, "boom", "", "it's \\ 🚀", strings.Repeat("é", 10050)), []any{nil}},
		arg{"retry_at", retryAt, propInfinite},
	)
	return op{
		name: "fail", fn: "jobs_fail", bad: bad, args: vals,
		sql: "SELECT jobs_fail($1::bigint, $2::int, $3::text, $4::timestamptz)::text",
		check: func(p *propRun, pre, post *snapshot, rows [][]any, err error) {
			if err != nil {
				p.fail("valid call failed: %v", err)
			}
			j := pre.jobs[id]
			if j == nil || !j.held(attempt) {
				if rows[0][0] != nil {
					p.fail("jobs_fail of a job not held returned %v", rows[0][0])
				}
				p.onlyChanged(pre, post, nil)
				return
			}
			want := "queued"
			if j.Attempts >= j.MaxAttempts {
				want = "dead"
			}
			after := post.jobs[id]
			errText := truncated(vals[2].(string))
			switch {
			case rows[0][0] != want || after.State != want:
				p.fail("jobs_fail returned %v and left %s, want %s", rows[0][0], after, want)
			case !eqPtr(after.LastError, &errText) || after.ErrorsLen != j.ErrorsLen+1 || after.LeaseExpiresAt.Valid:
				p.fail("failed job is %s", after)
			case want == "dead" && (!after.FinishedAt.Valid || tsCmp(after.RunAt, j.RunAt) != 0):
				p.fail("dead job is %s", after)
			case want == "queued" && after.FinishedAt.Valid:
				p.fail("requeued job is %s", after)
			case want == "queued" && retryAt != nil && tsCmp(after.RunAt, retryAt.(pgtype.Timestamptz)) != 0:
				p.fail("requeued job runs at %s, want retry_at %s", tsString(after.RunAt), tsString(retryAt.(pgtype.Timestamptz)))
			case want == "queued" && retryAt == nil && tsCmp(after.RunAt, pre.clock) < 0:
				p.fail("requeued job with backoff runs at %s, before the call", tsString(after.RunAt))
			}
			p.same("fail", j, after, "State", "RunAt", "LeaseExpiresAt", "LastError", "ErrorsLen", "FinishedAt")
			p.onlyChanged(pre, post, map[int64]bool{id: true})
		},
	}
}

func (p *propRun) opHeartbeat() op {
	id, attempt := p.target()
	vals, bad := p.args(
		arg{"id", id, []any{nil}},
		arg{"attempt", attempt, []any{nil}},
		arg{"lease", pick(p, "1 hour", "100 milliseconds", "100 years"), append([]any{nil, "0", "-1 hour", "1 mon -30 days"}, propLongLeases...)},
	)
	return op{
		name: "heartbeat", fn: "jobs_heartbeat", bad: bad, args: vals,
		sql: "SELECT jobs_heartbeat($1::bigint, $2::int, $3::interval)",
		check: func(p *propRun, pre, post *snapshot, rows [][]any, err error) {
			if err != nil {
				p.fail("valid call failed: %v", err)
			}
			j := pre.jobs[id]
			held := j != nil && j.held(attempt)
			if rows[0][0] != held {
				p.fail("jobs_heartbeat returned %v, want %v", rows[0][0], held)
			}
			if held {
				p.checkExtended(pre, post, id, vals[2].(string))
			}
			p.onlyChanged(pre, post, map[int64]bool{id: held})
		},
	}
}

// checkExtended checks that only the lease of job id changed, to now() + lease.
func (p *propRun) checkExtended(pre, post *snapshot, id int64, lease string) {
	p.t.Helper()
	after := post.jobs[id]
	lo, hi := shift(pre.clock.Time, lease, 1), shift(post.clock.Time, lease, 1)
	if !after.LeaseExpiresAt.Valid || after.LeaseExpiresAt.Time.Before(lo) || after.LeaseExpiresAt.Time.After(hi) {
		p.fail("lease of job %d extended by %s to %s, want between %s and %s", id, lease, tsString(after.LeaseExpiresAt),
			tsString(at(lo)), tsString(at(hi)))
	}
	p.same("heartbeat", pre.jobs[id], after, "LeaseExpiresAt")
}

func (p *propRun) opHeartbeatMany() op {
	ids, attempts := p.pairs()
	vals, bad := p.args(
		arg{"ids", ids, []any{nil, []*int64{nil}, [][]int64{{1}}}},
		arg{"attempts", attempts, []any{nil, []*int32{nil}, [][]int32{{1}}}},
		arg{"lease", pick(p, "1 hour", "10 minutes", "100 years"), append([]any{nil, "0", "-1 hour"}, propLongLeases...)},
	)
	if bad == "ids" && vals[0] != nil && vals[1] != nil {
		vals[1] = []int32{1} // the same length as the bad ids, so that ids is what is wrong
	}
	if bad == "attempts" && vals[0] != nil && vals[1] != nil {
		vals[0] = []int64{1}
	}
	return op{
		name: "heartbeat_many", fn: "jobs_heartbeat_many", bad: bad, args: vals,
		sql: "SELECT * FROM jobs_heartbeat_many($1::bigint[], $2::int[], $3::interval)",
		check: func(p *propRun, pre, post *snapshot, rows [][]any, err error) {
			if err != nil {
				p.fail("valid call failed: %v", err)
			}
			held := heldPairs(pre, ids, attempts)
			p.returnedEachOnce("jobs_heartbeat_many", rows, held)
			for id := range held {
				p.checkExtended(pre, post, id, vals[2].(string))
			}
			p.onlyChanged(pre, post, held)
		},
	}
}

func (p *propRun) opSnooze() op {
	id, attempt := p.target()
	vals, bad := p.args(
		arg{"id", id, []any{nil}},
		arg{"attempt", attempt, []any{nil}},
		arg{"run_at", p.runAt(), append([]any{nil}, propInfinite...)},
	)
	return op{
		name: "snooze", fn: "jobs_snooze", bad: bad, args: vals,
		sql: "SELECT jobs_snooze($1::bigint, $2::int, $3::timestamptz)",
		check: func(p *propRun, pre, post *snapshot, rows [][]any, err error) {
			if err != nil {
				p.fail("valid call failed: %v", err)
			}
			j := pre.jobs[id]
			held := j != nil && j.held(attempt)
			if rows[0][0] != held {
				p.fail("jobs_snooze returned %v, want %v", rows[0][0], held)
			}
			if held {
				after := post.jobs[id]
				wantMax := j.MaxAttempts // saturates at 2^31-1
				if wantMax < maxInt32 {
					wantMax++
				}
				if after.State != "queued" || tsCmp(after.RunAt, vals[2].(pgtype.Timestamptz)) != 0 ||
					after.MaxAttempts != wantMax || after.LeaseExpiresAt.Valid {
					p.fail("snoozed job is %s", after)
				}
				p.same("snooze", j, after, "State", "RunAt", "MaxAttempts", "LeaseExpiresAt")
			}
			p.onlyChanged(pre, post, map[int64]bool{id: held})
		},
	}
}

func (p *propRun) opCancel() op {
	id, _ := p.target()
	vals, bad := p.args(arg{"id", id, []any{nil}})
	return op{
		name: "cancel", fn: "jobs_cancel", bad: bad, args: vals,
		sql: "SELECT jobs_cancel($1::bigint)",
		check: func(p *propRun, pre, post *snapshot, rows [][]any, err error) {
			if err != nil {
				p.fail("valid call failed: %v", err)
			}
			j := pre.jobs[id]
			live := j != nil && j.live()
			if rows[0][0] != live {
				p.fail("jobs_cancel returned %v, want %v for %v", rows[0][0], live, j)
			}
			if live {
				after := post.jobs[id]
				if after.State != "cancelled" || after.LeaseExpiresAt.Valid || !after.FinishedAt.Valid {
					p.fail("cancelled job is %s", after)
				}
				p.same("cancel", j, after, "State", "LeaseExpiresAt", "FinishedAt")
			}
			p.onlyChanged(pre, post, map[int64]bool{id: live})
		},
	}
}

func (p *propRun) opCancelFenced() op {
	id, attempt := p.target()
	vals, bad := p.args(
		arg{"id", id, []any{nil}},
		arg{"attempt", attempt, []any{nil}},
		arg{"error", pick(p, "gave up", "", "🚫 'x'"), []any{nil}},
	)
	return op{
		name: "cancel_fenced", fn: "jobs_cancel", bad: bad, args: vals,
		sql: "SELECT jobs_cancel($1::bigint, $2::int, $3::text)",
		check: func(p *propRun, pre, post *snapshot, rows [][]any, err error) {
			if err != nil {
				p.fail("valid call failed: %v", err)
			}
			j := pre.jobs[id]
			held := j != nil && j.held(attempt)
			if rows[0][0] != held {
				p.fail("jobs_cancel(id, attempt, error) returned %v, want %v", rows[0][0], held)
			}
			if held {
				after := post.jobs[id]
				errText := vals[2].(string)
				if after.State != "cancelled" || after.LeaseExpiresAt.Valid || !after.FinishedAt.Valid ||
					!eqPtr(after.LastError, &errText) || after.ErrorsLen != j.ErrorsLen+1 {
					p.fail("cancelled job is %s", after)
				}
				p.same("cancel fenced", j, after, "State", "LeaseExpiresAt", "FinishedAt", "LastError", "ErrorsLen")
			}
			p.onlyChanged(pre, post, map[int64]bool{id: held})
		},
	}
}

func (p *propRun) opRetry() op {
	id, _ := p.target()
	// Aim at a finished job most of the time.
	var finished []int64
	for _, j := range p.pre.jobs {
		if j.State == "dead" || j.State == "cancelled" {
			finished = append(finished, j.ID)
		}
	}
	slices.Sort(finished)
	if len(finished) > 0 && p.rng.IntN(3) > 0 {
		id = pick(p, finished...)
	}
	vals, bad := p.args(arg{"id", id, []any{nil}})
	return op{
		name: "retry", fn: "jobs_retry", bad: bad, args: vals,
		sql: "SELECT jobs_retry($1::bigint)",
		check: func(p *propRun, pre, post *snapshot, rows [][]any, err error) {
			j := pre.jobs[id]
			retryable := j != nil && (j.State == "dead" || j.State == "cancelled")
			conflict := false
			if retryable && j.UniqueKey != nil {
				for _, o := range pre.jobs {
					if o.ID != id && o.live() && o.Queue == j.Queue && eqPtr(o.UniqueKey, j.UniqueKey) {
						conflict = true
					}
				}
			}
			if conflict {
				// Documented: 23505 when another live job holds the key.
				if pgErr := asPgError(err); pgErr == nil || pgErr.Code != "23505" {
					p.fail("jobs_retry of a job whose key is held: got %v, want SQLSTATE 23505", err)
				}
				p.onlyChanged(pre, post, nil)
				return
			}
			if err != nil {
				p.fail("valid call failed: %v", err)
			}
			if rows[0][0] != retryable {
				p.fail("jobs_retry returned %v, want %v for %v", rows[0][0], retryable, j)
			}
			if retryable {
				after := post.jobs[id]
				if after.State != "queued" || after.FinishedAt.Valid || after.MaxAttempts != max(j.MaxAttempts, j.Attempts+1) ||
					tsCmp(after.RunAt, pre.clock) < 0 || tsCmp(after.RunAt, post.clock) > 0 {
					p.fail("retried job is %s", after)
				}
				p.same("retry", j, after, "State", "FinishedAt", "MaxAttempts", "RunAt")
			}
			p.onlyChanged(pre, post, map[int64]bool{id: retryable})
		},
	}
}

func (p *propRun) opRequeueExpired() op {
	return op{
		name: "requeue_expired", fn: "jobs_requeue_expired",
		sql: "SELECT jobs_requeue_expired()",
		check: func(p *propRun, pre, post *snapshot, rows [][]any, err error) {
			if err != nil {
				p.fail("valid call failed: %v", err)
			}
			changed := map[int64]bool{}
			for id, j := range pre.jobs {
				after := post.jobs[id]
				if j.State != "running" || after.State == "running" {
					// A lease that surely expired before the call must have been taken back.
					if j.State == "running" && tsCmp(j.LeaseExpiresAt, pre.clock) < 0 {
						p.fail("job %d's lease expired at %s, before the call, but it still runs", id, tsString(j.LeaseExpiresAt))
					}
					continue
				}
				changed[id] = true
				want := "queued"
				if j.Attempts >= j.MaxAttempts {
					want = "dead"
				}
				if after.State != want || after.ErrorsLen != j.ErrorsLen+1 || after.LeaseExpiresAt.Valid ||
					after.LastError == nil || !strings.Contains(*after.LastError, "lease expired") ||
					tsCmp(j.LeaseExpiresAt, post.clock) >= 0 {
					p.fail("requeued job %d is %s, want %s (lease was %s)", id, after, want, tsString(j.LeaseExpiresAt))
				}
				p.same("requeue_expired", j, after, "State", "RunAt", "FinishedAt", "LastError", "ErrorsLen", "LeaseExpiresAt")
			}
			if int(rows[0][0].(int32)) != len(changed) {
				p.fail("jobs_requeue_expired returned %v, but %d jobs were taken back", rows[0][0], len(changed))
			}
			p.onlyChanged(pre, post, changed)
		},
	}
}

func (p *propRun) opPrune() op {
	vals, bad := p.args(
		arg{"older_than", pick(p, "0", "1 hour", "1 microsecond", "1000 years", "178000000 years"), []any{nil, "-1 second", "1 mon -31 days"}},
		arg{"include_dead", p.rng.IntN(2) == 0, []any{nil}},
		arg{"max_jobs", pick(p, int32(1), 3, 1000), []any{nil, int32(0), int32(-5)}},
	)
	return op{
		name: "prune", fn: "jobs_prune", bad: bad, args: vals,
		sql: "SELECT jobs_prune($1::interval, $2::boolean, $3::int)",
		check: func(p *propRun, pre, post *snapshot, rows [][]any, err error) {
			if err != nil {
				p.fail("valid call failed: %v", err)
			}
			olderThan, includeDead, maxJobs := vals[0].(string), vals[1].(bool), vals[2].(int32)
			prunable := func(j *snapJob) bool {
				return j.State == "done" || j.State == "cancelled" || (includeDead && j.State == "dead")
			}
			deleted := map[int64]bool{}
			for id, j := range pre.jobs {
				if _, ok := post.jobs[id]; ok {
					continue
				}
				deleted[id] = true
				if !prunable(j) || !j.FinishedAt.Valid || !j.FinishedAt.Time.Before(shift(post.clock.Time, olderThan, -1)) {
					p.fail("jobs_prune deleted job %s", j)
				}
			}
			n := int(rows[0][0].(int32))
			if n != len(deleted) || n > int(maxJobs) {
				p.fail("jobs_prune returned %d, deleted %d, max_jobs %d", n, len(deleted), maxJobs)
			}
			if n < int(maxJobs) {
				for _, j := range pre.jobs {
					if !deleted[j.ID] && prunable(j) && j.FinishedAt.Time.Before(shift(pre.clock.Time, olderThan, -1)) {
						p.fail("jobs_prune left job %s though it returned %d < max_jobs", j, n)
					}
				}
			}
			p.onlyChanged(pre, post, deleted)
		},
	}
}

func (p *propRun) opStats() op {
	return op{
		name: "stats", fn: "jobs_stats",
		sql: "SELECT queue, state::text, jobs FROM jobs_stats()",
		check: func(p *propRun, pre, post *snapshot, rows [][]any, err error) {
			if err != nil {
				p.fail("valid call failed: %v", err)
			}
			want := map[string]int64{}
			for _, j := range pre.jobs {
				want[j.Queue+"/"+j.State]++
			}
			got := map[string]int64{}
			for _, r := range rows {
				got[r[0].(string)+"/"+r[1].(string)] = r[2].(int64)
			}
			if fmt.Sprint(got) != fmt.Sprint(want) {
				p.fail("jobs_stats = %v, want %v", got, want)
			}
			p.onlyChanged(pre, post, nil)
		},
	}
}

func (p *propRun) opGet() op {
	id, _ := p.target()
	vals, bad := p.args(arg{"id", id, []any{nil}})
	return op{
		name: "get", fn: "jobs_get", bad: bad, args: vals,
		sql: "SELECT state::text, attempts, max_attempts, last_error FROM jobs_get($1::bigint)",
		check: func(p *propRun, pre, post *snapshot, rows [][]any, err error) {
			if err != nil {
				p.fail("valid call failed: %v", err)
			}
			j := pre.jobs[id]
			switch {
			case j == nil && len(rows) != 0:
				p.fail("jobs_get(%d) of an unknown id returned %v", id, rows)
			case j != nil && (len(rows) != 1 || rows[0][0] != j.State || rows[0][1] != j.Attempts ||
				rows[0][2] != j.MaxAttempts || fmt.Sprint(rows[0][3]) != fmt.Sprint(deref2(j.LastError))):
				p.fail("jobs_get(%d) = %v, want the row %s", id, rows, j)
			}
			p.onlyChanged(pre, post, nil)
		},
	}
}

// deref2 is a *string as rows.Values gives it: the string, or nil.
func deref2(s *string) any {
	if s == nil {
		return nil
	}
	return *s
}

func (p *propRun) opBackoff() op {
	vals, bad := p.args(arg{"attempt", pick(p, int32(1), 2, 12, 13, maxInt32), []any{nil, int32(0), int32(-1), int32(minInt32)}})
	return op{
		name: "backoff", fn: "jobs_backoff", bad: bad, args: vals,
		sql: "SELECT jobs_backoff($1::int)",
		check: func(p *propRun, pre, post *snapshot, rows [][]any, err error) {
			if err != nil {
				p.fail("valid call failed: %v", err)
			}
			// Default settings: min(1 h, 1 s * 2^(attempt-1)), +-25%.
			a := vals[0].(int32)
			base := time.Hour
			if a <= 13 {
				base = min(time.Hour, time.Second<<(a-1))
			}
			iv := rows[0][0].(pgtype.Interval)
			d := time.Duration(iv.Microseconds)*time.Microsecond + time.Duration(iv.Days)*24*time.Hour
			if iv.Months != 0 || d < base*3/4 || d > base*5/4 {
				p.fail("jobs_backoff(%d) = %v, want %s +-25%%", a, iv, base)
			}
			p.onlyChanged(pre, post, nil)
		},
	}
}
