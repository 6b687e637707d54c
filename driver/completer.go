package driver

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// completer batches the completions of successful jobs into jobs_complete_many calls: a
// batch goes out CompleteBatchDelay after its first completion, or at once when
// CompleteBatchSize are pending or, with a limited queue's completion pending, nothing runs
// or is being claimed (limitedIdle), and one batch is in flight at a time, so under load the batches grow
// with the round trip time. A batch that fails because the connection died is
// retried (the calls are fenced, so repeating one is safe) until it succeeds or Run
// abandons database calls at the end of shutdown. A batch the database refuses for a job's
// result (over 1 MB in jsonb's text, which the driver cannot always tell in Go) is completed
// one job at a time instead: the job whose result is refused is cancelled, the others
// complete. Only batches so refused pay a call per job.
//
// When a fetch loop has free slots and reason to claim, a batch claims for it in the same
// call (jobs_complete_and_claim): one commit instead of two, and a second claim in flight
// beside the loop's own. A retried call claims again, as a new claim; the claim of a call
// that failed is never seen, so none of its jobs starts twice: if it committed, they come
// back when their lease expires, like any claim whose result was lost. Its completions, if
// it committed, are found by the retry no longer held: confirmEarlierCommit tells those
// from jobs really lost, so the hook hears that they completed.
//
// The claim of such a call never waits for a lock (jobs_complete_and_claim skips a limited
// queue whose jobs_queues row another transaction holds), so an operator's open
// transaction on the queue's settings, or a long claim, holds no completion back. A call
// that skipped the loop's queue claims fewer jobs than it reserved; giving the slots back
// wakes the loop, which claims them with its own jobs_claim (that one waits its turn).
type completer struct {
	c         *Client
	batchSize int
	delay     time.Duration
	limit     int // pending completions beyond which add blocks

	mu      sync.Mutex
	space   *sync.Cond // signalled when pending shrinks or closed is set
	pending []completion
	spare   []completion
	closed  bool // run has returned: add drops completions

	first   chan struct{} // pending became non-empty (size 1)
	full    chan struct{} // pending reached batchSize (size 1)
	idle    chan struct{} // a limited queue has nothing running or being claimed (size 1)
	closing chan struct{} // close was called: flush everything and return

	ids      []int64
	attempts []int32
	results  [][]byte // one per pair, or empty when no job of the batch has a result
	done     map[int64]struct{}
	scratch  []JobRow // jobs claimed with a batch, reused from call to call
	next     int      // the fetch loop (in queueOrder) the next claim looks at first
	// plainOnly: jobs_complete_and_claim cannot be called (fatalSQL), so batches only
	// complete (completer goroutine only).
	plainOnly bool
}

type completion struct {
	ex  *execution
	dur time.Duration
}

func newCompleter(c *Client, totalSlots int) *completer {
	cp := &completer{
		c:         c,
		batchSize: c.cfg.CompleteBatchSize,
		delay:     c.cfg.CompleteBatchDelay,
		limit:     max(2*totalSlots, 4*BatchSizeMax),
		first:     make(chan struct{}, 1),
		full:      make(chan struct{}, 1),
		idle:      make(chan struct{}, 1),
		closing:   make(chan struct{}),
		done:      make(map[int64]struct{}),
	}
	cp.space = sync.NewCond(&cp.mu)
	return cp
}

// add queues the completion of a job whose handler returned nil. It blocks only when an
// outage has let completions pile up beyond the limit.
func (cp *completer) add(ex *execution, dur time.Duration) {
	cp.mu.Lock()
	for len(cp.pending) >= cp.limit && !cp.closed {
		cp.space.Wait()
	}
	if cp.closed {
		cp.mu.Unlock()
		cp.c.logger.Error("client stopped before the job's completion could be recorded; it runs again after its lease expires",
			slog.Int64("job_id", ex.row.ID), slog.Int("attempt", ex.row.Attempt))
		return
	}
	cp.pending = append(cp.pending, completion{ex: ex, dur: dur})
	ex.loop.owed.Add(1)
	n := len(cp.pending)
	cp.mu.Unlock()
	if n == 1 {
		signal(cp.first)
	}
	if n == cp.batchSize {
		signal(cp.full)
	}
}

// close makes run flush what is pending and return.
func (cp *completer) close() { close(cp.closing) }

