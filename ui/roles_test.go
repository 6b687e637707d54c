package ui_test

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/url"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/skiplock/skiplock/tests/pgtest"
	"github.com/skiplock/skiplock/ui"
)

// TestAsJobsAdmin: the dashboard works as a login that has only jobs_admin (no table access
// but SELECT on jobs_queues, jobs_schedules and jobs_settings): every page loads, the job page
// shows the payload (through jobs_inspect), the queue page its topics (jobs_subscriptions),
// and every action works, fair, ordered and the per-key rate included.
func TestAsJobsAdmin(t *testing.T) {
	t.Parallel()
	db := pgtest.NewTestDB(t)
	pgtest.MustExec(t, db.Conn, `SELECT jobs_enqueue('send', '{"secret": 1}', 'mail')`)
	pgtest.MustExec(t, db.Conn, `SELECT jobs_enqueue_many(ARRAY['deliver', 'deliver'], queues => ARRAY['hooks', 'hooks'], max_attempts => ARRAY[1, 1])`)
	pgtest.MustExec(t, db.Conn, `SELECT jobs_fail(c.id, c.attempt, 'boom') FROM jobs_claim('w', 10, ARRAY['hooks']) c`)
	pgtest.MustExec(t, db.Conn, `SELECT jobs_schedule('nightly', '0 3 * * *', 'report')`)
	pgtest.MustExec(t, db.Conn, `SELECT jobs_subscribe('mail.requested', 'mail', 'send')`)
	workflow := pgtest.QueryOne[int64](t, db.Conn, `SELECT min(id) FROM jobs_enqueue_workflow('[{"name": "a", "kind": "a", "queue": "wf"},
		{"name": "b", "kind": "b", "queue": "wf", "depends_on": ["a"]}]')`)

	buf := make([]byte, 6)
	_, _ = rand.Read(buf)
	role := "ui_admin_" + hex.EncodeToString(buf)
	id := pgx.Identifier{role}.Sanitize()
	pgtest.MustExec(t, db.Conn, "CREATE ROLE "+id+" LOGIN PASSWORD 'pw'; GRANT jobs_admin TO "+id)
	t.Cleanup(func() {
		pgtest.MustExec(t, db.Conn, "DROP OWNED BY "+id)
		pgtest.MustExec(t, db.Conn, "DROP ROLE "+id)
	})
	u, err := url.Parse(db.URL)
	if err != nil {
		t.Skipf("the test database URL is not a URL (%v); this test builds one for its role", err)
	}
	u.User = url.UserPassword(role, "pw")
	pool := pgtest.NewPool(t, u.String())
	h, err := ui.New(pool, nil)
	if err != nil {
		t.Fatal(err)
	}
	b := &testBundle{db: db, pool: pool, h: h}

	mailID := count(t, b, `SELECT id FROM jobs WHERE queue = 'mail'`)
	for _, path := range []string{"/", "/jobs", "/jobs?state=dead", "/dead", "/schedules", "/queues/mail", "/throughput.svg"} {
		b.mustGet(t, path)
	}
	body := b.mustGet(t, fmt.Sprintf("/jobs/%d", mailID))
	contains(t, "job page", body, "send", `&#34;secret&#34;: 1`)

	b.mustPost(t, "/queues/pause", url.Values{"queue": {"mail"}})
	b.mustPost(t, "/queues/concurrency", url.Values{"queue": {"mail"}, "max_running": {"2"}})
	b.mustPost(t, "/queues/concurrency", url.Values{"queue": {"mail"}, "max_running": {"2"}, "fair": {"off", "on"}, "ordered": {"off", "on"}})
	b.mustPost(t, "/queues/rate", url.Values{"queue": {"mail"}, "max_starts": {"5"}, "per": {"1s"}, "rate_per_key": {"off", "on"}})
	contains(t, "the queue page", b.mustGet(t, "/queues/mail"), "mail.requested → kind", `<dd id="rate-limit">5 starts per 00:00:01 per key</dd>`)
	b.mustPost(t, "/dead/retry", url.Values{"scope": {"all"}, "confirm": {"yes"}, "queue": {"hooks"}})
	b.mustPost(t, "/schedules/run", url.Values{"name": {"nightly"}})
	b.mustPost(t, "/schedules/disable", url.Values{"name": {"nightly"}})
	if n := count(t, b, `SELECT count(*) FROM jobs WHERE state = 'dead'`); n != 0 {
		t.Errorf("%d dead jobs after retrying all as jobs_admin", n)
	}
	if n := count(t, b, `SELECT count(*) FROM jobs WHERE kind = 'report'`); n != 1 {
		t.Errorf("%d report jobs after run now, want 1", n)
	}

	// Workflows: a step's page links to its workflow (jobs_inspect), the workflow page shows
	// the steps (jobs_workflow), and the workflow can be cancelled (jobs_cancel_workflow).
	contains(t, "a workflow step's page", b.mustGet(t, fmt.Sprintf("/jobs/%d", workflow)), fmt.Sprintf(`href="/workflows/%d"`, workflow))
	contains(t, "the workflow page", b.mustGet(t, fmt.Sprintf("/workflows/%d", workflow)), fmt.Sprintf(`href="/jobs/%d"`, workflow+1))
	b.mustPost(t, "/workflows/cancel", url.Values{"workflow_id": {fmt.Sprint(workflow)}})
	if n := count(t, b, `SELECT count(*) FROM jobs WHERE workflow_id = $1 AND state = 'cancelled'`, workflow); n != 2 {
		t.Errorf("%d steps cancelled as jobs_admin, want 2", n)
	}
}
