package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/skiplock/skiplock"
	"github.com/skiplock/skiplock/cmd/bench/internal/benchresult"
	"github.com/skiplock/skiplock/driver"
	"github.com/skiplock/skiplock/internal/pglocal"
)

// shardCounts are the steps of the shards scenario: how many shard clusters the jobs are
// spread over.
var shardCounts = []int{1, 2, 4}

// clockTicks is the unit of the CPU times in /proc/<pid>/stat (USER_HZ, 100 on Linux).
const clockTicks = 100

// shards drains N jobs spread evenly over k shards, each a throwaway cluster of its own
// (internal/pglocal, the settings of the bench's own throwaway server: fsync on), through
// one driver.ShardedClient with -workers slots per shard. Besides jobs/s it measures the
// CPU time the clusters' processes and this process spent during the drain, per job, which
// says why k clusters on one machine cannot go k times as fast: they share its CPUs.
func (r *runner) shards(ctx context.Context, k int) (*result, error) {
	name := fmt.Sprintf("shards_%d", k)
	servers := make([]*pglocal.Server, k)
	defer func() {
		for _, srv := range servers {
			if srv != nil {
				if err := srv.Close(); err != nil {
					logf("%s: failed to stop a shard cluster: %v", name, err)
				}
			}
		}
	}()
	logf("%s: starting %d throwaway cluster(s)", name, k)
	var wg sync.WaitGroup
	errs := make([]error, k)
	for i := range k {
		wg.Go(func() { servers[i], errs[i] = startShard(ctx, i) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}

	n := int64(r.cfg.jobs)
	pools := make([]*pgxpool.Pool, k)
	defer func() {
		for _, p := range pools {
			if p != nil {
				p.Close()
			}
		}
	}()
	shards := make([]driver.Shard, k)
	for i, srv := range servers {
		pc, err := pgxpool.ParseConfig(srv.URLFor(benchDatabase))
		if err != nil {
			return nil, err
		}
		pc.MaxConns = int32(r.cfg.pool)
		pc.ConnConfig.RuntimeParams["application_name"] = "skiplock-bench"
		if pools[i], err = pgxpool.NewWithConfig(ctx, pc); err != nil {
			return nil, fmt.Errorf("failed to open a pool on shard %d: %w", i, err)
		}
		// The same total N whatever k: shard i gets its share.
		share := int(n) / k
		if i < int(n)%k {
			share++
		}
		if err := r.bulkLoad(ctx, pools[i], share, nil); err != nil {
			return nil, fmt.Errorf("shard %d: %w", i, err)
		}
		if err := settle(ctx, pools[i], "jobs"); err != nil {
			return nil, fmt.Errorf("shard %d: %w", i, err)
		}
		if err := warmPool(ctx, pools[i], 2); err != nil {
			return nil, fmt.Errorf("shard %d: %w", i, err)
		}
		shards[i] = driver.Shard{Number: i, Pool: pools[i]}
	}

	prog := newProgress(name, n, 0, r.cfg.progress)
	var completed atomic.Int64
	handlers := driver.NewHandlers()
	driver.AddHandler(handlers, benchKind, func(context.Context, *driver.Job[json.RawMessage]) error {
		prog.Add(1)
		return nil
	}, nil)
	client, err := driver.NewShardedClient(shards, &driver.Config{
		ID:       r.workerName(),
		Queues:   map[string]driver.QueueConfig{benchQueue: {Slots: r.cfg.workers}},
		Handlers: handlers,
		Hook: driver.HookFunc(func(e *driver.Event) {
			if e.Kind == driver.EventCompleted {
				completed.Add(1)
			}
		}),
		Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
	})
	if err != nil {
		return nil, fmt.Errorf("failed to make a sharded client: %w", err)
	}

	pgBefore, err := clustersCPU(servers)
	if err != nil {
		return nil, err
	}
	benchBefore := selfCPU()
	prog.Begin()
	start := time.Now()
	runErr := make(chan error, 1)
	go func() { runErr <- client.Run(context.WithoutCancel(ctx)) }()
	err = waitCompleted(ctx, completed.Load, n, r.cfg.timeout)
	elapsed := time.Since(start)
	benchCPU := selfCPU() - benchBefore
	samples := prog.End()
	stopErr := client.Stop(context.WithoutCancel(ctx))
	if stopErr == nil {
		stopErr = <-runErr
	}
	// The backends' CPU time reaches the postmaster's children totals when they exit.
	for _, p := range pools {
		p.Close()
	}
	time.Sleep(200 * time.Millisecond)
	pgAfter, cpuErr := clustersCPU(servers)
	if err = errors.Join(err, stopErr, cpuErr); err != nil {
		return nil, err
	}
	pgCPU := pgAfter - pgBefore

	res := &result{Result: benchresult.Result{Scenario: name, Jobs: n, Seconds: elapsed.Seconds()}, Series: samples}
	perJob := func(d time.Duration) float64 { return benchresult.Round(float64(d.Microseconds())/float64(n), 1) }
	busy := benchresult.Round((pgCPU+benchCPU).Seconds()/(elapsed.Seconds()*float64(runtime.NumCPU())), 2)
	res.Add("shards", k)
	res.Add("pg_cpu_us_per_job", perJob(pgCPU))
	res.Add("bench_cpu_us_per_job", perJob(benchCPU))
	res.Add("cpu_busy", busy)
	res.Add("timing", "ShardedClient.Run -> last completion confirmed; CPU from /proc (clusters) and getrusage (bench)")
	res.note("%d shard(s) x %d slots; CPU/job: postgres %.0f µs, bench %.0f µs; %.0f%% of %d CPUs busy",
		k, r.cfg.workers, perJob(pgCPU), perJob(benchCPU), 100*busy, runtime.NumCPU())
	return res, nil
}

// startShard starts a throwaway cluster with skiplock installed in its database
// benchDatabase, made shard number (jobs_set_shard).
func startShard(ctx context.Context, number int) (*pglocal.Server, error) {
	srv, err := pglocal.Start(ctx, &pglocal.Options{})
	if err != nil {
		return nil, fmt.Errorf("failed to start shard cluster %d: %w", number, err)
	}
	fail := func(err error) (*pglocal.Server, error) {
		_ = srv.Close()
		return nil, fmt.Errorf("shard %d: %w", number, err)
	}
	admin, err := pgx.Connect(ctx, srv.URL())
	if err != nil {
		return fail(err)
	}
	_, err = admin.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{benchDatabase}.Sanitize())
	admin.Close(ctx)
	if err != nil {
		return fail(err)
	}
	conn, err := pgx.Connect(ctx, srv.URLFor(benchDatabase))
	if err != nil {
		return fail(err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if err := skiplock.Migrate(ctx, conn, nil); err != nil {
		return fail(err)
	}
	if _, err := conn.Exec(ctx, "SELECT jobs_set_shard($1)", number); err != nil {
		return fail(err)
	}
	return srv, nil
}

// clustersCPU is the CPU time the clusters' processes have used so far: each postmaster's
// own, that of its live children, and that of the children it has reaped (cutime, cstime).
func clustersCPU(servers []*pglocal.Server) (time.Duration, error) {
	parents := map[int]bool{}
	var total time.Duration
	for _, srv := range servers {
		pid, err := srv.PostmasterPID()
		if err != nil {
			return 0, err
		}
		parents[pid] = true
		_, self, reaped, err := procCPU(pid)
		if err != nil {
			return 0, err
		}
		total += self + reaped
	}
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	for _, dir := range dirs {
		pid, err := strconv.Atoi(filepath.Base(dir))
		if err != nil {
			continue
		}
		ppid, self, _, err := procCPU(pid)
		if err == nil && parents[ppid] {
			total += self
		}
	}
	return total, nil
}

// procCPU reads a process's parent and CPU times from /proc/<pid>/stat: its own (utime +
// stime) and its reaped children's (cutime + cstime).
func procCPU(pid int) (ppid int, self, reaped time.Duration, err error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, 0, 0, fmt.Errorf("failed to read CPU times (Linux /proc only): %w", err)
	}
	// Fields after the command name, which is in parentheses and may hold spaces: state,
	// ppid, …, utime (the 12th after it), stime, cutime, cstime.
	f := bytes.Fields(b[bytes.LastIndexByte(b, ')')+1:])
	if len(f) < 15 {
		return 0, 0, 0, fmt.Errorf("unexpected /proc/%d/stat", pid)
	}
	num := func(i int) int64 { v, _ := strconv.ParseInt(string(f[i]), 10, 64); return v }
	tick := time.Second / clockTicks
	return int(num(1)), time.Duration(num(11)+num(12)) * tick, time.Duration(num(13)+num(14)) * tick, nil
}

// selfCPU is the CPU time this process has used so far.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