// run is the completer's goroutine. It returns after close, once everything pending is
// flushed, or when ctx is done.
func (cp *completer) run(ctx context.Context) {
	defer func() {
		cp.mu.Lock()
		cp.closed = true
		lost := len(cp.pending)
		paid(cp.pending)
		cp.pending = nil
		cp.space.Broadcast()
		cp.mu.Unlock()
		if lost > 0 {
			cp.c.logger.Error("client stopped before completions could be recorded; those jobs run again after their lease expires",
				slog.Int("jobs", lost))
		}
	}()
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	for {
		select {
		case <-cp.first:
		case <-cp.closing:
			cp.flush(ctx)
			return
		}
		if cp.delay > 0 && cp.size() < cp.batchSize {
			timer.Reset(cp.delay)
		wait:
			for !cp.limitedIdle() {
				select {
				case <-cp.full:
					break wait
				case <-timer.C:
					break wait
				case <-cp.closing:
					break wait
				case <-cp.idle: // look again
				}
			}
			timer.Stop()
		}
		select {
		case <-cp.full: // counted in this flush
		default:
		}
		cp.flush(ctx)
		if ctx.Err() != nil {
			return
		}
	}
}

// limitedIdle reports whether a pending completion is of a limited queue and nothing of
// the client runs or is being claimed. Then the batch goes without waiting for
// CompleteBatchDelay: no other completion can join it, and the server holds the queue's
// slots until it commits. Other queues' completions keep waiting: batched, they cost fewer
// commits.
func (cp *completer) limitedIdle() bool {
	if cp.c.running() > 0 {
		return false
	}
	cp.mu.Lock()
	defer cp.mu.Unlock()
	for _, cm := range cp.pending {
		if cm.ex.loop.limited.Load() {
			return true
		}
	}
	return false
}

func (cp *completer) size() int {
	cp.mu.Lock()
	defer cp.mu.Unlock()
	return len(cp.pending)
}

// flush sends everything pending, in batches of at most BatchSizeMax.
func (cp *completer) flush(ctx context.Context) {
	cp.mu.Lock()
	batch := cp.pending
	cp.pending, cp.spare = cp.spare[:0], nil
	cp.space.Broadcast()
	cp.mu.Unlock()

	rest := batch
	for len(rest) > 0 && ctx.Err() == nil {
		n := min(len(rest), BatchSizeMax)
		cp.send(ctx, rest[:n])
		rest = rest[n:]
	}
	if len(rest) > 0 {
		paid(rest)
		cp.c.logger.Error("client stopped before completions could be recorded; those jobs run again after their lease expires",
			slog.Int("jobs", len(rest)))
	}

	clear(batch) // let the executions go
	cp.mu.Lock()
	cp.spare = batch[:0]
	cp.mu.Unlock()
}

// send completes one batch, retrying connection errors, and reports the outcomes. A batch
// the database refuses for its results (22023 naming results: a job's result is over 1 MB in
// jsonb's text, which encodeJSONValue cannot always tell from Go's encoding) is completed
// one job at a time instead (completeEach), so that one job's result neither loses the
// others' completions nor makes the whole batch run again.
func (cp *completer) send(ctx context.Context, batch []completion) {
	c := cp.c
	defer paid(batch)
	cp.ids, cp.attempts, cp.results = cp.ids[:0], cp.attempts[:0], cp.results[:0]
	withResults := false
	for _, cm := range batch {
		cp.ids = append(cp.ids, cm.ex.row.ID)
		cp.attempts = append(cp.attempts, int32(cm.ex.row.Attempt))
		cp.results = append(cp.results, cm.ex.row.result)
		withResults = withResults || cm.ex.row.result != nil
	}
	if !withResults {
		// NULL: a batch without results sends no array.
		clear(cp.results)
		cp.results = cp.results[:0]
	}
	switch err := cp.retry(ctx, batch, cp.call); {
	case err == nil:
		c.reportCompletions(batch, cp.done)
	case withResults && invalidParameter(err, "results"):
		c.logger.Warn("job completions refused for a job's result; completing those jobs one at a time",
			slog.Int("jobs", len(batch)), slog.Any("error", sqlInvalid(err)))
		cp.completeEach(ctx, batch)
	case ctx.Err() != nil:
		c.logger.Error("failed to record job completions before shutdown; those jobs run again after their lease expires",
			slog.Int("jobs", len(batch)), slog.Any("error", err))
	default:
		c.logger.Error("failed to record job completions; those jobs run again after their lease expires",
			slog.Int("jobs", len(batch)), slog.Any("error", err))
	}
}

// retry calls call, which completes batch and collects the ids completed into cp.done,
// until it is answered: connection errors are retried with backoff (the calls are fenced,
// so repeating one is safe) until ctx ends. When an earlier attempt may have committed
// without its reply arriving, confirmEarlierCommit finds the jobs it completed. It returns
// the last error when no answer came: one retrying cannot fix, or ctx's end.
func (cp *completer) retry(ctx context.Context, batch []completion, call func(context.Context, []completion) error) error {
	var b backoff
	mayHaveCommitted := false // a failed attempt may have committed before its reply was lost
	for {
		sent := time.Now()
		err := call(ctx, batch)
		if err == nil {
			if mayHaveCommitted && len(cp.done) < len(batch) {
				cp.confirmEarlierCommit(ctx, batch, sent)
			}
			return nil
		}
		if !pgconn.SafeToRetry(err) {
			mayHaveCommitted = true
		}
		if ctx.Err() != nil || !retryable(err) {
			return err
		}
		cp.c.logger.Warn("failed to record job completions; retrying", slog.Int("jobs", len(batch)), slog.Any("error", err))
		if !sleepCtx(ctx, b.next()) {
			return err
		}
	}
}

