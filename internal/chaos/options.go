package chaos

import (
	"fmt"
	"io"
	"os"
	"time"

	"github.com/skiplock/skiplock/internal/pglocal"
)

// Defaults of [Options]. A zero field means its default; -1 disables the faults that say so.
const (
	// JobsDefault is the number of jobs a run enqueues.
	JobsDefault = 2000

	// WorkersDefault is the number of worker processes running at once.
	WorkersDefault = 3

	// SlotsDefault is the number of jobs each worker process runs at once.
	SlotsDefault = 8

	// KillsDefault is the number of worker processes killed with SIGKILL.
	KillsDefault = 6

	// TerminateRoundsDefault is the number of pg_terminate_backend rounds.
	TerminateRoundsDefault = 3

	// HeldXminDefault is how long a transaction holds its snapshot (and so the xmin horizon).
	HeldXminDefault = 5 * time.Second

	// RowLockDefault is how long a session holds row locks on jobs.
	RowLockDefault = 3 * time.Second

	// RowLockRowsDefault is how many jobs the row-lock session locks: half running, half
	// queued.
	RowLockRowsDefault = 10

	// HogFractionDefault is the share of jobs that hold extra pool connections.
	HogFractionDefault = 0.02

	// HangFractionDefault is the share of jobs that hang past their timeout.
	HangFractionDefault = 0.01

	// HangTimeoutDefault is the handler timeout of the hanging kind.
	HangTimeoutDefault = time.Second

	// LeaseDefault is the workers' lease; short, so that a killed worker's jobs come back
	// quickly.
	LeaseDefault = 3 * time.Second

	// PollIntervalDefault is the workers' poll interval, and their requeue interval.
	PollIntervalDefault = time.Second

	// MaxAttemptsDefault is every job's attempt budget: large, so that no fault sequence
	// can exhaust it.
	MaxAttemptsDefault = 25

	// DrainTimeoutDefault bounds the wait for the last jobs after the last fault.
	DrainTimeoutDefault = 5 * time.Minute

	// RecoverySlack is the fixed part of the recovery bound: a run passes when every
	// fault's recovery took at most Lease + PollInterval + RecoverySlack.
	RecoverySlack = 2 * time.Second
)

