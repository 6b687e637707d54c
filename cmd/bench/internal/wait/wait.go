// Package wait is how cmd/bench's scenarios and its Go peer harnesses wait: a sleep that
// ends with its context, and polling for a condition the program keeps in memory, so that
// skiplock and its peers are timed the same way.
package wait

import (
	"context"
	"fmt"
	"time"
)

// pollInterval is how often Until checks its condition: short next to any scenario, and
// cheap, since the condition reads counters in memory rather than the database.
const pollInterval = 500 * time.Microsecond

// Sleep waits d, or until ctx ends, and returns ctx.Err() in that case; when d <= 0 it
// returns ctx.Err() at once.
func Sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// Until polls cond every half millisecond until it holds, ctx ends or timeout passes.
func Until(ctx context.Context, cond func() bool, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			return fmt.Errorf("timed out after %s", timeout)
		}
		if err := Sleep(ctx, pollInterval); err != nil {
			return err
		}
	}
	return nil
}