// completeEach completes the jobs of batch one at a time with jobs_complete, after the
// batch's call was refused for its results, and reports the outcomes. A job whose own
// result the database refuses is cancelled with the worker's fenced jobs_cancel, like a job
// whose payload does not decode: its handler succeeded, but the result cannot be stored,
// and another attempt would return the same result. Only this path pays a call per job.
func (cp *completer) completeEach(ctx context.Context, batch []completion) {
	c := cp.c
	done := make(map[int64]struct{}, len(batch))
	answered := make([]completion, 0, len(batch)) // the jobs completed or found no longer held
	for i, cm := range batch {
		err := cp.retry(ctx, batch[i:i+1], cp.callOne)
		switch {
		case err == nil:
			answered = append(answered, cm)
			if _, ok := cp.done[cm.ex.row.ID]; ok {
				done[cm.ex.row.ID] = struct{}{}
			}
		case invalidParameter(err, "result"):
			c.cancelJob(cm.ex, fmt.Errorf("failed to store the result of kind %q (the handler succeeded; cancelled, as another attempt would return the same result): %w",
				cm.ex.row.Kind, sqlInvalid(err)), cm.dur)
		case ctx.Err() != nil:
			c.logger.Error("failed to record job completions before shutdown; those jobs run again after their lease expires",
				slog.Int("jobs", len(batch)-i), slog.Any("error", err))
			c.reportCompletions(answered, done)
			return
		default:
			c.logger.Error("failed to record job completion; the job runs again after its lease expires",
				slog.Int64("job_id", cm.ex.row.ID), slog.Int("attempt", cm.ex.row.Attempt), slog.Any("error", err))
		}
	}
	c.reportCompletions(answered, done)
}

// callOne completes the job of batch, which holds one, with jobs_complete, and puts its id
// in cp.done when it was completed.
func (cp *completer) callOne(ctx context.Context, batch []completion) error {
	clear(cp.done) // from an earlier job
	ex := batch[0].ex
	qctx, cancel := context.WithTimeout(ctx, opTimeout)
	defer cancel()
	var ok bool
	if err := cp.c.pool.QueryRow(qctx, completeSQL, ex.row.ID, int32(ex.row.Attempt), []byte(ex.row.result)).Scan(&ok); err != nil {
		return err
	}
	if ok {
		cp.done[ex.row.ID] = struct{}{}
	}
	return nil
}

// confirmEarlierCommit looks up the jobs of batch that a retried call did not complete
// (its pairs were no longer held) when an earlier attempt of the call may have committed
// without its reply arriving: a job done at the attempt this worker held was completed by
// that attempt, and so was a job that no longer exists while its lease had not run out when
// the retry was sent (until then no other worker could have taken it over, so only this
// worker's completion, deleting it with done_retention 0, can have removed it). Those join
// cp.done. Any other job was really lost (its lease expired and it was taken back, or it
// was cancelled), and so is each job when the look-up fails.
func (cp *completer) confirmEarlierCommit(ctx context.Context, batch []completion, retrySent time.Time) {
	qctx, cancel := context.WithTimeout(ctx, opTimeout)
	defer cancel()
	b := &pgx.Batch{}
	var asked []*execution
	for _, cm := range batch {
		if _, ok := cp.done[cm.ex.row.ID]; !ok {
			asked = append(asked, cm.ex)
			b.Queue(jobStateSQL, cm.ex.row.ID)
		}
	}
	res := cp.c.pool.SendBatch(qctx, b)
	defer res.Close()
	for _, ex := range asked {
		var state string
		var attempts int32
		switch err := res.QueryRow().Scan(&state, &attempts); {
		case err == nil:
			if state == string(JobStateDone) && int(attempts) == ex.row.Attempt {
				cp.done[ex.row.ID] = struct{}{}
			}
		case errors.Is(err, pgx.ErrNoRows):
			if ex.leaseUntil.Load() > retrySent.UnixNano() {
				cp.done[ex.row.ID] = struct{}{}
			}
		default:
			cp.c.logger.Warn("failed to look up jobs whose completion may have been recorded without its reply arriving; reporting them as lost",
				slog.Int("jobs", len(asked)), slog.Any("error", err))
			return
		}
	}
}

