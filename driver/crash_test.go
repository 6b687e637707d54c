package driver_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/skiplock/skiplock"
	"github.com/skiplock/skiplock/driver"
	"github.com/skiplock/skiplock/internal/pglocal"
	"github.com/skiplock/skiplock/tests/pgtest"
)

func createEffectTables(t *testing.T, db driver.Executor) {
	t.Helper()
	if _, err := db.Exec(context.Background(), effectSchema); err != nil {
		t.Fatal(err)
	}
}

func enqueueEffects(t *testing.T, db driver.Executor, n int, args effectArgs) {
	t.Helper()
	params := make([]driver.EnqueueParams, n)
	for i := range params {
		params[i] = driver.EnqueueParams{Kind: "effect", Payload: args}
	}
	if _, err := driver.EnqueueMany(context.Background(), db, params); err != nil {
		t.Fatal(err)
	}
}

// checkExactlyOnce asserts that every one of the n jobs is done and that its effect
// happened exactly once, in the attempt that completed it.
func checkExactlyOnce(t *testing.T, db driver.Executor, n int) {
	t.Helper()
	effects := queryInt(t, db, "SELECT count(*) FROM effects")
	distinct := queryInt(t, db, "SELECT count(DISTINCT job_id) FROM effects")
	done := queryInt(t, db, "SELECT count(*) FROM jobs WHERE state = 'done'")
	total := queryInt(t, db, "SELECT count(*) FROM jobs")
	mismatched := queryInt(t, db, "SELECT count(*) FROM effects e JOIN jobs j ON j.id = e.job_id WHERE e.attempt <> j.attempts")
	if effects != n || distinct != n || done != n || total != n || mismatched != 0 {
		t.Fatalf("%d effects for %d distinct jobs, %d of %d jobs done, %d effects not from the completing attempt; want %d of each and 0",
			effects, distinct, done, total, mismatched, n)
	}
}

func waitEffects(t *testing.T, db driver.Executor, n int, timeout time.Duration) {
	t.Helper()
	waitUntil(t, timeout, fmt.Sprintf("%d effects", n), func() bool {
		return queryInt(t, db, "SELECT count(*) FROM effects") >= n &&
			queryInt(t, db, "SELECT count(*) FROM jobs WHERE state <> 'done'") == 0
	})
}

// 20,000 jobs run by 4 worker processes of 32 slots each: every job's effect, committed in
// the transaction that completes it, happens exactly once.
func TestExactlyOnceFourProcesses(t *testing.T) {
	t.Parallel()
	b := setup(t)
	createEffectTables(t, b.pool)
	const n = 20000
	enqueueEffects(t, b.pool, n, effectArgs{})

	var workers []*helperProcess
	for i := range 4 {
		workers = append(workers, startHelper(t, "worker", b.url, fmt.Sprintf("w%d", i), 32, 2*time.Second))
	}
	waitEffects(t, b.pool, n, 3*time.Minute)
	for _, w := range workers {
		w.stop(t)
	}
	checkExactlyOnce(t, b.pool, n)

	var secs float64
	if err := b.pool.QueryRow(context.Background(), "SELECT extract(epoch FROM max(at) - min(at)) FROM effects").Scan(&secs); err != nil {
		t.Fatal(err)
	}
	rows, err := b.pool.Query(context.Background(), "SELECT worker, count(*) FROM effects GROUP BY worker ORDER BY worker")
	if err != nil {
		t.Fatal(err)
	}
	perWorker, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (string, error) {
		var w string
		var c int
		err := r.Scan(&w, &c)
		return fmt.Sprintf("%s=%d", w, c), err
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d jobs by 4 processes x 32 slots in %.2fs: %.0f jobs/s (first to last effect); per worker %v",
		n, secs, float64(n)/secs, perWorker)
}

// A worker process killed with SIGKILL in the middle of its jobs loses them to lease
// expiry; another worker finishes them as new attempts, and nothing is lost or done twice.
func TestKillWorkerMidJob(t *testing.T) {
	t.Parallel()
	b := setup(t)
	createEffectTables(t, b.pool)
	const n, slots = 16, 8
	enqueueEffects(t, b.pool, n, effectArgs{SleepMS: 2000, RecordStart: true})

	victim := startHelper(t, "worker", b.url, "victim", slots, 2*time.Second)
	waitUntil(t, 20*time.Second, "the victim's jobs started", func() bool {
		return queryInt(t, b.pool, "SELECT count(*) FROM started WHERE worker = 'victim'") == slots
	})
	victim.kill9(t)
	if e := queryInt(t, b.pool, "SELECT count(*) FROM effects WHERE worker = 'victim'"); e != 0 {
		t.Fatalf("the victim finished %d jobs before it was killed; the test needs it killed mid-job", e)
	}
	if r := queryInt(t, b.pool, "SELECT count(*) FROM jobs WHERE state = 'running' AND lease_holder = 'victim'"); r != slots {
		t.Fatalf("%d jobs running for the victim, want %d", r, slots)
	}

	rescuer := startHelper(t, "worker", b.url, "rescuer", slots, 2*time.Second)
	waitEffects(t, b.pool, n, time.Minute)
	rescuer.stop(t)
	checkExactlyOnce(t, b.pool, n)

	// The killed attempts count: each of the victim's jobs was finished at attempt 2, with
	// the lease expiry in its history.
	recovered := queryInt(t, b.pool, `SELECT count(*) FROM jobs j JOIN started s ON s.job_id = j.id AND s.worker = 'victim'
		WHERE j.attempts = 2 AND j.errors->0->>'error' LIKE 'lease expired%'
		  AND EXISTS (SELECT FROM effects e WHERE e.job_id = j.id AND e.worker = 'rescuer' AND e.attempt = 2)`)
	if recovered != slots {
		t.Fatalf("%d of the victim's %d jobs were finished by the rescuer at attempt 2 after lease expiry", recovered, slots)
	}
}

