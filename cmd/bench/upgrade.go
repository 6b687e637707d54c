package main

// The upgrade scenario measures what upgrading a live installation costs: a schema at the
// migration before the newest, holding -upgrade-rows jobs in the proportions of a queue that
// has run for a while (mostly done, some queued, running, dead, cancelled and keyed), is
// migrated to the newest version while one session enqueues and another reads jobs by id
// in a loop. It reports how long the migration took, and the longest an enqueue and a read
// waited meanwhile (the migration blocks writers of jobs until it commits, readers only
// for the short ACCESS EXCLUSIVE part at its end). Opt-in: -scenarios upgrade.

import (
	"context"
	"flag"
	"fmt"
	"io/fs"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/skiplock/skiplock"
	"github.com/skiplock/skiplock/cmd/bench/internal/benchresult"
)

// upgradeMix is how the upgrade scenario's rows divide among states, in thousandths.
var upgradeMix = []struct {
	what     string
	perMille int
}{
	{"queued", 50}, {"keyed", 5}, {"running", 5}, {"dead", 20}, {"cancelled", 20}, {"done", 900},
}

func registerUpgradeFlags(fs *flag.FlagSet, cfg *config) {
	fs.IntVar(&cfg.upgradeRows, "upgrade-rows", 10_000_000, "upgrade: jobs in the table when the schema is migrated to the newest version")
}

// previousVersion is the migration before the newest one this binary carries.
func previousVersion() (int32, error) {
	names, err := fs.Glob(skiplock.Migrations(), "[0-9][0-9][0-9]_*.sql")
	if err != nil || len(names) < 2 {
		return 0, fmt.Errorf("need two migrations to upgrade between, found %v (%v)", names, err)
	}
	latest, err := strconv.Atoi(names[len(names)-1][:3])
	if err != nil {
		return 0, err
	}
	return int32(latest - 1), nil
}

