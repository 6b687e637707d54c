package ui_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/skiplock/skiplock/tests/pgtest"
	"github.com/skiplock/skiplock/ui"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// testBundle is a dashboard on a database of the test's own.
type testBundle struct {
	db   *pgtest.TestDB
	pool *pgxpool.Pool
	h    *ui.Handler
}

func setup(t *testing.T, opts *ui.Options) *testBundle {
	t.Helper()
	db := pgtest.NewTestDB(t)
	pool := pgtest.NewPool(t, db.URL)
	h, err := ui.New(pool, opts)
	if err != nil {
		t.Fatal(err)
	}
	return &testBundle{db: db, pool: pool, h: h}
}

// newRequest is a request as a browser on the machine sends it (httptest's default Host,
// example.com, is not one the dashboard answers for).
func newRequest(method, path string, body io.Reader) *http.Request {
	req := httptest.NewRequest(method, path, body)
	req.Host = "localhost:8080"
	return req
}

// get requests path and returns the status and body.
func (b *testBundle) get(t *testing.T, path string) (int, string) {
	t.Helper()
	rec := httptest.NewRecorder()
	b.h.ServeHTTP(rec, newRequest(http.MethodGet, path, nil))
	body, _ := io.ReadAll(rec.Result().Body)
	return rec.Code, string(body)
}

// mustGet requests path and fails the test unless the answer is 200.
func (b *testBundle) mustGet(t *testing.T, path string) string {
	t.Helper()
	code, body := b.get(t, path)
	if code != http.StatusOK {
		t.Fatalf("GET %s: %d\n%s", path, code, body)
	}
	return body
}

