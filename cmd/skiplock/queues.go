package main

import (
	"context"
	"flag"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/skiplock/skiplock/admin"
)

var queuesCommand = &command{
	name:     "queues",
	synopsis: "[flags]",
	summary:  "list queues with their counts, age of the oldest ready job, pause, limits, fairness and ordering (jobs_metrics)",
	help: `Lists every queue that has jobs or settings: ready (queued and due), scheduled (queued for
later), running (and how many of those have an expired lease), dead, cancelled, an estimate
of done jobs (from the planner's statistics), the age of the oldest ready job, whether it is
paused, and its settings (limits; fair, ordered; a rate "per key" when it counts per
concurrency key). Reads no finished row, so it is cheap on any table; the last line is
the whole table.

Output (-o json): {"queues": [QUEUE...], "total": QUEUE}, each QUEUE with queue, ready,
scheduled, running, running_expired, dead, cancelled, done_estimate, oldest_ready_age_s,
paused, max_running, per_key, max_starts, per_s (null when unset; queue is null in total),
fair, ordered, rate_per_key.
`,
	db:     true,
	output: true,
	setup: func(_ *flag.FlagSet) func(context.Context, *call) error {
		return func(ctx context.Context, c *call) error {
			if len(c.args) > 0 {
				return usageErrorf("queues: unexpected argument %q", c.args[0])
			}
			queues, total, err := c.admin().Metrics(ctx)
			if err != nil {
				return fmt.Errorf("failed to read queue metrics: %w", err)
			}
			if c.format == outputJSON {
				if queues == nil {
					queues = []admin.QueueMetrics{}
				}
				return writeJSON(c.stdout, struct {
					Queues []admin.QueueMetrics `json:"queues"`
					Total  admin.QueueMetrics   `json:"total"`
				}{queues, total})
			}
			tw := newTable(c.stdout)
			fmt.Fprintln(tw, "QUEUE\tREADY\tSCHEDULED\tRUNNING\tEXPIRED\tDEAD\tCANCELLED\tDONE (EST.)\tOLDEST READY\tPAUSED\tLIMITS")
			for _, m := range append(queues, total) {
				name := "(all)"
				if m.Queue != nil {
					name = cell(*m.Queue, 40)
				}
				paused := "-"
				if m.Paused {
					paused = "paused"
				}
				fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\t%d\t%s\t%s\t%s\t%s\n", name, m.Ready, m.Scheduled, m.Running,
					m.RunningExpired, m.Dead, m.Cancelled, cell(m.DoneEstimate, 0), cell(m.OldestReadyAgeS, 0), paused,
					describeLimits(admin.QueueLimits{MaxRunning: m.MaxRunning, PerKey: m.PerKey, MaxStarts: m.MaxStarts,
						PerS: m.PerS, Fair: m.Fair, Ordered: m.Ordered, RatePerKey: m.RatePerKey}))
			}
			return tw.Flush()
		}
	},
}

func describeLimits(m admin.QueueLimits) string {
	var parts []string
	if m.MaxRunning != nil {
		parts = append(parts, fmt.Sprintf("max-running %d", *m.MaxRunning))
	}
	if m.PerKey != nil {
		parts = append(parts, fmt.Sprintf("per-key %d", *m.PerKey))
	}
	if m.Fair {
		parts = append(parts, "fair")
	}
	if m.Ordered {
		parts = append(parts, "ordered")
	}
	if m.MaxStarts != nil && m.PerS != nil {
		rate := fmt.Sprintf("rate %d/%s", *m.MaxStarts, time.Duration(*m.PerS*float64(time.Second)))
		if m.RatePerKey {
			rate += " per key"
		}
		parts = append(parts, rate)
	}
	if len(parts) == 0 {
		return "-"
	}
	return strings.Join(parts, ", ")
}

var pauseCommand = &command{
	name:     "pause",
	synopsis: "QUEUE [flags]",
	summary:  "stop claims from a queue; running jobs finish (jobs_pause)",
	help: `Pauses QUEUE: once committed, no worker claims its jobs; running jobs finish normally and
enqueueing goes on. A queue may be paused before it has jobs. Survives restarts; undo with
'skiplock resume'.

Output: "paused QUEUE" or "QUEUE was already paused"; -o json: {"queue": Q, "changed": BOOL}.
`,
	db:     true,
	output: true,
	setup: func(_ *flag.FlagSet) func(context.Context, *call) error {
		return func(ctx context.Context, c *call) error {
			return toggleQueue(ctx, c, "pause", (*admin.Client).Pause, "paused", "was already paused")
		}
	},
}

var resumeCommand = &command{
	name:     "resume",
	synopsis: "QUEUE [flags]",
	summary:  "let workers claim from a paused queue again (jobs_resume)",
	help: `Resumes QUEUE and wakes idle workers at once. Its limits stay.

Output: "resumed QUEUE" or "QUEUE was not paused"; -o json: {"queue": Q, "changed": BOOL}.
`,
	db:     true,
	output: true,
	setup: func(_ *flag.FlagSet) func(context.Context, *call) error {
		return func(ctx context.Context, c *call) error {
			return toggleQueue(ctx, c, "resume", (*admin.Client).Resume, "resumed", "was not paused")
		}
	},
}

