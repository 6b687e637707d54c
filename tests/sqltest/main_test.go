package sqltest

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/skiplock/skiplock/tests/pgtest"
)

// Every test gets a database of its own from pgtest (cloned from a template with skiplock
// installed), so tests run in parallel without sharing jobs, settings or NOTIFY channels.
func TestMain(m *testing.M) { pgtest.Main(m) }

// testBundle is what setup gives each test: pgtest's standard bundle, a database of its
// own with skiplock installed (URL) and a session on it (Conn; Connect opens more).
type testBundle = pgtest.TestDB

func setup(t *testing.T) *testBundle {
	t.Helper()
	return pgtest.NewTestDB(t)
}

// querier is a *pgx.Conn or a pgx.Tx.
type querier = pgtest.Querier

func mustExec(t *testing.T, q querier, sql string, args ...any) {
	t.Helper()
	pgtest.MustExec(t, q, sql, args...)
}

// queryOne runs a query returning one row of one value and returns it.
func queryOne[T any](t *testing.T, q querier, sql string, args ...any) T {
	t.Helper()
	return pgtest.QueryOne[T](t, q, sql, args...)
}

// queryList runs a query returning rows of one value and returns them in order.
func queryList[T any](t *testing.T, q querier, sql string, args ...any) []T {
	t.Helper()
	return pgtest.QueryList[T](t, q, sql, args...)
}

// enqueue adds a job with jobs_enqueue; extra is appended to the argument list as named
// arguments, e.g. "queue => 'a', priority => 3".
func enqueue(t *testing.T, q querier, extra string) int64 {
	t.Helper()
	sql := "SELECT jobs_enqueue('test_kind'"
	if extra != "" {
		sql += ", " + extra
	}
	return queryOne[int64](t, q, sql+")")
}

// claimedJob is one row of jobs_claim.
type claimedJob struct {
	ID             int64
	Queue          string
	Kind           string
	Attempt        int32
	MaxAttempts    int32
	Priority       int32
	RunAt          time.Time
	LeaseExpiresAt time.Time
}

// claim calls jobs_claim; queues nil means NULL (every queue).
func claim(t *testing.T, q querier, worker string, maxJobs int, queues []string, lease string) []claimedJob {
	t.Helper()
	jobs, err := tryClaim(t.Context(), q, worker, maxJobs, queues, lease)
	if err != nil {
		t.Fatalf("jobs_claim: %v", err)
	}
	return jobs
}

func tryClaim(ctx context.Context, q querier, worker string, maxJobs int, queues []string, lease string) ([]claimedJob, error) {
	rows, err := q.Query(ctx,
		`SELECT id, queue, kind, attempt, max_attempts, priority, run_at, lease_expires_at
		 FROM jobs_claim($1, $2, $3, $4::interval)`, worker, maxJobs, queues, lease)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (claimedJob, error) {
		var j claimedJob
		err := row.Scan(&j.ID, &j.Queue, &j.Kind, &j.Attempt, &j.MaxAttempts, &j.Priority, &j.RunAt, &j.LeaseExpiresAt)
		return j, err
	})
}

// claimOne claims exactly one job from queue (NULL queues when queue is "") and fails the
// test when there is none.
func claimOne(t *testing.T, q querier, worker, queue, lease string) claimedJob {
	t.Helper()
	var queues []string
	if queue != "" {
		queues = []string{queue}
	}
	jobs := claim(t, q, worker, 1, queues, lease)
	if len(jobs) != 1 {
		t.Fatalf("jobs_claim(%q, 1, %v) returned %d jobs, want 1", worker, queues, len(jobs))
	}
	return jobs[0]
}

// jobRow is the part of a jobs row the tests look at.
type jobRow struct {
	State          string
	Attempts       int32
	MaxAttempts    int32
	RunAt          time.Time
	LeaseHolder    *string
	LeaseExpiresAt *time.Time
	LastError      *string
	FinishedAt     *time.Time
	Errors         []jobError
}

type jobError struct {
	Attempt int32     `json:"attempt"`
	At      time.Time `json:"at"`
	Error   string    `json:"error"`
	Worker  *string   `json:"worker"`
}

func getJob(t *testing.T, q querier, id int64) jobRow {
	t.Helper()
	var r jobRow
	err := q.QueryRow(t.Context(),
		`SELECT state::text, attempts, max_attempts, run_at, lease_holder, lease_expires_at, last_error,
		        finished_at, errors
		 FROM jobs WHERE id = $1`, id).
		Scan(&r.State, &r.Attempts, &r.MaxAttempts, &r.RunAt, &r.LeaseHolder, &r.LeaseExpiresAt, &r.LastError,
			&r.FinishedAt, &r.Errors)
	if err != nil {
		t.Fatalf("failed to read job %d: %v", id, err)
	}
	return r
}

// waitLeasesExpired waits until the database clock has passed every running job's lease.
func waitLeasesExpired(t *testing.T, q querier) {
	t.Helper()
	pgtest.WaitFor(t, 10*time.Second, "leases to expire", func() bool {
		return queryOne[bool](t, q,
			"SELECT NOT EXISTS (SELECT FROM jobs WHERE state = 'running' AND lease_expires_at >= clock_timestamp())")
	})
}

func containsAll(s string, subs ...string) bool {
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			return false
		}
	}
	return true
}
