package driver

import (
	"context"
	"fmt"
	"log/slog"
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

	active atomic.Int64    // jobs claimed and not yet finished
	wake   chan struct{}   // a notification arrived (size 1: wake-ups coalesce)
	freed  chan struct{}   // a slot was freed (size 1)
	idle   chan *execution // hands a job to an idle worker goroutine (unbuffered)

	mu      sync.Mutex
	running map[int64]*execution // for heartbeats; guarded by mu

	scratch []JobRow // the loop's buffer for claimed rows

	// Completions carried by the current claim (completer.take), their fencing pairs and
	// the ids completed, reused from claim to claim (loop goroutine only).
	carried  []completion
	ids      []int64
	attempts []int32
	done     map[int64]struct{}

	// What the last jobs_next_start said, for rateWait (used by the loop goroutine only):
	// whether the queue has a rate limit, and when it was asked.
	rateLimited bool
	rateAsked   time.Time
}

func newFetchLoop(c *Client, queue string, q QueueConfig) *fetchLoop {
	return &fetchLoop{
		c:       c,
		queue:   queue,
		queues:  []string{queue},
		slots:   q.Slots,
		batch:   q.BatchSize,
		wake:    make(chan struct{}, 1),
		freed:   make(chan struct{}, 1),
		idle:    make(chan *execution),
		running: make(map[int64]*execution),
		done:    make(map[int64]struct{}),
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
func (fl *fetchLoop) run(ctx context.Context) {
	c := fl.c
	poll := time.NewTimer(jitter(c.cfg.PollInterval, 0.1))
	defer poll.Stop()
	want := true        // claim at start: jobs may have been enqueued while nobody listened
	source := WakeStart // why want is true, for the ClaimHook
	var last, holdUntil time.Time
	var b backoff
	for {
		if want && fl.active.Load() < int64(fl.slots) && !time.Now().Before(holdUntil) {
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
		case <-poll.C:
			if !want {
				want, source = true, WakePoll // the claim rearms the timer
			}
		}
	}
}

// claim claims up to the free slots (at most the batch size) in one call and starts the
// jobs. When the completer holds completions, the loop takes them and the call is
// jobs_complete_and_claim, which records them before it claims (one commit instead of two);
// otherwise it is jobs_claim. It reports whether it got all it asked for and, when it did
// not and the queue has a rate limit, how long until the limit allows the next start
// (rateWait, 0 when there is nothing to wait for). The claim runs to its end even when ctx
// is cancelled meanwhile, so that its jobs can be released at once instead of waiting out
// their lease; they are not started then. source is what made the loop claim, for the
// ClaimHook.
//
// A call that fails is not repeated as a whole. Its completions go back to the completer,
// which sends them again (they are fenced: a pair already recorded is refused, never done
// twice). Its claim, if it committed before the failure, is never seen, so none of its
// jobs starts here; they come back when their lease expires, and the loop's next claim is
// a new one.
func (fl *fetchLoop) claim(ctx context.Context, source WakeSource) (full bool, rateWait time.Duration, err error) {
	c := fl.c
	want := min(fl.slots-int(fl.active.Load()), fl.batch)
	fl.carried = c.completer.take(fl.carried[:0], BatchSizeMax)
	carried := fl.carried
	defer clear(carried) // let the executions go
	claimedAt := time.Now()
	qctx, cancel := context.WithTimeout(c.workCtx, opTimeout)
	defer cancel()
	buf, completed, err := fl.query(qctx, want, carried)
	fl.scratch = buf[:0]
	defer clear(buf) // drop the payloads from the reused buffer
	if err != nil {
		if len(carried) > 0 {
			c.completer.putBack(carried)
		}
		// Whether the claim committed is unknown. Its jobs are not run: if it did commit,
		// they come back when their lease expires.
		return false, 0, fmt.Errorf("failed to claim jobs from queue %q: %w", fl.queue, err)
	}
	if len(carried) > 0 {
		clear(fl.done)
		for _, id := range completed {
			fl.done[id] = struct{}{}
		}
		c.reportCompletions(carried, fl.done)
	}
	if c.claimHook != nil {
		c.claimHook.HandleClaim(&ClaimEvent{Queue: fl.queue, Wake: source, Asked: want, Claimed: len(buf),
			Completed: len(completed), Duration: time.Since(claimedAt)})
	}
	if ctx.Err() != nil {
		if len(buf) > 0 {
			fl.release(buf)
		}
		return false, 0, nil
	}
	if len(buf) == 0 {
		return false, fl.rateWait(qctx), nil
	}

	exs := make([]execution, len(buf))
	leaseUntil := claimedAt.Add(c.cfg.Lease).UnixNano()
	fl.mu.Lock()
	for i := range exs {
		ex := &exs[i]
		ex.row = buf[i]
		ex.leaseUntil.Store(leaseUntil)
		ex.ctx, ex.cancel = context.WithCancelCause(c.jobsCtx)
		fl.running[ex.row.ID] = ex
	}
	fl.mu.Unlock()
	fl.active.Add(int64(len(exs)))
	c.jobs.Add(len(exs))
	for i := range exs {
		select {
		case fl.idle <- &exs[i]:
		default:
			go fl.worker(&exs[i])
		}
	}
	if len(exs) == want {
		return true, 0, nil
	}
	// Asked after the jobs are started, so the round trip delays none of them.
	return false, fl.rateWait(qctx), nil
}

// query sends the claim, with the carried completions when there are any, and returns the
// claimed rows (in fl.scratch) and the ids completed. On error the rows read so far are
// returned only to be cleared.
func (fl *fetchLoop) query(ctx context.Context, want int, carried []completion) (buf []JobRow, completed []int64, err error) {
	c := fl.c
	buf = fl.scratch[:0]
	var rows pgx.Rows
	if len(carried) == 0 {
		rows, err = c.pool.Query(ctx, claimSQL, c.cfg.ID, int32(want), fl.queues, c.cfg.Lease)
	} else {
		fl.ids, fl.attempts = fl.ids[:0], fl.attempts[:0]
		for _, cm := range carried {
			fl.ids = append(fl.ids, cm.ex.row.ID)
			fl.attempts = append(fl.attempts, int32(cm.ex.row.Attempt))
		}
		rows, err = c.pool.Query(ctx, completeAndClaimSQL, c.cfg.ID, fl.ids, fl.attempts, int32(want), fl.queues,
			c.cfg.Lease)
	}
	if err != nil {
		return buf, nil, err
	}
	defer rows.Close()
	var meta []byte
	for first := true; rows.Next(); first = false {
		if len(carried) > 0 && first {
			// The first row carries completed; with no job claimed it is the only row,
			// and its job columns are NULL.
			if rows.RawValues()[1] == nil {
				if err := rows.Scan(&completed, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil); err != nil {
					return buf, nil, err
				}
				continue
			}
		}
		buf = append(buf, JobRow{})
		r := &buf[len(buf)-1]
		if len(carried) > 0 {
			var head any // completed, on the first row only; nil skips the column
			if first {
				head = &completed
			}
			err = rows.Scan(head, &r.ID, &r.Queue, &r.Kind, &r.EncodedPayload, &r.Attempt, &r.MaxAttempts, &r.Priority,
				&r.RunAt, &r.LeaseExpiresAt, &r.CreatedAt, &meta)
		} else {
			err = rows.Scan(&r.ID, &r.Queue, &r.Kind, &r.EncodedPayload, &r.Attempt, &r.MaxAttempts, &r.Priority,
				&r.RunAt, &r.LeaseExpiresAt, &r.CreatedAt, &meta)
		}
		if err != nil {
			return buf, nil, err
		}
		if meta != nil {
			r.Meta = decodeMeta(meta)
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
	c := fl.c
	batch := &pgx.Batch{}
	for i := range rows {
		batch.Queue(snoozeSQL, rows[i].ID, int32(rows[i].Attempt), time.Duration(0))
	}
	ctx, cancel := context.WithTimeout(c.workCtx, opTimeout)
	defer cancel()
	if err := c.pool.SendBatch(ctx, batch).Close(); err != nil {
		c.logger.Warn("failed to release jobs claimed during shutdown; they run again after their lease expires",
			slog.String("queue", fl.queue), slog.Int("jobs", len(rows)), slog.Any("error", err))
		return
	}
	c.logger.Info("released jobs claimed during shutdown", slog.String("queue", fl.queue), slog.Int("jobs", len(rows)))
}
