package driver_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

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

// A fetch loop that claims while completions are pending records them in the same call
// (jobs_complete_and_claim): the completer, told to wait 3 s, never gets to send them
// itself while the loop keeps claiming, yet every job is done at its first attempt, each
// completion is reported once, and the claims say how many completions they carried.
func TestClaimCarriesPendingCompletions(t *testing.T) {
	t.Parallel()
	b := setup(t)
	const n = 60
	hs := driver.NewHandlers()
	driver.AddHandler(hs, "noop", func(ctx context.Context, job *driver.Job[struct{}]) error { return nil }, nil)
	rec := &cycleRecorder{}
	cfg := baseConfig(b, hs, map[string]driver.QueueConfig{"default": {Slots: 2, BatchSize: 2}})
	cfg.CompleteBatchDelay = 3 * time.Second
	cfg.Hook = rec
	params := make([]driver.EnqueueParams, n)
	for i := range params {
		params[i] = driver.EnqueueParams{Kind: "noop"}
	}
	if _, err := driver.EnqueueMany(context.Background(), b.pool, params); err != nil {
		t.Fatal(err)
	}
	startClient(t, b.pool, cfg)
	waitUntil(t, 20*time.Second, "every job done", func() bool {
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
	carried := 0
	for _, c := range rec.carrying {
		carried += c.Completed
		if c.Wake < driver.WakeStart || c.Wake > driver.WakeBacklog || c.Claimed > c.Asked {
			t.Errorf("claim %+v: want a known wake source and at most Asked claimed", c)
		}
	}
	// All but the last completions, which the last (short) claim cannot carry, ride along
	// with claims.
	if carried < n/2 || carried > n {
		t.Fatalf("claims carried %d completions of %d, want most of them", carried, n)
	}
}

// A jobs_complete_and_claim call whose connection dies is not lost or repeated blindly: its
// completion goes back to the completer and out again (fenced), and its claim, rolled back
// with it, is made again. Each job is done at its first attempt and runs once.
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
	cfg := baseConfig(b, hs, map[string]driver.QueueConfig{"default": {Slots: 1, BatchSize: 1}})
	cfg.Lease = time.Minute
	cfg.RequeueInterval = -1
	cfg.CompleteBatchDelay = time.Minute // only the fetch loop's claims send completions
	startClient(t, b.pool, cfg)

	first := mustEnqueue(t, b.pool, "first", nil, nil)
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

	killed := 0
	for killed < 2 {
		var n int
		waitUntil(t, 10*time.Second, "a blocked jobs_complete_and_claim", func() bool {
			n = queryInt(t, b.pool, `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
				WHERE datname = current_database() AND query LIKE '%jobs_complete_and_claim%' AND wait_event_type = 'Lock'`)
			return n > 0
		})
		killed += n
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
}
