package driver

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// NotifyCooldownDefault is how long, after an enqueue through a *pgxpool.Pool wakes the
// workers of a queue, further enqueues of that queue from this process send no notification
// of their own; standalone notifications, at most one per cooldown, cover them. See
// [EnqueueOpts].NotifyCooldown.
const NotifyCooldownDefault = 2 * time.Millisecond

// The notify throttle. PostgreSQL takes one cluster-wide lock at the commit of every
// transaction that called NOTIFY and holds it across the WAL flush, so enqueues that each
// notify commit one at a time (docs/performance.md). The driver therefore lets one enqueue
// per queue and cooldown window notify inline and passes notify => false to the others;
// once they return (and so have committed) it sends jobs_notify for the queue, in a
// transaction of its own, at once if no notification went out within the cooldown, else
// when the window ends. An idle worker so hears about every job within the cooldown (plus
// one round trip) of its enqueue's return.
//
// Only enqueues whose commit the driver performs take part: those given a *pgxpool.Pool.
// A pgx.Tx commits when its owner says so, after the enqueue returns, so a window could end
// (and its notification be sent) before the job is visible; a *pgx.Conn cannot be used from
// the goroutine that sends the window's notification. Both always notify inline.

// notifyThrottle holds the state of every (pool, queue) this process enqueued to whose
// window is open or whose skipped enqueues have not all been covered by a notification.
type notifyThrottle struct {
	mu     sync.Mutex
	queues map[notifyKey]*queueNotify
	sends  int // deferred notifications being sent (FlushNotify waits for them)
}

type notifyKey struct {
	pool  *pgxpool.Pool
	queue string
}

// queueNotify is one queue's throttle; while it exists, the queue's enqueues skip the
// notification. A skipped enqueue's commit happened before it returned, so any notification
// sent after its return covers its job. Notifications are at least a cooldown apart: each
// opens a window, and an enqueue that returns inside one is covered by the notification
// sent when the window ends. A window that ends with nothing to send while skipped enqueues
// are still running leaves the queue idle: the next of them to return sends at once.
type queueNotify struct {
	key      notifyKey
	cooldown time.Duration // set by the enqueue that notified inline first
	idle     bool          // no window is open: the next return sends at once
	inflight int           // skipped enqueues that have not returned
	pending  bool          // a skipped enqueue returned inside the open window
}

// processNotifyThrottle is the throttle of every Enqueue and EnqueueMany of this process.
var processNotifyThrottle = &notifyThrottle{queues: map[notifyKey]*queueNotify{}}

// sendJobsNotify wakes the workers of queue in a transaction of its own. When the pool
// cannot (its owner closed it once the enqueues returned, as a short-lived program does,
// or its connection broke) it sends the notification on a connection of its own, made
// from the pool's configuration: the enqueues it covers have returned, so their owner may
// well have closed the pool already. A failure is not reported to anyone: the workers'
// poll finds the jobs then, as it does when a notification is lost.
func sendJobsNotify(pool *pgxpool.Pool, queue string) {
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	_, err := pool.Exec(ctx, notifySQL, queue)
	if err == nil || ctx.Err() != nil || serverRefused(err) {
		return
	}
	_ = sendJobsNotifyAlone(ctx, pool.Config(), queue)
}

// serverRefused reports whether the server answered err (no privilege, say): another
// connection would get the same answer, so it is not worth one.
func serverRefused(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr)
}

// sendJobsNotifyAlone sends jobs_notify on a new connection made as the pool makes its
// own (its BeforeConnect and AfterConnect hooks included, which may set the role or
// search_path), and closes it.
func sendJobsNotifyAlone(ctx context.Context, cfg *pgxpool.Config, queue string) error {
	connCfg := cfg.ConnConfig
	if cfg.BeforeConnect != nil {
		if err := cfg.BeforeConnect(ctx, connCfg); err != nil {
			return err
		}
	}
	conn, err := pgx.ConnectConfig(ctx, connCfg)
	if err != nil {
		return err
	}
	defer func() { _ = conn.Close(context.Background()) }()
	if cfg.AfterConnect != nil {
		if err := cfg.AfterConnect(ctx, conn); err != nil {
			return err
		}
	}
	_, err = conn.Exec(ctx, notifySQL, queue)
	return err
}

