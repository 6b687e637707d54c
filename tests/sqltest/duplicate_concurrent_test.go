package sqltest

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// enqueueCall is one jobs_enqueue of TestUniqueKeyDuplicatesUnder16Enqueuers: the id it
// returned and its place in commit order among the calls that touched the same job.
type enqueueCall struct {
	id, seq        int64
	session, round int
}

// TestUniqueKeyDuplicatesUnder16Enqueuers: 16 sessions enqueue one key at the same moment,
// round after round, while two workers claim, fail, snooze and complete its jobs and an
// observer counts them. What each on_duplicate promises must hold at every observation and
// at the end:
//   - keep: at most one live job of the key; each job keeps its creator's payload;
//   - replace: at most one queued job of the key (and one jobs_queued row); each job carries
//     the payload of the last committed call that returned it (no lost update);
//   - unique_for: a job of the key starts no earlier than unique_for after the previous one
//     finished, so at most one start per period.
func TestUniqueKeyDuplicatesUnder16Enqueuers(t *testing.T) {
	t.Parallel()
	const (
		sessions = 16
		rounds   = 40
		period   = 150 * time.Millisecond
	)
	for _, mode := range []string{"keep", "replace", "unique_for"} {
		t.Run(mode, func(t *testing.T) {
			b := setup(t)
			ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
			defer cancel()
			mustExec(t, b.Conn, "CREATE SEQUENCE public.dup_order")
			onDuplicate, uniqueFor := "keep", any(nil)
			switch mode {
			case "replace":
				onDuplicate = "replace"
			case "unique_for":
				uniqueFor = fmt.Sprintf("%d milliseconds", period.Milliseconds())
			}
			conns := make([]*pgx.Conn, sessions)
			for i := range conns {
				conns[i] = b.Connect(t)
			}

			stop := make(chan struct{})
			var bg sync.WaitGroup
			bgErrs := make(chan error, 8)
			// Two workers: fail (attempts left), snooze or complete what they claim; with
			// unique_for, complete only (a retried job is the same job starting again).
			for w := range 2 {
				conn := b.Connect(t)
				bg.Add(1)
				go func() {
					defer bg.Done()
					for n := 0; ; n++ {
						select {
						case <-stop:
							return
						default:
						}
						jobs, err := tryClaim(ctx, conn, fmt.Sprintf("w%d", w), 1, []string{"q"}, "1 minute")
						if err != nil {
							bgErrs <- fmt.Errorf("claim: %w", err)
							return
						}
						if len(jobs) == 0 {
							time.Sleep(2 * time.Millisecond)
							continue
						}
						j := jobs[0]
						time.Sleep(time.Duration(n%3) * time.Millisecond)
						sql := "SELECT jobs_complete($1, $2)"
						if mode != "unique_for" {
							switch n % 4 {
							case 0:
								sql = "SELECT jobs_fail($1, $2, 'boom', now())"
							case 1:
								sql = "SELECT jobs_snooze($1, $2, now())"
							}
						}
						if _, err := conn.Exec(ctx, sql, j.ID, j.Attempt); err != nil {
							bgErrs <- fmt.Errorf("%s: %w", sql, err)
							return
						}
					}
				}()
			}
			// The observer: queued, live and jobs_queued rows of the key, in one snapshot.
			var maxQueued, maxLive, maxRows, observations int64
			obs := b.Connect(t)
			bg.Add(1)
			go func() {
				defer bg.Done()
				for {
					select {
					case <-stop:
						return
					default:
					}
					var queued, live, rows int64
					err := obs.QueryRow(ctx, `SELECT count(*) FILTER (WHERE state = 'queued'),
						       count(*) FILTER (WHERE state NOT IN ('done', 'dead', 'cancelled')),
						       (SELECT count(*) FROM jobs_queued q JOIN jobs j2 ON j2.id = q.id
						        WHERE j2.unique_key = 'k' AND j2.state = 'queued')
						FROM jobs WHERE unique_key = 'k'`).Scan(&queued, &live, &rows)
					if err != nil {
						bgErrs <- fmt.Errorf("observe: %w", err)
						return
					}
					observations++
					maxQueued, maxLive, maxRows = max(maxQueued, queued), max(maxLive, live), max(maxRows, rows)
				}
			}()

			var calls []enqueueCall
			for round := range rounds {
				got := make([]enqueueCall, sessions)
				errs := make([]error, sessions)
				start := make(chan struct{})
				var wg sync.WaitGroup
				for i, conn := range conns {
					wg.Add(1)
					go func() {
						defer wg.Done()
						<-start
						errs[i] = pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
							// The sequence value is taken while the call's locks are held, so
							// it orders the calls that touched one job as their commits do.
							return tx.QueryRow(ctx, `SELECT jobs_enqueue('dup', jsonb_build_object('s', $1::int, 'r', $2::int),
								queue => 'q', unique_key => 'k', on_duplicate => $3, unique_for => $4::interval),
								nextval('public.dup_order')`, i, round, onDuplicate, uniqueFor).Scan(&got[i].id, &got[i].seq)
						})
						got[i].session, got[i].round = i, round
					}()
				}
				close(start)
				wg.Wait()
				for i, err := range errs {
					if err != nil {
						t.Fatalf("round %d, session %d: %v", round, i, err)
					}
				}
				calls = append(calls, got...)
				time.Sleep(time.Duration(round%4) * 10 * time.Millisecond)
			}
			close(stop)
			bg.Wait()
			close(bgErrs)
			for err := range bgErrs {
				t.Fatal(err)
			}

			payloads := map[int64]string{}
			rows, err := b.Conn.Query(ctx, "SELECT id, payload::text FROM jobs WHERE unique_key = 'k'")
			if err != nil {
				t.Fatal(err)
			}
			for rows.Next() {
				var id int64
				var p string
				if err := rows.Scan(&id, &p); err != nil {
					t.Fatal(err)
				}
				payloads[id] = p
			}
			if err := rows.Err(); err != nil {
				t.Fatal(err)
			}
			// The call that decides each job's payload: its creator (keep, unique_for) or the
			// last committed call that returned it (replace).
			decisive := map[int64]enqueueCall{}
			for _, c := range calls {
				d, ok := decisive[c.id]
				if !ok || (onDuplicate == "replace") == (c.seq > d.seq) {
					decisive[c.id] = c
				}
			}
			lost := 0
			for id, c := range decisive {
				p, ok := payloads[id]
				if !ok {
					t.Fatalf("call returned id %d, which is no job of the key", id)
				}
				var got struct{ S, R int }
				if err := json.Unmarshal([]byte(p), &got); err != nil {
					t.Fatal(err)
				}
				if got.S != c.session || got.R != c.round {
					lost++
					t.Errorf("job %d has payload %s, want session %d round %d (seq %d)", id, p, c.session, c.round, c.seq)
				}
			}
			superseded := queryOne[int64](t, b.Conn, "SELECT count(*) FROM jobs WHERE unique_key = 'k' AND last_error LIKE 'superseded by job %'")
			var closeStarts, maxStartsPerPeriod int64
			if err := b.Conn.QueryRow(ctx, `
				SELECT count(*) FILTER (WHERE started_at < prev_finished + $1::interval),
				       coalesce(max(in_period), 0)
				FROM (SELECT started_at,
				             lag(finished_at) OVER (ORDER BY started_at) AS prev_finished,
				             count(*) OVER (ORDER BY started_at RANGE BETWEEN CURRENT ROW
				                            AND $1::interval - interval '1 microsecond' FOLLOWING) AS in_period
				      FROM jobs WHERE unique_key = 'k' AND started_at IS NOT NULL) AS s`,
				fmt.Sprintf("%d milliseconds", period.Milliseconds())).Scan(&closeStarts, &maxStartsPerPeriod); err != nil {
				t.Fatal(err)
			}
			t.Logf("%s: %d enqueues by %d sessions in %d rounds made %d jobs; %d observations: most queued %d, most live %d, most jobs_queued rows %d; payloads lost %d; superseded %d; starts per %v: at most %d, %d sooner than %v after the previous job's end",
				mode, len(calls), sessions, rounds, len(payloads), observations, maxQueued, maxLive, maxRows, lost, superseded,
				period, maxStartsPerPeriod, closeStarts, period)
			if maxQueued > 1 || maxRows > 1 {
				t.Errorf("%d queued jobs (%d jobs_queued rows) of one key at once, want at most 1", maxQueued, maxRows)
			}
			if mode != "replace" && maxLive > 1 {
				t.Errorf("%d live jobs of one key at once, want at most 1", maxLive)
			}
			if mode == "unique_for" && (closeStarts > 0 || maxStartsPerPeriod > 1) {
				t.Errorf("%d starts within %v of the previous job's end, %d starts in one period; want 0 and at most 1", closeStarts, period, maxStartsPerPeriod)
			}
			if mode == "unique_for" && len(payloads) < 2 {
				t.Errorf("only %d jobs: the run never got past a period", len(payloads))
			}
			if mode == "replace" && superseded == 0 {
				t.Log("no superseded job came back in this run (the path is covered by TestUniqueKeyReplace)")
			}
		})
	}
}

