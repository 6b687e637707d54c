package sqltest

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/skiplock/skiplock/tests/pgtest"
)

// fanInClaim is one job a fan-in worker claimed: its fence and what the claim handed it.
type fanInClaim struct {
	ID            int64
	Attempt       int32
	ParentResults map[string]string
	// ClaimedAt: clock_timestamp() once the call had claimed the job. Its started_at is
	// now(), the start of the claim's transaction, which may predate the commit that released
	// the job (see the check at the end of TestFanInExactness).
	ClaimedAt time.Time
}

// fanInResult is the result each job completes with: "r" and its id, so a child can check
// that parent_results holds exactly its parents' results.
func fanInResult(id int64) string { return strconv.Quote("r" + strconv.FormatInt(id, 10)) }

// TestFanInExactness: 1,000 diamonds (a -> b, c -> d) and four 16-parent fan-ins, worked
// through by 16 sessions at once. A third of them complete each job in its own transaction
// (jobs_complete), a third in batches of up to four jobs from different diamonds
// (jobs_complete_many, children locked in id order), a third with jobs_complete_and_claim.
// Every child is released exactly once (claimed once), never before its last parent is
// done (each parent finished at or before the child started), with its parents' results;
// no call fails (no deadlock), and nothing is left waiting.
func TestFanInExactness(t *testing.T) {
	t.Parallel()
	b := setup(t)
	diamonds, fanIns, width, workers := 1000, 4, 16, 16
	if testing.Short() {
		diamonds = 200
	}

	// The fan-ins' parents first (claimed first, while every worker is busy), then the
	// diamonds, one enqueue per job.
	var fanInParents [][]int64
	var fanInChildren []int64
	for range fanIns {
		parents := queryOne[[]int64](t, b.Conn,
			"SELECT array_agg(jobs_enqueue('p', queue => 'fanin') ORDER BY g) FROM generate_series(1, $1) AS g", width)
		fanInParents = append(fanInParents, parents)
		fanInChildren = append(fanInChildren, queryOne[int64](t, b.Conn,
			"SELECT jobs_enqueue('f', queue => 'fanin', depends_on => $1)", parents))
	}
	as := queryOne[[]int64](t, b.Conn,
		"SELECT array_agg(jobs_enqueue('a', queue => 'fanin') ORDER BY g) FROM generate_series(1, $1) AS g", diamonds)
	bs := queryOne[[]int64](t, b.Conn, `
		SELECT array_agg(jobs_enqueue('b', queue => 'fanin', depends_on => ARRAY[u.a]) ORDER BY u.o)
		FROM unnest($1::bigint[]) WITH ORDINALITY AS u(a, o)`, as)
	cs := queryOne[[]int64](t, b.Conn, `
		SELECT array_agg(jobs_enqueue('c', queue => 'fanin', depends_on => ARRAY[u.a]) ORDER BY u.o)
		FROM unnest($1::bigint[]) WITH ORDINALITY AS u(a, o)`, as)
	ds := queryOne[[]int64](t, b.Conn, `
		SELECT array_agg(jobs_enqueue('d', queue => 'fanin', depends_on => ARRAY[u.b, u.c]) ORDER BY u.o)
		FROM unnest($1::bigint[], $2::bigint[]) WITH ORDINALITY AS u(b, c, o)`, bs, cs)
	total := int64(fanIns*(width+1) + 4*diamonds)
	if n := queryOne[int64](t, b.Conn, "SELECT count(*) FROM jobs WHERE state = 'waiting'"); n != int64(fanIns+3*diamonds) {
		t.Fatalf("%d jobs waiting after enqueue, want %d", n, fanIns+3*diamonds)
	}

	// parentsOf: what each child's parent_results must be.
	parentsOf := map[int64][]int64{}
	for i, f := range fanInChildren {
		parentsOf[f] = fanInParents[i]
	}
	for i := range diamonds {
		parentsOf[bs[i]] = []int64{as[i]}
		parentsOf[cs[i]] = []int64{as[i]}
		parentsOf[ds[i]] = []int64{bs[i], cs[i]}
	}

	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	var (
		wg        sync.WaitGroup
		mu        sync.Mutex
		claims    = map[int64]int{}
		claimedAt = map[int64]time.Time{}
		problems  []string
		errCodes  = map[string]int{}
		completed atomic.Int64
		calls     [3]atomic.Int64 // completions by jobs_complete, jobs_complete_many, jobs_complete_and_claim
	)
	problem := func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		problems = append(problems, fmt.Sprintf(format, args...))
	}
	failed := func(what string, err error) {
		if ctx.Err() != nil {
			return // another session failed first, or the time is up
		}
		var pgErr *pgconn.PgError
		code := "other"
		if errors.As(err, &pgErr) {
			code = pgErr.Code
		}
		mu.Lock()
		errCodes[code]++
		mu.Unlock()
		problem("%s: %v", what, err)
		cancel()
	}
	record := func(got []fanInClaim) {
		mu.Lock()
		defer mu.Unlock()
		for _, c := range got {
			claims[c.ID]++
			claimedAt[c.ID] = c.ClaimedAt
			want := map[string]string{}
			for _, p := range parentsOf[c.ID] {
				want[strconv.FormatInt(p, 10)] = "r" + strconv.FormatInt(p, 10)
			}
			if len(want) == 0 {
				want = nil
			}
			if !maps.Equal(c.ParentResults, want) {
				problems = append(problems, fmt.Sprintf("job %d claimed with parent_results %v, want %v", c.ID, c.ParentResults, want))
			}
		}
	}
	results := func(held []fanInClaim) (ids []int64, attempts []int32, res []string) {
		ids, attempts, res = []int64{}, []int32{}, []string{}
		for _, c := range held {
			ids = append(ids, c.ID)
			attempts = append(attempts, c.Attempt)
			res = append(res, fanInResult(c.ID))
		}
		return ids, attempts, res
	}
	scanClaims := func(rows pgx.Rows, err error) ([]fanInClaim, error) {
		if err != nil {
			return nil, err
		}
		return pgx.CollectRows(rows, func(row pgx.CollectableRow) (fanInClaim, error) {
			var c fanInClaim
			err := row.Scan(&c.ID, &c.Attempt, &c.ParentResults, &c.ClaimedAt)
			return c, err
		})
	}

	start := make(chan struct{})
	for w := range workers {
		conn := b.Connect(t)
		worker := fmt.Sprintf("w%d", w)
		wg.Go(func() {
			<-start
			var held []fanInClaim // jobs_complete_and_claim's workers: claimed, not yet completed
			for ctx.Err() == nil {
				var got []fanInClaim
				var err error
				switch w % 3 {
				case 0: // each completion its own transaction
					got, err = scanClaims(conn.Query(ctx,
						"SELECT id, attempt, parent_results, clock_timestamp() FROM jobs_claim($1, 2, ARRAY['fanin'], '5 minutes')", worker))
					if err != nil {
						failed("jobs_claim", err)
						return
					}
					record(got)
					for _, c := range got {
						err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
							var ok bool
							if err := tx.QueryRow(ctx, "SELECT jobs_complete($1, $2, $3::text::jsonb)",
								c.ID, c.Attempt, fanInResult(c.ID)).Scan(&ok); err != nil {
								return err
							}
							if !ok {
								return fmt.Errorf("jobs_complete(%d, %d) returned false", c.ID, c.Attempt)
							}
							return nil
						})
						if err != nil {
							failed("jobs_complete", err)
							return
						}
						completed.Add(1)
						calls[0].Add(1)
					}
				case 1: // batches of jobs from different diamonds
					got, err = scanClaims(conn.Query(ctx,
						"SELECT id, attempt, parent_results, clock_timestamp() FROM jobs_claim($1, 4, ARRAY['fanin'], '5 minutes')", worker))
					if err != nil {
						failed("jobs_claim", err)
						return
					}
					record(got)
					if len(got) > 0 {
						ids, attempts, res := results(got)
						done := queryListCtx[int64](ctx, conn,
							"SELECT * FROM jobs_complete_many($1, $2, $3::text[]::jsonb[])", ids, attempts, res)
						if done.err != nil {
							failed("jobs_complete_many", done.err)
							return
						}
						if len(done.vals) != len(ids) {
							problem("jobs_complete_many(%v) completed %v", ids, done.vals)
						}
						completed.Add(int64(len(done.vals)))
						calls[1].Add(int64(len(done.vals)))
					}
				case 2: // complete the last batch and claim the next in one call
					ids, attempts, res := results(held)
					rows, err := conn.Query(ctx, `
						SELECT completed, id, attempt, parent_results, clock_timestamp()
						FROM jobs_complete_and_claim($1, $2, $3, 4, ARRAY['fanin'], '5 minutes', $4::text[]::jsonb[])`,
						worker, ids, attempts, res)
					var done []int64
					if err == nil {
						got, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (fanInClaim, error) {
							var c fanInClaim
							var id *int64
							var attempt *int32
							var completedIDs []int64
							err := row.Scan(&completedIDs, &id, &attempt, &c.ParentResults, &c.ClaimedAt)
							if completedIDs != nil {
								done = completedIDs
							}
							if id != nil {
								c.ID, c.Attempt = *id, *attempt
							}
							return c, err
						})
					}
					if err != nil {
						failed("jobs_complete_and_claim", err)
						return
					}
					if len(done) != len(ids) {
						problem("jobs_complete_and_claim(%v) completed %v", ids, done)
					}
					completed.Add(int64(len(done)))
					calls[2].Add(int64(len(done)))
					got = slices.DeleteFunc(got, func(c fanInClaim) bool { return c.ID == 0 })
					record(got)
					held = got
				}
				if len(got) == 0 {
					if completed.Load() == total {
						return
					}
					time.Sleep(2 * time.Millisecond) // children not released yet: poll again
				}
			}
		})
	}
	began := time.Now()
	close(start)
	wg.Wait()
	elapsed := time.Since(began)
	if ctx.Err() != nil && len(problems) == 0 {
		t.Fatalf("timed out with %d of %d jobs completed", completed.Load(), total)
	}
	for _, p := range problems {
		t.Error(p)
	}
	if len(errCodes) > 0 {
		t.Fatalf("calls failed, by SQLSTATE: %v", errCodes)
	}

	// Every job claimed exactly once, and done with its result.
	if int64(len(claims)) != total {
		t.Errorf("%d jobs claimed, want %d", len(claims), total)
	}
	for id, n := range claims {
		if n != 1 {
			t.Errorf("job %d claimed %d times", id, n)
		}
	}
	if got := queryOne[string](t, b.Conn, `
		SELECT coalesce(string_agg(state::text || ':' || n, ' ' ORDER BY state), '')
		FROM (SELECT state, count(*) AS n FROM jobs GROUP BY state) AS s`); got != fmt.Sprintf("done:%d", total) {
		t.Errorf("jobs by state: %s, want done:%d", got, total)
	}
	if n := queryOne[int64](t, b.Conn,
		`SELECT count(*) FROM jobs WHERE result IS DISTINCT FROM to_jsonb('r' || id) OR attempts <> 1`); n != 0 {
		t.Errorf("%d jobs without their result or with more than one attempt", n)
	}
	// Never before the last parent: each parent's completion began before its child was
	// claimed (finished_at, the start of the parent's transaction, is before clock_timestamp()
	// as the claim returned). started_at is weaker evidence: it is now(), the start of the
	// claim's transaction, and a claim's function reads with a snapshot of its own statements
	// (READ COMMITTED), so it may take a child released by a transaction that began after its
	// own; jobs_complete_and_claim, whose transaction waits for children's rows, does so most.
	// Those are counted, not failed.
	early, startedBeforeParent := checkParentsFinishedFirst(t, b, claimedAt)
	if early > 0 {
		t.Errorf("%d children claimed before a parent's completion began", early)
	}
	if n := queryOne[int64](t, b.Conn, `
		SELECT (SELECT count(*) FROM jobs WHERE pending_parents <> 0)
		     + (SELECT count(*) FROM jobs_dependencies WHERE NOT resolved)`); n != 0 {
		t.Errorf("%d children with parents pending or dependencies unresolved", n)
	}
	if edges := queryOne[int64](t, b.Conn, "SELECT count(*) FROM jobs_dependencies"); edges != int64(fanIns*width+4*diamonds) {
		t.Errorf("%d dependencies, want %d", edges, fanIns*width+4*diamonds)
	}
	if p := pgtest.StorageProblems(t, b.Conn); len(p) > 0 {
		t.Errorf("storage problems: %v", p)
	}
	t.Logf("%d jobs (%d diamonds, %d fan-ins of %d) by %d sessions in %v: %d completions by jobs_complete, %d by jobs_complete_many, %d by jobs_complete_and_claim; %d claims; %d children claimed in a transaction that began before a parent's (now() semantics)",
		total, diamonds, fanIns, width, workers, elapsed.Round(time.Millisecond),
		calls[0].Load(), calls[1].Load(), calls[2].Load(), len(claims), startedBeforeParent)
}