// skip decides whether an enqueue of the given queues (those with a job ready now) may pass
// notify => false: when every one of them has a window open. Then the enqueue must call
// done with the returned states once it returns. Otherwise the enqueue notifies inline and
// opens a window for each queue that has none. cooldowns gives each queue's window length;
// a negative one makes the enqueue notify inline without opening a window.
func (t *notifyThrottle) skip(pool *pgxpool.Pool, queues []string, cooldowns []time.Duration) (joined []*queueNotify, ok bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	all := true
	for i, q := range queues {
		if cooldowns[i] < 0 || t.queues[notifyKey{pool, q}] == nil {
			all = false
			break
		}
	}
	if all {
		joined = make([]*queueNotify, len(queues))
		for i, q := range queues {
			st := t.queues[notifyKey{pool, q}]
			st.inflight++
			joined[i] = st
		}
		return joined, true
	}
	for i, q := range queues {
		if cooldowns[i] < 0 {
			continue
		}
		// A queue that has a throttle keeps it: its own notifications cover the enqueues
		// it skipped, whatever becomes of this one.
		k := notifyKey{pool, q}
		if t.queues[k] == nil {
			st := &queueNotify{key: k, cooldown: cooldowns[i]}
			t.queues[k] = st
			t.open(st)
		}
	}
	return nil, false
}

// send sends a window's notification in a goroutine of its own. Callers hold t.mu.
func (t *notifyThrottle) send(k notifyKey) {
	t.sends++
	go func() {
		sendJobsNotify(k.pool, k.queue)
		t.mu.Lock()
		t.sends--
		t.mu.Unlock()
	}()
}

// open arms the timer of a new window. Callers hold t.mu.
func (t *notifyThrottle) open(st *queueNotify) {
	st.idle = false
	time.AfterFunc(st.cooldown, func() { t.end(st) })
}

// done records that an enqueue that skipped its notification returned.
func (t *notifyThrottle) done(joined []*queueNotify) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, st := range joined {
		st.inflight--
		// Even a failed call may have committed (the connection can break after the
		// commit), and a needless notification costs one wake-up.
		if st.idle {
			t.send(st.key)
			t.open(st)
		} else {
			st.pending = true
		}
	}
}

// end is a window's timer: it sends the queue's notification if a skipped enqueue returned
// inside the window, which opens the next window. Otherwise the queue goes idle while
// skipped enqueues are still running, and a quiet queue's throttle is dropped: its next
// enqueue notifies inline.
func (t *notifyThrottle) end(st *queueNotify) {
	t.mu.Lock()
	defer t.mu.Unlock()
	switch {
	case st.pending:
		st.pending = false
		t.send(st.key)
		t.open(st)
	case st.inflight > 0:
		st.idle = true
	default:
		delete(t.queues, st.key)
	}
}

// FlushNotify sends now, and waits for, the notifications that the notify throttle owes
// for enqueues that have returned (those that passed notify => false inside a window that
// has not ended yet). A program that enqueues through a *pgxpool.Pool and exits right away
// (a command-line tool, a job in a cron) calls it before exiting: the throttle sends its
// notifications from timers, which die with the process, and the jobs would then wait for
// the workers' poll. Long-running processes need not call it, and a Client's Run does it
// for its own pool before it returns. It returns the errors of the notifications it could
// not send, joined.
func FlushNotify(ctx context.Context) error {
	return processNotifyThrottle.flush(ctx, nil)
}

// flush sends the notification of every queue (of pool, or of every pool when nil) with a
// skipped enqueue that returned inside its open window. The window stays open, so the
// enqueues that follow still skip theirs; a flush adds at most one notification to it.
func (t *notifyThrottle) flush(ctx context.Context, pool *pgxpool.Pool) error {
	t.mu.Lock()
	var owed []notifyKey
	for k, st := range t.queues {
		if st.pending && (pool == nil || k.pool == pool) {
			st.pending = false
			owed = append(owed, k)
		}
	}
	t.mu.Unlock()
	var errs []error
	for _, k := range owed {
		if _, err := k.pool.Exec(ctx, notifySQL, k.queue); err != nil {
			if ctx.Err() != nil || serverRefused(err) {
				errs = append(errs, fmt.Errorf("failed to notify queue %q: %w", k.queue, err))
				continue
			}
			if err := sendJobsNotifyAlone(ctx, k.pool.Config(), k.queue); err != nil {
				errs = append(errs, fmt.Errorf("failed to notify queue %q: %w", k.queue, err))
			}
		}
	}
	// Those a window's end (or a return after it) started are sent by then too.
	for {
		t.mu.Lock()
		n := t.sends
		t.mu.Unlock()
		if n == 0 {
			break
		}
		if !sleepCtx(ctx, time.Millisecond) {
			errs = append(errs, fmt.Errorf("failed to wait for %d notifications: %w", n, ctx.Err()))
			break
		}
	}
	return errors.Join(errs...)
}
