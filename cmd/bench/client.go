package main

// This file is the benchmark's only way into skiplock: package driver enqueues the jobs and
// its Client works them, so the numbers are those of the code applications run.

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"sync"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/skiplock/skiplock/driver"
)

const (
	benchQueue = driver.QueueDefault
	benchKind  = "bench_noop"
	// maintainInterval is how often the bench's clients call jobs_maintain: the driver's
	// default, as every other setting.
	maintainInterval = driver.RequeueIntervalDefault
)

// enqueueOne adds one job in its own transaction (driver.Enqueue) and returns its id.
func enqueueOne(ctx context.Context, pool *pgxpool.Pool, payload []byte) (int64, error) {
	return driver.Enqueue(ctx, pool, benchKind, json.RawMessage(payload), nil)
}

// enqueueMany adds one job per payload in one call and one transaction (driver.EnqueueMany).
func enqueueMany(ctx context.Context, pool *pgxpool.Pool, payloads [][]byte) error {
	params := make([]driver.EnqueueParams, len(payloads))
	for i, p := range payloads {
		params[i] = driver.EnqueueParams{Kind: benchKind, Payload: json.RawMessage(p)}
	}
	_, err := driver.EnqueueMany(ctx, pool, params)
	return err
}

// benchJob is what a bench handler sees of a claimed job.
type benchJob struct {
	ID int64
}

// workerSet is the running workers of one process.
type workerSet interface {
	// Stop stops claiming, waits for running handlers and persists their completions. It
	// may be called more than once.
	Stop(ctx context.Context) error
}

// workerHooks are the benchmark's callbacks from the workers; nil ones are skipped. They
// run concurrently and must be quick.
type workerHooks struct {
	// started runs in the handler, once per job run.
	started func(benchJob)
	// returned runs in the handler as it returns, after started: the job's completion is
	// not committed yet, but nothing of the handler runs any more.
	returned func(benchJob)
	// completed runs once the database has confirmed a job's completion (the driver's
	// EventCompleted).
	completed func()
}

// startWorkers runs a driver.Client working the bench queue with the given slots and
// QueueConfig.ClaimAhead (-claim-ahead), every other driver setting at its default. The handler is a no-op apart from hooks.started;
// its job completes when it returns.
func startWorkers(ctx context.Context, pool *pgxpool.Pool, name string, slots, claimAhead int, hooks workerHooks) (workerSet, error) {
	handlers := driver.NewHandlers()
	driver.AddHandler(handlers, benchKind, func(_ context.Context, job *driver.Job[json.RawMessage]) error {
		if hooks.started != nil {
			hooks.started(benchJob{ID: job.ID})
		}
		if hooks.returned != nil {
			hooks.returned(benchJob{ID: job.ID})
		}
		return nil
	}, nil)
	var hook driver.Hook
	if hooks.completed != nil {
		hook = driver.HookFunc(func(e *driver.Event) {
			if e.Kind == driver.EventCompleted {
				hooks.completed()
			}
		})
	}
	client, err := driver.NewClient(pool, &driver.Config{
		ID:       name,
		Queues:   map[string]driver.QueueConfig{benchQueue: {Slots: slots, ClaimAhead: claimAhead}},
		Handlers: handlers,
		Hook:     hook,
		Logger:   slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
	})
	if err != nil {
		return nil, fmt.Errorf("failed to make a client: %w", err)
	}
	w := &driverWorkers{client: client, done: make(chan struct{})}
	go func() {
		defer close(w.done)
		w.runErr = client.Run(context.WithoutCancel(ctx))
	}()
	return w, nil
}

type driverWorkers struct {
	client *driver.Client
	done   chan struct{}
	runErr error // set before done is closed

	once    sync.Once
	stopErr error
}

func (w *driverWorkers) Stop(ctx context.Context) error {
	w.once.Do(func() {
		if err := w.client.Stop(ctx); err != nil {
			w.stopErr = err
			return
		}
		<-w.done
		w.stopErr = w.runErr
	})
	return w.stopErr
}
