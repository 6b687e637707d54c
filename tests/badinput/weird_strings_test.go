package badinput

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

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
