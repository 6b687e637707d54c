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
// per queue and cooldown window notify inline, passes notify => false to the others, and
// when the window ends, once every skipped enqueue has returned, sends one jobs_notify for
// the queue in a transaction of its own if any of them may have committed. An idle worker
// so hears about every job within the cooldown plus the enqueue's and the notification's
// round trips.
//
// Only enqueues whose commit the driver performs take part: those given a *pgxpool.Pool.
// A pgx.Tx commits when its owner says so, after the enqueue returns, so a window could end
// (and its notification be sent) before the job is visible; a *pgx.Conn cannot be used from
// the goroutine that sends the window's notification. Both always notify inline.

// notifyThrottle holds the open windows of every (pool, queue) this process enqueued to.
type notifyThrottle struct {
	mu      sync.Mutex
	windows map[notifyKey]*notifyWindow
	// send sends the standalone notification of a window; replaced by tests to count.
	send func(pool *pgxpool.Pool, queue string)
}

type notifyKey struct {
	pool  *pgxpool.Pool
	queue string
}

// notifyWindow is one cooldown window of one queue.
type notifyWindow struct {
	key      notifyKey
	cooldown time.Duration
	ended    bool // its timer fired; the queue's next window, if any, is open
	inflight int  // skipped enqueues that have not returned
	pending  bool // a skipped enqueue returned (and may have committed) since the last notification
}

// processNotifyThrottle is the throttle of every Enqueue and EnqueueMany of this process.
var processNotifyThrottle = &notifyThrottle{windows: map[notifyKey]*notifyWindow{}, send: sendJobsNotify}

// sendJobsNotify wakes the workers of queue in a transaction of its own. A failure is not
// reported to anyone (the enqueues it covers have returned long ago): the workers' poll
// finds the jobs then, as it does when a notification is lost.
func sendJobsNotify(pool *pgxpool.Pool, queue string) {
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	_, _ = pool.Exec(ctx, notifySQL, queue)
}

// skip decides whether an enqueue of the given queues (those with a job ready now) may pass
// notify => false: when every one of them has a window open. It then returns the windows
// the enqueue joined, to be passed to done once it returns. Otherwise the enqueue notifies
// inline and opens a window for each queue that has none. cooldowns gives each queue's
// window length; a negative one makes the enqueue notify inline without opening a window.
func (t *notifyThrottle) skip(pool *pgxpool.Pool, queues []string, cooldowns []time.Duration) (joined []*notifyWindow, ok bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	all := true
	for i, q := range queues {
		if cooldowns[i] < 0 || t.windows[notifyKey{pool, q}] == nil {
			all = false
			break
		}
	}
	if all {
		joined = make([]*notifyWindow, len(queues))
		for i, q := range queues {
			w := t.windows[notifyKey{pool, q}]
			w.inflight++
			joined[i] = w
		}
		return joined, true
	}
	for i, q := range queues {
		k := notifyKey{pool, q}
		// A queue whose window is open keeps it: the window's own notification covers the
		// enqueues it skipped, whatever becomes of this one.
		if cooldowns[i] >= 0 && t.windows[k] == nil {
			t.open(k, cooldowns[i])
		}
	}
	return nil, false
}

// open starts a window of k now. Callers hold t.mu.
func (t *notifyThrottle) open(k notifyKey, cooldown time.Duration) {
	w := &notifyWindow{key: k, cooldown: cooldown}
	t.windows[k] = w
	time.AfterFunc(cooldown, func() { t.end(w) })
}

// done records that an enqueue that joined windows returned.
func (t *notifyThrottle) done(joined []*notifyWindow) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, w := range joined {
		w.inflight--
		// Even a failed call may have committed (the connection can break after the
		// commit), and a needless notification costs one wake-up.
		w.pending = true
		t.settle(w)
	}
}

// end is a window's timer. A window that skipped enqueues is followed at once by the next
// one, so that the queue's enqueues go on skipping the NOTIFY lock while it is busy: a
// busy queue gets one notification per cooldown, its windows' own. A quiet window closes,
// and the queue's next enqueue notifies inline.
func (t *notifyThrottle) end(w *notifyWindow) {
	t.mu.Lock()
	defer t.mu.Unlock()
	w.ended = true
	if t.windows[w.key] == w {
		if w.pending || w.inflight > 0 {
			t.open(w.key, w.cooldown)
		} else {
			delete(t.windows, w.key)
		}
	}
	t.settle(w)
}

// settle sends the window's notification once it has ended and every enqueue it skipped
// has returned (a notification sent before a commit would wake workers that cannot see the
// job yet). Callers hold t.mu.
func (t *notifyThrottle) settle(w *notifyWindow) {
	if !w.ended || w.inflight > 0 || !w.pending {
		return
	}
	w.pending = false
	go t.send(w.key.pool, w.key.queue)
}
