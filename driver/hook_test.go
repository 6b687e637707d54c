package driver

import "testing"

// TestEventOutcome: the label each event gets in the metrics; a failure whose job ended
// cancelled (superseded by an on_duplicate 'replace' while it ran) is not a retry.
func TestEventOutcome(t *testing.T) {
	for _, c := range []struct {
		kind  EventKind
		state JobState
		want  string
	}{
		{EventCompleted, JobStateDone, "done"},
		{EventFailed, JobStateQueued, "retried"},
		{EventFailed, JobStateDead, "dead"},
		{EventFailed, JobStateCancelled, "cancelled"},
		{EventSnoozed, JobStateQueued, "snoozed"},
		{EventCancelled, JobStateCancelled, "cancelled"},
		{EventLost, "", "fenced"},
		{EventStarted, JobStateRunning, ""},
	} {
		e := &Event{Kind: c.kind, State: c.state}
		if got := e.Outcome(); got != c.want {
			t.Errorf("Event{Kind: %v, State: %q}.Outcome() = %q, want %q", c.kind, c.state, got, c.want)
		}
	}
}
