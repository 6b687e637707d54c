package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"time"
)

var enqueueCommand = &command{
	name:     "enqueue",
	synopsis: "KIND [PAYLOAD | -] [flags]",
	summary:  "add a job and print its id (jobs_enqueue)",
	help: `Adds one job of kind KIND with the JSON PAYLOAD (default {}; - reads it from stdin) and
prints its id. With --unique-key, while a job of the same queue and key is waiting, queued or
running, prints that job's id instead. Needs a role granted jobs_producer.

--on-duplicate replace (debounce, with --in): while the key's job is waiting or queued, it
takes this job's payload, run time, priority and max attempts (its id is printed); while it
runs, this job is added after it and takes the key. --unique-for DURATION (throttle) keeps
the key taken for that long after its job finished, printing the finished job's id
meanwhile: a job of the key starts at most once per DURATION.

With --depends-on the job waits (state waiting) until every job named is done; when one of
them ends dead or cancelled, the job is cancelled too, or with --on-parent-failure run, runs
anyway. With --notify-finished its end (done, dead or cancelled) is announced on the
jobs_finished channel, which 'skiplock wait' listens to.

  skiplock enqueue email '{"to":"a@example.com"}' --queue mail --in 5m
  skiplock enqueue report --depends-on 12,13 --notify-finished
  skiplock enqueue reindex '{"doc":7}' --unique-key doc-7 --on-duplicate replace --in 30s
  skiplock enqueue digest --unique-key daily-digest --unique-for 1h

Output: the id; -o json: {"id": N}.
`,
	db:     true,
	output: true,
	setup: func(fs *flag.FlagSet) func(context.Context, *call) error {
		queue := fs.String("queue", "default", "queue")
		runAt := fs.String("run-at", "", "when to run it, RFC 3339 (2026-12-24T18:00:00Z) or any PostgreSQL timestamptz (default now)")
		in := fs.Duration("in", 0, "run it this long from now (5m, 1h30m); not with --run-at")
		priority := fs.Int("priority", 0, "priority: lower runs first")
		maxAttempts := fs.Int("max-attempts", 5, "attempts before the job is dead")
		uniqueKey := fs.String("unique-key", "", "at most one queued or running job of the queue with this key")
		concurrencyKey := fs.String("concurrency-key", "", "key counted against the queue's --per-key limit")
		onDuplicate := fs.String("on-duplicate", "", "when --unique-key is taken: keep (the default: print the job's id) or replace (debounce)")
		uniqueFor := fs.Duration("unique-for", 0, "keep --unique-key taken this long after the job finished (throttle: 1h)")
		dependsOn := fs.String("depends-on", "", "job `IDS`, comma-separated, that must be done before this job runs")
		onParentFailure := fs.String("on-parent-failure", "", "when a job of --depends-on ends dead or cancelled: cancel (the default) or run")
		notifyFinished := fs.Bool("notify-finished", false, "announce the job's end on the jobs_finished channel (for skiplock wait)")
		return func(ctx context.Context, c *call) error {
			if len(c.args) < 1 || len(c.args) > 2 {
				return usageErrorf("enqueue: want KIND [PAYLOAD | -], got %d arguments", len(c.args))
			}
			if *runAt != "" && *in != 0 {
				return usageErrorf("enqueue: --run-at and --in exclude each other")
			}
			if err := checkInt32("enqueue", "priority", *priority); err != nil {
				return err
			}
			if err := checkInt32("enqueue", "max-attempts", *maxAttempts); err != nil {
				return err
			}
			parents, err := parseIDs("enqueue", "depends-on", *dependsOn)
			if err != nil {
				return err
			}
			if *onParentFailure != "" && parents == nil {
				return usageErrorf("enqueue: --on-parent-failure needs --depends-on")
			}
			if *onDuplicate != "" && *onDuplicate != "keep" && *onDuplicate != "replace" {
				return usageErrorf("enqueue: --on-duplicate must be keep or replace, got %q", *onDuplicate)
			}
			if *uniqueFor < 0 {
				return usageErrorf("enqueue: --unique-for must not be negative, got %s", *uniqueFor)
			}
			if (*onDuplicate == "replace" || *uniqueFor != 0) && *uniqueKey == "" {
				return usageErrorf("enqueue: --on-duplicate replace and --unique-for need --unique-key")
			}
			payload := "{}"
			if len(c.args) == 2 {
				payload = c.args[1]
				if payload == "-" {
					b, err := io.ReadAll(c.stdin)
					if err != nil {
						return fmt.Errorf("failed to read the payload from stdin: %w", err)
					}
					payload = string(b)
				}
			}
			// --in is added to the server's now(), so a skewed local clock does not move it.
			// The workflow and duplicate arguments are passed only when given, so an install from before
			// workflows takes the rest.
			sql := `
				SELECT jobs_enqueue(
				    kind            => $1,
				    payload         => $2::jsonb,
				    queue           => $3,
				    run_at          => coalesce($4::timestamptz, now() + $5::interval),
				    priority        => $6,
				    max_attempts    => $7,
				    unique_key      => $8,
				    concurrency_key => $9`
			args := []any{c.args[0], payload, *queue, nullIfEmpty(*runAt), durationInterval(*in), *priority,
				*maxAttempts, nullIfEmpty(*uniqueKey), nullIfEmpty(*concurrencyKey)}
			if parents != nil {
				args = append(args, parents)
				sql += fmt.Sprintf(", depends_on => $%d", len(args))
			}
			if *onParentFailure != "" {
				args = append(args, *onParentFailure)
				sql += fmt.Sprintf(", on_parent_failure => $%d", len(args))
			}
			if *notifyFinished {
				sql += ", notify_finished => true"
			}
			if *onDuplicate != "" {
				args = append(args, *onDuplicate)
				sql += fmt.Sprintf(", on_duplicate => $%d", len(args))
			}
			if *uniqueFor != 0 {
				args = append(args, durationInterval(*uniqueFor))
				sql += fmt.Sprintf(", unique_for => $%d::interval", len(args))
			}
			var id int64
			if err := c.conn.QueryRow(ctx, sql+")", args...).Scan(&id); err != nil {
				return fmt.Errorf("failed to enqueue: %w", err)
			}
			if c.format == outputJSON {
				return writeJSON(c.stdout, map[string]int64{"id": id})
			}
			_, err = fmt.Fprintln(c.stdout, id)
			return err
		}
	},
}

// nullIfEmpty passes an empty flag as NULL.
func nullIfEmpty(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// durationInterval is d as a PostgreSQL interval literal, exact to the microsecond.
func durationInterval(d time.Duration) string {
	return fmt.Sprintf("%d microseconds", d.Microseconds())
}

// parseIDs reads a comma-separated list of job ids (--depends-on 1,2); nil for "".
func parseIDs(cmd, flagName, list string) ([]int64, error) {
	if strings.TrimSpace(list) == "" {
		return nil, nil
	}
	var ids []int64
	for _, s := range strings.Split(list, ",") {
		id, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
		if err != nil {
			return nil, usageErrorf("%s: --%s must be job ids separated by commas, got %q", cmd, flagName, s)
		}
		ids = append(ids, id)
	}
	return ids, nil
}

// checkInt32 refuses an integer flag outside PostgreSQL's integer range (the SQL functions
// check the rest of each range themselves).
func checkInt32(cmd, flagName string, v int) error {
	if v < math.MinInt32 || v > math.MaxInt32 {
		return usageErrorf("%s: --%s must be a 32-bit integer, got %d", cmd, flagName, v)
	}
	return nil
}