func (r *runner) upgrade(ctx context.Context) (*result, error) {
	from, err := previousVersion()
	if err != nil {
		return nil, err
	}
	conn, err := pgx.Connect(ctx, r.e.url)
	if err != nil {
		return nil, err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	schema := pgx.Identifier{r.cfg.schema}.Sanitize()
	if _, err := conn.Exec(ctx, "DROP SCHEMA IF EXISTS "+schema+" CASCADE"); err != nil {
		return nil, err
	}
	if err := skiplock.Migrate(ctx, conn, &skiplock.MigrateOpts{Schema: r.cfg.schema, TargetVersion: from}); err != nil {
		return nil, fmt.Errorf("installing version %d: %w", from, err)
	}
	if _, err := conn.Exec(ctx, "SET search_path TO "+schema); err != nil {
		return nil, err
	}

	// The rows, inserted straight into the table (the old version's indexes find them).
	n := r.cfg.upgradeRows
	logf("upgrade: loading %d jobs at version %d", n, from)
	loadStart := time.Now()
	counts := map[string]int{}
	for _, m := range upgradeMix {
		counts[m.what] = n * m.perMille / 1000
	}
	counts["done"] += n - sum(counts)
	loads := []struct{ what, sql string }{
		{"done", `INSERT INTO jobs (kind, payload, state, attempts, lease_holder, created_at, started_at, finished_at)
			SELECT 'noop', '{}', 'done', 1, 'w', now() - interval '1 hour', now() - interval '1 hour', now() - interval '1 hour'
			FROM generate_series(1, $1)`},
		{"dead", `INSERT INTO jobs (kind, payload, state, attempts, max_attempts, lease_holder, last_error, finished_at)
			SELECT 'noop', '{}', 'dead', 5, 5, 'w', 'boom', now() - interval '1 hour' FROM generate_series(1, $1)`},
		{"cancelled", `INSERT INTO jobs (kind, payload, state, finished_at)
			SELECT 'noop', '{}', 'cancelled', now() - interval '1 hour' FROM generate_series(1, $1)`},
		{"running", `INSERT INTO jobs (kind, payload, state, attempts, lease_holder, lease_expires_at, started_at)
			SELECT 'noop', '{}', 'running', 1, 'w', now() + interval '1 hour', now() FROM generate_series(1, $1)`},
		{"keyed", `INSERT INTO jobs (kind, payload, unique_key) SELECT 'noop', '{}', 'key-' || i FROM generate_series(1, $1) AS i`},
		{"queued", `INSERT INTO jobs (kind, payload) SELECT 'noop', '{}' FROM generate_series(1, $1)`},
	}
	for _, l := range loads {
		if _, err := conn.Exec(ctx, l.sql, counts[l.what]); err != nil {
			return nil, fmt.Errorf("loading %s jobs: %w", l.what, err)
		}
	}
	if _, err := conn.Exec(ctx, "VACUUM (ANALYZE) jobs"); err != nil {
		return nil, err
	}
	if _, err := conn.Exec(ctx, "CHECKPOINT"); err != nil {
		logf("upgrade: CHECKPOINT: %v", err)
	}
	var sizeBefore int64
	if err := conn.QueryRow(ctx, "SELECT pg_total_relation_size('jobs')").Scan(&sizeBefore); err != nil {
		return nil, err
	}
	logf("upgrade: loaded in %s; jobs is %d MB", time.Since(loadStart).Round(time.Second), sizeBefore>>20)

	// One session enqueues, one reads a job by id, each in a loop, through the migration.
	pool, err := r.e.newPool(ctx, 4)
	if err != nil {
		return nil, err
	}
	defer pool.Close()
	loopCtx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	var longestEnqueue, longestRead time.Duration
	var enqueues, reads int
	var loopErr error
	var mu sync.Mutex
	loop := func(sql string, longest *time.Duration, count *int) {
		defer wg.Done()
		for loopCtx.Err() == nil {
			start := time.Now()
			_, err := pool.Exec(loopCtx, sql)
			d := time.Since(start)
			mu.Lock()
			if err != nil && loopCtx.Err() == nil && loopErr == nil {
				loopErr = err
			}
			*longest = max(*longest, d)
			*count++
			mu.Unlock()
			time.Sleep(time.Millisecond)
		}
	}
	wg.Add(2)
	go loop("SELECT jobs_enqueue('probe', queue => 'probe')", &longestEnqueue, &enqueues)
	go loop("SELECT state FROM jobs WHERE id = 1", &longestRead, &reads)
	time.Sleep(200 * time.Millisecond)

	start := time.Now()
	err = skiplock.Migrate(ctx, conn, &skiplock.MigrateOpts{Schema: r.cfg.schema})
	took := time.Since(start)
	time.Sleep(200 * time.Millisecond)
	stop()
	wg.Wait()
	if err != nil {
		return nil, fmt.Errorf("upgrading from version %d: %w", from, err)
	}
	if loopErr != nil {
		return nil, fmt.Errorf("a session enqueueing or reading during the upgrade failed: %w", loopErr)
	}
	var sizeAfter int64
	if err := conn.QueryRow(ctx, `SELECT pg_total_relation_size('jobs') + pg_total_relation_size('jobs_queued')
		+ pg_total_relation_size('jobs_claims') + pg_total_relation_size('jobs_unique_keys')
		+ pg_total_relation_size('jobs_dead_cancelled')`).Scan(&sizeAfter); err != nil {
		return nil, err
	}

	res := &result{Result: benchresult.Result{Scenario: "upgrade", Jobs: int64(n), Seconds: took.Seconds()}}
	res.Add("from_version", from)
	res.Add("longest_enqueue_ms", float64(longestEnqueue.Microseconds())/1000)
	res.Add("longest_read_ms", float64(longestRead.Microseconds())/1000)
	res.Add("enqueues_during", enqueues)
	res.Add("size_before_bytes", sizeBefore)
	res.Add("size_after_bytes", sizeAfter)
	var mix []string
	for _, m := range upgradeMix {
		mix = append(mix, fmt.Sprintf("%d %s", counts[m.what], m.what))
		res.Add("jobs_"+m.what, counts[m.what])
	}
	res.note("from version %d: %s", from, strings.Join(mix, ", "))
	res.note("migration %.2fs; longest enqueue wait %.0f ms, longest read %.0f ms; %d MB -> %d MB",
		took.Seconds(), float64(longestEnqueue.Microseconds())/1000, float64(longestRead.Microseconds())/1000,
		sizeBefore>>20, sizeAfter>>20)
	return res, nil
}

func sum(m map[string]int) int {
	t := 0
	for _, v := range m {
		t += v
	}
	return t
}
