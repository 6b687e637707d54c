package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/skiplock/skiplock/admin"
)

var scheduleAddCommand = &command{
	name:     "schedule add",
	synopsis: "NAME CRON KIND [PAYLOAD | -] [flags]",
	summary:  "create or update a cron schedule (jobs_schedule)",
	help: `Creates the schedule NAME, or updates it, which enqueues a job of KIND with the JSON
PAYLOAD (default {}; - reads stdin) at every instant of CRON: five fields (minute hour
day-of-month month day-of-week), a macro (@daily, @hourly...) or "@every 30 seconds", in
--timezone's wall-clock time. The same arguments again change nothing. Jobs are enqueued by
'skiplock schedule tick' or by any Go client's scheduler.

  skiplock schedule add nightly-report '30 2 * * *' report '{"format":"pdf"}' --timezone Europe/Berlin

Output: "NAME next runs at TIME"; -o json: {"name": NAME, "next_run_at": TIME or null}.
`,
	db:     true,
	output: true,
	setup: func(fs *flag.FlagSet) func(context.Context, *call) error {
		queue := fs.String("queue", "default", "queue of the jobs")
		timezone := fs.String("timezone", "UTC", "IANA time zone of CRON (Europe/Berlin)")
		priority := fs.Int("priority", 0, "priority of the jobs")
		maxAttempts := fs.Int("max-attempts", 5, "max attempts of the jobs")
		disabled := fs.Bool("disabled", false, "create it disabled (enqueues nothing until enabled)")
		return func(ctx context.Context, c *call) error {
			if len(c.args) < 3 || len(c.args) > 4 {
				return usageErrorf("schedule add: want NAME CRON KIND [PAYLOAD | -], got %d arguments", len(c.args))
			}
			if err := checkInt32("schedule add", "priority", *priority); err != nil {
				return err
			}
			if err := checkInt32("schedule add", "max-attempts", *maxAttempts); err != nil {
				return err
			}
			payload := "{}"
			if len(c.args) == 4 {
				payload = c.args[3]
				if payload == "-" {
					b, err := io.ReadAll(c.stdin)
					if err != nil {
						return fmt.Errorf("failed to read the payload from stdin: %w", err)
					}
					payload = string(b)
				}
			}
			next, err := c.admin().Schedule(ctx, c.args[0], c.args[1], c.args[2], admin.ScheduleOpts{Payload: payload,
				Queue: *queue, Timezone: *timezone, Priority: *priority, MaxAttempts: *maxAttempts, Enabled: !*disabled})
			if err != nil {
				return fmt.Errorf("failed to schedule %q: %w", c.args[0], err)
			}
			if c.format == outputJSON {
				return writeJSON(c.stdout, struct {
					Name      string     `json:"name"`
					NextRunAt *time.Time `json:"next_run_at"`
				}{c.args[0], next})
			}
			_, err = fmt.Fprintf(c.stdout, "%s next runs at %s\n", c.args[0], cell(next, 0))
			return err
		}
	},
}

var scheduleListCommand = &command{
	name:     "schedule list",
	synopsis: "[flags]",
	summary:  "list the schedules with their next and last run (jobs_schedules)",
	help: `Lists every schedule by name: its cron and time zone, the jobs it enqueues, whether it is
enabled, its next run, its last run and the job that got.

Output (-o json): a list of {name, cron, timezone, kind, payload, queue, priority,
max_attempts, enabled, next_run_at, last_run_at, last_job_id} (null when unset).
`,
	db:     true,
	output: true,
	setup: func(_ *flag.FlagSet) func(context.Context, *call) error {
		return func(ctx context.Context, c *call) error {
			if len(c.args) > 0 {
				return usageErrorf("schedule list: unexpected argument %q", c.args[0])
			}
			schedules, err := c.admin().Schedules(ctx, 0)
			if err != nil {
				return fmt.Errorf("failed to read the schedules: %w", err)
			}
			if c.format == outputJSON {
				if schedules == nil {
					schedules = []admin.Schedule{}
				}
				return writeJSON(c.stdout, schedules)
			}
			tw := newTable(c.stdout)
			fmt.Fprintln(tw, "NAME\tCRON\tTIMEZONE\tKIND\tQUEUE\tENABLED\tNEXT RUN\tLAST RUN\tLAST JOB")
			for _, s := range schedules {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%v\t%s\t%s\t%s\n", cell(s.Name, 40), cell(s.Cron, 30), s.Timezone,
					cell(s.Kind, 30), cell(s.Queue, 30), s.Enabled, cell(s.NextRunAt, 0), cell(s.LastRunAt, 0),
					cell(s.LastJobID, 0))
			}
			return tw.Flush()
		}
	},
}

// scheduleNotFound turns the 22023 a schedule function raises for an unknown name into exit
// code 3. The CLI never passes a NULL name, the only other 22023 naming it.
func scheduleNotFound(err error, name string) error {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "22023" && pgErr.ColumnName == "name" {
		return notFoundErrorf("no schedule %q", name)
	}
	return err
}

func oneName(c *call, cmd string) (string, error) {
	if len(c.args) != 1 {
		return "", usageErrorf("%s: want one schedule NAME, got %d arguments", cmd, len(c.args))
	}
	return c.args[0], nil
}

