package arrival

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"
)

// TestRunKeepsTheSchedule: 200 jobs/s for 250 ms is 50 arrivals, each enqueued once, none
// before it is due.
func TestRunKeepsTheSchedule(t *testing.T) {
	t.Parallel()
	start := time.Now().Add(10 * time.Millisecond)
	var mu sync.Mutex
	seen := map[int64]bool{}
	early := 0
	res, err := Run(context.Background(), start, 250*time.Millisecond, 200, 4, func(_ context.Context, k int64) error {
		now := time.Now()
		mu.Lock()
		defer mu.Unlock()
		if seen[k] {
			t.Errorf("arrival %d enqueued twice", k)
		}
		seen[k] = true
		if now.Before(start.Add(time.Duration(k) * 5 * time.Millisecond)) {
			early++
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// On a loaded machine a producer may wake after the end and drop its arrival (8 of 50
	// at load 17 on 2 cores), so only half are required; duplicates, early starts and
	// arrivals past the end are never allowed.
	if res.Due != 50 || res.Enqueued < 25 || int(res.Enqueued) != len(seen) || early != 0 {
		t.Errorf("due %d, enqueued %d, distinct %d, early %d; want 50, at least 25, as many, 0", res.Due, res.Enqueued, len(seen), early)
	}
	for k := range seen {
		if k < 0 || k >= 50 {
			t.Errorf("arrival %d is past the end", k)
		}
	}
}

// TestRunStopsAtTheEnd: a producer that cannot keep up starts no enqueue after the end,
// and the shortfall shows as Due - Enqueued and as lag.
func TestRunStopsAtTheEnd(t *testing.T) {
	t.Parallel()
	start := time.Now()
	res, err := Run(context.Background(), start, 100*time.Millisecond, 1000, 1, func(context.Context, int64) error {
		time.Sleep(10 * time.Millisecond)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// At most one enqueue per 10 ms sleep fits before the end (fewer on a loaded machine),
	// and the last one started before the end returns within one more sleep.
	if res.Due != 100 || res.Enqueued < 1 || res.Enqueued > 11 || res.MaxLag < 30*time.Millisecond {
		t.Errorf("due %d, enqueued %d, max lag %s", res.Due, res.Enqueued, res.MaxLag)
	}
	if el := time.Since(start); el > 250*time.Millisecond {
		t.Errorf("Run returned %s after the start of a 100 ms schedule", el)
	}
}

func TestRunReturnsTheFirstError(t *testing.T) {
	t.Parallel()
	boom := errors.New("boom")
	_, err := Run(context.Background(), time.Now(), time.Second, 1000, 3, func(_ context.Context, k int64) error {
		if k == 5 {
			return boom
		}
		return nil
	})
	if !errors.Is(err, boom) {
		t.Errorf("err = %v, want boom", err)
	}
}
