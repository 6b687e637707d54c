package main

// The chaos scenario runs skiplock's chaos suite (internal/chaos) at bench size: -jobs jobs
// through -chaos-workers worker processes (this binary re-executed) while processes are
// killed, backends terminated, the server restarted fast and immediate, a snapshot held and
// rows locked. It is opt-in (-scenarios chaos, never in the default set or "all") and runs
// only on the throwaway server, since it restarts the server.

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"slices"
	"time"

	"github.com/skiplock/skiplock/cmd/bench/internal/benchresult"
	"github.com/skiplock/skiplock/internal/chaos"
)

// chaosFlags are the chaos scenario's flags.
type chaosFlags struct {
	kills    int
	workers  int
	slots    int
	heldXmin time.Duration
	seed     uint64
}

func (c *chaosFlags) register(fs *flag.FlagSet) {
	fs.IntVar(&c.kills, "chaos-kills", 20, "chaos: worker processes killed with SIGKILL during the run")
	fs.IntVar(&c.workers, "chaos-workers", 4, "chaos: worker processes running at once (each killed one is replaced)")
	fs.IntVar(&c.slots, "chaos-slots", 16, "chaos: slots (jobs run at once) per worker process")
	fs.DurationVar(&c.heldXmin, "chaos-held-xmin", 60*time.Second, "chaos: how long a transaction holds its snapshot open during the run")
	fs.Uint64Var(&c.seed, "chaos-seed", 0, "chaos: seed of the fault schedule (0: from the clock; the report shows it)")
}

// validate checks the chaos flags; cfg is the rest of the command line.
func (c *chaosFlags) validate(cfg *config) error {
	switch {
	case c.kills < 0:
		return fmt.Errorf("-chaos-kills cannot be negative, got %d", c.kills)
	case c.workers < 1 || c.workers > 64:
		return fmt.Errorf("-chaos-workers must be between 1 and 64, got %d", c.workers)
	case c.slots < 1 || c.slots > 1000:
		return fmt.Errorf("-chaos-slots must be between 1 and 1000, got %d", c.slots)
	case c.heldXmin < 0:
		return fmt.Errorf("-chaos-held-xmin cannot be negative, got %s", c.heldXmin)
	case slices.Contains(cfg.scenarios, "chaos") && cfg.databaseURL != "":
		return errors.New("-scenarios chaos needs the throwaway server (no -database-url/DATABASE_URL): it kills and restarts the server")
	}
	return nil
}

// chaos runs the chaos suite on the throwaway server and reports its numbers. A run that
// loses a job, does one twice or recovers too slowly is an error, after its report.
func (r *runner) chaos(ctx context.Context) (*result, error) {
	if r.e.server == nil {
		return nil, errors.New("the chaos scenario restarts the server, so it runs only on the throwaway server it started itself")
	}
	c := r.cfg.chaos
	kills, heldXmin := c.kills, c.heldXmin
	if kills == 0 {
		kills = -1 // chaos.Options: -1 is none, 0 the default
	}
	if heldXmin == 0 {
		heldXmin = -1
	}
	ctx, cancel := context.WithTimeout(ctx, r.cfg.timeout)
	defer cancel()
	rep, err := chaos.Run(ctx, &chaos.Options{
		URL:             r.e.url,
		Schema:          r.cfg.schema,
		Server:          r.e.server,
		Jobs:            r.cfg.jobs,
		Workers:         c.workers,
		Slots:           c.slots,
		Kills:           kills,
		TerminateRounds: max(3, c.kills/4),
		HeldXmin:        heldXmin,
		RowLock:         5 * time.Second,
		Seed:            c.seed,
		Logf:            logf,
	})
	if rep == nil {
		return nil, err
	}
	fmt.Fprint(os.Stderr, rep.String())
	if err != nil {
		return nil, err
	}
	res := &result{Result: benchresult.Result{Scenario: "chaos", Jobs: int64(rep.Jobs), Seconds: rep.Seconds}}
	res.Add("jobs_lost", rep.JobsLost)
	res.Add("jobs_done_twice", rep.JobsDoneTwice)
	res.Add("executions", rep.Executions)
	res.Add("recovery_seconds", rep.RecoverySeconds)
	res.Add("recovery_bound_seconds", rep.RecoveryBoundSeconds)
	res.Add("kills", rep.Kills)
	res.Add("restarts", rep.Restarts)
	res.Add("terminated_backends", rep.TerminatedBackends)
	res.Add("listeners_terminated", rep.ListenersTerminated)
	res.Add("orphans_requeued", rep.OrphansRequeued)
	res.Add("jobs_run_more_than_once", rep.JobsRunMoreThanOnce)
	res.Add("live_lease_expiries", rep.LiveLeaseExpiries)
	res.Add("held_xmin_seconds", rep.HeldXminSeconds)
	res.Add("rows_locked", rep.RowsLocked)
	res.Add("pool_exhaustions", rep.PoolExhaustions)
	res.Add("chaos_workers", rep.Workers)
	res.Add("chaos_slots", rep.Slots)
	res.Add("seed", rep.Seed)
	res.note("lost %d, done twice %d, %d executions, recovery %.2fs (bound %.2fs), %d kills, %d restarts, %d backends terminated",
		rep.JobsLost, rep.JobsDoneTwice, rep.Executions, rep.RecoverySeconds, rep.RecoveryBoundSeconds,
		rep.Kills, rep.Restarts, rep.TerminatedBackends)
	return res, nil
}
