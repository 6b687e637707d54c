package sqltest

import (
	"fmt"
	"math"
	"testing"
	"time"
)

func TestBackoff(t *testing.T) {
	t.Parallel()

	// checkBackoff samples jobs_backoff(n) for n = 1..20 and checks every value lies in
	// [0.75, 1.25] * min(cap, base * 2^(n-1)) and, when jitter is on, that the values of one n
	// are spread over that range.
	checkBackoff := func(t *testing.T, b *testBundle, base, limit float64, jittered bool) {
		t.Helper()
		const samples = 200
		rows, err := b.Conn.Query(t.Context(),
			`SELECT n, extract(epoch FROM jobs_backoff(n))::float8
			 FROM generate_series(1, 20) n, generate_series(1, $1::int) s`, samples)
		if err != nil {
			t.Fatal(err)
		}
		values := map[int32][]float64{}
		for rows.Next() {
			var n int32
			var secs float64
			if err := rows.Scan(&n, &secs); err != nil {
				t.Fatal(err)
			}
			values[n] = append(values[n], secs)
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		for n := int32(1); n <= 20; n++ {
			center := math.Min(limit, base*math.Pow(2, float64(n-1)))
			lo, hi := 0.75*center-1e-6, 1.25*center+1e-6
			minV, maxV := math.Inf(1), math.Inf(-1)
			for _, v := range values[n] {
				if v < lo || v > hi {
					t.Fatalf("jobs_backoff(%d) = %gs, outside [%g, %g]", n, v, lo, hi)
				}
				minV, maxV = math.Min(minV, v), math.Max(maxV, v)
			}
			if len(values[n]) != samples {
				t.Fatalf("got %d samples for n=%d", len(values[n]), n)
			}
			if !jittered {
				if minV != maxV || math.Abs(minV-center) > 1e-6 {
					t.Fatalf("jobs_backoff(%d) without jitter ranged %g..%g, want exactly %g", n, minV, maxV, center)
				}
				continue
			}
			// 200 uniform samples all landing in one half of the range has odds of 2^-199.
			if minV >= center || maxV <= center || maxV-minV < 0.25*center {
				t.Fatalf("jobs_backoff(%d) ranged only %g..%g around %g: jitter missing", n, minV, maxV, center)
			}
		}
	}

	t.Run("DefaultsGrowExponentiallyWithJitterUpToCap", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		checkBackoff(t, b, 1, 3600, true)
	})

	t.Run("SettingsChangeTakesEffect", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		mustExec(t, b.Conn, "UPDATE jobs_settings SET backoff_base = '10 seconds', backoff_cap = '2 minutes'")
		checkBackoff(t, b, 10, 120, true)
		mustExec(t, b.Conn, "UPDATE jobs_settings SET backoff_base = '2 seconds', backoff_cap = '1 day', backoff_jitter = 0")
		checkBackoff(t, b, 2, 86400, false)
	})

	t.Run("HugeAttemptStaysAtCap", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		mustExec(t, b.Conn, "UPDATE jobs_settings SET backoff_jitter = 0")
		for _, n := range []int32{31, 64, 1000, math.MaxInt32} {
			if got := queryOne[float64](t, b.Conn, "SELECT extract(epoch FROM jobs_backoff($1))::float8", n); got != 3600 {
				t.Fatalf("jobs_backoff(%d) = %gs, want the cap 3600s", n, got)
			}
		}
	})

	t.Run("FailSchedulesRetryAfterBackoff", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		mustExec(t, b.Conn, "UPDATE jobs_settings SET backoff_base = '10 seconds', backoff_jitter = 0")
		id := enqueue(t, b.Conn, "max_attempts => 10")
		for attempt := int32(1); attempt <= 3; attempt++ {
			j := claimOne(t, b.Conn, "w", "", "1 minute")
			if j.Attempt != attempt {
				t.Fatalf("claim got attempt %d, want %d", j.Attempt, attempt)
			}
			tx, err := b.Conn.Begin(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			state := queryOne[string](t, tx, "SELECT jobs_fail($1, $2, 'boom')::text", id, j.Attempt)
			delay := queryOne[time.Duration](t, tx, "SELECT run_at - now() FROM jobs WHERE id = $1", id)
			if err := tx.Commit(t.Context()); err != nil {
				t.Fatal(err)
			}
			want := 10 * time.Second << (attempt - 1)
			if state != "queued" || delay != want {
				t.Fatalf("attempt %d: jobs_fail = %s with run_at = now() + %s, want queued at now() + %s", attempt, state, delay, want)
			}
			// Bring the retry forward so the next claim can take it.
			mustExec(t, b.Conn, "UPDATE jobs SET run_at = now() WHERE id = $1", id)
		}
	})

	t.Run("FailWithDefaultJitterStaysInRange", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		for i := range 20 {
			id := enqueue(t, b.Conn, fmt.Sprintf("queue => 'q%d'", i))
			j := claimOne(t, b.Conn, "w", fmt.Sprintf("q%d", i), "1 minute")
			tx, err := b.Conn.Begin(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			mustExec(t, tx, "SELECT jobs_fail($1, $2, 'boom')", id, j.Attempt)
			delay := queryOne[time.Duration](t, tx, "SELECT run_at - now() FROM jobs WHERE id = $1", id)
			if err := tx.Commit(t.Context()); err != nil {
				t.Fatal(err)
			}
			if delay < 750*time.Millisecond || delay > 1250*time.Millisecond {
				t.Fatalf("retry after first failure scheduled at now() + %s, want 0.75s..1.25s", delay)
			}
		}
	})

	t.Run("RetryAtOverridesBackoff", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		id := enqueue(t, b.Conn, "")
		j := claimOne(t, b.Conn, "w", "", "1 minute")
		at := time.Date(2999, 6, 1, 12, 0, 0, 0, time.UTC)
		if s := queryOne[string](t, b.Conn, "SELECT jobs_fail($1, $2, 'later', retry_at => $3)::text", id, j.Attempt, at); s != "queued" {
			t.Fatalf("jobs_fail = %s, want queued", s)
		}
		if r := getJob(t, b.Conn, id); !r.RunAt.Equal(at) || r.LeaseExpiresAt != nil {
			t.Fatalf("job after jobs_fail with retry_at: %+v, want run_at %s", r, at)
		}
		if jobs := claim(t, b.Conn, "w", 1, nil, "1 minute"); len(jobs) != 0 {
			t.Fatalf("claimed a job whose retry is in the future: %v", jobs)
		}
	})

	t.Run("DeadAfterMaxAttemptsWithFullHistory", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		const maxAttempts = 4
		id := enqueue(t, b.Conn, fmt.Sprintf("max_attempts => %d", maxAttempts))
		for attempt := int32(1); attempt <= maxAttempts; attempt++ {
			j := claimOne(t, b.Conn, fmt.Sprintf("worker-%d", attempt), "", "1 minute")
			state := queryOne[string](t, b.Conn, "SELECT jobs_fail($1, $2, $3, retry_at => now())::text",
				id, j.Attempt, fmt.Sprintf("boom %d", attempt))
			want := "queued"
			if attempt == maxAttempts {
				want = "dead"
			}
			if state != want {
				t.Fatalf("jobs_fail at attempt %d = %s, want %s", attempt, state, want)
			}
		}
		r := getJob(t, b.Conn, id)
		if r.State != "dead" || r.FinishedAt == nil || r.LeaseExpiresAt != nil || r.Attempts != maxAttempts ||
			r.LastError == nil || *r.LastError != fmt.Sprintf("boom %d", maxAttempts) {
			t.Fatalf("dead job: %+v", r)
		}
		if len(r.Errors) != maxAttempts {
			t.Fatalf("errors history has %d entries, want %d: %+v", len(r.Errors), maxAttempts, r.Errors)
		}
		for i, e := range r.Errors {
			n := int32(i + 1)
			if e.Attempt != n || e.Error != fmt.Sprintf("boom %d", n) || e.Worker == nil ||
				*e.Worker != fmt.Sprintf("worker-%d", n) || e.At.IsZero() {
				t.Fatalf("errors[%d] = %+v, want attempt %d by worker-%d", i, e, n, n)
			}
		}
		if jobs := claim(t, b.Conn, "w", 10, nil, "1 minute"); len(jobs) != 0 {
			t.Fatalf("claimed a dead job: %v", jobs)
		}
	})
}
