package benchresult

import (
	"slices"
	"testing"
	"time"
)

func TestLatencyRecorder(t *testing.T) {
	t.Parallel()
	t0 := time.Now()
	rec := NewLatencyRecorder()
	rec.Commit(1, t0)
	rec.Start(1, t0.Add(3*time.Millisecond))
	rec.Start(1, t0.Add(9*time.Millisecond)) // a retry: the first start counts
	rec.Commit(2, t0.Add(time.Millisecond))
	rec.Start(2, t0) // started before its commit was seen: clamped
	rec.Commit(3, t0)
	rec.Start(3, t0.Add(time.Second)) // after until
	rec.Commit(4, t0)                 // never started

	d, negative := rec.Latencies(t0.Add(10 * time.Millisecond))
	slices.Sort(d)
	if !slices.Equal(d, []time.Duration{0, 3 * time.Millisecond}) || negative != 1 {
		t.Errorf("latencies %v, negative %d", d, negative)
	}
	if all, _ := rec.Latencies(time.Time{}); len(all) != 3 {
		t.Errorf("without until: %v", all)
	}
}
