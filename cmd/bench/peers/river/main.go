// Command river is cmd/bench's harness for River (github.com/riverqueue/river): it runs the
// scenarios skiplock's benchmark shares with its peers against River on a database of its
// own and prints one JSON line per scenario in the format of `cmd/bench -json`:
//
//	{"system":"river","version":"v0.51.2","scenario":"work_drain","jobs":50000,"seconds":…,"jobs_per_sec":…,…}
//
// Logs go to stderr. cmd/bench -peers river builds and runs it with the same job count,
// slots, producers, latency schedule and steady length as skiplock's run, and with the
// fetch settings of River's own benchmark (--fetch-cooldown-ms 2 --fetch-poll-interval-ms
// 20); every other River setting is its default. By hand:
//
//	go run . --database-url postgres://localhost/river_bench --jobs 2000
//
// It is a Go module of its own so that skiplock's go.mod never requires River. It takes
// the result line, latency percentiles and waiting from cmd/bench/internal/benchresult and
// cmd/bench/internal/wait, the same code cmd/bench uses, through a replace directive to
// the checkout it sits in (../../../..): it builds only as cmd/bench/peers/river of a
// skiplock checkout. The database must exist; River's migrations are applied to it, and
// its tables are truncated before each scenario.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"
	"github.com/skiplock/skiplock/cmd/bench/internal/benchresult"
)

// scenarioOrder is every scenario the harness knows, in the order it runs them.
var scenarioOrder = []string{"insert_bulk", "insert_single", "work_drain", "work_drain_1000", "latency", "steady", "steady_rate"}

// wideSlots is the MaxWorkers of work_drain_1000, cmd/bench's constant of the same name.
const wideSlots = 1000

// config is the command line. The flags that cmd/bench passes carry the names of its own.
type config struct {
	databaseURL       string
	scenarios         []string
	jobs              int
	workers           int
	pool              int
	batch             int
	producers         int
	latencyJobs       int
	latencyInterval   time.Duration
	steadyDuration    time.Duration
	rate              float64 // steady_rate's arrivals per second
	warmup            time.Duration
	timeout           time.Duration
	fetchCooldown     time.Duration // 0: River's default
	fetchPollInterval time.Duration // 0: River's default
	costMarks         bool          // print cost marks around each drain and wait for cmd/bench (markDrain)
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	cfg, err := parseFlags(os.Args[1:], os.Stderr)
	if errors.Is(err, flag.ErrHelp) {
		os.Exit(0)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "river harness:", err)
		os.Exit(2)
	}
	if err := run(ctx, cfg, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "river harness:", err)
		os.Exit(1)
	}
}

