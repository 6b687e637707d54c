package driver

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
)

// fetchLoop is one queue of a client: its loop claims jobs into free slots and hands each
// to a worker goroutine (worker.go).
type fetchLoop struct {
	c      *Client
	queue  string
	queues []string // {queue}: jobs_claim's queues argument
	slots  int
	batch  int
	ttl    time.Duration // how long a job claimed ahead may wait in buffer

	// Claiming ahead (QueueConfig.ClaimAhead): aheadCap is the most (0: never), adaptive
	// whether the loop sizes it from the rate of finished jobs (sizeAhead), and ahead how
	// many the next claims may take beyond the free slots, read by reserve in the loop and
	// in the completer. finished counts the jobs the workers finished.
	aheadCap int
	adaptive bool
	ahead    atomic.Int64
	finished atomic.Int64

	active atomic.Int64 // jobs claimed and not yet finished
	// owed counts the jobs that finished well and wait in the completer for their
	// completion to commit: the server still counts them running. For a limited queue the
	// loop's own claims leave their slots alone (room), since a claim beyond the server's
	// limit comes back short and leaves the loop waiting for a notification; the
	// completer's claim takes them over as its completions free them (claimFor).
	owed  atomic.Int64
	wake  chan struct{}   // a notification arrived (size 1: wake-ups coalesce)
	freed chan struct{}   // a slot was freed (size 1)
	idle  chan *execution // hands a job to an idle worker goroutine (unbuffered)

	mu      sync.Mutex
	running map[int64]*execution // for heartbeats, buffered jobs included; guarded by mu
	busy    int                  // jobs handed to workers and not finished; guarded by mu
	buffer  []*execution         // jobs claimed ahead, oldest first; guarded by mu
	open    map[string]*batch    // by kind, the batch still taking jobs (batch.go); guarded by mu

	scratch []JobRow // the loop's buffer for claimed rows

	// wantSource is why the loop would claim now (a WakeSource), or 0 when it has no reason
	// to (or holds its claims for a rate limit). The completer reads it to claim for the
	// loop with a batch of completions (completer.go).
	wantSource atomic.Int32

	// What the last jobs_next_start said, for rateWait (used by the loop goroutine only):
	// whether the queue has a rate limit, and when it was asked.
	rateLimited bool
	rateAsked   time.Time

	// What jobs_queue_limited said (askLimited); when it was asked and whether an error
	// was logged (the watchLimits goroutine only, or before it starts).
	limited      atomic.Bool
	limitKnown   atomic.Bool // the first answer (or error) is in: nothing is claimed ahead before
	limitAsked   time.Time
	limitErrSeen bool

	// For sizeAhead (the loop goroutine only): the recent rate of finished jobs (per
	// second), and the sample it was last updated at.
	finishRate float64
	rateAt     time.Time
	rateN      int64
}

func newFetchLoop(c *Client, queue string, q QueueConfig) *fetchLoop {
	return &fetchLoop{
		c:        c,
		queue:    queue,
		queues:   []string{queue},
		slots:    q.Slots,
		batch:    q.BatchSize,
		ttl:      min(ClaimAheadTTL, c.cfg.Lease/2), // returned before the lease could end, heartbeat or not
		aheadCap: q.ClaimAhead,
		adaptive: q.claimAheadAdaptive,
		wake:     make(chan struct{}, 1),
		freed:    make(chan struct{}, 1),
		idle:     make(chan *execution),
		running:  make(map[int64]*execution),
		open:     make(map[string]*batch),
	}
}

// wakeUp asks the fetch loop to claim; wake-ups that arrive while one is pending merge.
func (fl *fetchLoop) wakeUp() {
	select {
	case fl.wake <- struct{}{}:
	default:
	}
}

