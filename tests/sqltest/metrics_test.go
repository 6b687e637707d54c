package sqltest

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/skiplock/skiplock/tests/pgtest"
)

// queueMetrics is one row of jobs_metrics; Queue is nil on the totals row.
type queueMetrics struct {
	Queue                                                      *string
	Ready, Scheduled, Running, RunningExpired, Dead, Cancelled int64
	DoneEstimate                                               *int64
	OldestReadyAgeS                                            *float64
	JobsCreatedTotal                                           *int64
}

func metrics(t *testing.T, q querier) []queueMetrics {
	t.Helper()
	rows, err := q.Query(t.Context(), `SELECT queue, ready, scheduled, running, running_expired, dead, cancelled,
		done_estimate, oldest_ready_age_s, jobs_created_total FROM jobs_metrics()`)
	if err != nil {
		t.Fatalf("jobs_metrics: %v", err)
	}
	list, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (queueMetrics, error) {
		var m queueMetrics
		err := row.Scan(&m.Queue, &m.Ready, &m.Scheduled, &m.Running, &m.RunningExpired, &m.Dead, &m.Cancelled,
			&m.DoneEstimate, &m.OldestReadyAgeS, &m.JobsCreatedTotal)
		return m, err
	})
	if err != nil {
		t.Fatalf("jobs_metrics: %v", err)
	}
	return list
}

