package driver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

// Schedule declares a durable cron schedule, upserted with jobs_schedule when the client
// starts (see [Config.Schedules]). The schedule lives in the database (jobs_schedules): any
// client, or psql, may tick it, and it keeps running when this client stops.
type Schedule struct {
	// Name identifies the schedule; declaring the same name again updates it. 1 to 200
	// bytes. Required.
	Name string

	// Cron is the expression: five fields (minute hour day-of-month month day-of-week), a
	// macro such as "@daily", or "@every 30 seconds"; see jobs_cron_next in docs/sql-api.md.
	// The database checks it when the client starts. Required.
	Cron string

	// Kind is the kind of the jobs enqueued. Required.
	Kind string

	// Payload is encoded with encoding/json; nil is stored as {}.
	Payload any

	// Queue is the queue of the jobs enqueued. Defaults to QueueDefault.
	Queue string

	// Timezone is the IANA time zone the five-field expression reads its wall-clock time
	// in, e.g. "Europe/Berlin". Defaults to "UTC".
	Timezone string

	// Priority is the priority of the jobs enqueued. Defaults to 0.
	Priority int

	// MaxAttempts is the attempt budget of the jobs enqueued. Defaults to
	// MaxAttemptsDefault.
	MaxAttempts int

	// Disabled keeps the schedule but enqueues nothing until it is declared again without
	// Disabled. Defaults to false.
	Disabled bool
}

// scheduleArgs is a validated Schedule, as jobs_schedule's arguments.
type scheduleArgs struct {
	name, cron, kind, queue, timezone string
	payload                           json.RawMessage
	priority, maxAttempts             int32
	enabled                           bool
}

// validateSchedules checks what the SQL cannot see (Go types, duplicate names) and leaves
// the rest (cron syntax, time zones, lengths) to jobs_schedule, which names the parameter.
func validateSchedules(schedules []Schedule) ([]scheduleArgs, error) {
	out := make([]scheduleArgs, 0, len(schedules))
	seen := make(map[string]bool, len(schedules))
	for i, s := range schedules {
		invalid := func(field, format string, args ...any) error {
			return &InvalidError{Field: "Config.Schedules[" + strconv.Itoa(i) + "]." + field, Problem: fmt.Sprintf(format, args...)}
		}
		switch {
		case s.Name == "" || len(s.Name) > 200:
			return nil, invalid("Name", "must be 1 to 200 bytes, got %d", len(s.Name))
		case seen[s.Name]:
			return nil, invalid("Name", "%q is declared twice", s.Name)
		case s.Cron == "":
			return nil, invalid("Cron", "must not be empty")
		case s.Kind == "":
			return nil, invalid("Kind", "must not be empty")
		case s.Priority < math.MinInt32 || s.Priority > math.MaxInt32:
			return nil, invalid("Priority", "must fit in 32 bits, got %d", s.Priority)
		case s.MaxAttempts < 0 || s.MaxAttempts > math.MaxInt32:
			return nil, invalid("MaxAttempts", "must be 0 (default) or a positive 32-bit number, got %d", s.MaxAttempts)
		}
		// Text the server would refuse (SQLSTATE 22021), named as the SQL names its parameters.
		for _, f := range []struct{ field, value string }{
			{"Name", s.Name}, {"Cron", s.Cron}, {"Kind", s.Kind}, {"Queue", s.Queue}, {"Timezone", s.Timezone},
		} {
			if problem := storableTextError(f.value); problem != "" {
				return nil, invalid(f.field, "%s", problem)
			}
		}
		seen[s.Name] = true
		a := scheduleArgs{name: s.Name, cron: s.Cron, kind: s.Kind, queue: s.Queue, timezone: s.Timezone,
			priority: int32(s.Priority), maxAttempts: int32(s.MaxAttempts), enabled: !s.Disabled, payload: json.RawMessage("{}")}
		if s.Payload != nil {
			b, err := json.Marshal(s.Payload)
			if err != nil {
				return nil, invalid("Payload", "cannot be encoded as JSON: %v", err)
			}
			a.payload = b
		}
		if a.queue == "" {
			a.queue = QueueDefault
		}
		if a.timezone == "" {
			a.timezone = "UTC"
		}
		if a.maxAttempts == 0 {
			a.maxAttempts = MaxAttemptsDefault
		}
		out = append(out, a)
	}
	// Clients declaring overlapping sets lock the rows in one order: no deadlock.
	slices.SortFunc(out, func(a, b scheduleArgs) int { return strings.Compare(a.name, b.name) })
	return out, nil
}

