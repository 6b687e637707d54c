package badinput

import (
	"fmt"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
)

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
			if testing.Short() {
				t.Skip("-short: enqueues 100,000 jobs")
			}
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
		{"PruneMaxJobsOneDeletesOne", func(t *testing.T, conn *pgx.Conn) {
			mustCall(t, conn, "SELECT jobs_cancel(jobs_enqueue('k')), jobs_cancel(jobs_enqueue('k'))")
			if n := queryOne[int32](t, conn, "SELECT jobs_prune('0', true, 1)"); n != 1 {
				t.Errorf("jobs_prune('0', true, 1) = %d, want 1", n)
			}
			if n := queryOne[int64](t, conn, "SELECT count(*) FROM jobs"); n != 1 {
				t.Errorf("%d jobs left, want 1", n)
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