// run is the queue's fetch loop, in its own goroutine until ctx is done. It claims when it
// has free slots and reason to believe jobs are ready: a notification, the poll timer, or
// the previous claim having filled every slot it asked for (so more are likely waiting; the
// next claim then happens as soon as slots free up). Claims are at least FetchCooldown
// apart, so a storm of notifications or freed slots makes few large claims. A paused or
// fully limited queue's claims come back empty, so the loop waits like an idle one. When a
// rate limit cut a claim short, the loop holds its claims until the next start is allowed
// (at most one poll interval), ignoring notifications meanwhile, and claims again then.
//
// The completer may claim for the loop too, with the completions it sends (one call, one
// commit): it does when the loop has reason to claim (wantSource) and free slots. Both
// reserve the slots they claim for (reserve), so together they never claim beyond them.
func (fl *fetchLoop) run(ctx context.Context) {
	c := fl.c
	poll := time.NewTimer(jitter(c.cfg.PollInterval, 0.1))
	defer poll.Stop()
	defer fl.wantSource.Store(0)
	defer fl.returnBuffered(true)      // jobs claimed ahead go back at shutdown
	expire := time.NewTimer(time.Hour) // the oldest buffered job's TTL
	expire.Stop()
	defer expire.Stop()
	want := true        // claim at start: jobs may have been enqueued while nobody listened
	source := WakeStart // why want is true, for the ClaimHook
	var last, holdUntil time.Time
	var b backoff
	for {
		if ctx.Err() != nil {
			// Shutdown began. Without this check a wake-up that select picked instead of
			// ctx.Done (such as the NOTIFY of jobs just released) would claim again.
			return
		}
		if fl.aheadCap > 0 {
			if oldest := fl.returnBuffered(false); !oldest.IsZero() {
				expire.Reset(time.Until(oldest.Add(fl.ttl)))
			}
			fl.sizeAhead()
		}
		holding := time.Now().Before(holdUntil)
		if want && !holding {
			fl.wantSource.Store(int32(source))
		} else {
			fl.wantSource.Store(0)
		}
		if want && fl.room(fl.active.Load(), 0) > 0 && fl.slotFree() && !holding {
			if cd := c.cfg.FetchCooldown; cd > 0 {
				if wait := cd - time.Since(last); wait > 0 && !sleepCtx(ctx, wait) {
					return
				}
			}
			last = time.Now()
			full, rateWait, err := fl.claim(ctx, source)
			next := jitter(c.cfg.PollInterval, 0.1)
			if rateWait > 0 && rateWait < next {
				next = rateWait
			}
			if rateWait > 0 {
				holdUntil = time.Now().Add(next)
			}
			poll.Reset(next)
			if err != nil {
				if fatalSQL(err) {
					select {
					case c.fatal <- err:
					default:
					}
					return
				}
				if ctx.Err() == nil {
					c.logger.Warn("failed to claim jobs; retrying", slog.String("queue", fl.queue), slog.Any("error", err))
				}
				if !sleepCtx(ctx, b.next()) {
					return
				}
				continue // want stays true
			}
			b.reset()
			want, source = full, WakeBacklog
			continue
		}
		select {
		case <-ctx.Done():
			return
		case <-fl.wake:
			if !want {
				want, source = true, WakeNotify
			}
		case <-fl.freed:
		case <-expire.C:
		case <-poll.C:
			if !want {
				want, source = true, WakePoll // the claim rearms the timer
			}
		}
	}
}

