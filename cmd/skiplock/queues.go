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
	summary:  "list queues with their counts, age of the oldest ready job, pause and limits (jobs_metrics)",
	help: `Lists every queue that has jobs or settings: ready (queued and due), scheduled (queued for
later), running (and how many of those have an expired lease), dead, cancelled, an estimate
of done jobs (from the planner's statistics), the age of the oldest ready job, whether it is
paused, and its limits. Reads no finished row, so it is cheap on any table; the last line is
the whole table.

Output (-o json): {"queues": [QUEUE...], "total": QUEUE}, each QUEUE with queue, ready,
scheduled, running, running_expired, dead, cancelled, done_estimate, oldest_ready_age_s,
paused, max_running, per_key, max_starts, per_s (null when unset; queue is null in total).
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
					describeLimits(admin.QueueLimits{MaxRunning: m.MaxRunning, PerKey: m.PerKey, MaxStarts: m.MaxStarts, PerS: m.PerS}))
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
	if m.MaxStarts != nil && m.PerS != nil {
		parts = append(parts, fmt.Sprintf("rate %d/%s", *m.MaxStarts, time.Duration(*m.PerS*float64(time.Second))))
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

var limitCommand = &command{
	name:     "limit",
	synopsis: "QUEUE [--max-running N|none] [--per-key M|none] [--rate N/DURATION|none] [flags]",
	summary:  "set or clear a queue's concurrency and rate limits (jobs_set_concurrency, jobs_set_rate_limit)",
	help: `Sets the limits given and keeps the others: --max-running caps the queue's running jobs
across every worker, --per-key caps running jobs sharing one concurrency key, --rate caps
how many start in any window (100/1m, 10/s). "none" clears a limit. The limits are exact;
a lowered limit stops new claims until running jobs fall below it, and touches none that
run.

  skiplock limit payments --max-running 5 --rate 100/1m
  skiplock limit payments --max-running none --rate none

Output: the queue's limits after the change; -o json: {"queue": Q, "max_running": N,
"per_key": N, "max_starts": N, "per_s": SECONDS} (null when unset).
`,
	db:     true,
	output: true,
	setup: func(fs *flag.FlagSet) func(context.Context, *call) error {
		var maxRunning, perKey limitValue
		var rate rateValue
		fs.Var(&maxRunning, "max-running", "at most `N` jobs of the queue running at once, or none")
		fs.Var(&perKey, "per-key", "at most `M` running jobs per concurrency key, or none")
		fs.Var(&rate, "rate", "at most N starts per DURATION: `N/DURATION` (100/1m), or none")
		return func(ctx context.Context, c *call) error {
			if len(c.args) != 1 {
				return usageErrorf("limit: want one QUEUE, got %d arguments", len(c.args))
			}
			if !maxRunning.set && !perKey.set && !rate.set {
				return usageErrorf("limit: nothing to change: give --max-running, --per-key or --rate")
			}
			queue := c.args[0]
			tx, err := c.conn.Begin(ctx)
			if err != nil {
				return fmt.Errorf("failed to begin: %w", err)
			}
			defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
			a := admin.New(tx, nil)
			if maxRunning.set || perKey.set {
				// jobs_set_concurrency sets both: keep the one not given.
				cur, err := a.Limits(ctx, queue)
				if err != nil {
					return fmt.Errorf("failed to read the limits of queue %q: %w", queue, err)
				}
				if maxRunning.set {
					cur.MaxRunning = maxRunning.value
				}
				if perKey.set {
					cur.PerKey = perKey.value
				}
				if err := a.SetConcurrency(ctx, queue, cur.MaxRunning, cur.PerKey); err != nil {
					return fmt.Errorf("failed to set the concurrency of queue %q: %w", queue, err)
				}
			}
			if rate.set {
				var per *string
				if rate.maxStarts != nil {
					p := durationInterval(rate.per)
					per = &p
				}
				if err := a.SetRateLimit(ctx, queue, rate.maxStarts, per); err != nil {
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
				}{queue, m.MaxRunning, m.PerKey, m.MaxStarts, m.PerS})
			}
			_, err = fmt.Fprintf(c.stdout, "%s: %s\n", queue, describeLimits(m))
			return err
		}
	},
}
