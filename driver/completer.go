package driver

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// completer batches the completions of successful jobs into jobs_complete_many calls: a
// batch goes out CompleteBatchDelay after its first completion, or at once when
// CompleteBatchSize are pending, and one batch is in flight at a time, so under load the
// batches grow with the round trip time. A batch that fails because the connection died is
// retried (the calls are fenced, so repeating one is safe) until it succeeds or Run
// abandons database calls at the end of shutdown.
//
// A fetch loop that claims while completions are pending takes them (take) and sends them
// with its claim in one jobs_complete_and_claim call, one commit instead of two; if that
// call fails they come back here (putBack) and go out again like any other batch.
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
	closing chan struct{} // close was called: flush everything and return

	ids      []int64
	attempts []int32
	done     map[int64]struct{}
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
	n := len(cp.pending)
	cp.mu.Unlock()
	if n == 1 {
		signal(cp.first)
	}
	if n == cp.batchSize {
		signal(cp.full)
	}
}

// take moves up to n pending completions, the oldest first, into dst and returns it, for
// a fetch loop to send with its claim. The loop reports their outcomes (report) or gives
// them back (putBack).
func (cp *completer) take(dst []completion, n int) []completion {
	cp.mu.Lock()
	defer cp.mu.Unlock()
	n = min(n, len(cp.pending))
	if n == 0 {
		return dst
	}
	dst = append(dst, cp.pending[:n]...)
	rest := copy(cp.pending, cp.pending[n:])
	clear(cp.pending[rest:]) // let the executions go
	cp.pending = cp.pending[:rest]
	cp.space.Broadcast()
	return dst
}

// putBack returns completions that a fetch loop took but could not record (its call
// failed; being fenced, they are safe to send again). It never blocks: they were already
// counted once against the limit. After run has returned they are dropped and logged.
func (cp *completer) putBack(batch []completion) {
	cp.mu.Lock()
	if cp.closed {
		cp.mu.Unlock()
		cp.c.logger.Error("client stopped before completions could be recorded; those jobs run again after their lease expires",
			slog.Int("jobs", len(batch)))
		return
	}
	cp.pending = append(cp.pending, batch...)
	n := len(cp.pending)
	cp.mu.Unlock()
	signal(cp.first)
	if n >= cp.batchSize {
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
			select {
			case <-cp.full:
			case <-timer.C:
			case <-cp.closing:
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
		cp.c.logger.Error("client stopped before completions could be recorded; those jobs run again after their lease expires",
			slog.Int("jobs", len(rest)))
	}

	clear(batch) // let the executions go
	cp.mu.Lock()
	cp.spare = batch[:0]
	cp.mu.Unlock()
}

// send completes one batch, retrying connection errors, and reports the outcomes.
func (cp *completer) send(ctx context.Context, batch []completion) {
	c := cp.c
	cp.ids, cp.attempts = cp.ids[:0], cp.attempts[:0]
	for _, cm := range batch {
		cp.ids = append(cp.ids, cm.ex.row.ID)
		cp.attempts = append(cp.attempts, int32(cm.ex.row.Attempt))
	}
	var b backoff
	for {
		err := cp.call(ctx)
		if err == nil {
			break
		}
		if ctx.Err() != nil || !retryable(err) {
			c.logger.Error("failed to record job completions; those jobs run again after their lease expires",
				slog.Int("jobs", len(batch)), slog.Any("error", err))
			return
		}
		c.logger.Warn("failed to record job completions; retrying", slog.Int("jobs", len(batch)), slog.Any("error", err))
		if !sleepCtx(ctx, b.next()) {
			c.logger.Error("failed to record job completions before shutdown; those jobs run again after their lease expires",
				slog.Int("jobs", len(batch)), slog.Any("error", err))
			return
		}
	}
	c.reportCompletions(batch, cp.done)
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

// call sends one jobs_complete_many and collects the completed ids into cp.done.
func (cp *completer) call(ctx context.Context) error {
	clear(cp.done) // from an attempt that failed part way
	qctx, cancel := context.WithTimeout(ctx, opTimeout)
	defer cancel()
	rows, err := cp.c.pool.Query(qctx, completeManySQL, cp.ids, cp.attempts)
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

func signal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}
