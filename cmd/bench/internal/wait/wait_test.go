package wait

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func TestSleep(t *testing.T) {
	t.Parallel()
	if err := Sleep(context.Background(), time.Millisecond); err != nil {
		t.Errorf("Sleep: %v", err)
	}
	if err := Sleep(context.Background(), -time.Second); err != nil {
		t.Errorf("Sleep of a negative time: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := Sleep(ctx, time.Hour); !errors.Is(err, context.Canceled) {
		t.Errorf("Sleep with an ended context: %v", err)
	}
	if err := Sleep(ctx, 0); !errors.Is(err, context.Canceled) {
		t.Errorf("Sleep(0) with an ended context: %v", err)
	}
}

func TestUntil(t *testing.T) {
	t.Parallel()
	var n atomic.Int64
	go func() {
		for range 3 {
			time.Sleep(time.Millisecond)
			n.Add(1)
		}
	}()
	if err := Until(context.Background(), func() bool { return n.Load() >= 3 }, 10*time.Second); err != nil {
		t.Errorf("Until: %v", err)
	}
	if err := Until(context.Background(), func() bool { return false }, 2*time.Millisecond); err == nil ||
		!strings.Contains(err.Error(), "timed out after 2ms") {
		t.Errorf("Until of a condition that never holds: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := Until(ctx, func() bool { return false }, time.Hour); !errors.Is(err, context.Canceled) {
		t.Errorf("Until with an ended context: %v", err)
	}
}
