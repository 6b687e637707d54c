package driver

import (
	"context"
	"fmt"
	"runtime/debug"
	"sync/atomic"
	"time"
)

// execution is one claimed job on its way through a handler.
type execution struct {
	row  JobRow
	loop *fetchLoop // the queue's loop that claimed it

	ctx    context.Context // the handler's context, without the timeout
	cancel context.CancelCauseFunc

	leaseUntil    atomic.Int64 // UnixNano by this machine's clock; conservative
	completedInTx atomic.Bool  // CompleteTx succeeded

	// batch is the batch this job leads (its first job, handed to a worker), for a batch
	// handler's kind; nil otherwise, and for the jobs that joined a batch (fetchLoop.group).
	batch *batch

	bufferedAt time.Time // when it was claimed, for the claim-ahead buffer's TTL (fetchLoop.mu)
}

// workerIdleTimeout is how long a worker goroutine waits for its next job before it exits.
const workerIdleTimeout = 5 * time.Second

// worker runs jobs, starting with ex, in its own goroutine. The fetch loop hands each claimed
// job to a worker waiting for one, or starts a new worker when none is: a busy queue reuses
// its workers (and their grown stacks) instead of starting a goroutine per job, and an idle
// queue has none once workerIdleTimeout has passed. A worker frees its slot before it waits
// for the next job, so a claim in between may start a worker beyond the slots; the extra
// workers take later jobs or exit when idle. A job that leads a batch (batch.go) brings the
// jobs of its batch along: the worker runs them in one call of their handler.
func (fl *fetchLoop) worker(ex *execution) {
	idle := time.NewTimer(workerIdleTimeout)
	defer idle.Stop()
	for {
		for ex != nil {
			ex = fl.runUnit(ex) // a job claimed ahead next: no round trip
		}
		idle.Reset(workerIdleTimeout)
		select {
		case ex = <-fl.idle:
		case <-idle.C:
			return
		case <-fl.c.jobsCtx.Done(): // Run has returned
			return
		}
	}
}

// runUnit runs ex, or the batch ex leads, and finishes its jobs. It returns what the worker
// runs next: a job claimed ahead that took a freed slot (handing any others to workers),
// or nil.
func (fl *fetchLoop) runUnit(ex *execution) *execution {
	if b := ex.batch; b != nil {
		units := fl.group(fl.runBatch(b))
		if len(units) == 0 {
			return nil
		}
		fl.handOut(units[1:])
		return units[0]
	}
	fl.execute(ex)
	if next := fl.finish(ex); next != nil {
		return fl.groupOne(next) // nil when it joined an open batch
	}
	return nil
}

// execute runs one job and records the outcome (outcome.go), or hands it to the
// completer. The worker frees the slot afterwards (finish).
func (fl *fetchLoop) execute(ex *execution) {
	c := fl.c
	start := time.Now()
	if c.hook != nil {
		c.hook.HandleEvent(&Event{Kind: EventStarted, Job: &ex.row, State: JobStateRunning, Wait: start.Sub(ex.row.RunAt)})
	}
	h := c.handlerFor(ex.row.Kind)
	if h == nil {
		c.failJob(ex, fmt.Errorf("no handler for kind %q in client %s", ex.row.Kind, c.cfg.ID), nil, 0)
		return
	}
	if h.batch != nil { // not grouped (fetchLoop.group does): a batch of one
		c.executeBatch(h, []*execution{ex})
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

// handlerFor returns the handler of kind, the default handler when kind has none, or nil.
func (c *Client) handlerFor(kind string) *handler {
	if h := c.handlers[kind]; h != nil {
		return h
	}
	return c.anyKind
}

// callHandler runs the handler, turning a panic into a *panicError, and an error whose Error
// method panics into an *errorMethodPanicError (see safeError).
func callHandler(ctx context.Context, h *handler, ex *execution) (decodeErr, err error) {
	defer func() {
		if v := recover(); v != nil {
			err = &panicError{value: v, stack: debug.Stack()}
		}
		err = safeError(err)
	}()
	return h.run(ctx, ex)
}

// finish frees the job's slot and wakes the fetch loop, which may claim again at once. It
// returns the oldest job claimed ahead, if any, which the worker runs next in the slot.
func (fl *fetchLoop) finish(ex *execution) *execution {
	ex.cancel(context.Canceled)
	fl.mu.Lock()
	delete(fl.running, ex.row.ID)
	fl.busy--
	next := fl.popBuffered()
	fl.mu.Unlock()
	fl.activeDown(1)
	fl.finished.Add(1)
	select {
	case fl.freed <- struct{}{}:
	default:
	}
	fl.c.jobs.Done()
	return next
}
