package driver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"runtime/debug"
	"sort"
	"strconv"
	"sync/atomic"
	"time"
)

// BatchMaxJobsDefault is the most jobs one call of a batch handler gets when its
// BatchOpts.MaxJobs is 0.
const BatchMaxJobsDefault = 100

// BatchHandleFunc runs a batch of jobs of one kind, claimed together (see [AddBatchHandler]):
// jobs holds 1 to BatchOpts.MaxJobs of them, oldest claim first. Its outcome is what it
// returns:
//
//   - nil: every job is done (completed in a batch of completions, each fenced by its own
//     attempt, or by [CompleteTx] in the handler's own transaction, job by job).
//   - a [BatchErrors] of len(jobs), possibly wrapped: each job's outcome on its own, read as
//     a [HandleFunc]'s error would be: nil done, [Snooze], [Cancel], [RetryAt], any other
//     error a failed attempt with backoff.
//   - any other error, or a panic: that outcome for every job of the batch, as a HandleFunc
//     returning it would have (so Snooze(d) snoozes them all).
//
// Each job keeps its own attempt (the fencing token), result ([Job.SetResult]), checkpoints
// ([Step]) and progress. ctx is done when the kind's timeout passes, when shutdown stops
// waiting (cause ErrShutdown) or when a heartbeat found every job of the batch no longer
// held (cause ErrNotHeld); a job of the batch lost while others are still held is not
// signalled through ctx, but whatever fn decides for it is refused by the database and
// reported as EventLost.
type BatchHandleFunc[T any] func(ctx context.Context, jobs []*Job[T]) error

// BatchOpts configure one kind's batch handler ([AddBatchHandler]).
type BatchOpts struct {
	// MaxJobs is the most jobs one call gets. Each job of a batch holds one of its queue's
	// slots (QueueConfig.Slots) from its claim until its outcome is recorded, as a job run
	// alone does, so a batch never holds more jobs than the queue has slots: give the queue
	// at least MaxJobs slots for full batches. At most BatchSizeMax. Defaults to
	// BatchMaxJobsDefault.
	MaxJobs int

	// MaxWait is how long the first job of a batch may wait for more jobs of its kind to join
	// (jobs claimed later by the same queue of the same client) before the handler is called
	// with fewer than MaxJobs. The jobs are claimed and leased while they wait (heartbeats
	// extend their leases), so it must be below half of Config.Lease; NewClient refuses it
	// otherwise. Waiting ends early when the batch is full or the client begins to shut down.
	// Defaults to 0: no waiting; the handler gets the jobs of its kind that one claim handed
	// out together (up to MaxJobs), at once.
	MaxWait time.Duration

	// Timeout bounds each call of the handler through its context. -1 means no timeout.
	// Defaults to Config.JobTimeout.
	Timeout time.Duration
}

// BatchErrors, returned by a [BatchHandleFunc] (possibly wrapped), gives each job of the
// batch its own outcome: the error at index i is the outcome of jobs[i], nil meaning done.
// It must have exactly one entry per job; otherwise every job of the batch fails with an
// error saying so.
type BatchErrors []error

// Error summarizes the entries: how many are not nil, and the first of them.
func (e BatchErrors) Error() string {
	n, first := 0, -1
	for i, err := range e {
		if err != nil {
			n++
			if first < 0 {
				first = i
			}
		}
	}
	if n == 0 {
		return "no job of the batch failed"
	}
	return fmt.Sprintf("%d of %d jobs of the batch failed; job %d: %v", n, len(e), first, e[first])
}