func TestMetrics(t *testing.T) {
	t.Parallel()

	t.Run("CountsEachQueue", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		enqueue(t, b.Conn, "queue => 'a', run_at => now() - interval '1 minute'")
		enqueue(t, b.Conn, "queue => 'a'")
		enqueue(t, b.Conn, "queue => 'a', run_at => now() + interval '1 hour'")
		enqueue(t, b.Conn, "queue => 'b'")
		enqueue(t, b.Conn, "queue => 'b'")
		claimOne(t, b.Conn, "w", "b", "1 hour")
		claimOne(t, b.Conn, "w", "b", "1 millisecond")
		pgtest.WaitFor(t, 10*time.Second, "a lease to expire", func() bool {
			return queryOne[bool](t, b.Conn, "SELECT EXISTS (SELECT FROM jobs WHERE lease_expires_at < clock_timestamp())")
		})
		enqueue(t, b.Conn, "queue => 'c', max_attempts => 1")
		j := claimOne(t, b.Conn, "w", "c", "1 hour")
		mustExec(t, b.Conn, "SELECT jobs_fail($1, $2, 'boom')", j.ID, j.Attempt)
		c := enqueue(t, b.Conn, "queue => 'c'")
		mustExec(t, b.Conn, "SELECT jobs_cancel($1)", c)

		got := metrics(t, b.Conn)
		if len(got) != 4 {
			t.Fatalf("jobs_metrics returned %d rows, want 3 queues and the totals: %+v", len(got), got)
		}
		type counts struct{ ready, scheduled, running, expired, dead, cancelled int64 }
		for i, want := range []struct {
			queue string
			counts
		}{
			{"a", counts{2, 1, 0, 0, 0, 0}},
			{"b", counts{0, 0, 2, 1, 0, 0}},
			{"c", counts{0, 0, 0, 0, 1, 1}},
			{"", counts{2, 1, 2, 1, 1, 1}},
		} {
			m := got[i]
			queue := ""
			if m.Queue != nil {
				queue = *m.Queue
			}
			have := counts{m.Ready, m.Scheduled, m.Running, m.RunningExpired, m.Dead, m.Cancelled}
			if queue != want.queue || have != want.counts {
				t.Errorf("row %d: queue %q %+v, want queue %q %+v", i, queue, have, want.queue, want.counts)
			}
		}
		if age := got[0].OldestReadyAgeS; age == nil || *age < 59 || *age > 600 {
			t.Errorf("queue a's oldest_ready_age_s = %v, want about 60", age)
		}
		if got[1].OldestReadyAgeS != nil {
			t.Errorf("queue b has no ready job but oldest_ready_age_s = %v", *got[1].OldestReadyAgeS)
		}
		if total := got[3].JobsCreatedTotal; total == nil || *total != 7 {
			t.Errorf("jobs_created_total = %v, want 7", total)
		}
		if got[0].JobsCreatedTotal != nil {
			t.Error("jobs_created_total is set on a queue's row, want it on the totals row only")
		}
	})

	t.Run("EmptyTableHasTheTotalsRow", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		got := metrics(t, b.Conn)
		if len(got) != 1 || got[0].Queue != nil || got[0].JobsCreatedTotal == nil || *got[0].JobsCreatedTotal != 0 {
			t.Fatalf("jobs_metrics on an empty table = %+v, want one totals row with 0 created", got)
		}
	})

	t.Run("ShowsFlowControlSettings", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		// A paused queue with no jobs is listed; a limited queue shows its limits; a queue
		// without settings shows false and NULLs, and so does the totals row.
		mustExec(t, b.Conn, "SELECT jobs_pause('idle')")
		mustExec(t, b.Conn, "SELECT jobs_set_concurrency('limited', 3, 1)")
		mustExec(t, b.Conn, "SELECT jobs_set_rate_limit('limited', 10, '1 minute')")
		enqueue(t, b.Conn, "queue => 'limited'")
		enqueue(t, b.Conn, "queue => 'plain'")
		type settings struct {
			Queue                         *string
			Ready                         int64
			Paused                        *bool
			MaxRunning, PerKey, MaxStarts *int32
			Per                           *time.Duration
		}
		rows, err := b.Conn.Query(t.Context(), "SELECT queue, ready, paused, max_running, per_key, max_starts, per FROM jobs_metrics()")
		if err != nil {
			t.Fatal(err)
		}
		got, err := pgx.CollectRows(rows, pgx.RowToStructByPos[settings])
		if err != nil {
			t.Fatal(err)
		}
		str := func(s settings) string {
			deref := func(p *int32) any {
				if p == nil {
					return nil
				}
				return *p
			}
			q, paused, per := "<totals>", any(nil), any(nil)
			if s.Queue != nil {
				q = *s.Queue
			}
			if s.Paused != nil {
				paused = *s.Paused
			}
			if s.Per != nil {
				per = *s.Per
			}
			return fmt.Sprintf("%s ready=%d paused=%v max_running=%v per_key=%v max_starts=%v per=%v",
				q, s.Ready, paused, deref(s.MaxRunning), deref(s.PerKey), deref(s.MaxStarts), per)
		}
		var have []string
		for _, s := range got {
			have = append(have, str(s))
		}
		want := []string{
			"idle ready=0 paused=true max_running=<nil> per_key=<nil> max_starts=<nil> per=<nil>",
			"limited ready=1 paused=false max_running=3 per_key=1 max_starts=10 per=1m0s",
			"plain ready=1 paused=false max_running=<nil> per_key=<nil> max_starts=<nil> per=<nil>",
			"<totals> ready=2 paused=<nil> max_running=<nil> per_key=<nil> max_starts=<nil> per=<nil>",
		}
		if strings.Join(have, "\n") != strings.Join(want, "\n") {
			t.Errorf("jobs_metrics settings:\n%s\nwant:\n%s", strings.Join(have, "\n"), strings.Join(want, "\n"))
		}
	})

	// Before the first ANALYZE there is nothing to estimate from: done_estimate is NULL on
	// the queue's row and on the totals row, not 0 (greatest() had turned NULL into 0).
	t.Run("DoneEstimateIsNullBeforeTheFirstAnalyze", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		if n := queryOne[float64](t, b.Conn, "SELECT reltuples::float8 FROM pg_class WHERE oid = 'jobs'::regclass"); n >= 0 {
			t.Skipf("the jobs table of a new database has statistics already (reltuples %v)", n)
		}
		enqueue(t, b.Conn, "queue => 'a'")
		j := claimOne(t, b.Conn, "w", "a", "1 hour")
		mustExec(t, b.Conn, "SELECT jobs_complete($1, $2)", j.ID, j.Attempt)
		enqueue(t, b.Conn, "queue => 'a'")
		got := metrics(t, b.Conn)
		if len(got) != 2 {
			t.Fatalf("jobs_metrics = %+v, want queue a and the totals", got)
		}
		for i, m := range got {
			if m.DoneEstimate != nil {
				t.Errorf("row %d: done_estimate = %d before any ANALYZE, want NULL", i, *m.DoneEstimate)
			}
		}
		mustExec(t, b.Conn, "ANALYZE jobs")
		for i, m := range metrics(t, b.Conn) {
			if m.DoneEstimate == nil || *m.DoneEstimate != 1 {
				t.Errorf("row %d after ANALYZE: done_estimate = %v, want 1", i, m.DoneEstimate)
			}
		}
	})

	// jobs_created_total is the number of ids handed out: an enqueue deduplicated by its
	// unique_key and one rolled back create no job but count.
	t.Run("JobsCreatedTotalCountsIdsHandedOut", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		first := enqueue(t, b.Conn, "unique_key => 'u'")
		for range 3 {
			if id := enqueue(t, b.Conn, "unique_key => 'u'"); id != first {
				t.Fatalf("deduplicated enqueue returned %d, want %d", id, first)
			}
		}
		mustExec(t, b.Conn, "SELECT jobs_enqueue_many(ARRAY['k', 'k'], unique_keys => ARRAY['u', 'v'])")
		tx, err := b.Conn.Begin(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		enqueue(t, tx, "")
		if err := tx.Rollback(t.Context()); err != nil {
			t.Fatal(err)
		}
		if n := queryOne[int64](t, b.Conn, "SELECT count(*) FROM jobs"); n != 2 {
			t.Fatalf("%d jobs, want 2 (keys u and v)", n)
		}
		got := metrics(t, b.Conn)
		// 1 + 3 deduplicated + 2 drawn by the batch + 1 rolled back.
		if total := got[len(got)-1].JobsCreatedTotal; total == nil || *total != 7 {
			t.Errorf("jobs_created_total = %v, want 7 ids handed out for 2 jobs", total)
		}
	})

	t.Run("DoneIsEstimatedFromStatistics", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		insertFinished(t, b.Conn, 3000, "done", "a", "1 hour")
		insertFinished(t, b.Conn, 1000, "done", "b", "1 hour")
		mustExec(t, b.Conn, "ANALYZE jobs")
		got := metrics(t, b.Conn)
		if len(got) != 3 {
			t.Fatalf("jobs_metrics = %+v, want queues a, b and the totals", got)
		}
		for i, want := range []int64{3000, 1000, 4000} {
			if e := got[i].DoneEstimate; e == nil || *e < want*9/10 || *e > want*11/10 {
				t.Errorf("row %d: done_estimate %v, want about %d", i, e, want)
			}
		}
	})
}

