package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"time"

	"github.com/skiplock/skiplock/admin"
)

// minWatch is the shortest --watch interval: each refresh counts every job (jobs_stats
// scans the table), so a tighter loop would load the server for nothing.
const minWatch = 500 * time.Millisecond

var statsCommand = &command{
	name:     "stats",
	synopsis: "[--watch DURATION [--count N]] [flags]",
	summary:  "print exact job counts per queue and state (jobs_stats)",
	help: `Prints the number of jobs per queue and state, and the age of the oldest ready job of
each queue. The counts are exact (the table is scanned): on a large table prefer 'skiplock
queues', which reads no finished row.

With --watch it prints again every DURATION (at least 500ms) until interrupted (Ctrl-C, exit
code 0) or --count refreshes were printed; each refresh starts with a line of the time.

Output (-o json): a list of {queue, state, jobs, oldest_ready_age_s}; with --watch one such
list per line, each refresh as {"at": TIME, "stats": [...]}.
`,
	db:     true,
	output: true,
	setup: func(fs *flag.FlagSet) func(context.Context, *call) error {
		watch := fs.Duration("watch", 0, "print again every DURATION (2s) until interrupted")
		count := fs.Int("count", 0, "with --watch, stop after N refreshes (0: until interrupted)")
		return func(ctx context.Context, c *call) error {
			if len(c.args) > 0 {
				return usageErrorf("stats: unexpected argument %q", c.args[0])
			}
			if *watch == 0 {
				if *count != 0 {
					return usageErrorf("stats: --count needs --watch")
				}
				rows, err := c.admin().Stats(ctx)
				if err != nil {
					return fmt.Errorf("failed to read stats: %w", err)
				}
				return printStats(c, rows)
			}
			if *watch < minWatch {
				return usageErrorf("stats: --watch must be at least %s, got %s", minWatch, *watch)
			}
			if *count < 0 {
				return usageErrorf("stats: --count must be 0 or more, got %d", *count)
			}
			ticker := time.NewTicker(*watch)
			defer ticker.Stop()
			for n := 1; ; n++ {
				rows, err := c.admin().Stats(ctx)
				if ctx.Err() != nil {
					return nil // interrupted: a normal end of watching
				}
				if err != nil {
					return fmt.Errorf("failed to read stats: %w", err)
				}
				at := time.Now().UTC()
				if c.format == outputJSON {
					line, err := json.Marshal(struct {
						At    time.Time          `json:"at"`
						Stats []admin.StateCount `json:"stats"`
					}{at, nonNil(rows)})
					if err != nil {
						return err
					}
					fmt.Fprintf(c.stdout, "%s\n", line)
				} else {
					fmt.Fprintf(c.stdout, "%s\n", at.Format(time.RFC3339))
					if err := printStats(c, rows); err != nil {
						return err
					}
					fmt.Fprintln(c.stdout)
				}
				if *count > 0 && n >= *count {
					return nil
				}
				select {
				case <-ctx.Done():
					return nil
				case <-ticker.C:
				}
			}
		}
	},
}

func nonNil(rows []admin.StateCount) []admin.StateCount {
	if rows == nil {
		return []admin.StateCount{}
	}
	return rows
}

func printStats(c *call, rows []admin.StateCount) error {
	if c.format == outputJSON {
		return writeJSON(c.stdout, nonNil(rows))
	}
	tw := newTable(c.stdout)
	fmt.Fprintln(tw, "QUEUE\tSTATE\tJOBS\tOLDEST READY")
	for _, s := range rows {
		age := "-"
		if s.OldestReadyAgeS != nil {
			age = time.Duration(*s.OldestReadyAgeS * float64(time.Second)).Round(time.Millisecond).String()
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\n", cell(s.Queue, 0), s.State, s.Jobs, age)
	}
	return tw.Flush()
}
