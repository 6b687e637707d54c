package driver_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/skiplock/skiplock/driver"
)

func TestConfigValidation(t *testing.T) {
	t.Parallel()
	// pgxpool.New connects lazily: no server is needed to validate.
	pool, err := pgxpool.New(context.Background(), "postgres://nobody@127.0.0.1:1/none")
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	hs := driver.NewHandlers()
	driver.AddHandler(hs, "noop", func(ctx context.Context, job *driver.Job[struct{}]) error { return nil }, nil)
	valid := func() *driver.Config {
		return &driver.Config{Queues: map[string]driver.QueueConfig{"default": {}}, Handlers: hs}
	}

	tests := []struct {
		name   string
		change func(c *driver.Config)
		field  string
	}{
		{"NoQueues", func(c *driver.Config) { c.Queues = nil }, "Config.Queues"},
		{"EmptyQueueName", func(c *driver.Config) { c.Queues = map[string]driver.QueueConfig{"": {}} }, `Config.Queues[""]`},
		{"LongQueueName", func(c *driver.Config) { c.Queues = map[string]driver.QueueConfig{strings.Repeat("q", 201): {}} }, `Config.Queues["` + strings.Repeat("q", 201) + `"]`},
		{"NegativeSlots", func(c *driver.Config) { c.Queues["default"] = driver.QueueConfig{Slots: -1} }, `Config.Queues["default"].Slots`},
		{"BatchTooBig", func(c *driver.Config) { c.Queues["default"] = driver.QueueConfig{BatchSize: 10001} }, `Config.Queues["default"].BatchSize`},
		{"NoHandlers", func(c *driver.Config) { c.Handlers = nil }, "Config.Handlers"},
		{"EmptyHandlers", func(c *driver.Config) { c.Handlers = driver.NewHandlers() }, "Config.Handlers"},
		{"LongID", func(c *driver.Config) { c.ID = strings.Repeat("x", 201) }, "Config.ID"},
		{"InvalidUTF8ID", func(c *driver.Config) { c.ID = "worker-\xff" }, "Config.ID"},
		{"NULInID", func(c *driver.Config) { c.ID = "worker\x00" }, "Config.ID"},
		{"InvalidUTF8QueueName", func(c *driver.Config) { c.Queues = map[string]driver.QueueConfig{"q\xff": {}} }, `Config.Queues["q\xff"]`},
		{"ShortLease", func(c *driver.Config) { c.Lease = 500 * time.Millisecond }, "Config.Lease"},
		{"HeartbeatNotBelowLease", func(c *driver.Config) { c.Lease = 2 * time.Second; c.HeartbeatInterval = 2 * time.Second }, "Config.HeartbeatInterval"},
		{"NegativeHeartbeat", func(c *driver.Config) { c.HeartbeatInterval = -2 }, "Config.HeartbeatInterval"},
		{"NegativeJobTimeout", func(c *driver.Config) { c.JobTimeout = -time.Second }, "Config.JobTimeout"},
		{"NoPolling", func(c *driver.Config) { c.PollInterval = -1 }, "Config.PollInterval"},
		{"PollTooFast", func(c *driver.Config) { c.PollInterval = time.Microsecond }, "Config.PollInterval"},
		{"NegativeCooldown", func(c *driver.Config) { c.FetchCooldown = -time.Second }, "Config.FetchCooldown"},
		{"RequeueTooFast", func(c *driver.Config) { c.RequeueInterval = time.Millisecond }, "Config.RequeueInterval"},
		{"NegativeShutdownTimeout", func(c *driver.Config) { c.ShutdownTimeout = -time.Second }, "Config.ShutdownTimeout"},
		{"NegativeBatchDelay", func(c *driver.Config) { c.CompleteBatchDelay = -time.Second }, "Config.CompleteBatchDelay"},
		{"CompleteBatchTooBig", func(c *driver.Config) { c.CompleteBatchSize = 10001 }, "Config.CompleteBatchSize"},
		{"BadListenerURL", func(c *driver.Config) { c.ListenerURL = "postgres://u:secret@host:notaport/db" }, "Config.ListenerURL"},
		{"ListenerURLWithListenDisabled", func(c *driver.Config) { c.ListenerURL = "postgres://host/db"; c.DisableListen = true }, "Config.ListenerURL"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			cfg := valid()
			tt.change(cfg)
			_, err := driver.NewClient(pool, cfg)
			var ie *driver.InvalidError
			if !errors.As(err, &ie) || !driver.IsInvalid(err) {
				t.Fatalf("NewClient = %v, want an *InvalidError", err)
			}
			if ie.Field != tt.field || !strings.HasPrefix(err.Error(), "invalid "+tt.field+": ") {
				t.Fatalf("error %q names field %q, want %q", err, ie.Field, tt.field)
			}
		})
	}

	t.Run("DisabledAndDefaultsAreValid", func(t *testing.T) {
		t.Parallel()
		cfg := valid()
		cfg.HeartbeatInterval, cfg.JobTimeout, cfg.FetchCooldown, cfg.RequeueInterval = -1, -1, -1, -1
		cfg.ShutdownTimeout, cfg.CompleteBatchDelay = -1, -1
		client, err := driver.NewClient(pool, cfg)
		if err != nil {
			t.Fatal(err)
		}
		if client.ID() == "" {
			t.Fatal("no default ID")
		}
	})

	t.Run("NilPoolAndConfig", func(t *testing.T) {
		t.Parallel()
		if _, err := driver.NewClient(nil, valid()); !driver.IsInvalid(err) {
			t.Fatalf("NewClient(nil pool) = %v", err)
		}
		if _, err := driver.NewClient(pool, nil); !driver.IsInvalid(err) {
			t.Fatalf("NewClient(nil config) = %v", err)
		}
	})
}

func TestAddHandlerPanics(t *testing.T) {
	t.Parallel()
	noop := func(ctx context.Context, job *driver.Job[struct{}]) error { return nil }
	tests := map[string]func(){
		"NilHandlers":     func() { driver.AddHandler(nil, "k", noop, nil) },
		"ZeroHandlers":    func() { driver.AddHandler(&driver.Handlers{}, "k", noop, nil) },
		"EmptyKind":       func() { driver.AddHandler(driver.NewHandlers(), "", noop, nil) },
		"NilFunc":         func() { driver.AddHandler[struct{}](driver.NewHandlers(), "k", nil, nil) },
		"NegativeTimeout": func() { driver.AddHandler(driver.NewHandlers(), "k", noop, &driver.HandlerOpts{Timeout: -2}) },
		"Duplicate": func() {
			hs := driver.NewHandlers()
			driver.AddHandler(hs, "k", noop, nil)
			driver.AddHandler(hs, "k", noop, nil)
		},
	}
	for name, f := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			defer func() {
				if recover() == nil {
					t.Fatal("AddHandler did not panic")
				}
			}()
			f()
		})
	}
}