// claim claims up to the free slots (at most the batch size) in one jobs_claim call and
// starts the jobs. It reports whether it got all it asked for and, when it did not and the
// queue has a rate limit, how long until the limit allows the next start (rateWait, 0 when
// there is nothing to wait for). The claim runs to its end even when ctx is cancelled
// meanwhile, so that its jobs can be released at once instead of waiting out their lease;
// they are not started then. source is what made the loop claim, for the ClaimHook. When
// a claim of the completer has just taken the free slots, it claims nothing and reports
// full, so the loop claims again once slots free up.
func (fl *fetchLoop) claim(ctx context.Context, source WakeSource) (full bool, rateWait time.Duration, err error) {
	c := fl.c
	want := fl.reserve(0)
	if want == 0 {
		return true, 0, nil
	}
	claimedAt := time.Now()
	qctx, cancel := context.WithTimeout(c.workCtx, opTimeout)
	defer cancel()
	rows, err := c.pool.Query(qctx, claimSQL, c.cfg.ID, int32(want), fl.queues, c.cfg.Lease)
	if err != nil {
		fl.unreserve(want)
		return false, 0, fmt.Errorf("failed to claim jobs from queue %q: %w", fl.queue, err)
	}
	buf, _, err := scanClaimed(rows, fl.scratch[:0], false)
	fl.scratch = buf[:0]
	defer clear(buf) // drop the payloads from the reused buffer
	if err != nil {
		fl.unreserve(want)
		// Whether the claim committed is unknown. Its jobs are not run: if it did commit,
		// they come back when their lease expires.
		return false, 0, fmt.Errorf("failed to claim jobs from queue %q: %w", fl.queue, err)
	}
	if c.claimHook != nil {
		c.claimHook.HandleClaim(&ClaimEvent{Queue: fl.queue, Wake: source, Asked: want, Claimed: len(buf),
			Duration: time.Since(claimedAt)})
	}
	if ctx.Err() != nil {
		fl.unreserve(want)
		if len(buf) > 0 {
			fl.release(buf)
		}
		return false, 0, nil
	}
	fl.unreserve(want - len(buf))
	if len(buf) == 0 {
		return false, fl.rateWait(qctx), nil
	}
	fl.start(buf, claimedAt)
	if len(buf) == want {
		return true, 0, nil
	}
	// Asked after the jobs are started, so the round trip delays none of them.
	return false, fl.rateWait(qctx), nil
}

// room is how many jobs a claim may take: the free slots and free places in the
// claim-ahead buffer, less, for a limited queue, the slots whose jobs the completer still
// owes the server (owed), of which the claim's own completions (freeing, for the
// completer's claim) are not.
func (fl *fetchLoop) room(active int64, freeing int) int64 {
	n := int64(fl.slots) + fl.ahead.Load() - active
	if fl.limited.Load() {
		n -= fl.owed.Load() - int64(freeing)
	}
	return n
}

// reserve takes up to the batch size of room(freeing) for one claim, the loop's own
// (freeing 0) or the completer's (freeing: the batch's completions of this queue), and
// returns how many (0 when there is no room). They count as active until the claim's
// jobs finish; unreserve gives back those the claim did not fill.
func (fl *fetchLoop) reserve(freeing int) int {
	for {
		active := fl.active.Load()
		n := min(fl.room(active, freeing), int64(fl.batch))
		if n <= 0 {
			return 0
		}
		if fl.active.CompareAndSwap(active, active+n) {
			return int(n)
		}
	}
}

// paid records that n completions the completer owed for this queue were sent (or given
// up), and wakes the loop, which may have room again.
func (fl *fetchLoop) paid(n int) {
	fl.owed.Add(-int64(n))
	select {
	case fl.freed <- struct{}{}:
	default:
	}
}

// unreserve gives back n reserved slots and wakes the loop, which may claim them.
func (fl *fetchLoop) unreserve(n int) {
	if n <= 0 {
		return
	}
	fl.activeDown(int64(n))
	select {
	case fl.freed <- struct{}{}:
	default:
	}
}

// activeDown takes n off the active count (a job finished, or reserved slots a claim did
// not fill). When that leaves a limited queue with nothing running or being claimed, it
// tells the completer, which may then send without waiting (completer.limitedIdle).
func (fl *fetchLoop) activeDown(n int64) {
	if fl.active.Add(-n) == 0 && fl.limited.Load() {
		signal(fl.c.completer.idle)
	}
}