// reportCompletions logs the completions of batch that were refused and, with a hook,
// emits each job's outcome; done holds the ids that were completed.
func (c *Client) reportCompletions(batch []completion, done map[int64]struct{}) {
	if lost := len(batch) - len(done); lost > 0 {
		c.logger.Warn("job completions refused: the jobs were no longer held (lease expired or cancelled)",
			slog.Int("jobs", lost))
	}
	if c.hook == nil {
		return
	}
	for _, cm := range batch {
		if _, ok := done[cm.ex.row.ID]; ok {
			c.emit(cm.ex, EventCompleted, JobStateDone, cm.dur, nil)
		} else {
			c.emit(cm.ex, EventLost, "", cm.dur, ErrNotHeld)
		}
	}
}

// call sends one batch, with a claim for a fetch loop that has free slots and reason to
// claim (jobs_complete_and_claim) or else alone (jobs_complete_many), collects the
// completed ids into cp.done and starts the jobs claimed.
func (cp *completer) call(ctx context.Context, batch []completion) error {
	clear(cp.done) // from an attempt that failed part way
	qctx, cancel := context.WithTimeout(ctx, opTimeout)
	defer cancel()
	fl, want, source := cp.claimFor(batch)
	if fl == nil {
		rows, err := cp.c.pool.Query(qctx, completeManySQL, cp.ids, cp.attempts, cp.resultsArg())
		if err != nil {
			return err
		}
		defer rows.Close()
		var id int64
		for rows.Next() {
			if err := rows.Scan(&id); err != nil {
				return err
			}
			cp.done[id] = struct{}{}
		}
		return rows.Err()
	}

	c := cp.c
	claimedAt := time.Now()
	rows, err := c.pool.Query(qctx, completeAndClaimSQL, c.cfg.ID, cp.ids, cp.attempts, int32(want), fl.queues, c.cfg.Lease,
		cp.resultsArg())
	var buf []JobRow
	var completed []int64
	if err == nil {
		buf, completed, err = scanClaimed(rows, cp.scratch[:0], true)
		cp.scratch = buf[:0]
		defer clear(buf) // drop the payloads from the reused buffer
	}
	if err != nil {
		// Its claim is not run: if it did commit, the jobs come back when their lease
		// expires. Its completions are retried.
		fl.unreserve(want)
		if fatalSQL(err) {
			// A schema older than version 20, or a role without the grant: complete
			// without claiming from now on, rather than fail every batch.
			cp.plainOnly = true
			c.logger.Warn("cannot call jobs_complete_and_claim (run skiplock's migrations); completing without claiming",
				slog.Any("error", err))
			return cp.call(ctx, batch)
		}
		return err
	}
	for _, id := range completed {
		cp.done[id] = struct{}{}
	}
	if c.claimHook != nil {
		c.claimHook.HandleClaim(&ClaimEvent{Queue: fl.queue, Wake: source, Asked: want, Claimed: len(buf),
			Completed: len(completed), Duration: time.Since(claimedAt)})
	}
	fl.unreserve(want - len(buf))
	if len(buf) > 0 {
		c.startClaimed(fl, buf, claimedAt)
	}
	return nil
}

// claimFor picks the fetch loop batch claims for: the next one, round robin, that has
// reason to claim and room, counting the slots the batch's own completions free, which it
// reserves (want). nil once shutdown has begun.
func (cp *completer) claimFor(batch []completion) (fl *fetchLoop, want int, source WakeSource) {
	c := cp.c
	if cp.plainOnly || c.stoppingClaims() {
		return nil, 0, 0
	}
	loops := c.queueOrder
	for i := range loops {
		fl := loops[(cp.next+i)%len(loops)]
		s := WakeSource(fl.wantSource.Load())
		if s == 0 || !fl.slotFree() {
			continue
		}
		freeing := 0
		for _, cm := range batch {
			if cm.ex.loop == fl {
				freeing++
			}
		}
		if want := fl.reserve(freeing); want > 0 {
			cp.next = (cp.next + i + 1) % len(loops)
			return fl, want, s
		}
	}
	return nil, 0, 0
}

// paid tells the loops of batch that its completions are no longer owed: sent, or given
// up on (the server gets the jobs back when their lease expires).
func paid(batch []completion) {
	for i := 0; i < len(batch); {
		fl, n := batch[i].ex.loop, 0
		for ; i < len(batch) && batch[i].ex.loop == fl; i++ {
			n++
		}
		fl.paid(n)
	}
}

func signal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// resultsArg is the results argument of the batch's call: NULL when no job has a result.
func (cp *completer) resultsArg() [][]byte {
	if len(cp.results) == 0 {
		return nil
	}
	return cp.results
}