// AddBatchHandler registers fn for jobs of the given kind, to be run in batches: fn gets up
// to opts.MaxJobs jobs of the kind that its client's queue claimed together, and with
// opts.MaxWait those it claims meanwhile too, in one call. handlers is the same set that
// [AddHandler] fills (the first argument, which the client then takes in
// [Config.Handlers]). Payloads are decoded from JSON into T; a job whose payload does not
// decode is cancelled at once, as with AddHandler, and left out of fn's jobs.
//
// Each job of a batch takes one of its queue's slots, so the queue's concurrency and the
// jobs claimed ahead (QueueConfig.ClaimAhead) count jobs, whether they run alone or in
// batches, and a batch never holds more jobs than the queue has slots. Only jobs claimed by
// one queue of one client form a batch; a queue's claims hand each batch kind's jobs to one
// call until it is full. The outcomes of the jobs are recorded job by job, each fenced by its
// own attempt: done jobs are completed through the client's batched completions, failed ones
// retried with their own backoff (see [BatchHandleFunc]).
//
// AddBatchHandler panics when handlers is nil, kind is empty or already has a handler, fn is
// nil, opts.MaxJobs is negative or above BatchSizeMax, opts.MaxWait is negative, or
// opts.Timeout is negative other than -1: these are programming errors.
func AddBatchHandler[T any](handlers *Handlers, kind string, fn BatchHandleFunc[T], opts BatchOpts) {
	switch {
	case handlers == nil || handlers.byKind == nil:
		panic("skiplock: AddBatchHandler: handlers must come from NewHandlers")
	case kind == "":
		panic("skiplock: AddBatchHandler: kind must not be empty")
	case fn == nil:
		panic("skiplock: AddBatchHandler: fn must not be nil for kind " + kind)
	case handlers.byKind[kind] != nil:
		panic("skiplock: AddBatchHandler: kind " + kind + " already has a handler")
	case opts.MaxJobs < 0 || opts.MaxJobs > BatchSizeMax:
		panic(fmt.Sprintf("skiplock: AddBatchHandler: BatchOpts.MaxJobs must be between 0 (default) and %d, got %d", BatchSizeMax, opts.MaxJobs))
	case opts.MaxWait < 0:
		panic(fmt.Sprintf("skiplock: AddBatchHandler: BatchOpts.MaxWait must not be negative, got %s", opts.MaxWait))
	case opts.Timeout < -1:
		panic(fmt.Sprintf("skiplock: AddBatchHandler: BatchOpts.Timeout must be -1 (none), 0 (default) or positive, got %s", opts.Timeout))
	}
	maxJobs := opts.MaxJobs
	if maxJobs == 0 {
		maxJobs = BatchMaxJobsDefault
	}
	typeName := reflect.TypeFor[T]().String()
	handlers.byKind[kind] = &handler{
		kind:    kind,
		timeout: opts.Timeout,
		batch: &batchHandler{
			maxJobs: maxJobs,
			maxWait: opts.MaxWait,
			run: func(ctx context.Context, exs []*execution, decodeErrs, errs []error) {
				jobs := make([]*Job[T], 0, len(exs))
				index := make([]int, 0, len(exs)) // jobs[k] is exs[index[k]]
				for i, ex := range exs {
					job := &Job[T]{JobRow: &ex.row, ex: ex}
					if err := json.Unmarshal(ex.row.EncodedPayload, &job.Payload); err != nil {
						decodeErrs[i] = fmt.Errorf("failed to decode payload of kind %q into %s: %w", kind, typeName, err)
						continue
					}
					jobs = append(jobs, job)
					index = append(index, i)
				}
				if len(jobs) == 0 {
					return
				}
				err := fn(ctx, jobs)
				if err == nil {
					return
				}
				var each BatchErrors
				if errors.As(err, &each) {
					if len(each) != len(jobs) {
						err = fmt.Errorf("batch handler of kind %q returned BatchErrors with %d entries for %d jobs", kind, len(each), len(jobs))
					} else {
						for k, i := range index {
							errs[i] = each[k]
						}
						return
					}
				}
				for _, i := range index {
					errs[i] = err
				}
			},
		},
	}
}

// batchHandler is the batch part of a handler registered with AddBatchHandler.
type batchHandler struct {
	maxJobs int
	maxWait time.Duration

	// run decodes the jobs' payloads and calls the user's function, setting decodeErrs[i]
	// for a job whose payload does not decode (left out of the call) and errs[i] to the
	// outcome of each job the call got.
	run func(ctx context.Context, exs []*execution, decodeErrs, errs []error)
}

// batch is the jobs of one batch kind gathered for one call of its handler. Its first job
// (the leader, whose execution points at it) is handed to a worker; the others join it
// without a worker of their own, holding their slots, until the leader's worker runs them.
type batch struct {
	h      *handler
	max    int           // the most jobs: MaxJobs, at most the queue's slots
	opened time.Time     // when the leader opened it, for MaxWait
	full   chan struct{} // closed when it holds max jobs (and takes no more)

	exs []*execution // guarded by fetchLoop.mu until the leader takes them
}

// group gathers the jobs of batch kinds among exs, which hold slots and have no worker yet,
// into their kinds' open batches (fetchLoop.open) or new ones, and returns what is to be
// handed to workers: the jobs of other kinds, and the leader of each batch opened.
func (fl *fetchLoop) group(exs []*execution) []*execution {
	if !fl.c.batchKinds {
		return exs
	}
	units := make([]*execution, 0, len(exs))
	fl.mu.Lock()
	defer fl.mu.Unlock()
	for _, ex := range exs {
		h := fl.c.handlerFor(ex.row.Kind)
		if h == nil || h.batch == nil {
			units = append(units, ex)
			continue
		}
		if b := fl.open[ex.row.Kind]; b != nil {
			b.exs = append(b.exs, ex)
			if len(b.exs) >= b.max {
				delete(fl.open, ex.row.Kind)
				close(b.full)
			}
			continue
		}
		b := &batch{h: h, max: min(h.batch.maxJobs, fl.slots), opened: time.Now(), full: make(chan struct{}), exs: []*execution{ex}}
		ex.batch = b
		if b.max > 1 {
			fl.open[ex.row.Kind] = b
		} else {
			close(b.full)
		}
		units = append(units, ex)
	}
	return units
}

