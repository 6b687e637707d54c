package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/skiplock/skiplock/cmd/bench/internal/benchresult"
	"github.com/skiplock/skiplock/internal/subproc"
)

// The scale scenario drains N jobs with k worker processes: this binary re-executed with
// SKIPLOCK_BENCH_WORKER_MODE=1. The protocol on the child's stdin/stdout is line based:
//
//	child:  ready             connected, workers not started
//	parent: go                start the workers
//	child:  done <started> <completed>
//	                          running counts of jobs started and of completions the database
//	                          confirmed, every 5 ms while they change, and at the end
//	parent: (closes stdin)    stop: finish running jobs, persist completions, exit 0

// scale runs work_drain once per process count in -scale-procs.
func (r *runner) scale(ctx context.Context, procs int) (*result, error) {
	name := fmt.Sprintf("scale_%dp", procs)
	pool, err := r.e.newPool(ctx, r.cfg.pool)
	if err != nil {
		return nil, err
	}
	defer pool.Close()
	n := int64(r.cfg.jobs)
	if err := r.bulkLoad(ctx, pool, int(n), nil); err != nil {
		return nil, err
	}
	if err := settle(ctx, pool, "jobs"); err != nil {
		return nil, err
	}

	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("failed to find the bench binary to re-execute: %w", err)
	}
	children := make([]*child, 0, procs)
	defer func() {
		for _, c := range children {
			c.Kill()
		}
	}()
	for i := range procs {
		c, err := startChild(ctx, exe, []string{
			"-database-url", r.e.url, "-schema", r.cfg.schema,
			"-workers", strconv.Itoa(r.cfg.workers), "-pool", strconv.Itoa(r.cfg.pool),
			"-claim-ahead", strconv.Itoa(r.cfg.claimAhead),
		}, i)
		if err != nil {
			return nil, err
		}
		children = append(children, c)
	}
	for _, c := range children {
		if err := c.WaitReady(60 * time.Second); err != nil {
			return nil, fmt.Errorf("worker process %d: %w", c.index, err)
		}
	}

	sum := func(count func(*child) *atomic.Int64) func() int64 {
		return func() int64 {
			var n int64
			for _, c := range children {
				n += count(c).Load()
			}
			return n
		}
	}
	started := sum(func(c *child) *atomic.Int64 { return &c.started })
	completed := sum(func(c *child) *atomic.Int64 { return &c.completed })
	prog := newProgress(name, n, 0, r.cfg.progress)
	stopMirror := make(chan struct{})
	go func() { // mirror the children's counts into the progress bar
		t := time.NewTicker(50 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-stopMirror:
				return
			case <-t.C:
				prog.Set(started())
			}
		}
	}()
	prog.Begin()
	start := time.Now()
	for _, c := range children {
		if _, err := io.WriteString(c.Stdin(), "go\n"); err != nil {
			close(stopMirror)
			prog.End()
			return nil, fmt.Errorf("failed to start worker process %d: %w", c.index, err)
		}
	}
	err = waitCompleted(ctx, completed, n, r.cfg.timeout)
	elapsed := time.Since(start)
	prog.Set(started())
	close(stopMirror)
	samples := prog.End()
	for _, c := range children {
		_ = c.CloseStdin()
	}
	var errs []error
	for _, c := range children {
		if werr := c.Wait(30 * time.Second); werr != nil {
			errs = append(errs, fmt.Errorf("worker process %d: %w", c.index, werr))
		}
	}
	children = nil
	if err != nil {
		return nil, err
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	_, done, _, err := countJobs(ctx, pool)
	if err != nil {
		return nil, err
	}
	if done != n {
		return nil, fmt.Errorf("expected %d done jobs, found %d", n, done)
	}
	res := &result{Result: benchresult.Result{Scenario: name, Jobs: n, Seconds: elapsed.Seconds()}, Series: samples}
	res.Add("processes", procs)
	res.Add("timing", "'go' sent to the worker processes -> last completion committed (reported every 5 ms)")
	res.note("%d process(es) x %d slots", procs, r.cfg.workers)
	return res, nil
}

// child is one worker process of the scale scenario and the counts it last reported.
type child struct {
	*subproc.Process
	index     int
	started   atomic.Int64
	completed atomic.Int64
}

func startChild(ctx context.Context, exe string, args []string, index int) (*child, error) {
	c := &child{index: index}
	p, err := subproc.Start(ctx, exe, &subproc.Options{
		Args:      args,
		Env:       []string{workerModeEnv + "=1"},
		Stdin:     true,
		Stderr:    os.Stderr,
		ReadyLine: "ready",
		StdoutLine: func(line string) {
			var st, co int64
			if _, err := fmt.Sscanf(line, "done %d %d", &st, &co); err == nil {
				c.started.Store(st)
				c.completed.Store(co)
			}
		},
	})
	if err != nil {
		return nil, fmt.Errorf("failed to start worker process %d: %w", index, err)
	}
	c.Process = p
	return c, nil
}

// runWorkerProcess is the child side of the scale scenario (see the protocol above).
func runWorkerProcess(ctx context.Context, cfg *config, in io.Reader, out io.Writer) error {
	if cfg.databaseURL == "" {
		return errors.New("worker mode needs -database-url")
	}
	e := &env{cfg: cfg, url: cfg.databaseURL}
	pool, err := e.newPool(ctx, cfg.pool)
	if err != nil {
		return err
	}
	defer pool.Close()
	if err := warmPool(ctx, pool, 2); err != nil {
		return err
	}
	var mu sync.Mutex // serialises writes to out
	say := func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		fmt.Fprintf(out, format+"\n", args...)
	}
	say("ready")

	lines := bufio.NewScanner(in)
	if !lines.Scan() || lines.Text() != "go" {
		return nil // the parent gave up before starting us
	}
	var started, completed atomic.Int64
	ws, err := startWorkers(ctx, pool, "bench-"+strconv.Itoa(os.Getpid()), cfg.workers, cfg.claimAhead, workerHooks{
		started:   func(benchJob) { started.Add(1) },
		completed: func() { completed.Add(1) },
	})
	if err != nil {
		return err
	}
	report := func() string { return fmt.Sprintf("done %d %d", started.Load(), completed.Load()) }
	stopReport := make(chan struct{})
	reported := make(chan struct{})
	go func() {
		defer close(reported)
		t := time.NewTicker(5 * time.Millisecond) // the parent's drain check waits on these
		defer t.Stop()
		last := ""
		for {
			select {
			case <-stopReport:
				return
			case <-t.C:
				if line := report(); line != last {
					say("%s", line)
					last = line
				}
			}
		}
	}()
	for lines.Scan() { // until the parent closes stdin
	}
	close(stopReport)
	<-reported
	err = ws.Stop(context.WithoutCancel(ctx))
	say("%s", report())
	return err
}
