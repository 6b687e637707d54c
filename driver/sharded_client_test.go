package driver_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/skiplock/skiplock"
	"github.com/skiplock/skiplock/driver"
	"github.com/skiplock/skiplock/internal/pglocal"
	"github.com/skiplock/skiplock/tests/pgtest"
)

// shardDB is one shard of a test: its number, URL and pool.
type shardDB struct {
	number int
	url    string
	pool   *pgxpool.Pool
}

// newShardDB makes the skiplock database at url shard number (jobs_set_shard) and opens a
// pool on it.
func newShardDB(t *testing.T, url string, number int) *shardDB {
	t.Helper()
	pool := newPool(t, url, 12)
	pgtest.MustExec(t, pool, "SELECT jobs_set_shard($1)", number)
	// The effect table of the tests' CompleteTx handlers: a second commit of a job's effect
	// counts up instead of failing, so that a job done twice is seen.
	pgtest.MustExec(t, pool, `CREATE TABLE shard_effects (job_id bigint PRIMARY KEY, effects int NOT NULL DEFAULT 1)`)
	return &shardDB{number: number, url: url, pool: pool}
}

// migratedServerDB starts a private cluster (one a test may stop) with skiplock installed
// in its database "shard" and returns the server and the database's URL.
func migratedServerDB(t *testing.T) (*pglocal.Server, string) {
	t.Helper()
	srv := pgtest.NewServer(t)
	ctx := context.Background()
	admin := pgtest.NewConn(t, srv.URL())
	if _, err := admin.Exec(ctx, "CREATE DATABASE shard"); err != nil {
		t.Fatal(err)
	}
	url := srv.URLFor("shard")
	conn := pgtest.NewConn(t, url)
	if err := skiplock.Migrate(ctx, conn, nil); err != nil {
		t.Fatal(err)
	}
	_ = conn.Close(ctx)
	return srv, url
}

func shardsOf(dbs []*shardDB) []driver.Shard {
	out := make([]driver.Shard, len(dbs))
	for i, s := range dbs {
		out[i] = driver.Shard{Number: s.number, Pool: s.pool}
	}
	return out
}

// startShardedClient runs a sharded client until the test ends, and fails the test if Run
// returns an error.
func startShardedClient(t *testing.T, shards []driver.Shard, cfg *driver.Config) *driver.ShardedClient {
	t.Helper()
	sc, err := driver.NewShardedClient(shards, cfg)
	if err != nil {
		t.Fatalf("NewShardedClient: %v", err)
	}
	runErr := make(chan error, 1)
	go func() { runErr <- sc.Run(context.Background()) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := sc.Stop(ctx); err != nil {
			t.Errorf("Stop: %v", err)
		}
		if err := <-runErr; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	return sc
}

// completeWithEffect is a handler body: it records the job's effect and completes the job in
// one transaction on the job's shard, found from the job's id.
func completeWithEffect(ctx context.Context, sc *driver.ShardedClient, job *driver.Job[struct{}]) error {
	pool, err := sc.Pool(job.ID)
	if err != nil {
		return err
	}
	tx, err := pool.Begin(ctx)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback(context.Background()) }()
	if _, err := tx.Exec(ctx, `INSERT INTO shard_effects (job_id) VALUES ($1)
		ON CONFLICT (job_id) DO UPDATE SET effects = shard_effects.effects + 1`, job.ID); err != nil {
		return err
	}
	if err := driver.CompleteTx(ctx, tx, job); err != nil {
		return err
	}
	return tx.Commit(ctx)
}

// shardHook is a Hook and ClaimHook for a sharded client: it keeps every event and sums
// the jobs the claims of all shards got.
type shardHook struct {
	eventRecorder
	claimed atomic.Int64
}

func (h *shardHook) HandleClaim(e *driver.ClaimEvent) { h.claimed.Add(int64(e.Claimed)) }

func TestShardOf(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		id    int64
		shard int
	}{{1, 1}, {1023, 1023}, {1024, 0}, {1024*7 + 5, 5}, {1<<62 + 1023, 1023}} {
		if got := driver.ShardOf(c.id); got != c.shard {
			t.Errorf("ShardOf(%d) = %d, want %d", c.id, got, c.shard)
		}
	}
}