func toggleQueue(ctx context.Context, c *call, verb string, toggle func(*admin.Client, context.Context, string) (bool, error),
	done, unchanged string) error {
	if len(c.args) != 1 {
		return usageErrorf("%s: want one QUEUE, got %d arguments", verb, len(c.args))
	}
	queue := c.args[0]
	changed, err := toggle(c.admin(), ctx, queue)
	if err != nil {
		return fmt.Errorf("failed to %s queue %q: %w", verb, queue, err)
	}
	if c.format == outputJSON {
		return writeJSON(c.stdout, struct {
			Queue   string `json:"queue"`
			Changed bool   `json:"changed"`
		}{queue, changed})
	}
	if changed {
		_, err := fmt.Fprintf(c.stdout, "%s %s\n", done, queue)
		return err
	}
	_, err = fmt.Fprintf(c.stdout, "%s %s\n", queue, unchanged)
	return err
}

// limitValue is a --max-running or --per-key value: a number, or "none" to clear.
type limitValue struct {
	set   bool
	value *int32
}

func (l *limitValue) String() string {
	if l == nil || l.value == nil {
		return ""
	}
	return strconv.Itoa(int(*l.value))
}

func (l *limitValue) Set(s string) error {
	l.set = true
	if s == "none" {
		l.value = nil
		return nil
	}
	n, err := strconv.ParseInt(s, 10, 32)
	if err != nil {
		return fmt.Errorf("must be a number or none, got %q", s)
	}
	v := int32(n)
	l.value = &v
	return nil
}

// rateValue is a --rate value: N/DURATION (100/1m), or "none" to clear.
type rateValue struct {
	set       bool
	maxStarts *int32
	per       time.Duration
}

func (r *rateValue) String() string {
	if r == nil || r.maxStarts == nil {
		return ""
	}
	return fmt.Sprintf("%d/%s", *r.maxStarts, r.per)
}

func (r *rateValue) Set(s string) error {
	r.set = true
	if s == "none" {
		r.maxStarts = nil
		return nil
	}
	count, per, ok := strings.Cut(s, "/")
	n, err := strconv.ParseInt(count, 10, 32)
	if !ok || err != nil {
		return fmt.Errorf("must be N/DURATION (100/1m) or none, got %q", s)
	}
	d, err := time.ParseDuration(per)
	if err != nil {
		// "100/s" reads as 100 per second.
		d, err = time.ParseDuration("1" + per)
	}
	if err != nil {
		return fmt.Errorf("must be N/DURATION (100/1m) or none, got %q", s)
	}
	v := int32(n)
	r.maxStarts, r.per = &v, d
	return nil
}

// switchValue is a --fair, --ordered or --rate-per-key value: given alone it turns the
// setting on, =false turns it off; set records whether it was given at all.
type switchValue struct {
	set   bool
	value bool
}

func (b *switchValue) IsBoolFlag() bool { return true }

func (b *switchValue) String() string {
	if b == nil {
		return "false"
	}
	return strconv.FormatBool(b.value)
}

func (b *switchValue) Set(s string) error {
	v, err := strconv.ParseBool(s)
	if err != nil {
		return fmt.Errorf("must be true or false, got %q", s)
	}
	b.set, b.value = true, v
	return nil
}

func (b *switchValue) ptr() *bool {
	if !b.set {
		return nil
	}
	return &b.value
}

