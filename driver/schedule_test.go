package driver_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/skiplock/skiplock/driver"
)

// Two clients declare the same schedule and both tick it: the schedule is created once, and
// every instant runs once.
func TestSchedulesDeclaredAndTicked(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var runs atomic.Int32
	seen := make(chan time.Time, 100)
	hs := driver.NewHandlers()
	driver.AddHandler(hs, "every_second", func(ctx context.Context, job *driver.Job[struct{ Source string }]) error {
		if job.Payload.Source != "config" {
			return errors.New("payload not from the schedule")
		}
		runs.Add(1)
		seen <- job.RunAt
		return nil
	}, nil)
	schedules := []driver.Schedule{{Name: "tick", Cron: "@every 1 second", Kind: "every_second", Payload: map[string]string{"Source": "config"}}}
	for range 2 {
		cfg := baseConfig(b, hs, map[string]driver.QueueConfig{"default": {}})
		cfg.Schedules = schedules
		startClient(t, b.pool, cfg)
	}

	waitUntil(t, 20*time.Second, "three scheduled runs", func() bool { return runs.Load() >= 3 })
	if n := queryInt(t, b.pool, "SELECT count(*) FROM jobs_schedules WHERE name = 'tick' AND cron = '@every 1 second'"); n != 1 {
		t.Fatalf("%d schedules named tick, want 1", n)
	}
	if n := queryInt(t, b.pool, "SELECT count(*) - count(DISTINCT run_at) FROM jobs WHERE kind = 'every_second'"); n != 0 {
		t.Fatalf("%d instants enqueued twice by the two clients", n)
	}
	at := <-seen
	if at.Truncate(time.Second) != at {
		t.Fatalf("job run_at %v is not the scheduled whole second", at)
	}
}

func TestScheduleConfigValidation(t *testing.T) {
	t.Parallel()
	hs := driver.NewHandlers()
	driver.AddHandler(hs, "k", func(ctx context.Context, job *driver.Job[struct{}]) error { return nil }, nil)
	pool := newPool(t, setup(t).url, 2)
	for _, tc := range []struct {
		name      string
		schedules []driver.Schedule
		interval  time.Duration
		field     string
	}{
		{"NameEmpty", []driver.Schedule{{Cron: "@daily", Kind: "k"}}, 0, "Config.Schedules[0].Name"},
		{"NameTwice", []driver.Schedule{{Name: "a", Cron: "@daily", Kind: "k"}, {Name: "a", Cron: "@hourly", Kind: "k"}}, 0, "Config.Schedules[1].Name"},
		{"CronEmpty", []driver.Schedule{{Name: "a", Kind: "k"}}, 0, "Config.Schedules[0].Cron"},
		{"KindEmpty", []driver.Schedule{{Name: "a", Cron: "@daily"}}, 0, "Config.Schedules[0].Kind"},
		{"MaxAttemptsNegative", []driver.Schedule{{Name: "a", Cron: "@daily", Kind: "k", MaxAttempts: -1}}, 0, "Config.Schedules[0].MaxAttempts"},
		{"PayloadNotJSON", []driver.Schedule{{Name: "a", Cron: "@daily", Kind: "k", Payload: func() {}}}, 0, "Config.Schedules[0].Payload"},
		{"NameNotUTF8", []driver.Schedule{{Name: "a\xff", Cron: "@daily", Kind: "k"}}, 0, "Config.Schedules[0].Name"},
		{"KindWithNUL", []driver.Schedule{{Name: "a", Cron: "@daily", Kind: "k\x00"}}, 0, "Config.Schedules[0].Kind"},
		{"TimezoneNotUTF8", []driver.Schedule{{Name: "a", Cron: "@daily", Kind: "k", Timezone: "Europe/\xc3"}}, 0, "Config.Schedules[0].Timezone"},
		{"TickIntervalTooShort", nil, time.Millisecond, "Config.ScheduleTickInterval"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := driver.NewClient(pool, &driver.Config{
				Queues: map[string]driver.QueueConfig{"default": {}}, Handlers: hs,
				Schedules: tc.schedules, ScheduleTickInterval: tc.interval,
			})
			var invalid *driver.InvalidError
			if !errors.As(err, &invalid) || invalid.Field != tc.field {
				t.Fatalf("NewClient: %v, want an InvalidError for %s", err, tc.field)
			}
		})
	}
}