func TestNewShardedClientInvalid(t *testing.T) {
	t.Parallel()
	pool := newPool(t, pgtest.NewDatabase(t), 2)
	hs := driver.NewHandlers()
	driver.AddHandler(hs, "noop", func(context.Context, *driver.Job[struct{}]) error { return nil }, nil)
	cfg := &driver.Config{Queues: map[string]driver.QueueConfig{"q": {}}, Handlers: hs}
	for _, c := range []struct {
		name   string
		shards []driver.Shard
		cfg    *driver.Config
		field  string
	}{
		{"NoShards", nil, cfg, "shards"},
		{"NegativeNumber", []driver.Shard{{Number: -1, Pool: pool}}, cfg, "shards[0].Number"},
		{"NumberTooLarge", []driver.Shard{{Number: 1024, Pool: pool}}, cfg, "shards[0].Number"},
		{"NumberTwice", []driver.Shard{{Number: 3, Pool: pool}, {Number: 3, Pool: pool}}, cfg, "shards[1].Number"},
		{"NilPool", []driver.Shard{{Number: 0}}, cfg, "shards[0].Pool"},
		{"BadShardListenerURL", []driver.Shard{{Number: 0, Pool: pool, ListenerURL: "postgres://x:-1"}}, cfg, "shards[0].ListenerURL"},
		{"ConfigListenerURL", []driver.Shard{{Number: 0, Pool: pool}},
			&driver.Config{Queues: cfg.Queues, Handlers: hs, ListenerURL: "postgres://localhost/x"}, "Config.ListenerURL"},
		{"Schedules", []driver.Shard{{Number: 0, Pool: pool}},
			&driver.Config{Queues: cfg.Queues, Handlers: hs, Schedules: []driver.Schedule{{Name: "s", Cron: "* * * * *", Kind: "noop"}}},
			"Config.Schedules"},
		{"BadConfig", []driver.Shard{{Number: 0, Pool: pool}}, &driver.Config{Handlers: hs}, "Config.Queues"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := driver.NewShardedClient(c.shards, c.cfg)
			var ie *driver.InvalidError
			if !errors.As(err, &ie) || ie.Field != c.field {
				t.Fatalf("got %v, want an *InvalidError for %s", err, c.field)
			}
		})
	}
}

