package badinput

import (
	"fmt"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
)

// TestUnusualArrays: arrays PostgreSQL accepts for an array parameter but that are not the
// plain one-dimensional, 1-based arrays clients send. Other lower bounds work like the plain
// array with the same elements in the same order; more than one dimension is refused with
// 22023 naming the parameter, and nothing changes.
func TestUnusualArrays(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		run  func(t *testing.T, conn *pgx.Conn)
	}{
		{"ClaimOneQueueLowerBoundZero", func(t *testing.T, conn *pgx.Conn) {
			id := queryOne[int64](t, conn, "SELECT jobs_enqueue('k', queue => 'q')")
			got := mustCall(t, conn, "SELECT id FROM jobs_claim('w', 1, '[0:0]={q}'::text[])")
			if fmt.Sprint(got) != fmt.Sprintf("[[%d]]", id) {
				t.Errorf("jobs_claim with queues '[0:0]={q}' claimed %v, want job %d of queue q", got, id)
			}
		}},
		{"ClaimOneQueueLowerBoundTwoOnlyThatQueue", func(t *testing.T, conn *pgx.Conn) {
			queryOne[int64](t, conn, "SELECT jobs_enqueue('k', queue => 'p', priority => -1)")
			id := queryOne[int64](t, conn, "SELECT jobs_enqueue('k', queue => 'q')")
			got := mustCall(t, conn, "SELECT id FROM jobs_claim('w', 10, '[2:2]={q}'::text[])")
			if fmt.Sprint(got) != fmt.Sprintf("[[%d]]", id) {
				t.Errorf("jobs_claim with queues '[2:2]={q}' claimed %v, want only job %d of queue q", got, id)
			}
		}},
		{"ClaimTwoQueuesLowerBoundFive", func(t *testing.T, conn *pgx.Conn) {
			a := queryOne[int64](t, conn, "SELECT jobs_enqueue('k', queue => 'a')")
			bb := queryOne[int64](t, conn, "SELECT jobs_enqueue('k', queue => 'b')")
			queryOne[int64](t, conn, "SELECT jobs_enqueue('k', queue => 'c')")
			got := mustCall(t, conn, "SELECT id FROM jobs_claim('w', 3, '[5:6]={a,b}'::text[])")
			if fmt.Sprint(got) != fmt.Sprintf("[[%d] [%d]]", a, bb) {
				t.Errorf("claimed %v, want jobs %d and %d", got, a, bb)
			}
		}},
		{"ClaimOneQueueTwoDimensional", func(t *testing.T, conn *pgx.Conn) {
			queryOne[int64](t, conn, "SELECT jobs_enqueue('k', queue => 'q')")
			refuse(t, conn, "jobs_claim", "queues", "SELECT id FROM jobs_claim('w', 1, '{{q}}'::text[])")
		}},
		{"ClaimQueuesTwoByTwoBound", func(t *testing.T, conn *pgx.Conn) {
			queryOne[int64](t, conn, "SELECT jobs_enqueue('k', queue => 'q')")
			refuse(t, conn, "jobs_claim", "queues", "SELECT id FROM jobs_claim('w', 10, $1)", [][]string{{"q", "a"}, {"b", "c"}})
		}},
		{"EnqueueManyQueuesLowerBoundZeroWithHeldKey", func(t *testing.T, conn *pgx.Conn) {
			// Job 'held' holds key k in queue q. Element 1 names (q, k) and must get the
			// held job; element 2 (r, x) is new.
			held := queryOne[int64](t, conn, "SELECT jobs_enqueue('held', queue => 'q', unique_key => 'k')")
			got := mustCall(t, conn,
				"SELECT * FROM jobs_enqueue_many(ARRAY['a', 'b'], queues => '[0:1]={q,r}'::text[], unique_keys => ARRAY['k', 'x'])")
			if len(got) != 2 || got[0][0].(int64) != held || got[1][0].(int64) == held {
				t.Fatalf("jobs_enqueue_many returned %v, want the held job %d, then a new one", got, held)
			}
			if j := getJob(t, conn, held); j.Kind != "held" || j.Queue != "q" {
				t.Errorf("the held job became %+v", j)
			}
			if j := getJob(t, conn, got[1][0].(int64)); j.Kind != "b" || j.Queue != "r" || deref(j.UniqueKey) != "x" {
				t.Errorf("element 2 was stored as kind %q, queue %q, unique_key %s; want b, r, x", j.Kind, j.Queue, deref(j.UniqueKey))
			}
			if n := queryOne[int64](t, conn, "SELECT count(*) FROM jobs"); n != 2 {
				t.Errorf("%d jobs, want the held job and one new job", n)
			}
		}},
		{"EnqueueManyKindsLowerBoundZeroWithUniqueKeys", func(t *testing.T, conn *pgx.Conn) {
			got := mustCall(t, conn, "SELECT * FROM jobs_enqueue_many('[0:1]={a,b}'::text[], unique_keys => ARRAY['x', 'x'])")
			if len(got) != 2 || got[0][0] != got[1][0] {
				t.Fatalf("two elements with key x returned %v, want the same job twice", got)
			}
			if j := getJob(t, conn, got[0][0].(int64)); j.Kind != "a" {
				t.Errorf("the job holding key x has kind %q, want a (the first element)", j.Kind)
			}
		}},
		{"EnqueueManyEveryArrayOwnLowerBound", func(t *testing.T, conn *pgx.Conn) {
			// Element i of each array goes with element i of the others, counted from each
			// array's own lower bound.
			got := mustCall(t, conn, `SELECT * FROM jobs_enqueue_many(
				'[0:1]={a,b}'::text[], '[-3:-2]={"{\"n\": 1}","{\"n\": 2}"}'::jsonb[], '[7:8]={q,r}'::text[],
				'[2:3]={2001-01-01 00:00:00+00,2002-02-02 00:00:00+00}'::timestamptz[], ARRAY[10, 20],
				'[100:101]={3,4}'::int[], '[0:1]={x,NULL}'::text[])`)
			if len(got) != 2 {
				t.Fatalf("jobs_enqueue_many returned %v, want 2 jobs", got)
			}
			for i, want := range []string{
				`a {"n": 1} q 2001-01-01 00:00:00+00 10 3 x`,
				`b {"n": 2} r 2002-02-02 00:00:00+00 20 4 <NULL>`,
			} {
				s := queryOne[string](t, conn, `SELECT concat_ws(' ', kind, payload, queue, (run_at AT TIME ZONE 'UTC') || '+00',
				                                         priority, max_attempts, coalesce(unique_key, '<NULL>'))
				                                FROM jobs WHERE id = $1`, got[i][0])
				if s != want {
					t.Errorf("element %d was stored as %q, want %q", i+1, s, want)
				}
			}
		}},
		{"EnqueueManyBadElementLowerBoundZeroNamedByPosition", func(t *testing.T, conn *pgx.Conn) {
			// The element is named by its position counted from 1, whatever the lower bound.
			refuse(t, conn, "jobs_enqueue_many", "kinds[2]", "SELECT * FROM jobs_enqueue_many('[0:2]={a,\"\",c}'::text[])")
			refuse(t, conn, "jobs_enqueue_many", "queues[1]", "SELECT * FROM jobs_enqueue_many(ARRAY['a'], queues => '[5:5]={\"\"}'::text[])")
		}},
		{"EnqueueManyKindsTwoDimensional", func(t *testing.T, conn *pgx.Conn) {
			refuse(t, conn, "jobs_enqueue_many", "kinds", "SELECT * FROM jobs_enqueue_many('{{a,b},{c,d}}'::text[])")
			refuse(t, conn, "jobs_enqueue_many", "kinds", "SELECT * FROM jobs_enqueue_many('{{a}}'::text[])")
		}},
		{"EnqueueManyEachArrayTwoDimensional", func(t *testing.T, conn *pgx.Conn) {
			// Two elements in a 2x1 array, as many as kinds has: the dimensions, not the
			// length, are what is wrong.
			twoD := []string{`'{{a},{b}}'::text[]`, `'{{"{}"},{"[]"}}'::jsonb[]`, `'{{q},{r}}'::text[]`,
				`'{{2001-01-01},{2002-01-01}}'::timestamptz[]`, `'{{1},{2}}'::int[]`, `'{{3},{4}}'::int[]`, `'{{x},{y}}'::text[]`}
			for i, param := range []string{"kinds", "payloads", "queues", "run_ats", "priorities", "max_attempts", "unique_keys"} {
				args := []string{"ARRAY['a', 'b']", "NULL", "NULL", "NULL", "NULL", "NULL", "NULL"}
				args[i] = twoD[i]
				refuse(t, conn, "jobs_enqueue_many", param, "SELECT * FROM jobs_enqueue_many("+strings.Join(args, ", ")+")")
			}
		}},
		{"CompleteManyLowerBounds", func(t *testing.T, conn *pgx.Conn) {
			id := queryOne[int64](t, conn, "SELECT jobs_enqueue('k')")
			claimOne(t, conn, "w", "default")
			got := mustCall(t, conn, "SELECT * FROM jobs_complete_many($1::bigint[], '[3:3]={1}'::int[])", fmt.Sprintf("[0:0]={%d}", id))
			if fmt.Sprint(got) != fmt.Sprintf("[[%d]]", id) || getJob(t, conn, id).State != "done" {
				t.Errorf("jobs_complete_many('[0:0]={%d}', '[3:3]={1}') = %v, want job %d done", id, got, id)
			}
		}},
		{"HeartbeatManyLowerBounds", func(t *testing.T, conn *pgx.Conn) {
			a := queryOne[int64](t, conn, "SELECT jobs_enqueue('k')")
			bb := queryOne[int64](t, conn, "SELECT jobs_enqueue('k')")
			claimAll(t, conn, "w", 2, nil, "1 minute")
			got := mustCall(t, conn, "SELECT * FROM jobs_heartbeat_many($1::bigint[], '[-1:0]={1,1}'::int[], '1 day') ORDER BY 1",
				fmt.Sprintf("[5:6]={%d,%d}", a, bb))
			if fmt.Sprint(got) != fmt.Sprintf("[[%d true] [%d true]]", a, bb) {
				t.Errorf("jobs_heartbeat_many = %v, want jobs %d and %d extended", got, a, bb)
			}
		}},
		{"CompleteManyTwoDimensional", func(t *testing.T, conn *pgx.Conn) {
			id := queryOne[int64](t, conn, "SELECT jobs_enqueue('k')")
			claimOne(t, conn, "w", "default")
			refuse(t, conn, "jobs_complete_many", "ids", "SELECT * FROM jobs_complete_many($1::bigint[], '{{1}}'::int[])", fmt.Sprintf("{{%d}}", id))
			refuse(t, conn, "jobs_complete_many", "ids", "SELECT * FROM jobs_complete_many($1::bigint[], '{1}'::int[])", fmt.Sprintf("{{%d}}", id))
			refuse(t, conn, "jobs_complete_many", "attempts", "SELECT * FROM jobs_complete_many(ARRAY[$1::bigint], $2)", id, [][]int32{{1}})
		}},
		{"HeartbeatManyTwoDimensional", func(t *testing.T, conn *pgx.Conn) {
			id := queryOne[int64](t, conn, "SELECT jobs_enqueue('k')")
			claimOne(t, conn, "w", "default")
			refuse(t, conn, "jobs_heartbeat_many", "ids", "SELECT * FROM jobs_heartbeat_many($1, ARRAY[1, 1], '1 day')", [][]int64{{id}, {id}})
			refuse(t, conn, "jobs_heartbeat_many", "attempts", "SELECT * FROM jobs_heartbeat_many(ARRAY[$1::bigint], '{{1}}'::int[], '1 day')", id)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			tc.run(t, b.Conn)
		})
	}
}
