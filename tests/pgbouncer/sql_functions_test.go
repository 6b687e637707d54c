package pgbouncer_test

import (
	"fmt"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
)

// The SQL functions need no session state: called one statement at a time through PgBouncer
// in transaction mode, from more clients than it has server connections, every job is
// claimed exactly once and completed, failed and heartbeated as on a direct connection,
// in each of pgx's query exec modes that do not use named prepared statements.
func TestSQLFunctions(t *testing.T) {
	skipIfShort(t)
	t.Parallel()
	b := setup(t)
	for _, mode := range []string{"exec", "cache_describe", "simple_protocol"} {
		t.Run(mode, func(t *testing.T) {
			pool := b.pooledPool(t, mode, 16)
			ctx := t.Context()
			mustExec(t, b.direct, "DELETE FROM jobs")
			const n = 600
			var ids []int64
			rows, err := pool.Query(ctx, "SELECT jobs_enqueue_many(array_fill('sql'::text, ARRAY[$1::int]), NULL)", n)
			if err != nil {
				t.Fatal(err)
			}
			ids, err = pgx.CollectRows(rows, pgx.RowTo[int64])
			if err != nil {
				t.Fatal(err)
			}
			if len(ids) != n {
				t.Fatalf("jobs_enqueue_many returned %d ids, want %d", len(ids), n)
			}

			// 12 workers claim batches of 7 and treat them in turn: heartbeat, then
			// complete_many for most, fail for every fifth, complete for every seventh.
			var mu sync.Mutex
			claimed := make(map[int64]int)
			var wg sync.WaitGroup
			errs := make(chan error, 12)
			for w := range 12 {
				wg.Go(func() {
					worker := fmt.Sprintf("w%d", w)
					for {
						rows, err := pool.Query(ctx, "SELECT id, attempt FROM jobs_claim($1, 7, NULL, interval '1 minute')", worker)
						if err != nil {
							errs <- fmt.Errorf("jobs_claim: %w", err)
							return
						}
						type claim struct {
							ID      int64
							Attempt int32
						}
						got, err := pgx.CollectRows(rows, pgx.RowToStructByPos[claim])
						if err != nil {
							errs <- fmt.Errorf("jobs_claim: %w", err)
							return
						}
						if len(got) == 0 {
							return
						}
						var doneIDs []int64
						var doneAttempts []int32
						for _, c := range got {
							mu.Lock()
							claimed[c.ID]++
							mu.Unlock()
							var held bool
							if err := pool.QueryRow(ctx, "SELECT jobs_heartbeat($1, $2, interval '2 minutes')", c.ID, c.Attempt).Scan(&held); err != nil || !held {
								errs <- fmt.Errorf("jobs_heartbeat(%d): held %v, %v", c.ID, held, err)
								return
							}
							switch {
							case c.ID%5 == 0:
								var state string
								if err := pool.QueryRow(ctx, "SELECT jobs_fail($1, $2, 'boom', now() + interval '1 hour')::text", c.ID, c.Attempt).Scan(&state); err != nil || state != "queued" {
									errs <- fmt.Errorf("jobs_fail(%d): state %q, %v", c.ID, state, err)
									return
								}
							case c.ID%7 == 0:
								var ok bool
								if err := pool.QueryRow(ctx, "SELECT jobs_complete($1, $2)", c.ID, c.Attempt).Scan(&ok); err != nil || !ok {
									errs <- fmt.Errorf("jobs_complete(%d): %v, %v", c.ID, ok, err)
									return
								}
							default:
								doneIDs = append(doneIDs, c.ID)
								doneAttempts = append(doneAttempts, c.Attempt)
							}
						}
						if len(doneIDs) == 0 {
							continue
						}
						var beat []int64
						rows, err = pool.Query(ctx, "SELECT id FROM jobs_heartbeat_many($1, $2, interval '2 minutes') AS t(id)", doneIDs, doneAttempts)
						if err == nil {
							beat, err = pgx.CollectRows(rows, pgx.RowTo[int64])
						}
						if err != nil || len(beat) != len(doneIDs) {
							errs <- fmt.Errorf("jobs_heartbeat_many: %d of %d held, %v", len(beat), len(doneIDs), err)
							return
						}
						var completed []int64
						rows, err = pool.Query(ctx, "SELECT id FROM jobs_complete_many($1, $2) AS t(id)", doneIDs, doneAttempts)
						if err == nil {
							completed, err = pgx.CollectRows(rows, pgx.RowTo[int64])
						}
						if err != nil || len(completed) != len(doneIDs) {
							errs <- fmt.Errorf("jobs_complete_many: %d of %d completed, %v", len(completed), len(doneIDs), err)
							return
						}
					}
				})
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Error(err)
			}
			if t.Failed() {
				return
			}
			for _, id := range ids {
				if claimed[id] != 1 {
					t.Errorf("job %d claimed %d times, want 1", id, claimed[id])
				}
			}
			var failed, done, other int
			if err := b.direct.QueryRow(ctx, `SELECT
				count(*) FILTER (WHERE state = 'queued' AND attempts = 1 AND last_error = 'boom' AND id % 5 = 0),
				count(*) FILTER (WHERE state = 'done' AND attempts = 1 AND id % 5 <> 0),
				count(*) FILTER (WHERE NOT ((state = 'queued' AND id % 5 = 0) OR (state = 'done' AND id % 5 <> 0)))
				FROM jobs`).Scan(&failed, &done, &other); err != nil {
				t.Fatal(err)
			}
			if failed+done != n || other != 0 {
				t.Errorf("%d failed and %d done of %d, %d in an unexpected state", failed, done, n, other)
			}

		})
	}
}
