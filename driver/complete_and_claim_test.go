package driver_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/skiplock/skiplock/driver"
	"github.com/skiplock/skiplock/tests/pgtest"
)

// cycleRecorder is a Hook and ClaimHook that counts completions and keeps the claims that
// carried completions.
type cycleRecorder struct {
	completed atomic.Int64
	lost      atomic.Int64

	mu       sync.Mutex
	carrying []driver.ClaimEvent
}

func (r *cycleRecorder) HandleEvent(e *driver.Event) {
	switch e.Kind {
	case driver.EventCompleted:
		r.completed.Add(1)
	case driver.EventLost:
		r.lost.Add(1)
	}
}

func (r *cycleRecorder) HandleClaim(e *driver.ClaimEvent) {
	if e.Completed == 0 {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.carrying = append(r.carrying, *e)
}

// A completion batch sent while the fetch loop has free slots and reason to claim claims
// for it in the same call (jobs_complete_and_claim). With the loop's own claims at least
// 50 ms apart, most jobs are claimed that way; every job is still done at its first
// attempt, each completion is reported once, and those claims report what they carried.
func TestCompletionBatchClaimsForFetchLoop(t *testing.T) {
	t.Parallel()
	b := setup(t)
	const n = 200
	hs := driver.NewHandlers()
	driver.AddHandler(hs, "noop", func(ctx context.Context, job *driver.Job[struct{}]) error { return nil }, nil)
	rec := &cycleRecorder{}
	cfg := baseConfig(b, hs, map[string]driver.QueueConfig{"default": {Slots: 4, BatchSize: 4}})
	cfg.FetchCooldown = 50 * time.Millisecond
	cfg.CompleteBatchSize = 2
	cfg.Hook = rec
	params := make([]driver.EnqueueParams, n)
	for i := range params {
		params[i] = driver.EnqueueParams{Kind: "noop"}
	}
	if _, err := driver.EnqueueMany(context.Background(), b.pool, params); err != nil {
		t.Fatal(err)
	}
	startClient(t, b.pool, cfg)
	waitUntil(t, 30*time.Second, "every job done", func() bool {
		return queryInt(t, b.pool, "SELECT count(*) FROM jobs WHERE state = 'done'") == n
	})
	if bad := queryInt(t, b.pool, "SELECT count(*) FROM jobs WHERE attempts <> 1"); bad != 0 {
		t.Fatalf("%d jobs not done at attempt 1", bad)
	}
	waitUntil(t, 10*time.Second, "a completed event per job", func() bool { return rec.completed.Load() == n })
	if l := rec.lost.Load(); l != 0 {
		t.Fatalf("%d lost events, want 0", l)
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	completed, claimed := 0, 0
	for _, c := range rec.carrying {
		completed += c.Completed
		claimed += c.Claimed
		if c.Wake < driver.WakeStart || c.Wake > driver.WakeBacklog || c.Claimed > c.Asked || c.Asked > 4 {
			t.Errorf("claim %+v: want a known wake source and at most Asked claimed, Asked at most 4", c)
		}
	}
	if claimed < n/2 || completed < n/2 {
		t.Fatalf("completion batches claimed %d jobs and carried %d completions of %d, want most", claimed, completed, n)
	}
}

// A jobs_complete_and_claim call whose connection dies is retried: its completions again
// (fenced), its claim as a new one (the killed call's was rolled back, and one whose result
// was lost would wait for its lease, never start). Each job is done at its first attempt
// and runs once.
func TestCompleteAndClaimRetriedAfterConnectionLoss(t *testing.T) {
	t.Parallel()
	b := setup(t)
	started := make(chan struct{})
	proceed := make(chan struct{})
	var runs sync.Map // job id -> *atomic.Int32
	hs := driver.NewHandlers()
	driver.AddHandler(hs, "first", func(ctx context.Context, job *driver.Job[struct{}]) error {
		close(started)
		<-proceed
		return nil
	}, nil)
	driver.AddHandler(hs, "second", func(ctx context.Context, job *driver.Job[struct{}]) error {
		v, _ := runs.LoadOrStore(job.ID, new(atomic.Int32))
		v.(*atomic.Int32).Add(1)
		return nil
	}, nil)
	// The first claim fills its batch of one, so the loop wants to claim again, but waits
	// out its cooldown: the completion batch claims into the free slot instead.
	cfg := baseConfig(b, hs, map[string]driver.QueueConfig{"default": {Slots: 2, BatchSize: 1}})
	cfg.FetchCooldown = time.Minute
	cfg.Lease = time.Minute
	cfg.RequeueInterval = -1
	var combined atomic.Int32
	cfg.Hook = claimHookFunc(func(e *driver.ClaimEvent) {
		if e.Completed > 0 {
			combined.Add(1)
		}
	})
	cfg.CompleteBatchSize = 1 // each completion goes out at once, claiming for the loop

	first := mustEnqueue(t, b.pool, "first", nil, nil) // claimed by the client's first claim
	startClient(t, b.pool, cfg)
	<-started
	// Hold the first job's row lock, so that the call completing it blocks where we can
	// kill its connection.
	blocker := pgtest.NewConn(t, b.url)
	ctx := context.Background()
	if _, err := blocker.Exec(ctx, "BEGIN"); err != nil {
		t.Fatal(err)
	}
	if _, err := blocker.Exec(ctx, "SELECT 1 FROM jobs WHERE id = $1 FOR UPDATE", first); err != nil {
		t.Fatal(err)
	}
	second := mustEnqueue(t, b.pool, "second", nil, nil)
	close(proceed)

	// Kill two different calls (a terminated backend may still show as waiting for a moment).
	killed := map[int]bool{}
	for len(killed) < 2 {
		waitUntil(t, 10*time.Second, "a new blocked jobs_complete_and_claim", func() bool {
			pid := queryInt(t, b.pool, `SELECT coalesce(min(pid), 0) FROM pg_stat_activity
				WHERE datname = current_database() AND query LIKE '%jobs_complete_and_claim%' AND wait_event_type = 'Lock'
				  AND NOT pid = ANY ($1)`, append([]int{}, slices.Collect(maps.Keys(killed))...)) // never NULL
			if pid == 0 {
				return false
			}
			killed[pid] = true
			queryInt(t, b.pool, "SELECT count(pg_terminate_backend($1))", pid)
			return true
		})
	}
	if j := getJob(t, b.pool, second); j.State != "queued" {
		t.Fatalf("second job is %+v while the calls were killed, want queued (their claims rolled back)", j)
	}
	if _, err := blocker.Exec(ctx, "COMMIT"); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 10*time.Second, "first job done", jobStateIs(t, b.pool, first, "done"))
	waitUntil(t, 10*time.Second, "second job done", jobStateIs(t, b.pool, second, "done"))
	for _, id := range []int64{first, second} {
		if j := getJob(t, b.pool, id); j.Attempts != 1 {
			t.Fatalf("job %d = %+v, want done at attempt 1", id, j)
		}
	}
	if v, ok := runs.Load(second); !ok || v.(*atomic.Int32).Load() != 1 {
		t.Fatalf("second job ran %v times, want once", v)
	}
	if combined.Load() == 0 {
		t.Fatal("no claim carried a completion: jobs_complete_and_claim claimed nothing")
	}
}

// claimHookFunc is a Hook that passes only claims to a function.
type claimHookFunc func(e *driver.ClaimEvent)

func (f claimHookFunc) HandleEvent(*driver.Event)        {}
func (f claimHookFunc) HandleClaim(e *driver.ClaimEvent) { f(e) }

// On a schema without jobs_complete_and_claim (older than version 20) the completer falls
// back to completing alone: every job is done at its first attempt, none waits for its lease.
func TestCompletionWithoutCompleteAndClaim(t *testing.T) {
	t.Parallel()
	b := setup(t)
	if _, err := b.pool.Exec(context.Background(),
		"DROP FUNCTION jobs_complete_and_claim(text, bigint[], integer[], integer, text[], interval, jsonb[])"); err != nil {
		t.Fatal(err)
	}
	const n = 100
	hs := driver.NewHandlers()
	driver.AddHandler(hs, "noop", func(ctx context.Context, job *driver.Job[struct{}]) error { return nil }, nil)
	cfg := baseConfig(b, hs, map[string]driver.QueueConfig{"default": {Slots: 4, BatchSize: 4}})
	cfg.Lease = time.Minute // a dropped completion would show as a job not done in time
	cfg.CompleteBatchSize = 2
	enqueueN(t, b, "noop", n)
	startClient(t, b.pool, cfg)
	waitUntil(t, 20*time.Second, "every job done", func() bool {
		return queryInt(t, b.pool, "SELECT count(*) FROM jobs WHERE state = 'done' AND attempts = 1") == n
	})
}

// replyTrap is a net.Conn that, once armed, drops the next bytes the server sends and
// closes the connection: a call whose reply is lost after it committed.
type replyTrap struct {
	net.Conn
	armed atomic.Bool
}

func (c *replyTrap) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 && c.armed.Load() {
		_ = c.Conn.Close()
		return 0, errors.New("test: reply dropped")
	}
	return n, err
}