// TestMetricsReadsNoFinishedRows: with 1,000,000 done jobs and 10,000 queued, no statement
// of jobs_metrics scans the jobs table (it reads the tables that list the queued, running,
// dead and cancelled jobs, and jobs only by id for the running ones), and a call takes under
// 20 ms. The plans are read with
// auto_explain; the time bound asserted is generous (the machine is shared), the figure is
// logged. -short uses 100,000 done jobs.
func TestMetricsReadsNoFinishedRows(t *testing.T) {
	t.Parallel()
	b := setup(t)
	done := 1_000_000
	if testing.Short() {
		done = 100_000
	}
	insertFinished(t, b.Conn, done, "done", "default", "1 hour")
	mustExec(t, b.Conn, "SELECT jobs_enqueue_many(array_fill('k'::text, ARRAY[10000]))")
	mustExec(t, b.Conn, "VACUUM ANALYZE jobs")

	conn, planLog := connectWithPlanLog(t, b.URL)

	// Timing first, without auto_explain: the best of 10 calls.
	best := time.Hour
	for range 10 {
		start := time.Now()
		got := metrics(t, conn)
		if d := time.Since(start); d < best {
			best = d
		}
		if len(got) != 2 || got[0].Ready != 10000 {
			t.Fatalf("jobs_metrics = %+v, want queue default with 10000 ready, and the totals", got)
		}
	}
	t.Logf("jobs_metrics with %d done and 10000 queued jobs: best of 10 calls %v", done, best)
	if best > 200*time.Millisecond {
		t.Errorf("jobs_metrics took %v, want well under 20 ms (asserting 200 ms on a shared machine)", best)
	}

	startAutoExplain(t, conn)
	metrics(t, conn)
	plans := planLog.take()
	var checked int
	for _, p := range plans {
		if !strings.Contains(p, "FROM jobs_queued q") {
			continue
		}
		checked++
		// jobs itself only by the primary key, for the running jobs the claims list.
		if strings.Contains(p, "Seq Scan on jobs ") {
			t.Errorf("jobs_metrics scans the jobs table:\n%s", p)
		}
		for _, table := range []string{"on jobs_queued", "on jobs_claims", "on jobs_dead_cancelled"} {
			if !strings.Contains(p, table) {
				t.Errorf("jobs_metrics does not read %s:\n%s", strings.TrimPrefix(table, "on "), p)
			}
		}
	}
	if checked != 1 {
		t.Fatalf("auto_explain logged %d plans of the metrics query, want 1: %q", checked, plans)
	}
}