var scheduleRmCommand = &command{
	name:     "schedule rm",
	synopsis: "NAME [flags]",
	summary:  "delete a schedule; the jobs it enqueued stay (jobs_unschedule)",
	help: `Deletes the schedule NAME: it enqueues nothing more. Exit code 3 when there is no such
schedule. A Go client declaring it in Config.Schedules creates it again at its next start.

Output: "removed NAME"; -o json: {"name": NAME, "removed": true}.
`,
	db:     true,
	output: true,
	setup: func(_ *flag.FlagSet) func(context.Context, *call) error {
		return func(ctx context.Context, c *call) error {
			name, err := oneName(c, "schedule rm")
			if err != nil {
				return err
			}
			removed, err := c.admin().Unschedule(ctx, name)
			if err != nil {
				return fmt.Errorf("failed to remove schedule %q: %w", name, err)
			}
			if !removed {
				return notFoundErrorf("no schedule %q", name)
			}
			if c.format == outputJSON {
				return writeJSON(c.stdout, map[string]any{"name": name, "removed": true})
			}
			_, err = fmt.Fprintf(c.stdout, "removed %s\n", name)
			return err
		}
	},
}

var scheduleRunCommand = &command{
	name:     "schedule run",
	synopsis: "NAME [flags]",
	summary:  "enqueue a schedule's job now, leaving its next run alone (jobs_schedule_run)",
	help: `Enqueues one job from the schedule NAME to run now, enabled or not, and prints its id.
The schedule's next and last run do not move. Exit code 3 when there is no such schedule.

Output: the job id; -o json: {"id": N}.
`,
	db:     true,
	output: true,
	setup: func(_ *flag.FlagSet) func(context.Context, *call) error {
		return func(ctx context.Context, c *call) error {
			name, err := oneName(c, "schedule run")
			if err != nil {
				return err
			}
			id, err := c.admin().RunSchedule(ctx, name)
			if err != nil {
				return scheduleNotFound(fmt.Errorf("failed to run schedule %q: %w", name, err), name)
			}
			if c.format == outputJSON {
				return writeJSON(c.stdout, map[string]int64{"id": id})
			}
			_, err = fmt.Fprintln(c.stdout, id)
			return err
		}
	},
}

func setEnabledCommand(verb string, enabled bool, summary, help string) *command {
	return &command{
		name:     "schedule " + verb,
		synopsis: "NAME [flags]",
		summary:  summary,
		help:     help,
		db:       true,
		output:   true,
		setup: func(_ *flag.FlagSet) func(context.Context, *call) error {
			return func(ctx context.Context, c *call) error {
				name, err := oneName(c, "schedule "+verb)
				if err != nil {
					return err
				}
				changed, err := c.admin().SetScheduleEnabled(ctx, name, enabled)
				if err != nil {
					return scheduleNotFound(fmt.Errorf("failed to %s schedule %q: %w", verb, name, err), name)
				}
				if c.format == outputJSON {
					return writeJSON(c.stdout, map[string]any{"name": name, "enabled": enabled, "changed": changed})
				}
				if !changed {
					_, err = fmt.Fprintf(c.stdout, "%s was already %sd\n", name, verb)
					return err
				}
				_, err = fmt.Fprintf(c.stdout, "%sd %s\n", verb, name)
				return err
			}
		},
	}
}

var scheduleEnableCommand = setEnabledCommand("enable", true,
	"enable a schedule; its next run is computed from now (jobs_schedule_set_enabled)",
	`Enables the schedule NAME. Its next run is computed from now: runs missed while it was
disabled are not enqueued. Exit code 3 when there is no such schedule.

Output: "enabled NAME" or "NAME was already enabled"; -o json: {"name": NAME, "enabled": true,
"changed": BOOL}.
`)

var scheduleDisableCommand = setEnabledCommand("disable", false,
	"disable a schedule, keeping it (jobs_schedule_set_enabled)",
	`Disables the schedule NAME: it enqueues nothing until enabled again, and keeps its row.
Exit code 3 when there is no such schedule.

Output: "disabled NAME" or "NAME was already disabled"; -o json: {"name": NAME, "enabled":
false, "changed": BOOL}.
`)

var scheduleTickCommand = &command{
	name:     "schedule tick",
	synopsis: "[flags]",
	summary:  "enqueue the jobs of the schedules that are due (jobs_schedule_tick)",
	help: `Enqueues one job for every enabled schedule that is due and advances it: exactly once per
instant however many tickers run. For deployments without a Go client (whose scheduler
ticks by itself): run it every minute from cron, or use pg_cron.

Output: "enqueued N jobs"; -o json: {"jobs": N}.
`,
	db:     true,
	output: true,
	setup: func(_ *flag.FlagSet) func(context.Context, *call) error {
		return func(ctx context.Context, c *call) error {
			if len(c.args) > 0 {
				return usageErrorf("schedule tick: unexpected argument %q", c.args[0])
			}
			n, err := c.admin().TickSchedules(ctx)
			if err != nil {
				return fmt.Errorf("failed to tick the schedules: %w", err)
			}
			if c.format == outputJSON {
				return writeJSON(c.stdout, map[string]int{"jobs": n})
			}
			_, err = fmt.Fprintf(c.stdout, "enqueued %d jobs\n", n)
			return err
		}
	},
}