// scheduleLoop declares Config.Schedules and calls jobs_schedule_tick every
// ScheduleTickInterval (jittered) until ctx is done. Every client ticks, without a leader:
// jobs_schedule_tick enqueues each scheduled instant once however many clients call it, and
// costs one index probe when nothing is due. Ticking does not wait for the declaration: the
// schedules already in the database (declared by other clients or psql) keep running even
// when this client's own cannot be declared. A declaration the database refuses for good
// (a bad cron expression or time zone, 22023; a role without jobs_admin, 42501) is logged
// once at error level and not tried again; other failures are retried with backoff (up to
// a minute).
func (c *Client) scheduleLoop(ctx context.Context) {
	declared := len(c.schedules) == 0
	retry := c.cfg.PollInterval
	var nextDeclare time.Time
	for {
		if !declared && !time.Now().Before(nextDeclare) {
			err := c.declareSchedules(ctx)
			switch {
			case err == nil:
				declared = true
			case ctx.Err() != nil:
				return
			case permanentScheduleError(err):
				c.logger.Error("failed to declare schedules; not retrying (fix Config.Schedules or the role and restart)",
					slog.Any("error", err))
				declared = true
			default:
				c.logger.Error("failed to declare schedules; retrying", slog.Any("error", err), slog.Duration("retry_in", retry))
				nextDeclare = time.Now().Add(jitter(retry, 0.1))
				retry = min(2*retry, time.Minute)
			}
		}
		wait := c.cfg.ScheduleTickInterval
		if c.cfg.ScheduleTickInterval >= 0 {
			c.tickSchedules(ctx)
		} else {
			if declared {
				return
			}
			wait = time.Until(nextDeclare)
		}
		if !sleepCtx(ctx, jitter(wait, 0.1)) {
			return
		}
	}
}

// permanentScheduleError reports whether declaring the schedules failed in a way that
// repeating cannot fix: the database refused an argument (22023, e.g. a bad cron
// expression) or the role may not call jobs_schedule (42501).
func permanentScheduleError(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && (pgErr.Code == "22023" || pgErr.Code == "42501")
}

// declareSchedules upserts every schedule in one transaction, in name order: a bad one (the
// database checks the cron expression and time zone) declares none.
func (c *Client) declareSchedules(ctx context.Context) error {
	qctx, cancel := context.WithTimeout(ctx, opTimeout)
	defer cancel()
	tx, err := c.pool.Begin(qctx)
	if err != nil {
		return fmt.Errorf("failed to declare schedules: %w", err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(qctx)) }()
	for _, s := range c.schedules {
		if _, err := tx.Exec(qctx, scheduleSQL, s.name, s.cron, s.kind, s.payload, s.queue, s.timezone,
			s.priority, s.maxAttempts, s.enabled); err != nil {
			return fmt.Errorf("failed to declare schedule %q: %w", s.name, err)
		}
	}
	if err := tx.Commit(qctx); err != nil {
		return fmt.Errorf("failed to declare schedules: %w", err)
	}
	return nil
}

// tickSchedules calls jobs_schedule_tick once.
func (c *Client) tickSchedules(ctx context.Context) {
	qctx, cancel := context.WithTimeout(ctx, opTimeout)
	defer cancel()
	var n int
	err := c.pool.QueryRow(qctx, scheduleTickSQL).Scan(&n)
	switch {
	case err != nil && ctx.Err() == nil:
		c.logger.Warn("failed to tick schedules", slog.Any("error", err))
	case n > 0:
		c.logger.Debug("enqueued scheduled jobs", slog.Int("jobs", n))
	}
}