// Terminating every connection of the client (pool and LISTEN connection) several times
// during a run loses and duplicates nothing, and the client listens again afterwards.
func TestConnectionsTerminated(t *testing.T) {
	t.Parallel()
	b := setup(t)
	createEffectTables(t, b.pool)
	const n = 2000
	setBackoff(t, b.pool, "50ms")
	enqueueEffects(t, b.pool, n, effectArgs{SleepMS: 2})

	hs := driver.NewHandlers()
	addEffectHandler(hs, b.pool, "w")
	var pings atomic.Value
	driver.AddHandler(hs, "ping", func(ctx context.Context, job *driver.Job[struct{}]) error {
		pings.Store(time.Now())
		return nil
	}, nil)
	cfg := baseConfig(b, hs, map[string]driver.QueueConfig{"default": {Slots: 16}})
	cfg.PollInterval = 10 * time.Second // only notifications and the client's own retries get jobs
	startClient(t, b.pool, cfg)

	killer := pgtest.NewConn(t, b.url)
	ctx := context.Background()
	waitUntil(t, 10*time.Second, "the client listening", func() bool {
		return queryInt(t, killer, "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND query = 'LISTEN jobs_ready'") == 1
	})
	terminated := 0
	for round := 0; round < 6; round++ {
		waitUntil(t, 30*time.Second, "progress since the last round", func() bool {
			return queryInt(t, killer, "SELECT count(*) FROM effects") >= (round+1)*n/10
		})
		var k int
		if err := killer.QueryRow(ctx, `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
			WHERE datname = current_database() AND pid <> pg_backend_pid() AND backend_type = 'client backend'`).Scan(&k); err != nil {
			t.Fatal(err)
		}
		terminated += k
	}
	waitEffects(t, killer, n, time.Minute)
	checkExactlyOnce(t, killer, n)
	t.Logf("terminated %d backends in 6 rounds", terminated)

	// Re-LISTEN: with a 10s poll interval, only a notification explains a prompt start.
	waitUntil(t, 10*time.Second, "the client listening again", func() bool {
		return queryInt(t, killer, "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND query = 'LISTEN jobs_ready'") == 1
	})
	mustEnqueue(t, killer, "ping", nil, nil)
	enqueued := time.Now()
	waitUntil(t, 3*time.Second, "the ping job", func() bool { return pings.Load() != nil })
	t.Logf("ping job started %s after enqueue", pings.Load().(time.Time).Sub(enqueued))
}

// A full server restart, fast and then immediate (a crash), during a run loses and
// duplicates nothing; the client reconnects, listens again and finishes the run.
func TestServerRestart(t *testing.T) {
	t.Parallel()
	srv := pgtest.NewServer(t)
	ctx := context.Background()
	admin := pgtest.NewConn(t, srv.URL())
	if _, err := admin.Exec(ctx, "CREATE DATABASE restart"); err != nil {
		t.Fatal(err)
	}
	url := srv.URLFor("restart")
	mconn := pgtest.NewConn(t, url)
	if err := skiplock.Migrate(ctx, mconn, nil); err != nil {
		t.Fatal(err)
	}
	_ = mconn.Close(ctx)
	b := &testBundle{url: url, pool: newPool(t, url, 24), logger: testLogger(t)}
	createEffectTables(t, b.pool)
	const n = 3000
	setBackoff(t, b.pool, "50ms")
	enqueueEffects(t, b.pool, n, effectArgs{SleepMS: 20})

	hs := driver.NewHandlers()
	addEffectHandler(hs, b.pool, "w")
	var pings atomic.Value
	driver.AddHandler(hs, "ping", func(ctx context.Context, job *driver.Job[struct{}]) error {
		pings.Store(time.Now())
		return nil
	}, nil)
	cfg := baseConfig(b, hs, map[string]driver.QueueConfig{"default": {Slots: 16}})
	cfg.PollInterval = 10 * time.Second
	startClient(t, b.pool, cfg)

	effects := func() int {
		var c int
		if err := b.pool.QueryRow(ctx, "SELECT count(*) FROM effects").Scan(&c); err != nil {
			return -1 // the server is down
		}
		return c
	}
	for i, mode := range []pglocal.StopMode{pglocal.StopFast, pglocal.StopImmediate} {
		threshold := (i + 1) * n / 4
		waitUntil(t, time.Minute, fmt.Sprintf("%d effects", threshold), func() bool { return effects() >= threshold })
		if e := effects(); e >= n {
			t.Fatalf("the run finished before the %s restart", mode)
		}
		began := time.Now()
		if err := srv.Restart(ctx, mode); err != nil {
			t.Fatal(err)
		}
		t.Logf("restarted the server (%s) in %s at %d effects", mode, time.Since(began).Round(time.Millisecond), threshold)
	}
	waitUntil(t, 2*time.Minute, "all effects", func() bool {
		return effects() >= n && queryInt(t, b.pool, "SELECT count(*) FROM jobs WHERE state <> 'done'") == 0
	})
	checkExactlyOnce(t, b.pool, n)

	waitUntil(t, 10*time.Second, "the client listening again", func() bool {
		return queryInt(t, b.pool, "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND query = 'LISTEN jobs_ready'") == 1
	})
	mustEnqueue(t, b.pool, "ping", nil, nil)
	waitUntil(t, 3*time.Second, "the ping job (notification after restart)", func() bool { return pings.Load() != nil })
}
