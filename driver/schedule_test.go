package driver_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

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
