// Package ui is skiplock's web dashboard: an [http.Handler] that shows queues, jobs,
// workflows and schedules and lets an operator pause and resume queues, set their limits,
// retry and delete dead jobs (the selected ones, or every one matching a filter), cancel a
// workflow, and run, enable or disable schedules.
//
// Every page and action is a call of one of skiplock's SQL functions (jobs_metrics, jobs_list,
// jobs_inspect, jobs_retry_many, jobs_delete_many, jobs_pause, jobs_resume, jobs_set_concurrency,
// jobs_set_rate_limit, jobs_schedule_run, jobs_schedule_set_enabled, jobs_workflow,
// jobs_cancel_workflow) or a SELECT on jobs_schedules, so the role the handler connects as
// needs no more than jobs_admin (see docs/security.md). There is no queue logic in Go.
//
// # Workflows
//
// The workflow page draws the steps of a workflow (jobs_enqueue_workflow) as an SVG graph:
// a box per step, coloured by its state and linking to the step's job page, in columns by
// depth (the longest path from a step without parents), with an arrow from each parent to
// its children; a table below lists the same steps. Its button cancels every unfinished
// step. A job page links to the job's workflow and parents, and shows its progress and result.
//
// # Authentication is the host's job
//
// The handler authenticates no one: whoever reaches it can do everything it offers. Mount it
// behind the host application's own authentication middleware (or a reverse proxy that
// authenticates), or use [Options.ReadOnly] where that is not possible. The `skiplock ui`
// command wraps it in HTTP Basic auth from the environment, binds 127.0.0.1 by default and
// answers only the names it is given (see [Options.AllowedHosts]).
//
// # What it protects
//
//   - Cross-site request forgery: every POST must carry a token made for its form (an HMAC,
//     under a secret drawn when the handler is created, of the form's action and an expiry),
//     and cross-origin POSTs are refused ([http.CrossOriginProtection]). A POST without a
//     valid token gets 403.
//   - DNS rebinding: a request whose Host header is not an IP address, localhost or one of
//     [Options.AllowedHosts] gets 421 Misdirected Request on every path, so a page of a name
//     its owner points at this server (same-origin with it in the browser) can neither read
//     a page nor take a form's token.
//   - Escaping: pages are html/template, so payloads, errors, queue and kind names are escaped.
//   - Cost: no page counts an unbounded set. Lists are keyset-paged through jobs_list (newest
//     first, 50 to a page), counts come from jobs_metrics (which reads no finished row), and
//     "all matching" actions act on pages of at most 1,000 jobs of jobs_list, each committed on
//     its own, each job at most once. Pages stay under 200 ms with 1,000,000 done jobs in the table (ui_test.go).
//
// # Throughput
//
// The overview's chart of the last hour shows jobs created and jobs finished per minute. It
// is drawn from samples of jobs_metrics' totals row that the handler keeps in memory
// ([Handler.RunSampler], and every overview request): created is the difference of
// jobs_created_total (the id sequence), finished is created minus the growth of the queued and
// running jobs. So it never reads a finished row (counting rows by finished_at over an hour
// would scan them: done jobs have no index), at the price of starting empty when the process
// starts, and of showing the jobs a retry brought back as negative finishing (drawn as 0).
package ui
