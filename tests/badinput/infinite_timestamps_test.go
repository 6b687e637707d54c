package badinput

import (
	"reflect"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgtype"
)

// TestInfiniteTimestamps: 'infinity' and '-infinity' are timestamps PostgreSQL accepts
// wherever the API takes one, but a job's time must be finite: each function refuses them
// with 22023 naming the parameter, whether written in the SQL or sent as a bound value,
// and changes nothing (the job a fail or snooze aimed at is still running). jobs_stats
// keeps working.
func TestInfiniteTimestamps(t *testing.T) {
	t.Parallel()
	inf := pgtype.Timestamptz{InfinityModifier: pgtype.Infinity, Valid: true}
	minusInf := pgtype.Timestamptz{InfinityModifier: pgtype.NegativeInfinity, Valid: true}
	type infCase struct {
		name  string
		held  bool // the call aims at a running job, passed as $1 (and the time as $2)
		sql   string
		arg   any // the time, when the SQL does not write it
		fn    string
		param string
	}
	var cases []infCase
	for _, v := range []struct {
		name, lit string
		bound     pgtype.Timestamptz
	}{{"Infinity", "'infinity'", inf}, {"MinusInfinity", "'-infinity'", minusInf}} {
		cases = append(cases,
			infCase{"Enqueue" + v.name, false, "SELECT jobs_enqueue('k', queue => 'q', run_at => " + v.lit + ")", nil, "jobs_enqueue", "run_at"},
			infCase{"Enqueue" + v.name + "Bound", false, "SELECT jobs_enqueue('k', queue => 'q', run_at => $1)", v.bound, "jobs_enqueue", "run_at"},
			infCase{"EnqueueMany" + v.name, false, "SELECT * FROM jobs_enqueue_many(ARRAY['k'], queues => ARRAY['q'], run_ats => ARRAY[" + v.lit + "::timestamptz])", nil, "jobs_enqueue_many", "run_ats[1]"},
			// All or nothing: the good elements before the infinite one are not enqueued.
			infCase{"EnqueueMany" + v.name + "ThirdBound", false, "SELECT * FROM jobs_enqueue_many(ARRAY['a', 'b', 'c'], run_ats => $1)",
				[]pgtype.Timestamptz{at(time.Now()), at(time.Now().Add(-time.Hour)), v.bound}, "jobs_enqueue_many", "run_ats[3]"},
			infCase{"Fail" + v.name, true, "SELECT jobs_fail($1, 1, 'e', " + v.lit + ")", nil, "jobs_fail", "retry_at"},
			infCase{"Fail" + v.name + "Bound", true, "SELECT jobs_fail($1, 1, 'e', $2)", v.bound, "jobs_fail", "retry_at"},
			infCase{"Snooze" + v.name, true, "SELECT jobs_snooze($1, 1, " + v.lit + ")", nil, "jobs_snooze", "run_at"},
			infCase{"Snooze" + v.name + "Bound", true, "SELECT jobs_snooze($1, 1, $2)", v.bound, "jobs_snooze", "run_at"},
		)
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			conn := b.Conn
			id := queryOne[int64](t, conn, "SELECT jobs_enqueue('k', queue => 'q')")
			var args []any
			if tc.held {
				claimOne(t, conn, "w", "q")
				args = append(args, id)
			}
			if tc.arg != nil {
				args = append(args, tc.arg)
			}
			refuse(t, conn, tc.fn, tc.param, tc.sql, args...)
			want := "q/queued/1"
			if tc.held {
				want = "q/running/1"
			}
			if stats := statsWork(t, conn); !reflect.DeepEqual(stats, []string{want}) {
				t.Errorf("jobs_stats = %q, want only %s", stats, want)
			}
		})
	}
}
