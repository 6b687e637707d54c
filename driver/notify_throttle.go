package driver

import (
	"context"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// NotifyCooldownDefault is how long, after an enqueue through a *pgxpool.Pool wakes the
// workers of a queue, further enqueues of that queue from this process send no notification
// of their own; one standalone notification at the end of the window covers them. See
// [EnqueueOpts].NotifyCooldown.
const NotifyCooldownDefault = 2 * time.Millisecond

// The notify throttle. PostgreSQL takes one cluster-wide lock at the commit of every
// transaction that called NOTIFY and holds it across the WAL flush, so enqueues that each
// notify commit one at a time (docs/performance.md). The driver therefore lets one enqueue
// per queue and cooldown window notify inline and passes notify => false to the others;
// when a window ends, it sends one jobs_notify for the queue, in a transaction of its own,
// if a skipped enqueue returned (and so committed) since the last notification. An idle
// worker so hears about every job within the cooldown (plus one round trip) of its
// enqueue's return.
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
	// send sends the standalone notification of a window; replaced by tests to count.
	send func(pool *pgxpool.Pool, queue string)
}

type notifyKey struct {
	pool  *pgxpool.Pool
	queue string
}

// queueNotify is one queue's throttle. While a window is open, enqueues skip the
// notification. A skipped enqueue's commit happened before it returned, so any notification
// sent after its return covers its job: the window that is open when it returns sends one
// at its end. A window that ends with skipped enqueues outstanding or covered is followed
// at once by the next, so the queue always has an open window while it needs one.
type queueNotify struct {
	cooldown time.Duration // of the window being open, set by the enqueue that opened it
	open     bool          // a window is open: its timer is armed
	inflight int           // skipped enqueues that have not returned
	pending  bool          // a skipped enqueue returned since the last notification was sent
}

// processNotifyThrottle is the throttle of every Enqueue and EnqueueMany of this process.
var processNotifyThrottle = &notifyThrottle{queues: map[notifyKey]*queueNotify{}, send: sendJobsNotify}

// sendJobsNotify wakes the workers of queue in a transaction of its own. A failure is not
// reported to anyone (the enqueues it covers have returned): the workers' poll finds the
// jobs then, as it does when a notification is lost.
func sendJobsNotify(pool *pgxpool.Pool, queue string) {
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	_, _ = pool.Exec(ctx, notifySQL, queue)
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
		if st := t.queues[notifyKey{pool, q}]; cooldowns[i] < 0 || st == nil || !st.open {
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
		k := notifyKey{pool, q}
		st := t.queues[k]
		if st == nil {
			st = &queueNotify{}
			t.queues[k] = st
		}
		// A queue whose window is open keeps it: the window's own notification covers the
		// enqueues it skipped, whatever becomes of this one.
		if !st.open {
			st.cooldown = cooldowns[i]
			t.open(k, st)
		}
	}
	return nil, false
}

// open arms the timer of a new window of k. Callers hold t.mu.
func (t *notifyThrottle) open(k notifyKey, st *queueNotify) {
	st.open = true
	time.AfterFunc(st.cooldown, func() { t.end(k, st) })
}

// done records that an enqueue that skipped its notification returned.
func (t *notifyThrottle) done(joined []*queueNotify) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, st := range joined {
		st.inflight--
		// Even a failed call may have committed (the connection can break after the
		// commit), and a needless notification costs one wake-up.
		st.pending = true
	}
}

// end is a window's timer: it sends the queue's notification if a skipped enqueue returned
// since the last one, and keeps a window open while skipped enqueues are still running or
// were just covered (the queue is busy: its next enqueues skip too). A quiet queue's state
// is dropped, and its next enqueue notifies inline.
func (t *notifyThrottle) end(k notifyKey, st *queueNotify) {
	t.mu.Lock()
	defer t.mu.Unlock()
	sent := st.pending
	if sent {
		st.pending = false
		go t.send(k.pool, k.queue)
	}
	switch {
	case sent || st.inflight > 0:
		t.open(k, st)
	default:
		st.open = false
		delete(t.queues, k)
	}
}
