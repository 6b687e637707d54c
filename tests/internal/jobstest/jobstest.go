// Package jobstest holds the assertions about skiplock's tables and errors that more than
// one SQL test package makes.
package jobstest

import (
	"testing"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/skiplock/skiplock/tests/pgtest"
)

// TableChecksum digests every row of jobs, jobs_settings and jobs_schedules: equal
// checksums mean no column of any row changed, none was added and none removed.
func TableChecksum(t testing.TB, q pgtest.Querier) string {
	t.Helper()
	const sql = `SELECT coalesce((SELECT md5(string_agg(j::text, ',' ORDER BY j.id)) FROM jobs j), 'no jobs')
	        || '/' || coalesce((SELECT md5(string_agg(s::text, ',')) FROM jobs_settings s), 'no settings')
	        || '/' || coalesce((SELECT md5(string_agg(c::text, ',' ORDER BY c.name)) FROM jobs_schedules c), 'no schedules')
	        || '/' || coalesce((SELECT md5(string_agg(s::text, ',' ORDER BY s.topic, s.queue, s.kind)) FROM jobs_topic_subscriptions s), 'no subscriptions')`
	return pgtest.QueryOne[string](t, q, sql)
}

// RequireInvalid checks that err is the error _jobs_invalid raises for param: SQLSTATE
// 22023 with param in the COLUMN field. It returns the error for checks of its message.
func RequireInvalid(t testing.TB, err error, param string) *pgconn.PgError {
	t.Helper()
	if err == nil {
		t.Fatalf("call succeeded, want SQLSTATE 22023 naming %s", param)
	}
	pgErr := pgtest.RequirePgError(t, err, "22023")
	if pgErr.ColumnName != param {
		t.Errorf("COLUMN of the error = %q, want %q (message: %s)", pgErr.ColumnName, param, pgErr.Message)
	}
	return pgErr
}
