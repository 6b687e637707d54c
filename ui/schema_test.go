package ui_test

import (
	"net/url"
	"strconv"
	"testing"

	"github.com/skiplock/skiplock"
	"github.com/skiplock/skiplock/tests/pgtest"
	"github.com/skiplock/skiplock/ui"
)

// TestSchemaOption: with skiplock installed in a schema of its own that is not on the
// connection's search_path, Options.Schema makes every page and action find it.
func TestSchemaOption(t *testing.T) {
	t.Parallel()
	dbURL := pgtest.NewEmptyDatabase(t)
	conn := pgtest.NewConn(t, dbURL)
	if err := skiplock.Migrate(t.Context(), conn, &skiplock.MigrateOpts{Schema: "jobq"}); err != nil {
		t.Fatal(err)
	}
	pgtest.MustExec(t, conn, `SELECT jobq.jobs_enqueue('send', '{}', 'mail')`)
	pgtest.MustExec(t, conn, `SELECT jobq.jobs_schedule('nightly', '0 3 * * *', 'report')`)
	pool := pgtest.NewPool(t, dbURL)
	h, err := ui.New(pool, &ui.Options{Schema: "jobq"})
	if err != nil {
		t.Fatal(err)
	}
	b := &testBundle{pool: pool, h: h}
	id := pgtest.QueryOne[int64](t, conn, `SELECT id FROM jobq.jobs`)
	for _, path := range []string{"/", "/jobs?state=queued", "/dead", "/schedules", "/queues/mail", "/jobs/" + strconv.FormatInt(id, 10)} {
		b.mustGet(t, path)
	}
	b.mustPost(t, "/queues/pause", url.Values{"queue": {"mail"}})
	b.mustPost(t, "/schedules/disable", url.Values{"name": {"nightly"}})
	if !pgtest.QueryOne[bool](t, conn, `SELECT paused FROM jobq.jobs_queues WHERE queue = 'mail'`) {
		t.Fatal("the pause did not reach the schema's jobs_queues")
	}
}