// start hands claimed jobs, whose slots are reserved, to worker goroutines: as many as
// there are free slots, the oldest first; the rest wait in the claim-ahead buffer for a
// worker that finishes (finish) or for their TTL (returnBuffered).
func (fl *fetchLoop) start(buf []JobRow, claimedAt time.Time) {
	c := fl.c
	exs := make([]execution, len(buf))
	leaseUntil := claimedAt.Add(c.cfg.Lease).UnixNano()
	// Counted before a finishing worker can take one of them from the buffer.
	c.jobs.Add(len(exs))
	var ready []*execution
	fl.mu.Lock()
	for i := range exs {
		ex := &exs[i]
		ex.row = buf[i]
		ex.loop = fl
		ex.leaseUntil.Store(leaseUntil)
		ex.ctx, ex.cancel = context.WithCancelCause(c.jobsCtx)
		ex.bufferedAt = claimedAt
		fl.running[ex.row.ID] = ex
		fl.buffer = append(fl.buffer, ex)
	}
	for {
		ex := fl.popBuffered()
		if ex == nil {
			break
		}
		ready = append(ready, ex)
	}
	buffered := len(fl.buffer) > 0
	fl.mu.Unlock()
	// Grouped before any is handed out, so that the jobs of one claim go into one batch.
	fl.handOut(fl.group(ready))
	if buffered {
		// The loop arms the TTL of what is buffered (this may run in the completer).
		select {
		case fl.freed <- struct{}{}:
		default:
		}
	}
}

// handOut hands each job (or batch leader) to an idle worker, or to a new one when none is.
func (fl *fetchLoop) handOut(exs []*execution) {
	for _, ex := range exs {
		select {
		case fl.idle <- ex:
		default:
			go fl.worker(ex)
		}
	}
}

// slotFree reports whether a claim is due: always without claim-ahead (the free slots are
// counted by reserve); with it, only while a slot is free (and so the buffer empty). So
// jobs are claimed ahead when a slot frees, not again and again while long jobs fill every
// slot and the buffered ones go back after their TTL.
func (fl *fetchLoop) slotFree() bool {
	if fl.ahead.Load() == 0 {
		return true
	}
	fl.mu.Lock()
	defer fl.mu.Unlock()
	return fl.busy < fl.slots
}

// popBuffered takes the oldest buffered job for a free slot, or returns nil when there is
// no free slot or no buffered job. fl.mu must be held.
func (fl *fetchLoop) popBuffered() *execution {
	if fl.busy >= fl.slots || len(fl.buffer) == 0 || fl.c.claimsStopping.Load() {
		return nil
	}
	ex := fl.buffer[0]
	fl.buffer[0] = nil
	fl.buffer = fl.buffer[1:]
	fl.busy++
	return ex
}

// returnBuffered gives back the jobs claimed ahead that have waited longer than the TTL,
// or all of them, in one round trip (jobs_snooze's rule: queued again at once, no attempt
// spent, a new attempt number at the next claim), and returns when the oldest job still
// buffered was claimed (zero when none is).
func (fl *fetchLoop) returnBuffered(all bool) (oldest time.Time) {
	fl.mu.Lock()
	cut := time.Now().Add(-fl.ttl)
	n := 0
	for n < len(fl.buffer) && (all || fl.buffer[n].bufferedAt.Before(cut)) {
		n++
	}
	out := make([]*execution, n)
	copy(out, fl.buffer[:n])
	for _, ex := range out {
		delete(fl.running, ex.row.ID)
	}
	clear(fl.buffer[:n])
	fl.buffer = fl.buffer[n:]
	if len(fl.buffer) > 0 {
		oldest = fl.buffer[0].bufferedAt
	}
	fl.mu.Unlock()
	if n == 0 {
		return oldest
	}
	rows := make([]JobRow, n)
	for i, ex := range out {
		rows[i] = ex.row
		ex.cancel(context.Canceled)
	}
	reason := "returned jobs claimed ahead that waited longer than their TTL"
	if all {
		reason = "returned jobs claimed ahead at shutdown"
	}
	fl.releaseRows(rows, reason)
	fl.unreserve(n)
	for range n {
		fl.c.jobs.Done()
	}
	return oldest
}