// listResult is queryListCtx's answer: the values, or the error (for goroutines, which
// must not call t.Fatal).
type listResult[T any] struct {
	vals []T
	err  error
}

func queryListCtx[T any](ctx context.Context, q querier, sql string, args ...any) listResult[T] {
	rows, err := q.Query(ctx, sql, args...)
	if err != nil {
		return listResult[T]{err: err}
	}
	vals, err := pgx.CollectRows(rows, pgx.RowTo[T])
	return listResult[T]{vals: vals, err: err}
}

// TestFanInWithFailures: the same race with parents that fail for good. 500 diamonds
// a -> b, c -> d -> e, where every third b fails (max_attempts 1) and every odd d was enqueued
// with on_parent_failure 'run'; and four 16-parent fan-ins with no, one or two failing parents
// (the last with 'run'). A failure cancelling a child races the completion of the child's
// other parent; in the end every child is done if each parent was done or it runs anyway, and
// cancelled (naming a failed parent, its own children after it) otherwise, never claimed
// then; nothing is left waiting, no call fails.
func TestFanInWithFailures(t *testing.T) {
	t.Parallel()
	b := setup(t)
	diamonds, width, workers := 500, 16, 16
	if testing.Short() {
		diamonds = 100
	}
	failing := map[int64]bool{}
	as := queryOne[[]int64](t, b.Conn,
		"SELECT array_agg(jobs_enqueue('a', queue => 'ff') ORDER BY g) FROM generate_series(1, $1) AS g", diamonds)
	bs := queryOne[[]int64](t, b.Conn, `
		SELECT array_agg(jobs_enqueue('b', queue => 'ff', max_attempts => 1, depends_on => ARRAY[u.a]) ORDER BY u.o)
		FROM unnest($1::bigint[]) WITH ORDINALITY AS u(a, o)`, as)
	cs := queryOne[[]int64](t, b.Conn, `
		SELECT array_agg(jobs_enqueue('c', queue => 'ff', depends_on => ARRAY[u.a]) ORDER BY u.o)
		FROM unnest($1::bigint[]) WITH ORDINALITY AS u(a, o)`, as)
	ds := queryOne[[]int64](t, b.Conn, `
		SELECT array_agg(jobs_enqueue('d', queue => 'ff', depends_on => ARRAY[u.b, u.c],
		                              on_parent_failure => CASE WHEN u.o % 2 = 1 THEN 'run' ELSE 'cancel' END) ORDER BY u.o)
		FROM unnest($1::bigint[], $2::bigint[]) WITH ORDINALITY AS u(b, c, o)`, bs, cs)
	es := queryOne[[]int64](t, b.Conn, `
		SELECT array_agg(jobs_enqueue('e', queue => 'ff', depends_on => ARRAY[u.d]) ORDER BY u.o)
		FROM unnest($1::bigint[]) WITH ORDINALITY AS u(d, o)`, ds)
	// want: the end state of each child.
	want := map[int64]string{}
	for i := range diamonds {
		if (i+1)%3 == 0 {
			failing[bs[i]] = true
		}
		switch {
		case !failing[bs[i]], (i+1)%2 == 1:
			want[ds[i]], want[es[i]] = "done", "done"
		default:
			want[ds[i]], want[es[i]] = "cancelled", "cancelled"
		}
		want[bs[i]], want[cs[i]] = "done", "done"
		if failing[bs[i]] {
			want[bs[i]] = "dead"
		}
	}
	for f, fails := range [][]int{nil, {5}, {3, 11}, {0, 15}} {
		parents := queryOne[[]int64](t, b.Conn,
			"SELECT array_agg(jobs_enqueue('p', queue => 'ff', max_attempts => 1) ORDER BY g) FROM generate_series(1, $1) AS g", width)
		policy := "cancel"
		if f == 3 {
			policy = "run"
		}
		child := queryOne[int64](t, b.Conn, "SELECT jobs_enqueue('f', queue => 'ff', depends_on => $1, on_parent_failure => $2)", parents, policy)
		for _, p := range parents {
			want[p] = "done"
		}
		for _, i := range fails {
			failing[parents[i]] = true
			want[parents[i]] = "dead"
		}
		want[child] = "done"
		if len(fails) > 0 && policy == "cancel" {
			want[child] = "cancelled"
		}
	}
	total := int64(len(want) + diamonds) // the a jobs are not in want
	for _, a := range as {
		want[a] = "done"
	}

	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	var (
		wg        sync.WaitGroup
		mu        sync.Mutex
		claims    = map[int64]int{}
		claimedAt = map[int64]time.Time{}
		problems  []string
		finished  atomic.Int64
	)
	fail := func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		if ctx.Err() == nil {
			problems = append(problems, fmt.Sprintf(format, args...))
		}
		cancel()
	}
	start := make(chan struct{})
	for w := range workers {
		conn := b.Connect(t)
		worker := fmt.Sprintf("w%d", w)
		wg.Go(func() {
			<-start
			for ctx.Err() == nil {
				rows, err := conn.Query(ctx, "SELECT id, attempt, clock_timestamp() FROM jobs_claim($1, 3, ARRAY['ff'], '5 minutes')", worker)
				var got []fanInClaim
				if err == nil {
					got, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (fanInClaim, error) {
						var c fanInClaim
						return c, row.Scan(&c.ID, &c.Attempt, &c.ClaimedAt)
					})
				}
				if err != nil {
					fail("jobs_claim: %v", err)
					return
				}
				mu.Lock()
				for _, c := range got {
					claims[c.ID]++
					claimedAt[c.ID] = c.ClaimedAt
				}
				mu.Unlock()
				var ids []int64
				var attempts []int32
				for _, c := range got {
					if failing[c.ID] {
						var state string
						if err := conn.QueryRow(ctx, "SELECT jobs_fail($1, $2, 'boom')::text", c.ID, c.Attempt).Scan(&state); err != nil || state != "dead" {
							fail("jobs_fail(%d): %s %v", c.ID, state, err)
							return
						}
						finished.Add(1)
						continue
					}
					ids, attempts = append(ids, c.ID), append(attempts, c.Attempt)
				}
				if len(ids) > 0 {
					if w%2 == 0 {
						done := queryListCtx[int64](ctx, conn, "SELECT * FROM jobs_complete_many($1, $2)", ids, attempts)
						if done.err != nil || len(done.vals) != len(ids) {
							fail("jobs_complete_many(%v): %v %v", ids, done.vals, done.err)
							return
						}
					} else {
						for i, id := range ids {
							var ok bool
							if err := conn.QueryRow(ctx, "SELECT jobs_complete($1, $2)", id, attempts[i]).Scan(&ok); err != nil || !ok {
								fail("jobs_complete(%d): %v %v", id, ok, err)
								return
							}
						}
					}
					finished.Add(int64(len(ids)))
				}
				if len(got) == 0 {
					n := queryListCtx[int64](ctx, conn, "SELECT count(*) FROM jobs WHERE state IN ('waiting', 'queued', 'running')")
					if n.err != nil {
						fail("counting: %v", n.err)
						return
					}
					if n.vals[0] == 0 {
						return
					}
					time.Sleep(2 * time.Millisecond) // children not released yet: poll again
				}
			}
		})
	}
	began := time.Now()
	close(start)
	wg.Wait()
	elapsed := time.Since(began)
	for _, p := range problems {
		t.Error(p)
	}
	if ctx.Err() != nil && len(problems) == 0 {
		t.Fatal("timed out")
	}
	if t.Failed() {
		t.FailNow()
	}

	got := map[int64]string{}
	for _, r := range queryList[string](t, b.Conn, "SELECT id || ' ' || state FROM jobs") {
		var id int64
		var state string
		if _, err := fmt.Sscan(r, &id, &state); err != nil {
			t.Fatal(err)
		}
		got[id] = state
	}
	if int64(len(got)) != total {
		t.Fatalf("%d jobs, want %d", len(got), total)
	}
	bad := 0
	for id, w := range want {
		if got[id] != w {
			bad++
			if bad <= 10 {
				t.Errorf("job %d is %s, want %s", id, got[id], w)
			}
		}
		n := claims[id]
		if (w == "cancelled" && n != 0) || (w != "cancelled" && n != 1) {
			t.Errorf("job %d (%s) claimed %d times", id, w, n)
		}
	}
	// Each cancelled child names a parent that ended dead or cancelled, as its last_error says.
	if wrong := queryList[string](t, b.Conn, `
		SELECT format('job %s cancelled_by %s (%s): %s', c.id, c.cancelled_by, p.state, c.last_error)
		FROM jobs c
		LEFT JOIN jobs p ON p.id = c.cancelled_by
		WHERE c.state = 'cancelled'
		  AND (p.state NOT IN ('dead', 'cancelled') OR p.id IS NULL OR NOT p.id = ANY (c.depends_on)
		       OR c.last_error <> format('parent %s ended %s', p.id, p.state))
		LIMIT 10`); len(wrong) > 0 {
		t.Errorf("cancelled children not naming a failed parent: %v", wrong)
	}
	early, startedBeforeParent := checkParentsFinishedFirst(t, b, claimedAt)
	if early > 0 {
		t.Errorf("%d children claimed before a parent's completion began", early)
	}
	if p := pgtest.StorageProblems(t, b.Conn); len(p) > 0 {
		t.Errorf("storage problems: %v", p)
	}
	t.Logf("%d jobs (%d diamonds with a grandchild, 4 fan-ins of %d), %d failed, by %d sessions in %v; %d children claimed in a transaction that began before a parent's (now() semantics)",
		total, diamonds, width, len(failing), workers, elapsed.Round(time.Millisecond), startedBeforeParent)
}

