package admin_test

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/skiplock/skiplock"
	"github.com/skiplock/skiplock/admin"
	"github.com/skiplock/skiplock/tests/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// TestListAndInspectScanEveryColumn: a job with every optional column set, and one with none,
// come back with each field, NULLs as nil, times in UTC.
func TestListAndInspectScanEveryColumn(t *testing.T) {
	t.Parallel()
	db := pgtest.NewTestDB(t)
	a := admin.New(db.Conn, nil)
	ctx := t.Context()
	pgtest.MustExec(t, db.Conn, "SET TIME ZONE 'Asia/Kathmandu'") // +05:45: times must still come back in UTC
	full := pgtest.QueryOne[int64](t, db.Conn, `SELECT jobs_enqueue('k', '{"a": 1}', queue => 'q', priority => 3,
		max_attempts => 4, unique_key => 'u', concurrency_key => 'c')`)
	pgtest.MustExec(t, db.Conn, "SELECT jobs_fail(id, attempt, 'first failure', retry_at => now()) FROM jobs_claim('w1', queues => ARRAY['q'])")
	pgtest.MustExec(t, db.Conn, "SELECT id FROM jobs_claim('w2', queues => ARRAY['q'])")
	bare := pgtest.QueryOne[int64](t, db.Conn, "SELECT jobs_enqueue('k2', queue => 'r')")

	jobs, err := a.List(ctx, admin.ListOpts{})
	if err != nil {
		t.Fatal(err)
	}
	if len(jobs) != 2 || jobs[0].ID != bare || jobs[1].ID != full {
		t.Fatalf("List = %+v, want jobs %d then %d (newest first)", jobs, bare, full)
	}
	j := jobs[1]
	if j.Queue != "q" || j.Kind != "k" || j.State != "running" || j.Priority != 3 || j.Attempts != 2 || j.MaxAttempts != 4 ||
		j.StartedAt == nil || j.FinishedAt != nil || j.LeaseHolder == nil || *j.LeaseHolder != "w2" ||
		j.LeaseExpiresAt == nil || j.UniqueKey == nil || *j.UniqueKey != "u" || j.ConcurrencyKey == nil ||
		*j.ConcurrencyKey != "c" || j.LastError == nil || *j.LastError != "first failure" {
		t.Fatalf("the full job listed as %+v", j)
	}
	for _, ts := range []time.Time{j.RunAt, j.CreatedAt, *j.StartedAt, *j.LeaseExpiresAt} {
		if ts.Location() != time.UTC {
			t.Fatalf("time %v is not in UTC", ts)
		}
	}
	b := jobs[0]
	if b.StartedAt != nil || b.FinishedAt != nil || b.LeaseHolder != nil || b.LeaseExpiresAt != nil || b.UniqueKey != nil ||
		b.ConcurrencyKey != nil || b.LastError != nil {
		t.Fatalf("the bare job's NULL columns came back as %+v", b)
	}
	if page, err := a.List(ctx, admin.ListOpts{State: "running", Queue: "q", Kind: "k", MaxJobs: 1, BeforeID: bare}); err != nil ||
		len(page) != 1 || page[0].ID != full {
		t.Fatalf("List with every filter = %+v, %v; want job %d", page, err, full)
	}

	got, err := a.Inspect(ctx, full)
	if err != nil {
		t.Fatal(err)
	}
	if string(got.Payload) != `{"a": 1}` || len(got.Errors) != 1 || got.Errors[0].Attempt != 1 ||
		got.Errors[0].Error != "first failure" || got.Errors[0].Worker == nil || *got.Errors[0].Worker != "w1" ||
		got.Errors[0].At.Location() != time.UTC || !reflect.DeepEqual(got.ListedJob, j) {
		t.Fatalf("Inspect = %+v, want the listed job with its payload and one error of w1", got)
	}
	if _, err := a.Inspect(ctx, bare+1000); !errors.Is(err, admin.ErrJobNotFound) {
		t.Fatalf("Inspect of an unknown id = %v, want ErrJobNotFound", err)
	}
}

// TestOptionsSchema: with Options.Schema the calls reach an install in a schema that is not on
// the connection's search_path; without it they fail naming the function.
func TestOptionsSchema(t *testing.T) {
	t.Parallel()
	url := pgtest.NewEmptyDatabase(t)
	conn := pgtest.NewConn(t, url)
	if err := skiplock.Migrate(t.Context(), conn, &skiplock.MigrateOpts{Schema: "Jobs Here"}); err != nil {
		t.Fatal(err)
	}
	pgtest.MustExec(t, conn, `SELECT "Jobs Here".jobs_enqueue('k', queue => 'q')`)
	pgtest.MustExec(t, conn, "SET search_path TO public")
	queues, total, err := admin.New(conn, &admin.Options{Schema: "Jobs Here"}).Metrics(t.Context())
	if err != nil || len(queues) != 1 || *queues[0].Queue != "q" || queues[0].Ready != 1 || total.Queue != nil ||
		total.JobsCreatedTotal == nil || *total.JobsCreatedTotal != 1 {
		t.Fatalf("Metrics with the schema = %+v, %+v, %v", queues, total, err)
	}
	_, _, err = admin.New(conn, nil).Metrics(t.Context())
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != "42883" || !strings.HasPrefix(err.Error(), "jobs_metrics: ") {
		t.Fatalf("Metrics without the schema = %v, want the 42883 of jobs_metrics wrapped with its name", err)
	}
}

