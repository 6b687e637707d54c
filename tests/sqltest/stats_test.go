package sqltest

import (
	"fmt"
	"slices"
	"testing"
	"time"
)

func TestStats(t *testing.T) {
	t.Parallel()

	t.Run("CountsPerQueueAndStateWithOldestReadyAge", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		oldest := time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC)
		// Queue a: 3 queued and due (the oldest due at `oldest`), 1 queued in the future,
		// 2 running, 1 done. Queue b: 1 dead, 1 cancelled. Queue c: only a future job.
		enqueue(t, b.Conn, "queue => 'a', run_at => '2020-01-01 00:00:00Z'")
		enqueue(t, b.Conn, "queue => 'a', run_at => '2021-01-01 00:00:00Z'")
		enqueue(t, b.Conn, "queue => 'a', run_at => '2022-01-01 00:00:00Z'")
		enqueue(t, b.Conn, "queue => 'a', run_at => now() + interval '1 hour'")
		for range 3 {
			enqueue(t, b.Conn, "queue => 'a', run_at => '2019-01-01 00:00:00Z'")
		}
		j := claim(t, b.Conn, "w", 3, []string{"a"}, "1 hour")
		mustExec(t, b.Conn, "SELECT jobs_complete($1, $2)", j[0].ID, j[0].Attempt)
		dead := enqueue(t, b.Conn, "queue => 'b', max_attempts => 1")
		jd := claimOne(t, b.Conn, "w", "b", "1 hour")
		mustExec(t, b.Conn, "SELECT jobs_fail($1, $2, 'boom')", dead, jd.Attempt)
		cancelled := enqueue(t, b.Conn, "queue => 'b'")
		mustExec(t, b.Conn, "SELECT jobs_cancel($1)", cancelled)
		enqueue(t, b.Conn, "queue => 'c', run_at => now() + interval '1 hour'")

		rows, err := b.Conn.Query(t.Context(), "SELECT s.queue, s.state::text, s.jobs, s.oldest_ready_age, now() FROM jobs_stats() s")
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for rows.Next() {
			var (
				queue, state string
				n            int64
				age          *time.Duration
				now          time.Time
			)
			if err := rows.Scan(&queue, &state, &n, &age, &now); err != nil {
				t.Fatal(err)
			}
			ageText := "-"
			if age != nil {
				ageText = "age ok"
				if want := now.Sub(oldest); *age != want {
					ageText = fmt.Sprintf("age %s, want %s", *age, want)
				}
			}
			got = append(got, fmt.Sprintf("%s %s %d %s", queue, state, n, ageText))
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		want := []string{
			"a queued 4 age ok",
			"a running 2 -",
			"a done 1 -",
			"b dead 1 -",
			"b cancelled 1 -",
			"c queued 1 -",
		}
		if !slices.Equal(got, want) {
			t.Fatalf("jobs_stats()\n got %q\nwant %q", got, want)
		}
	})

	t.Run("EmptyTableHasNoRows", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		if n := queryOne[int64](t, b.Conn, "SELECT count(*) FROM jobs_stats()"); n != 0 {
			t.Fatalf("jobs_stats() on an empty table returned %d rows", n)
		}
	})
}