// TestEnqueueManyReplacesWithoutDeadlock: calls of jobs_enqueue_many that replace the same
// keys in different input orders lock the keys' jobs in one order (their ids'), so they
// never deadlock; each key's job ends with the payload of one call, the last to commit.
// (Against a completion batch: tests/isolation/specs/replace_many_complete_many.spec.)
func TestEnqueueManyReplacesWithoutDeadlock(t *testing.T) {
	t.Parallel()
	b := setup(t)
	mustExec(t, b.Conn, `SELECT jobs_enqueue('k', '{}', 'dlq', unique_key => k)
		FROM unnest(ARRAY['a', 'b', 'c', 'd']) AS k`)
	const sessions, calls = 8, 60
	orders := [][]string{{"a", "b", "c", "d"}, {"d", "c", "b", "a"}, {"b", "d", "a", "c"}}
	var wg sync.WaitGroup
	errs := make(chan error, sessions)
	for s := range sessions {
		conn := b.Connect(t)
		wg.Add(1)
		go func() {
			defer wg.Done()
			keys := orders[s%len(orders)]
			for i := range calls {
				payload := fmt.Sprintf(`{"s": %d, "i": %d}`, s, i)
				_, err := conn.Exec(t.Context(), `SELECT jobs_enqueue_many(
					array_fill('k'::text, ARRAY[4]), array_fill($1::jsonb, ARRAY[4]),
					array_fill('dlq'::text, ARRAY[4]), unique_keys => $2::text[],
					on_duplicates => array_fill('replace'::text, ARRAY[4]))`, payload, keys)
				if err != nil {
					errs <- fmt.Errorf("session %d call %d: %w", s, i, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	var jobs, payloads int
	if err := b.Conn.QueryRow(t.Context(), `SELECT count(*), count(DISTINCT payload)
		FROM jobs WHERE queue = 'dlq'`).Scan(&jobs, &payloads); err != nil {
		t.Fatal(err)
	}
	// Each call replaced all four keys in one transaction, so they end alike.
	if jobs != 4 || payloads != 1 {
		t.Fatalf("queue dlq holds %d jobs with %d distinct payloads, want 4 jobs with 1", jobs, payloads)
	}
}
