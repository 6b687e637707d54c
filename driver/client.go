package driver

import (
	"context"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Client claims and runs jobs from its queues until it is stopped. Make one with
// [NewClient], then call [Client.Run]; see the package documentation for how it works.
type Client struct {
	pool       *pgxpool.Pool
	cfg        *Config
	logger     *slog.Logger
	hook       Hook
	claimHook  ClaimHook // hook, when it implements ClaimHook
	handlers   map[string]*handler
	anyKind    *handler              // Handlers.anyKind: the kinds without a handler; nil if none
	batchKinds bool                  // some handler is a batch handler (AddBatchHandler)
	fetchLoops map[string]*fetchLoop // by queue name
	queueOrder []*fetchLoop          // fetchLoops sorted by queue name
	listenCfg  *pgx.ConnConfig
	completer  *completer
	schedules  []scheduleArgs // Config.Schedules, declared by scheduleLoop

	mu       sync.Mutex
	started  bool
	stopOnce sync.Once
	stopCh   chan struct{} // closed by Stop
	done     chan struct{} // closed when Run returns
	fatal    chan error    // a claim error that retrying cannot fix; size 1
	stopping chan struct{} // closed by Run when shutdown begins: batches stop waiting for jobs

	// Set by Run before it starts any goroutine, read-only afterwards.
	workCtx context.Context // database calls; cancelled when Run abandons them
	jobsCtx context.Context // parent of every handler's context; cancelled with ErrShutdown

	jobs sync.WaitGroup // claimed jobs not yet finished (Add in fetchLoop.start, Done in finish)

	// claimsMu guards claimsStopped, set when shutdown begins: from then on the jobs that
	// the completer claims with a batch are released rather than started (the fetch loops
	// have stopped claiming, and Run is about to wait for the jobs).
	claimsMu      sync.RWMutex
	claimsStopped bool
	// claimsStopping is claimsStopped for readers that may not take claimsMu (a worker
	// holding a fetch loop's mutex): no job claimed ahead starts once it is set.
	claimsStopping atomic.Bool
}

// NewClient makes a client that works the queues of cfg with connections from pool. It
// validates cfg (an *InvalidError names the bad field) and does no I/O: connections are
// made by Run.
//
// The pool serves the claims, the batched completions and heartbeats, and each failed or
// snoozed job's update; handlers that use the same pool for their own transactions need it
// sized for that too (pgxpool's default MaxConns is small). The LISTEN connection is a
// separate connection, made from Config.ListenerURL or else from pool's configuration.
func NewClient(pool *pgxpool.Pool, cfg *Config) (*Client, error) {
	if pool == nil {
		return nil, &InvalidError{Field: "pool", Problem: "must not be nil"}
	}
	cfg, err := cfg.validate()
	if err != nil {
		return nil, err
	}
	schedules, err := validateSchedules(cfg.Schedules)
	if err != nil {
		return nil, err
	}
	listenCfg := pool.Config().ConnConfig
	if cfg.ListenerURL != "" {
		if listenCfg, err = pgx.ParseConfig(cfg.ListenerURL); err != nil {
			return nil, &InvalidError{Field: "Config.ListenerURL", Problem: err.Error()}
		}
	}
	c := &Client{
		pool:       pool,
		cfg:        cfg,
		logger:     cfg.Logger.With(slog.String("skiplock_client", cfg.ID)),
		hook:       cfg.Hook,
		anyKind:    cfg.Handlers.anyKind,
		handlers:   make(map[string]*handler, len(cfg.Handlers.byKind)),
		fetchLoops: make(map[string]*fetchLoop, len(cfg.Queues)),
		listenCfg:  listenCfg,
		schedules:  schedules,
		stopCh:     make(chan struct{}),
		done:       make(chan struct{}),
		fatal:      make(chan error, 1),
		stopping:   make(chan struct{}),
	}
	c.claimHook, _ = cfg.Hook.(ClaimHook)
	for kind, h := range cfg.Handlers.byKind {
		c.handlers[kind] = h
		c.batchKinds = c.batchKinds || h.batch != nil
	}
	totalSlots := 0
	for name, q := range cfg.Queues {
		fl := newFetchLoop(c, name, q)
		c.fetchLoops[name] = fl
		c.queueOrder = append(c.queueOrder, fl)
		totalSlots += q.Slots
	}
	sort.Slice(c.queueOrder, func(i, j int) bool { return c.queueOrder[i].queue < c.queueOrder[j].queue })
	c.completer = newCompleter(c, totalSlots)
	return c, nil
}

// ID is the client's lease holder name (Config.ID or its default).
func (c *Client) ID() string { return c.cfg.ID }

// Run works the queues until ctx is cancelled or Stop is called, then shuts down gracefully
// and returns nil:
//
//  1. It stops claiming. Jobs claimed by a claim that was in flight are released at once
//     (jobs_snooze to now, no attempt spent) rather than started.
//  2. It waits up to Config.ShutdownTimeout for running handlers to return, heartbeating
//     their leases meanwhile; their outcomes are recorded as usual.
//  3. It cancels the contexts of handlers still running (cause ErrShutdown) and waits for
//     them a few more seconds. A handler that then returns nil completes its job; one that
//     returns an error has its job released (jobs_snooze to now: ready for any worker at
//     once, no attempt spent). A handler that ignores its context longer is abandoned: its
//     job stays leased until the lease expires, then runs again as a new attempt.
//  4. It flushes the pending completions.
//  5. It sends the notifications the notify throttle owes for jobs enqueued through its pool
//     (see [FlushNotify]), so that they do not wait for the poll if the process exits next.
//
// Database outages do not stop Run: every part logs, backs off and retries, and the
// listener reconnects and listens again. Run returns an error only when it was already
// called (ErrAlreadyRunning), or when it gives up because claiming fails in a way retrying
// cannot fix (skiplock not installed where the pool's connections look, or the role may not
// call jobs_claim): then it shuts down as above and returns an error that wraps both
// ErrGaveUp and the claim's error.
func (c *Client) Run(ctx context.Context) error {
	c.mu.Lock()
	if c.started {
		c.mu.Unlock()
		return ErrAlreadyRunning
	}
	c.started = true
	c.mu.Unlock()
	defer close(c.done)

	// Handlers and database calls outlive ctx: shutdown needs them after it is cancelled.
	base := context.WithoutCancel(ctx)
	workCtx, abort := context.WithCancel(base)
	defer abort()
	jobsCtx, cancelJobs := context.WithCancelCause(base)
	defer cancelJobs(ErrShutdown)
	c.workCtx, c.jobsCtx = workCtx, jobsCtx

	// Goroutines: one fetch loop per queue, the listener, the maintainer and the scheduler
	// stop first (loops);
	// the heartbeater and the completer keep going until the jobs have finished (tail).
	fetchCtx, stopFetching := context.WithCancel(base)
	defer stopFetching()
	heartbeatCtx, stopHeartbeats := context.WithCancel(base)
	defer stopHeartbeats()
	var loops, tail sync.WaitGroup
	for _, fl := range c.queueOrder {
		if fl.aheadCap > 0 {
			if !fl.adaptive {
				// Before the first claim: a fixed ClaimAhead claims ahead at once. (An
				// adaptive one claims nothing ahead before jobs have finished.)
				fl.askLimited(fetchCtx)
			}
			loops.Go(func() { fl.watchLimits(fetchCtx) })
		}
		loops.Go(func() { fl.run(fetchCtx) })
	}
	loops.Go(func() { c.listen(fetchCtx) })
	if c.cfg.RequeueInterval > 0 {
		loops.Go(func() { c.maintainLoop(fetchCtx) })
	}
	if c.cfg.ScheduleTickInterval > 0 || len(c.schedules) > 0 {
		loops.Go(func() { c.scheduleLoop(fetchCtx) })
	}
	if c.cfg.HeartbeatInterval > 0 {
		tail.Go(func() { c.heartbeatLoop(heartbeatCtx) })
	}
	completerDone := make(chan struct{})
	go func() {
		defer close(completerDone)
		c.completer.run(workCtx)
	}()
	c.logger.Info("skiplock client started", slog.Int("queues", len(c.queueOrder)))

	var runErr error
	select {
	case <-ctx.Done():
	case <-c.stopCh:
	case err := <-c.fatal:
		runErr = fmt.Errorf("%w: %w", ErrGaveUp, err)
		c.logger.Error("skiplock client cannot claim jobs; shutting down", slog.Any("error", err))
	}

	// 1. Stop claiming.
	c.claimsMu.Lock()
	c.claimsStopped = true
	c.claimsStopping.Store(true)
	c.claimsMu.Unlock()
	close(c.stopping)
	stopFetching()
	loops.Wait()

	// 2 and 3. Wait for the running jobs, then cancel them.
	jobsDone := make(chan struct{})
	go func() {
		c.jobs.Wait() // no job starts any more: the fetch loops have returned
		close(jobsDone)
	}()
	if running := c.running(); running > 0 {
		c.logger.Info("skiplock client stopping: waiting for running jobs", slog.Int("running", running))
	}
	if !waitFor(jobsDone, c.cfg.ShutdownTimeout) {
		c.logger.Info("skiplock client stopping: cancelling running jobs", slog.Int("running", c.running()))
		cancelJobs(ErrShutdown)
		if !waitFor(jobsDone, shutdownAbandonAfter) {
			c.logger.Warn("skiplock client stopping: abandoning jobs whose handlers ignore cancellation; they run again after their lease expires",
				slog.Int("running", c.running()))
		}
	}
	stopHeartbeats()
	tail.Wait()

	// 4. Flush the completions.
	c.completer.close()
	if !waitFor(completerDone, opTimeout) {
		abort() // the completer logs what it could not record
		<-completerDone
	}
	// 5. Send the notifications the notify throttle owes for jobs enqueued through this
	// client's pool (its handlers' follow-up jobs, say): the process may exit next, and the
	// throttle's timers with it, leaving those jobs to the other workers' poll.
	flushCtx, cancelFlush := context.WithTimeout(context.Background(), opTimeout)
	if err := processNotifyThrottle.flush(flushCtx, c.pool); err != nil {
		c.logger.Warn("failed to send the notifications owed for jobs enqueued through the client's pool; workers find them at their next poll",
			slog.Any("error", err))
	}
	cancelFlush()
	c.logger.Info("skiplock client stopped")
	return runErr
}

// Stop asks Run to shut down (see Run) and waits until it has returned or ctx is done. It
// is safe to call more than once, concurrently, and before Run (Run then returns at once).
func (c *Client) Stop(ctx context.Context) error {
	c.stopOnce.Do(func() { close(c.stopCh) })
	c.mu.Lock()
	started := c.started
	c.mu.Unlock()
	if !started {
		return nil
	}
	select {
	case <-c.done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("failed to wait for client to stop: %w", ctx.Err())
	}
}

// running counts the jobs whose handlers are running or whose outcome is being recorded.
func (c *Client) running() int {
	n := 0
	for _, fl := range c.queueOrder {
		n += int(fl.active.Load())
	}
	return n
}

// notify wakes the fetch loop of queue, if this client works it.
func (c *Client) notify(queue string) {
	if fl := c.fetchLoops[queue]; fl != nil {
		fl.wakeUp()
	}
}

// wakeAll wakes every fetch loop, after notifications may have been missed.
func (c *Client) wakeAll() {
	for _, fl := range c.queueOrder {
		fl.wakeUp()
	}
}

// waitFor waits until ch is closed or d passes (d < 0: no limit); it reports whether ch
// was closed.
func waitFor(ch <-chan struct{}, d time.Duration) bool {
	if d < 0 {
		<-ch
		return true
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ch:
		return true
	case <-t.C:
		return false
	}
}

// stoppingClaims reports whether shutdown has begun, so no claim should start.
func (c *Client) stoppingClaims() bool {
	c.claimsMu.RLock()
	defer c.claimsMu.RUnlock()
	return c.claimsStopped
}

// startClaimed starts the jobs that the completer claimed for fl with a batch, or, when
// shutdown began meanwhile, gives back their slots and releases them (queued again, no
// attempt spent) instead.
func (c *Client) startClaimed(fl *fetchLoop, buf []JobRow, claimedAt time.Time) {
	c.claimsMu.RLock()
	if !c.claimsStopped {
		fl.start(buf, claimedAt)
		c.claimsMu.RUnlock()
		return
	}
	c.claimsMu.RUnlock()
	fl.unreserve(len(buf))
	fl.release(buf)
}
