package ui_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// failFast runs workers (each a session of its own) until the test ends that claim the jobs
// of queue and fail each at once: a job retried with one attempt left is dead again a moment
// later. It returns how many jobs they failed so far.
func failFast(t *testing.T, b *testBundle, queue string, workers int) func() int64 {
	t.Helper()
	ctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var mu sync.Mutex
	var failed int64
	for range workers {
		conn := b.db.Connect(t)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				var n int64
				err := conn.QueryRow(ctx, `SELECT count(jobs_fail(c.id, c.attempt, 'instant failure'))
				FROM jobs_claim('fast-failer', 250, ARRAY[$1]) c`, queue).Scan(&n)
				if err != nil {
					if ctx.Err() == nil {
						t.Errorf("fast-failing worker: %v", err)
					}
					return
				}
				mu.Lock()
				failed += n
				mu.Unlock()
				if n == 0 {
					time.Sleep(time.Millisecond)
				}
			}
		}()
	}
	t.Cleanup(func() { stop(); wg.Wait() })
	return func() int64 {
		mu.Lock()
		defer mu.Unlock()
		return failed
	}
}

var retriedMessage = regexp.MustCompile(`retried (\d+) dead jobs`)

// TestRetryAllMatchingEndsWhileWorkersFail: "retry all matching" retries the jobs that were
// dead when it started, each at most once, and ends, while a worker fails every retried job
// back to dead at once (a loop "until a call returns 0" never ends then).
func TestRetryAllMatchingEndsWhileWorkersFail(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	const dead = 5000
	seedDead(t, b, dead, "flaky", "deliver", "boom")
	seedDead(t, b, 5, "other", "deliver", "boom")
	failed := failFast(t, b, "flaky", 4)

	form := url.Values{"scope": {"all"}, "confirm": {"yes"}, "queue": {"flaky"}, "back": {"/dead"},
		"csrf": {b.h.TokenFor("/dead/retry")}}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	req := newRequest(http.MethodPost, "/dead/retry", strings.NewReader(form.Encode())).WithContext(ctx)
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	start := time.Now()
	rec := httptest.NewRecorder()
	b.h.ServeHTTP(rec, req)
	loc, _ := url.QueryUnescape(rec.Header().Get("Location"))
	if rec.Code != http.StatusSeeOther || strings.Contains(loc, "err=") {
		t.Fatalf("retry all matching after %v (the worker failed %d jobs meanwhile): %d %s",
			time.Since(start).Round(time.Millisecond), failed(), rec.Code, loc)
	}
	m := retriedMessage.FindStringSubmatch(loc)
	if m == nil {
		t.Fatalf("retry all matching redirected to %s, want a count", loc)
	}
	if n, _ := strconv.Atoi(m[1]); n > dead || n < 1 {
		t.Errorf("retry all matching retried %d jobs, want 1 to %d: the jobs dead when it started, each at most once", n, dead)
	}
	if n := count(t, b, `SELECT count(*) FROM jobs WHERE queue = 'other' AND state = 'dead'`); n != 5 {
		t.Errorf("%d dead jobs of another queue, want 5 (untouched)", n)
	}
	if n := count(t, b, `SELECT count(*) FROM jobs WHERE queue = 'flaky' AND attempts > 2`); n != 0 {
		t.Errorf("%d jobs were retried more than once by one retry all matching", n)
	}
	t.Logf("retried %s of %d dead jobs in %v; the worker failed %d meanwhile", m[1], dead, time.Since(start).Round(time.Millisecond), failed())
}
