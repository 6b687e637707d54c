package chaos_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/signal"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/skiplock/skiplock/driver"
	"github.com/skiplock/skiplock/internal/chaos"
	"github.com/skiplock/skiplock/internal/subproc"
	"github.com/skiplock/skiplock/tests/pgtest"
)

// The worker processes of TestChaosWorkflows are this test binary re-executed with
// workflowWorkerEnv set to the database URL; TestMain hands them to workflowWorkerMain.
const (
	workflowWorkerEnv   = "SKIPLOCK_CHAOS_WORKFLOWS"
	workflowWorkerIDEnv = "SKIPLOCK_CHAOS_WORKFLOWS_ID"
	workflowKind        = "chaos_step"
	workflowLease       = 2 * time.Second
	workflowPoll        = 200 * time.Millisecond
)

// workflowWorkerMain runs one worker process: a driver.Client with 8 slots on the default
// queue, until SIGTERM. Each attempt of a step inserts a chaos_executions row (numbered from
// chaos_order) in its own statement, sleeps 100-300ms (so that kills find steps in flight,
// parents among them), then inserts the step's chaos_effects row (numbered too) and completes
// the job in one transaction (driver.CompleteTx): an effect committed twice counts up, and the
// numbers order each child's attempts and effect after its parents' effects.
func workflowWorkerMain() int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	id := os.Getenv(workflowWorkerIDEnv)
	cfg, err := pgxpool.ParseConfig(os.Getenv(workflowWorkerEnv))
	if err != nil {
		logger.Error("bad URL", slog.Any("error", err))
		return 2
	}
	cfg.MaxConns = 12
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		logger.Error("failed to open pool", slog.Any("error", err))
		return 2
	}
	defer pool.Close()
	hs := driver.NewHandlers()
	driver.AddHandler(hs, workflowKind, func(ctx context.Context, job *driver.Job[struct{}]) error {
		if _, err := pool.Exec(ctx, "INSERT INTO chaos_executions (job_id, attempt, worker) VALUES ($1, $2, $3)",
			job.ID, job.Attempt, id); err != nil {
			return err
		}
		time.Sleep(time.Duration(100+rand.IntN(200)) * time.Millisecond)
		tx, err := pool.Begin(ctx)
		if err != nil {
			return err
		}
		defer func() { _ = tx.Rollback(context.Background()) }()
		if _, err := tx.Exec(ctx, `INSERT INTO chaos_effects (job_id) VALUES ($1)
			ON CONFLICT (job_id) DO UPDATE SET effects = chaos_effects.effects + 1`, job.ID); err != nil {
			return err
		}
		if err := driver.CompleteTx(ctx, tx, job); err != nil {
			return err
		}
		return tx.Commit(ctx)
	}, nil)
	client, err := driver.NewClient(pool, &driver.Config{
		ID:              id,
		Queues:          map[string]driver.QueueConfig{driver.QueueDefault: {Slots: 8}},
		Handlers:        hs,
		Lease:           workflowLease,
		PollInterval:    workflowPoll,
		RequeueInterval: workflowPoll,
		Logger:          logger,
	})
	if err != nil {
		logger.Error("NewClient", slog.Any("error", err))
		return 2
	}
	fmt.Println("ready")
	if err := client.Run(ctx); err != nil {
		logger.Error("Run", slog.Any("error", err))
		return 1
	}
	return 0
}

// workflowStep is one element of jobs_enqueue_workflow's steps argument.
type workflowStep struct {
	Name        string   `json:"name"`
	Kind        string   `json:"kind"`
	MaxAttempts int      `json:"max_attempts"`
	DependsOn   []string `json:"depends_on,omitempty"`
}

// chaosWorkflow returns workflow i of TestChaosWorkflows: two of three are diamonds (a ->
// b, c -> d), the others fan-ins of 2 to 4 parents into one sink.
func chaosWorkflow(i int) []workflowStep {
	step := func(name string, parents ...string) workflowStep {
		return workflowStep{Name: name, Kind: workflowKind, MaxAttempts: 25, DependsOn: parents}
	}
	if i%3 != 2 {
		return []workflowStep{step("a"), step("b", "a"), step("c", "a"), step("d", "b", "c")}
	}
	var steps []workflowStep
	var parents []string
	for p := range 2 + (i/3)%3 {
		name := "p" + strconv.Itoa(p)
		steps = append(steps, step(name))
		parents = append(parents, name)
	}
	return append(steps, step("sink", parents...))
}