// Options configure a run. URL is required, and Server when there are restarts; every
// other zero field means its documented default.
type Options struct {
	// URL is the database to run in: skiplock installed (in Schema, or where the URL's
	// search_path finds it) and no jobs yet. Run creates its tables chaos_effects and
	// chaos_executions there (dropping earlier ones), sets jobs_settings' backoff to 100ms
	// doubling up to 2s, and enqueues the jobs. Required.
	URL string

	// Schema, when set, goes first on the search_path of every connection of the run,
	// controller and workers. Defaults to "" (the URL's own search_path).
	Schema string

	// Server is the cluster that holds URL's database; Run restarts it. Required when
	// Restarts is not empty. Nothing else may depend on the cluster during the run.
	Server *pglocal.Server

	// Jobs is how many jobs the run enqueues, all before the workers start. Defaults to
	// JobsDefault.
	Jobs int

	// Workers is how many worker processes run at once; a killed one is replaced at once.
	// Defaults to WorkersDefault.
	Workers int

	// Slots is how many jobs each worker process runs at once. Defaults to SlotsDefault.
	Slots int

	// PoolConns is the size of each worker's connection pool, shared by the driver and the
	// handlers. Defaults to Slots + 2, so that the hog jobs can exhaust it.
	PoolConns int

	// Kills is how many times a worker process is killed with SIGKILL (each replaced by a
	// new process). -1 means none. Defaults to KillsDefault.
	Kills int

	// Restarts are the shutdown modes of the full PostgreSQL restarts, in the order the
	// schedule meets them (the schedule shuffles them among the other faults). nil means
	// {fast, immediate}; an empty non-nil slice means none.
	Restarts []pglocal.StopMode

	// TerminateRounds is how many times a random set of the workers' backends is
	// terminated with pg_terminate_backend, always including at least one LISTEN
	// connection. -1 means none. Defaults to TerminateRoundsDefault.
	TerminateRounds int

	// HeldXmin is how long a REPEATABLE READ transaction holds its snapshot open during the
	// run, starting with the schedule (reopened if a restart ends it). -1 means none.
	// Defaults to HeldXminDefault.
	HeldXmin time.Duration

	// RowLock is how long a session holds row locks (SELECT ... FOR UPDATE) on RowLockRows
	// jobs, running and queued ones. -1 means none. Defaults to RowLockDefault.
	RowLock time.Duration

	// RowLockRows is how many jobs the row-lock session locks. Defaults to
	// RowLockRowsDefault.
	RowLockRows int

	// HogFraction is the share of jobs whose handler takes HogConns connections from its
	// worker's pool and holds them while it sleeps, exhausting the pool. Negative means
	// none. Defaults to HogFractionDefault.
	HogFraction float64

	// HogConns is how many connections a hog job tries to take (waiting at most a second
	// for them). Defaults to PoolConns: the whole pool, so that while it sleeps its
	// process can neither claim, heartbeat nor run other handlers' statements.
	HogConns int

	// HangFraction is the share of jobs whose first attempt hangs past its timeout
	// (HangTimeout) and ignores the cancellation for half a second more; then half of them
	// fail the attempt and half complete anyway. Negative means none. Defaults to
	// HangFractionDefault.
	HangFraction float64

	// HangTimeout is the handler timeout of the hanging kind. Defaults to
	// HangTimeoutDefault.
	HangTimeout time.Duration

	// Lease is the workers' Config.Lease. Defaults to LeaseDefault.
	Lease time.Duration

	// PollInterval is the workers' Config.PollInterval and Config.RequeueInterval. Defaults
	// to PollIntervalDefault.
	PollInterval time.Duration

	// JobSleep is the mean time a handler sleeps (uniform between 0 and twice this), so
	// that kills find jobs in flight. Defaults to the value that makes the jobs last about
	// as long as the fault schedule, plus 50 %: Workers × Slots × schedule × 1.5 / Jobs.
	JobSleep time.Duration

	// MaxAttempts is every job's attempt budget. Defaults to MaxAttemptsDefault.
	MaxAttempts int

	// Seed seeds the schedule, the job mix and the victims. The same seed gives the same
	// plan; the timing of a run never repeats exactly. Defaults to 0, a seed taken from the
	// clock (the report shows it).
	Seed uint64

	// DrainTimeout bounds the wait for the last jobs after the schedule; jobs not done by
	// then count as lost. Defaults to DrainTimeoutDefault.
	DrainTimeout time.Duration

	// EffectOutsideTx makes the chaos_work handler commit its effect in a transaction of its own,
	// then sleep, and leave the completion to the driver: the wrong way, which runs effects
	// twice when a worker dies in between. It exists to show that the suite catches that.
	// Defaults to false.
	EffectOutsideTx bool

	// ClaimAhead is each worker process's QueueConfig.ClaimAhead: a killed worker then holds
	// buffered jobs besides running ones. Defaults to 0, the driver's default (adaptive).
	ClaimAhead int

	// Keys, when above 0, gives every job a concurrency_key, "k0" to "k<Keys-1>": job i goes
	// to key i mod Keys, so that each key's jobs are enqueued in id order, interleaved with
	// the other keys'. With HotKeyShare, key k0 takes that share of the jobs, the first ones
	// enqueued, and the rest cycle through the other keys. Defaults to 0: no keys.
	Keys int

	// HotKeyShare is the share of the jobs that go to key k0 (see Keys): one tenant with
	// most of the work, for a fair queue. Defaults to 0: the jobs spread evenly.
	HotKeyShare float64

	// Concurrency, when not nil, is set on the queue with jobs_set_concurrency before the
	// jobs are enqueued, and the report checks what it promises (see [Concurrency]).
	// Defaults to nil: no settings.
	Concurrency *Concurrency

	// Executable is the program started as a worker process; it must call [WorkerMain]
	// when [IsWorker] reports true. Defaults to os.Executable(): the calling binary.
	Executable string

	// Logf receives a line per step and fault. Defaults to discarding them.
	Logf func(format string, args ...any)

	// WorkerLog receives the worker processes' logs (warnings and errors), each line
	// prefixed with the worker's id. Defaults to discarding them.
	WorkerLog io.Writer
}

