package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/skiplock/skiplock/admin"
	"github.com/skiplock/skiplock/tests/pgtest"
)

func TestStats(t *testing.T) {
	t.Parallel()

	t.Run("TableAndJSON", func(t *testing.T) {
		t.Parallel()
		db := setup(t)
		pgtest.MustExec(t, db.Conn, "SELECT jobs_enqueue_many(ARRAY['k', 'k'], queues => ARRAY['a', 'b'])")
		out := cli(t, db.URL, "stats").ok(t)
		if !strings.HasPrefix(out, "QUEUE  STATE   JOBS  OLDEST READY\na      queued  1") {
			t.Fatalf("stats:\n%s", out)
		}
		var rows []admin.StateCount
		cli(t, db.URL, "stats", "-o", "json").decode(t, &rows)
		if len(rows) != 2 || rows[0].Queue != "a" || rows[0].State != "queued" || rows[0].Jobs != 1 || rows[0].OldestReadyAgeS == nil {
			t.Fatalf("stats -o json = %+v", rows)
		}
	})

	t.Run("WatchCount", func(t *testing.T) {
		t.Parallel()
		db := setup(t)
		out := cli(t, db.URL, "stats", "--watch", "500ms", "--count", "2", "-o", "json").ok(t)
		lines := strings.Split(strings.TrimSpace(out), "\n")
		if len(lines) != 2 {
			t.Fatalf("stats --watch --count 2 printed %d lines:\n%s", len(lines), out)
		}
		for _, l := range lines {
			var refresh struct {
				At    time.Time          `json:"at"`
				Stats []admin.StateCount `json:"stats"`
			}
			if err := json.Unmarshal([]byte(l), &refresh); err != nil || refresh.At.IsZero() || refresh.Stats == nil {
				t.Fatalf("refresh %q: %+v, %v", l, refresh, err)
			}
		}
	})

	// SIGINT cancels main's context (signal.NotifyContext): watching ends with exit code 0
	// after the refreshes printed so far.
	t.Run("WatchStopsOnInterrupt", func(t *testing.T) {
		t.Parallel()
		db := setup(t)
		ctx, interrupt := context.WithTimeout(t.Context(), 1200*time.Millisecond)
		defer interrupt()
		r := cliWith(t, ctx, cliOpts{databaseURL: &db.URL}, "stats", "--watch", "500ms")
		if r.code != exitOK || strings.Count(r.stdout, "QUEUE  STATE  JOBS  OLDEST READY") < 2 {
			t.Fatalf("interrupted watch: exit code %d, stdout %q, stderr %q; want 0 after two refreshes or more",
				r.code, r.stdout, r.stderr)
		}
	})

	t.Run("BadInputIsUsage", func(t *testing.T) {
		t.Parallel()
		db := setup(t)
		cli(t, db.URL, "stats", "--watch", "10ms").fails(t, exitUsage, "--watch must be at least 500ms")
		cli(t, db.URL, "stats", "--count", "2").fails(t, exitUsage, "--count needs --watch")
		cli(t, db.URL, "stats", "--watch", "soon").fails(t, exitUsage, "invalid value")
	})
}

func TestMaintain(t *testing.T) {
	t.Parallel()
	db := setup(t)
	pgtest.MustExec(t, db.Conn, `INSERT INTO jobs (kind, state, attempts, created_at, finished_at)
		SELECT 'k', 'done', 1, now() - interval '2 days', now() - interval '2 days' FROM generate_series(1, 30)`)
	if out := cli(t, db.URL, "maintain", "--max-jobs", "10").ok(t); out != "requeued 0, deleted 10 done, 0 cancelled, 0 dead (more to delete: run again)\n" {
		t.Fatalf("maintain: %q", out)
	}
	var m admin.Maintenance
	cli(t, db.URL, "maintain", "--max-jobs", "10", "--until-done", "-o", "json").decode(t, &m)
	if !m.Ran || m.PrunedDone != 20 || m.More {
		t.Fatalf("maintain --until-done -o json = %+v, want the other 20 deleted", m)
	}
	cli(t, db.URL, "maintain", "--max-jobs", "0").fails(t, exitUsage, "jobs_maintain: max_jobs must be at least 1")
}