// TestShardedClientWorksEveryShard runs every outcome on four shards (numbers chosen so that
// none equals its position): each job must be worked once, and every call about it
// (completion in the completer's batch or in the handler's transaction, failure, snooze,
// cancellation, heartbeats of a job longer than its lease) must land on its own shard.
func TestShardedClientWorksEveryShard(t *testing.T) {
	t.Parallel()
	var dbs []*shardDB
	for _, n := range []int{3, 17, 512, 1023} {
		dbs = append(dbs, newShardDB(t, pgtest.NewDatabase(t), n))
	}
	logger := testLogger(t)
	hook := &shardHook{}
	var sc *driver.ShardedClient
	var started sync.Map // job id → number of starts
	count := func(id int64) {
		n, _ := started.LoadOrStore(id, new(atomic.Int32))
		n.(*atomic.Int32).Add(1)
	}
	hs := driver.NewHandlers()
	driver.AddHandler(hs, "ok", func(ctx context.Context, job *driver.Job[struct{}]) error { count(job.ID); return nil }, nil)
	driver.AddHandler(hs, "tx", func(ctx context.Context, job *driver.Job[struct{}]) error {
		count(job.ID)
		return completeWithEffect(ctx, sc, job)
	}, nil)
	driver.AddHandler(hs, "fail_once", func(ctx context.Context, job *driver.Job[struct{}]) error {
		count(job.ID)
		if job.Attempt == 1 {
			return errors.New("first attempt fails")
		}
		return nil
	}, nil)
	driver.AddHandler(hs, "snooze_once", func(ctx context.Context, job *driver.Job[struct{}]) error {
		count(job.ID)
		if job.Attempt == 1 {
			return driver.Snooze(10 * time.Millisecond)
		}
		return nil
	}, nil)
	driver.AddHandler(hs, "cancel", func(ctx context.Context, job *driver.Job[struct{}]) error {
		count(job.ID)
		return driver.Cancel(errors.New("not wanted"))
	}, nil)
	driver.AddHandler(hs, "slow", func(ctx context.Context, job *driver.Job[struct{}]) error {
		count(job.ID)
		select {
		case <-time.After(3 * time.Second): // longer than the lease: only heartbeats keep it
			return nil
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	}, nil)
	kinds := []string{"ok", "tx", "fail_once", "snooze_once", "cancel", "slow"}
	want := map[string]struct {
		state    string
		attempts int
	}{
		"ok": {"done", 1}, "tx": {"done", 1}, "fail_once": {"done", 2}, "snooze_once": {"done", 2},
		"cancel": {"cancelled", 1}, "slow": {"done", 1},
	}
	type enqueued struct {
		db   *shardDB
		kind string
	}
	jobs := map[int64]enqueued{}
	for _, db := range dbs {
		setBackoff(t, db.pool, "10ms")
		for i := range 60 {
			kind := kinds[i%len(kinds)]
			if kind == "slow" && i >= len(kinds) {
				kind = "ok" // one slow job per shard
			}
			id := mustEnqueue(t, db.pool, kind, nil, &driver.EnqueueOpts{Queue: "q"})
			if driver.ShardOf(id) != db.number {
				t.Fatalf("job %d enqueued on shard %d has ShardOf %d", id, db.number, driver.ShardOf(id))
			}
			jobs[id] = enqueued{db, kind}
		}
	}
	cfg := &driver.Config{
		Queues:            map[string]driver.QueueConfig{"q": {Slots: 4}},
		Handlers:          hs,
		Lease:             2 * time.Second, // the slow job runs 3s: only heartbeats keep it
		HeartbeatInterval: 500 * time.Millisecond,
		PollInterval:      200 * time.Millisecond,
		RequeueInterval:   200 * time.Millisecond,
		ShutdownTimeout:   5 * time.Second,
		Logger:            logger,
		Hook:              hook,
	}
	sc = startShardedClient(t, shardsOf(dbs), cfg)
	if got := fmt.Sprint(sc.Shards()); got != "[3 17 512 1023]" {
		t.Errorf("Shards() = %s", got)
	}

	for _, db := range dbs {
		waitUntil(t, 30*time.Second, fmt.Sprintf("every job of shard %d finished", db.number), func() bool {
			return queryInt(t, db.pool, "SELECT count(*) FROM jobs WHERE state NOT IN ('done', 'cancelled')") == 0
		})
	}
	for id, e := range jobs {
		j := getJob(t, e.db.pool, id)
		w := want[e.kind]
		if j.State != w.state || j.Attempts != w.attempts {
			t.Errorf("job %d (%s) on shard %d: state %s after %d attempts, want %s after %d",
				id, e.kind, e.db.number, j.State, j.Attempts, w.state, w.attempts)
		}
		n, _ := started.Load(id)
		if n == nil || int(n.(*atomic.Int32).Load()) != w.attempts {
			t.Errorf("job %d (%s) started %v times", id, e.kind, n)
		}
	}
	// The hooks saw every shard's jobs: each run's start and its outcome, and the claims
	// that handed them out.
	totalStarts := 0
	for id, e := range jobs {
		kinds := hook.kinds(id)
		last := driver.EventCompleted
		if e.kind == "cancel" {
			last = driver.EventCancelled
		}
		if len(kinds) != 2*want[e.kind].attempts || kinds[len(kinds)-1] != last {
			t.Errorf("job %d (%s) on shard %d: hook events %v", id, e.kind, e.db.number, kinds)
		}
		totalStarts += want[e.kind].attempts
	}
	if got := hook.claimed.Load(); got != int64(totalStarts) {
		t.Errorf("the ClaimHook counted %d claimed jobs, want %d", got, totalStarts)
	}
	for _, db := range dbs {
		if n := queryInt(t, db.pool, "SELECT count(*) FROM shard_effects WHERE effects <> 1 OR job_id % 1024 <> $1", db.number); n != 0 {
			t.Errorf("shard %d: %d effects done twice or of another shard's job", db.number, n)
		}
		if n := queryInt(t, db.pool, "SELECT count(*) FROM shard_effects"); n != 10 {
			t.Errorf("shard %d: %d effects, want 10", db.number, n)
		}
	}

	pool, err := sc.Pool(1024*5 + 17)
	if err != nil || pool != dbs[1].pool {
		t.Errorf("Pool of a shard-17 id: %v, %v", pool, err)
	}
	_, err = sc.Pool(1024*5 + 4)
	var use *driver.UnknownShardError
	if !errors.As(err, &use) || use.Shard != 4 || use.ID != 1024*5+4 {
		t.Errorf("Pool of a shard-4 id: %v, want an *UnknownShardError for shard 4", err)
	}
}

// TestShardedClientWrongShard: a database that is another shard, or none, or has no
// skiplock, makes Run give up with an error naming the shard, before any of its jobs is
// claimed.
func TestShardedClientWrongShard(t *testing.T) {
	t.Parallel()
	right := newShardDB(t, pgtest.NewDatabase(t), 1)
	other := newShardDB(t, pgtest.NewDatabase(t), 2)
	unset := newPool(t, pgtest.NewDatabase(t), 4)
	empty := newPool(t, pgtest.NewEmptyDatabase(t), 4)
	for _, c := range []struct {
		name  string
		pool  *pgxpool.Pool
		want  string
		wrong bool // ErrWrongShard, rather than a database error
	}{
		{"Other", other.pool, "jobs_shard() is 2, want 5", true},
		{"Unset", unset, "jobs_shard() is NULL", true},
		{"NotInstalled", empty, "SQLSTATE 42883", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			var id int64
			if c.wrong {
				id = mustEnqueue(t, c.pool, "noop", nil, &driver.EnqueueOpts{Queue: "q"})
			}
			hs := driver.NewHandlers()
			driver.AddHandler(hs, "noop", func(context.Context, *driver.Job[struct{}]) error { return nil }, nil)
			sc, err := driver.NewShardedClient([]driver.Shard{{Number: 1, Pool: right.pool}, {Number: 5, Pool: c.pool}},
				&driver.Config{Queues: map[string]driver.QueueConfig{"q": {}}, Handlers: hs, Logger: testLogger(t)})
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			err = sc.Run(ctx)
			var se *driver.ShardError
			if !errors.Is(err, driver.ErrGaveUp) || errors.Is(err, driver.ErrWrongShard) != c.wrong || !errors.As(err, &se) || se.Shard != 5 {
				t.Fatalf("Run: %v, want ErrGaveUp from shard 5 (ErrWrongShard: %v)", err, c.wrong)
			}
			if !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "shard 5") {
				t.Errorf("Run: %q does not say %q and name shard 5", err, c.want)
			}
			if !c.wrong {
				return
			}
			if s := getJob(t, c.pool, id).State; s != "queued" {
				t.Errorf("the wrong shard's job is %s, want queued", s)
			}
		})
	}
}