// A schedule the database refuses for good (a typo in the cron, 22023; a role without
// jobs_admin, 42501) does not stop the client from ticking the schedules already in the
// database, and is logged once, not retried in a loop.
func TestSchedulesTickedWhenDeclaringIsRefused(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, cron string
		workerRole bool
	}{
		{"BadCron", "61 * * * *", false},
		{"NoAdminRole", "@daily", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			ctx := context.Background()
			if _, err := b.pool.Exec(ctx, "SELECT jobs_schedule('existing', '@every 1 second', 'k')"); err != nil {
				t.Fatal(err)
			}
			pool := b.pool
			if tc.workerRole {
				pool = workerRolePool(t, b)
			}
			hs := driver.NewHandlers()
			driver.AddHandler(hs, "k", func(ctx context.Context, job *driver.Job[struct{}]) error { return nil }, nil)
			cfg := baseConfig(b, hs, map[string]driver.QueueConfig{"default": {}})
			logs := declareFailureCounter{next: b.logger.Handler(), errors: new(atomic.Int32)}
			cfg.Logger = slog.New(logs)
			cfg.Schedules = []driver.Schedule{{Name: "refused", Cron: tc.cron, Kind: "k"}}
			startClient(t, pool, cfg)

			waitUntil(t, 10*time.Second, "a job of the existing schedule", func() bool {
				return queryInt(t, b.pool, "SELECT count(*) FROM jobs WHERE kind = 'k'") > 0
			})
			time.Sleep(time.Second) // five poll intervals: a retry loop would have logged again
			if n := logs.errors.Load(); n != 1 {
				t.Fatalf("%d errors logged for the refused schedule, want 1", n)
			}
			if n := queryInt(t, b.pool, "SELECT count(*) FROM jobs_schedules WHERE name = 'refused'"); n != 0 {
				t.Fatalf("the refused schedule was stored")
			}
		})
	}
}

// workerRolePool is a pool on b's database as a new login role with jobs_worker only.
func workerRolePool(t *testing.T, b *testBundle) *pgxpool.Pool {
	t.Helper()
	ctx := context.Background()
	rb := make([]byte, 6)
	_, _ = rand.Read(rb)
	name := "driver_worker_" + hex.EncodeToString(rb)
	password := hex.EncodeToString(rb) + "pw"
	if _, err := b.pool.Exec(ctx, "CREATE ROLE "+name+" LOGIN PASSWORD '"+password+"' IN ROLE jobs_worker"); err != nil {
		t.Fatal(err)
	}
	cfg, err := pgxpool.ParseConfig(b.url)
	if err != nil {
		t.Fatal(err)
	}
	cfg.ConnConfig.User, cfg.ConnConfig.Password = name, password
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		pool.Close()
		if _, err := b.pool.Exec(context.Background(), "DROP ROLE "+name); err != nil {
			t.Errorf("failed to drop role %s: %v", name, err)
		}
	})
	return pool
}

// declareFailureCounter counts the error records about declaring schedules and passes every
// record on.
type declareFailureCounter struct {
	next   slog.Handler
	errors *atomic.Int32
}

func (h declareFailureCounter) Enabled(ctx context.Context, l slog.Level) bool { return true }

func (h declareFailureCounter) Handle(ctx context.Context, r slog.Record) error {
	if r.Level >= slog.LevelError && strings.Contains(r.Message, "declare schedules") {
		h.errors.Add(1)
	}
	return h.next.Handle(ctx, r)
}

func (h declareFailureCounter) WithAttrs(attrs []slog.Attr) slog.Handler {
	return declareFailureCounter{next: h.next.WithAttrs(attrs), errors: h.errors}
}

func (h declareFailureCounter) WithGroup(name string) slog.Handler {
	return declareFailureCounter{next: h.next.WithGroup(name), errors: h.errors}
}

// ScheduleTickInterval defaults to PollInterval, but never below its 10ms floor.
func TestScheduleTickIntervalDefaultHasFloor(t *testing.T) {
	t.Parallel()
	hs := driver.NewHandlers()
	driver.AddHandler(hs, "k", func(ctx context.Context, job *driver.Job[struct{}]) error { return nil }, nil)
	for _, tc := range []struct{ poll, want time.Duration }{
		{time.Millisecond, 10 * time.Millisecond},
		{time.Second, time.Second},
	} {
		got, err := driver.ScheduleTickIntervalOf(&driver.Config{
			Queues: map[string]driver.QueueConfig{"default": {}}, Handlers: hs, PollInterval: tc.poll,
		})
		if err != nil {
			t.Fatal(err)
		}
		if got != tc.want {
			t.Errorf("PollInterval %s: ScheduleTickInterval %s, want %s", tc.poll, got, tc.want)
		}
	}
}
