package sqltest

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/skiplock/skiplock/tests/pgtest"
)

// TestRateLimitExact: 8 concurrent claimers in tight loops against max_starts 5 per 500ms.
// Every job is claimed once (then completed), so the jobs' started_at are the starts; no
// window of 500ms may hold more than 5 of them, and the budget must have been used.
func TestRateLimitExact(t *testing.T) {
	t.Parallel()
	const (
		claimers  = 8
		maxStarts = 5
		per       = 500 * time.Millisecond
		d         = 2500 * time.Millisecond
	)
	b := setup(t)
	enqueueKeyed(t, b.Conn, "q", 2000, 0)
	mustExec(t, b.Conn, "SELECT jobs_set_rate_limit('q', $1, $2)", maxStarts, per)

	ctx, cancel := context.WithTimeout(t.Context(), d)
	defer cancel()
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
	)
	for i := range claimers {
		conn := b.Connect(t)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				jobs, err := tryClaim(ctx, conn, fmt.Sprintf("w%d", i), 1+rand.IntN(3), []string{"q"}, "1 minute")
				if err != nil {
					if ctx.Err() == nil {
						mu.Lock()
						errs = append(errs, err)
						mu.Unlock()
					}
					return
				}
				for _, j := range jobs {
					if _, err := conn.Exec(context.Background(), "SELECT jobs_complete($1, $2)", j.ID, j.Attempt); err != nil {
						mu.Lock()
						errs = append(errs, err)
						mu.Unlock()
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}

	// The most starts in any window [t, t + per) that begins at a start.
	worst := queryOne[int64](t, b.Conn, `
		SELECT coalesce(max(n), 0) FROM (
		    SELECT (SELECT count(*) FROM jobs j2
		            WHERE j2.started_at >= j.started_at AND j2.started_at < j.started_at + $1::interval) AS n
		    FROM jobs j WHERE j.started_at IS NOT NULL) s`, per)
	started := queryOne[int64](t, b.Conn, "SELECT count(*) FROM jobs WHERE started_at IS NOT NULL")
	t.Logf("max_starts %d per %s: %d starts in %s, most in one window %d", maxStarts, per, started, d, worst)
	if worst > maxStarts {
		t.Fatalf("%d starts within one window of %s, limit %d", worst, per, maxStarts)
	}
	// Each full window allows maxStarts; with claimers always waiting, most must be used.
	if min := int64(d/per) * maxStarts * 3 / 4; started < min {
		t.Fatalf("only %d starts in %s at %d per %s: the limit is held too tight", started, d, maxStarts, per)
	}
}

// TestRateLimitNextStart: a claim beyond the budget returns fewer jobs, never an error, and
// jobs_next_start says when the next start is allowed.
func TestRateLimitNextStart(t *testing.T) {
	t.Parallel()
	b := setup(t)
	enqueueKeyed(t, b.Conn, "q", 10, 0)
	enqueue(t, b.Conn, "queue => 'free'")
	if v := queryOne[*time.Time](t, b.Conn, "SELECT jobs_next_start('free')"); v != nil {
		t.Fatalf("jobs_next_start of a queue without a rate limit = %v, want NULL", v)
	}
	mustExec(t, b.Conn, "SELECT jobs_set_rate_limit('q', 3, '1 hour')")
	if !queryOne[bool](t, b.Conn, "SELECT jobs_next_start('q') <= now()") {
		t.Fatal("jobs_next_start of a rate-limited queue with budget left is not now")
	}

	first := claim(t, b.Conn, "w", 2, []string{"q"}, "1 minute")
	if len(first) != 2 {
		t.Fatalf("first claim got %d jobs, want 2", len(first))
	}
	// The next call asks for 10 and gets the 1 left; the queue without a limit is not held back.
	got := claim(t, b.Conn, "w", 10, []string{"q", "free"}, "1 minute")
	if len(got) != 2 {
		t.Fatalf("second claim got %d jobs, want the 1 left in the budget and the free queue's 1", len(got))
	}
	if got := claim(t, b.Conn, "w", 10, []string{"q"}, "1 minute"); len(got) != 0 {
		t.Fatalf("claim with the budget spent got %d jobs", len(got))
	}
	// The first start (of the first claim) leaves the window an hour after it.
	if !queryOne[bool](t, b.Conn, `
		SELECT jobs_next_start('q') = (SELECT min(started_at) FROM jobs WHERE queue = 'q') + interval '1 hour'`) {
		t.Fatal("jobs_next_start is not the first start plus the window")
	}
	// Starts are counted at claim time and kept in the log, even after their jobs finish.
	mustExec(t, b.Conn, "SELECT jobs_complete($1, $2)", first[0].ID, first[0].Attempt)
	if got := claim(t, b.Conn, "w", 10, []string{"q"}, "1 minute"); len(got) != 0 {
		t.Fatalf("claim with the budget spent got %d jobs after a completion", len(got))
	}
	// Raising the limit counts the starts already made.
	mustExec(t, b.Conn, "SELECT jobs_set_rate_limit('q', 4, '1 hour')")
	if got := claim(t, b.Conn, "w", 10, []string{"q"}, "1 minute"); len(got) != 1 {
		t.Fatalf("claim after raising the limit to 4 got %d jobs, want 1", len(got))
	}
	// Removing it removes its log and its row.
	mustExec(t, b.Conn, "SELECT jobs_set_rate_limit('q', NULL, NULL)")
	if n := queryOne[int64](t, b.Conn, "SELECT (SELECT count(*) FROM jobs_queues) + (SELECT count(*) FROM jobs_queue_starts)"); n != 0 {
		t.Fatalf("%d settings rows and logged starts left after removing the limit", n)
	}
	if got := claim(t, b.Conn, "w", 10, []string{"q"}, "1 minute"); len(got) != 6 {
		t.Fatalf("claim without limit got %d jobs, want the 6 left", len(got))
	}
}

// TestStartedAt: started_at is the now() of the claim that started the current or last
// attempt, on the fast path and the limited one.
func TestStartedAt(t *testing.T) {
	t.Parallel()
	b := setup(t)
	enqueue(t, b.Conn, "queue => 'free'")
	enqueue(t, b.Conn, "queue => 'limited'")
	mustExec(t, b.Conn, "SELECT jobs_set_concurrency('limited', 10)")
	if n := queryOne[int64](t, b.Conn, "SELECT count(*) FROM jobs WHERE started_at IS NOT NULL"); n != 0 {
		t.Fatalf("%d queued jobs have started_at", n)
	}
	for _, q := range []string{"free", "limited"} {
		tx, err := b.Conn.Begin(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		j := claimOne(t, tx, "w", q, "1 minute")
		if !queryOne[bool](t, tx, "SELECT started_at = now() FROM jobs WHERE id = $1", j.ID) {
			t.Fatalf("queue %s: started_at is not the claim's now()", q)
		}
		if err := tx.Commit(t.Context()); err != nil {
			t.Fatal(err)
		}
		mustExec(t, b.Conn, "SELECT jobs_complete($1, $2)", j.ID, j.Attempt)
		if !queryOne[bool](t, b.Conn, "SELECT started_at <= finished_at FROM jobs WHERE id = $1", j.ID) {
			t.Fatalf("queue %s: started_at not kept after completion", q)
		}
	}
	// A retried attempt's claim overwrites it.
	enqueue(t, b.Conn, "queue => 'retried', max_attempts => 3")
	j := claimOne(t, b.Conn, "w", "retried", "1 minute")
	before := queryOne[time.Time](t, b.Conn, "SELECT started_at FROM jobs WHERE id = $1", j.ID)
	mustExec(t, b.Conn, "SELECT jobs_fail($1, $2, 'boom', now())", j.ID, j.Attempt)
	claimOne(t, b.Conn, "w", "retried", "1 minute")
	if !queryOne[bool](t, b.Conn, "SELECT started_at > $1 FROM jobs WHERE id = $2", before, j.ID) {
		t.Fatal("started_at not moved by the retried attempt's claim")
	}
}

// TestSetRateLimitBadInput: bad arguments raise 22023 naming the parameter and change
// nothing.
func TestSetRateLimitBadInput(t *testing.T) {
	t.Parallel()
	b := setup(t)
	mustExec(t, b.Conn, "SELECT jobs_set_rate_limit('q', 7, '1 minute')")
	for _, c := range []struct{ args, param string }{
		{"NULL, 1, '1 second'", "queue"},
		{"'', 1, '1 second'", "queue"},
		{"'q', 0, '1 second'", "max_starts"},
		{"'q', -3, '1 second'", "max_starts"},
		{"'q', 1, NULL", "per"},
		{"'q', 1, '0 seconds'", "per"},
		{"'q', 1, '-1 second'", "per"},
		{"'q', 1, '101 years'", "per"},
		{"'q', 1, '1 second', NULL", "per_key"},
	} {
		_, err := b.Conn.Exec(t.Context(), "SELECT jobs_set_rate_limit("+c.args+")")
		if pgErr := pgtest.RequirePgError(t, err, "22023"); pgErr.ColumnName != c.param {
			t.Fatalf("jobs_set_rate_limit(%s): error names %q, want %q", c.args, pgErr.ColumnName, c.param)
		}
	}
	_, err := b.Conn.Exec(t.Context(), "SELECT jobs_next_start('')")
	pgtest.RequirePgError(t, err, "22023")
	if s := queryOne[string](t, b.Conn, "SELECT format('%s/%s/%s', max_starts, per, rate_per_key) FROM jobs_queues WHERE queue = 'q'"); s != "7/00:01:00/f" {
		t.Fatalf("settings after bad calls %s, want 7/00:01:00/f", s)
	}
}
