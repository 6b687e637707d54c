package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/skiplock/skiplock/admin"
)

// A bulk action is retry, cancel or delete: one of the jobs_*_many functions, by ids or by
// filter.
type bulkAction struct {
	verb, past    string // "retry", "retried"
	function      admin.BulkAction
	defaultStates []string // the function's default states
	allowedStates []string // what its states argument may hold
}

var (
	retryAction = bulkAction{verb: "retry", past: "retried", function: admin.Retry,
		defaultStates: []string{"dead"}, allowedStates: []string{"dead", "cancelled"}}
	cancelAction = bulkAction{verb: "cancel", past: "cancelled", function: admin.Cancel,
		defaultStates: []string{"queued"}, allowedStates: []string{"waiting", "queued", "running"}}
	deleteAction = bulkAction{verb: "delete", past: "deleted", function: admin.Delete,
		defaultStates: []string{"done", "dead", "cancelled"}, allowedStates: []string{"done", "dead", "cancelled"}}
)

// bulkBatch is the max_jobs of each call of a filter-wide action: every call is its own
// transaction, so rows stay locked briefly and workers go on beside it.
const bulkBatch = 1000

var retryCommand = bulkAction.command(retryAction,
	"put dead (or cancelled) jobs back in the queue (jobs_retry_many)",
	`A retried job is queued again to run now, with one more attempt allowed when it had used
them all; its attempts and errors are kept. Jobs that cannot be retried are left alone, with
a warning on stderr: on a shard, jobs whose id names another shard (created before
jobs_set_shard), and jobs whose attempts are at the limit, 2147483647.`)

var cancelCommand = bulkAction.command(cancelAction,
	"cancel queued (or running, or waiting) jobs (jobs_cancel_many)",
	`A cancelled job is never claimed again; a running one finishes its attempt, but the worker's
completion is fenced out. Jobs waiting for their parents (--state waiting) are cancelled as
well, and so are the waiting children of every job cancelled, unless they were enqueued with
on_parent_failure run; 'skiplock workflow cancel' cancels a whole workflow.`)

var deleteCommand = bulkAction.command(deleteAction,
	"delete finished jobs: done, dead, cancelled (jobs_delete_many)",
	`Deleting is final. Queued and running jobs are never deleted: cancel them first.`)

func (a bulkAction) command(summary, what string) *command {
	return &command{
		name:     a.verb,
		synopsis: "[ID...] [--queue Q] [--kind K] [--state S[,S]] [--dry-run] [--yes] [flags]",
		summary:  summary,
		help: fmt.Sprintf(`%s

By ids: %s the jobs named that are in one of --state's states (default %s). Exit code 3
when none of them was.

By filter (no ids): %s every job matching --queue, --kind and --state (default %s;
allowed %s), in batches of %d ids from jobs_list per state, newest first, each job at most once (the
jobs that enter the set meanwhile with a higher id are left alone, so the command ends even
while workers fail retried jobs straight back to dead). Before a filter-wide action the
command counts the matching jobs and asks for confirmation on the terminal; --yes skips the
question, and without --yes it refuses (exit code 2) when stdin is not a terminal.

--dry-run counts what would be %s (with jobs_list and jobs_get) and changes nothing.

  skiplock %s --state %s --queue mail --dry-run
  skiplock %s --queue mail --yes

Output: "%s N jobs" (or "would %s N jobs"); -o json: {"action": "%s", "dry_run": BOOL,
"jobs": N}.
`, what, a.verb, strings.Join(a.defaultStates, ","), a.verb, strings.Join(a.defaultStates, ","),
			strings.Join(a.allowedStates, ","), bulkBatch, a.past, a.verb, a.defaultStates[0], a.verb, a.past, a.verb,
			a.verb),
		db:     true,
		output: true,
		setup: func(fs *flag.FlagSet) func(context.Context, *call) error {
			queue := fs.String("queue", "", "only jobs of this queue")
			kind := fs.String("kind", "", "only jobs of this kind")
			states := fs.String("state", strings.Join(a.defaultStates, ","), "states, comma-separated: "+strings.Join(a.allowedStates, ", "))
			dryRun := fs.Bool("dry-run", false, "count what would be "+a.past+", change nothing")
			yes := fs.Bool("yes", false, "do not ask for confirmation before a filter-wide "+a.verb)
			return func(ctx context.Context, c *call) error {
				return a.run(ctx, c, *queue, *kind, *states, *dryRun, *yes)
			}
		},
	}
}

