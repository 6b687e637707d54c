package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"strconv"
	"strings"

	"github.com/skiplock/skiplock/admin"
)

var listCommand = &command{
	name:     "list",
	synopsis: "[--state S] [--queue Q] [--kind K] [--limit N] [--after ID] [flags]",
	summary:  "list jobs, newest first, one page at a time (jobs_list)",
	help: `Lists the jobs matching every filter given, newest (highest id) first, at most --limit of
them. Keyset paging: when the page is full, the next one is --after the last id shown (the
table output says so on stderr). Cheap with millions of done jobs when --state is given.
The last error is cut to one line; 'skiplock show ID' prints it in full.

  skiplock list --state dead --queue mail
  skiplock list --state dead --queue mail --after 1234

Output (-o json): {"jobs": [JOB...], "next_after": ID or null}, each JOB with id, queue,
kind, state, priority, attempts, max_attempts, run_at, created_at, started_at, finished_at,
lease_holder, lease_expires_at, unique_key, concurrency_key, last_error, progress (the JSON
the worker last reported) and workflow_id (null when unset).
next_after is the --after of the next page, null on the last page.
`,
	db:     true,
	output: true,
	setup: func(fs *flag.FlagSet) func(context.Context, *call) error {
		state := fs.String("state", "", "only jobs in this state: waiting, queued, running, done, dead or cancelled")
		queue := fs.String("queue", "", "only jobs of this queue")
		kind := fs.String("kind", "", "only jobs of this kind")
		limit := fs.Int("limit", 50, "page size, 1 to 1000")
		after := fs.Int64("after", 0, "only jobs with a smaller id: the last id of the previous page")
		return func(ctx context.Context, c *call) error {
			if len(c.args) > 0 {
				return usageErrorf("list: unexpected argument %q", c.args[0])
			}
			if err := checkInt32("list", "limit", *limit); err != nil {
				return err
			}
			jobs, err := c.admin().List(ctx, admin.ListOpts{State: *state, Queue: *queue, Kind: *kind, MaxJobs: *limit, BeforeID: *after})
			if err != nil {
				return fmt.Errorf("failed to list jobs: %w", err)
			}
			var next *int64
			if len(jobs) == *limit {
				next = &jobs[len(jobs)-1].ID
			}
			if c.format == outputJSON {
				if jobs == nil {
					jobs = []admin.ListedJob{}
				}
				return writeJSON(c.stdout, struct {
					Jobs      []admin.ListedJob `json:"jobs"`
					NextAfter *int64            `json:"next_after"`
				}{jobs, next})
			}
			tw := newTable(c.stdout)
			fmt.Fprintln(tw, "ID\tQUEUE\tKIND\tSTATE\tATTEMPTS\tRUN AT\tFINISHED AT\tLEASE HOLDER\tPROGRESS\tLAST ERROR")
			for _, j := range jobs {
				fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%d/%d\t%s\t%s\t%s\t%s\t%s\n", j.ID, cell(j.Queue, 30), cell(j.Kind, 30),
					j.State, j.Attempts, j.MaxAttempts, cell(j.RunAt, 0), cell(j.FinishedAt, 0), cell(j.LeaseHolder, 20),
					jsonCell(j.Progress, 40), cell(j.LastError, 60))
			}
			if err := tw.Flush(); err != nil {
				return err
			}
			if next != nil {
				fmt.Fprintf(c.stderr, "more: add --after %d for the next page\n", *next)
			}
			return nil
		}
	},
}

var showCommand = &command{
	name:     "show",
	synopsis: "ID [flags]",
	summary:  "print one job in full: payload, attempts and their errors, lease, progress, result (jobs_inspect)",
	help: `Prints everything about one job: queue, kind, state, attempts, the payload, the error of
every failed attempt (when, by which worker), the lease holder and expiry of a running job,
its keys and timestamps, its progress and result, and for a job with parents its workflow,
step and the jobs it depends on. Exit code 3 when there is no such job (never created, or
pruned).

Output (-o json): the fields of 'skiplock list' plus payload (the JSON as stored), errors (a
list of {attempt, at, error, worker}), workflow_step, depends_on (ids), on_parent_failure,
cancelled_by (the parent whose failure cancelled the job), result and checkpoints (the JSON
as stored; null when unset).
`,
	db:     true,
	output: true,
	setup: func(_ *flag.FlagSet) func(context.Context, *call) error {
		return func(ctx context.Context, c *call) error {
			if len(c.args) != 1 {
				return usageErrorf("show: want one job ID, got %d arguments", len(c.args))
			}
			id, err := strconv.ParseInt(c.args[0], 10, 64)
			if err != nil {
				return usageErrorf("show: ID must be an integer, got %q", c.args[0])
			}
			j, err := c.admin().Inspect(ctx, id)
			if errors.Is(err, admin.ErrJobNotFound) {
				return notFoundErrorf("show: no job %d", id)
			}
			if err != nil {
				return fmt.Errorf("failed to read job %d: %w", id, err)
			}
			if c.format == outputJSON {
				return writeJSON(c.stdout, j)
			}
			return printJob(c, j)
		}
	},
}

func printJob(c *call, j *admin.Job) error {
	tw := newTable(c.stdout)
	for _, row := range [][2]string{
		{"id", fmt.Sprint(j.ID)},
		{"queue", cell(j.Queue, 0)},
		{"kind", cell(j.Kind, 0)},
		{"state", j.State},
		{"priority", fmt.Sprint(j.Priority)},
		{"attempts", fmt.Sprintf("%d of %d", j.Attempts, j.MaxAttempts)},
		{"run at", cell(j.RunAt, 0)},
		{"created at", cell(j.CreatedAt, 0)},
		{"started at", cell(j.StartedAt, 0)},
		{"finished at", cell(j.FinishedAt, 0)},
		{"lease holder", cell(j.LeaseHolder, 0)},
		{"lease expires at", cell(j.LeaseExpiresAt, 0)},
		{"unique key", cell(j.UniqueKey, 0)},
		{"concurrency key", cell(j.ConcurrencyKey, 0)},
		{"progress", jsonCell(j.Progress, 0)},
		{"workflow", cell(j.WorkflowID, 0)},
		{"workflow step", cell(j.WorkflowStep, 0)},
		{"depends on", idList(j.DependsOn)},
		{"parent failure", cell(j.OnParentFailure, 0)},
		{"cancelled by", cell(j.CancelledBy, 0)},
	} {
		fmt.Fprintf(tw, "%s:\t%s\n", row[0], row[1])
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	var pretty []byte
	if p, err := json.MarshalIndent(j.Payload, "", "  "); err == nil {
		pretty = p
	} else {
		pretty = j.Payload
	}
	fmt.Fprintf(c.stdout, "payload:\n%s\n", pretty)
	if j.Result != nil {
		fmt.Fprintf(c.stdout, "result:\n%s\n", indentJSON(j.Result))
	}
	if len(j.Errors) == 0 {
		_, err := fmt.Fprintln(c.stdout, "errors: none")
		return err
	}
	fmt.Fprintln(c.stdout, "errors:")
	for _, e := range j.Errors {
		fmt.Fprintf(c.stdout, "  attempt %d at %s by %s:\n    %s\n", e.Attempt, cell(e.At, 0), cell(e.Worker, 0),
			strings.ReplaceAll(printable(e.Error), "\n", "\n    "))
	}
	return nil
}
