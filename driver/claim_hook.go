package driver

import "time"

// WakeSource says why a fetch loop claimed.
type WakeSource int

const (
	// WakeStart: the first claim of a fetch loop, when the client starts (jobs may have
	// been enqueued while nobody listened).
	WakeStart WakeSource = iota + 1
	// WakeNotify: a notification on the jobs_ready channel (or the listener reconnecting,
	// after which notifications may have been missed).
	WakeNotify
	// WakePoll: the poll timer (Config.PollInterval), or the end of a rate limit's wait.
	WakePoll
	// WakeBacklog: the previous claim got every job it asked for, so more are likely
	// waiting; the loop claims again as soon as slots free up.
	WakeBacklog
)

func (s WakeSource) String() string {
	switch s {
	case WakeStart:
		return "start"
	case WakeNotify:
		return "notify"
	case WakePoll:
		return "poll"
	case WakeBacklog:
		return "backlog"
	}
	return "unknown"
}

// ClaimEvent is one claim for a fetch loop that returned, for a [ClaimHook]: the loop's own
// jobs_claim, or a batch of completions sent with a claim for the loop
// (jobs_complete_and_claim, when the loop had free slots and reason to claim).
// Claims that failed are not reported (the client logs them).
type ClaimEvent struct {
	// Queue is the fetch loop's queue.
	Queue string

	// Wake is what made the loop claim. A claim retried after an error keeps the source
	// of the first try.
	Wake WakeSource

	// Asked is how many jobs the claim asked for: the free slots, at most the batch size.
	Asked int

	// Claimed is how many jobs it got (0 to Asked). A paused or fully limited queue's
	// claims, and those finding nothing ready, get 0.
	Claimed int

	// Completed is how many job completions the call recorded before it claimed, when a
	// completion batch claimed for the loop (Wake is then why the loop wanted to claim);
	// 0 for the loop's own jobs_claim.
	Completed int

	// Duration is the claim's round trip.
	Duration time.Duration
}

// ClaimHook is an optional interface of a [Hook]: when Config.Hook also implements it, it
// receives a ClaimEvent after every claim. HandleClaim is called from the queue's fetch
// loop goroutine or the completer's, concurrently, before the claimed jobs start: it must
// be safe for concurrent use and return quickly.
type ClaimHook interface {
	HandleClaim(e *ClaimEvent)
}
