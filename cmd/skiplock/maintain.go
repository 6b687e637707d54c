package main

import (
	"context"
	"flag"
	"fmt"

	"github.com/skiplock/skiplock/admin"
)

var maintainCommand = &command{
	name:     "maintain",
	synopsis: "[--max-jobs N] [--until-done] [flags]",
	summary:  "requeue expired leases and delete finished jobs past their retention (jobs_maintain)",
	help: `Runs one round of housekeeping: expired leases go back to the queue (or to dead), and
done, cancelled and dead jobs older than their retention (jobs_settings) are deleted, at
most --max-jobs of each state. With --until-done it repeats while a round says there is
more. Go clients do this by themselves; run it from cron when only psql or other
languages work the queue. A round already running elsewhere makes it return at once.

Output: one line of counts; -o json: {"ran": BOOL, "requeued": N, "pruned_done": N,
"pruned_cancelled": N, "pruned_dead": N, "more": BOOL} (the sums over the rounds).
`,
	db:     true,
	output: true,
	setup: func(fs *flag.FlagSet) func(context.Context, *call) error {
		maxJobs := fs.Int("max-jobs", 10000, "at most this many jobs of each finished state deleted per round")
		untilDone := fs.Bool("until-done", false, "repeat while there is more to delete")
		return func(ctx context.Context, c *call) error {
			if len(c.args) > 0 {
				return usageErrorf("maintain: unexpected argument %q", c.args[0])
			}
			if err := checkInt32("maintain", "max-jobs", *maxJobs); err != nil {
				return err
			}
			var sum admin.Maintenance
			for {
				m, err := c.admin().Maintain(ctx, *maxJobs)
				if err != nil {
					return fmt.Errorf("failed to maintain: %w", err)
				}
				sum.Ran = sum.Ran || m.Ran
				sum.Requeued += m.Requeued
				sum.PrunedDone += m.PrunedDone
				sum.PrunedCancelled += m.PrunedCancelled
				sum.PrunedDead += m.PrunedDead
				sum.More = m.More
				if !*untilDone || !m.More || !m.Ran || ctx.Err() != nil {
					break
				}
			}
			if c.format == outputJSON {
				return writeJSON(c.stdout, sum)
			}
			if !sum.Ran {
				_, err := fmt.Fprintln(c.stdout, "another session's round is in progress; nothing done")
				return err
			}
			more := ""
			if sum.More {
				more = " (more to delete: run again)"
			}
			_, err := fmt.Fprintf(c.stdout, "requeued %d, deleted %d done, %d cancelled, %d dead%s\n",
				sum.Requeued, sum.PrunedDone, sum.PrunedCancelled, sum.PrunedDead, more)
			return err
		}
	},
}