// trappedPool is a pool whose connections are replyTraps, found by their backend's pid.
func trappedPool(t *testing.T, url string) (*pgxpool.Pool, func(pid int) *replyTrap) {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxConns = 20
	var mu sync.Mutex
	traps := map[uint32]*replyTrap{}
	var dialer net.Dialer
	cfg.ConnConfig.DialFunc = func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := dialer.DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return &replyTrap{Conn: c}, nil
	}
	cfg.AfterConnect = func(ctx context.Context, c *pgx.Conn) error {
		trap, ok := c.PgConn().Conn().(*replyTrap)
		if !ok {
			return fmt.Errorf("connection is a %T, not the replyTrap dialled", c.PgConn().Conn())
		}
		mu.Lock()
		defer mu.Unlock()
		traps[c.PgConn().PID()] = trap
		return nil
	}
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool, func(pid int) *replyTrap {
		mu.Lock()
		defer mu.Unlock()
		return traps[uint32(pid)]
	}
}

// A completion call that committed but whose reply was lost is retried; the retry finds the
// job done already (by that very call), and the hook hears that it completed, not that it
// was lost. Both forms of the call: jobs_complete_and_claim (the fetch loop's first claim
// filled its batch, so it wants more and has a free slot) and jobs_complete_many (on a
// schema without jobs_complete_and_claim, so that no claim of the loop can make the call
// the combined one); and with done_retention 0, where the call deletes the job, so that the
// retry finds none (within the job's lease, no other worker can have taken it).
func TestCompletionReplyLostAfterCommit(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		call    string
		deletes bool // done_retention 0: the completion deletes the job
	}{
		{"CompleteAndClaim", "jobs_complete_and_claim", false},
		{"CompleteMany", "jobs_complete_many", false},
		{"CompleteAndClaimDeleting", "jobs_complete_and_claim", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			if tc.deletes {
				if _, err := b.pool.Exec(context.Background(), "UPDATE jobs_settings SET done_retention = '0'"); err != nil {
					t.Fatal(err)
				}
			}
			if tc.call == "jobs_complete_many" {
				if _, err := b.pool.Exec(context.Background(),
					"DROP FUNCTION jobs_complete_and_claim(text, bigint[], integer[], integer, text[], interval, jsonb[])"); err != nil {
					t.Fatal(err)
				}
			}
			pool, trapOf := trappedPool(t, b.url)
			started := make(chan struct{})
			proceed := make(chan struct{})
			hs := driver.NewHandlers()
			driver.AddHandler(hs, "first", func(ctx context.Context, job *driver.Job[struct{}]) error {
				close(started)
				<-proceed
				return nil
			}, nil)
			rec := &cycleRecorder{}
			cfg := baseConfig(b, hs, map[string]driver.QueueConfig{"default": {Slots: 2, BatchSize: 1}})
			cfg.FetchCooldown = time.Minute // the loop claims once; a completion may claim for it
			cfg.PollInterval = time.Minute  // and no poll gives the loop a reason to claim
			cfg.Lease = time.Minute
			cfg.RequeueInterval = -1
			cfg.CompleteBatchSize = 1
			cfg.Hook = rec

			id := mustEnqueue(t, b.pool, "first", nil, nil)
			startClient(t, pool, cfg)
			<-started
			// Hold the job's row, so that its completion call waits where its connection can
			// be armed; then let it commit and lose its reply.
			blocker := pgtest.NewConn(t, b.url)
			ctx := context.Background()
			if _, err := blocker.Exec(ctx, "BEGIN"); err != nil {
				t.Fatal(err)
			}
			if _, err := blocker.Exec(ctx, "SELECT 1 FROM jobs WHERE id = $1 FOR UPDATE", id); err != nil {
				t.Fatal(err)
			}
			close(proceed)
			var pid int
			waitUntil(t, 10*time.Second, "a blocked "+tc.call, func() bool {
				pid = queryInt(t, b.pool, `SELECT coalesce(min(pid), 0) FROM pg_stat_activity
					WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE '%' || $1 || '%'`, tc.call)
				return pid != 0
			})
			trap := trapOf(pid)
			if trap == nil {
				t.Fatalf("no connection of the client's pool has backend pid %d", pid)
			}
			trap.armed.Store(true)
			if _, err := blocker.Exec(ctx, "COMMIT"); err != nil {
				t.Fatal(err)
			}
			waitUntil(t, 10*time.Second, "the job's outcome reported", func() bool {
				return rec.completed.Load()+rec.lost.Load() > 0
			})
			if tc.deletes {
				if n := queryInt(t, b.pool, "SELECT count(*) FROM jobs"); n != 0 {
					t.Fatalf("%d jobs left, want the completed one deleted", n)
				}
			} else if j := getJob(t, b.pool, id); j.State != "done" || j.Attempts != 1 {
				t.Fatalf("job = %+v, want done at attempt 1", j)
			}
			if c, l := rec.completed.Load(), rec.lost.Load(); c != 1 || l != 0 {
				t.Fatalf("%d completed and %d lost events, want 1 completed and none lost", c, l)
			}
		})
	}
}