// watchLimits asks jobs_queue_limited once per poll interval (at once when it has not
// asked yet) until ctx is done, in a goroutine of its own so that no claim waits for it.
func (fl *fetchLoop) watchLimits(ctx context.Context) {
	wait := time.Duration(0)
	if !fl.limitAsked.IsZero() {
		wait = fl.c.cfg.PollInterval
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		fl.askLimited(ctx)
		t.Reset(jitter(fl.c.cfg.PollInterval, 0.1))
	}
}

// askLimited asks jobs_queue_limited whether the queue has a concurrency or rate limit
// (fl.limited); an error counts as limited. Called before the loops start, then only by
// watchLimits.
func (fl *fetchLoop) askLimited(ctx context.Context) {
	c := fl.c
	fl.limitAsked = time.Now()
	qctx, cancel := context.WithTimeout(ctx, opTimeout)
	var limited bool
	err := c.pool.QueryRow(qctx, queueLimitedSQL, fl.queue).Scan(&limited)
	cancel()
	if err != nil {
		limited = true
		if ctx.Err() == nil && !fl.limitErrSeen {
			fl.limitErrSeen = true // once: a schema without jobs_queue_limited fails every time
			c.logger.Warn("failed to ask whether the queue is limited; claiming only free slots (is the schema migrated?)",
				slog.String("queue", fl.queue), slog.Any("error", err))
		}
	}
	fl.limited.Store(limited)
	fl.limitKnown.Store(true)
	if limited {
		fl.ahead.Store(0) // at once, for the completer's claims too
	}
}

// sizeAhead sets how many jobs the next claims may take beyond the free slots (fl.ahead):
// none while the queue has a concurrency or rate limit, or before watchLimits has first
// asked, else the cap, or when
// adaptive what the slots finish in ClaimAheadHorizon at the rate they finished jobs lately
// (an average of samples at least claimAheadSample apart, each counting every job finished
// since the one before), rounded up and at most the cap.
func (fl *fetchLoop) sizeAhead() {
	switch {
	case fl.limited.Load() || !fl.limitKnown.Load():
		fl.ahead.Store(0)
	case !fl.adaptive:
		fl.ahead.Store(int64(fl.aheadCap))
	default:
		now := time.Now()
		n := fl.finished.Load()
		if d := now.Sub(fl.rateAt); d >= claimAheadSample {
			r := float64(n-fl.rateN) / d.Seconds()
			if fl.rateAt.IsZero() {
				r = 0 // no sample yet: the jobs finished before the loop started do not count
			}
			fl.finishRate = (fl.finishRate + r) / 2
			fl.rateAt, fl.rateN = now, n
		}
		fl.ahead.Store(min(int64(fl.aheadCap), int64(math.Ceil(fl.finishRate*ClaimAheadHorizon.Seconds()))))
	}
}

// claimAheadSample is the least time between two samples of a queue's rate of finished
// jobs (sizeAhead): long enough that a sample counts several claims' jobs in a drain,
// short enough that the size follows the drain's start within a few claims.
const claimAheadSample = 50 * time.Millisecond