// post submits form to path as a same-origin browser would; withToken adds the form's token.
func (b *testBundle) post(t *testing.T, path string, form url.Values, withToken bool) *httptest.ResponseRecorder {
	t.Helper()
	if withToken {
		form.Set("csrf", b.h.TokenFor(path))
	}
	req := newRequest(http.MethodPost, path, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	rec := httptest.NewRecorder()
	b.h.ServeHTTP(rec, req)
	return rec
}

// mustPost posts with a token and fails the test unless the action redirects without an error.
func (b *testBundle) mustPost(t *testing.T, path string, form url.Values) string {
	t.Helper()
	rec := b.post(t, path, form, true)
	if rec.Code != http.StatusSeeOther {
		t.Fatalf("POST %s: %d, want 303\n%s", path, rec.Code, rec.Body.String())
	}
	loc := rec.Header().Get("Location")
	if strings.Contains(loc, "err=") {
		u, _ := url.Parse(loc)
		t.Fatalf("POST %s redirected with an error: %s", path, u.Query().Get("err"))
	}
	return loc
}

func exec(t *testing.T, b *testBundle, sql string, args ...any) {
	t.Helper()
	pgtest.MustExec(t, b.db.Conn, sql, args...)
}

// seedDead makes n dead jobs of kind in queue: enqueued with one attempt, claimed, failed.
func seedDead(t *testing.T, b *testBundle, n int, queue, kind, errText string) {
	t.Helper()
	exec(t, b, `SELECT jobs_enqueue_many(array_fill($1::text, ARRAY[$3::int]), queues => array_fill($2::text, ARRAY[$3::int]),
		max_attempts => array_fill(1, ARRAY[$3::int]))`, kind, queue, n)
	exec(t, b, `SELECT jobs_fail(c.id, c.attempt, $2) FROM jobs_claim('worker-1', $3, ARRAY[$1]) c`, queue, errText, n)
}

func count(t *testing.T, b *testBundle, sql string, args ...any) int64 {
	t.Helper()
	return pgtest.QueryOne[int64](t, b.db.Conn, sql, args...)
}

func contains(t *testing.T, what, body string, want ...string) {
	t.Helper()
	for _, w := range want {
		if !strings.Contains(body, w) {
			t.Errorf("%s does not contain %q", what, w)
		}
	}
}

func TestPagesLoad(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	exec(t, b, `SELECT jobs_enqueue('send-mail', '{"to": "ann@example.com"}', 'mail')`)
	seedDead(t, b, 3, "hooks", "deliver", "HTTP 503 from partner")
	exec(t, b, `SELECT jobs_pause('reports')`)
	exec(t, b, `SELECT jobs_schedule('nightly', '0 3 * * *', 'report', queue => 'reports')`)
	deadID := count(t, b, `SELECT max(id) FROM jobs WHERE state = 'dead'`)

	contains(t, "overview", b.mustGet(t, "/"), "mail", "hooks", "reports", "paused", "<svg", "Pause", "Resume")
	contains(t, "jobs", b.mustGet(t, "/jobs"), "send-mail", "deliver")
	contains(t, "jobs?state=queued", b.mustGet(t, "/jobs?state=queued&queue=mail"), "send-mail")
	contains(t, "dead", b.mustGet(t, "/dead"), "deliver", "HTTP 503 from partner", "Retry all matching")
	contains(t, "job", b.mustGet(t, fmt.Sprintf("/jobs/%d", deadID)), "deliver", "worker-1", "HTTP 503 from partner", "attempt 1 failed")
	contains(t, "queue", b.mustGet(t, "/queues/hooks"), "Concurrency limits", "Rate limit")
	contains(t, "schedules", b.mustGet(t, "/schedules"), "nightly", "0 3 * * *", "Run now", "Disable")
	b.mustGet(t, "/throughput.svg")

	if code, _ := b.get(t, "/jobs/999999"); code != http.StatusNotFound {
		t.Errorf("GET /jobs/999999: %d, want 404", code)
	}
	if code, _ := b.get(t, "/jobs?state=lost"); code != http.StatusBadRequest {
		t.Errorf("GET /jobs?state=lost: %d, want 400", code)
	}
}

func TestPaging(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	exec(t, b, `SELECT jobs_enqueue_many(array_fill('k'::text, ARRAY[120]))`)
	seen := map[string]bool{}
	path := "/jobs?state=queued"
	pages := 0
	for path != "" {
		body := b.mustGet(t, path)
		pages++
		for _, line := range strings.Split(body, "\n") {
			if i := strings.Index(line, `href="/jobs/`); i >= 0 {
				id := line[i+len(`href="/jobs/`):]
				id = id[:strings.IndexByte(id, '"')]
				if seen[id] {
					t.Fatalf("job %s on two pages", id)
				}
				seen[id] = true
			}
		}
		path = ""
		if i := strings.Index(body, `id="next" href="?`); i >= 0 {
			q := body[i+len(`id="next" href="?`):]
			path = "/jobs?" + strings.ReplaceAll(q[:strings.IndexByte(q, '"')], "&amp;", "&")
		}
	}
	if pages != 3 || len(seen) != 120 {
		t.Fatalf("%d pages with %d jobs, want 3 pages with 120", pages, len(seen))
	}
}

func TestEscaping(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	evil := `<script>alert("x")</script>`
	exec(t, b, `SELECT jobs_enqueue($1, jsonb_build_object('html', $1::text), $1)`, evil)
	seedDead(t, b, 1, "q", "k", evil)
	exec(t, b, `SELECT jobs_subscribe($1, $1, $1)`, evil)
	id := count(t, b, `SELECT min(id) FROM jobs`)
	for _, path := range []string{"/", "/jobs", "/dead", fmt.Sprintf("/jobs/%d", id), fmt.Sprintf("/jobs/%d", id+1), "/queues/" + url.PathEscape(evil)} {
		body := b.mustGet(t, path)
		if strings.Contains(body, evil) || strings.Contains(body, "<script>alert") {
			t.Errorf("GET %s: the HTML of a payload, queue, kind, topic or error is not escaped", path)
		}
	}
}

func TestCSRF(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	form := func() url.Values { return url.Values{"queue": {"mail"}} }

	if rec := b.post(t, "/queues/pause", form(), false); rec.Code != http.StatusForbidden {
		t.Errorf("POST without a token: %d, want 403", rec.Code)
	}
	f := form()
	f.Set("csrf", b.h.TokenFor("/queues/resume"))
	if rec := b.post(t, "/queues/pause", f, false); rec.Code != http.StatusForbidden {
		t.Errorf("POST with another form's token: %d, want 403", rec.Code)
	}
	f = form()
	f.Set("csrf", "9999999999.AAAA")
	if rec := b.post(t, "/queues/pause", f, false); rec.Code != http.StatusForbidden {
		t.Errorf("POST with a forged token: %d, want 403", rec.Code)
	}
	other, err := ui.New(b.pool, nil)
	if err != nil {
		t.Fatal(err)
	}
	f = form()
	f.Set("csrf", other.TokenFor("/queues/pause"))
	if rec := b.post(t, "/queues/pause", f, false); rec.Code != http.StatusForbidden {
		t.Errorf("POST with another process's token: %d, want 403", rec.Code)
	}
	// A cross-site POST is refused even with a token.
	f = form()
	f.Set("csrf", b.h.TokenFor("/queues/pause"))
	req := newRequest(http.MethodPost, "/queues/pause", strings.NewReader(f.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Sec-Fetch-Site", "cross-site")
	rec := httptest.NewRecorder()
	b.h.ServeHTTP(rec, req)
	if rec.Code != http.StatusForbidden {
		t.Errorf("cross-site POST: %d, want 403", rec.Code)
	}
	if n := count(t, b, `SELECT count(*) FROM jobs_queues`); n != 0 {
		t.Fatalf("a refused POST paused the queue")
	}
	b.mustPost(t, "/queues/pause", form())
	if n := count(t, b, `SELECT count(*) FROM jobs_queues WHERE queue = 'mail' AND paused`); n != 1 {
		t.Fatalf("the POST with its token did not pause the queue")
	}
}

func TestReadOnly(t *testing.T) {
	t.Parallel()
	b := setup(t, &ui.Options{ReadOnly: true})
	seedDead(t, b, 2, "hooks", "deliver", "boom")
	exec(t, b, `SELECT jobs_schedule('nightly', '0 3 * * *', 'report')`)
	for _, path := range []string{"/", "/jobs", "/dead", "/schedules", "/queues/hooks"} {
		body := b.mustGet(t, path)
		if strings.Contains(body, "<form method=\"post\"") || strings.Contains(body, `method="post"`) {
			t.Errorf("GET %s: a read-only page has a form", path)
		}
		contains(t, path, body, "read-only")
	}
	rec := b.post(t, "/dead/retry", url.Values{"scope": {"all"}, "confirm": {"yes"}}, true)
	if rec.Code != http.StatusForbidden {
		t.Fatalf("POST on a read-only dashboard: %d, want 403", rec.Code)
	}
	if n := count(t, b, `SELECT count(*) FROM jobs WHERE state = 'dead'`); n != 2 {
		t.Fatalf("%d dead jobs after a refused retry, want 2", n)
	}
}

func TestQueueActions(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	b.mustPost(t, "/queues/pause", url.Values{"queue": {"mail"}})
	b.mustPost(t, "/queues/concurrency", url.Values{"queue": {"mail"}, "max_running": {"3"}, "per_key": {"1"}})
	b.mustPost(t, "/queues/rate", url.Values{"queue": {"mail"}, "max_starts": {"10"}, "per": {"1m"}})
	got := pgtest.QueryOne[string](t, b.db.Conn,
		`SELECT format('%s %s %s %s %s', paused, max_running, per_key, max_starts, per) FROM jobs_queues WHERE queue = 'mail'`)
	if got != "t 3 1 10 00:01:00" {
		t.Fatalf("jobs_queues row %q, want paused, 3 running, 1 per key, 10 per minute", got)
	}
	contains(t, "overview", b.mustGet(t, "/"), "max 3 running, 1 per key, 10 starts per 00:01:00", "paused")

	b.mustPost(t, "/queues/resume", url.Values{"queue": {"mail"}})
	b.mustPost(t, "/queues/concurrency", url.Values{"queue": {"mail"}, "max_running": {""}})
	b.mustPost(t, "/queues/rate", url.Values{"queue": {"mail"}, "max_starts": {""}})
	if n := count(t, b, `SELECT count(*) FROM jobs_queues`); n != 0 {
		t.Fatalf("settings left after resume and clearing the limits")
	}

	// A rejected argument comes back as the function's message, naming the parameter.
	rec := b.post(t, "/queues/concurrency", url.Values{"queue": {"mail"}, "max_running": {"0"}}, true)
	loc, _ := url.Parse(rec.Header().Get("Location"))
	if rec.Code != http.StatusSeeOther || !strings.Contains(loc.Query().Get("err"), "max_running") {
		t.Fatalf("max_running 0: %d %q, want a redirect with an error naming max_running", rec.Code, loc)
	}
	contains(t, "the page after an error", b.mustGet(t, loc.String()), "max_running must be")
}

// TestQueueFlowShaping: the queue page shows fair sharing, ordered keys, the per-key rate and
// the topics publishing to the queue, and its forms set and clear the three switches.
func TestQueueFlowShaping(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	exec(t, b, `SELECT jobs_subscribe('invoice.paid', 'tenants', 'send-receipt')`)
	exec(t, b, `SELECT jobs_subscribe('account.closed', 'tenants', 'archive')`)
	exec(t, b, `SELECT jobs_subscribe('invoice.paid', 'ledger', 'book')`)
	settings := func() string {
		return pgtest.QueryOne[string](t, b.db.Conn, `SELECT format('%s %s %s %s %s %s', max_running, per_key, fair, ordered,
			max_starts, rate_per_key) FROM jobs_queues WHERE queue = 'tenants'`)
	}

	// The page's checkboxes post a hidden "off" and, when checked, "on" after it.
	b.mustPost(t, "/queues/concurrency", url.Values{"queue": {"tenants"}, "per_key": {"2"}, "fair": {"off", "on"}, "ordered": {"off", "on"}})
	b.mustPost(t, "/queues/rate", url.Values{"queue": {"tenants"}, "max_starts": {"10"}, "per": {"1s"}, "rate_per_key": {"off", "on"}})
	if got := settings(); got != " 2 t t 10 t" {
		t.Fatalf("jobs_queues row %q, want 2 per key, fair, ordered, 10 starts per key", got)
	}
	body := b.mustGet(t, "/queues/tenants")
	contains(t, "the queue page", body, `<dd id="limits">2 per key</dd>`,
		`<dd id="fair">on: claims take ready jobs round-robin across concurrency keys</dd>`,
		`<dd id="ordered">on: the jobs of each concurrency key run one at a time, in enqueue order</dd>`,
		`<dd id="rate-limit">10 starts per 00:00:01 per key</dd>`,
		`account.closed → kind <a href="/jobs?queue=tenants&amp;kind=archive">archive</a>`,
		`invoice.paid → kind <a href="/jobs?queue=tenants&amp;kind=send-receipt">send-receipt</a>`,
		`name="fair" value="on" checked`, `name="ordered" value="on" checked`, `name="rate_per_key" value="on" checked`)
	if strings.Contains(body, "kind book") {
		t.Errorf("the queue page lists a subscription of another queue")
	}
	contains(t, "overview", b.mustGet(t, "/"), "2 per key, fair, ordered, 10 starts per 00:00:01 per key")

	// A form without the switches (a page of an older dashboard) leaves them as they are.
	b.mustPost(t, "/queues/concurrency", url.Values{"queue": {"tenants"}, "max_running": {"5"}})
	if got := settings(); got != "5  t t 10 t" {
		t.Fatalf("jobs_queues row %q after a form without the switches, want max 5 running, fair, ordered kept", got)
	}
	// Unchecked boxes turn them off; with nothing else set the queue has no settings left.
	b.mustPost(t, "/queues/concurrency", url.Values{"queue": {"tenants"}, "max_running": {""}, "fair": {"off"}, "ordered": {"off"}})
	b.mustPost(t, "/queues/rate", url.Values{"queue": {"tenants"}, "max_starts": {"10"}, "per": {"1s"}, "rate_per_key": {"off"}})
	if got := settings(); got != "  f f 10 f" {
		t.Fatalf("jobs_queues row %q after unchecking, want only 10 starts per second", got)
	}
	b.mustPost(t, "/queues/rate", url.Values{"queue": {"tenants"}, "max_starts": {""}})
	if n := count(t, b, `SELECT count(*) FROM jobs_queues`); n != 0 {
		t.Fatalf("settings left after switching everything off")
	}
	contains(t, "the queue page without settings", b.mustGet(t, "/queues/tenants"), `<dd id="fair">off</dd>`,
		`<dd id="ordered">off</dd>`, `<dd id="rate-limit">none</dd>`)
	contains(t, "a queue no topic publishes to", b.mustGet(t, "/queues/mail"), "no topic publishes to this queue")

	rec := b.post(t, "/queues/concurrency", url.Values{"queue": {"tenants"}, "fair": {"maybe"}}, true)
	loc, _ := url.Parse(rec.Header().Get("Location"))
	if rec.Code != http.StatusSeeOther || loc.Query().Get("err") != `fair must be on or off, got "maybe"` {
		t.Fatalf("fair=maybe: %d %q, want a redirect with an error naming fair", rec.Code, loc)
	}
}

func TestDeadBulkActions(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	seedDead(t, b, 5, "hooks", "deliver", "boom")
	seedDead(t, b, 2500, "mail", "send", "bounce")
	ids := pgtest.QueryList[int64](t, b.db.Conn, `SELECT id FROM jobs WHERE queue = 'hooks' ORDER BY id LIMIT 2`)

	t.Run("RetrySelected", func(t *testing.T) {
		b.mustPost(t, "/dead/retry", url.Values{"scope": {"selected"}, "id": {fmt.Sprint(ids[0]), fmt.Sprint(ids[1])}})
		if n := count(t, b, `SELECT count(*) FROM jobs WHERE queue = 'hooks' AND state = 'queued'`); n != 2 {
			t.Fatalf("%d hooks jobs queued, want the 2 selected", n)
		}
	})
	t.Run("AllMatchingAsksFirst", func(t *testing.T) {
		rec := b.post(t, "/dead/retry", url.Values{"scope": {"all"}, "queue": {"mail"}}, true)
		if rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), "Yes, retry them") {
			t.Fatalf("retry all without confirm: %d, want the confirmation page", rec.Code)
		}
		contains(t, "confirmation", rec.Body.String(), "at most 2500 jobs")
		if n := count(t, b, `SELECT count(*) FROM jobs WHERE queue = 'mail' AND state = 'dead'`); n != 2500 {
			t.Fatalf("asking for confirmation changed jobs")
		}
	})
	t.Run("RetryAllMatching", func(t *testing.T) {
		// 2500 jobs: three pages of jobs_list (1000 at most each), each retried by one call of
		// jobs_retry_many.
		loc := b.mustPost(t, "/dead/retry", url.Values{"scope": {"all"}, "confirm": {"yes"}, "queue": {"mail"}, "kind": {"send"}})
		if !strings.Contains(loc, "retried+2500") {
			t.Errorf("redirect %q, want the message retried 2500", loc)
		}
		if n := count(t, b, `SELECT count(*) FROM jobs WHERE queue = 'mail' AND state = 'dead'`); n != 0 {
			t.Fatalf("%d mail jobs still dead", n)
		}
		if n := count(t, b, `SELECT count(*) FROM jobs WHERE queue = 'hooks' AND state = 'dead'`); n != 3 {
			t.Fatalf("%d hooks jobs dead, want 3 (another queue is not touched)", n)
		}
	})
	t.Run("DeleteSelectedAndAll", func(t *testing.T) {
		id := count(t, b, `SELECT min(id) FROM jobs WHERE queue = 'hooks' AND state = 'dead'`)
		b.mustPost(t, "/dead/delete", url.Values{"scope": {"selected"}, "id": {fmt.Sprint(id)}})
		if n := count(t, b, `SELECT count(*) FROM jobs WHERE id = $1`, id); n != 0 {
			t.Fatalf("the selected job was not deleted")
		}
		b.mustPost(t, "/dead/delete", url.Values{"scope": {"all"}, "confirm": {"yes"}})
		if n := count(t, b, `SELECT count(*) FROM jobs WHERE state = 'dead'`); n != 0 {
			t.Fatalf("%d dead jobs left after deleting all", n)
		}
		if n := count(t, b, `SELECT count(*) FROM jobs`); n != 2502 {
			t.Fatalf("%d jobs left, want the 2502 queued ones", n)
		}
	})
	t.Run("NothingSelected", func(t *testing.T) {
		rec := b.post(t, "/dead/delete", url.Values{"scope": {"selected"}}, true)
		if !strings.Contains(rec.Header().Get("Location"), "err=no+job+selected") {
			t.Fatalf("delete with nothing selected: %q, want an error", rec.Header().Get("Location"))
		}
	})
}

func TestScheduleActions(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	exec(t, b, `SELECT jobs_schedule('nightly', '0 3 * * *', 'report', queue => 'reports')`)
	next := pgtest.QueryOne[string](t, b.db.Conn, `SELECT next_run_at::text FROM jobs_schedules`)

	loc := b.mustPost(t, "/schedules/run", url.Values{"name": {"nightly"}})
	if n := count(t, b, `SELECT count(*) FROM jobs WHERE kind = 'report' AND queue = 'reports' AND state = 'queued'`); n != 1 {
		t.Fatalf("%d report jobs after run now, want 1", n)
	}
	if got := pgtest.QueryOne[string](t, b.db.Conn, `SELECT next_run_at::text FROM jobs_schedules`); got != next {
		t.Errorf("run now moved next_run_at from %s to %s", next, got)
	}
	contains(t, "schedules after run now", b.mustGet(t, strings.TrimPrefix(loc, "")), "schedule nightly enqueued job")

	b.mustPost(t, "/schedules/disable", url.Values{"name": {"nightly"}})
	if pgtest.QueryOne[bool](t, b.db.Conn, `SELECT enabled FROM jobs_schedules`) {
		t.Fatal("disable left the schedule enabled")
	}
	contains(t, "schedules", b.mustGet(t, "/schedules"), "Enable")
	b.mustPost(t, "/schedules/enable", url.Values{"name": {"nightly"}})
	if !pgtest.QueryOne[bool](t, b.db.Conn, `SELECT enabled FROM jobs_schedules`) {
		t.Fatal("enable left the schedule disabled")
	}

	rec := b.post(t, "/schedules/run", url.Values{"name": {"nope"}}, true)
	loc2, _ := url.Parse(rec.Header().Get("Location"))
	if !strings.Contains(loc2.Query().Get("err"), "name") {
		t.Fatalf("run of an unknown schedule: %q, want an error naming the parameter", loc2)
	}
}