var limitCommand = &command{
	name:     "limit",
	synopsis: "QUEUE [--max-running N|none] [--per-key M|none] [--fair[=false]] [--ordered[=false]] [--rate N/DURATION|none] [--rate-per-key[=false]] [flags]",
	summary:  "set or clear a queue's concurrency and rate limits, fairness and ordering (jobs_set_concurrency, jobs_set_rate_limit)",
	help: `Sets the settings given and keeps the others: --max-running caps the queue's running jobs
across every worker, --per-key caps running jobs sharing one concurrency key, --rate caps
how many start in any window (100/1m, 10/s). "none" clears a limit. The limits are exact;
a lowered limit stops new claims until running jobs fall below it, and touches none that
run.

--fair shares the queue between concurrency keys: claims take ready jobs round-robin across
keys (one per key per turn; priority and run_at still order the jobs of a key), so a tenant
with 100,000 queued jobs cannot starve one with 10. --ordered runs the jobs sharing a
concurrency key one at a time in enqueue order; a job waiting for its retry holds back the
later jobs of its key until it is done, dead or cancelled. --rate-per-key makes --rate count
the starts of each concurrency key apart (at most N starts per key per window) instead of
the queue's. --fair=false, --ordered=false and --rate-per-key=false turn them off. (--per-key
is the concurrency cap per key and takes a number; the rate's switch is --rate-per-key.)

  skiplock limit payments --max-running 5 --rate 100/1m
  skiplock limit tenants --fair --per-key 2
  skiplock limit ledger --ordered
  skiplock limit partner-api --rate 10/1s --rate-per-key
  skiplock limit payments --max-running none --rate none --fair=false

Output: the queue's settings after the change; -o json: {"queue": Q, "max_running": N,
"per_key": N, "max_starts": N, "per_s": SECONDS, "fair": BOOL, "ordered": BOOL,
"rate_per_key": BOOL} (a limit null when unset).
`,
	db:     true,
	output: true,
	setup: func(fs *flag.FlagSet) func(context.Context, *call) error {
		var maxRunning, perKey limitValue
		var rate rateValue
		var fair, ordered, ratePerKey switchValue
		fs.Var(&maxRunning, "max-running", "at most `N` jobs of the queue running at once, or none")
		fs.Var(&perKey, "per-key", "at most `M` running jobs per concurrency key, or none")
		fs.Var(&fair, "fair", "take ready jobs round-robin across concurrency keys (=false: off)")
		fs.Var(&ordered, "ordered", "run the jobs of each concurrency key one at a time, in enqueue order (=false: off)")
		fs.Var(&rate, "rate", "at most N starts per DURATION: `N/DURATION` (100/1m), or none")
		fs.Var(&ratePerKey, "rate-per-key", "count --rate's starts per concurrency key (=false: per queue)")
		return func(ctx context.Context, c *call) error {
			if len(c.args) != 1 {
				return usageErrorf("limit: want one QUEUE, got %d arguments", len(c.args))
			}
			if !maxRunning.set && !perKey.set && !rate.set && !fair.set && !ordered.set && !ratePerKey.set {
				return usageErrorf("limit: nothing to change: give --max-running, --per-key, --fair, --ordered, --rate or --rate-per-key")
			}
			queue := c.args[0]
			tx, err := c.conn.Begin(ctx)
			if err != nil {
				return fmt.Errorf("failed to begin: %w", err)
			}
			defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
			a := admin.New(tx, nil)
			// jobs_set_concurrency sets both limits, jobs_set_rate_limit the rate and whether
			// it counts per key: keep those not given. (Fair and ordered not given are NULL,
			// which leaves them as they are.)
			cur, err := a.Limits(ctx, queue)
			if err != nil {
				return fmt.Errorf("failed to read the limits of queue %q: %w", queue, err)
			}
			if maxRunning.set || perKey.set || fair.set || ordered.set {
				if maxRunning.set {
					cur.MaxRunning = maxRunning.value
				}
				if perKey.set {
					cur.PerKey = perKey.value
				}
				err := a.SetConcurrency(ctx, queue, cur.MaxRunning, cur.PerKey,
					admin.ConcurrencyOpts{Fair: fair.ptr(), Ordered: ordered.ptr()})
				if err != nil {
					return fmt.Errorf("failed to set the concurrency of queue %q: %w", queue, err)
				}
			}
			if rate.set || ratePerKey.set {
				maxStarts, per := cur.MaxStarts, cur.Per
				if rate.set {
					maxStarts, per = rate.maxStarts, nil
					if rate.maxStarts != nil {
						p := durationInterval(rate.per)
						per = &p
					}
				}
				perKeyRate := cur.RatePerKey
				if ratePerKey.set {
					perKeyRate = ratePerKey.value
				}
				if maxStarts == nil {
					if ratePerKey.set && ratePerKey.value {
						return usageErrorf("limit: --rate-per-key needs a rate limit: give --rate N/DURATION")
					}
					perKeyRate = false // no rate limit left to count per key
				}
				if err := a.SetRateLimit(ctx, queue, maxStarts, per, admin.RateLimitOpts{PerKey: perKeyRate}); err != nil {
					return fmt.Errorf("failed to set the rate limit of queue %q: %w", queue, err)
				}
			}
			m, err := a.Limits(ctx, queue)
			if err != nil {
				return fmt.Errorf("failed to read the limits of queue %q: %w", queue, err)
			}
			if err := tx.Commit(ctx); err != nil {
				return fmt.Errorf("failed to commit: %w", err)
			}
			if c.format == outputJSON {
				return writeJSON(c.stdout, struct {
					Queue      string   `json:"queue"`
					MaxRunning *int32   `json:"max_running"`
					PerKey     *int32   `json:"per_key"`
					MaxStarts  *int32   `json:"max_starts"`
					PerS       *float64 `json:"per_s"`
					Fair       bool     `json:"fair"`
					Ordered    bool     `json:"ordered"`
					RatePerKey bool     `json:"rate_per_key"`
				}{queue, m.MaxRunning, m.PerKey, m.MaxStarts, m.PerS, m.Fair, m.Ordered, m.RatePerKey})
			}
			_, err = fmt.Fprintf(c.stdout, "%s: %s\n", queue, describeLimits(m))
			return err
		}
	},
}