// TestShardedClientShardDown stops one shard's cluster while jobs run on every shard: the
// other shards keep completing jobs, including jobs enqueued while it is down, and once it is
// back its jobs run; no job is lost or done twice. It also starts the client while the shard
// is down, so the check of its number must wait for it rather than give up.
func TestShardedClientShardDown(t *testing.T) {
	t.Parallel()
	srv, downURL := migratedServerDB(t)
	dbs := []*shardDB{
		newShardDB(t, pgtest.NewDatabase(t), 0),
		newShardDB(t, pgtest.NewDatabase(t), 1),
		newShardDB(t, downURL, 2),
	}
	down := dbs[2]
	ctx := context.Background()
	var sc *driver.ShardedClient
	hs := driver.NewHandlers()
	driver.AddHandler(hs, "work", func(ctx context.Context, job *driver.Job[struct{}]) error {
		time.Sleep(20 * time.Millisecond)
		return completeWithEffect(ctx, sc, job)
	}, nil)
	for _, db := range dbs {
		for range 40 {
			mustEnqueue(t, db.pool, "work", nil, &driver.EnqueueOpts{Queue: "q"})
		}
	}
	if err := srv.Stop(ctx, pglocal.StopFast); err != nil {
		t.Fatal(err)
	}
	cfg := &driver.Config{
		Queues:          map[string]driver.QueueConfig{"q": {Slots: 4}},
		Handlers:        hs,
		Lease:           2 * time.Second,
		PollInterval:    200 * time.Millisecond,
		RequeueInterval: 200 * time.Millisecond,
		ShutdownTimeout: 5 * time.Second,
		Logger:          testLogger(t),
	}
	sc = startShardedClient(t, shardsOf(dbs), cfg)
	for _, db := range dbs[:2] {
		waitUntil(t, 30*time.Second, fmt.Sprintf("shard %d drained while shard 2 is down", db.number), func() bool {
			return queryInt(t, db.pool, "SELECT count(*) FROM shard_effects") == 40
		})
	}

	// Back up: the check of its number passes, and it works while the others do.
	if err := srv.Start(ctx); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 30*time.Second, "shard 2 working", func() bool {
		return tryCount(down.pool, "SELECT count(*) FROM shard_effects") >= 10
	})
	// Down again in the middle of its backlog, with jobs running there: the others keep
	// flowing, including new jobs.
	if err := srv.Stop(ctx, pglocal.StopFast); err != nil {
		t.Fatal(err)
	}
	for _, db := range dbs[:2] {
		for range 40 {
			mustEnqueue(t, db.pool, "work", nil, &driver.EnqueueOpts{Queue: "q"})
		}
	}
	for _, db := range dbs[:2] {
		waitUntil(t, 30*time.Second, fmt.Sprintf("shard %d drained again while shard 2 is down", db.number), func() bool {
			return queryInt(t, db.pool, "SELECT count(*) FROM shard_effects") == 80
		})
	}
	if err := srv.Start(ctx); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 30*time.Second, "shard 2 drained after coming back", func() bool {
		return tryCount(down.pool, "SELECT count(*) FROM jobs WHERE state <> 'done'") == 0
	})
	for _, db := range dbs {
		want := 80
		if db == down {
			want = 40
		}
		if n := queryInt(t, db.pool, "SELECT count(*) FROM shard_effects WHERE effects = 1"); n != want {
			t.Errorf("shard %d: %d jobs done once, want %d", db.number, n, want)
		}
		if n := queryInt(t, db.pool, "SELECT count(*) FROM shard_effects WHERE effects > 1"); n != 0 {
			t.Errorf("shard %d: %d jobs done twice", db.number, n)
		}
		if n := queryInt(t, db.pool, "SELECT count(*) FROM jobs WHERE state <> 'done'"); n != 0 {
			t.Errorf("shard %d: %d jobs not done", db.number, n)
		}
	}
}