// scanClaimed reads the rows of claimSQL, or of completeAndClaimSQL when withCompleted
// (then also the ids completed), appending the jobs to buf. On error the rows read so far
// are returned only to be cleared.
func scanClaimed(rows pgx.Rows, buf []JobRow, withCompleted bool) (_ []JobRow, completed []int64, err error) {
	defer rows.Close()
	var meta, parentResults, checkpoints []byte
	for first := true; rows.Next(); first = false {
		if withCompleted && first && rows.RawValues()[1] == nil {
			// No job claimed: the only row carries completed, its job columns are NULL.
			if err := rows.Scan(&completed, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil); err != nil {
				return buf, nil, err
			}
			continue
		}
		buf = append(buf, JobRow{})
		r := &buf[len(buf)-1]
		if withCompleted {
			var head any // completed, on the first row only; nil skips the column
			if first {
				head = &completed
			}
			err = rows.Scan(head, &r.ID, &r.Queue, &r.Kind, &r.EncodedPayload, &r.Attempt, &r.MaxAttempts, &r.Priority,
				&r.RunAt, &r.LeaseExpiresAt, &r.CreatedAt, &meta, &parentResults, &checkpoints)
		} else {
			err = rows.Scan(&r.ID, &r.Queue, &r.Kind, &r.EncodedPayload, &r.Attempt, &r.MaxAttempts, &r.Priority,
				&r.RunAt, &r.LeaseExpiresAt, &r.CreatedAt, &meta, &parentResults, &checkpoints)
		}
		if err != nil {
			return buf, nil, err
		}
		if meta != nil {
			r.Meta = decodeMeta(meta)
		}
		// Both NULL for ordinary jobs: nothing decoded.
		if parentResults != nil {
			if err := json.Unmarshal(parentResults, &r.ParentResults); err != nil {
				return buf, nil, fmt.Errorf("failed to decode parent_results of job %d: %w", r.ID, err)
			}
		}
		if checkpoints != nil {
			if err := json.Unmarshal(checkpoints, &r.Checkpoints); err != nil {
				return buf, nil, fmt.Errorf("failed to decode checkpoints of job %d: %w", r.ID, err)
			}
		}
	}
	rows.Close()
	return buf, completed, rows.Err()
}

// rateWait asks, after a claim that came back short, how long until the queue's rate limit
// allows the next start: 0 when the queue has none or allows one now. A queue found without
// a rate limit is asked again only after a poll interval, so that queues without one pay at
// most one extra round trip per poll interval (a new limit is noticed within one). On error
// it logs and returns 0, so the loop falls back to notifications and the poll.
func (fl *fetchLoop) rateWait(ctx context.Context) time.Duration {
	if !fl.rateLimited && time.Since(fl.rateAsked) < fl.c.cfg.PollInterval {
		return 0
	}
	fl.rateAsked = time.Now()
	var wait *time.Duration
	if err := fl.c.pool.QueryRow(ctx, nextStartSQL, fl.queue).Scan(&wait); err != nil {
		if ctx.Err() == nil {
			fl.c.logger.Warn("failed to ask when the queue's rate limit allows the next start; polling instead",
				slog.String("queue", fl.queue), slog.Any("error", err))
		}
		return 0
	}
	fl.rateLimited = wait != nil
	if wait == nil {
		return 0
	}
	return *wait
}

// release gives back jobs claimed after shutdown began: queued again and ready now,
// without spending an attempt, in one round trip. If it fails their leases expire instead.
func (fl *fetchLoop) release(rows []JobRow) {
	fl.releaseRows(rows, "released jobs claimed during shutdown")
}

// releaseRows gives back claimed jobs that were not started (jobs_snooze with run_at now,
// fenced by their attempts) and logs why; if it fails their leases expire instead.
func (fl *fetchLoop) releaseRows(rows []JobRow, why string) {
	c := fl.c
	batch := &pgx.Batch{}
	for i := range rows {
		batch.Queue(snoozeSQL, rows[i].ID, int32(rows[i].Attempt), time.Duration(0))
	}
	ctx, cancel := context.WithTimeout(c.workCtx, opTimeout)
	defer cancel()
	if err := c.pool.SendBatch(ctx, batch).Close(); err != nil {
		c.logger.Warn("failed to give back claimed jobs; they run again after their lease expires",
			slog.String("queue", fl.queue), slog.String("why", why), slog.Int("jobs", len(rows)), slog.Any("error", err))
		return
	}
	c.logger.Info(why, slog.String("queue", fl.queue), slog.Int("jobs", len(rows)))
}
