package driver

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
)

// producer is one queue of a client: its fetch loop claims jobs into free slots and hands
// each to a worker goroutine.
type producer struct {
	c      *Client
	queue  string
	queues []string // {queue}: jobs_claim's queues argument
	slots  int
	batch  int

	active atomic.Int64    // jobs claimed and not yet finished
	wake   chan struct{}   // a notification arrived (size 1: wake-ups coalesce)
	freed  chan struct{}   // a slot was freed (size 1)
	idle   chan *execution // hands a job to an idle worker goroutine (unbuffered)

	mu      sync.Mutex
	running map[int64]*execution // for heartbeats; guarded by mu

	scratch []JobRow // the fetch loop's buffer for claimed rows
}

// execution is one claimed job on its way through a handler.
type execution struct {
	row JobRow
	p   *producer

	ctx    context.Context // the handler's context, without the timeout
	cancel context.CancelCauseFunc

	leaseUntil    atomic.Int64 // UnixNano by this machine's clock; conservative
	completedInTx atomic.Bool  // CompleteTx succeeded
}

func newProducer(c *Client, queue string, q QueueConfig) *producer {
	return &producer{
		c:       c,
		queue:   queue,
		queues:  []string{queue},
		slots:   q.Slots,
		batch:   q.BatchSize,
		wake:    make(chan struct{}, 1),
		freed:   make(chan struct{}, 1),
		idle:    make(chan *execution),
		running: make(map[int64]*execution),
	}
}

