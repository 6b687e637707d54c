package benchresult

import (
	"slices"
	"testing"
	"time"
)

func TestSummarize(t *testing.T) {
	t.Parallel()

	t.Run("NearestRank", func(t *testing.T) {
		t.Parallel()
		// 1..100 ms, shuffled: the p-th percentile of 100 values is the p-th smallest.
		var d []time.Duration
		for i := 100; i >= 1; i-- {
			d = append(d, time.Duration(i)*time.Millisecond)
		}
		s := Summarize(d)
		checks := map[string][2]time.Duration{
			"min": {s.Min, 1 * time.Millisecond},
			"p50": {s.P50, 50 * time.Millisecond},
			"p95": {s.P95, 95 * time.Millisecond},
			"p99": {s.P99, 99 * time.Millisecond},
			"max": {s.Max, 100 * time.Millisecond},
			"avg": {s.Avg, 50500 * time.Microsecond},
		}
		for name, c := range checks {
			if c[0] != c[1] {
				t.Errorf("%s = %s, want %s", name, c[0], c[1])
			}
		}
		if s.N != 100 {
			t.Errorf("N = %d", s.N)
		}
	})

	t.Run("SmallSamples", func(t *testing.T) {
		t.Parallel()
		one := Summarize([]time.Duration{7})
		if one.P50 != 7 || one.P99 != 7 || one.Max != 7 {
			t.Errorf("one value: %+v", one)
		}
		// Three values: p50 is the 2nd (ceil(1.5)), p95 and p99 the 3rd.
		three := Summarize([]time.Duration{30, 10, 20})
		if three.P50 != 20 || three.P95 != 30 || three.P99 != 30 {
			t.Errorf("three values: %+v", three)
		}
		if empty := Summarize(nil); empty.N != 0 {
			t.Errorf("empty: %+v", empty)
		}
	})

	t.Run("DoesNotReorderInput", func(t *testing.T) {
		t.Parallel()
		d := []time.Duration{3, 1, 2}
		Summarize(d)
		if !slices.Equal(d, []time.Duration{3, 1, 2}) {
			t.Errorf("input reordered: %v", d)
		}
	})
}

func TestMS(t *testing.T) {
	t.Parallel()
	for d, want := range map[time.Duration]float64{
		0:                         0,
		1500 * time.Microsecond:   1.5,
		1234567 * time.Nanosecond: 1.235,
		2 * time.Second:           2000,
	} {
		if got := MS(d); got != want {
			t.Errorf("MS(%s) = %v, want %v", d, got, want)
		}
	}
}