// checkParentsFinishedFirst compares, for each claimed child, its parents' finished_at with
// claimedAt (clock_timestamp() as the claim returned it): early counts the parents that
// finished after the claim (reported by the caller, with up to 10 errors here), and
// startedBeforeParent the children whose started_at precedes a parent's finished_at.
func checkParentsFinishedFirst(t *testing.T, b *testBundle, claimedAt map[int64]time.Time) (early, startedBeforeParent int) {
	t.Helper()
	rows, err := b.Conn.Query(t.Context(), `
		SELECT c.id, c.started_at, p.id, p.state::text, p.finished_at
		FROM jobs c
		JOIN jobs p ON p.id = ANY (c.depends_on)
		ORDER BY c.id`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	lastCounted := int64(0)
	for rows.Next() {
		var child, parent int64
		var startedAt, finishedAt *time.Time
		var state string
		if err := rows.Scan(&child, &startedAt, &parent, &state, &finishedAt); err != nil {
			t.Fatal(err)
		}
		at, claimed := claimedAt[child]
		if !claimed {
			continue
		}
		if finishedAt == nil || finishedAt.After(at) || (state != "done" && state != "dead" && state != "cancelled") {
			if early++; early <= 10 {
				t.Errorf("child %d claimed at %v, parent %d %s at %v", child, at, parent, state, finishedAt)
			}
		}
		if startedAt != nil && finishedAt != nil && finishedAt.After(*startedAt) && lastCounted != child {
			startedBeforeParent++
			lastCounted = child
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return early, startedBeforeParent
}