func (a bulkAction) run(ctx context.Context, c *call, queue, kind, stateList string, dryRun, yes bool) error {
	var ids []int64
	for _, arg := range c.args {
		id, err := strconv.ParseInt(arg, 10, 64)
		if err != nil {
			return usageErrorf("%s: job ID must be an integer, got %q", a.verb, arg)
		}
		ids = append(ids, id)
	}
	states := strings.Split(stateList, ",")
	for i, s := range states {
		states[i] = strings.TrimSpace(s)
		if !slices.Contains(a.allowedStates, states[i]) {
			return usageErrorf("%s: --state may only hold %s, got %q", a.verb, strings.Join(a.allowedStates, ", "), states[i])
		}
	}
	if len(ids) > 0 && (queue != "" || kind != "") {
		return usageErrorf("%s: give job ids or --queue/--kind, not both", a.verb)
	}

	if len(ids) > 0 {
		if dryRun {
			n, err := c.admin().CountIDs(ctx, ids, states)
			if err != nil {
				return fmt.Errorf("failed to count jobs: %w", err)
			}
			return a.report(c, true, n)
		}
		n, err := c.admin().Bulk(ctx, a.function, admin.BulkOpts{IDs: ids, States: states, MaxJobs: len(ids)})
		if err != nil {
			return fmt.Errorf("failed to %s jobs: %w", a.verb, err)
		}
		if n == 0 {
			return notFoundErrorf("%s: none of the jobs %v is %s", a.verb, ids, strings.Join(states, " or "))
		}
		return a.report(c, false, n)
	}

	n, err := c.admin().CountMatching(ctx, queue, kind, states)
	if err != nil {
		return fmt.Errorf("failed to list jobs: %w", err)
	}
	if dryRun {
		return a.report(c, true, n)
	}
	if n > 0 && !yes {
		what := fmt.Sprintf("%s %d %s jobs%s", a.verb, n, strings.Join(states, " or "), describeFilter(queue, kind))
		if !c.stdinIsTerminal {
			return usageErrorf("%s: refusing to %s without --yes (stdin is not a terminal to confirm on)", a.verb, what)
		}
		fmt.Fprintf(c.stderr, "%s? [y/N] ", what)
		answer, _ := bufio.NewReader(c.stdin).ReadString('\n')
		if a := strings.ToLower(strings.TrimSpace(answer)); a != "y" && a != "yes" {
			return errNotConfirmed
		}
	}
	total, err := c.admin().BulkMatching(ctx, a.function, queue, kind, states, bulkBatch)
	if err != nil {
		return fmt.Errorf("failed to %s jobs (%d %s so far): %w", a.verb, total, a.past, err)
	}
	return a.report(c, false, total)
}

func describeFilter(queue, kind string) string {
	var parts []string
	if queue != "" {
		parts = append(parts, "queue "+strconv.Quote(queue))
	}
	if kind != "" {
		parts = append(parts, "kind "+strconv.Quote(kind))
	}
	if len(parts) == 0 {
		return " (every queue and kind)"
	}
	return " of " + strings.Join(parts, " and ")
}

func (a bulkAction) report(c *call, dryRun bool, n int) error {
	if c.format == outputJSON {
		return writeJSON(c.stdout, struct {
			Action string `json:"action"`
			DryRun bool   `json:"dry_run"`
			Jobs   int    `json:"jobs"`
		}{a.verb, dryRun, n})
	}
	if dryRun {
		_, err := fmt.Fprintf(c.stdout, "would %s %d jobs\n", a.verb, n)
		return err
	}
	_, err := fmt.Fprintf(c.stdout, "%s %d jobs\n", a.past, n)
	return err
}