func parseFlags(args []string, errOut io.Writer) (*config, error) {
	cfg := &config{}
	fs := flag.NewFlagSet("river", flag.ContinueOnError)
	fs.SetOutput(errOut)
	ms := func(name string, d *time.Duration, def float64, usage string) {
		fs.Func(name, fmt.Sprintf("%s, in milliseconds (default %g)", usage, def), func(s string) error {
			var v float64
			if _, err := fmt.Sscan(s, &v); err != nil || v < 0 {
				return fmt.Errorf("not a non-negative number of milliseconds: %q", s)
			}
			*d = time.Duration(v * float64(time.Millisecond))
			return nil
		})
		*d = time.Duration(def * float64(time.Millisecond))
	}
	var scenarios string
	fs.StringVar(&cfg.databaseURL, "database-url", os.Getenv("DATABASE_URL"), "PostgreSQL URL of an existing database (default $DATABASE_URL)")
	fs.StringVar(&scenarios, "scenarios", strings.Join(scenarioOrder, ","), "comma-separated scenarios to run")
	fs.IntVar(&cfg.jobs, "jobs", 50000, "N: jobs for insert_bulk and work_drain (insert_single uses N/10)")
	fs.IntVar(&cfg.workers, "workers", 100, "MaxWorkers of the default queue")
	fs.IntVar(&cfg.pool, "pool", 20, "maximum connections of the pgx pool")
	fs.IntVar(&cfg.batch, "batch", 1000, "jobs per InsertManyFast call")
	fs.IntVar(&cfg.producers, "producers", 8, "inserting goroutines in insert_single and steady")
	fs.IntVar(&cfg.latencyJobs, "latency-jobs", 500, "jobs inserted in the latency scenario")
	ms("latency-interval-ms", &cfg.latencyInterval, 10, "time between two inserts of the latency scenario")
	ms("steady-duration-ms", &cfg.steadyDuration, 15000, "length of steady")
	fs.Float64Var(&cfg.rate, "rate", 1000, "arrival rate of steady_rate, in jobs per second")
	ms("warmup-ms", &cfg.warmup, 1000, "idle time between starting the client and inserting in latency and steady")
	ms("timeout-ms", &cfg.timeout, 600000, "give up on a scenario after this long")
	ms("fetch-cooldown-ms", &cfg.fetchCooldown, 0, "River FetchCooldown; 0: River's default (100 ms)")
	ms("fetch-poll-interval-ms", &cfg.fetchPollInterval, 0, "River FetchPollInterval; 0: River's default (1 s)")
	fs.BoolVar(&cfg.costMarks, "cost-marks", false, "around each drain, print a cost mark and wait for a line on stdin (cmd/bench measures the server meanwhile)")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	for _, s := range strings.Split(scenarios, ",") {
		s = strings.TrimSpace(s)
		if s == "" {
			continue
		}
		if !slices.Contains(scenarioOrder, s) {
			return nil, fmt.Errorf("unknown scenario %q (known: %s)", s, strings.Join(scenarioOrder, ", "))
		}
		if !slices.Contains(cfg.scenarios, s) {
			cfg.scenarios = append(cfg.scenarios, s)
		}
	}
	switch {
	case cfg.databaseURL == "":
		return nil, errors.New("--database-url (or DATABASE_URL) is required")
	case cfg.jobs < 10:
		return nil, fmt.Errorf("--jobs must be at least 10, got %d", cfg.jobs)
	case cfg.workers < 1 || cfg.pool < 4 || cfg.batch < 1 || cfg.producers < 1 || cfg.latencyJobs < 1:
		return nil, errors.New("--workers, --batch, --producers and --latency-jobs must be at least 1, --pool at least 4")
	case cfg.steadyDuration <= 0 || cfg.timeout <= 0 || !(cfg.rate > 0):
		return nil, errors.New("--steady-duration-ms, --rate and --timeout-ms must be positive")
	}
	return cfg, nil
}

// harness is one run: the pool, River's settings and the worker every client shares.
type harness struct {
	cfg     *config
	pool    *pgxpool.Pool
	logger  *slog.Logger
	worker  *noopWorker
	version string
	out     io.Writer     // the JSON lines and cost marks
	stdin   *bufio.Reader // cmd/bench's answers to cost marks
}