// Concurrency is the jobs_set_concurrency call of a run, on the queue the workers work.
type Concurrency struct {
	// MaxRunning and PerKey are jobs_set_concurrency's max_running and per_key; 0 is NULL
	// (no limit). The report fails a run in which more than PerKey jobs of a key ran at once.
	MaxRunning int
	PerKey     int

	// Fair and Ordered are its fair and ordered arguments. With Ordered the report fails a
	// run in which an attempt of a job began before an earlier job of its key (a lower id)
	// had committed its effect, or two jobs of a key ran at once.
	Fair    bool
	Ordered bool
}

// RecoveryBound is the longest a fault's recovery may take: Lease + PollInterval +
// RecoverySlack.
func (o *Options) RecoveryBound() time.Duration {
	return o.Lease + o.PollInterval + RecoverySlack
}

// withDefaults validates o and returns a copy with the defaults filled in.
func (o *Options) withDefaults() (*Options, error) {
	if o == nil {
		return nil, fmt.Errorf("chaos: Options must not be nil")
	}
	c := *o
	bad := func(field, format string, args ...any) error {
		return fmt.Errorf("chaos: Options.%s %s", field, fmt.Sprintf(format, args...))
	}
	if c.URL == "" {
		return nil, bad("URL", "is required")
	}
	if c.Restarts == nil {
		c.Restarts = []pglocal.StopMode{pglocal.StopFast, pglocal.StopImmediate}
	}
	for _, m := range c.Restarts {
		// Smart waits for every client to disconnect: with workers connected, it never ends.
		if m != pglocal.StopFast && m != pglocal.StopImmediate {
			return nil, bad("Restarts", "has mode %q; only fast and immediate can restart a server with clients", m)
		}
	}
	if len(c.Restarts) > 0 && c.Server == nil {
		return nil, bad("Server", "is required for restarts (Restarts has %d)", len(c.Restarts))
	}
	ints := []struct {
		name string
		v    *int
		def  int
		min  int
		off  bool // -1 allowed
	}{
		{"Jobs", &c.Jobs, JobsDefault, 1, false},
		{"Workers", &c.Workers, WorkersDefault, 1, false},
		{"Slots", &c.Slots, SlotsDefault, 1, false},
		{"Kills", &c.Kills, KillsDefault, 1, true},
		{"TerminateRounds", &c.TerminateRounds, TerminateRoundsDefault, 1, true},
		{"RowLockRows", &c.RowLockRows, RowLockRowsDefault, 1, false},
		{"MaxAttempts", &c.MaxAttempts, MaxAttemptsDefault, 1, false},
	}
	for _, f := range ints {
		switch {
		case *f.v == 0:
			*f.v = f.def
		case *f.v == -1 && f.off:
			*f.v = 0
		case *f.v < f.min:
			if f.off {
				return nil, bad(f.name, "must be -1 (none) or at least %d, got %d", f.min, *f.v)
			}
			return nil, bad(f.name, "must be at least %d, got %d", f.min, *f.v)
		}
	}
	if c.Workers > 64 || c.Slots > 1000 {
		return nil, bad("Workers", "× Slots is too large (%d × %d; at most 64 processes of 1000 slots)", c.Workers, c.Slots)
	}
	if c.PoolConns == 0 {
		c.PoolConns = c.Slots + 2
	}
	if c.PoolConns < 4 {
		return nil, bad("PoolConns", "must be at least 4, got %d", c.PoolConns)
	}
	if c.HogConns == 0 {
		c.HogConns = c.PoolConns
	}
	if c.HogConns < 1 || c.HogConns > c.PoolConns {
		return nil, bad("HogConns", "must be between 1 and PoolConns (%d), got %d", c.PoolConns, c.HogConns)
	}
	durs := []struct {
		name string
		v    *time.Duration
		def  time.Duration
		min  time.Duration
		off  bool
	}{
		{"HeldXmin", &c.HeldXmin, HeldXminDefault, 100 * time.Millisecond, true},
		{"RowLock", &c.RowLock, RowLockDefault, 100 * time.Millisecond, true},
		{"HangTimeout", &c.HangTimeout, HangTimeoutDefault, 10 * time.Millisecond, false},
		{"Lease", &c.Lease, LeaseDefault, time.Second, false},
		{"PollInterval", &c.PollInterval, PollIntervalDefault, 10 * time.Millisecond, false},
		{"DrainTimeout", &c.DrainTimeout, DrainTimeoutDefault, time.Second, false},
	}
	for _, f := range durs {
		switch {
		case *f.v == 0:
			*f.v = f.def
		case *f.v == -1 && f.off:
			*f.v = 0
		case *f.v < f.min:
			if f.off {
				return nil, bad(f.name, "must be -1 (none) or at least %s, got %s", f.min, *f.v)
			}
			return nil, bad(f.name, "must be at least %s, got %s", f.min, *f.v)
		}
	}
	if c.JobSleep < 0 {
		return nil, bad("JobSleep", "must not be negative, got %s", c.JobSleep)
	}
	for _, f := range []struct {
		name string
		v    *float64
		def  float64
	}{{"HogFraction", &c.HogFraction, HogFractionDefault}, {"HangFraction", &c.HangFraction, HangFractionDefault}} {
		switch {
		case *f.v == 0:
			*f.v = f.def
		case *f.v < 0:
			*f.v = 0
		case *f.v > 0.5:
			return nil, bad(f.name, "must be at most 0.5, got %g", *f.v)
		}
	}
	if c.HogFraction+c.HangFraction > 0.5 {
		return nil, bad("HogFraction", "+ HangFraction must be at most 0.5, got %g", c.HogFraction+c.HangFraction)
	}
	if c.Keys < 0 {
		return nil, bad("Keys", "must not be negative, got %d", c.Keys)
	}
	if c.HotKeyShare < 0 || c.HotKeyShare >= 1 || (c.HotKeyShare > 0 && c.Keys < 2) {
		return nil, bad("HotKeyShare", "must be at least 0 and below 1, with Keys at least 2; got %g with %d keys", c.HotKeyShare, c.Keys)
	}
	if cc := c.Concurrency; cc != nil {
		if cc.MaxRunning < 0 || cc.PerKey < 0 {
			return nil, bad("Concurrency", "limits must not be negative, got max_running %d, per_key %d", cc.MaxRunning, cc.PerKey)
		}
		if (cc.PerKey > 0 || cc.Fair || cc.Ordered) && c.Keys == 0 {
			return nil, bad("Concurrency", "has per-key settings but the jobs have no keys (Keys 0)")
		}
		cp := *cc
		c.Concurrency = &cp
	}
	if c.Seed == 0 {
		c.Seed = uint64(time.Now().UnixNano())
	}
	if c.Executable == "" {
		exe, err := os.Executable()
		if err != nil {
			return nil, fmt.Errorf("chaos: failed to find the executable to start workers from: %w", err)
		}
		c.Executable = exe
	}
	if c.Logf == nil {
		c.Logf = func(string, ...any) {}
	}
	if c.WorkerLog == nil {
		c.WorkerLog = io.Discard
	}
	return &c, nil
}