// wakeUp asks the fetch loop to claim; wake-ups that arrive while one is pending merge.
func (p *producer) wakeUp() {
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// run is the queue's fetch loop, in its own goroutine until ctx is done. It claims when it
// has free slots and reason to believe jobs are ready: a notification, the poll timer, or
// the previous claim having filled every slot it asked for (so more are likely waiting; the
// next claim then happens as soon as slots free up). Claims are at least FetchCooldown
// apart, so a storm of notifications or freed slots makes few large claims.
func (p *producer) run(ctx context.Context) {
	c := p.c
	poll := time.NewTimer(jitter(c.cfg.PollInterval, 0.1))
	defer poll.Stop()
	want := true // claim at start: jobs may have been enqueued while nobody listened
	var last time.Time
	var b backoff
	for {
		if want && p.active.Load() < int64(p.slots) {
			if cd := c.cfg.FetchCooldown; cd > 0 {
				if wait := cd - time.Since(last); wait > 0 && !sleepCtx(ctx, wait) {
					return
				}
			}
			last = time.Now()
			full, err := p.fetch(ctx)
			poll.Reset(jitter(c.cfg.PollInterval, 0.1))
			if err != nil {
				if fatalSQL(err) {
					select {
					case c.fatal <- err:
					default:
					}
					return
				}
				if ctx.Err() == nil {
					c.logger.Warn("failed to claim jobs; retrying", slog.String("queue", p.queue), slog.Any("error", err))
				}
				if !sleepCtx(ctx, b.next()) {
					return
				}
				continue // want stays true
			}
			b.reset()
			want = full
			continue
		}
		select {
		case <-ctx.Done():
			return
		case <-p.wake:
			want = true
		case <-p.freed:
		case <-poll.C:
			want = true // the claim rearms the timer
		}
	}
}

const claimSQL = `SELECT id, queue, kind, payload, attempt, max_attempts, priority, run_at, lease_expires_at, created_at
FROM jobs_claim($1, $2, $3, $4)`

// fetch claims up to the free slots (at most the batch size) in one jobs_claim call and
// starts the jobs. It reports whether it got all it asked for. The claim runs to its end
// even when ctx is cancelled meanwhile, so that its jobs can be released at once instead of
// waiting out their lease; they are not started then.
func (p *producer) fetch(ctx context.Context) (full bool, err error) {
	c := p.c
	want := min(p.slots-int(p.active.Load()), p.batch)
	claimedAt := time.Now()
	qctx, cancel := context.WithTimeout(c.workCtx, opTimeout)
	defer cancel()
	rows, err := c.pool.Query(qctx, claimSQL, c.cfg.ID, int32(want), p.queues, c.cfg.Lease)
	if err != nil {
		return false, fmt.Errorf("failed to claim jobs from queue %q: %w", p.queue, err)
	}
	buf := p.scratch[:0]
	var scanErr error
	for rows.Next() {
		buf = append(buf, JobRow{})
		r := &buf[len(buf)-1]
		if scanErr = rows.Scan(&r.ID, &r.Queue, &r.Kind, &r.EncodedPayload, &r.Attempt, &r.MaxAttempts, &r.Priority,
			&r.RunAt, &r.LeaseExpiresAt, &r.CreatedAt); scanErr != nil {
			break
		}
	}
	rows.Close()
	p.scratch = buf[:0]
	defer clear(buf) // drop the payloads from the reused buffer
	if err := errors.Join(scanErr, rows.Err()); err != nil {
		// Whether the claim committed is unknown. Its jobs are not run: if it did commit,
		// they come back when their lease expires.
		return false, fmt.Errorf("failed to claim jobs from queue %q: %w", p.queue, err)
	}
	if len(buf) == 0 {
		return false, nil
	}
	if ctx.Err() != nil {
		p.release(buf)
		return false, nil
	}

	exs := make([]execution, len(buf))
	leaseUntil := claimedAt.Add(c.cfg.Lease).UnixNano()
	p.mu.Lock()
	for i := range exs {
		ex := &exs[i]
		ex.row = buf[i]
		ex.p = p
		ex.leaseUntil.Store(leaseUntil)
		ex.ctx, ex.cancel = context.WithCancelCause(c.jobsCtx)
		p.running[ex.row.ID] = ex
	}
	p.mu.Unlock()
	p.active.Add(int64(len(exs)))
	c.jobs.Add(len(exs))
	for i := range exs {
		select {
		case p.idle <- &exs[i]:
		default:
			go p.worker(&exs[i])
		}
	}
	return len(exs) == want, nil
}

// workerIdleTimeout is how long a worker goroutine waits for its next job before it exits.
const workerIdleTimeout = 5 * time.Second

// worker runs jobs, starting with ex, in its own goroutine. The fetch loop hands each claimed
// job to a worker waiting for one, or starts a new worker when none is: a busy queue reuses
// its workers (and their grown stacks) instead of starting a goroutine per job, and an idle
// queue has none once workerIdleTimeout has passed. A worker frees its slot before it waits
// for the next job, so a claim in between may start a worker beyond the slots; the extra
// workers take later jobs or exit when idle.
func (p *producer) worker(ex *execution) {
	idle := time.NewTimer(workerIdleTimeout)
	defer idle.Stop()
	for {
		p.execute(ex)
		idle.Reset(workerIdleTimeout)
		select {
		case ex = <-p.idle:
		case <-idle.C:
			return
		case <-p.c.jobsCtx.Done(): // Run has returned
			return
		}
	}
}

// release gives back jobs claimed after shutdown began: queued again and ready now,
// without spending an attempt, in one round trip. If it fails their leases expire instead.
func (p *producer) release(rows []JobRow) {
	c := p.c
	batch := &pgx.Batch{}
	for i := range rows {
		batch.Queue("SELECT jobs_snooze($1, $2, now())", rows[i].ID, int32(rows[i].Attempt))
	}
	ctx, cancel := context.WithTimeout(c.workCtx, opTimeout)
	defer cancel()
	if err := c.pool.SendBatch(ctx, batch).Close(); err != nil {
		c.logger.Warn("failed to release jobs claimed during shutdown; they run again after their lease expires",
			slog.String("queue", p.queue), slog.Int("jobs", len(rows)), slog.Any("error", err))
		return
	}
	c.logger.Info("released jobs claimed during shutdown", slog.String("queue", p.queue), slog.Int("jobs", len(rows)))
}

// execute runs one job and records the outcome. The slot is freed once the outcome is
// recorded, or handed to the completer.
func (p *producer) execute(ex *execution) {
	c := p.c
	defer p.finish(ex)
	start := time.Now()
	if c.hook != nil {
		c.hook.HandleEvent(&Event{Kind: EventStarted, Job: &ex.row, State: JobStateRunning, Wait: start.Sub(ex.row.RunAt)})
	}
	h := c.handlers[ex.row.Kind]
	if h == nil {
		c.failJob(ex, fmt.Errorf("no handler for kind %q in client %s", ex.row.Kind, c.cfg.ID), nil, 0)
		return
	}
	ctx := ex.ctx
	timeout := h.timeout
	if timeout == 0 {
		timeout = c.cfg.JobTimeout
	}
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	decodeErr, err := callHandler(ctx, h, ex)
	c.settle(ex, decodeErr, err, time.Since(start))
}

// panicError is a recovered panic.
type panicError struct {
	value any
	stack []byte
}

func (e *panicError) Error() string { return fmt.Sprintf("panic: %v\n\n%s", e.value, e.stack) }

func callHandler(ctx context.Context, h *handler, ex *execution) (decodeErr, err error) {
	defer func() {
		if v := recover(); v != nil {
			err = &panicError{value: v, stack: debug.Stack()}
		}
	}()
	return h.run(ctx, ex)
}

// settle records the outcome of a handler's run.
func (c *Client) settle(ex *execution, decodeErr, err error, dur time.Duration) {
	if decodeErr == nil && err == nil && ex.completedInTx.Load() {
		c.emit(ex, EventCompleted, JobStateDone, dur, nil)
		return
	}
	if errorsIsCause(ex.ctx, ErrNotHeld) {
		// A heartbeat found the job gone; the fenced calls would refuse any outcome.
		c.emit(ex, EventLost, "", dur, ErrNotHeld)
		return
	}
	switch {
	case decodeErr != nil:
		c.cancelJob(ex, decodeErr, dur)
	case err == nil:
		c.completer.add(ex, dur)
	case errorsIsCause(ex.ctx, ErrShutdown):
		c.snoozeJob(ex, 0, err, dur) // interrupted, not failed: release it
	default:
		snooze, cancel, retryAt := handlerVerdict(err)
		switch {
		case cancel != nil:
			c.cancelJob(ex, err, dur)
		case snooze != nil:
			c.snoozeJob(ex, snooze.delay, err, dur)
		case retryAt != nil:
			at := retryAt.at
			c.failJob(ex, err, &at, dur)
		default:
			c.failJob(ex, err, nil, dur)
		}
	}
}

func (c *Client) failJob(ex *execution, jobErr error, retryAt *time.Time, dur time.Duration) {
	text := jobErr.Error()
	var state *string
	if !c.record(ex, "fail", func(ctx context.Context) error {
		return c.pool.QueryRow(ctx, "SELECT jobs_fail($1, $2, $3, $4)", ex.row.ID, int32(ex.row.Attempt), text, retryAt).Scan(&state)
	}) {
		return
	}
	if state == nil {
		c.emit(ex, EventLost, "", dur, ErrNotHeld)
		return
	}
	level := slog.LevelInfo
	var pe *panicError
	if *state == string(JobStateDead) || errors.As(jobErr, &pe) {
		level = slog.LevelWarn
	}
	c.logger.LogAttrs(c.workCtx, level, "job failed",
		slog.Int64("job_id", ex.row.ID), slog.String("kind", ex.row.Kind), slog.String("queue", ex.row.Queue),
		slog.Int("attempt", ex.row.Attempt), slog.String("state", *state), slog.Any("error", jobErr))
	c.emit(ex, EventFailed, JobState(*state), dur, jobErr)
}

func (c *Client) snoozeJob(ex *execution, delay time.Duration, jobErr error, dur time.Duration) {
	if c.recordHeld(ex, "snooze", dur, "SELECT jobs_snooze($1, $2, now() + $3::interval)", ex.row.ID, int32(ex.row.Attempt), delay) {
		c.emit(ex, EventSnoozed, JobStateQueued, dur, jobErr)
	}
}

func (c *Client) cancelJob(ex *execution, jobErr error, dur time.Duration) {
	if !c.recordHeld(ex, "cancel", dur, "SELECT jobs_cancel($1, $2, $3)", ex.row.ID, int32(ex.row.Attempt), jobErr.Error()) {
		return
	}
	c.logger.LogAttrs(c.workCtx, slog.LevelInfo, "job cancelled",
		slog.Int64("job_id", ex.row.ID), slog.String("kind", ex.row.Kind), slog.String("queue", ex.row.Queue),
		slog.Int("attempt", ex.row.Attempt), slog.Any("error", jobErr))
	c.emit(ex, EventCancelled, JobStateCancelled, dur, jobErr)
}

// recordHeld records an outcome with sql, a fenced call returning whether the job was still
// held. It reports whether the outcome was recorded; when the job was no longer held it
// emits EventLost.
func (c *Client) recordHeld(ex *execution, what string, dur time.Duration, sql string, args ...any) bool {
	var held bool
	if !c.record(ex, what, func(ctx context.Context) error {
		return c.pool.QueryRow(ctx, sql, args...).Scan(&held)
	}) {
		return false
	}
	if !held {
		c.emit(ex, EventLost, "", dur, ErrNotHeld)
	}
	return held
}

func (c *Client) emit(ex *execution, kind EventKind, state JobState, dur time.Duration, err error) {
	if c.hook != nil {
		c.hook.HandleEvent(&Event{Kind: kind, Job: &ex.row, State: state, Duration: dur, Err: err})
	}
}

// finish frees the job's slot and wakes the fetch loop, which may claim again at once.
func (p *producer) finish(ex *execution) {
	ex.cancel(context.Canceled)
	p.mu.Lock()
	delete(p.running, ex.row.ID)
	p.mu.Unlock()
	p.active.Add(-1)
	select {
	case p.freed <- struct{}{}:
	default:
	}
	p.c.jobs.Done()
}