func run(ctx context.Context, cfg *config, out io.Writer) error {
	pc, err := pgxpool.ParseConfig(cfg.databaseURL)
	if err != nil {
		return fmt.Errorf("failed to parse the database URL: %w", err)
	}
	pc.MaxConns = int32(cfg.pool)
	pool, err := pgxpool.NewWithConfig(ctx, pc)
	if err != nil {
		return fmt.Errorf("failed to open a pool: %w", err)
	}
	defer pool.Close()
	h := &harness{
		cfg:  cfg,
		pool: pool,
		// River's default logger writes to stdout, which carries the JSON lines.
		logger:  slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
		worker:  &noopWorker{},
		version: riverVersion(),
		out:     out,
		stdin:   bufio.NewReader(os.Stdin),
	}
	migrator, err := rivermigrate.New(riverpgxv5.New(pool), nil)
	if err != nil {
		return fmt.Errorf("failed to make River's migrator: %w", err)
	}
	if _, err := migrator.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		return fmt.Errorf("failed to apply River's migrations: %w", err)
	}
	scenarios := map[string]func(context.Context) (*benchresult.Result, error){
		"insert_bulk":   h.insertBulk,
		"insert_single": h.insertSingle,
		"work_drain": func(ctx context.Context) (*benchresult.Result, error) {
			return h.workDrain(ctx, "work_drain", cfg.workers)
		},
		"work_drain_1000": func(ctx context.Context) (*benchresult.Result, error) {
			return h.workDrain(ctx, "work_drain_1000", wideSlots)
		},
		"latency":     h.latency,
		"steady":      h.steady,
		"steady_rate": h.steadyRate,
	}
	for _, name := range scenarioOrder {
		if !slices.Contains(cfg.scenarios, name) {
			continue
		}
		if err := h.truncate(ctx); err != nil {
			return err
		}
		logf("scenario %s: start", name)
		res, err := scenarios[name](ctx)
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		res.Scenario = name
		line, err := res.JSONLine("river", h.version, h.commonFields())
		if err != nil {
			return err
		}
		if _, err := out.Write(line); err != nil {
			return err
		}
		logf("scenario %s: %.0f jobs/s", name, res.JobsPerSec())
	}
	return h.truncate(ctx)
}

// markDrain prints the cost mark {"mark":"drain_begin"|"drain_end","scenario":scenario}
// and waits for cmd/bench's line on stdin, when --cost-marks is given: cmd/bench reads the
// server's CPU time and WAL position meanwhile, and at the end prunes and vacuums
// river_job as River's JobCleaner and autovacuum would.
func (h *harness) markDrain(mark, scenario string) error {
	if !h.cfg.costMarks {
		return nil
	}
	line, err := json.Marshal(map[string]string{"mark": mark, "scenario": scenario})
	if err != nil {
		return err
	}
	if _, err := h.out.Write(append(line, '\n')); err != nil {
		return err
	}
	if _, err := h.stdin.ReadString('\n'); err != nil {
		return fmt.Errorf("cost mark %s: no answer on stdin: %w", mark, err)
	}
	return nil
}

// truncate empties River's tables but river_migration, whichever its migrations created,
// so no scenario inherits another's rows.
func (h *harness) truncate(ctx context.Context) error {
	_, err := h.pool.Exec(ctx, `
		DO $$
		BEGIN
			EXECUTE (
				SELECT 'TRUNCATE ' || string_agg(format('%I', tablename), ', ') || ' RESTART IDENTITY CASCADE'
				FROM pg_tables
				WHERE schemaname = current_schema() AND tablename LIKE 'river\_%' AND tablename <> 'river_migration');
		END $$`)
	if err != nil {
		return fmt.Errorf("failed to truncate River's tables: %w", err)
	}
	return nil
}

// commonFields go on every line: the settings the numbers depend on.
func (h *harness) commonFields() []benchresult.Field {
	fc, fp := h.cfg.fetchCooldown, h.cfg.fetchPollInterval
	if fc == 0 {
		fc = river.FetchCooldownDefault
	}
	if fp == 0 {
		fp = river.FetchPollIntervalDefault
	}
	return []benchresult.Field{
		{Key: "workers", Value: h.cfg.workers},
		{Key: "pool_max_conns", Value: h.cfg.pool},
		{Key: "settings", Value: map[string]any{
			"fetch_cooldown_ms":      benchresult.MS(fc),
			"fetch_poll_interval_ms": benchresult.MS(fp),
			"go":                     runtime.Version(),
			"gomaxprocs":             runtime.GOMAXPROCS(0),
		}},
	}
}

// riverVersion is the version of River this binary was built with.
func riverVersion() string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, d := range bi.Deps {
			if d.Path == "github.com/riverqueue/river" {
				return d.Version
			}
		}
	}
	return "unknown"
}

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "[river %s] %s\n", time.Now().Format("15:04:05.000"), fmt.Sprintf(format, args...))
}