// tryCount runs a count query and returns -1 when it fails rather than failing the test,
// for a shard whose pool may still hold connections from before a restart.
func tryCount(pool *pgxpool.Pool, sql string) int {
	var n int
	if err := pool.QueryRow(context.Background(), sql).Scan(&n); err != nil {
		return -1
	}
	return n
}

// TestShardedClientStopWaitsForEveryShard stops the client while handlers run on two
// shards: Stop returns only after every shard's running jobs have finished and their
// completions are recorded, as Client.Stop does for one database.
func TestShardedClientStopWaitsForEveryShard(t *testing.T) {
	t.Parallel()
	dbs := []*shardDB{newShardDB(t, pgtest.NewDatabase(t), 0), newShardDB(t, pgtest.NewDatabase(t), 1)}
	var running atomic.Int32
	hs := driver.NewHandlers()
	driver.AddHandler(hs, "slow", func(ctx context.Context, job *driver.Job[struct{}]) error {
		running.Add(1)
		time.Sleep(500 * time.Millisecond)
		return nil
	}, nil)
	for _, db := range dbs {
		for range 3 {
			mustEnqueue(t, db.pool, "slow", nil, &driver.EnqueueOpts{Queue: "q"})
		}
	}
	sc, err := driver.NewShardedClient(shardsOf(dbs), &driver.Config{
		Queues:          map[string]driver.QueueConfig{"q": {Slots: 3}},
		Handlers:        hs,
		ShutdownTimeout: 10 * time.Second,
		Logger:          testLogger(t),
	})
	if err != nil {
		t.Fatal(err)
	}
	runErr := make(chan error, 1)
	go func() { runErr <- sc.Run(context.Background()) }()
	waitUntil(t, 10*time.Second, "six handlers running", func() bool { return running.Load() == 6 })
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := sc.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-runErr; err != nil {
		t.Fatalf("Run: %v", err)
	}
	for _, db := range dbs {
		if n := queryInt(t, db.pool, "SELECT count(*) FROM jobs WHERE state <> 'done'"); n != 0 {
			t.Errorf("shard %d: %d jobs not done after Stop returned", db.number, n)
		}
	}
	if err := sc.Stop(ctx); err != nil {
		t.Errorf("second Stop: %v", err)
	}
	if err := sc.Run(context.Background()); !errors.Is(err, driver.ErrAlreadyRunning) {
		t.Errorf("second Run: %v, want ErrAlreadyRunning", err)
	}
}