// TestBulkMatchingActsOnEveryMatchOnce: every matching job is acted on once, across pages and
// states, and nothing else.
func TestBulkMatchingActsOnEveryMatchOnce(t *testing.T) {
	t.Parallel()
	db := pgtest.NewTestDB(t)
	a := admin.New(db.Conn, nil)
	pgtest.MustExec(t, db.Conn, "SELECT jobs_enqueue('k', queue => 'q') FROM generate_series(1, 25)")
	pgtest.MustExec(t, db.Conn, "SELECT id FROM jobs_claim('w', 5, queues => ARRAY['q'])")
	pgtest.MustExec(t, db.Conn, "SELECT jobs_enqueue('other', queue => 'q') FROM generate_series(1, 3)")
	n, err := a.BulkMatching(t.Context(), admin.Cancel, "q", "k", []string{"running", "queued", "queued"}, 4)
	if err != nil || n != 25 {
		t.Fatalf("BulkMatching cancelled %d jobs (%v), want 25", n, err)
	}
	if left := pgtest.QueryOne[int64](t, db.Conn, "SELECT count(*) FROM jobs WHERE state = 'queued'"); left != 3 {
		t.Fatalf("%d jobs still queued, want the 3 of the other kind", left)
	}
	if _, err := a.BulkMatching(t.Context(), admin.Cancel, "q", "", nil, 4); err == nil {
		t.Fatal("BulkMatching without states succeeded")
	}
}

// TestWriteMetricsTextEscapes: help texts and label values are escaped as the text format
// asks (backslash, newline, and in labels the double quote), and nothing else.
func TestWriteMetricsTextEscapes(t *testing.T) {
	t.Parallel()
	var b strings.Builder
	fams := []admin.MetricFamily{{
		MetricDef: admin.MetricDef{Name: "m", Help: "a \\ b\nc \"d\"", Type: admin.Gauge, PerQueue: true},
		Samples:   []admin.Sample{{Queue: "q\"\\\nδ", Value: 1.5}},
	}}
	if err := admin.WriteMetricsText(&b, fams); err != nil {
		t.Fatal(err)
	}
	want := "# HELP m a \\\\ b\\nc \"d\"\n# TYPE m gauge\nm{queue=\"q\\\"\\\\\\nδ\"} 1.5\n"
	if b.String() != want {
		t.Fatalf("WriteMetricsText wrote\n%q\nwant\n%q", b.String(), want)
	}
}

// TestMetricsCountWaitingJobs: jobs waiting for a parent are counted per queue and in the
// totals, leave the count when released, and show as skiplock_queue_waiting_jobs.
func TestMetricsCountWaitingJobs(t *testing.T) {
	t.Parallel()
	db := pgtest.NewTestDB(t)
	a := admin.New(db.Conn, nil)
	parent := pgtest.QueryOne[int64](t, db.Conn, "SELECT jobs_enqueue('p', queue => 'a')")
	pgtest.MustExec(t, db.Conn, `SELECT jobs_enqueue('c', queue => 'b', depends_on => ARRAY[$1::bigint]),
		jobs_enqueue('c', queue => 'b', depends_on => ARRAY[$1::bigint])`, parent)
	waiting := func() (map[string]int64, int64) {
		t.Helper()
		queues, total, err := a.Metrics(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		by := map[string]int64{}
		for _, q := range queues {
			by[*q.Queue] = q.Waiting
		}
		return by, total.Waiting
	}
	if by, total := waiting(); by["b"] != 2 || by["a"] != 0 || total != 2 {
		t.Fatalf("waiting = %v, total %d; want 2 in queue b", by, total)
	}
	var text strings.Builder
	queues, total, err := a.Metrics(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if err := admin.WriteMetricsText(&text, admin.MetricFamilies(queues, total)); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(text.String(), `skiplock_queue_waiting_jobs{queue="b"} 2`) {
		t.Fatalf("exposition lacks the waiting gauge:\n%s", text.String())
	}
	pgtest.MustExec(t, db.Conn, "SELECT jobs_complete(id, attempt) FROM jobs_claim('w', queues => ARRAY['a'])")
	if by, total := waiting(); by["b"] != 0 || total != 0 {
		t.Fatalf("waiting after the parent is done = %v, total %d; want none", by, total)
	}
}