// TestChaosWorkflows runs workflows (diamonds a -> b, c -> d and fan-ins of 2 to 4 parents,
// each enqueued in its own transaction by jobs_enqueue_workflow) through three worker
// processes while worker processes holding parents are killed with SIGKILL (and replaced).
// At the end every step must be done with its effect committed exactly once, no job may be
// left waiting, queued or running, every attempt of a child must have started after all its
// parents' effects committed, and the tables that list jobs must agree with jobs. -short
// runs fewer workflows and two kills.
func TestChaosWorkflows(t *testing.T) {
	workflows, kills := 300, 6
	if testing.Short() {
		workflows, kills = 100, 2
	}
	ctx := context.Background()
	url := pgtest.NewDatabase(t)
	pool := pgtest.NewPool(t, url)
	pgtest.MustExec(t, pool, `CREATE SEQUENCE chaos_order`)
	pgtest.MustExec(t, pool, `CREATE TABLE chaos_effects (job_id bigint PRIMARY KEY, effects int NOT NULL DEFAULT 1,
		seq bigint NOT NULL DEFAULT nextval('chaos_order'))`)
	pgtest.MustExec(t, pool, `CREATE TABLE chaos_executions (job_id bigint NOT NULL, attempt int NOT NULL, worker text NOT NULL,
		seq bigint NOT NULL DEFAULT nextval('chaos_order'))`)

	// The graph as enqueued: each step's id and its parents' ids, by the names returned.
	type enqueued struct {
		workflow int
		name     string
		parents  []int64
	}
	steps := map[int64]enqueued{}
	firstIDs := make([]int64, workflows) // the workflow_id each workflow's steps must carry
	edges := 0
	for i := range workflows {
		wf := chaosWorkflow(i)
		b, err := json.Marshal(wf)
		if err != nil {
			t.Fatal(err)
		}
		rows, err := pool.Query(ctx, "SELECT name, id FROM jobs_enqueue_workflow($1)", b)
		if err != nil {
			t.Fatal(err)
		}
		ids := map[string]int64{}
		for rows.Next() {
			var name string
			var id int64
			if err := rows.Scan(&name, &id); err != nil {
				t.Fatal(err)
			}
			ids[name] = id
			if firstIDs[i] == 0 || id < firstIDs[i] {
				firstIDs[i] = id
			}
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		if len(ids) != len(wf) {
			t.Fatalf("workflow %d: jobs_enqueue_workflow returned %d steps, want %d", i, len(ids), len(wf))
		}
		for _, s := range wf {
			var parents []int64
			for _, p := range s.DependsOn {
				parents = append(parents, ids[p])
			}
			slices.Sort(parents)
			steps[ids[s.Name]] = enqueued{workflow: i, name: s.Name, parents: parents}
			edges += len(parents)
		}
	}
	total := len(steps)
	t.Logf("%d workflows enqueued: %d steps, %d dependencies", workflows, total, edges)

	// Each job as the database holds it, against the graph enqueued.
	rows, err := pool.Query(ctx, "SELECT id, workflow_id, workflow_step, coalesce(depends_on, '{}'), state FROM jobs")
	if err != nil {
		t.Fatal(err)
	}
	waiting := 0
	seen, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (int64, error) {
		var id, wfID int64
		var name, state string
		var dependsOn []int64
		if err := row.Scan(&id, &wfID, &name, &dependsOn, &state); err != nil {
			return 0, err
		}
		want, ok := steps[id]
		switch {
		case !ok:
			t.Errorf("job %d was not enqueued by the test", id)
		case wfID != firstIDs[want.workflow] || name != want.name || !slices.Equal(dependsOn, want.parents):
			t.Errorf("job %d is step %q of workflow %d depending on %v, want step %q of workflow %d depending on %v",
				id, name, wfID, dependsOn, want.name, firstIDs[want.workflow], want.parents)
		case (len(want.parents) > 0) != (state == "waiting") || (len(want.parents) == 0) != (state == "queued"):
			t.Errorf("job %d (step %q, %d parents) is %s before any worker ran", id, name, len(want.parents), state)
		}
		if state == "waiting" {
			waiting++
		}
		return id, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(seen) != total {
		t.Fatalf("%d jobs in the table, want the %d steps enqueued", len(seen), total)
	}

	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	workers := map[string]*subproc.Process{}
	nextWorker := 0
	startWorker := func() {
		t.Helper()
		id := "workflow-worker-" + strconv.Itoa(nextWorker)
		nextWorker++
		p, err := subproc.Start(ctx, exe, &subproc.Options{
			Env:          []string{workflowWorkerEnv + "=" + url, workflowWorkerIDEnv + "=" + id},
			ReadyLine:    "ready",
			Stderr:       pgtest.NewLogWriter(t),
			StderrPrefix: "[" + id + "] ",
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(p.Kill)
		if err := p.WaitReady(30 * time.Second); err != nil {
			t.Fatal(err)
		}
		workers[id] = p
	}
	count := func(sql string, args ...any) int {
		t.Helper()
		return pgtest.QueryOne[int](t, pool, sql, args...)
	}
	began := time.Now()
	for range 3 {
		startWorker()
	}

	// Each kill's recovery must take at most the chaos suite's bound: lease + poll
	// interval + slack (see internal/chaos).
	bound := workflowLease + workflowPoll + chaos.RecoverySlack
	var recoveries []string
	orphanedParents := 0
	kill := func() {
		t.Helper()
		// The victim holds the most running parents: steps whose children wait for them.
		var victim string
		var parents int
		pgtest.WaitFor(t, 30*time.Second, "a worker running a step that others wait for", func() bool {
			rows, err := pool.Query(ctx, `SELECT lease_holder, count(*)::int FROM jobs
				WHERE state = 'running' AND has_children GROUP BY 1 ORDER BY 2 DESC`)
			if err != nil {
				t.Fatal(err)
			}
			defer rows.Close()
			for rows.Next() {
				var h string
				var n int
				if err := rows.Scan(&h, &n); err != nil {
					t.Fatal(err)
				}
				if workers[h] != nil {
					victim, parents = h, n
					return true
				}
			}
			return false
		})
		workers[victim].Kill()
		killedAt := time.Now()
		delete(workers, victim)
		orphanedParents += parents
		startWorker()
		// Recovered once no job of the victim's is running: lease expiry and jobs_maintain
		// took them back (or they were completed before the kill landed).
		pgtest.WaitFor(t, 30*time.Second, "the killed worker's jobs taken back", func() bool {
			return count("SELECT count(*) FROM jobs WHERE state = 'running' AND lease_holder = $1", victim) == 0
		})
		took := time.Since(killedAt)
		recoveries = append(recoveries, fmt.Sprintf("kill of %s (%d parents running): %s", victim, parents,
			took.Round(10*time.Millisecond)))
		if took > bound {
			t.Errorf("kill of %s took %s to recover, more than %s", victim, took, bound)
		}
	}
	done := func() int { return count("SELECT count(*) FROM chaos_effects") }
	// The kills, spaced through the run while parents are still running.
	for k := 1; k <= kills; k++ {
		target := k * total / (kills + 2)
		pgtest.WaitFor(t, 60*time.Second, fmt.Sprintf("%d steps done", target), func() bool { return done() >= target })
		kill()
	}
	pgtest.WaitFor(t, 90*time.Second, "every step done", func() bool {
		return count("SELECT count(*) FROM jobs WHERE state <> 'done'") == 0
	})
	elapsed := time.Since(began)
	ids := make([]string, 0, len(workers))
	for id := range workers {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		p := workers[id]
		_ = p.Signal(syscall.SIGTERM)
		if err := p.Wait(30 * time.Second); err != nil {
			t.Errorf("worker %s: %v", id, err)
		}
	}

	jobs := count("SELECT count(*) FROM jobs")
	notDone := count("SELECT count(*) FROM jobs WHERE state <> 'done'")
	lost := count(`SELECT count(*) FROM jobs j LEFT JOIN chaos_effects e ON e.job_id = j.id
		WHERE j.state <> 'done' OR e.job_id IS NULL`)
	twice := count("SELECT count(*) FROM chaos_effects WHERE effects > 1")
	strays := count("SELECT count(*) FROM chaos_effects e WHERE NOT EXISTS (SELECT FROM jobs j WHERE j.id = e.job_id)")
	executions := count("SELECT count(*) FROM chaos_executions")
	// A child whose attempt started, or whose effect committed, before one of its parents'
	// effects: it ran before its parents were done.
	early := count(`SELECT count(DISTINCT c.id) FROM jobs c
		CROSS JOIN LATERAL unnest(c.depends_on) AS d(parent_id)
		JOIN chaos_effects pe ON pe.job_id = d.parent_id
		LEFT JOIN chaos_effects ce ON ce.job_id = c.id
		WHERE ce.seq < pe.seq
		   OR EXISTS (SELECT FROM chaos_executions x WHERE x.job_id = c.id AND x.seq < pe.seq)`)
	unfinished := count(`SELECT count(*) FROM (SELECT workflow_id FROM jobs GROUP BY 1
		HAVING bool_or(state <> 'done')) w`)
	pending := count("SELECT count(*) FROM jobs WHERE pending_parents <> 0")
	states := pgtest.QueryList[string](t, pool, "SELECT state || ' ' || count(*) FROM jobs GROUP BY state ORDER BY 1")
	t.Logf("chaos with workflows: %d workflows, %d steps (%d waiting at the start) through 3 worker processes in %s; "+
		"%d executions; %d kills orphaning %d running parents; jobs by state: %s; %d lost, %d done twice, %d run before a parent was done; recoveries:\n  %s",
		workflows, jobs, waiting, elapsed.Round(100*time.Millisecond), executions, kills, orphanedParents,
		strings.Join(states, ", "), lost, twice, early, strings.Join(recoveries, "\n  "))
	if jobs != total {
		t.Errorf("%d jobs in the table, want the %d steps enqueued", jobs, total)
	}
	if notDone != 0 || unfinished != 0 {
		t.Errorf("%d jobs not done (%s) in %d unfinished workflows; want every step of every workflow done",
			notDone, strings.Join(states, ", "), unfinished)
	}
	if lost != 0 || twice != 0 || strays != 0 {
		t.Errorf("%d lost, %d done twice, %d effects of unknown jobs; want none", lost, twice, strays)
	}
	if early != 0 {
		t.Errorf("%d children ran or committed before all their parents' effects; want none", early)
	}
	if pending != 0 {
		t.Errorf("%d jobs still count pending parents after every parent was done", pending)
	}
	checkStorage(t, url)
	if orphanedParents == 0 || executions <= jobs {
		t.Errorf("%d executions of %d jobs, %d running parents orphaned by the kills: the kills interrupted nothing that others waited for, so the run proves little",
			executions, jobs, orphanedParents)
	}
}
