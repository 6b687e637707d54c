package driver

import "time"

// EventKind says what happened to a job.
type EventKind int

const (
	// EventStarted: the handler is about to be called.
	EventStarted EventKind = iota + 1
	// EventCompleted: the job is done (the database confirmed it).
	EventCompleted
	// EventFailed: the attempt failed (error, panic, timeout, undecodable payload excepted);
	// Event.State is JobStateQueued when it will be retried, JobStateDead when not, and
	// JobStateCancelled when an on_duplicate 'replace' gave its unique key to a newer job
	// while it ran (the newer job does its work).
	EventFailed
	// EventSnoozed: the job went back to its queue without spending an attempt, because
	// the handler returned Snooze, or because shutdown interrupted it.
	EventSnoozed
	// EventCancelled: the job was cancelled (the handler returned Cancel, its payload
	// could not be decoded, or the database refused the result it recorded).
	EventCancelled
	// EventLost: the job was no longer held when its outcome was to be recorded (its lease
	// expired and it was taken back, or it was cancelled), so the outcome was dropped: the
	// database's fencing refused it. The metrics packages call this outcome "fenced".
	EventLost
)

func (k EventKind) String() string {
	switch k {
	case EventStarted:
		return "started"
	case EventCompleted:
		return "completed"
	case EventFailed:
		return "failed"
	case EventSnoozed:
		return "snoozed"
	case EventCancelled:
		return "cancelled"
	case EventLost:
		return "lost"
	}
	return "unknown"
}

// Event is one thing that happened to a job, for a [Hook].
type Event struct {
	Kind EventKind

	// Job is the job as claimed. It must not be modified or kept after the hook returns.
	Job *JobRow

	// State is the job's state after the event: running for EventStarted, done, queued or
	// dead, queued, cancelled, and "" for EventLost.
	State JobState

	// Wait is how long the job waited to start: from its run_at (by the database's clock)
	// to the start (by this machine's clock). Set for EventStarted only.
	Wait time.Duration

	// Duration is how long the handler ran. Zero for EventStarted.
	Duration time.Duration

	// Err is the handler's error (or the recovered panic, the decode error, the refusal of
	// its result) for
	// EventFailed, EventSnoozed and EventCancelled; ErrNotHeld for EventLost.
	Err error
}

// Hook receives job events, for metrics. HandleEvent is called synchronously from the
// goroutine that ran the job or from the completer goroutine, concurrently for different
// jobs: it must be safe for concurrent use and return quickly, as it runs on the job's hot
// path.
type Hook interface {
	HandleEvent(e *Event)
}

// HookFunc adapts a function to a Hook.
type HookFunc func(e *Event)

// HandleEvent calls f(e).
func (f HookFunc) HandleEvent(e *Event) { f(e) }

// Outcome names how the job's run ended, as the metrics packages label it: "done"
// (EventCompleted), "retried", "dead" or "cancelled" (EventFailed, by State: a job superseded
// by a replace is cancelled), "cancelled", "snoozed", and
// "fenced" for EventLost (the database refused the outcome: the job was no longer held).
// It returns "" for EventStarted.
func (e *Event) Outcome() string {
	switch e.Kind {
	case EventCompleted:
		return "done"
	case EventFailed:
		switch e.State {
		case JobStateDead:
			return "dead"
		case JobStateCancelled:
			// A job superseded by an on_duplicate 'replace' while it ran is cancelled
			// instead of retried.
			return "cancelled"
		}
		return "retried"
	case EventSnoozed:
		return "snoozed"
	case EventCancelled:
		return "cancelled"
	case EventLost:
		return "fenced"
	}
	return ""
}