// groupOne is group for one job: it returns the job, or nil when it joined an open batch.
func (fl *fetchLoop) groupOne(ex *execution) *execution {
	if !fl.c.batchKinds {
		return ex
	}
	if units := fl.group([]*execution{ex}); len(units) > 0 {
		return units[0]
	}
	return nil
}

// runBatch waits, up to the handler's MaxWait since the batch opened, for b to fill (or for
// shutdown to begin), closes it to new jobs, runs its handler and records each job's
// outcome, then finishes the jobs (frees their slots). It returns the jobs claimed ahead
// that took the freed slots, for the worker to run or hand out.
func (fl *fetchLoop) runBatch(b *batch) []*execution {
	c := fl.c
	if wait := b.h.batch.maxWait - time.Since(b.opened); wait > 0 {
		t := time.NewTimer(wait)
		select {
		case <-b.full:
		case <-t.C:
		case <-c.stopping:
		}
		t.Stop()
	}
	fl.mu.Lock()
	if fl.open[b.h.kind] == b {
		delete(fl.open, b.h.kind)
	}
	exs := b.exs
	b.exs = nil
	fl.mu.Unlock()

	c.executeBatch(b.h, exs)
	var next []*execution
	for _, ex := range exs {
		if n := fl.finish(ex); n != nil {
			next = append(next, n)
		}
	}
	return next
}

// executeBatch runs a batch handler on exs and records each job's outcome (settle).
func (c *Client) executeBatch(h *handler, exs []*execution) {
	start := time.Now()
	if c.hook != nil {
		for _, ex := range exs {
			c.hook.HandleEvent(&Event{Kind: EventStarted, Job: &ex.row, State: JobStateRunning, Wait: start.Sub(ex.row.RunAt)})
		}
	}
	ctx, cancel := context.WithCancelCause(c.jobsCtx)
	defer cancel(context.Canceled)
	// The batch's context ends with ErrNotHeld once a heartbeat found every job lost.
	var lost atomic.Int64
	stops := make([]func() bool, len(exs))
	for i, ex := range exs {
		stops[i] = context.AfterFunc(ex.ctx, func() {
			if errorsIsCause(ex.ctx, ErrNotHeld) && lost.Add(1) == int64(len(exs)) {
				cancel(ErrNotHeld)
			}
		})
	}
	timeout := h.timeout
	if timeout == 0 {
		timeout = c.cfg.JobTimeout
	}
	runCtx := context.Context(ctx)
	if timeout > 0 {
		var cancelTimeout context.CancelFunc
		runCtx, cancelTimeout = context.WithTimeout(ctx, timeout)
		defer cancelTimeout()
	}
	decodeErrs, errs := callBatchHandler(runCtx, h, exs)
	for _, stop := range stops {
		stop()
	}
	dur := time.Since(start)
	for i, ex := range exs {
		c.settle(ex, decodeErrs[i], errs[i], dur)
	}
}

// callBatchHandler runs a batch handler, turning a panic into a *panicError for every job
// the handler got, and each error whose Error method panics into an
// *errorMethodPanicError (see safeError).
func callBatchHandler(ctx context.Context, h *handler, exs []*execution) (decodeErrs, errs []error) {
	decodeErrs = make([]error, len(exs))
	errs = make([]error, len(exs))
	defer func() {
		if v := recover(); v != nil {
			pe := &panicError{value: v, stack: debug.Stack()}
			for i := range errs {
				if decodeErrs[i] == nil {
					errs[i] = pe
				}
			}
		}
		for i := range errs {
			errs[i] = safeError(errs[i])
		}
	}()
	h.batch.run(ctx, exs, decodeErrs, errs)
	return decodeErrs, errs
}

// checkBatchWaits refuses batch handlers whose MaxWait is not below half of lease.
func checkBatchWaits(h *Handlers, lease time.Duration) error {
	kinds := make([]string, 0, len(h.byKind))
	for kind := range h.byKind {
		kinds = append(kinds, kind)
	}
	sort.Strings(kinds) // report the same kind every time
	for _, kind := range kinds {
		if hd := h.byKind[kind]; hd.batch != nil && hd.batch.maxWait >= lease/2 {
			return &InvalidError{
				Field:   "Config.Handlers[" + strconv.Quote(kind) + "].MaxWait",
				Problem: fmt.Sprintf("must be below half of Config.Lease (%s), got %s", lease, hd.batch.maxWait),
			}
		}
	}
	return nil
}
