package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"os/signal"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/skiplock/skiplock/internal/chaos"
)

// workerModeEnv, when set to 1, turns the binary into a worker process of the scale
// scenario. It is an environment variable rather than a flag so -help does not show it.
const workerModeEnv = "SKIPLOCK_BENCH_WORKER_MODE"

// config is the parsed command line.
type config struct {
	databaseURL       string
	schema            string
	scenarios         []string
	jobs              int
	workers           int
	claimAhead        int // -claim-ahead: the workers' QueueConfig.ClaimAhead, scale's processes included
	pool              int
	batch             int
	producers         int
	latencyJobs       int
	latencyInterval   time.Duration
	steadyDuration    time.Duration
	retentionDuration time.Duration
	warmup            time.Duration
	bloatRows         int
	scaleProcs        []int
	naiveWorkers      int
	timeout           time.Duration
	json              bool
	plot              string
	progress          bool
	pgss              bool
	explain           bool
	cpuProfile        string
	peers             []string
	peersDir          string
	rounds            int
	roundsGiven       bool    // -rounds was on the command line
	rate              float64 // -rate; 0: from this run's figures (arrivalRate)
	keepSchema        bool
	patchSQL          string // path of -patch-sql
	patch             string // its contents
	doneRetention     string // -done-retention: jobs_settings.done_retention after each install; "" keeps the default
	chaos             chaosFlags
	upgradeRows       int // -upgrade-rows: the jobs in the table of the upgrade scenario
	workflows         int // -workflows: the diamonds of the workflow scenario
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	if chaos.IsWorker() { // a worker process of the chaos scenario
		os.Exit(chaos.WorkerMain())
	}
	if os.Getenv(workerModeEnv) == "1" {
		cfg, err := parseFlags(os.Args[1:], os.Getenv, io.Discard)
		if err == nil {
			err = runWorkerProcess(ctx, cfg, os.Stdin, os.Stdout)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "bench worker:", err)
			os.Exit(1)
		}
		return
	}

	cfg, err := parseFlags(os.Args[1:], os.Getenv, os.Stderr)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			os.Exit(0)
		}
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(2)
	}
	if err := run(ctx, cfg, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

// parseFlags parses and validates the command line. getenv supplies DATABASE_URL.
func parseFlags(args []string, getenv func(string) string, errOut io.Writer) (*config, error) {
	cfg := &config{}
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(errOut)
	fs.Usage = func() {
		fmt.Fprintf(errOut, "usage: go run ./cmd/bench [flags]\n\nscenarios, in run order:\n%s\nflags:\n", scenarioList("  "))
		fs.PrintDefaults()
	}
	var scenarios, scaleProcs, peers string
	fs.StringVar(&cfg.databaseURL, "database-url", getenv("DATABASE_URL"),
		"PostgreSQL URL to benchmark against (default $DATABASE_URL; empty: start a throwaway local server)")
	fs.StringVar(&cfg.schema, "schema", "skiplock_bench", "schema the benchmark owns; dropped and re-created before each scenario")
	fs.StringVar(&scenarios, "scenarios", strings.Join(allScenarios, ","), "comma-separated scenarios to run")
	fs.IntVar(&cfg.jobs, "jobs", 50000, "N: jobs for insert_bulk, work_drain, bloat, scale, naive and chaos (insert_single uses N/10); with -peers 20000 unless given")
	fs.IntVar(&cfg.workers, "workers", 100, "worker slots (jobs run at once) per worker process")
	fs.IntVar(&cfg.pool, "pool", 20, "maximum connections of each process's pool")
	fs.IntVar(&cfg.claimAhead, "claim-ahead", 0, "QueueConfig.ClaimAhead of the workers, scale's worker processes included: 0 adaptive (the default), -1 off, N that many")
	fs.IntVar(&cfg.batch, "batch", 5000, "jobs per driver.EnqueueMany call when bulk-loading")
	fs.IntVar(&cfg.producers, "producers", 8, "enqueueing goroutines in insert_single, steady and held_xmin")
	fs.IntVar(&cfg.latencyJobs, "latency-jobs", 500, "jobs enqueued in the latency scenario; with -peers 200 unless given")
	fs.DurationVar(&cfg.latencyInterval, "latency-interval", 10*time.Millisecond, "time between two enqueues of the latency scenario")
	fs.DurationVar(&cfg.steadyDuration, "steady-duration", 15*time.Second, "length of steady, steady_rate and held_xmin; with -peers 5s unless given")
	fs.DurationVar(&cfg.retentionDuration, "retention-duration", time.Minute, "length of each step of retention (opt-in)")
	fs.DurationVar(&cfg.warmup, "warmup", time.Second, "warm-up of latency, steady, steady_rate and held_xmin: the scenario's own load, not measured, for this long (then until the queue is empty) before the measured window, for every system")
	fs.IntVar(&cfg.bloatRows, "bloat-rows", 1000000, "finished jobs in the table during bloat")
	fs.StringVar(&scaleProcs, "scale-procs", "1,2,4", "worker process counts for scale")
	fs.IntVar(&cfg.naiveWorkers, "naive-workers", 16, "goroutines (one connection each) of the naive design")
	fs.DurationVar(&cfg.timeout, "timeout", 10*time.Minute, "give up on a scenario after this long")
	fs.BoolVar(&cfg.json, "json", false, "print one JSON object per scenario (the peers' format) instead of the table")
	fs.StringVar(&cfg.plot, "plot", "", "write an SVG of throughput over time and latency distributions to this file")
	fs.BoolVar(&cfg.progress, "progress", true, "draw a progress bar on stderr while a scenario runs (only on a terminal)")
	fs.BoolVar(&cfg.pgss, "pg-stat-statements", false,
		"preload pg_stat_statements on the throwaway server and print each scenario's top statements to stderr")
	fs.BoolVar(&cfg.explain, "explain", false, "halfway through work_drain, bloat, steady and held_xmin, print the plans (EXPLAIN ANALYZE, BUFFERS via auto_explain) of a jobs_claim + jobs_complete_many, rolled back (needs superuser)")
	fs.StringVar(&cfg.cpuProfile, "cpuprofile", "", "write a Go CPU profile of the whole run to this file")
	fs.StringVar(&peers, "peers", "", "after skiplock, run these peer harnesses on the same throwaway server: "+strings.Join(knownPeers, ", "))
	fs.IntVar(&cfg.rounds, "rounds", 3, "with -peers, rounds of each scenario the peers run too, each round skiplock then every peer (alternating A B A B); without -peers a single pass, unless -rounds is given: then every scenario runs this many times")
	fs.Float64Var(&cfg.rate, "rate", 0, fmt.Sprintf("arrival rate of steady_rate in jobs/s, for skiplock and the peers alike; 0: half the lower of skiplock's work_drain and insert_single medians in this run, or %d when neither ran", defaultArrivalRate))
	fs.StringVar(&cfg.peersDir, "peers-dir", "", "directory holding the peer harnesses (river/, graphile-worker/); empty: cmd/bench/peers of the checkout this runs in")
	fs.BoolVar(&cfg.keepSchema, "keep-schema", false, "leave the schema of the last scenario in place for inspection")
	fs.StringVar(&cfg.doneRetention, "done-retention", "",
		"set jobs_settings.done_retention to this interval after each install (0: completion deletes the job instead of keeping it done); empty keeps the default, 1 day")
	fs.StringVar(&cfg.patchSQL, "patch-sql", "",
		"run this SQL file in the benchmark's schema after each install, e.g. a candidate CREATE OR REPLACE FUNCTION, to measure a change before it becomes a migration")
	cfg.chaos.register(fs)
	registerUpgradeFlags(fs, cfg)
	registerWorkflowFlags(fs, cfg)
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	cfg.roundsGiven = given["rounds"]

	var err error
	if cfg.scenarios, err = parseScenarios(scenarios); err != nil {
		return nil, err
	}
	if cfg.scaleProcs, err = parseInts("scale-procs", scaleProcs, 1, 64); err != nil {
		return nil, err
	}
	if cfg.peers, err = parsePeers(peers); err != nil {
		return nil, err
	}
	if len(cfg.peers) > 0 {
		cfg.applyPeerRunDefaults(given)
	}
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if cfg.patchSQL != "" {
		b, err := os.ReadFile(cfg.patchSQL)
		if err != nil {
			return nil, fmt.Errorf("-patch-sql: %w", err)
		}
		cfg.patch = string(b)
	}
	return cfg, nil
}

func (c *config) validate() error {
	checks := []struct {
		ok  bool
		msg string
	}{
		{c.jobs >= 10, fmt.Sprintf("-jobs must be at least 10, got %d", c.jobs)},
		{c.workers >= 1 && c.workers <= 10000, fmt.Sprintf("-workers must be between 1 and 10000, got %d", c.workers)},
		{c.pool >= 4, fmt.Sprintf("-pool must be at least 4, got %d", c.pool)},
		{c.batch >= 1 && c.batch <= 100000, fmt.Sprintf("-batch must be between 1 and 100000 (jobs_enqueue_many's limit), got %d", c.batch)},
		{c.producers >= 1, fmt.Sprintf("-producers must be at least 1, got %d", c.producers)},
		{c.latencyJobs >= 1, fmt.Sprintf("-latency-jobs must be at least 1, got %d", c.latencyJobs)},
		{c.latencyInterval >= 0, fmt.Sprintf("-latency-interval cannot be negative, got %s", c.latencyInterval)},
		{c.steadyDuration > 0, fmt.Sprintf("-steady-duration must be positive, got %s", c.steadyDuration)},
		{c.retentionDuration > 0, fmt.Sprintf("-retention-duration must be positive, got %s", c.retentionDuration)},
		{c.warmup >= 0, fmt.Sprintf("-warmup cannot be negative, got %s", c.warmup)},
		{c.bloatRows >= 0, fmt.Sprintf("-bloat-rows cannot be negative, got %d", c.bloatRows)},
		{c.workflows >= 1 && c.workflows <= 1000000, fmt.Sprintf("-workflows must be between 1 and 1000000, got %d", c.workflows)},
		{c.naiveWorkers >= 1, fmt.Sprintf("-naive-workers must be at least 1, got %d", c.naiveWorkers)},
		{c.rounds >= 1 && c.rounds <= 100, fmt.Sprintf("-rounds must be between 1 and 100, got %d", c.rounds)},
		{c.rate >= 0 && !math.IsInf(c.rate, 0) && !math.IsNaN(c.rate), fmt.Sprintf("-rate cannot be negative, got %v", c.rate)},
		{c.timeout > 0, fmt.Sprintf("-timeout must be positive, got %s", c.timeout)},
		{c.schema != "" && len(c.schema) <= 63, fmt.Sprintf("-schema must be 1 to 63 bytes, got %q", c.schema)},
		{!strings.EqualFold(c.schema, "public") && !strings.HasPrefix(strings.ToLower(c.schema), "pg_"),
			fmt.Sprintf("-schema %q would be dropped; give the benchmark a schema of its own", c.schema)},
		{!c.pgss || c.databaseURL == "",
			"-pg-stat-statements needs the throwaway server (no -database-url/DATABASE_URL): it resets the server's statistics"},
		{len(c.peers) == 0 || c.databaseURL == "",
			"-peers needs the throwaway server (no -database-url/DATABASE_URL): the peers create databases of their own"},
	}
	for _, ch := range checks {
		if !ch.ok {
			return errors.New(ch.msg)
		}
	}
	return c.chaos.validate(c)
}

// parseScenarios checks a comma-separated list against allScenarios and returns it in
// run order, without duplicates.
func parseScenarios(s string) ([]string, error) {
	want := map[string]bool{}
	for _, name := range strings.Split(s, ",") {
		name = strings.TrimSpace(name)
		if name == "" {
			continue
		}
		if name == "all" {
			for _, a := range allScenarios {
				want[a] = true
			}
			continue
		}
		if !slices.Contains(scenarioOrder(), name) {
			return nil, fmt.Errorf("unknown scenario %q (known: %s)", name, strings.Join(scenarioOrder(), ", "))
		}
		want[name] = true
	}
	var out []string
	for _, a := range scenarioOrder() {
		if want[a] {
			out = append(out, a)
		}
	}
	if len(out) == 0 {
		return nil, errors.New("-scenarios names no scenario")
	}
	return out, nil
}

// parseInts parses a comma-separated list of distinct integers in [lo, hi], sorted.
func parseInts(name, s string, lo, hi int) ([]int, error) {
	var out []int
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		n, err := strconv.Atoi(part)
		if err != nil || n < lo || n > hi {
			return nil, fmt.Errorf("-%s: %q is not an integer between %d and %d", name, part, lo, hi)
		}
		if !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("-%s names no value", name)
	}
	slices.Sort(out)
	return out, nil
}

func parsePeers(s string) ([]string, error) {
	var out []string
	for _, p := range strings.Split(s, ",") {
		p = strings.TrimSpace(p)
		if p == "" {
			continue
		}
		if !slices.Contains(knownPeers, p) {
			return nil, fmt.Errorf("unknown peer %q (known: %s)", p, strings.Join(knownPeers, ", "))
		}
		if !slices.Contains(out, p) {
			out = append(out, p)
		}
	}
	return out, nil
}

// gomaxprocs is reported with the settings: the Go side competes with PostgreSQL for CPUs.
func gomaxprocs() int { return runtime.GOMAXPROCS(0) }
